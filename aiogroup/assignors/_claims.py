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
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from itertools import chain
from operator import is_

__all__ = ["ClaimIndex", "shared_index"]

Claims = Mapping[str, Sequence[int]]
_INTS = frozenset({int})


class ClaimIndex:
    """Every claimed partition, per topic, from the members' own ``{topic: partitions}``.

    ``claims[topic]`` lists the partitions of ``topic`` claimed by any member, in the order
    gathered (member by member), with repeats: a partition claimed by two members, or listed
    twice by one, appears twice. Topics nobody claims a partition of have no entry.

    Raises ``TypeError`` if a member's partitions are not iterable.
    """

    __slots__ = ("_regular", "_sets", "claims")

    def __init__(self, maps: Sequence[Claims]) -> None:
        present = [claims for claims in maps if claims]
        self.claims: dict[str, list[int]] = {}
        if present:
            keys = tuple(present[0])
            if all(type(m) is dict and tuple(m) == keys for m in present):
                # Every member claims the same topics, in the same order (a balanced group
                # with equal subscriptions): zip transposes member rows into topic columns.
                columns = zip(*map(dict.values, present), strict=True)  # type: ignore[arg-type]
                flat = map(list, map(chain.from_iterable, columns))
                self.claims = {t: parts for t, parts in zip(keys, flat, strict=True) if parts}
            else:
                gathered: defaultdict[str, list[int]] = defaultdict(list)
                lists = gathered.__getitem__
                extend = list.extend
                for claims in present:
                    # list.extend(gathered[topic], partitions) for every topic, in C.
                    deque(map(extend, map(lists, claims), claims.values()), 0)
                self.claims = {t: parts for t, parts in gathered.items() if parts}
        self._sets: dict[str, set[int]] = {}
        self._regular: dict[str, bool] = {}

    def claimed_set(self, topic: str) -> set[int]:
        """The distinct partitions of ``topic`` claimed (``TypeError`` if unhashable)."""
        found = self._sets.get(topic)
        if found is None:
            found = self._sets[topic] = set(self.claims.get(topic, ()))
        return found

    def distinct(self, topic: str) -> bool:
        """Whether no partition of ``topic`` is claimed twice (by two members, or by one)."""
        return len(self.claimed_set(topic)) == len(self.claims.get(topic, ()))

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
        parts = self.claims.get(topic)
        return not parts or (min(parts) >= 0 and max(parts) < count)

    def claimed(self, topic: str, partition: int) -> bool:
        """Whether some member claims ``topic``-``partition``."""
        return topic in self.claims and partition in self.claimed_set(topic)

    def unclaimed(self, topic: str, count: int) -> list[int]:
        """The partitions ``0 .. count - 1`` of a :meth:`regular`, :meth:`within` topic that
        nobody claims, ascending."""
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


def shared_index(maps: Sequence[Claims], *, keep: bool = True) -> ClaimIndex:
    """``ClaimIndex(maps)``, or the index made last if ``maps`` are the very same objects, in
    the same order.

    A leader's assignor and its KIP-429 plan both need the members' claims per topic; built
    once, the index serves both (at a million claims it costs a tenth of a second). The claims
    are read-only by contract (``PartitionsByTopic``), so the same objects hold the same
    partitions. ``keep=False`` hands the index over and forgets it (the plan is its last user:
    it need not stay in memory until the next rebalance).
    """
    global _last
    last = _last
    if last is not None and len(last[0]) == len(maps) and all(map(is_, last[0], maps)):
        if not keep:
            _last = None
        return last[1]
    index = ClaimIndex(maps)
    _last = (tuple(maps), index) if keep else None
    return index
