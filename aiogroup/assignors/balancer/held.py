"""Who holds what, grouped by topic only for the members the rebalance touches.

``held[i]`` is member ``i``'s partitions as ``{topic index: [ids]}`` (:class:`Held`): what it
owns first, then what the fill gave it, so the ids popped when moving are the newly given ones.
It is built on first access: once a group is balanced, most members are never touched, and
grouping a million partitions per member would cost more than the rebalance. A member that
owns nothing gets a lazy dict whose lists are made only when asked for (:class:`TopicIds`, or
in a fresh group :class:`FilledIds`, found in what the fill wrote). :func:`grouped_held` turns a
member's ``held`` into its assignment.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator
from itertools import accumulate, chain, compress, islice, repeat
from operator import lt, ne, sub
from typing import Any

from aiogroup.assignors.balancer.fill import FillBytes
from aiogroup.assignors.balancer.layout import Layout
from aiogroup.assignors.balancer.owned import Owned

__all__ = ["FilledIds", "Held", "TopicIds", "grouped_held"]


class _LazyLists(dict[int, list[int]]):
    """A dict of lists (``held[i]``) whose lists are made only when asked for: a subclass
    stores a marker as a topic's value and turns it into the list in :meth:`_made`. Reads and
    writes behave as on a dict of lists; ``items()`` and ``values()`` make every list first."""

    __slots__ = ()

    def _made(self, k: int) -> list[int]:
        raise NotImplementedError

    def __getitem__(self, k: int) -> list[int]:
        return self._made(k)

    def get(self, k: int, default: Any = None) -> Any:
        return self._made(k) if k in self else default

    def setdefault(self, k: int, default: Any = None) -> Any:
        if k in self:
            return self._made(k)
        dict.__setitem__(self, k, default)
        return default

    def items(self) -> Any:
        for k in list(self):
            self._made(k)
        return dict.items(self)

    def values(self) -> Any:
        return dict(self.items()).values()


class TopicIds(_LazyLists):
    """``held[i]`` of a member that owns nothing: the topics the fill gave it, in the order
    given, each topic's ids put in a list only when asked for (a scan of this member looks at
    a few topics; making 250 lists for it would cost more than the scan). ``given`` holds one
    run of ids per topic: ``lens[j]`` ids of topic ``topics[j]``.

    Until its list is made, a topic's value is the position ``j`` of its run (an int), so the
    dict is the one lookup table: nothing per topic is built before a topic is asked for."""

    __slots__ = ("_ends", "_given", "_lens")

    def __init__(self, given: list[int], topics: list[int], lens: list[int]) -> None:
        super().__init__(zip(topics, range(len(topics)), strict=True))  # type: ignore[arg-type]
        self._given = given
        self._lens = lens
        self._ends: list[int] | None = None

    def _made(self, k: int) -> list[int]:
        ids: list[int] | int = dict.__getitem__(self, k)
        if type(ids) is int:
            ends = self._ends
            if ends is None:  # where each run ends
                ends = self._ends = list(accumulate(self._lens))
            ids = self._given[ends[ids] - self._lens[ids] : ends[ids]]
            dict.__setitem__(self, k, ids)
        return ids  # type: ignore[return-value]

    def ids(self) -> list[int]:
        """Every id held, without making the lists not made yet: first the runs not made (in
        the order given), then the lists."""
        values: list[list[int] | int] = list(dict.values(self))  # type: ignore[arg-type]
        waiting = [j for j in values if isinstance(j, int)]
        made = [ids for ids in values if not isinstance(ids, int)]
        given, lens = self._given, self._lens
        ends = list(accumulate(lens))
        cuts = (slice(ends[j] - lens[j], ends[j]) for j in waiting)
        return [*chain.from_iterable(map(given.__getitem__, cuts)), *chain.from_iterable(made)]


class FilledIds(_LazyLists):
    """``held[i]`` of a member in a group where nobody owned anything and nothing was hinted:
    the topics the fill gave it partitions of, in fill order, each topic's ids looked up in
    what the fill wrote (:class:`FillBytes`) only when asked for (the fill writes nothing
    per member).

    Until its list is made, a topic's value is ``None``. A list is made before any partition
    of its topic moves to or from this member (see ``move`` in :func:`general`), so until
    then the member holds exactly what the fill gave it of that topic, ascending: the order
    the fill gave them in."""

    __slots__ = ("_fill", "_i", "_layout")

    def __init__(self, topics: Iterable[int], fill: FillBytes, layout: Layout, i: int) -> None:
        super().__init__(dict.fromkeys(topics))  # type: ignore[arg-type]
        self._fill = fill
        self._layout = layout
        self._i = i

    def _made(self, k: int) -> list[int]:
        ids: list[int] | None = dict.__getitem__(self, k)
        if ids is None:
            start = self._layout.offsets[k]
            ids = self._fill.given(self._i, start, start + self._layout.counts[k])
            dict.__setitem__(self, k, ids)
        return ids


def _slices(lens: list[int]) -> Iterator[slice]:
    """The slices of runs of lengths ``lens`` laid end to end."""
    ends = list(accumulate(lens))
    return map(slice, [0, *ends[:-1]], ends)


class Held(dict[int, dict[int, list[int]]]):
    """``held[i]``: member ``i``'s partitions grouped by topic (``{topic index: [ids]}``).

    Built on first access: what the member owns (topics ascending,
    ids ascending), then what the fill gave it (``filled[i]``: one run of ids per topic, in the
    order the fill went through the topics; the fill notes, per topic in ``fill_order``, how
    many each member got in ``fill_runs``). That is the dict, in the order, that the fill
    would have built as it went; but a member the rebalance never touches (most of them, once
    a group is balanced) is never grouped at all. In a group where nobody owned anything
    (``holders`` given, see :func:`~aiogroup.assignors.balancer.fill.fill_fresh`), a member's
    entry is a :class:`FilledIds`.
    """

    def __init__(
        self,
        layout: Layout,
        owned: Owned,
        filled: list[list[int]],
        fill_order: list[int] | None,
        fill_runs: list[Counter[int]] | None,
        holders: tuple[bytearray | list[set[int]], FillBytes] | None = None,
    ) -> None:
        super().__init__()
        # Nobody owned anything and nothing was hinted: who the fill gave partitions of each
        # topic to (per topic in fill order, a row of one byte per member, 1 for a receiver,
        # laid end to end; or, when that would take more memory than the partitions, a set
        # of receivers), and who holds each id (see FilledIds).
        self._holders = holders
        self.members = len(filled)
        self._layout = layout
        self._owned = owned
        self._filled = filled
        self._fill_order = fill_order
        self._fill_runs = fill_runs
        # Ids whose topic may still be found by bisection (see _topics).
        self._bisect_budget = layout.total // 8

    def _topics(self, ids: list[int]) -> list[int]:
        """The topic index of each of ``ids``. By bisection over the topics' offsets while
        few ids were asked about (a rebalance that touches a few members should not build the
        layout's table of a million entries), from that table after."""
        layout = self._layout
        if not layout.indexed and len(ids) <= self._bisect_budget:
            self._bisect_budget -= len(ids)
            return list(map(sub, map(bisect_right, repeat(layout.offsets), ids), repeat(1)))
        return list(map(layout.topic_index_of.__getitem__, ids))

    def _by_topic(self, ids: list[int]) -> dict[int, list[int]]:
        """``ids`` (each topic's in one run) grouped by topic, in C: cut where the topic
        changes."""
        if not ids:
            return {}
        ks = self._topics(ids)
        starts = [0, *compress(range(1, len(ids)), map(ne, islice(ks, 1, None), ks))]
        cuts = map(slice, starts, [*starts[1:], len(ids)])
        return dict(zip(map(ks.__getitem__, starts), map(ids.__getitem__, cuts), strict=True))

    def _runs(self, i: int, given: list[int]) -> tuple[list[int], list[int]]:
        """The topics of member ``i``'s runs in ``given`` and their lengths: as the fill noted
        them, or found from the topic of each id (cut where the topic changes)."""
        if self._fill_order is not None and self._fill_runs is not None:
            # How many of each topic i got, in fill order (0: none), read from the notes of
            # the topics: nothing was written per member while filling.
            got = list(map(dict.get, self._fill_runs, repeat(i), repeat(0)))
            return list(compress(self._fill_order, got)), list(filter(None, got))
        if not given:
            return [], []
        ks = self._topics(given)
        starts = [0, *compress(range(1, len(ks)), map(ne, islice(ks, 1, None), ks))]
        ends = [*starts[1:], len(ks)]
        return list(map(ks.__getitem__, starts)), list(map(sub, ends, starts))

    def __missing__(self, i: int) -> dict[int, list[int]]:
        if self._holders is not None and self._fill_order is not None:
            marks, fill = self._holders
            if isinstance(marks, bytearray):  # member i's column: one C-level slice
                got = compress(self._fill_order, marks[i :: self.members])
            else:
                got = compress(self._fill_order, map(set.__contains__, marks, repeat(i)))
            made = FilledIds(got, fill, self._layout, i)
            self[i] = made
            return made
        mine = self._owned.ids(i)
        given = self._filled[i]
        topics, lens = self._runs(i, given)
        if not mine:
            lazy = TopicIds(given, topics, lens)
            self[i] = lazy
            return lazy
        grouped = self._by_topic(sorted(mine))
        runs = map(given.__getitem__, _slices(lens))
        for k, ids in zip(topics, runs, strict=True):
            have = grouped.get(k)
            if have is None:
                grouped[k] = ids
            else:
                have.extend(ids)
        self[i] = grouped
        return grouped


def grouped_held(
    layout: Layout, held: dict[int, list[int]]
) -> tuple[dict[str, tuple[int, ...]], list[int]]:
    """A member's ``held`` as its assignment (:meth:`Layout.grouped` of all its ids), and all
    its ids in topic order. The ids are grouped by topic already: only a topic that received a
    partition out of order needs sorting, and the cuts come from the topics' lengths."""
    topics = sorted(held)
    values = list(map(held.__getitem__, topics))
    ids = list(chain.from_iterable(values))
    if not all(map(lt, ids, islice(ids, 1, None))):
        values = list(map(sorted, values))
        ids = list(chain.from_iterable(values))
    parts = tuple(map(layout.part_of.__getitem__, ids))
    ends = list(accumulate(map(len, values)))
    cuts = map(slice, [0, *ends[:-1]], ends)
    names = map(layout.topics.__getitem__, topics)
    return dict(zip(names, map(parts.__getitem__, cuts), strict=True)), ids
