"""Plain value types shared by the codecs, the assignors and the membership state machine.

Partitions are carried grouped by topic (``{topic: (p0, p1, ...)}``), which is how the consumer
protocol puts them on the wire and what lets the codecs and assignors work on a million
partitions without building a million objects. :class:`TopicPartition` is the per-partition
view users see in callbacks; :func:`to_topic_partitions` and :func:`group_by_topic` convert.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "NO_GENERATION",
    "Assignment",
    "JoinGroupMember",
    "PartitionsByTopic",
    "Subscription",
    "TopicPartition",
    "group_by_topic",
    "to_topic_partitions",
]

#: The generation a member reports when it has none (Java's ``DEFAULT_GENERATION``).
NO_GENERATION = -1

#: Partitions grouped by topic. Treat as read-only; codecs produce tuples sorted ascending.
PartitionsByTopic = Mapping[str, Sequence[int]]


class TopicPartition(NamedTuple):
    """One partition of one topic. Orders by topic, then partition."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Subscription:
    """A consumer-protocol Subscription: what a member sends as JoinGroup metadata.

    V0: ``topics``, ``user_data``. V1 adds ``owned_partitions`` (KIP-429). V2 adds
    ``generation_id`` (KIP-792). V3 adds ``rack_id`` (KIP-881). Fields a version does not carry
    take their defaults when decoded. ``version`` records the version the bytes were written at
    (so a reader can tell "generation absent" from "generation -1"); it does not take part in
    equality.
    """

    topics: Sequence[str]
    user_data: bytes | None = None
    owned_partitions: PartitionsByTopic = field(default_factory=dict)
    generation_id: int = NO_GENERATION
    rack_id: str | None = None
    version: int = field(default=3, compare=False)
    #: The member's KIP-345 static id, filled by the leader from the JoinGroup response (Java's
    #: ``Subscription.groupInstanceId``); never on the wire, not part of equality.
    group_instance_id: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Assignment:
    """A consumer-protocol Assignment: what a member receives from SyncGroup.

    V0: ``partitions`` (grouped by topic) and ``user_data``. V1-V3 add no fields to the
    assignment; the version is kept so we can answer in the version the group speaks.
    """

    partitions: PartitionsByTopic = field(default_factory=dict)
    user_data: bytes | None = None
    version: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    """One member as a JoinGroup response lists it to the leader: its id, its static id
    (KIP-345) and its metadata for the chosen protocol (an encoded :class:`Subscription`).
    The client's response, the membership machine's event and the embedded coordinator's
    answer all carry this one record."""

    member_id: str
    metadata: bytes
    group_instance_id: str | None = None


def to_topic_partitions(partitions: PartitionsByTopic) -> list[TopicPartition]:
    """Flatten a by-topic mapping into a sorted list of :class:`TopicPartition`."""
    return sorted(TopicPartition(t, p) for t, ps in partitions.items() for p in ps)


def group_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, tuple[int, ...]]:
    """Group partitions by topic: topics and partitions sorted, duplicates removed."""
    grouped: dict[str, set[int]] = {}
    for topic, partition in partitions:
        grouped.setdefault(topic, set()).add(partition)
    return {t: tuple(sorted(grouped[t])) for t in sorted(grouped)}
