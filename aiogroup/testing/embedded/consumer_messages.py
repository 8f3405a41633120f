"""The messages of the embedded coordinator's KIP-848 consumer groups, and their settings.

Plain frozen dataclasses, as :mod:`~aiogroup.testing.embedded.messages` has for the classic
APIs: ConsumerGroupHeartbeat (API 68) and ConsumerGroupDescribe (API 69) requests and answers,
what the coordinator knows of the broker's topics (:class:`TopicMetadata`, pushed to it as
Kafka pushes a metadata image), the snapshots offered for inspection
(:class:`ConsumerGroupView`), and :class:`ConsumerGroupSettings`, the broker's
``group.consumer.*`` settings. The server's group APIs
(:mod:`~aiogroup.testing.embedded.group_apis`) translate kafka-python's wire classes to and
from them.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.server_assignors import SERVER_ASSIGNORS

__all__ = [
    "MIGRATION_POLICIES",
    "ConsumerGroupDescribed",
    "ConsumerGroupHeartbeatRequestData",
    "ConsumerGroupHeartbeatResponseData",
    "ConsumerGroupSettings",
    "ConsumerGroupView",
    "ConsumerMemberView",
    "DescribedConsumerMember",
    "DescribedTopicPartitions",
    "TopicMetadata",
]

#: ``group.consumer.migration.policy`` values: which conversions of a non-empty group between
#: the classic and the consumer protocol are allowed (an empty group always converts).
MIGRATION_POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """The broker's ``group.consumer.*`` settings (Kafka's names and defaults, milliseconds).

    ``session_timeout_ms`` and ``heartbeat_interval_ms`` apply to groups without their own
    ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms`` (a group config,
    bounded by the ``min``/``max`` settings); ``max_size`` None means unlimited;
    ``assignors`` are the server assignors served, the first being the default.
    """

    session_timeout_ms: int = 45_000
    min_session_timeout_ms: int = 45_000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 5_000
    min_heartbeat_interval_ms: int = 5_000
    max_heartbeat_interval_ms: int = 15_000
    max_size: int | None = None
    assignors: tuple[str, ...] = ("uniform", "range")
    regex_refresh_interval_ms: int = 600_000
    migration_policy: str = "bidirectional"

    def __post_init__(self) -> None:
        unknown = [a for a in self.assignors if a not in SERVER_ASSIGNORS]
        if not self.assignors or unknown:
            raise ConfigurationError(
                f"assignors must name some of {', '.join(SERVER_ASSIGNORS)}, not {unknown}"
            )
        if self.migration_policy not in MIGRATION_POLICIES:
            raise ConfigurationError(
                f"migration_policy must be one of {', '.join(MIGRATION_POLICIES)}"
            )
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ConfigurationError("need 0 < min_session_timeout_ms <= max_session_timeout_ms")
        if not 0 < self.min_heartbeat_interval_ms <= self.max_heartbeat_interval_ms:
            raise ConfigurationError("need 0 < min_heartbeat_interval_ms <= max")
        if self.heartbeat_interval_ms <= 0 or self.session_timeout_ms <= 0:
            raise ConfigurationError("session_timeout_ms and heartbeat_interval_ms must be > 0")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigurationError("heartbeat_interval_ms must be below session_timeout_ms")
        if self.max_size is not None and self.max_size < 1:
            raise ConfigurationError("max_size must be >= 1 (or None)")

    @property
    def upgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.migration_policy in ("bidirectional", "downgrade")


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    """One topic as the coordinator sees the broker's metadata: name, id, partition count."""

    name: str
    topic_id: uuid.UUID
    partitions: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequestData:
    """A ConsumerGroupHeartbeat. None (and -1 for ``rebalance_timeout_ms``) means "unchanged";
    ``topic_partitions`` are the partitions the member owns, ``(topic id, partitions)``."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: Sequence[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: Sequence[tuple[uuid.UUID, Sequence[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponseData:
    """``assignment`` None: not sent (unchanged); otherwise every partition the member owns."""

    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopicPartitions:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    """One member in ConsumerGroupDescribe; ``member_type`` (v1): 0 classic, 1 consumer."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopicPartitions, ...]
    target_assignment: tuple[DescribedTopicPartitions, ...]
    member_type: int


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribed:
    """One group in ConsumerGroupDescribe (GROUP_ID_NOT_FOUND for a missing or classic one)."""

    error_code: int
    group_id: str
    error_message: str | None = None
    group_state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerMemberView:
    """A member, for tests: partitions as ``(topic name, partition)`` pairs."""

    member_id: str
    instance_id: str | None
    member_epoch: int
    previous_member_epoch: int
    state: str
    subscribed_topic_names: frozenset[str]
    subscribed_topic_regex: str
    assigned: frozenset[tuple[str, int]]
    pending_revocation: frozenset[tuple[str, int]]
    target: frozenset[tuple[str, int]]
    rebalance_timeout_ms: int
    client_id: str
    uses_classic_protocol: bool


@dataclass(frozen=True, slots=True)
class ConsumerGroupView:
    """A read-only snapshot of one consumer group, for tests."""

    group_id: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberView, ...] = ()

    def member(self, member_id: str) -> ConsumerMemberView | None:
        return next((m for m in self.members if m.member_id == member_id), None)
