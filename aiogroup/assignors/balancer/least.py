"""The least loaded subscriber of a topic, from bit sets of the members at each load."""

from __future__ import annotations

from bisect import insort
from collections import deque
from functools import reduce
from itertools import repeat
from operator import or_, setitem

__all__ = ["LeastLoaded"]


class LeastLoaded:
    """The least loaded subscriber of a topic, lowest member index on ties.

    Members are bits of Python ints: one int per load value holds the members at that load,
    one per topic its subscribers. The answer is the lowest set bit of the first non-zero
    ``members at load v & subscribers`` for v ascending: a few C-level operations on
    ints of one bit per member, where scanning the subscribers (or the classes of equal
    subscriptions, which are as many as the members when subscriptions are random) costs
    O(members).
    """

    __slots__ = (
        "_at",
        "_bits",
        "_everyone",
        "_levels",
        "_members",
        "_near_of",
        "_same",
        "_subs",
        "_topics_of",
    )

    def __init__(
        self, members: int, subs: list[list[int]], load: list[int], topics_of: list[list[int]]
    ) -> None:
        self._members = members
        self._subs = subs
        self._topics_of = topics_of
        # Per member, the members it shares a topic with (built on first use).
        self._near_of = [-1] * members
        self._everyone = (1 << members) - 1
        self._same: dict[int, list[int]] = {}
        for i, ks in enumerate(topics_of):
            self._same.setdefault(id(ks), []).append(i)
        self._bits: list[int] = [-1] * len(subs)  # per topic, built on first use
        self._at: dict[int, int] = {}
        for i, n in enumerate(load):
            self._at[n] = self._at.get(n, 0) | (1 << i)
        self._levels = sorted(self._at)

    def _subscribers(self, k: int) -> int:
        bits = self._bits[k]
        if bits < 0:
            flags = bytearray(b"0" * self._members)
            deque(map(setitem, repeat(flags), self._subs[k], repeat(ord("1"))), 0)
            flags.reverse()
            bits = self._bits[k] = int(flags, 2)
        return bits

    def lighter_near(self, a: int, limit: int) -> bool:
        """Whether a member with load ``<= limit`` subscribes to a topic member ``a`` does."""
        near = self._near_of[a]
        if near < 0:
            bits = self._bits
            # The topics' subscribers OR-ed in chunks: with overlapping subscriptions a few
            # topics already cover every member, and nothing can be added after that.
            ks = self._topics_of[a]
            near = 0
            for lo in range(0, len(ks), 16):
                chunk = list(map(bits.__getitem__, ks[lo : lo + 16]))
                if -1 in chunk:  # not all built yet
                    chunk = list(map(self._subscribers, ks[lo : lo + 16]))
                near = reduce(or_, chunk, near)
                if near == self._everyone:
                    break
            # Members with the same subscription share one list of topics: share the result.
            for b in self._same[id(self._topics_of[a])]:
                self._near_of[b] = near
        at = self._at
        for n in self._levels:
            if n > limit:
                return False
            if at[n] & near:
                return True
        return False

    def least_of(self, k: int) -> int:
        """The least loaded subscriber of topic ``k`` (-1 if it has none)."""
        bits = self._subscribers(k)
        at = self._at
        for n in self._levels:
            found = at[n] & bits
            if found:
                return (found & -found).bit_length() - 1
        return -1

    def moved(self, i: int, old: int, new: int) -> None:
        """Member ``i``'s load went from ``old`` to ``new``."""
        bit = 1 << i
        at = self._at
        rest = at[old] ^ bit
        if rest:
            at[old] = rest
        else:
            del at[old]
            self._levels.remove(old)
        if new in at:
            at[new] |= bit
        else:
            at[new] = bit
            insort(self._levels, new)
