"""The sans-I/O KIP-429 group member: events in, actions out, ``now`` passed in.

See :mod:`aiogroup.membership` for how a driver uses it. :class:`MembershipMachine` keeps the
state table (:mod:`~aiogroup.membership.states`: which state accepts which event, which request
each response answers, which state may follow which) and routes each event; the rest is in
parts that each own their state, as aioquic's connection owns its loss recovery and pacer:

- :class:`~aiogroup.membership.interest.Interest`: the subscription, metadata, missing topics;
- :class:`~aiogroup.membership.ownership.Ownership`: what is owned, revoked, lost, reconciled;
- :class:`~aiogroup.membership.liveness.Liveness`: the session proof (KAFKA-7026) and the
  heartbeat schedule;
- :class:`~aiogroup.membership.leader.Leadership`: the leader's rounds and what it withheld;
- :class:`~aiogroup.membership.leaving.Leaving`: a leave, a close that waits, a hand-off;
- :class:`~aiogroup.membership.commits.Commits`: the commits in flight;
- :class:`~aiogroup.membership.requests.Requests`: the request actions and the tokens awaited.

Rules carry the KIP-429 step they come from (1a-1e before JoinGroup, 2a-2f on the leader, 3a-3d
after SyncGroup) or the KAFKA issue that taught them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from aiogroup.assignors.base import GroupMetadata, PartitionRacks, RebalanceProtocol
from aiogroup.errors import (
    AiogroupError,
    CommitFailedError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    LocalProtocolError,
    MemberIdRequiredError,
    NotCoordinatorError,
    RebalanceInProgressError,
    RemoteProtocolError,
    UnknownMemberIdError,
    error_for_code,
)
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.commits import (
    CommitPurpose,
    Commits,
    PendingCommit,
    commit_error,
    refuse_commit,
    refuse_unowned,
)
from aiogroup.membership.config import MemberConfig
from aiogroup.membership.deltas import LeaderPlan, existing_partitions
from aiogroup.membership.errors import AssignorError
from aiogroup.membership.interest import Interest
from aiogroup.membership.leader import (
    FOLLOW_UP,
    Leadership,
    announce_hand_off_aware,
    leader_marks,
    without_marks,
)
from aiogroup.membership.leader import FOLLOW_UP_MAX_MEMBERS as FOLLOW_UP_MAX_MEMBERS
from aiogroup.membership.leader import HAND_OFF_AWARE as HAND_OFF_AWARE
from aiogroup.membership.leaving import Leaving
from aiogroup.membership.liveness import Liveness
from aiogroup.membership.ownership import Ownership
from aiogroup.membership.requests import Requests
from aiogroup.membership.routing import accepts, callback_error
from aiogroup.membership.selection import select_protocol
from aiogroup.membership.states import (
    ACCEPTED_EVENTS,
    ANSWERS,
    CALLBACK_STATES,
    ENDED,
    HEARTBEATING,
    IDLE,
    QUIET,
    REBALANCING,
    TRANSITIONS,
    MemberState,
    Request,
)
from aiogroup.observability.metrics import (
    FAILED_REBALANCE,
    REBALANCE_LATENCY,
    MetricsSink,
    NullMetrics,
)
from aiogroup.protocol import (
    Assignment,
    TopicPartition,
    decode_assignment,
    to_topic_partitions,
)
from aiogroup.protocol.types import NO_GENERATION

# (FOLLOW_UP, FOLLOW_UP_MAX_MEMBERS and HAND_OFF_AWARE, the leader's marks, are importable from
# here as before; they are defined and documented in leader.py.)
__all__ = ["GroupMember", "MemberConfig", "MembershipMachine"]

log = logging.getLogger("aiogroup.membership")

S = MemberState
R = Request

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
#: States _advance leaves alone: leaving, terminal, or a round's request in flight.
_NO_ADVANCE = QUIET | REBALANCING

Out = list[act.Action]


class MembershipMachine:
    """One member of a classic consumer group, as a state machine (KIP-429, KIP-70, KIP-345).

    Drive it with :meth:`handle` (events), :meth:`handle_timer` (at :meth:`next_deadline`) and
    :meth:`commit`; carry out the actions they return, in order. (Named ``GroupMember`` up to
    0.1.0; that name stays an alias for one release.)
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
        self.fatal_error: AiogroupError | None = None
        #: The last SyncGroup gave this member its assignment (False from the next JoinGroup).
        self._joined = False
        #: The topics the last JoinGroup subscribed to (a change asks for a rejoin).
        self._joined_topics: frozenset[str] | None = None
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._retry_at: float | None = None
        self._rebalance_start: float | None = None
        self._requests = Requests(config)
        self._interest = Interest(
            group_id=config.group_id,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        #: The racks of the partitions' replicas from the last metadata answer (KIP-881), when
        #: it carried them.
        self._partition_racks: PartitionRacks | None = None
        self._own = Ownership()
        self._live = Liveness(
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self._leader = Leadership(
            handover_wait=config.session_timeout_ms / 1000,
            receipt_wait=max(config.session_timeout_ms, config.rebalance_timeout_ms) / 1000,
        )
        self._leaving = Leaving()
        self._commits = Commits()

    # -- queries -----------------------------------------------------------------------------------

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member owns now (KIP-70: unchanged by subscribe until the
        rebalance revokes them)."""
        return self._own.owned

    @property
    def fetchable(self) -> frozenset[TopicPartition]:
        """Owned partitions the consumer may fetch: not pending revocation (KAFKA-14196) and not
        about to be reported lost."""
        return self._own.fetchable

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
        return self._live.session_deadline

    def may_act_on(self, now: float) -> frozenset[TopicPartition]:
        """The partitions the member may act on at ``now`` (fetch, process, commit positions).

        :attr:`fetchable` while ``now`` is before :attr:`session_deadline`; nothing once a
        session timeout has passed without an answer from the coordinator, in every state,
        until the coordinator answers again (KAFKA-7026).
        """
        return self._live.may_act_on(now, self._own.fetchable)

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader_id == self.member_id

    def offset_fetch_identity(self) -> tuple[str, int] | None:
        """None: a classic member's OffsetFetch names no member (the KIP-848 machine's does)."""
        return None

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topics subscribed to now (a regex is matched against the known metadata)."""
        return self._interest.subscribed

    @property
    def has_subscription(self) -> bool:
        return self._interest.has_subscription

    @property
    def missing_topics(self) -> frozenset[str]:
        """Topics we asked metadata for and the last answer lacked: refreshed with backoff."""
        return self._interest.missing

    @property
    def last_leader_plan(self) -> LeaderPlan | None:
        """The leader's view of its last assignment round (KIP-429 2a-2c), for logs and tests."""
        return self._leader.last_plan

    @property
    def undecodable_members(self) -> frozenset[str]:
        """Members whose metadata the leader could not decode in its last round."""
        return self._leader.undecodable_members

    @property
    def stale_claims(self) -> dict[str, frozenset[TopicPartition]]:
        """Claims the leader ignored in its last round: a member kept claiming partitions it
        had not been assigned in the previous round, which it must have received
        (``docs/safety.md``, "withheld partitions are always given out")."""
        return self._leader.stale_claims

    @property
    def _metadata_refresh_at(self) -> float | None:
        # (read by tests/client/test_missing_topic.py)
        return self._interest.refresh_at

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (``None``: only events matter)."""
        if self._state in QUIET:
            return None
        deadlines: list[float] = []
        if self._retry_at is not None:
            deadlines.append(self._retry_at)
        if self._leaving.close_by is not None:
            deadlines.append(self._leaving.close_by)
        if self._interest.refresh_at is not None:
            deadlines.append(self._interest.refresh_at)
        if self._heartbeat_enabled():
            if not self._requests.waiting(R.HEARTBEAT):
                deadlines.append(self._live.heartbeat_due())
            deadlines.append(self._live.session_expiry())
        lapse = self._live.lapse_to_note()
        if lapse is not None and self._own.owned:
            deadlines.append(lapse)  # may_act_on becomes empty then: wake the driver
        if self._leading_stable():
            followup = self._leader.follow_up_deadline(self.generation_id)
            if followup is not None:
                deadlines.append(followup)
        return min(deadlines) if deadlines else None

    # -- inputs ------------------------------------------------------------------------------------

    def handle(self, event: ev.Event, now: float) -> list[act.Action]:
        """Feed one event; return the actions to carry out, in order.

        Raises :class:`LocalProtocolError` if the event is not accepted in the current state.
        Stale responses (unknown token) are dropped and return no action.
        """
        if not accepts(
            event, self._state, answers=ANSWERS, accepted=ACCEPTED_EVENTS, tokens=self._requests
        ):
            return []  # stale (KAFKA-13406)
        out: Out = []
        _HANDLERS[type(event)](self, event, now, out)
        return out

    def handle_timer(self, now: float) -> list[act.Action]:
        """Wake the machine at (or after) :meth:`next_deadline`."""
        out: Out = []
        if self._state in QUIET:
            return out
        if self._leaving.expired(now):
            log.info("the rebalance did not finish before close's deadline: leaving now")
            self._start_leave(now, out, close=True)
            return out
        if self._live.note_lapse(now) and self._own.owned:
            log.warning(
                "no answer from the coordinator for a session timeout (state %s): acting on "
                "none of the %d owned partitions until it answers (KAFKA-7026)",
                self._state.name,
                len(self._own.owned),
            )
        if self._interest.refresh_due(now):
            self._request_metadata(out)
        if self._heartbeat_enabled():
            if now >= self._live.session_expiry():
                # Java marks the coordinator unknown when the session expires without a
                # successful heartbeat; rediscovering it tells us whether we are still in.
                log.info("session timeout expired without heartbeat response")
                self._coordinator_lost(now, out)
                return out
            if not self._requests.waiting(R.HEARTBEAT) and now >= self._live.heartbeat_due():
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
        coordinator is unknown. Offsets of partitions not owned raise
        PartitionNotAssignedError. See ``docs/safety.md``.
        """
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        in_generation = self.generation_id >= 0 and bool(self.member_id)
        refuse_commit(
            self._state,
            cooperative=cooperative,
            in_generation=in_generation,
            joined=self._joined,
            coordinator_known=self.coordinator_id is not None,
            fatal_error=self.fatal_error,
        )
        refuse_unowned(offsets, self._own.owned)
        # A cooperative member commits beside its held JoinGroup (CommitOffsets.during_join).
        during_join = cooperative and in_generation and self._requests.waiting(R.JOIN_GROUP)
        return self._commit_action(offsets, "user", during_join=during_join)

    # -- helpers -----------------------------------------------------------------------------------

    def _goto(self, new: MemberState) -> None:
        if new is self._state:
            return
        if new not in TRANSITIONS[self._state]:
            raise LocalProtocolError(f"illegal transition {self._state.name} -> {new.name}")
        self._state = new

    @property
    def _active(self) -> bool:
        """A member of a generation (joined, and holding its id and number)."""
        return self._joined and self.generation_id >= 0 and bool(self.member_id)

    def _heartbeat_enabled(self) -> bool:
        return (
            self._state in HEARTBEATING
            and self._joined
            and self.coordinator_id is not None
            and self.generation_id >= 0
        )

    def _leading_stable(self) -> bool:
        return self._state is S.STABLE and self.is_leader

    def _maybe_follow_up(self, now: float, out: Out) -> None:
        """Rebalance if partitions withheld in our last round may still be with nobody (see
        :meth:`Leadership.follow_up_due <aiogroup.membership.leader.Leadership.follow_up_due>`)."""
        if self._leading_stable() and self._leader.follow_up_due(self.generation_id, now):
            self._request_rejoin(
                "partitions withheld in the last rebalance are not handed over yet"
            )
            self._advance(now, out)

    def _request_rejoin(self, reason: str) -> None:
        if not self._rejoin_needed:
            self._rejoin_reason = reason
        self._rejoin_needed = True

    def _metadata_topics(self) -> frozenset[str] | None:
        group = self._leader.group_topics if self.is_leader else ()
        return self._interest.wanted((tp.topic for tp in self._own.owned), group)

    def _wants_racks(self) -> bool:
        """Whether the metadata must carry partition racks (KIP-881): we lead a round some of
        whose members have a rack."""
        return self.is_leader and self._leader.racked

    def _racks_cover(self, topics: frozenset[str]) -> bool:
        racks = self._partition_racks
        return racks is not None and all(t in racks for t in topics)

    def _request_metadata(self, out: Out) -> None:
        out.append(
            act.RequestMetadata(
                self._metadata_topics(), self._interest.pattern, racks=self._wants_racks()
            )
        )

    def _commit_action(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        purpose: CommitPurpose,
        *,
        during_join: bool = False,
        awaited: bool = False,
    ) -> act.CommitOffsets:
        action = self._requests.commit(
            self.member_id, self.generation_id, offsets, during_join=during_join
        )
        self._commits.add(
            action.token,
            self.member_id,
            self.generation_id,
            purpose,
            during_join=during_join,
            awaited=awaited,
        )
        return action

    def _callbacks(
        self,
        out: Out,
        *,
        revoked: frozenset[TopicPartition] = frozenset(),
        assigned: frozenset[TopicPartition] | None = None,
        lost: frozenset[TopicPartition] = frozenset(),
    ) -> None:
        out.append(
            self._requests.callbacks(
                self.protocol,
                self.member_id,
                self.generation_id,
                revoked=revoked,
                assigned=assigned,
                lost=lost,
            )
        )

    def _fail_rebalance(self, now: float, out: Out, error: AiogroupError, reason: str) -> None:
        """A round failed on our side: report ``error``, then rejoin after the backoff."""
        self._metrics.observe(FAILED_REBALANCE, 1.0, now)
        out.append(act.RaiseToUser(error))
        self._request_rejoin(reason)
        self._backoff(now)
        self._goto(S.UNJOINED)

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
        self._requests.abandon(R.HEARTBEAT)
        self._live.forget_proof()
        self._leader.forget()
        self._own.generation_reset()
        self._request_rejoin(reason)

    def _fatal(self, error: AiogroupError, out: Out) -> None:
        self.fatal_error = error
        self._live.forget_proof()
        self._leader.forget()
        self._requests.abandon_all()
        self._retry_at = None
        for token, _ in self._commits.drain():
            out.append(act.ResolveCommit(token, CommitFailedError(str(error))))
        self._own.abandon()
        lost = self._own.drop()
        self._goto(S.FATAL)
        if lost:
            # Whatever we owned is someone else's now: report it lost, then forget it.
            self._callbacks(out, lost=lost)
        out.append(act.RaiseToUser(error, fatal=True))
        if self._leaving.waiting:  # a close was waiting for the rebalance: it is over
            self._leaving.close_by = None
            self._goto(S.CLOSED)

    def _coordinator_lost(self, now: float, out: Out) -> None:
        self.coordinator_id = None
        self._live.coordinator_lost()
        if self._state in REBALANCING:
            self._goto(S.DISCOVERING)
        self._requests.abandon(R.FIND_COORDINATOR, R.HEARTBEAT)
        if self._requests.abandon(R.JOIN_GROUP, R.SYNC_GROUP):
            self._request_rejoin("coordinator lost during a rebalance")
        for token, pending in self._commits.drain():
            out.append(act.ResolveCommit(token, CoordinatorNotAvailableError()))
            self._after_commit(token, pending, now, out)
        if self._state is S.LEAVING:
            if self._leaving.phase == "leave":
                self._finish_leave(out)
            return
        if self._state in CALLBACK_STATES:
            return  # the callbacks (or the commit) finish first; their completion moves on
        self._advance(now, out)

    # -- the engine --------------------------------------------------------------------------------

    def _advance(self, now: float, out: Out) -> None:
        """Move toward STABLE from wherever nothing is in flight."""
        if self._state in _NO_ADVANCE:
            return
        if self._state in CALLBACK_STATES and (
            self._requests.waiting(R.CALLBACKS) or self._commits.awaiting("prepare")
        ):
            return
        if self._leave_due():
            self._start_leave(now, out, close=True)
            return
        if not self._interest.has_subscription:
            self._goto(S.UNJOINED)
            return
        if self.coordinator_id is None:
            self._goto(S.DISCOVERING)
            if not self._requests.waiting(R.FIND_COORDINATOR) and (
                self._retry_at is None or now >= self._retry_at
            ):
                self._retry_at = None
                out.append(self._requests.find_coordinator())
            return
        if self._interest.awaits_pattern_metadata:
            # A regex subscription needs metadata to know its topics before joining.
            self._wait()
            return
        needs_join = (
            self._rejoin_needed
            or self._own.owed_callbacks
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
        if self._active and self._state in (S.STABLE, S.DISCOVERING):
            self._goto(S.STABLE)
        else:
            self._goto(S.UNJOINED)

    def _prepare(self, now: float, out: Out) -> None:
        """Before JoinGroup (KIP-429 1a-1d, eager timeline steps 1-2)."""
        if self._rebalance_start is None:
            self._rebalance_start = now
        self._request_rejoin(self._rejoin_reason or "joining")
        self._goto(S.PREPARING)
        if self._requests.waiting(R.CALLBACKS) or self._commits.awaiting("prepare"):
            return  # a step of the preparation is in flight; its completion resumes here
        if self._leave_due():
            self._start_leave(now, out, close=True)  # a close waited for this point
            return
        if (
            self.config.enable_auto_commit
            and self._active
            and self.may_act_on(now)
            and not self._own.reset_pending
            and not self._commits.prepared
            and self.coordinator_id is not None
        ):
            # Java's onJoinPrepare commits consumed offsets (auto-commit only) while the
            # generation is still valid; not after a lapsed session, when the member may act
            # on nothing (KAFKA-7026: its partitions may be elsewhere by now).
            self._commits.prepared = True
            if self.protocol is RebalanceProtocol.COOPERATIVE:
                # KIP-429: we keep what we own through the join and may commit it while the
                # JoinGroup is pending, so the commit goes with the JoinGroup rather than
                # before it: round two of a rebalance waits for the JoinGroups of the members
                # that revoked, and until then the partitions that move have no owner. (What
                # this round revokes is committed by its revocation, before it is given up.)
                out.append(self._commit_action(None, "prepare", during_join=True))
            else:
                out.append(self._commit_action(None, "prepare", awaited=True))
                return
        given_up = self._own.give_up_before_join(
            eager=self.protocol is RebalanceProtocol.EAGER, subscribed=self.subscribed_topics
        )
        if given_up is not None:
            lost, revoked = given_up
            self._callbacks(out, revoked=revoked, lost=lost)
            return
        self._send_join(now, out)

    def _send_join(self, now: float, out: Out) -> None:
        if self.coordinator_id is None:
            self._goto(S.DISCOVERING)
            self._advance(now, out)
            return
        topics = self.subscribed_topics
        if self._leaving.join_sent():
            topics = frozenset()  # a hand-off: subscribe to nothing, claim what we own
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        action = self._requests.join_group(
            self.member_id,
            self.generation_id,
            topics=topics,
            owned=self._own.owned if cooperative else frozenset(),
            reason=self._rejoin_reason,
        )
        self._requests.abandon(R.HEARTBEAT)  # an answer from the old generation is stale now
        self._joined = False
        self._joined_topics = topics
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._commits.prepared = False
        self._live.join_sent(now)
        self._goto(S.JOINING)
        out.append(action)

    def _send_sync(self, now: float, out: Out, assignments: tuple[tuple[str, bytes], ...]) -> None:
        action = self._requests.sync_group(
            self.member_id, self.generation_id, self.protocol_name or "", assignments
        )
        self._live.sync_sent(now)
        self._goto(S.AWAITING_SYNC)
        out.append(action)

    def _send_heartbeat(self, now: float, out: Out) -> None:
        out.append(self._requests.heartbeat(self.member_id, self.generation_id))
        self._live.heartbeat_sent(now)

    def _leader_assign(self, now: float, out: Out) -> None:
        """KIP-429 2a-2f on the leader."""
        self._retry_at = None
        name = self.protocol_name or ""
        assignor = self._assignors[name]
        try:
            encoded = self._leader.plan(
                assignor,
                self.generation_id,
                self._interest.metadata or {},
                cooperative=self.protocol is RebalanceProtocol.COOPERATIVE,
                partition_racks=self._partition_racks if self._wants_racks() else None,
            )
        except Exception as exc:  # the assignor is user code
            error = AssignorError(f"assignor {name!r} failed: {exc!r}")
            error.__cause__ = exc
            self._fail_rebalance(now, out, error, "assignor failed")
            return
        self._send_sync(now, out, encoded)

    def _finish_assignment(self, now: float, out: Out) -> None:
        """KIP-429 3b + 3d: take the new assignment, on_assignment, then assigned."""
        rec = self._own.take_assignment()
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

    def _after_commit(self, token: int, pending: PendingCommit, now: float, out: Out) -> None:
        """A commit is over: the step that awaited it goes on."""
        purpose = self._commits.settled(token, pending)
        if purpose == "prepare" and self._state is S.PREPARING:
            self._prepare(now, out)
        elif purpose == "leave" and self._state is S.LEAVING:
            self._leave_callbacks(now, out)

    # -- leaving (KIP-70 unsubscribe, close) -------------------------------------------------------

    def _leave_due(self) -> bool:
        """A waiting close goes ahead now (see :meth:`Leaving.due
        <aiogroup.membership.leaving.Leaving.due>`)."""
        return self._leaving.due(
            ready=self._close_ready(),
            owns=bool(self._own.owned),
            leader_id=self.leader_id,
            is_leader=self.is_leader,
        )

    def _close_ready(self) -> bool:
        """A waiting close may go ahead: the final commit and revocation can happen in a
        generation the broker accepts, or there is nothing left to commit for."""
        return (
            not self._own.owned
            or self._own.reset_pending
            or (self._joined and self.generation_id >= 0 and self.coordinator_id is not None)
        )

    def _start_leave(
        self, now: float, out: Out, *, close: bool, lost: bool = False, reason: str = ""
    ) -> None:
        self._leaving.start(close=close, lost=lost, reason=reason)
        self._interest.refresh_at = None
        self._requests.abandon(
            R.FIND_COORDINATOR, R.JOIN_GROUP, R.SYNC_GROUP, R.HEARTBEAT, R.CALLBACKS
        )
        self._retry_at = None
        self._commits.stop_awaiting("prepare")
        self._own.abandon()
        self._goto(S.LEAVING)
        if (
            self.config.enable_auto_commit
            and self._active
            and self._own.owned  # nothing owned (e.g. after a hand-off): nothing to commit
            and self.may_act_on(now)
            and self.coordinator_id is not None
            and not lost
        ):
            # KIP-70: unsubscribe commits before clearing the assignment (auto-commit only);
            # not after a lapsed session (KAFKA-7026).
            self._leaving.phase = "commit"
            out.append(self._commit_action(None, "leave", awaited=True))
            return
        self._leave_callbacks(now, out)

    def _leave_callbacks(self, now: float, out: Out) -> None:
        self._leaving.phase = "callbacks"
        owned = self._own.owned
        if owned:
            if self._own.reset_pending or not self._joined or self._leaving.lost:
                self._callbacks(out, lost=owned)
            else:
                self._callbacks(out, revoked=owned)
            return
        self._leave_group(out)

    def _leave_group(self, out: Out) -> None:
        self._own.drop()
        self._leaving.phase = "leave"
        if (
            self.config.group_instance_id is None  # KIP-345: static members do not leave
            and self.member_id
            and self.coordinator_id is not None
        ):
            reason = self._leaving.request_reason()
            out.append(self._requests.leave_group(self.member_id, self.generation_id, reason))
            return
        self._finish_leave(out)

    def _finish_leave(self, out: Out) -> None:
        self._leaving.finished()
        self._requests.abandon(R.LEAVE_GROUP)
        self.generation_id = NO_GENERATION
        self.leader_id = ""
        self.member_id = ""  # as Java's resetGenerationOnLeaveGroup, static members included
        self._live.forget_proof()
        self._leader.forget()
        self._joined = False
        self._joined_topics = None
        self._rejoin_needed = False
        self._rejoin_reason = ""
        self._rebalance_start = None
        if self._leaving.close:
            for token, _ in self._commits.drain():
                out.append(act.ResolveCommit(token, CommitFailedError("the member closed")))
            self._goto(S.CLOSED)
        else:
            self._interest.unsubscribe()
            self._goto(S.UNJOINED)

    # -- event handlers (routed by _HANDLERS; responses arrive with their token checked) -----------

    def _on_subscription_changed(self, e: ev.SubscriptionChanged, now: float, out: Out) -> None:
        self._interest.subscribe(e.topics, e.pattern)
        # KIP-70: the assignment does not change now; the rebalance this asks for revokes.
        self._request_metadata(out)
        if self._interest.pattern is None and self._joined_topics != self.subscribed_topics:
            self._request_rejoin("subscription changed")
        if self._state in IDLE:
            self._advance(now, out)

    def _on_rejoin_requested(self, e: ev.RejoinRequested, now: float, out: Out) -> None:
        if not self.has_subscription or self._state in QUIET or self._leaving.hand_off:
            return  # nothing to rejoin (unsubscribed, leaving, closed or failed)
        self._request_rejoin(e.reason or "rebalance enforced by user")
        if self._state in IDLE:
            self._advance(now, out)

    def _on_unsubscribe(self, e: ev.UnsubscribeRequested, now: float, out: Out) -> None:
        if self._state is S.LEAVING:
            return
        if not self.has_subscription and not self._own.owned and not self.member_id:
            self._interest.unsubscribe()
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
            self._leaving.close = True
            return
        by = e.finish_rebalance_by
        if e.hand_off and self._leaving.hand_off:
            return  # handing off already
        if e.hand_off and self._may_hand_off(by, now):
            assert by is not None
            self._leaving.begin_hand_off(by)
            self._request_rejoin("handing partitions over before leaving")
            log.info(
                "handing %d partitions over before leaving (group %s, member %s)",
                len(self._own.owned),
                self.config.group_id,
                self.member_id,
            )
            if self._state in IDLE:
                self._advance(now, out)
            return  # a rebalance under way finishes first; _advance rejoins after it
        self._leaving.cancel_hand_off()  # a plain close ends a hand-off under way
        leave_now = (
            self._state is S.STABLE
            and self._joined
            and self.generation_id >= 0
            and self.coordinator_id is not None
        )
        if (
            by is not None
            and now < by
            and self._own.owned
            and not self._own.reset_pending
            and not leave_now
        ):
            # Better than Java's onLeavePrepare: finish the rebalance first, so the final
            # commit lands and the partitions are revoked rather than lost.
            self._leaving.wait_for_rebalance(by)
            return
        self._start_leave(now, out, close=True)

    def _may_hand_off(self, by: float | None, now: float) -> bool:
        return Leaving.may_hand_off(
            by,
            now,
            cooperative=self.protocol is RebalanceProtocol.COOPERATIVE,
            static=self.config.group_instance_id is not None,
            owns=bool(self._own.owned),
            reset_pending=self._own.reset_pending,
            member_id=self.member_id,
            coordinator_known=self.coordinator_id is not None,
            leader_withholds=self._leaving.leader_withholds(
                self.leader_id, is_leader=self.is_leader
            ),
        )

    def _on_metadata(self, e: ev.MetadataUpdated, now: float, out: Out) -> None:
        metadata = self._interest.update(e.partitions_per_topic)
        # An answer without racks (not asked for them) leaves none: racks are only as fresh
        # as the metadata they came with.
        self._partition_racks = e.partition_racks
        if self._state in QUIET:
            return
        asked = self._metadata_topics()
        self._interest.track_missing(now, asked)
        if self._state is S.AWAITING_METADATA:
            if self._wants_racks() and e.partition_racks is None:
                return  # an answer to an older request: wait for the one with racks
            self._leader_assign(now, out)
            return
        if not self.has_subscription:
            return
        # 1b: owned partitions that no longer exist are lost, not revoked.
        exists = existing_partitions(metadata)
        gone = (
            tp
            for tp in self._own.owned
            if tp not in exists and (asked is None or tp.topic in asked)
        )
        if self._own.vanished(gone):
            self._request_rejoin("owned partitions no longer exist")
        if self._interest.pattern is not None and self._joined_topics != self.subscribed_topics:
            self._request_rejoin("regex subscription matches other topics")
        if self.is_leader and self._leader.partitions_changed(metadata):
            self._request_rejoin("partitions of the group's topics changed")  # 1b, leader
        elif self.is_leader and self._leader.racks_changed(e.partition_racks):
            self._request_rejoin("replica racks of the group's partitions changed")  # KIP-881
        if self._state in IDLE:
            self._advance(now, out)

    def _on_coordinator_lost(self, e: ev.CoordinatorLost, now: float, out: Out) -> None:
        if self._state not in ENDED:
            self._coordinator_lost(now, out)

    def _on_coordinator_found(self, e: ev.CoordinatorFound, now: float, out: Out) -> None:
        self.coordinator_id = e.node_id
        self._live.coordinator_found(now)  # a fresh session window with the new coordinator
        self._advance(now, out)

    def _on_coordinator_lookup_failed(
        self, e: ev.CoordinatorLookupFailed, now: float, out: Out
    ) -> None:
        error = error_for_code(e.error_code)
        if not error.retriable and e.error_code > 0:
            out.append(act.RaiseToUser(error))
        self._backoff(now)

    def _on_join_completed(self, e: ev.JoinGroupCompleted, now: float, out: Out) -> None:
        if e.protocol_name not in self._assignors or e.generation_id < 0 or not e.member_id:
            error = RemoteProtocolError(
                f"JoinGroup chose protocol {e.protocol_name!r} (generation "
                f"{e.generation_id}, member {e.member_id!r}) that this member cannot run"
            )
            self._fail_rebalance(now, out, error, "unusable JoinGroup response")
            return
        self.member_id = e.member_id
        self.generation_id = e.generation_id
        self.leader_id = e.leader
        self.protocol_name = e.protocol_name
        self._live.join_answered()
        if not self.is_leader:
            self._leader.follower()
            self._send_sync(now, out, ())
            return
        group_topics = self._leader.joined(e.members)
        metadata = self._interest.metadata
        if (
            metadata is None
            or not group_topics <= set(metadata)
            or (self._wants_racks() and not self._racks_cover(group_topics & metadata.keys()))
        ):
            # The leader assigns from metadata covering every member's topics. It waits at
            # most one heartbeat interval; after that, missing topics count as absent (a
            # later metadata update makes the leader rejoin, KIP-429 1b).
            self._goto(S.AWAITING_METADATA)
            self._retry_at = now + self._live.interval
            self._request_metadata(out)
            return
        self._leader_assign(now, out)

    def _on_join_failed(self, e: ev.JoinGroupFailed, now: float, out: Out) -> None:
        if e.error_code == MEMBER_ID_REQUIRED:
            # 1e (KIP-394): take the id the coordinator gave us and join again at once.
            self.member_id = e.member_id
            self._request_rejoin("member id required")
            self._goto(S.UNJOINED)
            self._advance(now, out)
            return
        self._metrics.observe(FAILED_REBALANCE, 1.0, now)
        self._group_error(e.error_code, "JoinGroup", now, out)

    def _on_sync_completed(self, e: ev.SyncGroupCompleted, now: float, out: Out) -> None:
        self._live.sync_answered()
        self._leader.synced(self.generation_id, now)  # a round we led is complete
        try:
            # No bytes at all means nothing assigned: the coordinator answers a member the
            # leader's SyncGroup left out with an empty array, and librdkafka's leader leaves
            # out members it gives no partitions (a member handing off, or more members than
            # partitions).
            assignment = decode_assignment(e.assignment) if e.assignment else Assignment()
        except AiogroupError as exc:
            error = RemoteProtocolError(f"undecodable assignment: {exc}")
            self._fail_rebalance(now, out, error, "undecodable assignment")
            return
        marks = leader_marks(assignment)
        assignment = without_marks(assignment)
        assigned = frozenset(to_topic_partitions(assignment.partitions))
        self._leaving.synced(self.leader_id, marks)
        self._joined = True
        # KIP-429: a follow-up round may come right after this one (see Liveness.heartbeat_due)
        cooperative = self.protocol is RebalanceProtocol.COOPERATIVE
        self._live.synced(now, prompt=cooperative, fast=FOLLOW_UP in marks)
        self._goto(S.RECONCILING)
        rec = self._own.reconcile(assignment, assigned)
        subscribed = self.subscribed_topics
        if self._interest.pattern is None and any(tp.topic not in subscribed for tp in assigned):
            self._request_rejoin("assigned topics we do not subscribe to")
        if rec.revoked:
            # 3c: revoke first, then rejoin so the partitions reach their new owner. The
            # rejoin waits until this rebalance is complete (KAFKA-14382).
            self._request_rejoin("partitions revoked in the last rebalance")
            self._callbacks(out, revoked=rec.revoked)
            return
        self._finish_assignment(now, out)

    def _on_sync_failed(self, e: ev.SyncGroupFailed, now: float, out: Out) -> None:
        self._metrics.observe(FAILED_REBALANCE, 1.0, now)
        self._group_error(e.error_code, "SyncGroup", now, out)

    def _group_error(self, code: int, api: str, now: float, out: Out) -> None:
        """The per-error reactions for JoinGroup / SyncGroup (Java's matrix)."""
        self._request_rejoin(f"{api} failed with error {code}")
        if code == FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError(f"{api}: group_instance_id fenced"), out)
            return
        if code in _COORDINATOR_MOVED:
            self.coordinator_id = None
            self._requests.abandon(R.HEARTBEAT)
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
        if not self._live.heartbeat_ok(now):
            # The session lapsed across a coordinator change: this NONE may be blind (see
            # Liveness.heartbeat_ok). Rejoin: the JoinGroup answer proves membership or not.
            if self._state is S.STABLE:
                self._request_rejoin("session lapsed across a coordinator change")
                self._advance(now, out)
            return
        if self._leader.heartbeat_ok(self.generation_id, self._live.heartbeat_sent_at):
            self._maybe_follow_up(now, out)

    def _on_heartbeat_failed(self, e: ev.HeartbeatFailed, now: float, out: Out) -> None:
        code = e.error_code
        if code == FENCED_INSTANCE_ID:
            self._fatal(FencedInstanceIdError("Heartbeat: group_instance_id fenced"), out)
            return
        if code in _COORDINATOR_MOVED:
            self._coordinator_lost(now, out)
            return
        if code == REBALANCE_IN_PROGRESS:
            self._live.heartbeat_rebalancing(now)
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
            self._live.heartbeat_retry(now)  # after the retry backoff, not a whole interval
            return
        if self._state is S.STABLE:
            self._advance(now, out)
        elif self._state is S.PREPARING:
            self._prepare(now, out)

    def _on_leave_completed(self, e: ev.LeaveGroupCompleted, now: float, out: Out) -> None:
        self._finish_leave(out)

    def _on_commit_completed(self, e: ev.CommitCompleted, now: float, out: Out) -> None:
        pending = self._commits.pop(e.token)
        if pending is None:
            return
        out.append(act.ResolveCommit(e.token, None))
        self._after_commit(e.token, pending, now, out)

    def _on_commit_failed(self, e: ev.CommitFailed, now: float, out: Out) -> None:
        pending = self._commits.pop(e.token)
        if pending is None:
            return
        code = e.error_code
        error = commit_error(code, during_join=pending.during_join)
        if code == FENCED_INSTANCE_ID:
            out.append(act.ResolveCommit(e.token, error))
            if self._state not in ENDED:
                self._fatal(FencedInstanceIdError("OffsetCommit: group_instance_id fenced"), out)
            return
        # A commit sent while our JoinGroup was in flight says nothing new about our
        # membership: the JoinGroup's own answer does (and the generation may have moved on
        # through that very join before the commit arrived).
        current = (
            pending.generation_id == self.generation_id
            and pending.member_id == self.member_id
            and self._state not in ENDED
            and not pending.during_join
        )
        if code in (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION):
            if current and self._state is not S.LEAVING:
                self._reset_generation(
                    reset_member_id=code == UNKNOWN_MEMBER_ID, reason=f"OffsetCommit: {code}"
                )
            elif current:
                self._own.reset_pending = bool(self._own.owned)
        elif code == REBALANCE_IN_PROGRESS:
            if current and self._state is not S.LEAVING:
                self._request_rejoin("OffsetCommit: REBALANCE_IN_PROGRESS")  # 1c
        elif code in _COORDINATOR_MOVED and current and self.coordinator_id is not None:
            out.append(act.ResolveCommit(e.token, error))
            self._after_commit(e.token, pending, now, out)
            if self._state not in QUIET:
                self._coordinator_lost(now, out)
            return
        out.append(act.ResolveCommit(e.token, error))
        self._after_commit(e.token, pending, now, out)
        if self._state is S.STABLE:
            self._advance(now, out)

    def _on_callbacks_finished(self, e: ev.CallbacksFinished, now: float, out: Out) -> None:
        if (raised := callback_error(e.first_error)) is not None:
            out.append(raised)
        if self._state is S.PREPARING:
            self._own.given_up()  # the revoked/lost partitions are gone whatever happened
            if self.coordinator_id is None:
                self._goto(S.DISCOVERING)
                self._advance(now, out)
                return
            self._prepare(now, out)
        elif self._state is S.RECONCILING:
            if self._own.revoking:
                self._own.revoked()  # 3c done: the revoked partitions are gone; now 3b/3d
                self._finish_assignment(now, out)
                return
            self._own.reconciled()
            self._goto(S.STABLE)
            if self._rebalance_start is not None:
                self._metrics.observe(REBALANCE_LATENCY, now - self._rebalance_start, now)
                self._rebalance_start = None
            self._advance(now, out)
            self._maybe_follow_up(now, out)
        elif self._state is S.LEAVING:
            self._leave_group(out)


M = MembershipMachine

#: Which handler takes each event (user events are checked against ACCEPTED_EVENTS first,
#: responses against the request the machine waits for, see ANSWERS).
_HANDLERS: dict[type[ev.Event], Callable[[MembershipMachine, Any, float, Out], None]] = {
    ev.SubscriptionChanged: M._on_subscription_changed,
    ev.UnsubscribeRequested: M._on_unsubscribe,
    ev.RejoinRequested: M._on_rejoin_requested,
    ev.CloseRequested: M._on_close,
    ev.MetadataUpdated: M._on_metadata,
    ev.CoordinatorLost: M._on_coordinator_lost,
    ev.CoordinatorFound: M._on_coordinator_found,
    ev.CoordinatorLookupFailed: M._on_coordinator_lookup_failed,
    ev.JoinGroupCompleted: M._on_join_completed,
    ev.JoinGroupFailed: M._on_join_failed,
    ev.SyncGroupCompleted: M._on_sync_completed,
    ev.SyncGroupFailed: M._on_sync_failed,
    ev.HeartbeatCompleted: M._on_heartbeat_completed,
    ev.HeartbeatFailed: M._on_heartbeat_failed,
    ev.LeaveGroupCompleted: M._on_leave_completed,
    ev.CommitCompleted: M._on_commit_completed,
    ev.CommitFailed: M._on_commit_failed,
    ev.CallbacksFinished: M._on_callbacks_finished,
}

#: The machine's name up to 0.1.0, kept as an alias for one release: the same class as
#: :class:`MembershipMachine` (the asyncio driver :class:`aiogroup.client.GroupMember` keeps its
#: name).
GroupMember = MembershipMachine

# bench/bench_leader.py times the leader's phases as the machine runs them.
_announce_hand_off_aware = announce_hand_off_aware
