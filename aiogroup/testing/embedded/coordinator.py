"""The embedded broker's group coordinator: Apache Kafka's *classic* coordinator, sans-I/O.

This module is pure: no asyncio, no sockets, no clock. Time is the ``now`` argument (seconds, any
monotonic origin) of every call. Requests and responses are plain dataclasses; the asyncio server
(:mod:`aiogroup.testing.embedded.broker`) translates kafka-python's wire classes to and from them.

Rules follow Apache Kafka's classic group coordinator (``GroupCoordinator.scala`` /
``GroupMetadata.scala`` in Kafka 2.x-3.x, ``GroupMetadataManager`` + ``ClassicGroup`` in the
``group-coordinator`` module of 3.7+); each rule cites where it comes from. Where Kafka's rules
changed between versions, ``CoordinatorConfig.flavour`` picks a generation: ``kafka4`` (the
default), ``kafka3`` or ``kafka2`` (Kafka 2.3); :data:`RULES` lists those rules, :data:`FLAVOURS`
what each flavour does.

How the server wires it (one coordinator per broker, shared by every connection)::

    coord = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0))

    # JoinGroup / SyncGroup answers may be deferred: pass a callback; it is called exactly once,
    # either before the method returns or later, from inside another call (another member's
    # request, on_timer(now), ...). If the client disconnected, make the callback a no-op.
    # It gets None for a request Kafka never answers (superseded by the member's next one, or
    # the SyncGroup of a member that left): send nothing, keep the connection muted.
    coord.join_group(JoinGroupRequestData(...), now, respond=send_join_response)
    coord.sync_group(SyncGroupRequestData(...), now, respond=send_sync_response)

    # The others answer at once.
    coord.heartbeat(HeartbeatRequestData(...), now) -> HeartbeatResponseData
    coord.leave_group(LeaveGroupRequestData(...), now) -> LeaveGroupResponseData
    coord.commit_offsets(OffsetCommitRequestData(...), now) -> OffsetCommitResponseData
    coord.fetch_offsets(OffsetFetchRequestData(...)) -> OffsetFetchResponseData
    coord.describe_groups([group_id, ...]) -> list[DescribedGroup]
    coord.list_groups(states_filter=None) -> list[ListedGroup]
    coord.delete_groups([group_id, ...]) -> list[tuple[group_id, error_code]]
    coord.delete_partitions([(topic, partition), ...], now)  # a topic was deleted

    # Timers: after every call, (re)arm one timer at coord.next_deadline() (None: nothing
    # pending); when it fires call coord.on_timer(now). Calling on_timer early is harmless.

    # Broker "restart" / coordinator failover (fault injection): coord.failover(now).
    # What Kafka does when a coordinator moves: parked JoinGroup/SyncGroup requests are answered
    # NOT_COORDINATOR (the old one unloads), then the new one reloads each group from the
    # __consumer_offsets log, i.e. as of its last stored GroupMetadata record (written when a
    # rebalance completes, a static member is replaced, or the group empties): Stable with its
    # members, generation and assignments (they keep heartbeating, no rebalance), or Empty; a
    # rebalance in progress is lost; every committed offset survives; sessions restart at ``now``.

    # Inspection for tests and the fault API:
    coord.group_state(group_id) -> GroupView | None

Version-dependent behaviour is driven by ``api_version`` in the request dataclasses (the wire
version the client used): MEMBER_ID_REQUIRED only for JoinGroup v4+ (KIP-394), SkipAssignment for
v9+ (KIP-814), protocol type/name checks only when a v5 SyncGroup sends them (KIP-559).

Error codes are plain ints (see :class:`ErrorCode`); the coordinator never raises for a bad
request, it answers with the error code Kafka would. The only exceptions: a ``respond`` callback
that raised (re-raised as :class:`CoordinatorCallbackError` once every other answer went out and
the state is consistent), and :class:`LocalProtocolError` for a coordinator bug (an illegal
state transition). ``now`` should not go backwards; if it does, nothing expires early.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from aiogroup.errors import CallbackError, ConfigurationError, LocalProtocolError
from aiogroup.protocol.types import JoinGroupMember
from aiogroup.testing.embedded.group import ClassicGroup, Member, State

__all__ = [
    "FLAVOURS",
    "RULES",
    "CoordinatorCallbackError",
    "CoordinatorConfig",
    "DescribedGroup",
    "DescribedMember",
    "ErrorCode",
    "Flavour",
    "GroupCoordinator",
    "GroupState",
    "GroupView",
    "HeartbeatRequestData",
    "HeartbeatResponseData",
    "JoinGroupMember",
    "JoinGroupRequestData",
    "JoinGroupResponseData",
    "LeaveGroupMemberResponse",
    "LeaveGroupRequestData",
    "LeaveGroupResponseData",
    "ListedGroup",
    "MemberIdentity",
    "MemberView",
    "OffsetCommitPartition",
    "OffsetCommitRequestData",
    "OffsetCommitResponseData",
    "OffsetFetchPartition",
    "OffsetFetchRequestData",
    "OffsetFetchResponseData",
    "Rule",
    "SyncGroupRequestData",
    "SyncGroupResponseData",
]


class ErrorCode(IntEnum):
    """The Kafka error codes the embedded broker answers with (coordinator and data plane)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82


class CoordinatorCallbackError(CallbackError):
    """A ``respond`` callback raised; the coordinator's state is already updated."""


# --- flavours -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of the classic coordinator that changed between Kafka versions: what each flavour
    does (``by_flavour``) and where the change comes from (``source``)."""

    title: str
    by_flavour: dict[str, str]
    source: str


#: The rules the flavours differ on, by id (the ids appear in :attr:`GroupCoordinator.rule_hits`
#: and in the conformance table, docs/conformance.md).
RULES: dict[str, Rule] = {
    "member-order": Rule(
        "order of the members (leader's JoinGroup member list, next leader, DescribeGroups)",
        {
            "kafka2": "Scala 2.12 mutable.HashMap",
            "kafka3": "Scala 2.13 mutable.HashMap",
            "kafka4": "java.util.HashMap",
        },
        "GroupMetadata.members (Scala 2.12 / 2.13 builds), ClassicGroup.members (4.0, KAFKA-14500)",
    ),
    "vote-tie": Rule(
        "protocol vote tie-break",
        {
            "kafka2": "first of groupBy's Map1-Map4 (Scala 2.12)",
            "kafka3": "first of groupBy's CHAMP HashMap (Scala 2.13)",
            "kafka4": "first of a java.util.HashMap",
        },
        "GroupMetadata.selectProtocol, ClassicGroup.selectProtocol",
    ),
    "heartbeat-completing": Rule(
        "Heartbeat while CompletingRebalance",
        {"kafka2": "REBALANCE_IN_PROGRESS", "kafka3": "NONE", "kafka4": "NONE"},
        "KAFKA-10134 (2.7)",
    ),
    "static-restart-completing": Rule(
        "static member restarts while CompletingRebalance",
        {"kafka2": "same generation, no rebalance", "kafka3": "rebalance", "kafka4": "rebalance"},
        "KAFKA-9801 (2.6)",
    ),
    "static-restart-protocol": Rule(
        "static member restarts in Stable with a vote-changing protocol list",
        {"kafka2": "no rebalance", "kafka3": "rebalance", "kafka4": "rebalance"},
        "KAFKA-10284 (2.8)",
    ),
    "pending-sync-timeout": Rule(
        "members that never send SyncGroup",
        {
            "kafka2": "kept",
            "kafka3": "removed after the rebalance timeout",
            "kafka4": "removed after the rebalance timeout",
        },
        "KAFKA-12890 (3.0)",
    ),
    "group-max-size": Rule(
        "group.max.size admission",
        {
            "kafka2": "new member refused at size >= max; pending ids not counted",
            "kafka3": "acceptJoiningMember: while rebalancing, the awaiting-join count",
            "kafka4": "acceptJoiningMember: while rebalancing, the awaiting-join count",
        },
        "KAFKA-9885 (2.6)",
    ),
    "initial-delay": Rule(
        "initial rebalance delay when members leave or return to an emptied group",
        {
            "kafka2": "delay extended only at generation 0; a leave never cuts it short",
            "kafka3": "delay extended only at generation 0; a leave never cuts it short",
            "kafka4": "extended whenever the group came from Empty; a leave may end it",
        },
        "GroupMetadataManager (4.0, KAFKA-14500) vs InitialDelayedJoin",
    ),
    "commit-completing": Rule(
        "OffsetCommit while CompletingRebalance from a stale or unknown member",
        {
            "kafka2": "REBALANCE_IN_PROGRESS first",
            "kafka3": "member and generation checked first",
            "kafka4": "member and generation checked first",
        },
        "apache/kafka#9958 (3.0)",
    ),
    "unknown-instance-id": Rule(
        "a group.instance.id the group does not know (Heartbeat, SyncGroup, OffsetCommit)",
        {"kafka2": "ignored", "kafka3": "UNKNOWN_MEMBER_ID", "kafka4": "UNKNOWN_MEMBER_ID"},
        "apache/kafka#9958 (3.0)",
    ),
    "static-member-id": Rule(
        "static member ids",
        {
            "kafka2": "instance id + state timestamp (a restart may get the same id back)",
            "kafka3": "instance id + UUID",
            "kafka4": "instance id + UUID",
        },
        "KAFKA-8715 (2.4)",
    ),
    "describe-metadata": Rule(
        "DescribeGroups member_metadata",
        {
            "kafka2": "the assignment (bug)",
            "kafka3": "the subscription",
            "kafka4": "the subscription",
        },
        "KAFKA-9150 (2.4)",
    ),
    "api-versions": Rule(
        "API versions served (a newer version closes the connection)",
        {
            "kafka2": "Kafka 2.3's: JoinGroup v0-5, SyncGroup v0-3, DescribeGroups v0-3, ...",
            "kafka3": "every version the embedded broker speaks",
            "kafka4": "every version the embedded broker speaks",
        },
        "the broker's ApiVersions (EmbeddedBroker.api_versions)",
    ),
    "authorized-operations": Rule(
        "DescribeGroups v3+ authorized_operations when not asked for",
        {"kafka2": "0", "kafka3": "-2147483648", "kafka4": "-2147483648"},
        "KIP-430; apache/kafka#7710 (2.5)",
    ),
}


@dataclass(frozen=True, slots=True)
class Flavour:
    """The rules of one Kafka generation where they differ (see :data:`RULES`)."""

    name: str
    kafka: str
    heartbeat_in_completing_rebalance: ErrorCode
    static_restart_in_completing_rebalances: bool
    static_restart_checks_protocol: bool
    pending_sync_timeout: bool
    accept_joining_member: bool
    initial_delay_4x: bool
    commit_checks_members_first: bool
    unknown_instance_id_fails: bool
    static_member_id_from_state_time: bool
    describe_metadata_is_assignment: bool
    authorized_operations_default: int


_MIN_INT32 = -(2**31)

#: ``kafka4`` (the default): Apache Kafka 4.x's Java coordinator (``GroupMetadataManager`` /
#: ``ClassicGroup``); ``kafka3``: 3.x's Scala ``GroupCoordinator`` (Scala 2.13 builds);
#: ``kafka2``: Kafka 2.3's (Scala 2.12), the broker ``aiogroup.testing.launchers.kafka`` runs.
FLAVOURS: dict[str, Flavour] = {
    "kafka4": Flavour(
        "kafka4", "4.x", ErrorCode.NONE, True, True, True, True, True, True, True, False, False,
        _MIN_INT32,
    ),
    "kafka3": Flavour(
        "kafka3", "3.x", ErrorCode.NONE, True, True, True, True, False, True, True, False, False,
        _MIN_INT32,
    ),
    "kafka2": Flavour(
        "kafka2", "2.3", ErrorCode.REBALANCE_IN_PROGRESS, False, False, False, False, False,
        False, False, True, True, 0,
    ),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """Broker settings of the classic coordinator (Kafka's names, milliseconds).

    ``initial_rebalance_delay_ms`` is ``group.initial.rebalance.delay.ms`` (Kafka's default is
    3000; ours 0 for fast tests). ``group_max_size`` None means unlimited (Kafka's default is
    Integer.MAX_VALUE). ``offset_metadata_max_bytes`` is ``offset.metadata.max.bytes`` (counted,
    as Kafka does, in UTF-16 code units: ``String.length()``). ``flavour`` picks the rules of a
    Kafka generation where they changed (:data:`FLAVOURS`): ``kafka4`` (default), ``kafka3`` or
    ``kafka2`` (Kafka 2.3).
    """

    initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int | None = None
    offset_metadata_max_bytes: int = 4096
    #: How long a new member's parked JoinGroup may wait before the member is dropped (it has no
    #: member id to heartbeat with yet). Kafka: ``NewMemberJoinTimeoutMs`` = 5 minutes.
    new_member_join_timeout_ms: int = 300_000
    flavour: str = "kafka4"

    def __post_init__(self) -> None:
        if self.flavour not in FLAVOURS:
            raise ConfigurationError(
                f"flavour must be one of {', '.join(FLAVOURS)}, not {self.flavour!r}"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise ConfigurationError("initial_rebalance_delay_ms must be >= 0")
        if not 0 <= self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ConfigurationError("need 0 <= group_min_session_timeout_ms <= max")
        if self.group_max_size is not None and self.group_max_size < 1:
            raise ConfigurationError("group_max_size must be >= 1 (or None)")
        if self.offset_metadata_max_bytes < 0 or self.new_member_join_timeout_ms < 0:
            raise ConfigurationError("offset_metadata_max_bytes and timeouts must be >= 0")


# --- JoinGroup ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequestData:
    """A JoinGroup request. ``rebalance_timeout_ms`` None (not sent: v0) means the session
    timeout (KIP-62); a value that was sent is taken as is, -1 included, as Kafka does (a
    rebalance it bounds then ends at once)."""

    group_id: str
    member_id: str
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    session_timeout_ms: int
    rebalance_timeout_ms: int | None = None
    group_instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 9
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupResponseData:
    """``members`` is filled for the leader only (unless ``skip_assignment``, KIP-814)."""

    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


# --- SyncGroup ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncGroupRequestData:
    """A SyncGroup request; ``protocol_type``/``protocol_name`` are v5's (None when absent)."""

    group_id: str
    generation_id: int
    member_id: str
    assignments: Sequence[tuple[str, bytes]] = ()
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    api_version: int = 5


@dataclass(frozen=True, slots=True)
class SyncGroupResponseData:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


# --- Heartbeat ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatRequestData:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponseData:
    error_code: int


# --- LeaveGroup -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    """One leaving member. v0-2 requests carry one, built from the request's member_id (the
    server should then copy the first result's error into the top-level error, as Kafka does)."""

    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequestData:
    group_id: str
    members: Sequence[MemberIdentity]


@dataclass(frozen=True, slots=True)
class LeaveGroupMemberResponse:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResponseData:
    error_code: int
    members: tuple[LeaveGroupMemberResponse, ...] = ()


# --- Offsets --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    topic: str
    partition: int
    committed_offset: int
    committed_leader_epoch: int = -1
    committed_metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitRequestData:
    """``generation_id`` -1 with empty ``member_id``: a simple (admin / assign()) commit."""

    group_id: str
    partitions: Sequence[OffsetCommitPartition]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitResponseData:
    """One ``(topic, partition, error_code)`` per requested partition, in request order."""

    partitions: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequestData:
    """``partitions`` None asks for every committed offset of the group (v2+)."""

    group_id: str
    partitions: Sequence[tuple[str, int]] | None = None
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class OffsetFetchPartition:
    topic: str
    partition: int
    committed_offset: int = -1
    committed_leader_epoch: int = -1
    metadata: str | None = ""
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class OffsetFetchResponseData:
    error_code: int
    partitions: tuple[OffsetFetchPartition, ...] = ()


# --- DescribeGroups / ListGroups / inspection ------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    """Kafka's DescribeGroups answer; a nonexistent group is ``Dead`` with no error (v0-5).
    ``authorized_operations`` is the v3+ bitfield (with no authorizer: every group operation)."""

    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()
    authorized_operations: int = _MIN_INT32


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    group_state: str


@dataclass(frozen=True, slots=True)
class MemberView:
    member_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes | None
    awaiting_join: bool
    awaiting_sync: bool


@dataclass(frozen=True, slots=True)
class GroupView:
    """A read-only snapshot of one group, for tests and the fault-injection API."""

    group_id: str
    state: str
    generation_id: int
    protocol_type: str | None
    protocol_name: str | None
    leader: str | None
    members: tuple[MemberView, ...] = field(default=())
    pending_members: tuple[str, ...] = field(default=())


#: A parked answer's callback. ``None`` means Kafka never answers that request: a JoinGroup or
#: SyncGroup superseded by the same member's next one, or the SyncGroup of a member that left
#: (its connection stays muted as Kafka's does, until it closes or idles out).
JoinCallback = Callable[[JoinGroupResponseData | None], None]
SyncCallback = Callable[[SyncGroupResponseData | None], None]

#: The bitfield of the group operations (READ 3, DELETE 6, DESCRIBE 8) with no authorizer.
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


GroupState = State
"""The classic group states (``Empty``, ``PreparingRebalance``, ...) as Kafka spells them."""

# JoinGroupRequest.UNKNOWN_MEMBER_ID: a member that has no id yet.
_NO_MEMBER_ID = ""


@dataclass(eq=False)
class _Offset:
    committed_offset: int
    committed_leader_epoch: int
    metadata: str


class GroupCoordinator:
    """Kafka's classic group coordinator, sans-I/O. See the module docstring for the wiring.

    ``id_factory(prefix)`` makes member ids (default ``f"{prefix}-{uuid4()}"``, the prefix being
    the client_id, or the group_instance_id for static members, as Kafka does; the ``kafka2``
    flavour builds static ids from the group's state timestamp, as Kafka 2.3 did, unless an
    ``id_factory`` is given).

    ``rule_hits`` maps each group id to the :data:`RULES` that decided something for it which
    another flavour would have decided differently (the conformance suite explains differences
    between flavours with it).

    Every public call first runs the timers that are due at ``now`` (so a late ``on_timer`` never
    lets an expired member act), then handles the request, then runs what became due at once
    (e.g. a zero initial rebalance delay). Parked answers are delivered after the coordinator's
    state is consistent, so a ``respond`` callback may safely call the coordinator again.
    """

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        self.config = config if config is not None else CoordinatorConfig()
        self._custom_ids = id_factory is not None
        self._id_factory = id_factory if id_factory is not None else _uuid_member_id
        self.rule_hits: dict[str, set[str]] = {}
        self._groups: dict[str, ClassicGroup] = {}
        self._offsets: dict[str, dict[tuple[str, int], _Offset]] = {}
        self._outbox: list[tuple[Callable[[Any], None], object]] = []
        self._timers: list[tuple[float, int, str, str, str]] = []
        self._seq = 0
        self._flushing = False

    @property
    def flavour(self) -> Flavour:
        return FLAVOURS[self.config.flavour]

    def _hit(self, group: ClassicGroup | str, rule: str) -> None:
        gid = group if isinstance(group, str) else group.group_id
        self.rule_hits.setdefault(gid, set()).add(rule)

    def _new_group(self, group_id: str, now: float) -> ClassicGroup:
        group = ClassicGroup(group_id, self.config.flavour, state_since=now)
        self._groups[group_id] = group
        return group

    # ================================================================ JoinGroup

    def join_group(self, request: JoinGroupRequestData, now: float, respond: JoinCallback) -> None:
        """Handle a JoinGroup; ``respond`` is called once, now or later (``handleJoinGroup``)."""
        self._run_timers(now)
        self._join(request, now, respond)
        self._run_timers(now)
        self._flush()

    def _join(self, req: JoinGroupRequestData, now: float, respond: JoinCallback) -> None:
        def fail(code: ErrorCode, member_id: str = req.member_id) -> None:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=member_id))

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        is_unknown = req.member_id == _NO_MEMBER_ID
        group = self._groups.get(req.group_id)
        if group is None:
            # The group is created only by a member without id; a member naming an id for a
            # group we do not know is told UNKNOWN_MEMBER_ID (getOrMaybeCreateGroup).
            if not is_unknown:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self._new_group(req.group_id, now)

        if not self._accept_joining_member(group, req.member_id, is_unknown):
            removed = group.remove(req.member_id)
            if removed is not None:
                self._answer_parked(removed, ErrorCode.UNKNOWN_MEMBER_ID)
            if not self.flavour.accept_joining_member and req.group_instance_id is not None:
                # Kafka 2.3 also drops the static mapping of the instance id it refused, even
                # when that id belongs to a member that stays (removeStaticMember).
                group.static_members.pop(req.group_instance_id, None)
            fail(ErrorCode.GROUP_MAX_SIZE_REACHED, _NO_MEMBER_ID)
        elif is_unknown:
            self._new_member_join(group, req, now, respond)
        else:
            self._current_member_join(group, req, now, respond)

        if group.is_in(State.PREPARING_REBALANCE):
            self._try_complete_join(group, now)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str, is_unknown: bool) -> bool:
        """GROUP_MAX_SIZE_REACHED rule (KIP-389; ``acceptJoiningMember`` since KAFKA-9885)."""
        max_size = self.config.group_max_size
        if max_size is None:
            return True
        newer = self._accept_joining_member_newer(group, member_id, max_size)
        # Kafka 2.3: an over-capacity group sheds known members that have not rejoined yet, and
        # a member without id is refused once the group is full; a pending (KIP-394) id is not
        # checked at all.
        member = group.members.get(member_id)
        shed = len(group.members) > max_size and member is not None and not member.is_awaiting_join
        older = not (shed or (is_unknown and len(group.members) >= max_size))
        if older != newer:
            self._hit(group, "group-max-size")
        return newer if self.flavour.accept_joining_member else older

    @staticmethod
    def _accept_joining_member_newer(group: ClassicGroup, member_id: str, max_size: int) -> bool:
        if group.is_in(State.EMPTY, State.DEAD):
            return True
        if group.is_in(State.PREPARING_REBALANCE):
            # Counting the members awaiting join (not the group size) lets the last rejoining
            # members be the ones turned away when the limit was lowered.
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join() < max_size
            )
        return group.has(member_id) or len(group.members) < max_size

    @staticmethod
    def _rebalance_timeout(req: JoinGroupRequestData) -> int:
        # JoinGroup v0 has no rebalance timeout: the session timeout is used (KIP-62). From v1
        # Kafka takes the value as sent, -1 included.
        if req.api_version == 0 or req.rebalance_timeout_ms is None:
            return req.session_timeout_ms
        return req.rebalance_timeout_ms

    def _new_member_join(
        self, group: ClassicGroup, req: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> None:
        names = frozenset(name for name, _ in req.protocols)
        if group.is_in(State.DEAD):
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif not group.supports_protocols(req.protocol_type, names):
            code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        else:
            code = ErrorCode.NONE
        if code != ErrorCode.NONE:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=_NO_MEMBER_ID))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        if req.group_instance_id is not None:
            self._hit(group, "static-member-id")
        if (
            req.group_instance_id is not None
            and self.flavour.static_member_id_from_state_time
            and not self._custom_ids
        ):
            # Kafka 2.3: instance id and the time of the group's last state change (KAFKA-8715:
            # two restarts without a state change in between get the same id). Kafka counts
            # milliseconds; we count microseconds: this broker changes state several times
            # within a millisecond, which Kafka's purgatory and network do not.
            new_member_id = f"{prefix}-{round(group.state_since * 1_000_000)}"
        else:
            new_member_id = self._id_factory(prefix)
        if req.group_instance_id is not None:
            old_member_id = group.static_members.get(req.group_instance_id)
            if old_member_id is not None:
                # KIP-345: a known static member restarted; it takes over its old identity.
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, req, now, respond
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, req, now, respond)
        elif req.api_version >= 4:
            # KIP-394: JoinGroup v4+ without a member id gets one to come back with; the id is
            # remembered as pending (blocking the join from completing) for a session timeout.
            group.pending_members[new_member_id] = now + req.session_timeout_ms / 1000
            self._arm(
                group.pending_members[new_member_id], "pending", group.group_id, new_member_id
            )
            self._send(
                respond,
                JoinGroupResponseData(
                    error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id
                ),
            )
        else:
            self._add_member_and_rebalance(group, new_member_id, req, now, respond)

    def _current_member_join(
        self, group: ClassicGroup, req: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> None:
        member_id = req.member_id
        names = frozenset(name for name, _ in req.protocols)

        def fail(code: ErrorCode) -> None:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=member_id))

        if group.is_in(State.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, names):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException here (a pending member is never static),
                # which reaches the client as UNKNOWN_SERVER_ERROR.
                return fail(ErrorCode.UNKNOWN_SERVER_ERROR)
            return self._add_member_and_rebalance(group, member_id, req, now, respond)
        error = self._validate_current_member(group, member_id, req.group_instance_id, strict=True)
        if error is not None:
            return fail(error)
        member = group.members[member_id]
        if group.is_in(State.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_in(State.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # Same metadata: the member probably lost our JoinGroup answer; answer again.
                self._send(respond, self._join_result(group, member, with_members=None))
            else:
                self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_in(State.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader's rejoin always rebalances: it is how it signals changes that its
                # metadata does not show (e.g. new partitions).
                self._update_member_and_rebalance(group, member, req, now, respond)
            else:
                self._send(respond, self._join_result(group, member, with_members=False))
        else:
            fail(ErrorCode.UNKNOWN_MEMBER_ID)

    def _join_result(
        self,
        group: ClassicGroup,
        member: Member,
        *,
        with_members: bool | None,
        leader: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResponseData:
        """A successful JoinGroup answer; ``with_members`` None means "if it is the leader"."""
        if with_members is None:
            with_members = group.is_leader(member.member_id)
        members: tuple[JoinGroupMember, ...] = ()
        if with_members and group.protocol_name is not None:
            protocol = group.protocol_name
            if len(group.members) > 1:
                self._hit(group, "member-order")
            members = tuple(
                JoinGroupMember(
                    m.member_id, m.metadata(protocol), group_instance_id=m.group_instance_id
                )
                for m in group.members.values()
            )
        return JoinGroupResponseData(
            error_code=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(leader if leader is not None else group.leader_id) or "",
            member_id=member.member_id,
            members=members,
            skip_assignment=skip_assignment,
        )

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        member_id: str,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=self._rebalance_timeout(req),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=tuple(req.protocols),
            is_new=True,
        )
        # The initial delay is extended by a newcomer: before 4.0 only while the group never
        # formed (generation 0); 4.x whenever this rebalance started from Empty.
        if group.is_in(State.PREPARING_REBALANCE) and group.join_is_initial:
            if group.generation_id != 0:
                self._hit(group, "initial-delay")
            if group.generation_id == 0 or self.flavour.initial_delay_4x:
                group.new_member_added = True
        group.add(member, respond)
        # A new member has no id to heartbeat with yet: it expires on the new-member join
        # timeout instead (KAFKA-7610), so a client that gave up cannot hold the rebalance.
        member.heartbeat_deadline = now + self.config.new_member_join_timeout_ms / 1000
        self._arm(member.heartbeat_deadline, "member", group.group_id, member_id)
        self._maybe_prepare_rebalance(group, now)

    def _update_member(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequestData,
        respond: JoinCallback | None,
    ) -> None:
        member.protocols = tuple(req.protocols)
        member.rebalance_timeout_ms = self._rebalance_timeout(req)
        member.session_timeout_ms = req.session_timeout_ms
        if respond is not None:
            if member.join_callback is not None:
                # Kafka drops a superseded JoinGroup: it is never answered (updateMember).
                self._send(member.join_callback, None)
            member.join_callback = respond

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        self._update_member(group, member, req, respond)
        self._maybe_prepare_rebalance(group, now)

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        """KIP-345 static member restart (``updateStaticMemberAndRebalance``)."""
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        old = group.members[old_member_id]
        # Fence whatever the old incarnation still has parked (FENCED_INSTANCE_ID).
        if old.join_callback is not None:
            cb, old.join_callback = old.join_callback, None
            self._send(
                cb,
                JoinGroupResponseData(
                    error_code=ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id
                ),
            )
        if old.sync_callback is not None:
            scb, old.sync_callback = old.sync_callback, None
            self._send(scb, SyncGroupResponseData(error_code=ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member, now)
        self._update_member(group, member, req, respond)

        older = not self.flavour.static_restart_checks_protocol
        if group.is_in(State.STABLE):
            # No rebalance unless the group's protocol would change with the new metadata
            # (KAFKA-10284); Kafka 2.3 never rebalanced here.
            same_protocol = group.select_protocol() == group.protocol_name
            if group.vote_tie_varies:
                self._hit(group, "vote-tie")
            if not same_protocol:
                self._hit(group, "static-restart-protocol")
            if same_protocol or older:
                if not older:
                    # Persisted since KAFKA-10284 (a failover keeps the new member id).
                    group.stored = group.to_stored()
                join_cb = member.join_callback
                member.join_callback = None
                if join_cb is None:  # pragma: no cover - set just above
                    return
                if req.api_version >= 9:
                    # KIP-814: tell a returning static leader it leads, but must not assign.
                    is_leader = group.is_leader(new_member_id)
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=is_leader, skip_assignment=is_leader
                        ),
                    )
                else:
                    # Before v9: report the old leader id so that a returning leader does not
                    # believe it leads and runs a pointless assignment in a Stable group.
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=False, leader=current_leader or ""
                        ),
                    )
            else:
                self._maybe_prepare_rebalance(group, now)
        elif group.is_in(State.COMPLETING_REBALANCE):
            self._hit(group, "static-restart-completing")
            if self.flavour.static_restart_in_completing_rebalances:
                # The leader may have been sent the old member id; its assignment would miss
                # the new id, so start over (KAFKA-9801).
                self._prepare_rebalance(group, now)
            else:
                # Kafka 2.3 answers at once with the current generation and the old leader
                # id; the leader's assignment (made for the old id) gives this member nothing.
                join_cb, member.join_callback = member.join_callback, None
                if join_cb is not None:
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=False, leader=current_leader or ""
                        ),
                    )
        # PreparingRebalance: the member now simply awaits the join like the others.

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now: float) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: float) -> None:
        if group.is_in(State.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync_members.clear()
        group.sync_deadline = None
        if group.is_in(State.EMPTY):
            # group.initial.rebalance.delay.ms (KIP-134): the first rebalance of an empty group
            # waits, and is extended by the same delay whenever a new member arrives, for at
            # most the rebalance timeout (InitialDelayedJoin).
            delay = self.config.initial_rebalance_delay_ms
            group.join_is_initial = True
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay / 1000
        else:
            group.join_is_initial = False
            group.join_deadline = now + group.rebalance_timeout_ms() / 1000
        self._arm(group.join_deadline, "join", group.group_id)
        group.transition_to(State.PREPARING_REBALANCE, now)
        self._try_complete_join(group, now)

    def _try_complete_join(self, group: ClassicGroup, now: float, *, removal: bool = False) -> None:
        """DelayedJoin.tryComplete: done once every member rejoined. The initial delay
        (InitialDelayedJoin) only completes on its timer, except in 4.x when a member or
        pending member was just removed (``removal``): its removal paths complete the join
        whenever everyone left has joined."""
        if not (
            group.is_in(State.PREPARING_REBALANCE)
            and group.join_deadline is not None
            and group.has_all_members_joined()
        ):
            return
        if group.join_is_initial:
            if not removal:
                return
            self._hit(group, "initial-delay")
            if not self.flavour.initial_delay_4x:
                return
        self._complete_join(group, now)

    def _expire_join(self, group: ClassicGroup, now: float) -> None:
        if group.join_is_initial and group.new_member_added and group.initial_remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
            group.initial_delay_ms = delay
            group.join_deadline = now + delay / 1000
            self._arm(group.join_deadline, "join", group.group_id)
            return
        self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: float) -> None:
        """``onCompleteJoin``: drop dynamic members that did not rejoin, bump the generation,
        answer every parked JoinGroup (the leader gets the members' metadata)."""
        group.join_deadline = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                # Static members stay until their session expires (KIP-345, KAFKA-8220).
                group.remove(member.member_id)
                self._answer_parked(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(State.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait another rebalance timeout
            # for them to come back or for their sessions to expire.
            group.join_is_initial = False
            group.join_deadline = now + max(group.rebalance_timeout_ms(), 1) / 1000
            self._arm(group.join_deadline, "join", group.group_id)
            return
        group.init_next_generation(now)
        if group.vote_tie_varies:
            self._hit(group, "vote-tie")
        if group.is_in(State.EMPTY):
            group.stored = group.to_stored()
            return
        for member in group.members.values():
            if member.join_callback is not None:
                cb, member.join_callback = member.join_callback, None
                self._send(cb, self._join_result(group, member, with_members=None))
            self._schedule_heartbeat(group, member, now)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        if self.flavour.pending_sync_timeout:
            # KAFKA-12890 (DelayedSync): members must send SyncGroup within the rebalance
            # timeout (Kafka 2.3 waits for them forever).
            group.sync_generation = group.generation_id
            group.sync_deadline = now + group.rebalance_timeout_ms() / 1000
            self._arm(group.sync_deadline, "sync", group.group_id)

    # ================================================================ SyncGroup

    def sync_group(self, request: SyncGroupRequestData, now: float, respond: SyncCallback) -> None:
        """Handle a SyncGroup; ``respond`` is called once, now or when the leader's assignment
        arrives (``handleSyncGroup``)."""
        self._run_timers(now)
        self._sync(request, now, respond)
        self._run_timers(now)
        self._flush()

    def _sync(self, req: SyncGroupRequestData, now: float, respond: SyncCallback) -> None:
        def fail(code: ErrorCode) -> None:
            self._send(respond, SyncGroupResponseData(error_code=code))

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(State.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_current_member(group, req.member_id, req.group_instance_id)
        if error is None and req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        # KIP-559 (SyncGroup v5): the protocol type and name, when sent, must be the group's.
        if error is None and (
            (req.protocol_type is not None and req.protocol_type != group.protocol_type)
            or (req.protocol_name is not None and req.protocol_name != group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return fail(error)

        if group.is_in(State.EMPTY):
            fail(ErrorCode.UNKNOWN_MEMBER_ID)
        elif group.is_in(State.PREPARING_REBALANCE):
            fail(ErrorCode.REBALANCE_IN_PROGRESS)
        elif group.is_in(State.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            if member.sync_callback is not None:
                # Superseded: Kafka overwrites the parked callback, never answering it.
                self._send(member.sync_callback, None)
            member.sync_callback = respond
            self._remove_pending_sync_member(group, req.member_id)
            if group.is_leader(req.member_id):
                # The leader's assignment completes the rebalance; members it left out get an
                # empty assignment (Kafka logs a warning and does the same).
                assignment = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                group.stored = group.to_stored()
                self._propagate_assignment(group, ErrorCode.NONE, now)
                group.transition_to(State.STABLE, now)
        elif group.is_in(State.STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            member = group.members[req.member_id]
            self._send(
                respond,
                SyncGroupResponseData(
                    error_code=ErrorCode.NONE,
                    assignment=member.assignment,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                ),
            )
            self._schedule_heartbeat(group, member, now)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline = None

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, now: float) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.sync_callback is not None:
                cb, member.sync_callback = member.sync_callback, None
                self._send(
                    cb,
                    SyncGroupResponseData(
                        error_code=error,
                        assignment=member.assignment,
                        protocol_type=group.protocol_type if ok else None,
                        protocol_name=group.protocol_name if ok else None,
                    ),
                )
                # The session restarts once the member has its answer: while it waited its
                # heartbeat deadline was considered satisfied.
                self._schedule_heartbeat(group, member, now)

    def _reset_and_propagate_assignment_error(
        self, group: ClassicGroup, error: ErrorCode, now: float
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now)

    # ================================================================ Heartbeat

    def heartbeat(self, request: HeartbeatRequestData, now: float) -> HeartbeatResponseData:
        """``handleHeartbeat``: refreshes the session of a valid member."""
        self._run_timers(now)
        code = self._heartbeat(request, now)
        self._run_timers(now)
        self._flush()
        return HeartbeatResponseData(error_code=code)

    def _heartbeat(self, req: HeartbeatRequestData, now: float) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(State.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(State.COMPLETING_REBALANCE):
            # A member may heartbeat between its JoinGroup answer and its SyncGroup: NONE, and
            # the session restarts (KAFKA-10134); Kafka 2.3 said REBALANCE_IN_PROGRESS and left
            # the session alone.
            self._hit(group, "heartbeat-completing")
            code = self.flavour.heartbeat_in_completing_rebalance
            if code != ErrorCode.NONE:
                return code
        self._schedule_heartbeat(group, group.members[req.member_id], now)
        if group.is_in(State.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ================================================================ LeaveGroup

    def leave_group(self, request: LeaveGroupRequestData, now: float) -> LeaveGroupResponseData:
        """``handleLeaveGroup``: per-member results (v3+ batch; KIP-345 leave by instance id)."""
        self._run_timers(now)
        response = self._leave(request, now)
        self._run_timers(now)
        self._flush()
        return response

    def _leave(self, req: LeaveGroupRequestData, now: float) -> LeaveGroupResponseData:
        def result(ident: MemberIdentity, code: ErrorCode) -> LeaveGroupMemberResponse:
            return LeaveGroupMemberResponse(ident.member_id, ident.group_instance_id, code)

        if not req.group_id:
            return LeaveGroupResponseData(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return LeaveGroupResponseData(
                error_code=ErrorCode.NONE,
                members=tuple(result(i, ErrorCode.UNKNOWN_MEMBER_ID) for i in req.members),
            )
        if group.is_in(State.DEAD):
            return LeaveGroupResponseData(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results: list[LeaveGroupMemberResponse] = []
        for ident in req.members:
            if ident.member_id == _NO_MEMBER_ID:
                # Administrative removal by group.instance.id alone (KIP-345).
                current = (
                    group.static_members.get(ident.group_instance_id)
                    if ident.group_instance_id is not None
                    else None
                )
                if current is None:
                    results.append(result(ident, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_member_and_update_group(group, group.members[current], now)
                    results.append(result(ident, ErrorCode.NONE))
            elif ident.member_id in group.pending_members:
                del group.pending_members[ident.member_id]
                self._try_complete_join(group, now, removal=True)
                results.append(result(ident, ErrorCode.NONE))
            else:
                error = self._validate_current_member(
                    group, ident.member_id, ident.group_instance_id
                )
                if error is None:
                    member = group.members[ident.member_id]
                    self._remove_member_and_update_group(group, member, now)
                    results.append(result(ident, ErrorCode.NONE))
                else:
                    results.append(result(ident, error))
        return LeaveGroupResponseData(error_code=ErrorCode.NONE, members=tuple(results))

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now: float
    ) -> None:
        """``removeMemberAndUpdateGroup``: a parked JoinGroup is answered UNKNOWN_MEMBER_ID; a
        parked SyncGroup never is (Kafka only answers the join callback, then forgets the
        member); rebalance if needed."""
        group.remove(member.member_id)
        member.heartbeat_deadline = None
        self._answer_parked(member, ErrorCode.UNKNOWN_MEMBER_ID, drop_sync=True)
        if group.is_in(State.STABLE, State.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        elif group.is_in(State.PREPARING_REBALANCE):
            self._try_complete_join(group, now, removal=True)

    def _answer_parked(self, member: Member, code: ErrorCode, *, drop_sync: bool = False) -> None:
        if member.join_callback is not None:
            cb, member.join_callback = member.join_callback, None
            self._send(cb, JoinGroupResponseData(error_code=code, member_id=_NO_MEMBER_ID))
        if member.sync_callback is not None:
            scb, member.sync_callback = member.sync_callback, None
            self._send(scb, None if drop_sync else SyncGroupResponseData(error_code=code))

    # ================================================================ validation

    def _validate_current_member(
        self,
        group: ClassicGroup,
        member_id: str,
        group_instance_id: str | None,
        *,
        strict: bool | None = None,
    ) -> ErrorCode | None:
        """``validateCurrentMember``: a known instance id must map to ``member_id`` (else the
        caller is a fenced zombie, KIP-345), and ``member_id`` must be a member. An instance id
        the group does not know is UNKNOWN_MEMBER_ID (``strict``: always on JoinGroup; elsewhere
        since Kafka 3.0, 2.3 only checked for fencing)."""
        if strict is None:
            strict = self.flavour.unknown_instance_id_fails
            varies = True  # Heartbeat, SyncGroup, OffsetCommit: 2.3 ignored an unknown id
        else:
            varies = False
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                if varies:
                    self._hit(group, "unknown-instance-id")
                if strict:
                    return ErrorCode.UNKNOWN_MEMBER_ID
            elif current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    # ================================================================ offsets

    def commit_offsets(
        self, request: OffsetCommitRequestData, now: float
    ) -> OffsetCommitResponseData:
        """``handleCommitOffsets``. Unknown topics are the server's business (it knows the log):
        filter them out and answer UNKNOWN_TOPIC_OR_PARTITION for them yourself."""
        self._run_timers(now)
        response = self._commit(request, now)
        self._run_timers(now)
        self._flush()
        return response

    def _commit(self, req: OffsetCommitRequestData, now: float) -> OffsetCommitResponseData:
        def all_fail(code: ErrorCode) -> OffsetCommitResponseData:
            return OffsetCommitResponseData(
                tuple((p.topic, p.partition, int(code)) for p in req.partitions)
            )

        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                # Not a simple-consumer commit, and no such group: a commit from an older life.
                return all_fail(ErrorCode.ILLEGAL_GENERATION)
            group = self._new_group(req.group_id, now)
        error = self._validate_offset_commit(group, req)
        if error is not None:
            return all_fail(error)
        if group.is_in(State.STABLE, State.PREPARING_REBALANCE):
            # Commits are accepted while PreparingRebalance: the member learns of the rebalance
            # from its heartbeat, and KIP-429 members keep committing what they still own.
            self._schedule_heartbeat(group, group.members[req.member_id], now)
        store = self._offsets.setdefault(req.group_id, {})
        out: list[tuple[str, int, int]] = []
        for p in req.partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            # Kafka checks String.length(): UTF-16 code units, not bytes.
            if len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > (
                self.config.offset_metadata_max_bytes
            ):
                out.append((p.topic, p.partition, int(ErrorCode.OFFSET_METADATA_TOO_LARGE)))
                continue
            store[(p.topic, p.partition)] = _Offset(
                p.committed_offset, p.committed_leader_epoch, metadata
            )
            out.append((p.topic, p.partition, int(ErrorCode.NONE)))
        return OffsetCommitResponseData(tuple(out))

    def _validate_offset_commit(
        self, group: ClassicGroup, req: OffsetCommitRequestData
    ) -> ErrorCode | None:
        """``validateOffsetCommit``: generation -1 commits only into an Empty group (admin /
        manual assignment); anything naming a member must be that member at this generation;
        nothing is committed while CompletingRebalance (the member has its JoinGroup answer but
        not its assignment yet)."""
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(State.EMPTY):
            return None
        if group.is_in(State.COMPLETING_REBALANCE):
            newer = self._validate_member_commit(group, req) or ErrorCode.REBALANCE_IN_PROGRESS
            if newer != ErrorCode.REBALANCE_IN_PROGRESS:
                self._hit(group, "commit-completing")
            if self.flavour.commit_checks_members_first:
                return newer
            # Kafka 2.3: only a fenced instance is told so before REBALANCE_IN_PROGRESS.
            fenced = self._validate_current_member(group, req.member_id, req.group_instance_id)
            if fenced == ErrorCode.FENCED_INSTANCE_ID:
                return fenced
            return ErrorCode.REBALANCE_IN_PROGRESS
        return self._validate_member_commit(group, req)

    def _validate_member_commit(
        self, group: ClassicGroup, req: OffsetCommitRequestData
    ) -> ErrorCode | None:
        if (
            req.generation_id >= 0
            or req.member_id != _NO_MEMBER_ID
            or req.group_instance_id is not None
        ):
            error = self._validate_current_member(group, req.member_id, req.group_instance_id)
            if error is not None:
                return error
            if req.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_in(State.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None  # pragma: no cover - the Empty case returned above

    def fetch_offsets(self, request: OffsetFetchRequestData) -> OffsetFetchResponseData:
        """``handleFetchOffsets``: committed offsets whatever the group's state; -1 (with empty
        metadata) for partitions without one; ``partitions`` None returns all of them."""
        store = self._offsets.get(request.group_id, {})
        if request.partitions is None:
            keys = sorted(store)
        else:
            keys = [(t, p) for t, p in request.partitions]
        out: list[OffsetFetchPartition] = []
        for topic, partition in keys:
            off = store.get((topic, partition))
            if off is None:
                out.append(OffsetFetchPartition(topic, partition))
            else:
                out.append(
                    OffsetFetchPartition(
                        topic,
                        partition,
                        off.committed_offset,
                        off.committed_leader_epoch,
                        off.metadata,
                    )
                )
        return OffsetFetchResponseData(error_code=ErrorCode.NONE, partitions=tuple(out))

    # ================================================================ admin

    def describe_groups(
        self,
        group_ids: Sequence[str],
        api_version: int = 5,
        include_authorized_operations: bool = False,
    ) -> list[DescribedGroup]:
        """``handleDescribeGroup``. Member metadata, assignments and the protocol name are shown
        only for a Stable group (``GroupMetadata.summary``); a missing group is Dead (v0-5) or
        GROUP_ID_NOT_FOUND (v6+). v3+ carries the authorized operations when asked for (with no
        authorizer, every group operation); otherwise the flavour's default."""
        flavour = self.flavour
        operations = flavour.authorized_operations_default
        if include_authorized_operations:
            operations = GROUP_OPERATIONS
        if api_version >= 3 and not include_authorized_operations:
            for gid in group_ids:
                self._hit(gid, "authorized-operations")
        out: list[DescribedGroup] = []
        for gid in group_ids:
            group = self._groups.get(gid)
            if group is None or group.is_in(State.DEAD):
                code = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 6 else ErrorCode.NONE
                out.append(DescribedGroup(code, gid, State.DEAD.value, "", "", (), operations))
                continue
            stable = group.is_in(State.STABLE) and group.protocol_name is not None
            protocol = group.protocol_name if stable and group.protocol_name else ""
            if stable:
                self._hit(group, "describe-metadata")
                if len(group.members) > 1:
                    self._hit(group, "member-order")
            members = tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    # Kafka 2.3 filled the metadata with the assignment (KAFKA-9150).
                    member_metadata=(
                        b""
                        if not stable
                        else m.assignment
                        if flavour.describe_metadata_is_assignment
                        else m.metadata(protocol)
                    ),
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            out.append(
                DescribedGroup(
                    ErrorCode.NONE,
                    gid,
                    group.state.value,
                    group.protocol_type or "",
                    protocol,
                    members,
                    operations,
                )
            )
        return out

    def list_groups(self, states_filter: Sequence[str] | None = None) -> list[ListedGroup]:
        """``handleListGroups``; the states filter (KIP-518) is case-insensitive."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_in(State.DEAD) and (wanted is None or g.state.value.lower() in wanted)
        ]

    def delete_groups(self, group_ids: Sequence[str], now: float) -> list[tuple[str, int]]:
        """``handleDeleteGroups``: only Empty groups go (Dead, with their offsets)."""
        self._run_timers(now)
        out: list[tuple[str, int]] = []
        for gid in group_ids:
            group = self._groups.get(gid)
            if group is None or group.is_in(State.DEAD):
                out.append((gid, int(ErrorCode.GROUP_ID_NOT_FOUND)))
            elif group.is_in(State.EMPTY):
                group.transition_to(State.DEAD, now)
                del self._groups[gid]
                self._offsets.pop(gid, None)
                out.append((gid, int(ErrorCode.NONE)))
            else:
                out.append((gid, int(ErrorCode.NON_EMPTY_GROUP)))
        self._flush()
        return out

    def delete_partitions(self, partitions: Sequence[tuple[str, int]], now: float) -> int:
        """``handleDeletedPartitions`` (a topic was deleted): every group forgets its offsets
        for ``partitions``; then, as Kafka's ``cleanupGroupMetadata`` does for *every* group it
        scans, an Empty group left without offsets is Dead and gone. Returns how many offsets
        were removed."""
        self._run_timers(now)
        gone = set(partitions)
        removed = 0
        for store in self._offsets.values():
            for key in [k for k in store if k in gone]:
                del store[key]
                removed += 1
        for gid, group in list(self._groups.items()):
            if group.is_in(State.EMPTY) and not self._offsets.get(gid):
                group.transition_to(State.DEAD, now)
                del self._groups[gid]
                self._offsets.pop(gid, None)
        self._flush()
        return removed

    # ================================================================ timers

    def next_deadline(self) -> float | None:
        """When :meth:`on_timer` must next be called (None: nothing is pending)."""
        while self._timers:
            deadline, _, kind, gid, mid = self._timers[0]
            if self._current_deadline(kind, gid, mid) == deadline:
                return deadline
            heapq.heappop(self._timers)  # superseded or cancelled
        return None

    def on_timer(self, now: float) -> None:
        """Fire everything due at ``now``: session and pending-member expiry, join completion
        (rebalance timeout, initial delay), sync expiry. Early or repeated calls are harmless."""
        self._run_timers(now)
        self._flush()

    def _arm(self, deadline: float, kind: str, group_id: str, member_id: str = "") -> None:
        """Remember a deadline just set. Entries are never removed when a deadline moves or is
        cleared: a popped entry counts only if it still matches the live deadline."""
        self._seq += 1
        heapq.heappush(self._timers, (deadline, self._seq, kind, group_id, member_id))

    def _current_deadline(self, kind: str, group_id: str, member_id: str) -> float | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        if kind == "join":
            return group.join_deadline
        if kind == "sync":
            return group.sync_deadline
        if kind == "pending":
            return group.pending_members.get(member_id)
        member = group.members.get(member_id)
        return member.heartbeat_deadline if member is not None else None

    def _run_timers(self, now: float) -> None:
        # Expiries can arm new deadlines, some due at once (a zero initial delay): keep popping
        # until the earliest live deadline is in the future. Each expiry clears or pushes back
        # the deadline it fired, so this ends; the bound is a safety net.
        for _ in range(1_000_000):
            deadline = self.next_deadline()
            if deadline is None or deadline > now:
                return
            _, _, kind, gid, mid = heapq.heappop(self._timers)
            group = self._groups[gid]
            if kind == "join":
                self._expire_join(group, now)
            elif kind == "sync":
                self._expire_sync(group, now)
            elif kind == "pending":
                # KIP-394: a member id handed out but never used expires after a session.
                del group.pending_members[mid]
                if group.is_in(State.PREPARING_REBALANCE):
                    self._try_complete_join(group, now, removal=True)
            else:
                self._expire_member(group, group.members[mid], now)
        raise LocalProtocolError("coordinator timers did not settle")  # pragma: no cover

    def _expire_member(self, group: ClassicGroup, member: Member, now: float) -> None:
        """``onExpireHeartbeat``: a member waiting in a rebalance counts as alive (its deadline
        is re-armed when it gets its answer), except a new member, which expires."""
        member.heartbeat_deadline = None
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        self._remove_member_and_update_group(group, member, now)

    def _expire_sync(self, group: ClassicGroup, now: float) -> None:
        """``onExpirePendingSync``: members that got their JoinGroup answer but never sent
        SyncGroup within the rebalance timeout are removed, and the group rebalances."""
        group.sync_deadline = None
        if group.sync_generation != group.generation_id:
            return
        if not group.is_in(State.COMPLETING_REBALANCE, State.STABLE):
            return
        if group.pending_sync_members:
            self._hit(group, "pending-sync-timeout")
            for mid in sorted(group.pending_sync_members):
                removed = group.remove(mid)
                if removed is not None:
                    removed.heartbeat_deadline = None
                    self._answer_parked(removed, ErrorCode.UNKNOWN_MEMBER_ID)
            self._prepare_rebalance(group, now)

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, now: float) -> None:
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        self._arm(member.heartbeat_deadline, "member", group.group_id, member.member_id)

    # ================================================================ failover

    def failover(self, now: float) -> None:
        """Simulate a coordinator move or broker restart, as Kafka's does it.

        The old coordinator unloads every group: parked JoinGroup/SyncGroup requests are
        answered NOT_COORDINATOR (``onGroupUnloaded``). The new one reloads each group from
        its last stored GroupMetadata record (written when a rebalance completed, when a
        static member was replaced, and when the group emptied): Stable with those members,
        generation, leader and assignments, or Empty; a rebalance in progress is lost. Members
        keep their ids and only the selected protocol's metadata; sessions restart at ``now``
        (``onGroupLoaded``). Groups with only committed offsets come back Empty. Committed
        offsets all survive.
        """
        for group in self._groups.values():
            for member in group.members.values():
                self._answer_parked(member, ErrorCode.NOT_COORDINATOR)
        old = self._groups
        self._groups = {}
        self._timers = []
        for gid in sorted(set(old) | set(self._offsets)):
            stored = old[gid].stored if gid in old else None
            if stored is None and gid not in self._offsets:
                continue
            group = ClassicGroup.from_stored(gid, stored, self.config.flavour, now)
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now)
            self._groups[gid] = group
            max_size = self.config.group_max_size
            if max_size is not None and len(group.members) > max_size:
                # Over capacity after a config change: rebalance so members can commit first.
                self._prepare_rebalance(group, now)
        self._run_timers(now)
        self._flush()

    # ================================================================ inspection

    def group_state(self, group_id: str) -> GroupView | None:
        """A snapshot of one group (None if unknown)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return GroupView(
            group_id=group.group_id,
            state=group.state.value,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id,
            members=tuple(
                MemberView(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocols=m.protocols,
                    assignment=m.assignment if group.is_in(State.STABLE) else None,
                    awaiting_join=m.is_awaiting_join,
                    awaiting_sync=m.is_awaiting_sync,
                )
                for m in group.members.values()
            ),
            pending_members=tuple(group.pending_members),
        )

    def group_ids(self) -> list[str]:
        return list(self._groups)

    # ================================================================ delivery

    def _send(self, callback: Callable[[Any], None], response: object) -> None:
        self._outbox.append((callback, response))

    def _flush(self) -> None:
        """Deliver parked answers, in order, once the state is consistent. A callback that
        raises does not stop the others; the first error is re-raised wrapped."""
        if self._flushing:
            return
        self._flushing = True
        first: BaseException | None = None
        try:
            while self._outbox:
                callback, response = self._outbox.pop(0)
                try:
                    callback(response)
                except Exception as exc:  # re-raised below, wrapped
                    if first is None:
                        first = exc
        finally:
            self._flushing = False
        if first is not None:
            raise CoordinatorCallbackError(f"a respond callback raised: {first!r}") from first


def _uuid_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"
