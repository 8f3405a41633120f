"""The ``range`` assignor: Java's ``RangeAssignor`` (KIP-54 era, static ordering from KIP-345).

Per topic, the members subscribed to it are laid out in order and the topic's partitions are cut
into contiguous ranges: with ``n`` partitions and ``m`` members each member gets ``n // m`` and
the first ``n % m`` members one more. Example (Java's javadoc): members C0, C1, topics t0 and t1
with 3 partitions each give ``C0: t0p0 t0p1 t1p0 t1p1`` and ``C1: t0p2 t1p2``.

Member order is Java's ``AbstractPartitionAssignor.MemberInfo`` order (KIP-345): members with a
``group_instance_id`` (static members) come first, sorted by instance id, then dynamic members
sorted by member id. Strings compare as Java does, by UTF-16 code unit, which differs from
Python's code-point order only for characters above U+FFFF.

KIP-881 rack-aware range needs the racks of each partition's replicas, which
``partitions_per_topic`` does not carry; without them Java applies the plain rule, and so do we.

This module also holds the few helpers the ``roundrobin`` assignor shares with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import ClassVar

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.errors import AssignorInputError
from aiogroup.protocol.types import Assignment, Subscription

__all__ = ["AssignorInputError", "RangeAssignor", "java_string_key", "member_order"]


def java_string_key(value: str) -> bytes:
    """Sort key ordering strings like Java's ``String.compareTo`` (UTF-16 code units).

    Big-endian UTF-16 bytes compare exactly as the code units do; ``surrogatepass`` keeps lone
    surrogates (which Java strings may hold) encodable instead of raising.
    """
    return value.encode("utf-16-be", "surrogatepass")


def _instance_id(
    member_id: str,
    subscription: Subscription,
    group_instance_ids: Mapping[str, str | None] | None,
) -> str | None:
    """The member's ``group_instance_id``: from the explicit mapping if given, else from the
    subscription if its type carries one (Java's ``Subscription.groupInstanceId()``, filled from
    the JoinGroup response, KIP-345), else ``None`` (a dynamic member)."""
    if group_instance_ids is not None and member_id in group_instance_ids:
        value: object = group_instance_ids[member_id]
    else:
        value = getattr(subscription, "group_instance_id", None)
    if value is None or isinstance(value, str):
        return value
    raise AssignorInputError(
        f"group_instance_id of member {member_id!r} must be a str or None, not {type(value)!r}"
    )


def member_order(
    subscriptions: Mapping[str, Subscription],
    group_instance_ids: Mapping[str, str | None] | None = None,
) -> list[str]:
    """Member ids in Java's ``MemberInfo`` order (KIP-345).

    Static members (with a ``group_instance_id``) first, by instance id; then dynamic members by
    member id. Java leaves two static members with the same instance id (which a broker never
    allows) in hash-map order; we break that tie by member id so the result stays deterministic
    (KAFKA-12898).
    """
    keyed: list[tuple[int, bytes, bytes, str]] = []
    for member_id, subscription in subscriptions.items():
        instance_id = _instance_id(member_id, subscription, group_instance_ids)
        member_key = java_string_key(member_id)
        if instance_id is None:
            keyed.append((1, b"", member_key, member_id))
        else:
            keyed.append((0, java_string_key(instance_id), member_key, member_id))
    keyed.sort()
    return [entry[3] for entry in keyed]


def checked_partition_counts(partitions_per_topic: Mapping[str, int]) -> dict[str, int]:
    """Copy of ``partitions_per_topic`` with topics that have no partitions dropped.

    Java skips topics whose metadata is missing or empty (``AbstractPartitionAssignor``); a
    negative count is no metadata any broker sends, so it is refused rather than guessed at.
    """
    counts: dict[str, int] = {}
    for topic, count in partitions_per_topic.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise AssignorInputError(
                f"partition count of topic {topic!r} must be an int >= 0, not {count!r}"
            )
        if count > 0:
            counts[topic] = count
    return counts


def refuse_bare_string(member_id: str, topics: object) -> None:
    """Refuse a subscription whose topics are one string (``Subscription(topics="orders")``)
    rather than read it as the topics "o", "r", "d", ... Every assignor calls this."""
    if isinstance(topics, str | bytes):
        raise AssignorInputError(
            f"topics of member {member_id!r} must be a sequence of names, not {topics!r} "
            f"(write [{topics!r}] for one topic)"
        )


def unique_topics(member_id: str, topics: Iterable[str]) -> set[str]:
    """A subscription's topics as a set: Java keeps a member once per topic even if the wire
    list repeats a topic. A bare string is refused (:func:`refuse_bare_string`)."""
    refuse_bare_string(member_id, topics)
    return set(topics)


def build_assignments(
    subscriptions: Mapping[str, Subscription],
    plan: Mapping[str, Mapping[str, tuple[int, ...]]],
) -> dict[str, Assignment]:
    """One :class:`Assignment` per member (empty when it gets nothing), topics sorted, topics
    with no partitions left out."""
    result: dict[str, Assignment] = {}
    for member_id in sorted(subscriptions):
        topics = plan.get(member_id, {})
        result[member_id] = Assignment(
            partitions={topic: topics[topic] for topic in sorted(topics) if topics[topic]}
        )
    return result


class RangeAssignor(PartitionAssignor):
    """Java's ``range`` assignor (EAGER only): contiguous per-topic ranges.

    ``assign`` also accepts ``group_instance_ids`` (member id to ``group_instance_id``, as the
    JoinGroup response reports them) so static members sort by instance id, as in Java.
    Runs in O(M log M + S + P) for M members, S subscription entries and P partitions.
    """

    name: ClassVar[str] = "range"
    version: ClassVar[int] = 0
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        *,
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        counts = checked_partition_counts(partitions_per_topic)
        # Walking members once in global order fills every topic's member list already sorted.
        members_per_topic: dict[str, list[str]] = {}
        for member_id in member_order(subscriptions, group_instance_ids):
            for topic in unique_topics(member_id, subscriptions[member_id].topics):
                if topic in counts:  # absent or empty topics are simply not assigned
                    members_per_topic.setdefault(topic, []).append(member_id)

        plan: dict[str, dict[str, tuple[int, ...]]] = {}
        for topic, members in members_per_topic.items():
            quota, extra = divmod(counts[topic], len(members))
            start = 0
            for index, member_id in enumerate(members):
                length = quota + (1 if index < extra else 0)
                if length == 0:
                    break  # later members get nothing either (n < m)
                plan.setdefault(member_id, {})[topic] = tuple(range(start, start + length))
                start += length
        return build_assignments(subscriptions, plan)
