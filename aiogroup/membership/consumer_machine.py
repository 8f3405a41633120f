"""The sans-I/O KIP-848 group member: the consumer group protocol, events in, actions out.

:class:`ConsumerProtocolMachine` is one member of a consumer group under the consumer group
protocol (``group.protocol=consumer``, Kafka 4.0+). The coordinator assigns; the member sends
one request, ConsumerGroupHeartbeat, which joins (member epoch 0), keeps the session,
carries subscription changes and acknowledges what the member owns, and leaves (epoch -1, or
-2 for a static member). It is driven like the classic machine
(:mod:`aiogroup.membership`): the same events and actions, but for
:class:`~aiogroup.membership.consumer_events.SendConsumerGroupHeartbeat` and its two answers,
and the same queries, so the asyncio driver (:class:`aiogroup.client.GroupMember`) and the
consumer run over either (:class:`~aiogroup.membership.interface.Machine`).

It keeps its state table (:mod:`~aiogroup.membership.consumer_states`) and routes each event;
what has a meaning in both protocols is the classic machine's parts, used as they are:
:class:`~aiogroup.membership.liveness.Liveness` (the KAFKA-7026 session proof, the heartbeat
schedule at the broker's interval), :class:`~aiogroup.membership.ownership.Ownership` (owned,
revoked, lost; revoke before assign), :class:`~aiogroup.membership.commits.Commits`,
:class:`~aiogroup.membership.interest.Interest` (the subscription, metadata, topic ids),
:class:`~aiogroup.membership.leaving.Leaving` (a close that waits, the leave's phases) and
:class:`~aiogroup.membership.requests.Tokens`. Its own parts:
:class:`~aiogroup.membership.target.Target` (the coordinator's assignment by topic id) and
:class:`~aiogroup.membership.heartbeat_fields.HeartbeatFields` (what the next heartbeat
carries).

KIP-848's client rules, as here:

- **Reconcile**: revoke first (the revoked callback, where the consumer commits), then assign
  (the assigned callback, with what is added, even empty after a join), then acknowledge: the
  next heartbeat, sent at once, reports what the member owns. One reconciliation at a time; a
  target that changed meanwhile is reconciled next. Topic ids are named from metadata; a target
  topic not resolvable yet waits for the metadata, asked again with backoff.
- **Fenced** (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or **the session lapsed** (no heartbeat
  answered within ``session_timeout_ms`` of the last one that was, KAFKA-7026): the member acts
  on nothing from that moment, reports everything it owns lost, then rejoins with epoch 0 and
  its member id (KIP-1082: the id is the client's, for its whole life).
- **Fatal**: UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, UNSUPPORTED_ASSIGNOR,
  GROUP_MAX_SIZE_REACHED, INVALID_REGULAR_EXPRESSION, INVALID_REQUEST,
  GROUP_AUTHORIZATION_FAILED, UNSUPPORTED_VERSION and any code it does not know, as Java's
  consumer; what it owned is reported lost.
- **Commits** carry the member epoch (OffsetCommit v9); one refused STALE_MEMBER_EPOCH goes
  again with the newer epoch when the member has it and still owns the partitions.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.config import GROUP_DEFAULTS, GroupConfig, check_values
from aiogroup.errors import (
    AiogroupError,
    CommitFailedError,
    ConfigurationError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupAuthorizationFailedError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    LocalProtocolError,
    NotCoordinatorError,
    StaleMemberEpochError,
    TopicAuthorizationFailedError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedApiVersionError,
    UnsupportedAssignorError,
    error_for_code,
)
from aiogroup.membership import actions as act
from aiogroup.membership import consumer_events as cev
from aiogroup.membership import events as ev
from aiogroup.membership.commits import (
    CommitPurpose,
    Commits,
    PendingCommit,
    commit_error,
    refuse_commit,
    refuse_unowned,
)
from aiogroup.membership.consumer_states import (
    ACCEPTED_EVENTS,
    ANSWERS,
    CALLBACK_STATES,
    ENDED,
    HEARTBEATING,
    MEMBER,
    QUIET,
    TRANSITIONS,
)
from aiogroup.membership.heartbeat_fields import HeartbeatFields, Subscribed
from aiogroup.membership.interest import Interest
from aiogroup.membership.leaving import Leaving
from aiogroup.membership.liveness import Liveness
from aiogroup.membership.ownership import Ownership
from aiogroup.membership.regex import to_re2
from aiogroup.membership.requests import Tokens
from aiogroup.membership.routing import accepts, callback_error
from aiogroup.membership.states import MemberState, Request
from aiogroup.membership.target import Target
from aiogroup.observability.metrics import (
    FAILED_REBALANCE,
    REBALANCE_LATENCY,
    MetricsSink,
    NullMetrics,
)
from aiogroup.protocol import Assignment, TopicPartition
from aiogroup.protocol.types import NO_GENERATION

__all__ = ["ConsumerMemberConfig", "ConsumerProtocolMachine"]

log = logging.getLogger("aiogroup.membership")

S = MemberState
R = Request
Out = list[act.Action]

_COORDINATOR_MOVED = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})
_FENCED = frozenset({FencedMemberEpochError.code, UnknownMemberIdError.code})
_UNSUPPORTED_VERSION = 35
#: Answered to a member joining a classic group that Kafka will not convert into a consumer
#: group (KIP-848's online upgrade: the migration policy, the protocol type, the group's size,
#: assignment user data).
_GROUP_ID_NOT_FOUND = 69
_NOT_CONVERTED = (
    " (the group is a classic group that the broker would not convert to the consumer "
    "protocol: its group.consumer.migration.policy, a protocol type other than 'consumer', "
    "more members than group.consumer.max.size, or assignments carrying a custom assignor's "
    "user data, which the consumer protocol would lose; for the last, stop the group and "
    "start it again with group_protocol='consumer' (an empty group always converts), or "
    "roll the classic members onto a built-in assignor first; `aiogroup group describe` "
    "says which, docs/migration.md)"
)
#: Heartbeat answers that end the member (Java's consumer: fatal), with the error to raise.
_FATAL: dict[int, type[AiogroupError]] = {
    FencedInstanceIdError.code: FencedInstanceIdError,
    UnreleasedInstanceIdError.code: UnreleasedInstanceIdError,
    UnsupportedAssignorError.code: UnsupportedAssignorError,
    GroupMaxSizeReachedError.code: GroupMaxSizeReachedError,
    InvalidRegularExpressionError.code: InvalidRegularExpressionError,
    GroupAuthorizationFailedError.code: GroupAuthorizationFailedError,
}


@dataclass(frozen=True, slots=True)
class ConsumerMemberConfig:
    """How a KIP-848 member behaves. Times in milliseconds, as Kafka's configs.

    ``member_id`` is the client's (KIP-1082: generated once by the driver, kept for the
    member's life). ``session_timeout_ms`` is the KAFKA-7026 bound of acting without an
    answered heartbeat (the broker's ``group.consumer.session.timeout.ms`` decides eviction:
    give the same); ``heartbeat_interval_ms`` is used only until the broker's first answer
    gives its own. ``remote_assignor``: the broker's assignor (None: its default).
    """

    group_id: str
    member_id: str
    group_instance_id: str | None = GROUP_DEFAULTS.group_instance_id
    session_timeout_ms: int = GROUP_DEFAULTS.session_timeout_ms
    rebalance_timeout_ms: int = GROUP_DEFAULTS.rebalance_timeout
    heartbeat_interval_ms: int = GROUP_DEFAULTS.heartbeat_interval_ms
    retry_backoff_ms: int = GROUP_DEFAULTS.retry_backoff_ms
    retry_backoff_max_ms: int = GROUP_DEFAULTS.retry_backoff_max_ms
    enable_auto_commit: bool = True
    rack_id: str | None = GROUP_DEFAULTS.rack_id
    remote_assignor: str | None = GROUP_DEFAULTS.group_remote_assignor

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigurationError("group_id must not be empty")
        if not self.member_id:
            raise ConfigurationError("member_id must not be empty (KIP-1082: the client's own)")
        check_values(
            {
                "group_instance_id": self.group_instance_id,
                "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms,
                "heartbeat_interval_ms": self.heartbeat_interval_ms,
                "retry_backoff_ms": self.retry_backoff_ms,
                "retry_backoff_max_ms": self.retry_backoff_max_ms,
                "rack_id": self.rack_id,
                "group_remote_assignor": self.remote_assignor,
            }
        )

    @classmethod
    def of(
        cls, config: GroupConfig, *, group_id: str, member_id: str, enable_auto_commit: bool
    ) -> ConsumerMemberConfig:
        """The machine's configuration from a driver's (already checked) options."""
        return cls(
            group_id=group_id,
            member_id=member_id,
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            enable_auto_commit=enable_auto_commit,
            rack_id=config.rack_id,
            remote_assignor=config.group_remote_assignor,
        )


class ConsumerProtocolMachine:
    """One member of a KIP-848 consumer group, as a state machine.

    Drive it with :meth:`handle` (events), :meth:`handle_timer` (at :meth:`next_deadline`) and
    :meth:`commit`; carry out the actions they return, in order.
    """

    #: What the callbacks get is incremental (assigned: what is added), as under KIP-429.
    protocol = RebalanceProtocol.COOPERATIVE
    group_protocol = "consumer"

    def __init__(self, config: ConsumerMemberConfig, *, metrics: MetricsSink | None = None) -> None:
        self.config = config
        self._metrics: MetricsSink = metrics if metrics is not None else NullMetrics()
        self._state = S.UNJOINED
        self.member_id = config.member_id
        #: The member epoch (0: not a member; the next heartbeat joins).
        self.member_epoch = 0
        self.leader_id = ""
        self.protocol_name: str | None = config.remote_assignor
        self.coordinator_id: int | None = None
        self.fatal_error: AiogroupError | None = None
        self._regex: str | None = None
        #: Topic ids of the target the metadata does not know yet (asked again with backoff).
        self._unresolved: frozenset[uuid.UUID] = frozenset()
        #: The next assignment is the first since (re)joining: its assigned callback runs even
        #: when it adds nothing (a join always ends with one).
        self._first_since_join = True
        self._retry_at: float | None = None
        self._rebalance_start: float | None = None
        self._tokens = Tokens(config.group_id, config.group_instance_id)
        self._interest = Interest(
            group_id=config.group_id,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
        )
        self._own = Ownership()
        self._live = Liveness(
            session_timeout_ms=config.session_timeout_ms,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
        )
        self._leaving = Leaving()
        self._commits = Commits()
        self._target = Target()
        self._fields = HeartbeatFields(
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            server_assignor=config.remote_assignor,
            rack_id=config.rack_id,
        )

    # -- queries (those of the classic machine, see aiogroup.membership.interface) ----------------

    @property
    def state(self) -> MemberState:
        return self._state

    @property
    def generation_id(self) -> int:
        """The member epoch while a member (it stands where the classic protocol has the
        generation: commits, callbacks, telemetry), else -1."""
        return self.member_epoch if self.member_epoch > 0 else NO_GENERATION

    @property
    def assignment(self) -> frozenset[TopicPartition]:
        """The partitions this member owns now."""
        return self._own.owned

    @property
    def fetchable(self) -> frozenset[TopicPartition]:
        """Owned partitions not being revoked, and nothing once fenced."""
        return self._own.fetchable

    @property
    def session_deadline(self) -> float | None:
        """Until when the member may act on what it owns (KAFKA-7026): the send time of the
        last heartbeat the coordinator answered as to this member at its epoch, plus
        ``session_timeout_ms``; ``None`` outside the group."""
        return self._live.session_deadline

    def may_act_on(self, now: float) -> frozenset[TopicPartition]:
        """:attr:`fetchable` before :attr:`session_deadline`, nothing after it."""
        return self._live.may_act_on(now, self._own.fetchable)

    @property
    def is_leader(self) -> bool:
        return False  # the coordinator assigns (KIP-848)

    @property
    def subscribed_topics(self) -> frozenset[str]:
        """The topics subscribed to (a regex: those of the known metadata it matches; the
        broker evaluates it, and its answer is what is assigned)."""
        return self._interest.subscribed

    @property
    def has_subscription(self) -> bool:
        return self._interest.has_subscription

    @property
    def missing_topics(self) -> frozenset[str]:
        return self._interest.missing

    @property
    def heartbeat_interval(self) -> float:
        """The heartbeat interval in seconds (the broker's, from its last answer)."""
        return self._live.interval

    @property
    def last_leader_plan(self) -> None:
        return None

    @property
    def stale_claims(self) -> dict[str, frozenset[TopicPartition]]:
        return {}

    def offset_fetch_identity(self) -> tuple[str, int] | None:
        """``(member id, member epoch)`` for OffsetFetch v9+ while a member (the coordinator
        then refuses a fetch of a member it fenced), else None."""
        return (self.member_id, self.member_epoch) if self.member_epoch > 0 else None

    def next_deadline(self) -> float | None:
        """When :meth:`handle_timer` must next be called (``None``: only events matter)."""
        if self._state in QUIET:
            return None
        deadlines: list[float] = []
        for at in (self._retry_at, self._leaving.close_by, self._interest.refresh_at):
            if at is not None:
                deadlines.append(at)
        if self._heartbeat_enabled() and not self._tokens.waiting(R.HEARTBEAT):
            deadlines.append(self._live.heartbeat_due())
        lapse = self._live.lapse_to_note()
        if lapse is not None and self.member_epoch > 0:
            deadlines.append(lapse)  # the member acts on nothing from then: fence it then
        return min(deadlines) if deadlines else None

    # -- inputs ------------------------------------------------------------------------------------

    def handle(self, event: ev.Event, now: float) -> list[act.Action]:
        """Feed one event; return the actions to carry out, in order (stale responses: none).
        Raises :class:`LocalProtocolError` if the event is not accepted in the current state."""
        if not accepts(
            event, self._state, answers=ANSWERS, accepted=ACCEPTED_EVENTS, tokens=self._tokens
        ):
            return []  # stale (KAFKA-13406)
        out: Out = []
        _HANDLERS[type(event)](self, event, now, out)
        self._advance(now, out)
        return out

    def handle_timer(self, now: float) -> list[act.Action]:
        """Wake the machine at (or after) :meth:`next_deadline`."""
        out: Out = []
        if self._state in QUIET:
            return out
        if self._leaving.expired(now):
            log.info("the reconciliation did not finish before close's deadline: leaving now")
            self._start_leave(now, out, close=True)
            return out
        if self.member_epoch > 0 and self._live.note_lapse(now):
            # KAFKA-7026: no heartbeat answered for a session timeout; the broker has likely
            # evicted us (its group.consumer.session.timeout.ms): our partitions are lost.
            self._fence(now, out, "no heartbeat answered within the session timeout")
        if self._interest.refresh_due(now):
            self._request_metadata(out, all_topics=bool(self._unresolved))
        if self._retry_at is not None and now >= self._retry_at:
            self._retry_at = None
        self._advance(now, out)
        return out

    def commit(self, offsets: Mapping[TopicPartition, int] | None, now: float) -> act.CommitOffsets:
        """Ask to commit ``offsets`` (``None``: the consumed positions) with the member epoch.

        The coordinator takes a member's commit at its current epoch whatever the state of its
        reconciliation: refused here only when closed or fatal, when not a member
        (RebalanceInProgressError while it joins, else CommitFailedError), while the
        coordinator is unknown, or for partitions it does not own (PartitionNotAssignedError).
        """
        refuse_commit(
            self._state,
            cooperative=True,
            in_generation=self.member_epoch > 0,
            joined=self.member_epoch > 0,
            coordinator_known=self.coordinator_id is not None,
            fatal_error=self.fatal_error,
        )
        refuse_unowned(offsets, self._own.owned)
        return self._commit_action(offsets, "user")

    # -- helpers -----------------------------------------------------------------------------------

    def _goto(self, new: MemberState) -> None:
        if new is self._state:
            return
        if new not in TRANSITIONS[self._state]:
            raise LocalProtocolError(f"illegal transition {self._state.name} -> {new.name}")
        self._state = new

    def _heartbeat_enabled(self) -> bool:
        """A heartbeat may go: the one that joins, or a member's (not a fenced one's)."""
        return (
            self._state in HEARTBEATING
            and (self._state is S.JOINING or self.member_epoch > 0)
            and self.coordinator_id is not None
            and self._interest.has_subscription
            and self._retry_at is None
        )

    def _subscribed(self) -> Subscribed:
        if self._regex is not None:
            return None, self._regex
        return self._interest.topics or frozenset(), None

    def _request_metadata(self, out: Out, *, all_topics: bool = False) -> None:
        topics = None if all_topics else self._interest.wanted(tp.topic for tp in self._own.owned)
        out.append(act.RequestMetadata(topics, None, topic_ids=True))

    def _commit_action(
        self,
        offsets: Mapping[TopicPartition, int] | None,
        purpose: CommitPurpose,
        *,
        awaited: bool = False,
        token: int | None = None,
    ) -> act.CommitOffsets:
        action = self._tokens.commit(
            self.member_id, self.member_epoch, offsets, during_join=False, token=token
        )
        self._commits.add(
            action.token,
            self.member_id,
            self.member_epoch,
            purpose,
            awaited=awaited,
            offsets=offsets,
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
            self._tokens.callbacks(
                self.protocol,
                self.member_id,
                self.generation_id,
                revoked=revoked,
                assigned=assigned,
                lost=lost,
            )
        )

    def _backoff(self, now: float) -> None:
        self._retry_at = now + self.config.retry_backoff_ms / 1000

    # -- the engine --------------------------------------------------------------------------------

    def _advance(self, now: float, out: Out) -> None:
        """Move on from wherever nothing is in flight (leave when a waiting close may, find the
        coordinator, join, reconcile), and heartbeat when one is due: callbacks under way hold
        the moving on, never the heartbeats."""
        if self._state in QUIET:
            return
        if not (self._state in CALLBACK_STATES and self._tokens.waiting(R.CALLBACKS)):
            self._move_on(now, out)
        if self._state not in QUIET:
            self._maybe_heartbeat(now, out)

    def _move_on(self, now: float, out: Out) -> None:
        if self._leaving.due(ready=True, owns=bool(self._own.owned), leader_id="", is_leader=False):
            self._start_leave(now, out, close=True)
            return
        if not self._interest.has_subscription:
            if self.member_epoch <= 0:
                self._goto(S.UNJOINED)
            return
        if self.coordinator_id is None:
            if self.member_epoch <= 0:
                self._goto(S.DISCOVERING)
            if not self._tokens.waiting(R.FIND_COORDINATOR) and self._retry_at is None:
                out.append(self._tokens.find_coordinator())
            return
        if self.member_epoch <= 0 and self._state is not S.JOINING:
            if self._retry_at is not None:
                self._goto(S.UNJOINED)
                return
            self._join(now)
        if self._state is S.STABLE:
            self._maybe_reconcile(now, out)

    def _join(self, now: float) -> None:
        """Join (or rejoin) with epoch 0: a full heartbeat, at once."""
        self._goto(S.JOINING)
        self._fields.reset()
        self._target.forget()
        self._first_since_join = True
        if self._rebalance_start is None:
            self._rebalance_start = now
        self._live.heartbeat_now(now)

    def _maybe_heartbeat(self, now: float, out: Out) -> None:
        if not self._heartbeat_enabled() or self._tokens.waiting(R.HEARTBEAT):
            return
        owned = self._target.by_id(self._own.owned)
        if self._state in MEMBER and self._fields.unacknowledged(owned):
            self._live.heartbeat_now(now)  # KIP-848: acknowledge at once
        if now < self._live.heartbeat_due():
            return
        fields = self._fields.next(subscribed=self._subscribed(), owned=owned)
        out.append(
            cev.SendConsumerGroupHeartbeat(
                token=self._tokens.send(R.HEARTBEAT),
                group_id=self.config.group_id,
                member_id=self.member_id,
                member_epoch=self.member_epoch,
                group_instance_id=self.config.group_instance_id,
                **fields,
            )
        )
        self._live.heartbeat_sent(now)

    def _maybe_reconcile(self, now: float, out: Out) -> None:
        """KIP-848's reconciliation of the target, from STABLE: revoke, then assign."""
        if self._target.partitions is None:
            return
        resolved, unresolved = self._target.resolve(self._interest.topic_ids)
        self._unresolved = unresolved
        if unresolved and self._interest.refresh_at is None:
            log.debug("assigned topic ids %s not in metadata yet: asking", sorted(unresolved))
            self._interest.track_missing(now, self._interest.wanted(()), unresolved=True)
            self._request_metadata(out, all_topics=True)
        if resolved == self._own.owned and not self._first_since_join:
            return
        self._first_since_join = False
        if self._rebalance_start is None:
            self._rebalance_start = now
        self._goto(S.RECONCILING)
        rec = self._own.reconcile(Assignment(), resolved)
        if rec.revoked:
            self._callbacks(out, revoked=rec.revoked)  # revoke first (the consumer commits)
            return
        self._assign(out)

    def _assign(self, out: Out) -> None:
        rec = self._own.take_assignment()
        self._callbacks(out, assigned=rec.added)

    def _fence(self, now: float, out: Out, reason: str) -> None:
        """Fenced, or the session lapsed: act on nothing, report everything lost, rejoin."""
        log.info(
            "group %s: member %s fenced at epoch %d (%s): its %d partitions are lost; "
            "rejoining with epoch 0",
            self.config.group_id,
            self.member_id,
            self.member_epoch,
            reason,
            len(self._own.owned),
        )
        self._metrics.observe(FAILED_REBALANCE, 1.0, now)
        self._tokens.abandon(R.HEARTBEAT)
        self.member_epoch = 0
        self._live.forget_proof()
        self._target.forget()
        self._fields.reset()
        self._own.generation_reset()
        if self._state in CALLBACK_STATES and self._tokens.waiting(R.CALLBACKS):
            return  # the callbacks under way finish first; then the lost ones run
        self._lose_all(out)

    def _lose_all(self, out: Out) -> None:
        """The lost callbacks of a fenced member, before it rejoins (PREPARING); with nothing
        owned it rejoins at once (:meth:`_advance`)."""
        self._own.abandon()
        given_up = self._own.give_up_before_join(eager=True, subscribed=frozenset())
        if given_up is None:
            return
        lost, revoked = given_up
        self._goto(S.PREPARING)
        self._callbacks(out, lost=lost | revoked)

    def _fatal(self, error: AiogroupError, out: Out) -> None:
        self.fatal_error = error
        self._live.forget_proof()
        self._tokens.abandon_all()
        self._retry_at = None
        self.member_epoch = 0
        for token, _ in self._commits.drain():
            out.append(act.ResolveCommit(token, CommitFailedError(str(error))))
        self._own.abandon()
        lost = self._own.drop()
        self._goto(S.FATAL)
        if lost:
            self._callbacks(out, lost=lost)
        out.append(act.RaiseToUser(error, fatal=True))
        if self._leaving.waiting:
            self._leaving.close_by = None
            self._goto(S.CLOSED)

    def _coordinator_lost(self, now: float, out: Out) -> None:
        self.coordinator_id = None
        self._fields.reset()
        self._tokens.abandon(R.FIND_COORDINATOR, R.HEARTBEAT)
        for token, pending in self._commits.drain():
            out.append(act.ResolveCommit(token, CoordinatorNotAvailableError()))
            self._after_commit(token, pending, now, out)
        if self._state is S.LEAVING and self._leaving.phase == "leave":
            self._finish_leave(out)
        elif self._state is S.JOINING:
            self._goto(S.DISCOVERING)

    # -- leaving -----------------------------------------------------------------------------------

    def _start_leave(
        self, now: float, out: Out, *, close: bool, lost: bool = False, reason: str = ""
    ) -> None:
        self._leaving.start(close=close, lost=lost, reason=reason)
        self._interest.refresh_at = None
        self._tokens.abandon(R.FIND_COORDINATOR, R.HEARTBEAT, R.CALLBACKS)
        self._retry_at = None
        self._own.abandon()
        self._goto(S.LEAVING)
        if (
            self.config.enable_auto_commit
            and self.member_epoch > 0
            and self._own.owned
            and self.may_act_on(now)
            and self.coordinator_id is not None
            and not lost
        ):
            # KIP-70: commit before giving the partitions up (auto-commit only); not after a
            # lapsed session (KAFKA-7026).
            self._leaving.phase = "commit"
            out.append(self._commit_action(None, "leave", awaited=True))
            return
        self._leave_callbacks(out)

    def _leave_callbacks(self, out: Out) -> None:
        self._leaving.phase = "callbacks"
        owned = self._own.owned
        if owned:
            if self._own.reset_pending or self.member_epoch <= 0 or self._leaving.lost:
                self._callbacks(out, lost=owned)
            else:
                self._callbacks(out, revoked=owned)
            return
        self._leave_group(out)

    def _leave_group(self, out: Out) -> None:
        self._own.drop()
        self._leaving.phase = "leave"
        if self.member_epoch > 0 and self.coordinator_id is not None:
            static = self.config.group_instance_id is not None
            # KIP-848: -1 leaves; -2 tells that a static member will be back within the
            # session, which keeps its assignment for it until then.
            epoch = cev.STATIC_LEAVE_EPOCH if static else cev.LEAVE_EPOCH
            out.append(
                cev.SendConsumerGroupHeartbeat(
                    token=self._tokens.send(R.HEARTBEAT),
                    group_id=self.config.group_id,
                    member_id=self.member_id,
                    member_epoch=epoch,
                    group_instance_id=self.config.group_instance_id,
                )
            )
            return
        self._finish_leave(out)

    def _finish_leave(self, out: Out) -> None:
        self._leaving.finished()
        self._tokens.abandon(R.HEARTBEAT)
        self.member_epoch = 0
        self._live.forget_proof()
        self._target.forget()
        self._fields.reset()
        self._rebalance_start = None
        if self._leaving.close:
            for token, _ in self._commits.drain():
                out.append(act.ResolveCommit(token, CommitFailedError("the member closed")))
            self._goto(S.CLOSED)
        else:
            self._interest.unsubscribe()
            self._regex = None
            self._goto(S.UNJOINED)

    def _after_commit(self, token: int, pending: PendingCommit, now: float, out: Out) -> None:
        if self._commits.settled(token, pending) == "leave" and self._state is S.LEAVING:
            self._leave_callbacks(out)

    # -- event handlers (routed by _HANDLERS; responses arrive with their token checked) -----------

    def _on_subscription_changed(self, e: ev.SubscriptionChanged, now: float, out: Out) -> None:
        regex = to_re2(e.pattern) if e.pattern is not None else None
        self._interest.subscribe(e.topics, e.pattern)
        self._regex = regex
        self._request_metadata(out, all_topics=regex is not None)
        if self._state in MEMBER:
            self._live.heartbeat_now(now)  # the new subscription goes out at once

    def _on_unsubscribe(self, e: ev.UnsubscribeRequested, now: float, out: Out) -> None:
        if self._state is S.LEAVING:
            return
        if self.member_epoch <= 0 and not self._own.owned:
            self._interest.unsubscribe()
            self._regex = None
            self._tokens.abandon(R.HEARTBEAT)
            if self._state not in CALLBACK_STATES:
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
        # A close asked to finish the rebalance waits for the reconciliation under way (and
        # its acknowledgement's heartbeat), so the final commit and the revocation happen at
        # an epoch the coordinator accepts. (A KIP-848 leave hands the partitions over at
        # once: no hand-off round is needed, and hand_off closes as a close does.)
        if by is not None and now < by and self._state in CALLBACK_STATES:
            self._leaving.wait_for_rebalance(by)
            return
        self._start_leave(now, out, close=True)

    def _on_metadata(self, e: ev.MetadataUpdated, now: float, out: Out) -> None:
        self._interest.update(e.partitions_per_topic, e.topic_ids)
        if self._state in QUIET:
            return
        _, self._unresolved = self._target.resolve(self._interest.topic_ids)
        asked = self._interest.wanted(tp.topic for tp in self._own.owned)
        self._interest.track_missing(now, asked, unresolved=bool(self._unresolved))

    def _on_coordinator_lost(self, e: ev.CoordinatorLost, now: float, out: Out) -> None:
        if self._state not in ENDED:
            self._coordinator_lost(now, out)

    def _on_coordinator_found(self, e: ev.CoordinatorFound, now: float, out: Out) -> None:
        self.coordinator_id = e.node_id
        self._fields.reset()
        self._live.coordinator_found(now)  # a heartbeat at once, a full one

    def _on_coordinator_lookup_failed(
        self, e: ev.CoordinatorLookupFailed, now: float, out: Out
    ) -> None:
        error = error_for_code(e.error_code)
        if not error.retriable and e.error_code > 0:
            out.append(act.RaiseToUser(error))
        self._backoff(now)

    def _on_heartbeat_completed(
        self, e: cev.ConsumerGroupHeartbeatCompleted, now: float, out: Out
    ) -> None:
        if self._state is S.LEAVING:
            self._finish_leave(out)
            return
        if e.member_epoch <= 0:
            # An answer that makes no member of us (Java ignores it); the next full heartbeat
            # tells again.
            log.debug("heartbeat answered with member epoch %d: ignored", e.member_epoch)
            self._fields.reset()
            return
        self._live.heartbeat_answered(now)
        if e.heartbeat_interval_ms > 0:
            self._live.interval = e.heartbeat_interval_ms / 1000
        if e.member_id and e.member_id != self.member_id:
            self.member_id = e.member_id  # the coordinator's word (v0 hands the id out)
        joined = self.member_epoch <= 0
        self.member_epoch = e.member_epoch
        if joined:
            self._goto(S.STABLE)
        if e.assignment is not None:
            self._target.received(e.assignment)

    def _on_heartbeat_failed(
        self, e: cev.ConsumerGroupHeartbeatFailed, now: float, out: Out
    ) -> None:
        if self._state is S.LEAVING:
            self._finish_leave(out)  # leaving is best effort
            return
        self._fields.reset()  # the next one is full: the coordinator may have taken nothing
        code = e.error_code
        said = f": {e.error_message}" if e.error_message else ""
        if code in _COORDINATOR_MOVED:
            self._coordinator_lost(now, out)
        elif code in _FENCED:
            joining = self._state is S.JOINING
            self._fence(now, out, f"ConsumerGroupHeartbeat answered error {code}{said}")
            if joining:
                self._live.heartbeat_retry(now)  # fenced while joining: not at once again
        elif code in _FATAL:
            self._fatal(_FATAL[code](f"ConsumerGroupHeartbeat failed{said}"), out)
        elif code == _UNSUPPORTED_VERSION:
            self._fatal(UnsupportedApiVersionError(e.error_message or _NO_KIP848), out)
        elif code == TopicAuthorizationFailedError.code:
            denied = TopicAuthorizationFailedError(f"ConsumerGroupHeartbeat{said}")
            out.append(act.RaiseToUser(denied))
            self._live.heartbeat_retry(now)
        elif code == CoordinatorLoadInProgressError.code or error_for_code(code).retriable:
            self._live.heartbeat_retry(now)
        else:
            # INVALID_REQUEST and every code not known here: fatal, as in Java's consumer.
            hint = _NOT_CONVERTED if code == _GROUP_ID_NOT_FOUND and self.member_epoch <= 0 else ""
            error = error_for_code(
                code, f"ConsumerGroupHeartbeat failed with error {code}{said}{hint}"
            )
            self._fatal(error, out)

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
        if (
            code == StaleMemberEpochError.code
            and 0 < pending.generation_id < self.member_epoch
            and self._state not in ENDED
            and all(tp in self._own.owned for tp in pending.offsets or ())
        ):
            # The coordinator has the epoch we have now: send it again with it (Java's
            # auto-commit does), under the same token its caller waits on.
            out.append(
                self._commit_action(
                    pending.offsets,
                    pending.purpose,
                    awaited=self._commits.awaiting(pending.purpose),
                    token=e.token,
                )
            )
            return
        error = commit_error(code, during_join=False)
        out.append(act.ResolveCommit(e.token, error))
        if code == FencedInstanceIdError.code and self._state not in ENDED:
            self._fatal(FencedInstanceIdError("OffsetCommit: group_instance_id fenced"), out)
            return
        self._after_commit(e.token, pending, now, out)
        if code in _COORDINATOR_MOVED and self.coordinator_id is not None:
            self._coordinator_lost(now, out)
        elif code in _FENCED | {StaleMemberEpochError.code} and self._state in MEMBER:
            self._live.heartbeat_now(now)  # the heartbeat's answer tells where we stand

    def _on_callbacks_finished(self, e: ev.CallbacksFinished, now: float, out: Out) -> None:
        if (raised := callback_error(e.first_error)) is not None:
            out.append(raised)
        if self._state is S.PREPARING:
            self._own.given_up()  # the lost partitions are gone whatever happened
            self._join(now)  # (DISCOVERING next, if the coordinator is not known)
        elif self._state is S.RECONCILING:
            revoking, fenced = self._own.revoking, self._own.reset_pending
            if revoking:
                # The revoked callback returned: those partitions are given up whatever comes
                # next (never reported lost after it, even when fenced meanwhile).
                self._own.revoked()
            if fenced:  # fenced meanwhile: the rest is lost (nothing left: it rejoins)
                self._lose_all(out)
            elif revoking:
                self._assign(out)  # revoked first; now assign
            else:
                self._own.reconciled()
                self._goto(S.STABLE)  # the next heartbeat acknowledges (_maybe_heartbeat)
                if self._rebalance_start is not None:
                    self._metrics.observe(REBALANCE_LATENCY, now - self._rebalance_start, now)
                    self._rebalance_start = None
        elif self._state is S.LEAVING:
            self._leave_group(out)


_NO_KIP848 = (
    "ConsumerGroupHeartbeat (KIP-848) v1: the broker does not serve it: needs Kafka 4.0+; "
    "use group_protocol='classic'"
)


M = ConsumerProtocolMachine

#: Which handler takes each event (user events are checked against ACCEPTED_EVENTS first,
#: responses against the request the machine waits for, see ANSWERS).
_HANDLERS: dict[type[ev.Event], Callable[[ConsumerProtocolMachine, Any, float, Out], None]] = {
    ev.SubscriptionChanged: M._on_subscription_changed,
    ev.UnsubscribeRequested: M._on_unsubscribe,
    ev.CloseRequested: M._on_close,
    ev.MetadataUpdated: M._on_metadata,
    ev.CoordinatorLost: M._on_coordinator_lost,
    ev.CoordinatorFound: M._on_coordinator_found,
    ev.CoordinatorLookupFailed: M._on_coordinator_lookup_failed,
    cev.ConsumerGroupHeartbeatCompleted: M._on_heartbeat_completed,
    cev.ConsumerGroupHeartbeatFailed: M._on_heartbeat_failed,
    ev.CommitCompleted: M._on_commit_completed,
    ev.CommitFailed: M._on_commit_failed,
    ev.CallbacksFinished: M._on_callbacks_finished,
}
