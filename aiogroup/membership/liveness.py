"""Liveness: the session a member proves to the coordinator and the heartbeats that keep it.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). Like the machine it never reads a clock: every
method takes the ``now`` it needs. Two rules live here:

- **KAFKA-7026, acting only within a proven session.** The coordinator restarts a member's
  session when it handles a request of that member; a request sent at ``t`` and answered in a
  way that shows the member still in its generation proves the session ran until ``t`` plus
  the session timeout (:meth:`Liveness.prove`). After that deadline, with no newer proof, the
  member may act on nothing it owns (:meth:`Liveness.may_act_on`): the coordinator may have
  expired it, and its partitions may be elsewhere.
- **The heartbeat schedule** (:meth:`Liveness.heartbeat_due`): one heartbeat per interval,
  every tenth of it for one interval after a cooperative SyncGroup (the *prompt* pace), and
  every hundredth for the first tenth after an assignment marked FOLLOW_UP (the *fast* pace).

Nothing here is specific to the classic protocol's requests: the KIP-848 machine
(:mod:`~aiogroup.membership.consumer_machine`) proves its session with ConsumerGroupHeartbeat
answers in the same way, at the interval the broker gives (``interval`` is set from each
answer) and at once where it has news (:meth:`Liveness.heartbeat_now`).
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["Liveness"]

T = TypeVar("T")


class Liveness:
    """A member's session proof and heartbeat schedule. Times in seconds on the ``now`` clock.

    ``session_timeout_ms``, ``heartbeat_interval_ms`` and ``retry_backoff_ms`` as the member's
    configuration (milliseconds, as Kafka's configs).
    """

    __slots__ = (
        "_blind",
        "_fast_until",
        "_join_sent_at",
        "_lapse_noted",
        "_last_ok",
        "_last_sent",
        "_prompt_until",
        "_proof_at",
        "_sent_at",
        "_sync_sent_at",
        "interval",
        "retry_backoff",
        "session_timeout",
    )

    def __init__(
        self, *, session_timeout_ms: int, heartbeat_interval_ms: int, retry_backoff_ms: int
    ) -> None:
        self.session_timeout = session_timeout_ms / 1000
        self.interval = heartbeat_interval_ms / 1000
        self.retry_backoff = retry_backoff_ms / 1000
        #: When the last heartbeat was sent, as the schedule counts it (moved to ask for one
        #: sooner: a fresh coordinator, a retry after the backoff).
        self._last_sent = 0.0
        #: Heartbeats sent before this time go out every tenth of the interval (a cooperative
        #: SyncGroup) ...
        self._prompt_until = 0.0
        #: ... and before this one every hundredth (an assignment marked FOLLOW_UP).
        self._fast_until = 0.0
        #: The last heartbeat answer that kept the session (or a fresh coordinator, a SyncGroup).
        self._last_ok = 0.0
        # KAFKA-7026: when the requests now answered were sent (the coordinator handled them
        # later, so a send time is a safe lower bound of when it last saw us alive).
        self._sent_at = 0.0
        self._join_sent_at = 0.0
        self._sync_sent_at = 0.0
        self._proof_at: float | None = None
        self._lapse_noted = False
        # The coordinator was lost and found again since the last answer that only a loaded
        # group gives: Kafka's coordinator answers Heartbeat NONE without looking while it
        # loads the group (GroupCoordinator.handleHeartbeat, COORDINATOR_LOAD_IN_PROGRESS).
        self._blind = False

    # -- the session proof (KAFKA-7026) ------------------------------------------------------------

    @property
    def session_deadline(self) -> float | None:
        """The send time of the latest proving request plus the session timeout (``None``: no
        proof, outside a generation)."""
        if self._proof_at is None:
            return None
        return self._proof_at + self.session_timeout

    def may_act_on(self, now: float, partitions: frozenset[T]) -> frozenset[T]:
        """``partitions`` while ``now`` is before :attr:`session_deadline`, else nothing."""
        deadline = self.session_deadline
        if deadline is None or now >= deadline:
            return frozenset()
        return partitions

    def prove(self, sent_at: float, *, blind: bool = False) -> None:
        """The coordinator answered a request sent at ``sent_at`` in a way that shows this member
        in its generation: its session ran at least until ``sent_at`` + session timeout.

        ``blind``: the answer was a Heartbeat NONE, which Kafka gives to anyone while it loads
        the group after a coordinator change; then only every other answer counts."""
        if not blind:
            self._blind = False
        if self._proof_at is None or sent_at > self._proof_at:
            self._proof_at = sent_at
            self._lapse_noted = False

    def forget_proof(self) -> None:
        """The generation is over (reset, fatal, left): nothing proves a session now."""
        self._proof_at = None

    def lapse_to_note(self) -> float | None:
        """The session deadline, until :meth:`note_lapse` has noted it passing."""
        return None if self._lapse_noted else self.session_deadline

    def note_lapse(self, now: float) -> bool:
        """True once, at the first call at or after the session deadline (to log it)."""
        lapse = self.lapse_to_note()
        if lapse is None or now < lapse:
            return False
        self._lapse_noted = True
        return True

    # -- requests that prove it --------------------------------------------------------------------

    def join_sent(self, now: float) -> None:
        self._join_sent_at = now

    def join_answered(self) -> None:
        """A JoinGroup answered without error: the member is in the generation it names."""
        self.prove(self._join_sent_at)

    def sync_sent(self, now: float) -> None:
        self._sync_sent_at = now

    def sync_answered(self) -> None:
        """A SyncGroup answered without error."""
        self.prove(self._sync_sent_at)

    # -- the heartbeat schedule --------------------------------------------------------------------

    def heartbeat_due(self) -> float:
        """When the next heartbeat is due.

        Normally one interval after the last one. For one interval after a SyncGroup under
        the COOPERATIVE protocol, every tenth of it: KIP-429 splits a rebalance that moves
        partitions in two rounds. In round one the members that give partitions up revoke
        them and rejoin at once; the others learn of round two only from a heartbeat answered
        REBALANCE_IN_PROGRESS, and until round two the moved partitions have no owner. With
        heartbeats at the usual pace round two starts up to a whole interval late; prompt
        heartbeats start it within a tenth. It costs about ten more Heartbeat requests per
        member per cooperative rebalance, which every broker answers as any other.

        When an aiogroup leader marked the assignment FOLLOW_UP (it withheld partitions, so
        round two is coming as soon as their owner has revoked them), every hundredth of the
        interval for the first tenth of it: ten more requests, in rounds that move partitions.
        """
        interval = self.interval
        paces = ((interval / 100, self._fast_until), (interval / 10, self._prompt_until))
        for pace, until in paces:
            if self._last_sent + pace <= until + pace / 2:  # (half a step for rounding)
                return self._last_sent + pace
        return self._last_sent + interval

    def session_expiry(self) -> float:
        """When the session expires without a heartbeat answer that keeps it (Java then marks
        the coordinator unknown; rediscovering it tells whether the member is still in)."""
        return self._last_ok + self.session_timeout

    def coordinator_found(self, now: float) -> None:
        """A fresh session window with the new coordinator, and a heartbeat due at once."""
        self._last_ok = now
        self._last_sent = now - self.interval

    def coordinator_lost(self) -> None:
        """Until an answer other than Heartbeat NONE, such a NONE may be blind (see prove)."""
        self._blind = True

    def synced(self, now: float, *, prompt: bool, fast: bool) -> None:
        """A SyncGroup gave the member its assignment: a new window, and the prompt (and fast)
        pace for a follow-up round (see :meth:`heartbeat_due`)."""
        self._last_ok = now
        self._last_sent = now
        self._prompt_until = self._fast_until = 0.0
        if prompt:
            self._prompt_until = now + self.interval
            if fast:
                self._fast_until = now + self.interval / 10

    def heartbeat_sent(self, now: float) -> None:
        self._last_sent = now
        self._sent_at = now

    def heartbeat_ok(self, now: float) -> bool:
        """A heartbeat answered NONE; False when the answer proves nothing.

        Such an answer proves nothing when the session lapsed and the coordinator changed since
        the last answer that proves anything: it may be Kafka's blind answer while it loads the
        group, to a member it expired before it moved. The member should rejoin then: the
        JoinGroup answer proves membership, or says UNKNOWN_MEMBER_ID and the partitions are
        lost."""
        self._last_ok = now
        lapse = self.session_deadline
        if self._blind and (lapse is None or self._sent_at >= lapse):
            return False
        self.prove(self._sent_at, blind=self._blind)
        return True

    @property
    def heartbeat_sent_at(self) -> float:
        """When the heartbeat answered last (or in flight) was sent."""
        return self._sent_at

    def heartbeat_rebalancing(self, now: float) -> None:
        """A heartbeat answered REBALANCE_IN_PROGRESS: the coordinator checked the member id
        and generation first and restarted the session (PreparingRebalance): it is alive."""
        self.heartbeat_answered(now)

    def heartbeat_answered(self, now: float) -> None:
        """The coordinator took the heartbeat as the member's (it checked the member and its
        epoch or generation, and restarted its session): a proof as of its send time."""
        self._last_ok = now
        self.prove(self._sent_at)

    def heartbeat_now(self, now: float) -> None:
        """A heartbeat is due at once (KIP-848: an acknowledgement, a new subscription, a
        rejoin), at the usual pace after it."""
        self._prompt_until = self._fast_until = 0.0
        self._last_sent = now - self.interval

    def heartbeat_retry(self, now: float) -> None:
        """A heartbeat failed with an error to retry: again after the retry backoff rather
        than a whole interval, at the usual pace from here (or this would retry at once)."""
        self._prompt_until = self._fast_until = 0.0
        self._last_sent = now - self.interval + self.retry_backoff
