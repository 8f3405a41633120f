"""KIP-848's server-side assignors, as Kafka 4.1's group coordinator runs them: ``uniform``
and ``range``.

Under the consumer group protocol the broker computes every member's *target* assignment
whenever the group epoch moves past the assignment epoch (a member joined, left or changed its
subscription, a subscribed topic changed). The assignor sees a :class:`GroupSpec`: each
member's subscription (topic ids), its current target assignment, whether every member
subscribes to the same topics (``homogeneous``), and who holds each partition in the current
target assignment. Sans-I/O and clock-free.

* ``uniform`` (Kafka's default, ``UniformAssignor``): balance first (no two members differ by
  more than one partition), then stickiness (as much of the current target kept as balance
  allows). Homogeneous groups: each member keeps up to its quota of what it had, the rest is
  dealt out in the members' order (``UniformHomogeneousAssignmentBuilder``). Heterogeneous
  groups: topics are dealt to their least loaded subscribers, the most constrained topics first,
  then partitions move from the most to the least loaded subscribers of each topic until no
  move improves the balance (``UniformHeterogeneousAssignmentBuilder``).
* ``range`` (``RangeAssignor``): contiguous ranges per topic, members sorted by instance id
  (static members first) then member id, so equal subscriptions give co-partitioned
  assignments; not sticky.

Where Kafka's result depends on iteration order, the order is Kafka's: members in the order of
a ``java.util.HashMap`` keyed by member id (:class:`~aiogroup.testing.embedded.hashorder.JavaMap`
gives it; the coordinator builds the :class:`GroupSpec` in that order), topics in the order of a
``java.util.HashSet`` of ``Uuid`` (:func:`java_uuid_order`), a member's partitions in the
order of a ``HashSet`` of ``Integer`` (:func:`java_int_set_order`), and ``Uuid.compareTo``
(signed halves, :func:`uuid_sort_key`) where topics are sorted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field

__all__ = [
    "SERVER_ASSIGNORS",
    "Assignment",
    "GroupSpec",
    "JavaIntSet",
    "MemberSpec",
    "PartitionAssignorError",
    "Result",
    "java_int_set_order",
    "java_uuid_hash",
    "java_uuid_order",
    "range_assign",
    "stored_order",
    "uniform_assign",
    "uuid_sort_key",
]

#: A member's partitions: topic id -> partition ids (never an empty set).
Assignment = Mapping[uuid.UUID, frozenset[int]]
#: An assignor's answer: member id -> topic id -> the partitions, in the iteration order of the
#: ``java.util.HashSet`` Kafka's assignor built them in (what the target assignment record
#: lists; Kafka rebuilds the set from that list, :func:`stored_order`).
Result = dict[str, dict[uuid.UUID, tuple[int, ...]]]

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


class PartitionAssignorError(Exception):
    """The assignor could not assign (Kafka's ``PartitionAssignorException``; the heartbeat
    that asked for the assignment fails with UNKNOWN_SERVER_ERROR)."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """One member as the assignor sees it: its subscribed topic ids and current target."""

    topic_ids: frozenset[uuid.UUID]
    assignment: Assignment = field(default_factory=dict)
    instance_id: str | None = None
    rack_id: str | None = None
    #: The iteration order of each of ``assignment``'s partition sets as Kafka holds them
    #: (missing: as a set rebuilt from the ascending list, :func:`java_int_set_order`).
    order: Mapping[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)

    def ordered(self, topic: uuid.UUID) -> tuple[int, ...]:
        known = self.order.get(topic)
        if known is not None and frozenset(known) == self.assignment[topic]:
            return known
        return tuple(java_int_set_order(self.assignment[topic]))


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """The group as the assignor sees it.

    ``members`` iterates in Kafka's order (a ``java.util.HashMap`` keyed by member id);
    ``owners`` maps each partition of the current target assignment to its member
    (``invertedTargetAssignment``); ``partitions`` gives each known topic's partition count.
    """

    members: Mapping[str, MemberSpec]
    homogeneous: bool
    partitions: Mapping[uuid.UUID, int]
    owners: Mapping[tuple[uuid.UUID, int], str] = field(default_factory=dict)


# --- Kafka's Uuid, as a java.util.HashSet sees it --------------------------------------------


def _halves(topic_id: uuid.UUID) -> tuple[int, int]:
    return topic_id.int >> 64, topic_id.int & _MASK64


def java_uuid_hash(topic_id: uuid.UUID) -> int:
    """``org.apache.kafka.common.Uuid.hashCode`` as an unsigned 32-bit int."""
    most, least = _halves(topic_id)
    h = most ^ least
    return ((h >> 32) ^ h) & _MASK32


def uuid_sort_key(topic_id: uuid.UUID) -> tuple[int, int]:
    """``Uuid.compareTo``: the most significant half first, each compared as a signed long."""
    most, least = _halves(topic_id)
    return (most - (1 << 64) if most >> 63 else most, least - (1 << 64) if least >> 63 else least)


def java_uuid_order(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """``topic_ids`` in the iteration order of a ``java.util.HashSet`` holding them (bucket
    ``spread(hashCode) & (capacity - 1)``; within a bucket, the order given)."""
    ids = list(dict.fromkeys(topic_ids))
    capacity = 16
    while len(ids) > capacity * 3 // 4:
        capacity *= 2

    def bucket(topic_id: uuid.UUID) -> int:
        h = java_uuid_hash(topic_id)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(ids, key=bucket)  # stable: the given order within a bucket


class JavaIntSet:
    """A ``java.util.HashSet<Integer>``: bucket ``spread(p) & (capacity - 1)``, insertion order
    within a bucket, the table doubled (each bucket split in order) once past 3/4 full."""

    def __init__(self, capacity: int = 16) -> None:
        size = 1
        while size < capacity:
            size *= 2
        self._table: list[list[int]] = [[] for _ in range(size)]
        self._size = 0

    @classmethod
    def of(cls, items: Iterable[int]) -> JavaIntSet:
        """``new HashSet<>(collection)``: a capacity for the collection's size (16 at least),
        then every item added in order."""
        values = list(items)
        out = cls(max(int(len(values) / 0.75) + 1, 16))
        for value in values:
            out.add(value)
        return out

    def _bucket(self, value: int, size: int) -> int:
        h = value & _MASK32
        return (h ^ (h >> 16)) & (size - 1)

    def add(self, value: int) -> None:
        bucket = self._table[self._bucket(value, len(self._table))]
        if value in bucket:
            return
        bucket.append(value)
        self._size += 1
        if self._size > len(self._table) * 3 // 4:
            old, size = self._table, len(self._table) * 2
            self._table = [[] for _ in range(size)]
            for chain in old:
                for moved in chain:
                    self._table[self._bucket(moved, size)].append(moved)

    def discard(self, value: int) -> None:
        bucket = self._table[self._bucket(value, len(self._table))]
        if value in bucket:
            bucket.remove(value)
            self._size -= 1

    def __iter__(self) -> Iterator[int]:
        return iter([value for chain in self._table for value in chain])

    def __len__(self) -> int:
        return self._size


def java_int_set_order(partitions: Iterable[int]) -> list[int]:
    """``partitions`` in the order of a ``HashSet`` built from them in ascending order."""
    return list(JavaIntSet.of(sorted(set(partitions))))


def stored_order(listed: Iterable[int]) -> tuple[int, ...]:
    """The iteration order of the set Kafka keeps a target assignment's partitions in: the set
    the assignor built is written as a list (its iteration order), and replayed as
    ``new HashSet<>(list)`` (``Assignment.fromRecord``)."""
    return tuple(JavaIntSet.of(listed))


def _ordered(assignment: Mapping[uuid.UUID, Iterable[int]]) -> dict[uuid.UUID, tuple[int, ...]]:
    out = {t: tuple(ps) for t, ps in assignment.items()}
    return {t: ps for t, ps in out.items() if ps}


# --- uniform ----------------------------------------------------------------------------------


def uniform_assign(spec: GroupSpec) -> Result:
    """Kafka's ``UniformAssignor``: the homogeneous or the heterogeneous builder."""
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _uniform_homogeneous(spec)
    return _UniformHeterogeneous(spec).build()


def _uniform_homogeneous(spec: GroupSpec) -> Result:
    """``UniformHomogeneousAssignmentBuilder``: every member keeps what it had up to its quota
    (the minimum, plus one for as many members as there are partitions left over, claimed
    in member order unless a later member must take it), then the unassigned partitions are
    dealt to the members with room, in member order. A member's partitions are walked in the
    order Kafka's set holds them; an assignment that changes is a copy (``deepCopyAssignment``)
    changed in place, so the answer lists each set in Kafka's order too."""
    first = next(iter(spec.members.values()))
    topics = java_uuid_order(first.topic_ids)
    if not topics:
        return {}
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic in topics:
        count = spec.partitions.get(topic)
        if count is None:
            raise PartitionAssignorError(
                f"Members are subscribed to topic {topic} which doesn't exist in the topic "
                "metadata."
            )
        unassigned.extend((topic, p) for p in range(count) if (topic, p) not in spec.owners)
        total += count
    member_count = len(spec.members)
    minimum, extra = divmod(total, member_count)
    subscribed = set(topics)
    unchanged: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {}
    copies: dict[str, dict[uuid.UUID, JavaIntSet]] = {}

    def copy(member: MemberSpec) -> dict[uuid.UUID, JavaIntSet]:
        return {t: JavaIntSet.of(member.ordered(t)) for t in member.assignment}

    unfilled: list[tuple[str, int]] = []
    for index, (member_id, member) in enumerate(spec.members.items()):
        quota = minimum
        has_extra = False
        if extra > 0:
            quota += 1
            has_extra = True
        changed: dict[uuid.UUID, JavaIntSet] | None = None
        for topic in java_uuid_order(member.assignment):
            partitions = member.ordered(topic)
            if topic not in subscribed:
                changed = changed if changed is not None else copy(member)
                del changed[topic]  # the whole topic goes
            elif len(partitions) <= quota:
                quota -= len(partitions)
            else:
                for partition in partitions:
                    if quota > 0:
                        quota -= 1
                        continue
                    changed = changed if changed is not None else copy(member)
                    changed[topic].discard(partition)
                    if not len(changed[topic]):
                        del changed[topic]
                    unassigned.append((topic, partition))
        if quota > 0 and has_extra and member_count - index > extra:
            # Give up the extra partition for a later member, unless this one is among the
            # last ``extra`` members and must take it.
            quota -= 1
            has_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if has_extra:
            extra -= 1
        if changed is None:
            unchanged[member_id] = {t: member.ordered(t) for t in member.assignment}
        else:
            copies[member_id] = changed
    position = 0
    for member_id, quota in unfilled:
        if member_id in unchanged:
            copies[member_id] = copy(spec.members[member_id])
            del unchanged[member_id]
        mine = copies[member_id]
        taken = 0
        while taken < quota and position < len(unassigned):
            topic, partition = unassigned[position]
            mine.setdefault(topic, JavaIntSet()).add(partition)
            position += 1
            taken += 1
    if position < len(unassigned):
        raise PartitionAssignorError("Partitions were left unassigned")
    out: Result = {m: _ordered(a) for m, a in unchanged.items()}
    out.update({m: _ordered(a) for m, a in copies.items()})
    return {m: out[m] for m in spec.members}


class _Balancer:
    """``MemberAssignmentBalancer``: the least loaded range of members (grown rightwards) and
    the most loaded range (grown leftwards) of a list sorted by load, then member index."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.members: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        self.members = sorted(members, key=lambda i: (self.sizes[i], i))
        self.least_end = 0
        self.least_count = self.sizes[self.members[0]] - 1
        self.next_least = 0
        self.most_start = self.most_end = len(self.members)
        self.most_count = self.sizes[self.members[-1]] + 1
        self.next_most = len(self.members) - 1
        return self.sizes[self.members[-1]] - self.sizes[self.members[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            while (
                self.least_end < len(self.members)
                and self.sizes[self.members[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.members[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = self.sizes[self.members[self.most_start - 1]]
            else:
                self.most_count -= 1
            while (
                self.most_start > 0
                and self.sizes[self.members[self.most_start - 1]] == self.most_count
            ):
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.members[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        i = self.next_most + 1
        j = self.most_end - 1
        self.members[i], self.members[j] = self.members[j], self.members[i]
        self.most_end -= 1

    def balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


class _UniformHeterogeneous:
    """``UniformHeterogeneousAssignmentBuilder``: keep what is still subscribed, deal the
    unassigned partitions of each topic to its least loaded subscribers (topics with the most
    partitions per subscriber first), then move partitions from the most to the least loaded
    subscribers of each topic, for at most 16 rounds over the topics."""

    MAX_ITERATIONS = 16

    def __init__(self, spec: GroupSpec) -> None:
        self.spec = spec
        self.member_ids = list(spec.members)
        self.sizes = [0] * len(self.member_ids)
        self.subscribers: dict[uuid.UUID, list[int]] = {}
        for index, member_id in enumerate(self.member_ids):
            for topic in java_uuid_order(spec.members[member_id].topic_ids):
                if topic not in spec.partitions:
                    raise PartitionAssignorError(
                        f"Members are subscribed to topic {topic} which doesn't exist in the "
                        "topic metadata."
                    )
                self.subscribers.setdefault(topic, []).append(index)
        self.owners = {t: [-1] * spec.partitions[t] for t in self.subscribers}
        #: Assignments as Kafka's builder holds them: the member's own (unchanged) until the
        #: first change, then a copy of sets changed in place.
        self.unchanged: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {}
        self.target: dict[str, dict[uuid.UUID, JavaIntSet]] = {}

    def _topic_key(self, topic: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        count = self.spec.partitions[topic]
        subscribers = len(self.subscribers[topic])
        return (-count / subscribers, subscribers, uuid_sort_key(topic))

    def _sorted(self, topics: Iterable[uuid.UUID]) -> list[uuid.UUID]:
        return sorted(topics, key=self._topic_key)

    def build(self) -> Result:
        if not self.subscribers:
            return {}
        for index, member_id in enumerate(self.member_ids):
            member = self.spec.members[member_id]
            kept = {t: member.ordered(t) for t in member.assignment}
            for topic, partitions in member.assignment.items():
                if topic in member.topic_ids:
                    self.sizes[index] += len(partitions)
                    for p in partitions:
                        self.owners[topic][p] = index
            self.unchanged[member_id] = kept
            if any(t not in member.topic_ids for t in kept):
                sets = self._mutable(member_id)
                for topic in [t for t in sets if t not in member.topic_ids]:
                    del sets[topic]
        unassigned = {
            t: [p for p, owner in enumerate(owners) if owner == -1]
            for t, owners in self.owners.items()
        }
        balancer = _Balancer(self.sizes)
        for topic in self._sorted(t for t, ps in unassigned.items() if ps):
            balancer.initialize(self.subscribers[topic])
            for partition in unassigned[topic]:
                self._assign(topic, partition, balancer.next_least_loaded())
        movable = [t for t, members in self.subscribers.items() if len(members) >= 2]
        if movable:
            self._balance_topics(movable)
        out: Result = {}
        for member_id in self.member_ids:
            copied = self.target.get(member_id)
            out[member_id] = _ordered(self.unchanged[member_id] if copied is None else copied)
        return out

    def _mutable(self, member_id: str) -> dict[uuid.UUID, JavaIntSet]:
        """``deepCopyAssignment`` the first time a member's assignment changes."""
        found = self.target.get(member_id)
        if found is not None:
            return found
        sets = {t: JavaIntSet.of(ps) for t, ps in self.unchanged[member_id].items()}
        self.target[member_id] = sets
        return sets

    def _balance_topics(self, topics: list[uuid.UUID]) -> None:
        ordered = self._sorted(topics)
        last = -1
        balancer = _Balancer(self.sizes)
        for _ in range(self.MAX_ITERATIONS):
            for index, topic in enumerate(ordered):
                if index == last:
                    return
                moved = self._balance_topic(topic, balancer)
                if moved > 0 or last == -1:
                    last = index

    def _balance_topic(self, topic: uuid.UUID, balancer: _Balancer) -> int:
        moved = 0
        owners = self.owners[topic]
        if balancer.initialize(self.subscribers[topic]) <= 1:
            return moved
        partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
        start: dict[int, int] = {}
        end: dict[int, int] = {}
        for i, partition in enumerate(partitions):
            start.setdefault(owners[partition], i)
            end[owners[partition]] = i + 1
        while not balancer.balanced():
            most = -1
            while True:
                most = balancer.next_most_loaded()
                if most == -1:
                    break
                if most not in end or end[most] - start[most] <= 0:
                    balancer.exclude_most_loaded()
                    continue
                break
            if most == -1:
                break
            partition = partitions[end[most] - 1]
            end[most] -= 1
            least = balancer.next_least_loaded()
            if balancer.balanced():
                break
            self._assign(topic, partition, least)
            moved += 1
        return moved

    def _assign(self, topic: uuid.UUID, partition: int, member: int) -> None:
        old = self.owners[topic][partition]
        if old != -1:
            previous = self._mutable(self.member_ids[old])
            if topic in previous:
                previous[topic].discard(partition)
                if not len(previous[topic]):
                    del previous[topic]
            self.sizes[old] -= 1
        mine = self._mutable(self.member_ids[member])
        if topic not in mine:
            subscribers = len(self.subscribers[topic])
            estimate = -(-self.spec.partitions[topic] // subscribers)
            mine[topic] = JavaIntSet(int(estimate / 0.75) + 1)
        mine[topic].add(partition)
        self.owners[topic][partition] = member
        self.sizes[member] += 1


# --- range ------------------------------------------------------------------------------------


def range_assign(spec: GroupSpec) -> Result:
    """Kafka's server ``RangeAssignor``: per topic, its subscribers in order (instance id for
    static members, who come first, then member id) take contiguous ranges, the first
    ``count % subscribers`` one partition more. Not sticky by design."""
    if not spec.members:
        return {}

    def order(member_id: str) -> tuple[int, str]:
        instance = spec.members[member_id].instance_id
        return (0, instance) if instance is not None else (1, member_id)

    members = sorted(spec.members, key=order)
    if spec.homogeneous:
        topics = java_uuid_order(spec.members[members[0]].topic_ids)
        subscribers = {t: len(members) for t in topics}
    else:
        subscribers = {}
        for member_id in members:
            for topic in spec.members[member_id].topic_ids:
                subscribers[topic] = subscribers.get(topic, 0) + 1
    state: dict[uuid.UUID, list[int]] = {}  # topic -> [next start, extra left]
    for topic in subscribers:
        if topic not in spec.partitions:
            raise PartitionAssignorError("Member is subscribed to a non-existent topic")
    out: Result = {}
    for member_id in members:
        mine: dict[uuid.UUID, tuple[int, ...]] = {}
        for topic in java_uuid_order(spec.members[member_id].topic_ids):
            count = spec.partitions[topic]
            minimum, extra = divmod(count, subscribers[topic])
            start, left = state.setdefault(topic, [0, extra])
            quota = minimum + (1 if left > 0 else 0)
            end = min(start + quota, count)
            state[topic] = [end, left - 1 if left > 0 else left]
            if start < end:
                mine[topic] = tuple(range(start, end))  # a RangeSet: ascending
        out[member_id] = mine
    return out


#: The server assignors by name, in Kafka's default ``group.consumer.assignors`` order (the first
#: is the default).
SERVER_ASSIGNORS: dict[str, Callable[[GroupSpec], Result]] = {
    "uniform": uniform_assign,
    "range": range_assign,
}
