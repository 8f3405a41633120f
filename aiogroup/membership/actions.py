"""Actions: what the membership machine asks the driver to do (imperative).

Every request action carries a ``token``; the driver echoes it in the event that answers it.
Request actions also carry the ``(member_id, generation_id)`` they were built with, so the
driver never has to ask the machine again (and a request built for one generation is never
sent as another).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import AiogroupError
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "Action",
    "CommitOffsets",
    "FindCoordinator",
    "InvokeCallbacks",
    "RaiseToUser",
    "RequestMetadata",
    "ResolveCommit",
    "SendHeartbeat",
    "SendJoinGroup",
    "SendLeaveGroup",
    "SendSyncGroup",
]


@dataclass(frozen=True, slots=True)
class Action:
    """Base class of every action."""


@dataclass(frozen=True, slots=True)
class FindCoordinator(Action):
    """Look up the group coordinator and connect to it.

    Answer with CoordinatorFound or CoordinatorLookupFailed (same ``token``).
    """

    token: int
    group_id: str


@dataclass(frozen=True, slots=True)
class RequestMetadata(Action):
    """Fetch topic metadata and answer with MetadataUpdated.

    ``topics`` lists the topics wanted; ``None`` means all topics (regex subscriptions). The
    answer must cover every topic listed (an absent topic is taken as not existing).
    ``topic_ids``: answer with the topics' ids too (MetadataUpdated.topic_ids, KIP-848).
    ``racks``: answer with the racks of each partition's replicas too
    (MetadataUpdated.partition_racks, KIP-881); asked only by a leader some of whose members
    have a rack, as they cost a pass over every partition's replicas.
    """

    topics: frozenset[str] | None
    pattern: re.Pattern[str] | None = None
    topic_ids: bool = False
    racks: bool = False


@dataclass(frozen=True, slots=True)
class SendJoinGroup(Action):
    """Send JoinGroup. Answer with JoinGroupCompleted or JoinGroupFailed.

    ``protocols`` lists ``(assignor name, Subscription bytes)`` in preference order: one
    JoinGroup for every configured assignor (aiokafka #1168 sent one per assignor).
    """

    token: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class SendSyncGroup(Action):
    """Send SyncGroup. Answer with SyncGroupCompleted or SyncGroupFailed.

    ``assignments`` is non-empty only on the leader: ``(member_id, Assignment bytes)`` for every
    member of the generation (empty assignments included), sorted by member id.
    """

    token: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    protocol_type: str
    protocol_name: str
    assignments: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SendHeartbeat(Action):
    """Send Heartbeat. Answer with HeartbeatCompleted or HeartbeatFailed."""

    token: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class SendLeaveGroup(Action):
    """Send LeaveGroup (dynamic members only, KIP-345). Answer with LeaveGroupCompleted (or
    CoordinatorLost: leaving is best effort)."""

    token: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CommitOffsets(Action):
    """Send OffsetCommit with this ``(member_id, generation_id)``.

    ``offsets`` maps partitions to the offsets to commit; ``None`` (auto-commit before a
    rebalance, unsubscribe or close) means "the consumed positions of the partitions owned
    now". Answer with CommitCompleted or CommitFailed; the machine then emits ResolveCommit.

    ``during_join`` is set when this member's JoinGroup is in flight. A coordinator handles the
    requests of one connection one at a time, in order, and holds a JoinGroup until the join
    phase completes: send such a commit on another connection to the coordinator, or it would
    only be handled after the generation moved on (and fail with ILLEGAL_GENERATION).
    """

    token: int
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None
    offsets: Mapping[TopicPartition, int] | None = None
    during_join: bool = False


@dataclass(frozen=True, slots=True)
class ResolveCommit(Action):
    """The commit ``token`` is over: report ``error`` (``None`` = success) to whoever asked.

    The machine translates broker codes: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION become a fatal
    CommitFailedError, REBALANCE_IN_PROGRESS stays the retriable RebalanceInProgressError, and
    ILLEGAL_GENERATION for a commit sent during a join (the join moved the generation on before
    the commit arrived) becomes RebalanceInProgressError too.
    """

    token: int
    error: AiogroupError | None = None


@dataclass(frozen=True, slots=True)
class InvokeCallbacks(Action):
    """Run the rebalance listener, then answer with CallbacksFinished(token, first_error).

    Order: ``lost``, then ``revoked``, then ``assigned``. An empty ``lost`` or ``revoked`` set
    is not delivered; ``assigned`` is delivered (even empty) unless it is ``None``.
    ``protocol`` tells which rebalance protocol the group runs (listeners may care: in EAGER
    ``assigned`` is the full assignment, in COOPERATIVE only the newly added partitions).
    """

    token: int
    protocol: RebalanceProtocol
    generation_id: int
    member_id: str
    revoked: frozenset[TopicPartition] = frozenset()
    assigned: frozenset[TopicPartition] | None = None
    lost: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class RaiseToUser(Action):
    """Raise ``error`` from the user's next call into the member (poll/getone/...).

    ``fatal`` means the member is done (FENCED_INSTANCE_ID, ...): every later call should raise.
    A callback error (RebalanceCallbackError) is not fatal: the assignment change stood.
    """

    error: AiogroupError
    fatal: bool = False
