"""The embedded coordinator's messages: the requests it takes and the answers it gives.

Plain frozen dataclasses, one family per Kafka API (JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups), the snapshots it offers
for inspection (:class:`GroupView`), and the error codes it answers with (:class:`ErrorCode`).
The coordinator (:mod:`aiogroup.testing.embedded.coordinator`) takes and returns them; the
server's group APIs (:mod:`aiogroup.testing.embedded.group_apis`) translate kafka-python's wire
classes to and from them. ``api_version`` in a request is the wire version the client used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from aiogroup.protocol.types import JoinGroupMember

__all__ = [
    "AUTHORIZED_OPERATIONS_OMITTED",
    "GROUP_CONFIG_OPERATIONS",
    "GROUP_OPERATIONS",
    "NO_MEMBER_ID",
    "DescribedGroup",
    "DescribedMember",
    "ErrorCode",
    "GroupView",
    "HeartbeatRequestData",
    "HeartbeatResponseData",
    "JoinCallback",
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
    "SyncCallback",
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
    INVALID_REQUEST = 42
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    UNKNOWN_TOPIC_ID = 100
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


#: JoinGroupRequest.UNKNOWN_MEMBER_ID: the member id of a member that has none yet.
NO_MEMBER_ID = ""

#: DescribeGroups v3+ ``authorized_operations`` when not asked for: Integer.MIN_VALUE (KIP-430).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


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
    """``generation_id`` -1 with empty ``member_id``: a simple (admin / assign()) commit.
    From v9 ``generation_id`` is a consumer group member's epoch (KIP-848)."""

    group_id: str
    partitions: Sequence[OffsetCommitPartition]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
    api_version: int = 8


@dataclass(frozen=True, slots=True)
class OffsetCommitResponseData:
    """One ``(topic, partition, error_code)`` per requested partition, in request order."""

    partitions: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequestData:
    """``partitions`` None asks for every committed offset of the group (v2+). v9 names the
    member of a consumer group asking, and its epoch (KIP-848; None and -1: nobody)."""

    group_id: str
    partitions: Sequence[tuple[str, int]] | None = None
    require_stable: bool = False
    member_id: str | None = None
    member_epoch: int = -1


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
    """Kafka's DescribeGroups answer; a nonexistent group is ``Dead`` with no error (v0-5), or
    GROUP_ID_NOT_FOUND with ``error_message`` (v6+, KIP-1043). ``authorized_operations`` is the
    v3+ bitfield (with no authorizer: every group operation)."""

    error_code: int
    group_id: str
    group_state: str
    protocol_type: str
    protocol_data: str
    members: tuple[DescribedMember, ...] = ()
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED
    error_message: str | None = None


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
#: What Kafka 4.0 added to a group's operations with group configs (KAFKA-14510):
#: DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
GROUP_CONFIG_OPERATIONS = (1 << 10) | (1 << 11)
