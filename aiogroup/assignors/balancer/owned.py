"""What each member validly owns, as the general path needs it.

Two views answer the same questions (each member's load and ids, the free ids of a topic, who
owns an id, which ids anyone claims, whether a member's claim can stand for what it keeps):

- :class:`OwnedClaims` when every claim is plainly valid, checked per topic with a
  :class:`~aiogroup.assignors.balancer.claims.ClaimIndex` and turned into ids only for the
  members the rebalance touches;
- :class:`OwnedIds` otherwise: member by member, bad claims dropped with a warning
  (:func:`~aiogroup.assignors.balancer.layout.valid_ids`), conflicts settled
  (:func:`~aiogroup.assignors.balancer.layout.resolve`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container
from itertools import chain, compress, repeat
from operator import add, gt, itemgetter, setitem
from typing import TypeAlias

from aiogroup.assignors.balancer.claims import (
    ClaimedIds,
    ClaimIndex,
    in_order,
    last_index,
    shared_index,
    tuple_len,
)
from aiogroup.assignors.balancer.layout import Layout, MemberClaim, resolve, valid_ids
from aiogroup.protocol.types import PartitionsByTopic

__all__ = ["Owned", "OwnedClaims", "OwnedIds"]


class OwnedIds:
    """What each member validly owns, for :func:`general`: checked member by member
    (:func:`valid_ids`, with warnings for bad claims), conflicts resolved (:func:`resolve`).

    ``owner_of[g]`` is the member that validly owns id ``g``, -2 if it is claimed but kept by
    nobody (a claim of an unsubscribed topic, a lost conflict), -1 if nobody claims it.
    ``whole[i]`` is member ``i``'s claim when it is exactly what the member validly owns (in
    tuples), ``ordered[i]`` whether that claim is sorted already (see :attr:`Plan.ordered`).
    """

    def __init__(
        self,
        layout: Layout,
        member_ids: list[str],
        claims: list[MemberClaim],
        subscribed: list[frozenset[str]],
    ) -> None:
        self.layout = layout
        owned: list[list[int]] = []
        owner_of = [-1] * layout.total
        for claim, subs in zip(claims, subscribed, strict=True):
            valid, foreign = valid_ids(layout, claim, subs)
            owned.append(valid)
            deque(map(setitem, repeat(owner_of), foreign, repeat(-2)), 0)
        conflict = False
        for i, ids in enumerate(owned):
            if ids:
                conflict = conflict or max(map(owner_of.__getitem__, ids)) >= 0
                deque(map(setitem, repeat(owner_of), ids, repeat(i)), 0)
        before = list(map(len, owned))
        if conflict:
            everything = list(chain.from_iterable(owned))
            resolve(member_ids, [c.generation for c in claims], owned)
            deque(map(setitem, repeat(owner_of), everything, repeat(-2)), 0)
            for i, ids in enumerate(owned):
                deque(map(setitem, repeat(owner_of), ids, repeat(i)), 0)
        self.owned = owned
        self.owner_of = owner_of
        self.loads = list(map(len, owned))
        self.claimed: Container[int] = _ClaimedArray(owner_of)
        self.whole: list[PartitionsByTopic | None] = [None] * len(claims)
        self.ordered = [False] * len(claims)
        for i, claim in enumerate(claims):
            if not owned[i] or len(owned[i]) != before[i]:
                continue
            try:
                lens = list(map(tuple_len, claim.owned.values()))
            except TypeError:
                continue
            if sum(lens) == len(owned[i]):
                self.whole[i] = claim.owned
                self.ordered[i] = in_order(claim.owned, lens)

    def ids(self, i: int) -> list[int]:
        """The ids member ``i`` validly owns."""
        return self.owned[i]

    def free(self, k: int) -> list[int]:
        """The ids of topic ``k`` nobody validly owns, ascending."""
        return _free_ids(self.owner_of, self.layout.offsets[k], self.layout.counts[k])


class OwnedClaims:
    """:class:`OwnedIds` for plainly valid claims, checked per topic instead of per member.

    When every claimed partition is an int that exists, of a topic its claimant subscribes to,
    and nobody claims a partition twice (so there is no conflict and nothing to warn about),
    each member owns exactly its claim. A :class:`ClaimIndex` shows that with a few C-level
    passes over each topic's claims, and then a member's ids are worked out (and ``owner_of``
    marked) only when :func:`general` groups it; free partitions come from the gaps in each
    topic's sorted claims.
    """

    def __init__(
        self,
        layout: Layout,
        claims: list[MemberClaim],
        index: ClaimIndex,
        lens: list[list[int]],
        ordered: list[bool],
    ) -> None:
        self.layout = layout
        self._claims = claims
        self._index = index
        self._lens = lens
        self.owner_of = [-1] * layout.total
        self.loads = list(map(sum, lens))
        self.claimed: Container[int] = ClaimedIds(layout, index)
        self.whole: list[PartitionsByTopic | None] = [c.owned or None for c in claims]
        self.ordered = ordered

    @classmethod
    def of(
        cls, layout: Layout, claims: list[MemberClaim], subscribed: list[frozenset[str]]
    ) -> OwnedClaims | None:
        """The view, or ``None`` if some claim is not plainly valid.

        One pass over the members measures each claim's tuples, checks that it is in order and
        gathers its partitions per topic into the claims index, while its tuples are in the
        CPU's cache; then each topic's claims are checked in one pass (:meth:`ClaimIndex.plain`).
        """
        maps = [c.owned for c in claims]
        # The very same claims as the last index was made from: reuse it (see shared_index).
        reused = last_index(maps)
        gathered: dict[str, list[int]] | None = None
        if reused is None:
            gathered = {t: [] for t in layout.topics}
        extend = list.extend
        lens: list[list[int]] = []
        ordered: list[bool] = []
        for owned, subs in zip(maps, subscribed, strict=True):
            try:
                if not owned:
                    lens.append([])
                    ordered.append(False)
                    continue
                # Subscribed topics only; tuple_len refuses anything but a tuple.
                if not owned.keys() <= subs:
                    return None
                mine = list(map(tuple_len, owned.values()))
            except (TypeError, AttributeError):
                return None
            lens.append(mine)
            try:  # now, while its tuples are in the CPU's cache
                ordered.append(in_order(owned, mine))
            except Exception:  # not plainly valid: found below, and the view is not used
                ordered.append(False)
            if gathered is not None:
                # list.extend(gathered[topic], partitions) for every topic, in C. Every topic
                # is one of the layout's (it is subscribed): one itemgetter call fetches the
                # lists (it returns the list itself for a single topic).
                if len(mine) > 1:
                    into = itemgetter(*owned)(gathered)
                else:
                    into = (gathered[next(iter(owned))],)
                deque(map(extend, into, owned.values()), 0)
        index = (
            reused if reused is not None else shared_index(maps, made=ClaimIndex(maps, gathered))
        )
        count_of = layout.count_of
        for topic in index.claims:
            count = count_of.get(topic)
            if count is None or not index.plain(topic, count):
                return None
        return cls(layout, claims, index, lens, ordered)

    def ids(self, i: int) -> list[int]:
        """The ids member ``i`` owns (its whole claim), marked in ``owner_of``."""
        owned = self._claims[i].owned
        if not owned:
            return []
        offsets = map(self.layout.offset_of.__getitem__, owned)
        ids = list(
            map(
                add,
                chain.from_iterable(owned.values()),
                chain.from_iterable(map(repeat, offsets, self._lens[i])),
            )
        )
        deque(map(setitem, repeat(self.owner_of), ids, repeat(i)), 0)
        return ids

    def free(self, k: int) -> list[int]:
        """The ids of topic ``k`` nobody claims, ascending."""
        start, count = self.layout.offsets[k], self.layout.counts[k]
        topic = self.layout.topics[k]
        if topic not in self._index.claims:  # all of it
            return list(range(start, start + count))
        return list(map(add, self._index.unclaimed(topic, count), repeat(start)))


#: Either view of what members validly own.
Owned: TypeAlias = "OwnedIds | OwnedClaims"


class _ClaimedArray:
    """The claimed ids of a :func:`general` plan: those whose ``owner_of`` is not -1."""

    __slots__ = ("_owner_of", "_size")

    def __init__(self, owner_of: list[int]) -> None:
        self._owner_of = owner_of
        self._size = len(owner_of) - owner_of.count(-1)

    def __contains__(self, ident: object) -> bool:
        return (
            type(ident) is int
            and 0 <= ident < len(self._owner_of)
            and (self._owner_of[ident] != -1)
        )

    def __len__(self) -> int:
        return self._size


def _free_ids(owner_of: list[int], start: int, count: int) -> list[int]:
    """The ids of topic ``start .. start + count - 1`` nobody validly owns, ascending."""
    part = owner_of[start : start + count]
    unowned = part.count(-1) + part.count(-2)
    if not unowned:
        return []
    if unowned == count:
        return list(range(start, start + count))
    if unowned * 16 < count:  # a few: find each with a C-level search
        out: list[int] = []
        for marker in (-1, -2):
            at = -1
            try:
                while True:
                    at = part.index(marker, at + 1)
                    out.append(start + at)
            except ValueError:
                pass
        out.sort()
        return out
    return list(compress(range(start, start + count), map(gt, repeat(0), part)))
