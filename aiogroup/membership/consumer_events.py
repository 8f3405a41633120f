"""What the KIP-848 machine adds to the actions and events: ConsumerGroupHeartbeat, its one
request (:mod:`~aiogroup.membership.consumer_machine`).

Everything else it asks of the driver and hears from it is what the classic machine uses
(:mod:`~aiogroup.membership.actions`, :mod:`~aiogroup.membership.events`): FindCoordinator,
RequestMetadata (with ``topic_ids=True``), CommitOffsets (``generation_id`` is the member
epoch), InvokeCallbacks, ResolveCommit and RaiseToUser; CoordinatorFound, MetadataUpdated,
CommitCompleted, CallbacksFinished, the user's intents, ...
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from aiogroup.membership.actions import Action
from aiogroup.membership.events import Event

__all__ = [
    "ConsumerGroupHeartbeatCompleted",
    "ConsumerGroupHeartbeatFailed",
    "SendConsumerGroupHeartbeat",
    "TopicIdPartitions",
]

#: Partitions by topic id, as ConsumerGroupHeartbeat names them.
TopicIdPartitions = Mapping[uuid.UUID, tuple[int, ...]]

#: KIP-848's member epochs with a meaning of their own.
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class SendConsumerGroupHeartbeat(Action):
    """Send ConsumerGroupHeartbeat (v1). Answer with ConsumerGroupHeartbeatCompleted or
    ConsumerGroupHeartbeatFailed; a request that reached no coordinator is CoordinatorLost,
    and a broker that does not serve v1 is ConsumerGroupHeartbeatFailed with
    UNSUPPORTED_VERSION (35).

    ``member_epoch``: 0 joins, -1 leaves, -2 leaves for a while (a static member, KIP-848); a
    field left None (``rebalance_timeout_ms`` -1) is unchanged since the last heartbeat the
    coordinator took. ``owned`` is what the member owns (its acknowledgement), by topic id.
    """

    token: int
    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicIdPartitions | None = None

    @property
    def leaving(self) -> bool:
        return self.member_epoch < 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatCompleted(Event):
    """A ConsumerGroupHeartbeat answered without error.

    ``assignment`` is the member's whole assignment by topic id when it changed (or the request
    was a full one), ``None`` when unchanged; ``heartbeat_interval_ms`` the broker's pace.
    """

    token: int
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: TopicIdPartitions | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatFailed(Event):
    """A ConsumerGroupHeartbeat answered with ``error_code`` (and the broker's message)."""

    token: int
    error_code: int
    error_message: str = ""
