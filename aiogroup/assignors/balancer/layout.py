"""The balancer's vocabulary, and each member's claim checked against it.

- :class:`MemberClaim`: what the balancer is told about one member.
- :class:`Layout`: every partition as an ``int`` (topic-major ids, topics sorted), and the
  per-id tables built on demand to turn ids back into ``{topic: (p, ...)}``.
- :class:`Plan`: the balancer's result, per member what it keeps and what it is newly given.
- :func:`valid_ids`: one member's claim as ids, bad claims dropped with a warning;
  :func:`resolve`: partitions claimed by several members settled by generation.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, filterfalse, islice, repeat
from operator import add, eq, gt, lt, ne

from aiogroup.protocol.types import NO_GENERATION, PartitionsByTopic

__all__ = ["Layout", "MemberClaim", "Plan", "resolve", "valid_ids"]

logger = logging.getLogger("aiogroup.assignors")
#: A claim problem that is no problem: see _valid_ids_slow.
_UNSUBSCRIBED = "of a topic it does not subscribe to"
_NOBODY_SUBSCRIBES = "of a topic no member subscribes to (or that does not exist)"


@dataclass(frozen=True, slots=True)
class MemberClaim:
    """What the balancer needs to know about one member.

    ``topics``: the topics it subscribes to; ``owned``: the partitions it claims to own, grouped
    by topic; ``generation``: the generation that claim was made in (-1: unknown); ``rack``:
    its rack (KIP-881; ``None`` or empty: none).
    """

    member_id: str
    topics: Collection[str]
    owned: PartitionsByTopic = field(default_factory=dict)
    generation: int = NO_GENERATION
    rack: str | None = None


class Layout:
    """The integer layout of the partitions: topic ``k`` (sorted) holds ids
    ``offsets[k] .. offsets[k] + counts[k] - 1``."""

    __slots__ = (
        "_index_of",
        "_numbers",
        "_part_of",
        "_single_of",
        "_singletons",
        "_topic_of",
        "count_of",
        "counts",
        "index",
        "offset_of",
        "offsets",
        "topics",
    )

    def __init__(self, partitions_per_topic: Mapping[str, int]) -> None:
        self.topics: list[str] = sorted(partitions_per_topic)
        self.counts: list[int] = [partitions_per_topic[t] for t in self.topics]
        self.offsets: list[int] = []
        total = 0
        for n in self.counts:
            self.offsets.append(total)
            total += n
        self.index: dict[str, int] = {t: k for k, t in enumerate(self.topics)}
        self.offset_of: dict[str, int] = dict(zip(self.topics, self.offsets, strict=True))
        self.count_of: dict[str, int] = dict(partitions_per_topic)
        self._topic_of: list[str] | None = None
        self._index_of: list[int] | None = None
        self._single_of: list[tuple[int]] | None = None
        self._part_of: list[int] | None = None
        self._singletons: list[tuple[int]] | None = None
        self._numbers: list[int] | None = None

    @classmethod
    def of(cls, partitions_per_topic: Mapping[str, int]) -> Layout:
        """The layout of ``partitions_per_topic``: the last one made if the counts are the same
        (a leader assigns the same topics round after round, and the per-partition tables a
        layout builds on demand cost tens of milliseconds at a million partitions)."""
        global _last_layout
        last = _last_layout
        if last is not None and last.count_of == partitions_per_topic:
            return last
        _last_layout = layout = cls(partitions_per_topic)
        return layout

    @property
    def total(self) -> int:
        return self.offsets[-1] + self.counts[-1] if self.counts else 0

    @property
    def topic_of(self) -> list[str]:
        """Topic name of each id (built once, by C-level chaining)."""
        if self._topic_of is None:
            self._topic_of = list(chain.from_iterable(map(repeat, self.topics, self.counts)))
        return self._topic_of

    @property
    def topic_index_of(self) -> list[int]:
        """Topic index of each id."""
        if self._index_of is None:
            self._index_of = list(
                chain.from_iterable(map(repeat, range(len(self.counts)), self.counts))
            )
        return self._index_of

    @property
    def indexed(self) -> bool:
        """Whether :attr:`topic_index_of` is built already (it costs tens of milliseconds at a
        million partitions: a caller with few ids may find their topics otherwise)."""
        return self._index_of is not None

    @property
    def part_of(self) -> list[int]:
        """Partition number of each id."""
        if self._part_of is None:
            self._part_of = list(chain.from_iterable(map(range, self.counts)))
        return self._part_of

    @property
    def numbers(self) -> list[int]:
        """``[0, 1, ..., max count - 1]``: partition numbers as shared int objects (a range
        would make a new object for each number above 256, each time)."""
        if self._numbers is None:
            self._numbers = list(range(max(self.counts, default=0)))
        return self._numbers

    @property
    def singletons(self) -> list[tuple[int]]:
        """Shared one-element tuples ``(p,)``: most members get one partition per topic."""
        if self._singletons is None:
            self._singletons = [(p,) for p in range(max(self.counts, default=0))]
        return self._singletons

    @property
    def single_of(self) -> list[tuple[int]]:
        """The shared tuple ``(p,)`` of each id."""
        if self._single_of is None:
            singles = self.singletons
            self._single_of = list(chain.from_iterable(singles[:n] for n in self.counts))
        return self._single_of

    def pt_order(self) -> list[int]:
        """Every id, ordered by partition then topic (KAFKA-16277)."""
        order: list[int] = []
        counts, offsets = self.counts, self.offsets
        by_count = sorted(set(counts))
        lo = 0
        for hi in by_count:
            row = [o for o, n in zip(offsets, counts, strict=True) if n >= hi]
            for p in range(lo, hi):
                order.extend(map(add, row, repeat(p)))
            lo = hi
        return order

    def pt_key(self, ident: int) -> tuple[int, int]:
        """Sort key putting ids in partition-then-topic order."""
        return (self.part_of[ident], bisect_left(self.offsets, ident + 1))

    def _cut(self, ids: list[int], names: list[str]) -> dict[str, tuple[int, ...]]:
        """:meth:`grouped` by cutting the partitions where the topic changes."""
        starts = [0, *compress(range(1, len(ids)), map(ne, islice(names, 1, None), names))]
        parts = tuple(map(self.part_of.__getitem__, ids))
        cuts = map(slice, starts, [*starts[1:], len(ids)])
        return dict(zip(map(names.__getitem__, starts), map(parts.__getitem__, cuts), strict=True))

    def _grouped_few(self, ids: list[int]) -> dict[str, tuple[int, ...]]:
        """:meth:`grouped` for a few ids, without building per-id tables for every partition."""
        out: dict[str, list[int]] = {}
        offsets, topics = self.offsets, self.topics
        for g in ids:
            k = bisect_left(offsets, g + 1) - 1
            out.setdefault(topics[k], []).append(g - offsets[k])
        return {t: tuple(ps) for t, ps in out.items()}

    def grouped(self, ids: list[int]) -> dict[str, tuple[int, ...]]:
        """Turn ids into ``{topic: (p, ...)}``, topics and partitions sorted.

        ``ids`` must be sorted. Most members hold one partition per topic, so the dict is built
        with ``dict(zip(...))`` and only topics seen more than once are fixed up (or, when there
        are many, the partitions are cut at each new topic).
        """
        if not ids:
            return {}
        if len(ids) <= 16 and self._topic_of is None:
            return self._grouped_few(ids)
        names = list(map(self.topic_of.__getitem__, ids))
        if len(ids) > 16 and (names[0] == names[1] or names[-2] == names[-1]):
            # Several partitions per topic, by the look of it: cut the partitions at each new
            # topic (building the one-per-topic dict first would be wasted).
            return self._cut(ids, names)
        out: dict[str, tuple[int, ...]] = dict(
            zip(names, map(self.single_of.__getitem__, ids), strict=True)
        )
        if len(out) != len(ids):
            part_of = self.part_of
            if len(ids) - len(out) > 8:
                return self._cut(ids, names)
            for name in set(compress(names[1:], map(eq, names[1:], names))):
                start = self.offset_of[name]
                lo = bisect_left(ids, start)
                hi = bisect_left(ids, start + self.count_of[name], lo)
                out[name] = tuple(map(part_of.__getitem__, ids[lo:hi]))
        return out


_last_layout: Layout | None = None


@dataclass(slots=True)
class Plan:
    """The balancer's result.

    ``member_ids`` is sorted; for member ``i``, ``kept[i]`` are the partitions it validly owned
    and keeps, ``added[i]`` the ones it is newly given. ``claimed`` holds every existing partition
    any member claims (valid or not), which the cooperative adjust step needs.

    ``whole[i]``, when given and not ``None``, is member ``i``'s own ``{topic: partitions}``
    claim (partitions in tuples), every partition of which is valid and
    kept: ``kept[i]`` is then left empty and the claim itself is the kept part (no
    per-partition id is built for it).
    """

    layout: Layout
    member_ids: list[str]
    kept: list[list[int]]
    added: list[list[int]]
    claimed: Container[int]
    whole: Sequence[PartitionsByTopic | None] = ()
    #: With ``whole``: whether each claim is in order already (topics sorted, each topic's
    #: partitions sorted), so that a copy of it is the member's assignment.
    ordered: Sequence[bool] = ()
    #: Per member, when given and not ``None``: its assignment already grouped, the same as
    #: grouping ``kept`` and ``added`` would give (a step that changes ``added`` drops it).
    ready: Sequence[dict[str, tuple[int, ...]] | None] = ()
    #: When not -1: the partitions moved, and ``added`` is left empty (nothing can be
    #: withheld: nobody claims anything).
    moved_count: int = -1

    def assignments(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """Per member id, its partitions grouped by topic, sorted."""
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        layout = self.layout
        whole = self.whole or repeat(None)
        ready = self.ready or repeat(None)
        for i, (member_id, kept, added, own, done) in enumerate(
            zip(self.member_ids, self.kept, self.added, whole, ready, strict=False)
        ):
            if done is not None:
                out[member_id] = done
            elif own is None:
                out[member_id] = layout.grouped(sorted(chain(kept, added)))
            else:
                out[member_id] = _with_added(own, layout.grouped(sorted(added)), self.ordered[i])
        return out

    def moved(self) -> int:
        """Partitions given to a member that did not validly own them."""
        if self.moved_count >= 0:
            return self.moved_count
        return sum(map(len, self.added))


def _with_added(
    own: PartitionsByTopic, added: dict[str, tuple[int, ...]], ordered: bool
) -> dict[str, tuple[int, ...]]:
    """``own`` (valid, no partition twice, partitions in tuples) plus ``added`` (disjoint from
    it), topics and partitions sorted, as :meth:`Layout.grouped` would give for all of them.
    ``ordered``: ``own`` is in order already (see :attr:`Plan.ordered`)."""
    # Partitions in tuples: checked by the caller.
    out: dict[str, tuple[int, ...]] = (
        dict(own)  # type: ignore[arg-type]
        if ordered
        else {t: tuple(sorted(own[t])) for t in sorted(own) if own[t]}
    )
    if not added:
        return out
    topics = len(out)
    for topic, parts in added.items():
        have = out.get(topic)
        out[topic] = parts if have is None else tuple(sorted(have + parts))
    if len(out) == topics or all(map(lt, out, islice(out, 1, None))):
        return out  # no topic added, or added in order
    return {t: out[t] for t in sorted(out)}


def valid_ids(
    layout: Layout, claim: MemberClaim, subscribed: frozenset[str]
) -> tuple[list[int], list[int]]:
    """Validate one member's claim: ``(valid ids, ids of existing partitions claimed on topics
    it does not subscribe to)``. Fast path first (C-level checks), else a careful slow path."""
    owned = claim.owned
    if not owned:
        return [], []
    try:
        keys = owned.keys()
        if keys <= subscribed:
            vals = list(owned.values())
            flat = list(chain.from_iterable(vals))
            # sum() is int only if every element is: floats, strings... take the slow path.
            if flat and type(sum(flat)) is int and min(flat) >= 0:
                count_of = layout.count_of
                offset_of = layout.offset_of
                if len(flat) == len(vals) and all(vals):
                    # One partition per topic (the common shape): no duplicates possible. (As
                    # many partitions as topics is not enough: {a: (), b: (0, 1)} has two.)
                    if all(map(gt, map(count_of.__getitem__, keys), flat)):
                        return list(map(add, flat, map(offset_of.__getitem__, keys))), []
                else:
                    lens = list(map(len, vals))
                    if 0 not in lens and all(
                        map(gt, map(count_of.__getitem__, keys), map(max, vals))
                    ):
                        offs = map(offset_of.__getitem__, keys)
                        ids = list(map(add, flat, chain.from_iterable(map(repeat, offs, lens))))
                        if len(set(ids)) == len(ids):
                            return ids, []
    except (TypeError, ValueError, KeyError):
        pass
    return _valid_ids_slow(layout, claim, subscribed)


def _valid_ids_slow(
    layout: Layout, claim: MemberClaim, subscribed: frozenset[str]
) -> tuple[list[int], list[int]]:
    valid: list[int] = []
    foreign: list[int] = []
    seen: set[int] = set()
    problems: Counter[str] = Counter()
    for topic, parts in claim.owned.items():
        k = layout.index.get(topic) if isinstance(topic, str) else None
        try:
            plist = list(parts)
        except TypeError:
            problems["in a malformed partition list"] += 1
            continue
        for p in plist:
            if not isinstance(p, int):
                problems["that are not integers"] += 1
                continue
            p = int(p)
            if k is None:
                problems[_NOBODY_SUBSCRIBES] += 1
                continue
            if not 0 <= p < layout.counts[k]:
                problems["that do not exist"] += 1
                continue
            ident = layout.offsets[k] + p
            if ident in seen:
                problems["listed twice"] += 1
                continue
            seen.add(ident)
            if topic in subscribed:
                valid.append(ident)
            else:
                problems[_UNSUBSCRIBED] += 1
                foreign.append(ident)
    for what, n in sorted(problems.items()):
        # Owning partitions of a topic no longer subscribed is legal (KIP-429 leaves step 1a
        # to the member; a hand-off relies on it, and when every member hands off at once, as
        # a whole service stopping does, nobody subscribes to the topic any more): the
        # cooperative adjustment withholds them for a round. Everything else is a peer's bug.
        legal = what in (_UNSUBSCRIBED, _NOBODY_SUBSCRIBES)
        level = logging.DEBUG if legal else logging.WARNING
        logger.log(level, "member %r claims %d partition(s) %s; ignored", claim.member_id, n, what)
    return valid, foreign


def resolve(member_ids: Sequence[str], generations: Sequence[int], owned: list[list[int]]) -> None:
    """Resolve partitions claimed by several members, in place (KAFKA-12984, KAFKA-14639).

    The highest generation keeps the partition; at equal highest generations nobody does.
    """
    counter = Counter(chain.from_iterable(owned))
    contested = {ident for ident, n in counter.items() if n > 1}
    best: dict[int, tuple[int, int]] = {}  # id -> (generation, member index or -1 for a tie)
    for i, ids in enumerate(owned):
        gen = generations[i]
        for ident in filter(contested.__contains__, ids):
            prev = best.get(ident)
            if prev is None or gen > prev[0]:
                best[ident] = (gen, i)
            elif gen == prev[0]:
                best[ident] = (gen, -1)
    for i, ids in enumerate(owned):
        lost = [g for g in filter(contested.__contains__, ids) if best[g][1] != i]
        if lost:
            lost_set = set(lost)
            owned[i] = list(filterfalse(lost_set.__contains__, ids))
            ties = sum(1 for g in lost if best[g][1] == -1)
            if ties:
                logger.warning(
                    "member %r and another member claim %d partition(s) at the same generation "
                    "%d; nobody keeps them this round",
                    member_ids[i],
                    ties,
                    generations[i],
                )
            if len(lost) > ties:
                logger.warning(
                    "member %r claims %d partition(s) owned at a higher generation than its %d; "
                    "its claim is stale and ignored",
                    member_ids[i],
                    len(lost) - ties,
                    generations[i],
                )
