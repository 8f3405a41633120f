"""Events: what happened, fed *into* the membership machine (past tense).

Every response event carries the ``token`` of the action it answers. The machine compares it
with the request it is waiting for and silently drops anything else: a late HeartbeatResponse
from a generation we already left, a JoinGroupResponse for a join we abandoned when the
coordinator moved, ... (KAFKA-13406 and friends: a stale response is never acted on).

Broker errors are *data*: a failed response carries Kafka's ``error_code`` (see
:mod:`aiogroup.errors`), never an exception.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from aiogroup.protocol.types import JoinGroupMember

__all__ = [
    "CallbacksFinished",
    "CloseRequested",
    "CommitCompleted",
    "CommitFailed",
    "CoordinatorFound",
    "CoordinatorLookupFailed",
    "CoordinatorLost",
    "Event",
    "HeartbeatCompleted",
    "HeartbeatFailed",
    "JoinGroupCompleted",
    "JoinGroupFailed",
    "JoinGroupMember",
    "LeaveGroupCompleted",
    "MetadataUpdated",
    "RejoinRequested",
    "SubscriptionChanged",
    "SyncGroupCompleted",
    "SyncGroupFailed",
    "UnsubscribeRequested",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every event."""


# -- user intent --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SubscriptionChanged(Event):
    """The user subscribed to ``topics`` (a list subscription) or to ``pattern`` (a compiled
    regular expression matched with ``fullmatch`` against the topics in metadata).

    Exactly one of the two is set. Per KIP-70 the assignment does not change at once: the
    rebalance this triggers revokes what is no longer wanted.
    """

    topics: frozenset[str] | None = None
    pattern: re.Pattern[str] | None = None


@dataclass(frozen=True, slots=True)
class UnsubscribeRequested(Event):
    """The user unsubscribed: commit (auto-commit only), revoke everything, leave (KIP-70).

    ``lost=True`` leaves at once without committing and reports what is owned as *lost*: a
    consumer whose application stopped polling for ``max_poll_interval_ms`` (KIP-62) leaves
    this way, as Java's does; ``reason`` goes into LeaveGroup (KIP-800).
    """

    lost: bool = False
    reason: str = ""


@dataclass(frozen=True, slots=True)
class RejoinRequested(Event):
    """The user asked for a rebalance (Java's ``enforceRebalance``): the member rejoins with
    JoinGroup, ``reason`` in it (KIP-800, JoinGroup v8+). A member subscribed to nothing, or
    leaving, ignores it; one already rebalancing rejoins once more after this round, as Java's
    ``requestRejoin`` does."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class CloseRequested(Event):
    """The user closes the member: commit (auto-commit only), revoke, LeaveGroup unless static.

    ``finish_rebalance_by`` (a time on the ``now`` clock): if a rebalance is under way, finish
    it (or wait until the coordinator is found again) before leaving, so the final commit and
    the revocation happen in a generation the broker still accepts; only if that has not
    happened by then, or the membership is gone, are the partitions reported lost. ``None``
    leaves at once (Java's ``onLeavePrepare``: mid-rebalance means lost).
    """

    finish_rebalance_by: float | None = None
    #: Hand the owned partitions over before leaving (COOPERATIVE protocol, dynamic members
    #: only; otherwise ignored): rejoin once with an empty subscription while still owning
    #: them, so the leader withholds them for one round (KIP-429 2c) while this member keeps
    #: working on them; revoke them when that round's assignment takes them away, then leave
    #: at once, so the others' next (prompt) heartbeat starts the round that gives them out.
    #: Needs ``finish_rebalance_by``: the hand-off gives up at that time and leaves as a
    #: plain close does.
    hand_off: bool = False


# -- cluster knowledge --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetadataUpdated(Event):
    """Topic metadata the driver fetched (answer to RequestMetadata, or a periodic refresh).

    ``partitions_per_topic`` maps every *existing* topic the driver knows to its partition
    count; it replaces the machine's previous view. A subscribed topic missing from it is taken
    as deleted (its owned partitions are reported lost, KIP-429 1b), so the driver must always
    send a complete view of the topics the machine asked about.

    ``topic_ids`` maps topic names to their ids (Metadata v10+), when RequestMetadata asked for
    them (``topic_ids=True``: the KIP-848 machine, whose assignments name topics by id).

    ``partition_racks`` (KIP-881), when RequestMetadata asked for them (``racks=True``: a
    leader some of whose members have a rack): per topic, the racks of each partition's
    replicas in partition order (:data:`aiogroup.assignors.base.PartitionRacks`, the brokers'
    ``broker.rack`` of every replica); ``None`` when not asked.
    """

    partitions_per_topic: Mapping[str, int] = field(default_factory=dict)
    topic_ids: Mapping[str, uuid.UUID] = field(default_factory=dict)
    partition_racks: Mapping[str, Sequence[frozenset[str]]] | None = None


# -- coordinator --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CoordinatorFound(Event):
    """FindCoordinator succeeded and the driver is connected to ``node_id`` (``host:port``)."""

    token: int
    node_id: int
    host: str = ""
    port: int = 0


@dataclass(frozen=True, slots=True)
class CoordinatorLookupFailed(Event):
    """FindCoordinator failed with ``error_code`` (or the request could not be sent: -1)."""

    token: int
    error_code: int


@dataclass(frozen=True, slots=True)
class CoordinatorLost(Event):
    """The connection to the coordinator broke, or a request to it timed out.

    Every request in flight to the coordinator is abandoned (its late answer, if any, will be
    ignored); commits in flight fail with a retriable error. The machine looks the coordinator
    up again.
    """


# -- JoinGroup / SyncGroup ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupCompleted(Event):
    """A successful JoinGroupResponse.

    ``protocol_name`` is the assignor the coordinator selected; ``members`` is non-empty only
    for the leader (``leader == member_id``).
    """

    token: int
    generation_id: int
    member_id: str
    leader: str
    protocol_name: str
    protocol_type: str = "consumer"
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class JoinGroupFailed(Event):
    """A JoinGroupResponse with ``error_code``; ``member_id`` is the id the coordinator handed
    out with MEMBER_ID_REQUIRED (KIP-394)."""

    token: int
    error_code: int
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class SyncGroupCompleted(Event):
    """A successful SyncGroupResponse; ``assignment`` holds the consumer-protocol bytes."""

    token: int
    assignment: bytes
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class SyncGroupFailed(Event):
    """A SyncGroupResponse with ``error_code``."""

    token: int
    error_code: int


# -- Heartbeat / LeaveGroup / OffsetCommit --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatCompleted(Event):
    """A HeartbeatResponse without error."""

    token: int


@dataclass(frozen=True, slots=True)
class HeartbeatFailed(Event):
    """A HeartbeatResponse with ``error_code``."""

    token: int
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupCompleted(Event):
    """The LeaveGroupResponse (any ``error_code``: leaving is best effort)."""

    token: int
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class CommitCompleted(Event):
    """An OffsetCommitResponse where every partition succeeded."""

    token: int


@dataclass(frozen=True, slots=True)
class CommitFailed(Event):
    """An OffsetCommitResponse with a group-level ``error_code`` (the first failed partition's
    code when errors are per partition), or -1 when the request could not be sent."""

    token: int
    error_code: int


# -- callbacks ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallbacksFinished(Event):
    """The driver ran the callbacks of ``InvokeCallbacks(token)``.

    ``first_error`` is the first exception a callback raised (already wrapped by the runner,
    see :mod:`aiogroup.client.callbacks`), or ``None``. Either way the assignment change stands
    (KIP-429 "Rebalance Callback Error Handling").
    """

    token: int
    first_error: BaseException | None = None
