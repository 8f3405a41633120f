"""The sans-I/O KIP-429 group member: events in, actions out, ``now`` passed in.

See :mod:`aiogroup.membership` for how a driver uses it. Rules carry the KIP-429 step they
come from (1a-1e before JoinGroup, 2a-2f on the leader, 3a-3d after SyncGroup) or the KAFKA
issue that taught them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from aiogroup.assignors.base import GroupMetadata, PartitionAssignor, RebalanceProtocol
from aiogroup.config import GROUP_DEFAULTS, GroupConfig, check_values
from aiogroup.errors import (
    AiogroupError,
    CommitFailedError,
    ConfigurationError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    LocalProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    PartitionNotAssignedError,
    RebalanceInProgressError,
    RemoteProtocolError,
    UnknownMemberIdError,
    error_for_code,
)
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.deltas import (
    LeaderPlan,
    claimants,
    drop_claims,
    existing_partitions,
    leader_plan,
    member_delta,
    unassigned_partitions,
)
from aiogroup.membership.errors import AssignorError, RebalanceCallbackError
from aiogroup.membership.selection import select_protocol
from aiogroup.membership.states import (
    ACCEPTED_EVENTS,
    RESPONSE_EVENTS,
    TRANSITIONS,
    MemberState,
)
from aiogroup.observability.metrics import (
    FAILED_REBALANCE,
    REBALANCE_LATENCY,
    MetricsSink,
    NullMetrics,
)
from aiogroup.protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    group_by_topic,
    to_topic_partitions,
)
from aiogroup.protocol.types import NO_GENERATION

__all__ = ["GroupMember", "MemberConfig"]

log = logging.getLogger("aiogroup.membership")

#: The user data an aiogroup leader puts in each cooperative assignment (where the assignor
#: has none): "I withhold the partitions a member still claims, even of topics it no longer
#: subscribes to, for one round". A hand-off (CloseRequested.hand_off) is safe only under such
#: a leader. Peers' assignors ignore assignment user data they did not ask for (Java's and
#: librdkafka's cooperative-sticky, kafka-python's), so this changes nothing for them.
HAND_OFF_AWARE = b"aiogroup:hand-off/1"
#: Added to those assignments (space-separated) in a round that withheld partitions a member
#: still claims (KIP-429 2d): "a follow-up round is coming". The member that gives them up
#: rejoins as soon as it has revoked them, and the others learn of that round only from a
#: heartbeat: told this, aiogroup members heartbeat at a fast pace for a while (see
#: _heartbeat_due and docs/rolling-bounce.md).
FOLLOW_UP = b"aiogroup:follow-up/1"
#: Larger groups get no FOLLOW_UP mark: ten heartbeats per member within a tenth of the
#: interval would be a burst of 10,000 a second per hundred members on the coordinator.
FOLLOW_UP_MAX_MEMBERS = 100

S = MemberState

# Kafka error codes the machine reacts to (names as in Java's Errors enum), taken from the
# registry in aiogroup.errors so the numbers are written down once.
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.code
COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code
NOT_COORDINATOR = NotCoordinatorError.code
ILLEGAL_GENERATION = IllegalGenerationError.code
UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
REBALANCE_IN_PROGRESS = RebalanceInProgressError.code
MEMBER_ID_REQUIRED = MemberIdRequiredError.code
FENCED_INSTANCE_ID = FencedInstanceIdError.code

_COORDINATOR_MOVED = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})
_REBALANCING = frozenset({S.JOINING, S.AWAITING_METADATA, S.AWAITING_SYNC})
_HEARTBEATING = frozenset({S.STABLE, S.PREPARING, S.RECONCILING})

Out = list[act.Action]


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """How a member behaves. Times in milliseconds, as Kafka's configs.

    ``assignors`` in preference order; the rebalance protocol is the highest one they all
    support (see :func:`~aiogroup.membership.selection.select_protocol`).
    """

    group_id: str
    assignors: Sequence[PartitionAssignor]
    group_instance_id: str | None = GROUP_DEFAULTS.group_instance_id
    session_timeout_ms: int = GROUP_DEFAULTS.session_timeout_ms
    rebalance_timeout_ms: int = GROUP_DEFAULTS.rebalance_timeout
    heartbeat_interval_ms: int = GROUP_DEFAULTS.heartbeat_interval_ms
    retry_backoff_ms: int = GROUP_DEFAULTS.retry_backoff_ms
    #: Cap of the exponential backoff between metadata refreshes while a subscribed topic is
    #: missing (KIP-580's ``retry.backoff.max.ms``, 1 s in Java).
    retry_backoff_max_ms: int = GROUP_DEFAULTS.retry_backoff_max_ms
    enable_auto_commit: bool = True
    rack_id: str | None = GROUP_DEFAULTS.rack_id
    protocol_type: str = "consumer"
    subscription_version: int = 3

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigurationError("group_id must not be empty")
        # The options shared with the driver are checked by the one table that defines them.
        check_values({f: getattr(self, f) for f in _SHARED_OPTIONS})
        if not 0 <= self.subscription_version <= 3:
            raise ConfigurationError("subscription_version must be 0..3")
        select_protocol(self.assignors)  # no common rebalance protocol: refuse now

    @classmethod
    def of(
        cls,
        config: GroupConfig,
        *,
        group_id: str,
        assignors: Sequence[PartitionAssignor],
        enable_auto_commit: bool,
    ) -> MemberConfig:
        """The machine's configuration from a driver's (already checked) options."""
        return cls(
            group_id=group_id,
            assignors=assignors,
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            enable_auto_commit=enable_auto_commit,
            rack_id=config.rack_id,
        )


_SHARED_OPTIONS = (
    "group_instance_id",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "heartbeat_interval_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "rack_id",
)


_CommitPurpose = Literal["user", "prepare", "leave"]


@dataclass(slots=True)
class _PendingCommit:
    member_id: str
    generation_id: int
    purpose: _CommitPurpose
    during_join: bool = False


@dataclass(slots=True)
class _LeaderRound:
    """What the leader remembers of the last round it led, while partitions in it went to
    nobody because a member still claimed them (KIP-429 2d). See ``docs/safety.md``."""

    generation_id: int
    #: Claimed partitions that nobody was assigned, and who claimed each.
    claimants: dict[TopicPartition, frozenset[str]]
    #: Some claim on them was already there, unhonoured, in the round before (same claimant).
    persisting: bool
    #: When the leader's SyncGroup was answered: the group was Stable at this generation.
    stable_at: float | None = None
    #: Send time of the latest heartbeat of this generation answered NONE: still Stable then.
    proven_until: float | None = None
    followed_up: bool = False


@dataclass(slots=True)
class _Reconcile:
    assignment: Assignment
    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]
    phase: Literal["revoking", "assigning"] = "assigning"


class GroupMember:
    """One member of a classic consumer group, as a state machine (KIP-429, KIP-70, KIP-345).

    Drive it with :meth:`handle` (events), :meth:`handle_timer` (at :meth:`next_deadline`) and
    :meth:`commit`; carry out the actions they return, in order.
    """

    def __init__(self, config: MemberConfig, *, metrics: MetricsSink | None = None) -> None:
        self.config = config
        self.protocol: RebalanceProtocol = select_protocol(config.assignors)
        self._assignors = {a.name: a for a in config.assignors}
        self._metrics: MetricsSink = metrics if metrics is not None else NullMetrics()
        self._state = S.UNJOINED
        self.member_id = ""
        self.generation_id = NO_GENERATION
        self.leader_id = ""
        self.protocol_name: str | None = None
        self.coordinator_id: int | None = None
        self._topics: frozenset[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._pattern_metadata_pending = False
        self._metadata: dict[str, int] | None = None
        #: Topics we asked metadata for and the last answer lacked: refreshed with backoff.
        self.missing_topics: frozenset[str] = frozenset()
        self._missing_warned: frozenset[str] = frozenset()
        self._metadata_refresh_at: float | None = None
        self._metadata_backoff = 0.0
        self._owned: frozenset[TopicPartition] = frozenset()
        self._pending_revocation: frozenset[TopicPartition] = frozenset()
        self._pending_lost: frozenset[TopicPartition] = frozenset()
        self._reset_pending = False
        self._joined = False
        self._joined_topics: frozenset[str] | None = None
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._retry_at: float | None = None
        self._next_token = 0
        self._find_token: int | None = None
        self._join_token: int | None = None
        self._sync_token: int | None = None
        self._hb_token: int | None = None
        self._leave_token: int | None = None
        self._callbacks_token: int | None = None
        self._commits: dict[int, _PendingCommit] = {}
        self._prepare_commit_token: int | None = None
        self._prepare_committed = False
        self._prepare_lost_included = False
        self._last_hb_sent = 0.0
        #: Heartbeats sent before this time go out every tenth of the interval (set by a
        #: cooperative SyncGroup, see _heartbeat_due).
        self._prompt_hb_until = 0.0
        #: ... and before this one every hundredth (an assignment marked FOLLOW_UP).
        self._fast_hb_until = 0.0
        self._last_hb_ok = 0.0
        # KAFKA-7026: when the requests now answered were sent (the coordinator handled them
        # later, so a send time is a safe lower bound of when it last saw us alive).
        self._hb_sent_at = 0.0
        self._join_sent_at = 0.0
        self._sync_sent_at = 0.0
        self._proof_at: float | None = None
        self._proof_lapse_noted = False
        # The coordinator was lost and found again since the last answer that only a loaded
        # group gives: Kafka's coordinator answers Heartbeat NONE without looking while it
        # loads the group (GroupCoordinator.handleHeartbeat, COORDINATOR_LOAD_IN_PROGRESS).
        self._hb_may_be_blind = False
        self._rebalance_start: float | None = None
        self._join_members: tuple[ev.JoinGroupMember, ...] = ()
        self._join_subscriptions: dict[str, Subscription] = {}
        self._assignment_snapshot: dict[str, int] | None = None
        self._group_topics: frozenset[str] = frozenset()
        self._reconcile: _Reconcile | None = None
        self._leave_close = False
        self._leave_lost = False
        self._leave_reason = ""
        self._leave_phase: Literal["commit", "callbacks", "leave", ""] = ""
        #: A close waiting for the rebalance to finish (CloseRequested.finish_rebalance_by).
        self._close_by: float | None = None
        #: A close handing its partitions over first (CloseRequested.hand_off): "pending"
        #: until the JoinGroup with the empty subscription is sent, "joined" until that
        #: round's SyncGroup answers, "done" after it (the close then leaves).
        self._handoff: Literal["", "pending", "joined", "done"] = ""
        #: The leader whose last assignment announced HAND_OFF_AWARE (None: unknown).
        self._aware_leader: str | None = None
        self._leave_commit_token: int | None = None
        self.fatal_error: AiogroupError | None = None
        #: The leader's view of its last assignment round (KIP-429 2a-2c), for logs and tests.
        self.last_leader_plan: LeaderPlan | None = None
        #: Members whose metadata the leader could not decode in its last round.
        self.undecodable_members: frozenset[str] = frozenset()
        #: Claims the leader ignored in its last round: a member kept claiming partitions it
        #: had not been assigned in the previous round, which it must have received
        #: (``docs/safety.md``, "withheld partitions are always given out").
        self.stale_claims: dict[str, frozenset[TopicPartition]] = {}
        self._round: _LeaderRound | None = None

    # -- queries --------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member owns now (KIP-70: unchanged by subscribe until the
        rebalance revokes them)."""
        return self._owned

    @property
    def fetchable(self) -> frozenset[TopicPartition]:
        """Owned partitions the consumer may fetch: not pending revocation (KAFKA-14196) and not
        about to be reported lost."""
        if self._reset_pending:
            return frozenset()
        return self._owned - self._pending_revocation - self._pending_lost

    @property
    def session_deadline(self) -> float | None:
        """Until when the member may act on what it owns (KAFKA-7026); ``None`` outside a
        generation.

        It is the send time of the latest request the coordinator answered in a way that shows
        this member still in its generation (a Heartbeat answered NONE or REBALANCE_IN_PROGRESS,
        a JoinGroup or SyncGroup answered without error), plus the session timeout. The
        coordinator handled that request after it was sent and restarted the member's session
        then, so it cannot have expired the member before this deadline. A JoinGroup or
        SyncGroup the coordinator still holds is no answer: the member may have been paused
        while the answer waited, and the session runs from when it was sent (or the coordinator
        failed over and forgot the held request). See ``docs/safety.md``.
        """
        if self._proof_at is None:
            return None
        return self._proof_at + self.config.session_timeout_ms / 1000

    def may_act_on(self, now: float) -> frozenset[TopicPartition]:
        """The partitions the member may act on at ``now`` (fetch, process, commit positions).

        :attr:`fetchable` while ``now`` is before :attr:`session_deadline`; nothing once a
        session timeout has passed without an answer from the coordinator, in every state,
        until the coordinator answers again (KAFKA-7026).
        """
        deadline = self.session_deadline
        if deadline is None or now >= deadline:
            return frozenset()
        return self.fetchable

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topics subscribed to now (a regex is matched against the known metadata)."""
        if self._topics is not None:
            return self._topics
        if self._pattern is not None and self._metadata is not None:
            pat = self._pattern
            return frozenset(t for t in self._metadata if pat.fullmatch(t))
        return frozenset()

    @property
    def has_subscription(self) -> bool:
        return self._topics is not None or self._pattern is not None

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (``None``: only events matter)."""
        if self._state in (S.CLOSED, S.FATAL, S.LEAVING):
            return None
        deadlines: list[float] = []
        if self._retry_at is not None:
            deadlines.append(self._retry_at)
        if self._close_by is not None:
            deadlines.append(self._close_by)
        if self._metadata_refresh_at is not None:
            deadlines.append(self._metadata_refresh_at)
        if self._heartbeat_enabled():
            if self._hb_token is None:
                deadlines.append(self._heartbeat_due())
            deadlines.append(self._last_hb_ok + self.config.session_timeout_ms / 1000)
        lapse = self.session_deadline
        if lapse is not None and self._owned and not self._proof_lapse_noted:
            deadlines.append(lapse)  # may_act_on becomes empty then: wake the driver
        followup = self._followup_deadline()
        if followup is not None:
            deadlines.append(followup)
        return min(deadlines) if deadlines else None

    # -- inputs ---------------------------------------------------------------------------------

    def handle(self, event: ev.Event, now: float) -> list[act.Action]:
        """Feed one event; return the actions to carry out, in order.

        Raises :class:`LocalProtocolError` if the event is not accepted in the current state.
        Stale responses (unknown token) are dropped and return no action.
        """
        kind = type(event)
        if kind not in RESPONSE_EVENTS:
            allowed = ACCEPTED_EVENTS.get(kind)
            if allowed is None:
                raise LocalProtocolError(f"not a membership event: {event!r}")
            if self._state not in allowed:
                raise LocalProtocolError(
                    f"{kind.__name__} not accepted in state {self._state.name}"
                )
        handler = self._HANDLERS[kind]
        out: Out = []
        handler(self, event, now, out)
        return out

    def handle_timer(self, now: float) -> list[act.Action]:
        """Wake the machine at (or after) :meth:`next_deadline`."""
        out: Out = []
        if self._state in (S.CLOSED, S.FATAL, S.LEAVING):
            return out
        if self._close_by is not None and now >= self._close_by:
            log.info("the rebalance did not finish before close's deadline: leaving now")
            self._start_leave(now, out, close=True)
            return out
        lapse = self.session_deadline
        if lapse is not None and now >= lapse and not self._proof_lapse_noted:
            self._proof_lapse_noted = True
            if self._owned:
                log.warning(
                    "no answer from the coordinator for a session timeout (state %s): acting on "
                    "none of the %d owned partitions until it answers (KAFKA-7026)",
                    self._state.name,
                    len(self._owned),
                )
        if self._metadata_refresh_at is not None and now >= self._metadata_refresh_at:
            self._metadata_refresh_at = None
            self._request_metadata(out)
        if self._heartbeat_enabled():
            if now >= self._last_hb_ok + self.config.session_timeout_ms / 1000:
                # Java marks the coordinator unknown when the session expires without a
                # successful heartbeat; rediscovering it tells us whether we are still in.
                log.info("session timeout expired without heartbeat response")
                self._coordinator_lost(now, out)
                return out
            if self._hb_token is None and now >= self._heartbeat_due():
                self._send_heartbeat(now, out)
        if self._retry_at is not None and now >= self._retry_at:
            self._retry_at = None
            if self._state is S.AWAITING_METADATA:
                self._leader_assign(now, out)
            else:
                self._advance(now, out)
        self._maybe_follow_up(now, out)
        return out

    def commit(self, offsets: Mapping[TopicPartition, int] | None, now: float) -> act.CommitOffsets:
        """Ask to commit ``offsets`` (``None``: the consumed positions) for this generation.

        Returns the CommitOffsets action to send (its result comes back as a ResolveCommit
        action). The member refuses only where the coordinator would (Kafka 2.3-4.x accept a
        commit with the current generation while the group is PreparingRebalance and answer
        REBALANCE_IN_PROGRESS while it is CompletingRebalance). So under COOPERATIVE a member
        still in its generation commits while it prepares to rejoin, while its JoinGroup is in
        flight and between joins (it still owns its partitions, KIP-429); it raises
        RebalanceInProgressError (retriable) between its JoinGroup answer and its SyncGroup
        answer. An EAGER member revoked everything before joining: from its JoinGroup to its
        SyncGroup answer it raises RebalanceInProgressError. Otherwise: CommitFailedError when
        the member is not part of a generation, CoordinatorNotAvailableError while the
        coordinator is unknown. See ``docs/safety.md``.
        """
        if self._state is S.CLOSED:
            raise LocalProtocolError("commit on a closed member")
        if self._state is S.FATAL:
            raise CommitFailedError("the member failed fatally") from self.fatal_error
        in_generation = self.generation_id >= 0 and bool(self.member_id)
        if self._state in (S.AWAITING_METADATA, S.AWAITING_SYNC):
            # We hold the JoinGroup answer of generation_id but not its assignment: the group
            # is CompletingRebalance, where the coordinator answers REBALANCE_IN_PROGRESS.
            raise RebalanceInProgressError(
                "commit cannot be completed before this member has its assignment "
                "(SyncGroup in flight); retry after it completes"
            )
        if self.protocol is RebalanceProtocol.COOPERATIVE and in_generation:
            if self.coordinator_id is None:
                raise CoordinatorNotAvailableError("the group coordinator is not known yet")
            self._refuse_unowned(offsets)
            return self._commit_action(offsets, "user", during_join=self._join_token is not None)
        active = self._joined and in_generation
        if self._state in _REBALANCING or (not active and self._state is S.PREPARING):
            raise RebalanceInProgressError(
                "commit cannot be completed: the group is rebalancing; retry after it completes"
            )
        if not active:
            raise CommitFailedError(
                "commit cannot be completed: the member is not part of an active group"
            )
        if self.coordinator_id is None:
            raise CoordinatorNotAvailableError("the group coordinator is not known yet")
        self._refuse_unowned(offsets)
        return self._commit_action(offsets, "user")

    def _refuse_unowned(self, offsets: Mapping[TopicPartition, int] | None) -> None:
        """Offsets of a partition we do not own (never assigned, or its revocation callback
        has returned) are refused: the broker would take them under our generation, and under
        COOPERATIVE the partition's new owner is in that generation too, so a late commit here
        could rewind its progress (found by the chaos runs: a commit loop that read
        ``assignment`` just before a revocation)."""
        if offsets is None:
            return
        unowned = [tp for tp in offsets if tp not in self._owned]
        if unowned:
            shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(unowned)[:5])
            more = f" and {len(unowned) - 5} more" if len(unowned) > 5 else ""
            raise PartitionNotAssignedError(
                f"commit refused: this member does not own {shown}{more} (not assigned, or "
                "revoked since); nothing was committed"
            )

    # -- helpers --------------------------------------------------------------------------------

    def _token(self) -> int:
        self._next_token += 1
        return self._next_token

    def _goto(self, new: MemberState) -> None:
        if new is self._state:
            return
        if new not in TRANSITIONS[self._state]:
            raise LocalProtocolError(f"illegal transition {self._state.name} -> {new.name}")
        self._state = new

    def _prove(self, sent_at: float, *, blind: bool = False) -> None:
        """The coordinator answered a request sent at ``sent_at`` in a way that shows this member
        in its generation: its session ran at least until ``sent_at`` + session timeout.

        ``blind``: the answer was a Heartbeat NONE, which Kafka gives to anyone while it loads
        the group after a coordinator change; then only every other answer counts."""
        if not blind:
            self._hb_may_be_blind = False
        if self._proof_at is None or sent_at > self._proof_at:
            self._proof_at = sent_at
            self._proof_lapse_noted = False

    # -- withheld partitions are always given out (docs/safety.md) -------------------------------

    @property
    def _handover_wait(self) -> float:
        """How long a leader waits for withheld partitions to be freed before it rebalances."""
        return self.config.session_timeout_ms / 1000

    @property
    def _receipt_wait(self) -> float:
        """How long a generation must stay Stable before every member still in it has surely
        received its assignment (a member that does not sync or heartbeat is expired within its
        session timeout; one that does not sync within the rebalance timeout, KAFKA-12890)."""
        return max(self.config.session_timeout_ms, self.config.rebalance_timeout_ms) / 1000

    def _followup_round(self) -> _LeaderRound | None:
        """Our last round as leader, if a follow-up rebalance for it may still be needed."""
        r = self._round
        if (
            r is None
            or r.followed_up
            or r.stable_at is None
            or r.generation_id != self.generation_id
            or not self.is_leader
            or self._state is not S.STABLE
        ):
            return None
        return r

    def _followup_deadline(self) -> float | None:
        r = self._followup_round()
        if r is None or r.stable_at is None or r.persisting:
            return None  # persisting: decided by heartbeat answers, see _maybe_follow_up
        return r.stable_at + self._handover_wait

    def _maybe_follow_up(self, now: float, out: Out) -> None:
        """Rebalance if partitions withheld in our last round may still be with nobody.

        Their previous owner was to revoke them and rejoin; if it did not (a static member
        restarted in between and got its cached assignment back, a peer that never revokes,
        ...), no rebalance ever comes and the group stays Stable with partitions nobody owns.
        A leader's rejoin always makes the coordinator rebalance. When a claim on them had
        already gone unhonoured in the round before, wait until this generation has been
        Stable long enough that the next round may ignore such a claim (see _stale_claims).
        """
        r = self._followup_round()
        if r is None or r.stable_at is None:
            return
        if r.persisting:
            due = r.proven_until is not None and r.proven_until >= r.stable_at + self._receipt_wait
        else:
            due = now >= r.stable_at + self._handover_wait
        if not due:
            return
        r.followed_up = True
        log.info(
            "leader: %d partition(s) withheld in generation %d may still be unowned "
            "(%s); rebalancing so that they are handed over",
            len(r.claimants),
            r.generation_id,
            "claimed again" if r.persisting else "no rebalance since",
        )
        self._request_rejoin("partitions withheld in the last rebalance are not handed over yet")
        self._advance(now, out)

    def _stale_claims(
        self, subscriptions: Mapping[str, Subscription]
    ) -> dict[str, frozenset[TopicPartition]]:
        """Claims to ignore this round: partitions nobody was assigned in the previous round
        (which we led) because of a member's claim, claimed again by that same member.

        That round was Stable for at least ``_receipt_wait`` (a heartbeat answered NONE says
        so), so the member, still in the group under the same id, received its assignment,
        which did not contain them: a member following KIP-429 would have revoked them before
        rejoining. kafka-python 3.0.12's cooperative assignor keeps claiming what it lost.
        """
        prev = self._round
        if (
            prev is None
            or prev.generation_id + 1 != self.generation_id
            or prev.stable_at is None
            or prev.proven_until is None
            or prev.proven_until < prev.stable_at + self._receipt_wait
        ):
            return {}
        stale: dict[str, set[TopicPartition]] = {}
        for tp, members in claimants(subscriptions, frozenset(prev.claimants)).items():
            for member_id in members & prev.claimants[tp]:
                stale.setdefault(member_id, set()).add(tp)
        return {m: frozenset(tps) for m, tps in sorted(stale.items())}

    def _remember_round(
        self,
        assignments: Mapping[str, Assignment],
        subscriptions: Mapping[str, Subscription],
        partitions_per_topic: Mapping[str, int],
    ) -> None:
        withheld = claimants(
            subscriptions, unassigned_partitions(assignments, partitions_per_topic)
        )
        if not withheld:
            self._round = None
            return
        prev = self._round
        persisting = (
            prev is not None
            and prev.generation_id + 1 == self.generation_id
            and any(
                members & prev.claimants.get(tp, frozenset()) for tp, members in withheld.items()
            )
        )
        self._round = _LeaderRound(self.generation_id, withheld, persisting)

    def _follow_up_coming(self) -> bool:
        """The round just planned withheld partitions whose owner rejoins once it revoked
        them: not when a claim on them persists, which may not end soon (see
        _maybe_follow_up)."""
        r = self._round
        return r is not None and r.generation_id == self.generation_id and not r.persisting

    def _heartbeat_due(self) -> float:
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
        interval = self.config.heartbeat_interval_ms / 1000
        paces = ((interval / 100, self._fast_hb_until), (interval / 10, self._prompt_hb_until))
        for pace, until in paces:
            if self._last_hb_sent + pace <= until + pace / 2:  # (half a step for rounding)
                return self._last_hb_sent + pace
        return self._last_hb_sent + interval

    def _heartbeat_enabled(self) -> bool:
        return (
            self._state in _HEARTBEATING
            and self._joined
            and self.coordinator_id is not None
            and self.generation_id >= 0
        )

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            self._rejoin_reason = reason
        self._rejoin_needed = True

    def _metadata_topics(self) -> frozenset[str] | None:
        if self._pattern is not None:
            return None
        topics = set(self._topics or ())
        topics.update(tp.topic for tp in self._owned)
        if self.is_leader:
            topics.update(self._group_topics)
        return frozenset(topics)

    def _request_metadata(self, out: Out) -> None:
        out.append(act.RequestMetadata(self._metadata_topics(), self._pattern))

    def _track_missing_topics(self, now: float) -> None:
        """Topics we asked metadata for that do not exist: refresh with backoff until they do.

        A subscribed topic created later must be assigned within seconds, not after the next
        periodic refresh (``metadata_max_age_ms``, 5 minutes): Java's metadata answers a topic
        it does not know with a retriable error and asks again after ``retry.backoff.ms``,
        backing off exponentially to ``retry.backoff.max.ms`` (KIP-580). The leader asks for
        every member's topics, so it notices too and rejoins when the topic appears (1b). Each
        missing subscribed topic is warned about once, until it appears.
        """
        asked = self._metadata_topics()
        known = self._metadata or {}
        missing = frozenset() if asked is None else frozenset(t for t in asked if t not in known)
        self.missing_topics = missing
        subscribed = missing & (self._topics or frozenset())
        for topic in sorted(subscribed - self._missing_warned):
            log.warning(
                "group %s: subscribed topic %r does not exist (or is not visible to this "
                "client); none of its partitions can be assigned. Checking again until it "
                "appears.",
                self.config.group_id,
                topic,
            )
        self._missing_warned = subscribed
        if not missing:
            self._metadata_refresh_at = None
            self._metadata_backoff = 0.0
            return
        cap = max(self.config.retry_backoff_ms, self.config.retry_backoff_max_ms) / 1000
        first = self.config.retry_backoff_ms / 1000 or cap
        delay = min(self._metadata_backoff or first, cap)
        self._metadata_refresh_at = now + delay
        self._metadata_backoff = min(delay * 2, cap)

    def _commit_action(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        purpose: _CommitPurpose,
        *,
        during_join: bool = False,
    ) -> act.CommitOffsets:
        token = self._token()
        self._commits[token] = _PendingCommit(
            self.member_id, self.generation_id, purpose, during_join
        )
        return act.CommitOffsets(
            token=token,
            group_id=self.config.group_id,
            member_id=self.member_id,
            generation_id=self.generation_id,
            group_instance_id=self.config.group_instance_id,
            offsets=None if offsets is None else dict(offsets),
            during_join=during_join,
        )

    def _callbacks(
        self,
        out: Out,
        *,
        revoked: frozenset[TopicPartition] = frozenset(),
        assigned: frozenset[TopicPartition] | None = None,
        lost: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        token = self._token()
        self._callbacks_token = token
        out.append(
            act.InvokeCallbacks(
                token=token,
                protocol=self.protocol,
                generation_id=self.generation_id,
                member_id=self.member_id,
                revoked=revoked,
                assigned=assigned,
                lost=lost,
            )
        )

    def _raise_callback_error(self, error: BaseException | None, out: Out) -> None:
        if error is None:
            return
        if isinstance(error, AiogroupError):
            out.append(act.RaiseToUser(error))
            return
        wrapped = RebalanceCallbackError(f"rebalance callback raised {error!r}")
        wrapped.__cause__ = error
        out.append(act.RaiseToUser(wrapped))

    def _fail_rebalance(self, now: float) -> None:
        self._metrics.observe(FAILED_REBALANCE, 1.0, now)

    def _backoff(self, now: float) -> None:
        self._retry_at = now + self.config.retry_backoff_ms / 1000

    def _reset_generation(self, *, reset_member_id: bool, reason: str) -> None:
        """KIP-429 1d: forget the generation (and the member id for UNKNOWN_MEMBER_ID); what
        we own is reported lost before the next JoinGroup, which then claims nothing
        (KAFKA-12984)."""
        log.info("resetting generation: %s", reason)
        self.generation_id = NO_GENERATION
        if reset_member_id:
            self.member_id = ""
        self.leader_id = ""
        self._joined = False
        self._hb_token = None
        self._assignment_snapshot = None
        self._proof_at = None
        self._round = None
        if self._owned:
            self._reset_pending = True
        self._request_rejoin(reason)

    def _fatal(self, error: AiogroupError, out: Out) -> None:
        self.fatal_error = error
        self._proof_at = None
        self._round = None
        self._find_token = self._join_token = self._sync_token = None
        self._hb_token = self._leave_token = self._callbacks_token = None
        self._retry_at = None
        for token in sorted(self._commits):
            out.append(act.ResolveCommit(token, CommitFailedError(str(error))))
        self._commits.clear()
        self._reconcile = None
        self._pending_revocation = self._pending_lost = frozenset()
        self._reset_pending = False
        self._goto(S.FATAL)
        if self._owned:
            # Whatever we owned is someone else's now: report it lost, then forget it.
            self._callbacks(out, lost=self._owned)
            self._owned = frozenset()
        out.append(act.RaiseToUser(error, fatal=True))
        if self._close_by is not None:  # a close was waiting for the rebalance: it is over
            self._close_by = None
            self._goto(S.CLOSED)

    def _coordinator_lost(self, now: float, out: Out) -> None:
        self.coordinator_id = None
        self._hb_may_be_blind = True
        if self._state in _REBALANCING:
            self._goto(S.DISCOVERING)
        self._find_token = None
        self._hb_token = None
        if self._join_token is not None or self._sync_token is not None:
            self._join_token = self._sync_token = None
            self._request_rejoin("coordinator lost during a rebalance")
        for token in sorted(self._commits):
            pending = self._commits.pop(token)
            out.append(act.ResolveCommit(token, CoordinatorNotAvailableError()))
            self._after_commit(token, pending, now, out)
        if self._state is S.LEAVING:
            if self._leave_phase == "leave":
                self._leave_token = None
                self._finish_leave(out)
            return
        if self._state in (S.PREPARING, S.RECONCILING) and self._callbacks_token is not None:
            return  # the callbacks finish first; their completion moves on
        if self._state in (S.PREPARING, S.RECONCILING):
            return
        self._advance(now, out)

    # -- the engine -----------------------------------------------------------------------------

    def _advance(self, now: float, out: Out) -> None:
        """Move toward STABLE from wherever nothing is in flight."""
        if self._state in (S.CLOSED, S.FATAL, S.LEAVING, *_REBALANCING):
            return
        if self._state in (S.PREPARING, S.RECONCILING) and (
            self._callbacks_token is not None or self._prepare_commit_token is not None
        ):
            return
        if self._leave_due():
            self._start_leave(now, out, close=True)
            return
        if not self.has_subscription:
            self._goto(S.UNJOINED)
            return
        if self.coordinator_id is None:
            self._goto(S.DISCOVERING)
            if self._find_token is None and (self._retry_at is None or now >= self._retry_at):
                self._retry_at = None
                self._find_token = self._token()
                out.append(act.FindCoordinator(self._find_token, self.config.group_id))
            return
        if self._pattern is not None and (self._metadata is None or self._pattern_metadata_pending):
            # A regex subscription needs metadata to know its topics before joining.
            self._wait()
            return
        needs_join = (
            self._rejoin_needed
            or self._reset_pending
            or bool(self._pending_lost)
            or not self._joined
            or self._joined_topics != self.subscribed_topics
        )
        if not needs_join:
            self._goto(S.STABLE)
            return
        if self._retry_at is not None and now < self._retry_at:
            self._wait()
            return
        self._retry_at = None
        self._prepare(now, out)

    def _wait(self) -> None:
        """Nothing to send yet: stay a heartbeating member if we are one, else UNJOINED."""
        member_ok = self._joined and self.generation_id >= 0 and bool(self.member_id)
        if member_ok and self._state in (S.STABLE, S.DISCOVERING):
            self._goto(S.STABLE)
        else:
            self._goto(S.UNJOINED)

    def _prepare(self, now: float, out: Out) -> None:
        """Before JoinGroup (KIP-429 1a-1d, eager timeline steps 1-2)."""
        if self._rebalance_start is None:
            self._rebalance_start = now
        self._request_rejoin(self._rejoin_reason or "joining")
        self._goto(S.PREPARING)
        if self._callbacks_token is not None or self._prepare_commit_token is not None:
            return  # a step of the preparation is in flight; its completion resumes here
        if self._leave_due():
            self._start_leave(now, out, close=True)  # a close waited for this point
            return
        active = self._joined and self.generation_id >= 0 and bool(self.member_id)
        if (
            self.config.enable_auto_commit
            and active
            and self.may_act_on(now)
            and not self._reset_pending
            and not self._prepare_committed
            and self.coordinator_id is not None
        ):
            # Java's onJoinPrepare commits consumed offsets (auto-commit only) while the
            # generation is still valid; not after a lapsed session, when the member may act
            # on nothing (KAFKA-7026: its partitions may be elsewhere by now).
            self._prepare_committed = True
            if self.protocol is RebalanceProtocol.COOPERATIVE:
                # KIP-429: we keep what we own through the join and may commit it while the
                # JoinGroup is pending, so the commit goes with the JoinGroup rather than
                # before it: round two of a rebalance waits for the JoinGroups of the members
                # that revoked, and until then the partitions that move have no owner. (What
                # this round revokes is committed by its revocation, before it is given up.)
                out.append(self._commit_action(None, "prepare", during_join=True))
            else:
                action = self._commit_action(None, "prepare")
                self._prepare_commit_token = action.token
                out.append(action)
                return
        # 1d: after a reset everything we owned is lost; 1b: owned partitions that vanished.
        lost = self._owned if self._reset_pending else self._owned & self._pending_lost
        if self.protocol is RebalanceProtocol.EAGER:
            revoked = self._owned - lost  # eager: revoke everything before joining
        else:
            subscribed = self.subscribed_topics  # 1a: revoke what we no longer subscribe to
            revoked = frozenset(tp for tp in self._owned - lost if tp.topic not in subscribed)
        if lost or revoked:
            self._prepare_lost_included = self._reset_pending
            self._pending_revocation = lost | revoked
            self._callbacks(out, revoked=revoked, lost=lost)
            return
        self._pending_lost = frozenset()
        self._send_join(now, out)

    def _send_join(self, now: float, out: Out) -> None:
        if self.coordinator_id is None:
            self._goto(S.DISCOVERING)
            self._advance(now, out)
            return
        topics = self.subscribed_topics
        if self._handoff in ("pending", "joined"):
            # A hand-off: subscribe to nothing but still claim what we own, so the leader
            # gives us nothing and withholds our partitions from the others for this round
            # (KIP-429 2c-2d), while we keep working on them until the assignment arrives.
            topics = frozenset()
            self._handoff = "joined"
        owned = self._owned if self.protocol is RebalanceProtocol.COOPERATIVE else frozenset()
        owned_by_topic = group_by_topic(owned)
        protocols: list[tuple[str, bytes]] = []
        for assignor in self.config.assignors:
            sub = Subscription(
                topics=sorted(topics),
                user_data=assignor.subscription_user_data(topics),
                owned_partitions=owned_by_topic,
                generation_id=self.generation_id,
                rack_id=self.config.rack_id,
            )
            protocols.append(
                (assignor.name, encode_subscription(sub, self.config.subscription_version))
            )
        token = self._token()
        self._join_token = token
        self._hb_token = None  # a heartbeat answer from the old generation is stale now
        self._joined = False
        self._joined_topics = topics
        reason = self._rejoin_reason
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._prepare_committed = False
        self._join_sent_at = now
        self._goto(S.JOINING)
        out.append(
            act.SendJoinGroup(
                token=token,
                group_id=self.config.group_id,
                member_id=self.member_id,
                generation_id=self.generation_id,
                group_instance_id=self.config.group_instance_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                protocol_type=self.config.protocol_type,
                protocols=tuple(protocols),
                reason=reason,
            )
        )

    def _send_sync(self, now: float, out: Out, assignments: tuple[tuple[str, bytes], ...]) -> None:
        token = self._token()
        self._sync_token = token
        self._sync_sent_at = now
        self._goto(S.AWAITING_SYNC)
        out.append(
            act.SendSyncGroup(
                token=token,
                group_id=self.config.group_id,
                member_id=self.member_id,
                generation_id=self.generation_id,
                group_instance_id=self.config.group_instance_id,
                protocol_type=self.config.protocol_type,
                protocol_name=self.protocol_name or "",
                assignments=assignments,
            )
        )

    def _send_heartbeat(self, now: float, out: Out) -> None:
        token = self._token()
        self._hb_token = token
        self._last_hb_sent = now
        self._hb_sent_at = now
        out.append(
            act.SendHeartbeat(
                token=token,
                group_id=self.config.group_id,
                member_id=self.member_id,
                generation_id=self.generation_id,
                group_instance_id=self.config.group_instance_id,
            )
        )

    def _leader_assign(self, now: float, out: Out) -> None:
        """KIP-429 2a-2f on the leader."""
        self._retry_at = None
        name = self.protocol_name or ""
        assignor = self._assignors[name]
        claimed = self._join_subscriptions
        self.stale_claims = self._stale_claims(claimed)
        subscriptions = claimed
        if self.stale_claims:
            log.warning(
                "leader: ignoring claims on partitions withheld since generation %d that their "
                "claimants were not assigned and must have revoked: %s",
                self.generation_id - 1,
                {m: sorted(tps) for m, tps in self.stale_claims.items()},
            )
            subscriptions = drop_claims(claimed, self.stale_claims)
        metadata = self._metadata or {}
        group_topics = set().union(*(s.topics for s in subscriptions.values()))
        partitions_per_topic = {t: metadata[t] for t in sorted(group_topics) if t in metadata}
        all_members = sorted({m.member_id for m in self._join_members})
        try:
            raw = assignor.assign(partitions_per_topic, subscriptions)
            assignments = {m: raw.get(m, Assignment()) for m in all_members}
            cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
            assignments, plan = leader_plan(
                assignments, subscriptions, partitions_per_topic, cooperative=cooperative
            )
            if cooperative:
                self._remember_round(assignments, claimed, partitions_per_topic)
                follow_up = len(all_members) <= FOLLOW_UP_MAX_MEMBERS and self._follow_up_coming()
                assignments = _announce_hand_off_aware(assignments, follow_up=follow_up)
            encoded = tuple(
                (
                    m,
                    encode_assignment(
                        assignments[m],
                        min(3, subscriptions[m].version) if m in subscriptions else 0,
                    ),
                )
                for m in all_members
            )
        except Exception as exc:  # the assignor is user code
            error = AssignorError(f"assignor {name!r} failed: {exc!r}")
            error.__cause__ = exc
            self._fail_rebalance(now)
            out.append(act.RaiseToUser(error))
            self._request_rejoin("assignor failed")
            self._backoff(now)
            self._goto(S.UNJOINED)
            return
        self.last_leader_plan = plan
        self._assignment_snapshot = partitions_per_topic
        self._send_sync(now, out, encoded)

    def _finish_assignment(self, now: float, out: Out) -> None:
        """KIP-429 3b + 3d: take the new assignment, on_assignment, then assigned."""
        rec = self._reconcile
        assert rec is not None
        rec.phase = "assigning"
        self._owned = rec.assigned
        self._pending_revocation = frozenset()
        name = self.protocol_name or ""
        assignor = self._assignors.get(name)
        if assignor is not None:
            try:
                assignor.on_assignment(
                    rec.assignment,
                    GroupMetadata(
                        self.generation_id,
                        self.member_id,
                        self.config.group_id,
                        self.config.group_instance_id,
                    ),
                )
            except Exception as exc:
                error = AssignorError(f"assignor {name!r} on_assignment failed: {exc!r}")
                error.__cause__ = exc
                out.append(act.RaiseToUser(error))
        added = rec.assigned if self.protocol is RebalanceProtocol.EAGER else rec.added
        self._callbacks(out, assigned=added)

    def _after_commit(self, token: int, pending: _PendingCommit, now: float, out: Out) -> None:
        if pending.purpose == "prepare" and token == self._prepare_commit_token:
            self._prepare_commit_token = None
            if self._state is S.PREPARING:
                self._prepare(now, out)
        elif pending.purpose == "leave" and token == self._leave_commit_token:
            self._leave_commit_token = None
            if self._state is S.LEAVING:
                self._leave_callbacks(now, out)

    # -- leaving (KIP-70 unsubscribe, close) ----------------------------------------------------

    def _leave_due(self) -> bool:
        """A waiting close goes ahead now (a hand-off first needs its round, unless nothing
        is left to hand over, or the leader is no longer one that withholds for it)."""
        if self._close_by is None or not self._close_ready():
            return False
        if self._handoff in ("pending", "joined") and self._owned:
            if self._leader_withholds():
                return False
            # The leader changed since the hand-off began (the aiogroup leader left, a peer
            # leads now): rejoining subscribed to nothing could get our partitions handed to
            # others while we still hold them. Leave as a plain close does.
            log.info(
                "the group's leader (%s) did not announce %r: leaving without a hand-off",
                self.leader_id,
                HAND_OFF_AWARE,
            )
            self._handoff = ""
        return True

    def _leader_withholds(self) -> bool:
        """The current leader keeps a member's claimed partitions from others for a round even
        of topics the member no longer subscribes to: ourselves, or an announced aiogroup."""
        return self.is_leader or self._aware_leader == self.leader_id

    def _close_ready(self) -> bool:
        """A waiting close may go ahead: the final commit and revocation can happen in a
        generation the broker accepts, or there is nothing left to commit for."""
        return (
            not self._owned
            or self._reset_pending
            or (self._joined and self.generation_id >= 0 and self.coordinator_id is not None)
        )

    def _start_leave(
        self, now: float, out: Out, *, close: bool, lost: bool = False, reason: str = ""
    ) -> None:
        self._close_by = None
        self._handoff = ""
        self._leave_close = close
        self._leave_lost = lost
        self._leave_reason = reason
        self._metadata_refresh_at = None
        self._find_token = self._join_token = self._sync_token = self._hb_token = None
        self._retry_at = None
        self._callbacks_token = None
        self._prepare_commit_token = None
        self._reconcile = None
        self._pending_revocation = frozenset()
        self._goto(S.LEAVING)
        active = self._joined and self.generation_id >= 0 and bool(self.member_id)
        if (
            self.config.enable_auto_commit
            and active
            and self._owned  # nothing owned (e.g. after a hand-off): nothing to commit
            and self.may_act_on(now)
            and self.coordinator_id is not None
            and not lost
        ):
            # KIP-70: unsubscribe commits before clearing the assignment (auto-commit only);
            # not after a lapsed session (KAFKA-7026).
            self._leave_phase = "commit"
            action = self._commit_action(None, "leave")
            self._leave_commit_token = action.token
            out.append(action)
            return
        self._leave_callbacks(now, out)

    def _leave_callbacks(self, now: float, out: Out) -> None:
        self._leave_phase = "callbacks"
        if self._owned:
            if self._reset_pending or not self._joined or self._leave_lost:
                self._callbacks(out, lost=self._owned)
            else:
                self._callbacks(out, revoked=self._owned)
            return
        self._leave_group(out)

    def _leave_group(self, out: Out) -> None:
        self._owned = frozenset()
        self._pending_lost = frozenset()
        self._reset_pending = False
        self._leave_phase = "leave"
        if (
            self.config.group_instance_id is None  # KIP-345: static members do not leave
            and self.member_id
            and self.coordinator_id is not None
        ):
            token = self._token()
            self._leave_token = token
            out.append(
                act.SendLeaveGroup(
                    token=token,
                    group_id=self.config.group_id,
                    member_id=self.member_id,
                    generation_id=self.generation_id,
                    group_instance_id=self.config.group_instance_id,
                    reason=self._leave_reason
                    or ("the consumer is closing" if self._leave_close else "unsubscribed"),
                )
            )
            return
        self._finish_leave(out)

    def _finish_leave(self, out: Out) -> None:
        self._leave_phase = ""
        self._leave_token = None
        self._leave_lost = False
        self._leave_reason = ""
        self.generation_id = NO_GENERATION
        self.leader_id = ""
        self.member_id = ""  # as Java's resetGenerationOnLeaveGroup, static members included
        self._proof_at = None
        self._round = None
        self._joined = False
        self._joined_topics = None
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._rebalance_start = None
        self._assignment_snapshot = None
        if self._leave_close:
            for token in sorted(self._commits):
                out.append(act.ResolveCommit(token, CommitFailedError("the member closed")))
            self._commits.clear()
            self._goto(S.CLOSED)
        else:
            self._topics = None
            self._pattern = None
            self._goto(S.UNJOINED)

    # -- event handlers -------------------------------------------------------------------------

    def _on_subscription_changed(self, e: ev.SubscriptionChanged, now: float, out: Out) -> None:
        if (e.topics is None) == (e.pattern is None):
            raise LocalProtocolError("SubscriptionChanged needs exactly one of topics or pattern")
        if e.topics is not None:
            if isinstance(e.topics, str | bytes):  # would read as its letters
                raise LocalProtocolError(f"topics must be a set of names, not {e.topics!r}")
            if any(not isinstance(t, str) or not t for t in e.topics):
                raise LocalProtocolError("topic names must be non-empty strings")
            self._topics = frozenset(e.topics)
            self._pattern = None
            self._pattern_metadata_pending = False
        else:
            self._topics = None
            self._pattern = e.pattern
            self._pattern_metadata_pending = True
        # KIP-70: the assignment does not change now; the rebalance this asks for revokes.
        self._request_metadata(out)
        if self._pattern is None and self._joined_topics != self.subscribed_topics:
            self._request_rejoin("subscription changed")
        if self._state in (S.UNJOINED, S.DISCOVERING, S.STABLE):
            self._advance(now, out)

    def _on_unsubscribe(self, e: ev.UnsubscribeRequested, now: float, out: Out) -> None:
        if self._state is S.LEAVING:
            return
        if not self.has_subscription and not self._owned and not self.member_id:
            self._topics = None
            self._pattern = None
            self._goto(S.UNJOINED)
            return
        self._start_leave(now, out, close=False, lost=e.lost, reason=e.reason)

    def _on_close(self, e: ev.CloseRequested, now: float, out: Out) -> None:
        if self._state is S.CLOSED:
            return
        if self._state is S.FATAL:
            self._goto(S.CLOSED)
            return
        if self._state is S.LEAVING:
            self._leave_close = True
            return
        by = e.finish_rebalance_by
        if e.hand_off and self._handoff:
            return  # handing off already
        if e.hand_off and self._may_hand_off(by, now):
            assert by is not None
            self._handoff = "pending"
            self._close_by = by
            self._request_rejoin("handing partitions over before leaving")
            log.info(
                "handing %d partitions over before leaving (group %s, member %s)",
                len(self._owned),
                self.config.group_id,
                self.member_id,
            )
            if self._state in (S.UNJOINED, S.DISCOVERING, S.STABLE):
                self._advance(now, out)
            return  # a rebalance under way finishes first; _advance rejoins after it
        self._handoff = ""  # a plain close ends a hand-off under way
        leave_now = (
            self._state is S.STABLE
            and self._joined
            and self.generation_id >= 0
            and self.coordinator_id is not None
        )
        if (
            by is not None
            and now < by
            and self._owned
            and not self._reset_pending
            and not leave_now
        ):
            # Better than Java's onLeavePrepare: finish the rebalance first, so the final
            # commit lands and the partitions are revoked rather than lost.
            self._close_by = e.finish_rebalance_by
            return
        self._start_leave(now, out, close=True)

    def _may_hand_off(self, by: float | None, now: float) -> bool:
        """A close can hand the owned partitions over first (CloseRequested.hand_off)."""
        return (
            by is not None
            and now < by
            and self.protocol is RebalanceProtocol.COOPERATIVE
            and self.config.group_instance_id is None  # KIP-345: a static member stays
            and bool(self._owned)
            and not self._reset_pending
            and bool(self.member_id)
            and self.coordinator_id is not None
            # Only a leader known to withhold our claims keeps this safe: librdkafka's leader
            # hands partitions of topics their owner no longer subscribes to straight to
            # others, trusting KIP-429 1a (found by tests/consumer/test_hand_off.py).
            and self._leader_withholds()
        )

    def _on_metadata(self, e: ev.MetadataUpdated, now: float, out: Out) -> None:
        try:
            self._metadata = {str(t): int(n) for t, n in e.partitions_per_topic.items()}
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(f"bad metadata: {exc}") from None
        self._pattern_metadata_pending = False
        if self._state in (S.CLOSED, S.FATAL, S.LEAVING):
            return
        self._track_missing_topics(now)
        if self._state is S.AWAITING_METADATA:
            self._leader_assign(now, out)
            return
        if not self.has_subscription:
            return
        # 1b: owned partitions that no longer exist are lost, not revoked.
        exists = existing_partitions(self._metadata)
        asked = self._metadata_topics()
        gone = frozenset(
            tp for tp in self._owned if tp not in exists and (asked is None or tp.topic in asked)
        )
        if gone - self._pending_lost:
            self._pending_lost = self._pending_lost | gone
            self._request_rejoin("owned partitions no longer exist")
        if self._pattern is not None and self._joined_topics != self.subscribed_topics:
            self._request_rejoin("regex subscription matches other topics")
        if self.is_leader and self._assignment_snapshot is not None:
            now_snapshot = {t: self._metadata[t] for t in self._group_topics if t in self._metadata}
            if now_snapshot != self._assignment_snapshot:
                self._request_rejoin("partitions of the group's topics changed")  # 1b, leader
        if self._state in (S.UNJOINED, S.DISCOVERING, S.STABLE):
            self._advance(now, out)

    def _on_coordinator_lost(self, e: ev.CoordinatorLost, now: float, out: Out) -> None:
        if self._state in (S.CLOSED, S.FATAL):
            return
        self._coordinator_lost(now, out)

    def _on_coordinator_found(self, e: ev.CoordinatorFound, now: float, out: Out) -> None:
        if e.token != self._find_token:
            return
        self._find_token = None
        self.coordinator_id = e.node_id
        self._last_hb_ok = now  # a fresh session window with the new coordinator
        self._last_hb_sent = now - self.config.heartbeat_interval_ms / 1000
        self._advance(now, out)

    def _on_coordinator_lookup_failed(
        self, e: ev.CoordinatorLookupFailed, now: float, out: Out
    ) -> None:
        if e.token != self._find_token:
            return
        self._find_token = None
        error = error_for_code(e.error_code)
        if not error.retriable and e.error_code > 0:
            out.append(act.RaiseToUser(error))
        self._backoff(now)

    def _on_join_completed(self, e: ev.JoinGroupCompleted, now: float, out: Out) -> None:
        if e.token != self._join_token:
            return
        self._join_token = None
        if e.protocol_name not in self._assignors or e.generation_id < 0 or not e.member_id:
            self._fail_rebalance(now)
            out.append(
                act.RaiseToUser(
                    RemoteProtocolError(
                        f"JoinGroup chose protocol {e.protocol_name!r} (generation "
                        f"{e.generation_id}, member {e.member_id!r}) that this member cannot run"
                    )
                )
            )
            self._request_rejoin("unusable JoinGroup response")
            self._backoff(now)
            self._goto(S.UNJOINED)
            return
        self.member_id = e.member_id
        self.generation_id = e.generation_id
        self.leader_id = e.leader
        self.protocol_name = e.protocol_name
        self._prove(self._join_sent_at)
        if not self.is_leader:
            self._group_topics = frozenset()
            self._assignment_snapshot = None
            self._round = None
            self._send_sync(now, out, ())
            return
        self._join_members = e.members
        subscriptions: dict[str, Subscription] = {}
        bad: set[str] = set()
        for member in e.members:
            try:
                subscriptions[member.member_id] = decode_subscription(member.metadata)
            except AiogroupError as exc:
                # One member's garbage must not stop the group: it gets nothing this round.
                log.warning("member %s sent undecodable metadata: %s", member.member_id, exc)
                bad.add(member.member_id)
        self._join_subscriptions = subscriptions
        self.undecodable_members = frozenset(bad)
        # One C-level union: a large group's members list a million topics in all.
        self._group_topics = frozenset().union(*(s.topics for s in subscriptions.values()))
        known = self._metadata or {}
        if self._metadata is None or not self._group_topics <= set(known):
            # The leader assigns from metadata covering every member's topics. It waits at
            # most one heartbeat interval; after that, missing topics count as absent (a
            # later metadata update makes the leader rejoin, KIP-429 1b).
            self._goto(S.AWAITING_METADATA)
            self._retry_at = now + self.config.heartbeat_interval_ms / 1000
            self._request_metadata(out)
            return
        self._leader_assign(now, out)

    def _on_join_failed(self, e: ev.JoinGroupFailed, now: float, out: Out) -> None:
        if e.token != self._join_token:
            return
        self._join_token = None
        code = e.error_code
        if code == MEMBER_ID_REQUIRED:
            # 1e (KIP-394): take the id the coordinator gave us and join again at once.
            self.member_id = e.member_id
            self._request_rejoin("member id required")
            self._goto(S.UNJOINED)
            self._advance(now, out)
            return
        self._fail_rebalance(now)
        self._group_error(code, "JoinGroup", now, out)

    def _on_sync_completed(self, e: ev.SyncGroupCompleted, now: float, out: Out) -> None:
        if e.token != self._sync_token:
            return
        self._sync_token = None
        self._prove(self._sync_sent_at)
        if self._round is not None and self._round.generation_id == self.generation_id:
            self._round.stable_at = now  # our (the leader's) SyncGroup completed the round
        try:
            # No bytes at all means nothing assigned: the coordinator answers a member the
            # leader's SyncGroup left out with an empty array, and librdkafka's leader leaves
            # out members it gives no partitions (a member handing off, or more members than
            # partitions).
            assignment = decode_assignment(e.assignment) if e.assignment else Assignment()
        except AiogroupError as exc:
            self._fail_rebalance(now)
            out.append(act.RaiseToUser(RemoteProtocolError(f"undecodable assignment: {exc}")))
            self._request_rejoin("undecodable assignment")
            self._backoff(now)
            self._goto(S.UNJOINED)
            return
        assigned = frozenset(to_topic_partitions(assignment.partitions))
        # Who assigned this: a leader that withholds claimed partitions of topics their owner
        # no longer subscribes to (ours announces it), or one that may not (librdkafka's).
        marks = _leader_marks(assignment.user_data)
        self._aware_leader = self.leader_id if HAND_OFF_AWARE in marks else None
        if self._handoff == "joined":
            self._handoff = "done"  # the round that takes our partitions: leave after it
        self._joined = True
        self._last_hb_ok = now
        self._last_hb_sent = now
        interval = self.config.heartbeat_interval_ms / 1000
        self._prompt_hb_until = self._fast_hb_until = 0.0
        if self.protocol is RebalanceProtocol.COOPERATIVE:
            # KIP-429: a follow-up round may come right after this one (see _heartbeat_due)
            self._prompt_hb_until = now + interval
            if FOLLOW_UP in marks:
                self._fast_hb_until = now + interval / 10
        self._goto(S.RECONCILING)
        delta = member_delta(self._owned, assigned)
        self._reconcile = _Reconcile(
            assignment,
            assigned,
            delta.added,
            delta.revoked,
            "revoking" if delta.revoked else "assigning",
        )
        if self._pattern is None and any(tp.topic not in self.subscribed_topics for tp in assigned):
            self._request_rejoin("assigned topics we do not subscribe to")
        if delta.revoked:
            # 3c: revoke first, then rejoin so the partitions reach their new owner. The
            # rejoin waits until this rebalance is complete (KAFKA-14382).
            self._request_rejoin("partitions revoked in the last rebalance")
            self._pending_revocation = delta.revoked
            self._callbacks(out, revoked=delta.revoked)
            return
        self._finish_assignment(now, out)

    def _on_sync_failed(self, e: ev.SyncGroupFailed, now: float, out: Out) -> None:
        if e.token != self._sync_token:
            return
        self._sync_token = None
        self._fail_rebalance(now)
        self._group_error(e.error_code, "SyncGroup", now, out)

    def _group_error(self, code: int, api: str, now: float, out: Out) -> None:
        """The per-error reactions for JoinGroup / SyncGroup (Java's matrix)."""
        self._request_rejoin(f"{api} failed with error {code}")
        if code == FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError(f"{api}: group_instance_id fenced"), out)
            return
        if code in _COORDINATOR_MOVED:
            self.coordinator_id = None
            self._hb_token = None
        elif code == UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True, reason=f"{api}: UNKNOWN_MEMBER_ID")
        elif code == ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False, reason=f"{api}: ILLEGAL_GENERATION")
        elif code == REBALANCE_IN_PROGRESS:
            pass  # 1c: rejoin at once, keeping what we own
        else:
            error = error_for_code(code)
            if not error.retriable:
                out.append(act.RaiseToUser(error))
            self._backoff(now)
        self._goto(S.UNJOINED)
        self._advance(now, out)

    def _on_heartbeat_completed(self, e: ev.HeartbeatCompleted, now: float, out: Out) -> None:
        if e.token != self._hb_token:
            return
        self._hb_token = None
        self._last_hb_ok = now
        lapse = self.session_deadline
        if self._hb_may_be_blind and (lapse is None or self._hb_sent_at >= lapse):
            # The session lapsed, and the coordinator changed since the last answer that
            # proves anything: this NONE may be Kafka's blind answer while it loads the group,
            # to a member it expired before it moved. Rejoin: the JoinGroup answer proves
            # membership, or says UNKNOWN_MEMBER_ID and the partitions are lost.
            if self._state is S.STABLE:
                self._request_rejoin("session lapsed across a coordinator change")
                self._advance(now, out)
            return
        self._prove(self._hb_sent_at, blind=self._hb_may_be_blind)
        r = self._round
        if r is not None and r.generation_id == self.generation_id and r.stable_at is not None:
            r.proven_until = self._hb_sent_at  # NONE: the group was Stable when it was handled
            self._maybe_follow_up(now, out)

    def _on_heartbeat_failed(self, e: ev.HeartbeatFailed, now: float, out: Out) -> None:
        if e.token != self._hb_token:
            return
        self._hb_token = None
        code = e.error_code
        if code == FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError("Heartbeat: group_instance_id fenced"), out)
            return
        if code in _COORDINATOR_MOVED:
            self._coordinator_lost(now, out)
            return
        if code == REBALANCE_IN_PROGRESS:
            # The coordinator checked our member id and generation before answering, and
            # restarted our session (PreparingRebalance): the session is alive.
            self._last_hb_ok = now
            self._prove(self._hb_sent_at)
            if self._state is not S.PREPARING:
                self._request_rejoin("Heartbeat: REBALANCE_IN_PROGRESS")  # 1c
        elif code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            self._reset_generation(
                reset_member_id=code == UNKNOWN_MEMBER_ID, reason=f"Heartbeat: error {code}"
            )
        else:
            error = error_for_code(code)
            if not error.retriable:
                out.append(act.RaiseToUser(error))
            # Try again after the retry backoff rather than a whole interval.
            interval = self.config.heartbeat_interval_ms / 1000
            # the usual pace from here, or this retries at once
            self._prompt_hb_until = self._fast_hb_until = 0.0
            self._last_hb_sent = now - interval + self.config.retry_backoff_ms / 1000
            return
        if self._state is S.STABLE:
            self._advance(now, out)
        elif self._state is S.PREPARING:
            self._prepare(now, out)

    def _on_leave_completed(self, e: ev.LeaveGroupCompleted, now: float, out: Out) -> None:
        if e.token != self._leave_token:
            return
        self._finish_leave(out)

    def _on_commit_completed(self, e: ev.CommitCompleted, now: float, out: Out) -> None:
        pending = self._commits.pop(e.token, None)
        if pending is None:
            return
        out.append(act.ResolveCommit(e.token, None))
        self._after_commit(e.token, pending, now, out)

    def _on_commit_failed(self, e: ev.CommitFailed, now: float, out: Out) -> None:
        pending = self._commits.pop(e.token, None)
        if pending is None:
            return
        code = e.error_code
        # A commit sent while our JoinGroup was in flight says nothing new about our
        # membership: the JoinGroup's own answer does (and the generation may have moved on
        # through that very join before the commit arrived).
        current = (
            pending.generation_id == self.generation_id
            and pending.member_id == self.member_id
            and self._state not in (S.CLOSED, S.FATAL)
            and not pending.during_join
        )
        error: KafkaError
        if code == FENCED_INSTANCE_ID:
            out.append(act.ResolveCommit(e.token, FencedInstanceIdError()))
            if self._state not in (S.CLOSED, S.FATAL):
                self._fatal(FencedInstanceIdError("OffsetCommit: group_instance_id fenced"), out)
            return
        if code == ILLEGAL_GENERATION and pending.during_join:
            # The join phase completed before the coordinator handled the commit (our
            # JoinGroup moved the generation on): retriable, like Java's REBALANCE_IN_PROGRESS.
            error = RebalanceInProgressError(
                "commit failed: the rebalance completed before the commit reached the "
                "coordinator; retry once this member has its new assignment"
            )
        elif code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            error = CommitFailedError(
                "commit cannot be completed: the member was removed from the group or its "
                f"generation is over (error {code}); its partitions may be elsewhere now"
            )
            if current and self._state is not S.LEAVING:
                self._reset_generation(
                    reset_member_id=code == UNKNOWN_MEMBER_ID, reason=f"OffsetCommit: {code}"
                )
            elif current:
                self._reset_pending = bool(self._owned)
        elif code == REBALANCE_IN_PROGRESS:
            error = RebalanceInProgressError("commit failed: the group is rebalancing")
            if current and self._state is not S.LEAVING:
                self._request_rejoin("OffsetCommit: REBALANCE_IN_PROGRESS")  # 1c
        else:
            error = error_for_code(code)
            if code in _COORDINATOR_MOVED and current and self.coordinator_id is not None:
                out.append(act.ResolveCommit(e.token, error))
                self._after_commit(e.token, pending, now, out)
                if self._state not in (S.LEAVING, S.CLOSED, S.FATAL):
                    self._coordinator_lost(now, out)
                return
        out.append(act.ResolveCommit(e.token, error))
        self._after_commit(e.token, pending, now, out)
        if self._state is S.STABLE:
            self._advance(now, out)

    def _on_callbacks_finished(self, e: ev.CallbacksFinished, now: float, out: Out) -> None:
        if e.token != self._callbacks_token:
            return
        self._callbacks_token = None
        self._raise_callback_error(e.first_error, out)
        if self._state is S.PREPARING:
            # The revoked/lost partitions are gone whatever the callbacks did (KIP-429).
            self._owned = self._owned - self._pending_revocation
            self._pending_lost = self._pending_lost - self._pending_revocation
            self._pending_revocation = frozenset()
            if self._prepare_lost_included:
                self._reset_pending = False
                self._prepare_lost_included = False
            if not self._owned:
                self._reset_pending = False
            if self.coordinator_id is None:
                self._goto(S.DISCOVERING)
                self._advance(now, out)
                return
            self._prepare(now, out)
        elif self._state is S.RECONCILING:
            rec = self._reconcile
            if rec is not None and rec.phase == "revoking":
                # 3c done: the revoked partitions are gone; now 3b/3d.
                self._owned = self._owned - rec.revoked
                self._finish_assignment(now, out)
                return
            self._reconcile = None
            self._goto(S.STABLE)
            if self._rebalance_start is not None:
                self._metrics.observe(REBALANCE_LATENCY, now - self._rebalance_start, now)
                self._rebalance_start = None
            self._advance(now, out)
            self._maybe_follow_up(now, out)
        elif self._state is S.LEAVING:
            self._leave_group(out)

    _HANDLERS: ClassVar[
        dict[type[ev.Event], Callable[[GroupMember, object, float, Out], None]]
    ] = {}


def _announce_hand_off_aware(
    assignments: Mapping[str, Assignment], *, follow_up: bool = False
) -> dict[str, Assignment]:
    """Mark a cooperative leader's assignments with :data:`HAND_OFF_AWARE` (where the assignor
    set no user data of its own), so members know this leader withholds for a hand-off, and
    with :data:`FOLLOW_UP` when it withheld partitions in this round."""
    mark = HAND_OFF_AWARE + b" " + FOLLOW_UP if follow_up else HAND_OFF_AWARE
    return {
        m: a if a.user_data is not None else dataclasses.replace(a, user_data=mark)
        for m, a in assignments.items()
    }


def _leader_marks(user_data: bytes | None) -> frozenset[bytes]:
    """The marks an aiogroup leader put in an assignment's user data (space-separated, each
    ``aiogroup:<name>/<version>``; marks a later version adds are ignored), or none if the
    user data is not ours."""
    if not user_data or not user_data.startswith(b"aiogroup:"):
        return frozenset()
    return frozenset(user_data.split(b" "))


def _register() -> None:
    table: dict[type[ev.Event], Callable[..., None]] = {
        ev.SubscriptionChanged: GroupMember._on_subscription_changed,
        ev.UnsubscribeRequested: GroupMember._on_unsubscribe,
        ev.CloseRequested: GroupMember._on_close,
        ev.MetadataUpdated: GroupMember._on_metadata,
        ev.CoordinatorLost: GroupMember._on_coordinator_lost,
        ev.CoordinatorFound: GroupMember._on_coordinator_found,
        ev.CoordinatorLookupFailed: GroupMember._on_coordinator_lookup_failed,
        ev.JoinGroupCompleted: GroupMember._on_join_completed,
        ev.JoinGroupFailed: GroupMember._on_join_failed,
        ev.SyncGroupCompleted: GroupMember._on_sync_completed,
        ev.SyncGroupFailed: GroupMember._on_sync_failed,
        ev.HeartbeatCompleted: GroupMember._on_heartbeat_completed,
        ev.HeartbeatFailed: GroupMember._on_heartbeat_failed,
        ev.LeaveGroupCompleted: GroupMember._on_leave_completed,
        ev.CommitCompleted: GroupMember._on_commit_completed,
        ev.CommitFailed: GroupMember._on_commit_failed,
        ev.CallbacksFinished: GroupMember._on_callbacks_finished,
    }
    GroupMember._HANDLERS.update(table)


_register()
