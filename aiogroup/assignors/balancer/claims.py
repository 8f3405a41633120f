"""The partitions members claim to own, indexed per topic (KIP-429 2a, KIP-341).

A large group's leader receives a million claims (``owned_partitions``, or sticky user data),
grouped by member and then by topic, and several steps need them per topic: the balancer checks
that they exist and that nobody else claims them, the cooperative step and the leader's plan
(:func:`aiogroup.membership.deltas.leader_plan`) look up who owns a partition. Building one
object per partition, or one set of ``(topic, partition)`` keys, costs seconds at that size.

:class:`ClaimIndex` instead gathers, member by member (each member's tuples are read while they
are in cache), the claimed partitions of each topic into one list with C-level calls. Each
question is then a few C-level passes over one topic's list: a set of it says whether a
partition is claimed twice and answers lookups, its minimum and maximum whether every claim
exists, and its sum (or the set) which partitions nobody claims.

The balancer asks one question of every topic: are its claims plain (ints, each an existing
partition, none twice)? :meth:`ClaimIndex.plain` answers it with a single pass that also
yields the partitions nobody claims: taking the claims away from the set of every partition
removes exactly as many as were claimed if and only if they are distinct and exist. The
other questions about that topic are then answered from those (usually few) unclaimed
partitions, and no set of the claims is built.

Beside the index: :func:`in_order` says whether a member's claim is in order already (a copy of
it is then its assignment), and :class:`ClaimedIds` answers "is this id claimed?" from the
index, for a plan that keeps whole claims.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import chain, compress, repeat
from operator import gt, is_, itemgetter, le, lt

from aiogroup.assignors.balancer.layout import Layout
from aiogroup.protocol.types import PartitionsByTopic

__all__ = [
    "ClaimIndex",
    "ClaimedIds",
    "in_order",
    "last_index",
    "shared_index",
    "tuple_len",
]

Claims = Mapping[str, Sequence[int]]
_INTS = frozenset({int})

#: ``frozenset(range(count))`` per partition count met (see :func:`_every`).
_every_of: dict[int, frozenset[int]] = {}
#: At most this many partitions in all are kept in ``_every_of``.
_EVERY_KEPT = 1 << 18


def _every(count: int) -> frozenset[int]:
    """Every partition ``0 .. count - 1`` of a topic of ``count``, as a set (kept: topics share
    few distinct counts, and a leader meets the same ones every round)."""
    found = _every_of.get(count)
    if found is None:
        found = frozenset(range(count))
        if count <= _EVERY_KEPT:
            if sum(_every_of) + count > _EVERY_KEPT:
                _every_of.clear()
            _every_of[count] = found
    return found


class ClaimIndex:
    """Every claimed partition, per topic, from the members' own ``{topic: partitions}``.

    ``claims[topic]`` lists the partitions of ``topic`` claimed by any member, in the order
    gathered (member by member), with repeats: a partition claimed by two members, or listed
    twice by one, appears twice. Topics nobody claims a partition of have no entry.

    ``gathered``, when given, is ``claims`` already gathered by the caller from ``maps`` (one
    list per topic, member by member; empty lists are dropped).

    Raises ``TypeError`` if a member's partitions are not iterable.
    """

    __slots__ = ("_free", "_regular", "_sets", "claims")

    def __init__(
        self, maps: Sequence[Claims], gathered: dict[str, list[int]] | None = None
    ) -> None:
        self._sets: dict[str, set[int]] = {}
        self._regular: dict[str, bool] = {}
        # Per topic found plain (see plain): its partition count and the partitions unclaimed.
        self._free: dict[str, tuple[int, set[int]]] = {}
        if gathered is not None:
            # Gathered by the caller, from these maps, as below.
            self.claims: dict[str, list[int]] = {t: ps for t, ps in gathered.items() if ps}
            return
        present = [claims for claims in maps if claims]
        self.claims = {}
        if present:
            keys = tuple(present[0])
            if all(type(m) is dict and tuple(m) == keys for m in present):
                # Every member claims the same topics, in the same order (a balanced group
                # with equal subscriptions): zip transposes member rows into topic columns.
                columns = zip(*map(dict.values, present), strict=True)  # type: ignore[arg-type]
                flat = map(list, map(chain.from_iterable, columns))
                self.claims = {t: parts for t, parts in zip(keys, flat, strict=True) if parts}
            else:
                lists: defaultdict[str, list[int]] = defaultdict(list)
                of = lists.__getitem__
                extend = list.extend
                for claims in present:
                    # list.extend(lists[topic], partitions) for every topic, in C.
                    deque(map(extend, map(of, claims), claims.values()), 0)
                self.claims = {t: parts for t, parts in lists.items() if parts}

    def claimed_set(self, topic: str) -> set[int]:
        """The distinct partitions of ``topic`` claimed (``TypeError`` if unhashable)."""
        found = self._sets.get(topic)
        if found is None:
            found = self._sets[topic] = set(self.claims.get(topic, ()))
        return found

    def distinct(self, topic: str) -> bool:
        """Whether no partition of ``topic`` is claimed twice (by two members, or by one)."""
        if topic in self._free:
            return True
        return len(self.claimed_set(topic)) == len(self.claims.get(topic, ()))

    def plain(self, topic: str, count: int) -> bool:
        """True if the claims of ``topic`` are plain ints (not bools, floats...), each a
        partition ``0 <= p < count``, none twice: :meth:`regular` and :meth:`within`.

        One pass over the claims beyond the type check: taking them away from every partition
        of the topic removes as many as were claimed if and only if all exist and none is
        claimed twice. What is left (the unclaimed partitions) is kept, and answers
        :meth:`claimed`, :meth:`unclaimed` and :meth:`distinct` for this topic from then on.
        A topic with many more partitions than claims is checked as :meth:`regular` and
        :meth:`within` do instead (not walking every partition of it).
        """
        known = self._free.get(topic)
        if known is not None and known[0] == count:
            return True
        parts = self.claims.get(topic)
        if not parts:
            return True
        if count > 4 * len(parts) + 64:  # a few claims of a large topic: not every partition
            return self.regular(topic) and self.within(topic, count)
        if not _INTS.issuperset(map(type, parts)):
            return False
        free = _every(count).difference(parts)
        if len(free) != count - len(parts):  # a claim twice, or of no partition
            return False
        # A fresh set: the difference keeps the size of every partition's table.
        self._free[topic] = (count, set(free))
        self._regular[topic] = True
        return True

    def regular(self, topic: str) -> bool:
        """True if the claims of ``topic`` are plain ints (not bools, floats...), none twice.

        Says nothing about whether the partitions exist: see :meth:`within`.
        """
        known = self._regular.get(topic)
        if known is None:
            parts = self.claims.get(topic, [])
            known = _INTS.issuperset(map(type, parts)) and self.distinct(topic)
            self._regular[topic] = known
        return known

    def within(self, topic: str, count: int) -> bool:
        """True if every claim of ``topic`` is a partition ``0 <= p < count`` (for a
        :meth:`regular` topic; ``TypeError`` for values that do not compare with ints)."""
        known = self._free.get(topic)
        if known is not None and known[0] == count:
            return True
        parts = self.claims.get(topic)
        return not parts or (min(parts) >= 0 and max(parts) < count)

    def claimed(self, topic: str, partition: int) -> bool:
        """Whether some member claims ``topic``-``partition``."""
        if topic not in self.claims:
            return False
        known = self._free.get(topic)
        if known is not None and type(partition) is int:
            return 0 <= partition < known[0] and partition not in known[1]
        return partition in self.claimed_set(topic)

    def unclaimed(self, topic: str, count: int) -> list[int]:
        """The partitions ``0 .. count - 1`` of a :meth:`regular`, :meth:`within` topic that
        nobody claims, ascending."""
        known = self._free.get(topic)
        if known is not None and known[0] == count:
            return sorted(known[1])
        parts = self.claims.get(topic, [])
        missing = count - len(parts)
        if missing == 0:
            return []
        if missing == count:
            return list(range(count))
        if missing == 1:  # what the sum lacks
            return [count * (count - 1) // 2 - sum(parts)]
        return sorted(set(range(count)).difference(self.claimed_set(topic)))


#: The index made last, with the claims it was made from (see :func:`shared_index`).
_last: tuple[tuple[Claims, ...], ClaimIndex] | None = None


def shared_index(
    maps: Sequence[Claims], *, keep: bool = True, made: ClaimIndex | None = None
) -> ClaimIndex:
    """``ClaimIndex(maps)``, or the index made last if ``maps`` are the very same objects, in
    the same order.

    A leader's assignor and its KIP-429 plan both need the members' claims per topic; built
    once, the index serves both (at a million claims it costs a tenth of a second). The claims
    are read-only by contract (``PartitionsByTopic``), so the same objects hold the same
    partitions. ``keep=False`` hands the index over and forgets it (the plan is its last user:
    it need not stay in memory until the next rebalance). ``made``: the index of ``maps``,
    built by the caller (it is kept as if made here).
    """
    global _last
    last = _last
    if made is None and last is not None and _same(last[0], maps):
        if not keep:
            _last = None
        return last[1]
    index = ClaimIndex(maps) if made is None else made
    _last = (tuple(maps), index) if keep else None
    return index


def last_index(maps: Sequence[Claims]) -> ClaimIndex | None:
    """The index made last, if it was made from the very same ``maps`` (see
    :func:`shared_index`), else ``None``."""
    last = _last
    return last[1] if last is not None and _same(last[0], maps) else None


def _same(made_from: tuple[Claims, ...], maps: Sequence[Claims]) -> bool:
    return len(made_from) == len(maps) and all(map(is_, made_from, maps))


def in_order(claim: PartitionsByTopic, lens: list[int]) -> bool:
    """Whether a valid claim (partitions in tuples of lengths ``lens``, none twice) is sorted:
    its topics, and each topic's partitions. A copy of it is then the member's assignment."""
    if not lens or 0 in lens or not _sorted_keys(claim):
        return False
    top = max(lens)
    if top == 1:
        return True
    if top == 2:  # distinct partitions: a pair is sorted if its first is below its last
        values = claim.values()
        if 1 not in lens:  # pairs only: compare the even and the odd positions
            flat = list(chain.from_iterable(values))
            return all(map(lt, flat[0::2], flat[1::2]))
        return all(map(le, map(_first_item, values), map(_last_item, values)))
    return _tuples_sorted(claim.values(), lens, top)


_first_item = itemgetter(0)
_last_item = itemgetter(-1)


def _tuples_sorted(values: Iterable[Sequence[int]], lens: list[int], top: int) -> bool:
    """Whether each of ``values`` (tuples, as :func:`in_order`'s callers check, of lengths
    ``lens``, the longest ``top``, no value twice in one) is ascending.

    Only those of two or more are looked at (most claims hold one partition of many topics),
    each compared with its sorted copy, at C level. They are picked by a mask made from the
    lengths as bytes (one C-level ``translate``) while no tuple is longer than 255."""
    if top < 256:
        selectors: Iterable[int] = bytes(lens).translate(_SEVERAL)
    else:
        selectors = map(gt, lens, repeat(1))
    several = list(compress(values, selectors))
    return list(map(tuple, map(sorted, several))) == several


#: ``bytes.translate`` table: a tuple length of two or more to 1, else 0.
_SEVERAL = bytes(2) + bytes([1]) * 254


tuple_len: Callable[[object], int] = tuple.__len__  # type: ignore[assignment]

#: The last topics found in sorted order (members of a group mostly hold the same ones).
_last_sorted_keys: list[str] = []


def _sorted_keys(mapping: PartitionsByTopic) -> bool:
    """Whether the topics of ``mapping`` are in sorted order (they are distinct: a sorted copy
    equals them; sorting a sorted list is one C-level comparison per topic)."""
    global _last_sorted_keys
    keys = list(mapping)
    if keys == _last_sorted_keys:
        return True
    if sorted(keys) == keys:
        _last_sorted_keys = keys
        return True
    return False


class ClaimedIds:
    """The ids of every claimed partition, answered from a :class:`ClaimIndex` (the fast
    uniform path builds no set of a million ids)."""

    __slots__ = ("_index", "_layout", "_size")

    def __init__(self, layout: Layout, index: ClaimIndex) -> None:
        self._layout = layout
        self._index = index
        self._size = sum(map(len, index.claims.values()))

    def __contains__(self, ident: object) -> bool:
        if type(ident) is not int:
            return False
        offsets = self._layout.offsets
        k = bisect_left(offsets, ident + 1) - 1
        return k >= 0 and self._index.claimed(self._layout.topics[k], ident - offsets[k])

    def __len__(self) -> int:
        return self._size
