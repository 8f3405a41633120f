"""The partitions members claim to own, indexed per topic (KIP-429 2a, KIP-341).

A large group's leader receives a million claims (``owned_partitions``, or sticky user data),
grouped by member and then by topic, and several steps need them per topic: the balancer checks
that they exist and that nobody else claims them, the cooperative step and the leader's plan
(:func:`aiogroup.membership.deltas.leader_plan`) look up who owns a partition. Building one
object per partition, or one set of ``(topic, partition)`` keys, costs seconds at that size.

:class:`ClaimIndex` instead gathers, member by member (each member's tuples are read while they
are in cache), the claimed partitions of each topic into one list with C-level calls, then
sorts each list once. A sorted list answers "is it claimed" by bisection, and tells at once
whether every claim exists (its ends) and whether a partition is claimed twice (a neighbour).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence

__all__ = ["ClaimIndex"]

Claims = Mapping[str, Sequence[int]]
_INTS = frozenset({int})


class ClaimIndex:
    """Every claimed partition, per topic, from the members' own ``{topic: partitions}``.

    ``claims[topic]`` lists the partitions of ``topic`` claimed by any member, sorted, with
    repeats (a partition claimed by two members, or listed twice by one, appears twice). Topics
    whose partitions cannot be ordered (values that are not numbers) are kept unsorted and are
    not :meth:`regular`. Empty lists are dropped.
    """

    __slots__ = ("_regular", "claims", "unsorted")

    def __init__(self, maps: Sequence[Claims]) -> None:
        gathered: defaultdict[str, list[int]] = defaultdict(list)
        lists = gathered.__getitem__
        extend = list.extend
        for claims in maps:
            if claims:
                # list.extend(gathered[topic], partitions) for every topic, in C.
                deque(map(extend, map(lists, claims), claims.values()), 0)
        self.claims: dict[str, list[int]] = {}
        #: Topics whose claims could not be sorted (kept in the order gathered).
        self.unsorted: set[str] = set()
        self._regular: dict[str, bool] = {}
        for topic, parts in gathered.items():
            if not parts:
                continue
            try:
                parts.sort()
            except TypeError:
                self.unsorted.add(topic)
                self._regular[topic] = False
            self.claims[topic] = parts

    def regular(self, topic: str) -> bool:
        """True if the claims of ``topic`` are ints (sorted) and no partition is claimed twice.

        Says nothing about whether the partitions exist: see :meth:`within`.
        """
        known = self._regular.get(topic)
        if known is None:
            parts = self.claims.get(topic, [])
            # Plain ints only (not bools, floats...), none twice.
            known = _INTS.issuperset(map(type, parts)) and len(set(parts)) == len(parts)
            self._regular[topic] = known
        return known

    def within(self, topic: str, count: int) -> bool:
        """True if every claim of ``topic`` is a partition ``0 <= p < count`` (for a
        :meth:`regular` topic: two comparisons)."""
        parts = self.claims.get(topic)
        return not parts or (parts[0] >= 0 and parts[-1] < count)

    def claimed(self, topic: str, partition: int) -> bool:
        """Whether some member claims ``topic``-``partition``."""
        parts = self.claims.get(topic)
        if not parts:
            return False
        if topic in self.unsorted:
            return partition in parts
        i = bisect_left(parts, partition)
        return i < len(parts) and parts[i] == partition
