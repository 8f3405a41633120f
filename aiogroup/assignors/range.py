"""The ``range`` assignor: Java's ``RangeAssignor`` (KIP-54 era, static ordering from KIP-345).

Per topic, the members subscribed to it are laid out in order and the topic's partitions are cut
into contiguous ranges: with ``n`` partitions and ``m`` members each member gets ``n // m`` and
the first ``n % m`` members one more. Example (Java's javadoc): members C0, C1, topics t0 and t1
with 3 partitions each give ``C0: t0p0 t0p1 t1p0 t1p1`` and ``C1: t0p2 t1p2``.

Member order is Java's ``AbstractPartitionAssignor.MemberInfo`` order (KIP-345): members with a
``group_instance_id`` (static members) come first, sorted by instance id, then dynamic members
sorted by member id. Strings compare as Java does, by UTF-16 code unit, which differs from
Python's code-point order only for characters above U+FFFF.

Rack-aware (KIP-881, :meth:`RangeAssignor.assign_partitions` with the racks of the partitions'
replicas), as Java's ``RangeAssignor`` since Kafka 3.5: when some topic needs it
(:func:`~aiogroup.assignors.racks.rack_aware`, judged per topic), partitions whose replicas sit
in a member's rack are given first, within each member's range quota, and the rest by the plain
rule; the quotas (``n // m``, the first ``n % m`` members one more as extras run out) stay what
they were, so the balance is the plain one. Topics with the same subscribers and the same
partition count stay co-partitioned: partition ``p`` of all of them goes to one member, the
first in order whose rack holds a replica of every one of them. A member without a rack
matches any partition. Without racks the plain rule applies, exactly as before.

This module also holds the few helpers the ``roundrobin`` assignor shares with it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar

from aiogroup.assignors.base import PartitionAssignor, PartitionRacks, RebalanceProtocol
from aiogroup.assignors.racks import member_racks, rack_aware, racks_of
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
        return self.assign_partitions(
            partitions_per_topic, subscriptions, group_instance_ids=group_instance_ids
        )

    def assign_partitions(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
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

        if partition_racks is not None:
            racks = member_racks(subscriptions)
            if racks:
                matched = _ranges_with_racks(counts, members_per_topic, racks, partition_racks)
                if matched is not None:
                    return build_assignments(subscriptions, matched)

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


class _TopicRanges:
    """One topic of a rack-aware range assignment (Java's ``TopicAssignmentState``): its
    members in order, their racks, what each was given and the quotas still open."""

    __slots__ = (
        "by_rack",
        "count",
        "extra",
        "given",
        "members",
        "n",
        "next_free",
        "owner",
        "quota",
        "rack_aware",
        "rack_next",
        "rack_of",
        "racks",
    )

    def __init__(
        self,
        n: int,
        members: list[str],
        member_rack: Mapping[str, str],
        partition_racks: PartitionRacks,
        topic: str,
    ) -> None:
        self.n = n
        self.members = members
        self.rack_of: list[str | None] = [member_rack.get(m) for m in members]
        self.quota, self.extra = divmod(n, len(members))
        self.count = [0] * len(members)
        self.given: list[list[int]] = [[] for _ in members]
        self.owner = [-1] * n
        self.next_free = 0
        consumer_racks = {r for r in self.rack_of if r is not None}
        # Java reads the partitions' racks only when some member of the topic has a rack.
        self.racks: Sequence[frozenset[str]] = (
            racks_of(partition_racks, topic, n) if consumer_racks else ()
        )
        self.rack_aware = rack_aware(consumer_racks, self.racks)
        self.by_rack: dict[str, list[int]] | None = None
        self.rack_next: dict[str, int] = {}

    def open(self, i: int) -> int:
        """How many more member ``i`` may take (Java's ``maxAssignable``)."""
        return max(0, self.quota + (1 if self.extra > 0 else 0) - self.count[i])

    def give(self, i: int, partitions: list[int]) -> None:
        """Java's ``onAssigned``: the member's count, the extras left, the partitions taken."""
        self.count[i] += len(partitions)
        if self.count[i] > self.quota:
            self.extra -= 1
        self.given[i].extend(partitions)
        owner = self.owner
        for p in partitions:
            owner[p] = i

    def _free_from(self, ids: list[int] | range, start: int, limit: int) -> tuple[list[int], int]:
        """Up to ``limit`` unassigned partitions of ``ids`` from ``start`` on, and where the
        next search starts (every id before it is assigned)."""
        taken: list[int] = []
        owner = self.owner
        pos = start
        end = len(ids)
        while pos < end and len(taken) < limit:
            p = ids[pos]
            if owner[p] < 0:
                taken.append(p)
            pos += 1
        return taken, pos

    def assign_ranges(self, match: bool) -> None:
        """Java's ``assignRanges``: each member in order takes the first unassigned partitions
        it may take (``match``: only those with a replica on its rack; a member without a rack
        matches any), up to what it may still take."""
        if match and self.by_rack is None:
            by_rack: dict[str, list[int]] = {}
            for p, replica_racks in enumerate(self.racks):
                for name in replica_racks:
                    by_rack.setdefault(name, []).append(p)
            self.by_rack = by_rack
        unassigned = self.n - sum(self.count)
        for i, rack in enumerate(self.rack_of):
            if unassigned == 0:
                break
            limit = self.open(i)
            if limit == 0:
                continue
            if match and rack is not None:
                assert self.by_rack is not None
                ids = self.by_rack.get(rack, [])
                taken, self.rack_next[rack] = self._free_from(
                    ids, self.rack_next.get(rack, 0), limit
                )
            else:
                taken, self.next_free = self._free_from(range(self.n), self.next_free, limit)
            if taken:
                self.give(i, taken)
                unassigned -= len(taken)


def _co_partitioned(states: list[_TopicRanges]) -> None:
    """Java's ``assignCoPartitionedWithRackMatching``: partition ``p`` of every topic to the
    first member in order whose rack holds a replica of each (or who has no rack) and who may
    still take one. The topics share members and partition count, and nothing of them was
    given before, so their quotas move in step: the first topic's stand for all."""
    first = states[0]
    members = len(first.members)
    # Members still in the running, per rack (None: no rack), in member order: the head of
    # each is the first that may still take a partition.
    lists: dict[str | None, deque[int]] = {}
    for i, rack in enumerate(first.rack_of):
        lists.setdefault(rack, deque()).append(i)
    anywhere = lists.get(None)
    extras_left = first.extra > 0
    for p in range(first.n):
        if not lists:
            break
        common = frozenset.intersection(*(s.racks[p] for s in states))
        best = anywhere[0] if anywhere else members
        for rack in common:
            queue = lists.get(rack)
            if queue and queue[0] < best:
                best = queue[0]
        if best == members:
            continue
        for s in states:
            s.give(best, [p])
        rack = first.rack_of[best]
        if first.open(best) == 0:
            queue = lists[rack]
            queue.popleft()
            if not queue:
                del lists[rack]
                if rack is None:
                    anywhere = None
        if extras_left and first.extra <= 0:
            # No extras left: members at their quota can take no more, ever.
            extras_left = False
            for key in list(lists):
                kept = deque(i for i in lists[key] if first.open(i) > 0)
                if kept:
                    lists[key] = kept
                else:
                    del lists[key]
            anywhere = lists.get(None)


def _ranges_with_racks(
    counts: Mapping[str, int],
    members_per_topic: Mapping[str, list[str]],
    member_rack: Mapping[str, str],
    partition_racks: PartitionRacks,
) -> dict[str, dict[str, tuple[int, ...]]] | None:
    """Java's rack-aware ``RangeAssignor.assignPartitions``, or ``None`` when no topic needs
    rack-aware assignment (the plain rule then applies)."""
    states = {
        topic: _TopicRanges(counts[topic], members, member_rack, partition_racks, topic)
        for topic, members in members_per_topic.items()
    }
    if not any(s.rack_aware for s in states.values()):
        return None
    # Same members (hence racks), then same partition count: co-partitioned. Java groups by
    # the size of the partitions' rack map, which is empty when no member of the topic has a
    # rack: such topics match nothing anyway.
    groups: dict[tuple[tuple[str, ...], int], list[_TopicRanges]] = {}
    for topic in sorted(states):
        s = states[topic]
        size = s.n if s.racks else 0
        groups.setdefault((tuple(s.members), size), []).append(s)
    for (_, size), group in groups.items():
        if len(group) > 1:
            if size:
                _co_partitioned(group)
        elif group[0].rack_aware:
            group[0].assign_ranges(match=True)
    plan: dict[str, dict[str, tuple[int, ...]]] = {}
    for topic, s in states.items():
        s.assign_ranges(match=False)
        for member_id, given in zip(s.members, s.given, strict=True):
            if given:
                plan.setdefault(member_id, {})[topic] = tuple(sorted(given))
    return plan
