"""The sticky balancer shared by ``sticky`` and ``cooperative-sticky``: plain inputs in, a plan out.

The balancer knows nothing about user data, protocol versions or rebalance protocols. It takes,
per member, the topics it subscribes to, the partitions it claims to own and the generation of
that claim (:class:`MemberClaim`), and returns a :class:`Plan`: per member the partitions it keeps
and the partitions it is newly given. ``cooperative-sticky`` then runs its own adjust step on the
plan (:mod:`aiogroup.assignors._cooperative`), composition rather than subclassing, as franz-go
does.

Representation (the reason it is fast): every partition is an ``int``, ``offset[topic] +
partition`` with topics in sorted order ("topic-major"), and members are list indices in sorted
member-id order. No per-partition Python object is built; most of the per-partition work is done
by C-level builtins (``map``, ``set``, ``sorted``, slicing, ``dict(zip(...))``).

Rules, with where they come from:

- Ownership claims are resolved per partition (KIP-341, KAFKA-7026, KAFKA-12984, KAFKA-14639):
  a sole claimant keeps its claim; among several, the highest generation wins; at equal highest
  generations nobody keeps the partition this round.
- Bad claims never crash the leader (franz-go's negative-partition panic): a partition that does
  not exist, a negative one, a topic the member is not subscribed to, or a partition listed twice
  by one member are dropped with a warning on the ``aiogroup.assignors`` logger.
- Uniform subscriptions take a quota path: ``N // M`` each and ``N % M`` members one more; the
  one-more slots go first to members that already own more than ``N // M`` (fewest moves).
- Unequal subscriptions take a general path: keep, fill the least loaded eligible member (most
  constrained topics first), then move partitions until no partition could move to an eligible
  member with 2+ fewer. Newly given partitions move before owned ones, and before revoking an
  owned partition the balancer looks for a chain of newly given partitions that fixes the same
  imbalance. That keeps the plan sticky and is what lets a cooperative group converge within
  two rebalances (KIP-429): the second round finds a balanced completion of what members kept.
  Donors are taken heaviest first (a max-heap), and a final step takes back detours: cycles and
  paths of moves with a negative net move count that keep the plan as balanced
  (:func:`_undo_detours`).
- Partitions handed out are ordered by partition, then topic (KAFKA-16277), so one member does
  not get a whole topic while another gets another topic.
- Deterministic (KAFKA-12898): members and topics are sorted first, so input order is irrelevant.
"""

from __future__ import annotations

import gc
import heapq
import logging
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from itertools import accumulate, chain, compress, filterfalse, islice, repeat
from operator import add, eq, ge, gt, itemgetter, le, lt, mul, ne, or_, setitem, sub
from typing import Any

from aiogroup.assignors._claims import ClaimIndex, last_index, shared_index
from aiogroup.assignors.range import refuse_bare_string
from aiogroup.protocol.types import NO_GENERATION, PartitionsByTopic

__all__ = ["Layout", "MemberClaim", "Plan", "balance", "gc_paused"]

logger = logging.getLogger("aiogroup.assignors")
#: A claim problem that is no problem: see _member_ids_slow.
_UNSUBSCRIBED = "of a topic it does not subscribe to"


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one assignment.

    A large assignment allocates millions of small acyclic objects (ints, tuples, dicts); each
    allocation burst would make the cyclic collector rescan all of them, about a tenth of the
    time at 1M partitions. Nothing cyclic is created, so pausing it loses nothing; it is
    re-enabled on the way out, exceptions included.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@dataclass(frozen=True, slots=True)
class MemberClaim:
    """What the balancer needs to know about one member.

    ``topics``: the topics it subscribes to; ``owned``: the partitions it claims to own, grouped
    by topic; ``generation``: the generation that claim was made in (-1: unknown).
    """

    member_id: str
    topics: Collection[str]
    owned: PartitionsByTopic = field(default_factory=dict)
    generation: int = NO_GENERATION


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


#: The topics known to the last :func:`balance` call, and what each topic list it met
#: subscribes to of them (members keep their subscriptions from one rebalance to the next).
_last_subscribed: tuple[frozenset[str], dict[tuple[str, ...], frozenset[str]]] | None = None


def _subscriptions(
    distinct: Iterable[tuple[str, ...]], known: frozenset[str], members: int
) -> list[frozenset[str]]:
    """:func:`_subscribed` of each of ``distinct``, in order, kept from the last call with the
    same ``known`` topics (cleared when it has grown well past the number of ``members``). The
    sets are shared: nobody may change them (they are frozen)."""
    global _last_subscribed
    last = _last_subscribed
    if last is None or last[0] != known or len(last[1]) > 2 * members + 64:
        last = _last_subscribed = (known, {})
    seen = last[1]
    out: list[frozenset[str]] = []
    for topics in distinct:
        subscribed = seen.get(topics)
        if subscribed is None:
            subscribed = seen[topics] = _subscribed(topics, known)
        out.append(subscribed)
    return out


def _subscribed(topics: tuple[str, ...], known: frozenset[str]) -> frozenset[str]:
    """The topics of a subscription that have partitions."""
    mine = frozenset(topics)
    return mine if mine <= known else mine & known


def _in_order(claim: PartitionsByTopic, lens: list[int]) -> bool:
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
        return all(map(le, map(_first, values), map(_last, values)))
    return _tuples_sorted(claim.values(), lens, top)


_first = itemgetter(0)
_last = itemgetter(-1)


def _tuples_sorted(values: Iterable[Sequence[int]], lens: list[int], top: int) -> bool:
    """Whether each of ``values`` (tuples, as :func:`_in_order`'s callers check, of lengths
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


_tuple_len: Callable[[object], int] = tuple.__len__  # type: ignore[assignment]

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


def _member_ids(
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
    return _member_ids_slow(layout, claim, subscribed)


def _member_ids_slow(
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
                problems["of a topic no member subscribes to (or that does not exist)"] += 1
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
        # to the member; a hand-off relies on it): the cooperative adjustment withholds them
        # for a round. Everything else here is a peer's bug.
        level = logging.DEBUG if what == _UNSUBSCRIBED else logging.WARNING
        logger.log(level, "member %r claims %d partition(s) %s; ignored", claim.member_id, n, what)
    return valid, foreign


def _resolve(member_ids: Sequence[str], generations: Sequence[int], owned: list[list[int]]) -> None:
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


def balance(
    partitions_per_topic: Mapping[str, int],
    members: Iterable[MemberClaim],
    hint: Mapping[tuple[str, int], str] | None = None,
) -> Plan:
    """Compute a balanced, sticky plan. Pure and deterministic.

    ``hint`` optionally names, for some partitions, the member a previous plan meant them for
    (the cooperative step withheld them until revoked, KIP-429). With unequal subscriptions a
    free partition goes to its hinted member first when that member can take it, so the
    follow-up round reproduces the plan it completes; balancing still applies afterwards.
    """
    by_id: dict[str, MemberClaim] = {}
    for claim in members:
        refuse_bare_string(claim.member_id, claim.topics)
        by_id[claim.member_id] = claim
    member_ids = sorted(by_id)
    claims = [by_id[m] for m in member_ids]

    # Members usually share one topic list: compute each distinct subscription once. Each
    # list is hashed once (a tuple keeps no hash, and 2,000 lists of 250 topics take
    # milliseconds per pass): per member, the position of the first member with its list.
    topic_lists = [tuple(c.topics) for c in claims]
    distinct: dict[tuple[str, ...], int] = {}
    firsts = list(map(distinct.setdefault, topic_lists, range(len(topic_lists))))
    wanted: set[str] = set().union(*distinct)
    counts: dict[str, int] = {}
    for topic in wanted:
        n = partitions_per_topic.get(topic)
        if n is None:
            continue
        if type(n) is not int or n < 0:
            logger.warning("topic %r has an invalid partition count %r; ignored", topic, n)
            continue
        if n:
            counts[topic] = n
    layout = Layout.of(counts)

    known = frozenset(counts)
    # The subscription of each distinct list, by the position of its first member.
    subscriptions = _subscriptions(distinct, known, len(claims))
    of_first = dict(zip(distinct.values(), subscriptions, strict=True))
    subscribed = list(map(of_first.__getitem__, firsts))
    if claims and all(s is subscribed[0] or s == subscribed[0] for s in subscribed):
        fast = _uniform_by_topic(layout, member_ids, claims, subscribed[0])
        if fast is not None:
            return fast
    uniform = not claims or all(s == subscribed[0] for s in subscribed)
    if not uniform:
        hinted: dict[int, int] = {}
        if hint:
            position = {m: i for i, m in enumerate(member_ids)}
            for (topic, p), member in hint.items():
                k = layout.index.get(topic)
                to = position.get(member)
                if k is not None and to is not None and 0 <= p < layout.counts[k]:
                    hinted[layout.offsets[k] + p] = to
        owned_view: _OwnedIds | _OwnedClaims | None = _OwnedClaims.of(layout, claims, subscribed)
        if owned_view is None:
            owned_view = _OwnedIds(layout, member_ids, claims, subscribed)
        return _general(layout, member_ids, subscribed, owned_view, hinted)

    owned: list[list[int]] = []
    claimed_lists: list[list[int]] = []
    foreign_any = False
    for claim, subs in zip(claims, subscribed, strict=True):
        valid, foreign = _member_ids(layout, claim, subs)
        owned.append(valid)
        if foreign:
            foreign_any = True
            claimed_lists.append(foreign)
    claimed: set[int] = set()
    for ids in owned:
        claimed.update(ids)
    if len(claimed) != sum(map(len, owned)):
        _resolve(member_ids, [c.generation for c in claims], owned)
    if foreign_any:
        claimed.update(chain.from_iterable(claimed_lists))
    if not claims:
        return Plan(layout, [], [], [], claimed)
    kept, added = _uniform(layout, owned, claimed)
    return Plan(layout, member_ids, kept, added, claimed)


class _OwnedIds:
    """What each member validly owns, for :func:`_general`: checked member by member
    (:func:`_member_ids`, with warnings for bad claims), conflicts resolved (:func:`_resolve`).

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
            valid, foreign = _member_ids(layout, claim, subs)
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
            _resolve(member_ids, [c.generation for c in claims], owned)
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
                lens = list(map(_tuple_len, claim.owned.values()))
            except TypeError:
                continue
            if sum(lens) == len(owned[i]):
                self.whole[i] = claim.owned
                self.ordered[i] = _in_order(claim.owned, lens)

    def ids(self, i: int) -> list[int]:
        """The ids member ``i`` validly owns."""
        return self.owned[i]

    def free(self, k: int) -> list[int]:
        """The ids of topic ``k`` nobody validly owns, ascending."""
        return _free_ids(self.owner_of, self.layout.offsets[k], self.layout.counts[k])


class _OwnedClaims:
    """:class:`_OwnedIds` for plainly valid claims, checked per topic instead of per member.

    When every claimed partition is an int that exists, of a topic its claimant subscribes to,
    and nobody claims a partition twice (so there is no conflict and nothing to warn about),
    each member owns exactly its claim. A :class:`ClaimIndex` shows that with a few C-level
    passes over each topic's claims, and then a member's ids are worked out (and ``owner_of``
    marked) only when :func:`_general` groups it; free partitions come from the gaps in each
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
        self.claimed: Container[int] = _ClaimedIds(layout, index)
        self.whole: list[PartitionsByTopic | None] = [c.owned or None for c in claims]
        self.ordered = ordered

    @classmethod
    def of(
        cls, layout: Layout, claims: list[MemberClaim], subscribed: list[frozenset[str]]
    ) -> _OwnedClaims | None:
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
                # Subscribed topics only; _tuple_len refuses anything but a tuple.
                if not owned.keys() <= subs:
                    return None
                mine = list(map(_tuple_len, owned.values()))
            except (TypeError, AttributeError):
                return None
            lens.append(mine)
            try:  # now, while its tuples are in the CPU's cache
                ordered.append(_in_order(owned, mine))
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


def _uniform(
    layout: Layout, owned: list[list[int]], claimed: set[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Everyone subscribes to the same topics: quotas of ``N // M`` and ``N // M + 1``."""
    total = layout.total
    quotas = _quotas(total, list(map(len, owned)))

    kept: list[list[int]] = []
    trimmed = False
    for i, ids in enumerate(owned):
        quota = quotas[i]
        if len(ids) > quota:
            # Keep the first ones in partition-then-topic order (KAFKA-16277).
            ids = sorted(ids, key=layout.pt_key)[:quota]
            trimmed = True
        kept.append(ids)

    kept_total = sum(map(len, kept))
    if kept_total == 0:
        pool = layout.pt_order()
    elif kept_total == total:
        pool = []
    else:
        kept_set = claimed if not trimmed and kept_total == len(claimed) else None
        if kept_set is None:
            kept_set = set(chain.from_iterable(kept))
        free = total - kept_total
        if free * 8 < total:
            pool = sorted(filterfalse(kept_set.__contains__, range(total)), key=layout.pt_key)
        else:
            pool = list(filterfalse(kept_set.__contains__, layout.pt_order()))

    return kept, _hand_out(pool, quotas, list(map(len, kept)))


def _quotas(total: int, sizes: list[int]) -> list[int]:
    """Each member's share of ``total`` partitions with equal subscriptions: ``N // M``, and
    ``N % M`` members one more. The extra slots go first to members that own more than the
    floor (``sizes``: what each validly owns): each one saves a move."""
    members = len(sizes)
    floor, extra = divmod(total, members)
    plus = bytearray(members)
    slots = extra
    for i in range(members):
        if not slots:
            break
        if sizes[i] > floor:
            plus[i] = 1
            slots -= 1
    for i in range(members):
        if not slots:
            break
        if not plus[i]:
            plus[i] = 1
            slots -= 1
    return [floor + x for x in plus]


def _hand_out(pool: list[int], quotas: list[int], kept: list[int]) -> list[list[int]]:
    """Slices of ``pool``, in member order, filling each member up to its quota."""
    added: list[list[int]] = []
    pos = 0
    for quota, have in zip(quotas, kept, strict=True):
        need = quota - have
        added.append(pool[pos : pos + need])
        pos += need
    return added


class _ClaimedIds:
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


def _uniform_by_topic(
    layout: Layout, member_ids: list[str], claims: list[MemberClaim], subscribed: frozenset[str]
) -> Plan | None:
    """The uniform path without a per-partition id for what members keep.

    Taken when every claim is plainly valid: each claimed topic is subscribed (by everyone:
    subscriptions are equal) and exists, each partition is an int that exists, and no
    partition is claimed twice (so there is no conflict to resolve and nothing to warn about).
    A member then keeps its whole claim unless it owns more than its quota, and its claim
    itself stands for what it keeps (:attr:`Plan.whole`); only free partitions get ids. The
    result is the one :func:`_uniform` gives. ``None`` for anything else (the general code
    then validates member by member, with warnings).
    """
    maps = [c.owned for c in claims]
    try:
        index = shared_index(maps)
    except TypeError:  # a partition list that is not iterable
        return None
    count_of = layout.count_of
    for topic in index.claims:
        count = count_of.get(topic)
        if count is None or topic not in subscribed or not index.plain(topic, count):
            return None
    sizes: list[int] = []
    ordered: list[bool] = []
    for m in maps:
        try:
            # _tuple_len refuses anything but a tuple: lists and the like take the general way.
            lens = list(map(_tuple_len, m.values())) if m else []
        except TypeError:
            return None
        size = sum(lens)
        sizes.append(size)
        ordered.append(_in_order(m, lens))
    total = layout.total
    quotas = _quotas(total, sizes)
    kept: list[list[int]] = [[] for _ in maps]
    whole: list[PartitionsByTopic | None] = [m or None for m in maps]
    dropped: list[int] = []  # ids owned beyond a quota
    for i, (size, quota) in enumerate(zip(sizes, quotas, strict=True)):
        if size > quota:
            ids = sorted(_member_ids(layout, claims[i], subscribed)[0], key=layout.pt_key)
            kept[i] = ids[:quota]
            dropped.extend(ids[quota:])
            whole[i] = None
    have = [min(size, quota) for size, quota in zip(sizes, quotas, strict=True)]
    kept_total = sum(have)
    if kept_total == 0:
        pool = layout.pt_order()
    elif kept_total == total:
        pool = []
    elif (total - kept_total) * 8 < total:
        pool = _free_in_pt_order(layout, index, dropped)
    else:
        offset_of = layout.offset_of
        kept_ids = set(
            chain.from_iterable(
                map(add, parts, repeat(offset_of[t])) for t, parts in index.claims.items()
            )
        )
        kept_ids.difference_update(dropped)
        pool = list(filterfalse(kept_ids.__contains__, layout.pt_order()))
    added = _hand_out(pool, quotas, have)
    return Plan(layout, member_ids, kept, added, _ClaimedIds(layout, index), whole, ordered)


def _free_in_pt_order(layout: Layout, index: ClaimIndex, dropped: list[int]) -> list[int]:
    """Ids of the partitions nobody claims, plus ``dropped``, in partition-then-topic order
    (KAFKA-16277)."""
    ntopics = len(layout.topics)
    keys: list[int] = []  # partition * topics + topic: sorts in partition-then-topic order
    empty: list[int] = []
    for k, (topic, count) in enumerate(zip(layout.topics, layout.counts, strict=True)):
        if len(index.claims.get(topic, empty)) != count:
            keys.extend(p * ntopics + k for p in index.unclaimed(topic, count))
    part_of = layout.part_of
    offsets = layout.offsets
    for g in dropped:
        keys.append(part_of[g] * ntopics + bisect_left(offsets, g + 1) - 1)
    keys.sort()
    return [offsets[key % ntopics] + key // ntopics for key in keys]


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


class _TopicIds(_LazyLists):
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


class _FillBytes:
    """Who the fill gave each id to, as fixed-width machine integers laid end to end (one
    ``array`` item per id), so the ids a member was given in a topic are found with
    ``bytearray.find`` (C-level, a few bytes a nanosecond) instead of comparing every id's
    holder as a Python int. Written once per topic by the fill; moves do not change it (see
    :class:`_FilledIds`)."""

    __slots__ = ("code", "data", "width")

    def __init__(self, members: int, total: int) -> None:
        self.code = "B" if members <= 0xFF else "H" if members <= 0xFFFF else "I"
        self.width = array(self.code).itemsize
        self.data = bytearray(self.width * total)

    def write(self, start: int, receivers: list[int]) -> None:
        """The fill gave id ``start + j`` to ``receivers[j]``."""
        self.data[start * self.width : (start + len(receivers)) * self.width] = array(
            self.code, receivers
        )

    def given(self, i: int, start: int, end: int) -> list[int]:
        """The ids ``start .. end - 1`` the fill gave member ``i``, ascending."""
        w = self.width
        needle = array(self.code, (i,)).tobytes()
        find, out = self.data.find, []
        at = find(needle, start * w, end * w)
        while at >= 0:
            if at % w:  # a match across two ids' bytes: look again one byte on
                at = find(needle, at + 1, end * w)
                continue
            out.append(at // w)
            at = find(needle, at + w, end * w)
        return out


class _FilledIds(_LazyLists):
    """``held[i]`` of a member in a group where nobody owned anything and nothing was hinted:
    the topics the fill gave it partitions of, in fill order, each topic's ids looked up in
    what the fill wrote (:class:`_FillBytes`) only when asked for (the fill writes nothing
    per member).

    Until its list is made, a topic's value is ``None``. A list is made before any partition
    of its topic moves to or from this member (see ``move`` in :func:`_general`), so until
    then the member holds exactly what the fill gave it of that topic, ascending: the order
    the fill gave them in."""

    __slots__ = ("_fill", "_i", "_layout")

    def __init__(self, topics: Iterable[int], fill: _FillBytes, layout: Layout, i: int) -> None:
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


class _Held(dict[int, dict[int, list[int]]]):
    """``held[i]``: member ``i``'s partitions grouped by topic (``{topic index: [ids]}``).

    Built on first access: what the member owns (topics ascending,
    ids ascending), then what the fill gave it (``filled[i]``: one run of ids per topic, in the
    order the fill went through the topics; the fill notes, per topic in ``fill_order``, how
    many each member got in ``fill_runs``). That is the dict, in the order, that the fill
    would have built as it went; but a member the rebalance never touches (most of them, once
    a group is balanced) is never grouped at all. In a group where nobody owned anything
    (``holders`` given, see :func:`_fill_free`), a member's entry is a :class:`_FilledIds`.
    """

    def __init__(
        self,
        layout: Layout,
        owned: _OwnedIds | _OwnedClaims,
        filled: list[list[int]],
        fill_order: list[int] | None,
        fill_runs: list[Counter[int]] | None,
        holders: tuple[bytearray | list[set[int]], _FillBytes] | None = None,
    ) -> None:
        super().__init__()
        # Nobody owned anything and nothing was hinted: who the fill gave partitions of each
        # topic to (per topic in fill order, a row of one byte per member, 1 for a receiver,
        # laid end to end; or, when that would take more memory than the partitions, a set
        # of receivers), and who holds each id (see _FilledIds).
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
        if layout._index_of is None and len(ids) <= self._bisect_budget:
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
            made = _FilledIds(got, fill, self._layout, i)
            self[i] = made
            return made
        mine = self._owned.ids(i)
        given = self._filled[i]
        topics, lens = self._runs(i, given)
        if not mine:
            lazy = _TopicIds(given, topics, lens)
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


def _fresh_plan(
    layout: Layout, member_ids: list[str], holder: list[int], claimed: Container[int]
) -> Plan:
    """The plan of a group where nobody owned anything: ``holder[g]`` is the member given id
    ``g`` (-1: nobody). Every partition is newly given. The assignments are built topic by
    topic, where a topic's holders sit side by side in ``holder`` (and so in memory), in topic
    order, so each member's dict comes out sorted."""
    members = len(member_ids)
    # The plan is made first, its assignments after. The cyclic collector, paused during the
    # assignment (gc_paused), then walks the young objects once, in the order they were made:
    # meeting the plan (which the caller holds) first, it knows every dict and tuple after it
    # is reachable as it comes to them. Made last, the plan would be met last, and the whole
    # output moved to the collector's "unreachable" list and back: three times the work.
    plan = Plan(layout, member_ids, [], [], claimed)
    ready: list[dict[str, tuple[int, ...]]] = [{} for _ in member_ids]
    plan.ready = ready
    numbers = layout.numbers
    for name, start, count in zip(layout.topics, layout.offsets, layout.counts, strict=True):
        # The topic's partitions per holder, ascending, gathered in C: one list per holder,
        # in the order the holders first appear (each member's dict gets one entry per topic,
        # so that order does not matter).
        mine: defaultdict[int, list[int]] = defaultdict(list)
        deque(
            map(list.append, map(mine.__getitem__, holder[start : start + count]), numbers[:count]),
            0,
        )
        mine.pop(-1, None)  # nobody holds these
        # ready[i][name] = tuple(its partitions), in C.
        deque(
            map(
                setitem,
                map(ready.__getitem__, mine),
                repeat(name),
                map(tuple, mine.values()),
            ),
            0,
        )
    unassigned = holder.count(-1)
    if not claimed:  # nothing to withhold: the plan needs no ids, only how many moved
        nothing: list[list[int]] = [[] for _ in member_ids]
        plan.kept = plan.added = nothing
        plan.moved_count = len(holder) - unassigned
        return plan
    # Every id each member was given, ascending (for the cooperative step).
    added: list[list[int]] = [[] for _ in range(members + 1)]  # the last one: nobody's
    deque(map(list.append, map(added.__getitem__, holder), range(len(holder))), 0)
    del added[-1]
    plan.kept = [[] for _ in member_ids]
    plan.added = added
    return plan


def _grouped_held(
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


def _water_fill(free: Sequence[int], subscribers: list[int], load: list[int]) -> list[int]:
    """Who gets each of ``free``, handed out one at a time to the least loaded of
    ``subscribers`` (lowest index on ties), as popping a heap of ``(load, member)`` would;
    ``load`` is raised accordingly.

    Done per level instead of per partition: the members with load ``<= n`` take one partition
    each at level ``n``, in member order.
    """
    if len(subscribers) == 1:
        load[subscribers[0]] += len(free)
        return [subscribers[0]] * len(free)
    if len(free) == 1:  # the least loaded, lowest index on ties (min keeps the first)
        i = min(subscribers, key=load.__getitem__)
        load[i] += 1
        return [i]
    order = sorted(subscribers, key=load.__getitem__)  # stable: by (load, member)
    loads = list(map(load.__getitem__, order))  # ascending
    count = len(order)
    total, joined, partial = len(free), 0, 0
    receivers: list[int] = []
    active: list[int] = []
    level = loads[0]
    while len(receivers) < total:
        first = joined
        joined = bisect_right(loads, level, joined)  # every member with load <= level
        if joined > first:
            active = sorted(active + order[first:joined]) if active else order[first:joined]
        # Levels until the next member joins, or until the partitions run out.
        levels = loads[joined] - level if joined < count else total
        levels = min(levels, (total - len(receivers)) // len(active))
        if levels:
            receivers.extend(active * levels if levels > 1 else active)
            level += levels
        else:  # the last, partial level
            partial = total - len(receivers)
            receivers.extend(active[:partial])
    # Every member that took part is at the level reached, the first ``partial`` one above.
    deque(map(setitem, repeat(load), active, repeat(level)), 0)
    deque(map(setitem, repeat(load), active[:partial], repeat(level + 1)), 0)
    return receivers


#: The byte rows of :func:`_fill_free` are used while they take at most this many bytes per
#: partition, plus the allowance below; otherwise a set per topic.
_ROW_BYTES_PER_PARTITION = 8
_ROW_BYTES_ANYWAY = 1 << 20


def _fill_free(
    layout: Layout,
    subs: list[list[int]],
    load: list[int],
    filled_by: list[int],
    by_level: list[int],
) -> tuple[list[int], bytearray | list[set[int]], _FillBytes]:
    """The fill of a group where nobody owned anything (every partition free, nothing
    hinted): each topic in ``by_level`` order handed out by :func:`_water_fill`, its holders
    written to ``filled_by`` and to a :class:`_FillBytes`.

    Returns the topics filled, in order; who received partitions of each (a row of one byte
    per member per topic, laid end to end, so that member ``i``'s column is one C-level
    slice; or a set per topic when the rows would take more memory than eight bytes per
    partition); and the :class:`_FillBytes`."""
    members = len(load)
    filling = [k for k in by_level if subs[k]]
    marks: bytearray | list[set[int]]
    rows = members * len(filling) <= _ROW_BYTES_PER_PARTITION * layout.total + _ROW_BYTES_ANYWAY
    marks = bytearray() if rows else []
    fill = _FillBytes(members, layout.total)
    for k in filling:
        start, count = layout.offsets[k], layout.counts[k]
        receivers = _water_fill(range(start, start + count), subs[k], load)
        filled_by[start : start + count] = receivers
        fill.write(start, receivers)
        if isinstance(marks, bytearray):
            row = bytearray(members)
            deque(map(setitem, repeat(row), receivers, repeat(1)), 0)
            marks += row
        else:
            marks.append(set(receivers))
    return filling, marks, fill


class _LeastLoaded:
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


class _TopicSets(dict[int, set[int]]):
    """``topic_sets[i]``: the set of topics member ``i`` subscribes to, made on first use
    (only the searches that avoid revocations ask), one per distinct subscription."""

    def __init__(self, topics_of: list[list[int]]) -> None:
        super().__init__()
        self._topics_of = topics_of
        self._made: dict[int, set[int]] = {}

    def __missing__(self, i: int) -> set[int]:
        ks = self._topics_of[i]
        made = self._made.get(id(ks))
        if made is None:
            made = self._made[id(ks)] = set(ks)
        self[i] = made
        return made


class _ClaimedArray:
    """The claimed ids of a :func:`_general` plan: those whose ``owner_of`` is not -1."""

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


#: The layout of the last :func:`_general` call, and the topic indices of each subscription
#: it met (members keep their subscriptions from one rebalance to the next).
_last_topic_lists: tuple[Layout, dict[frozenset[str], list[int]]] | None = None


def _topic_lists(layout: Layout, members: int) -> dict[frozenset[str], list[int]]:
    """Subscription -> its topic indices in ``layout``, kept from the last call with the same
    layout (cleared when it has grown well past the number of ``members``). The lists are
    shared: nobody may change them."""
    global _last_topic_lists
    last = _last_topic_lists
    if last is None or last[0] is not layout or len(last[1]) > 2 * members + 64:
        last = _last_topic_lists = (layout, {})
    return last[1]


def _general(
    layout: Layout,
    member_ids: list[str],
    subscribed: list[frozenset[str]],
    owned: _OwnedIds | _OwnedClaims,
    hinted: Mapping[int, int],
) -> Plan:
    """Unequal subscriptions: keep, fill the least loaded eligible member, then rebalance until
    no partition could move to an eligible member with 2+ fewer partitions.

    ``owned`` says what each member validly owns (:class:`_OwnedIds`, :class:`_OwnedClaims`).
    ``hinted`` maps a partition id to the member index a previous plan meant it for; free
    partitions go there first when that member subscribes to the topic. A member whose claim
    is exactly what it validly owns (``owned.whole``) and that only gains partitions keeps its
    claim as the kept part (:attr:`Plan.whole`).

    At a million partitions the work is kept per topic and per member, never per partition in
    Python: the fill hands each topic's free partitions out in bulk (the exact order a heap of
    ``(load, member)`` would give), the least loaded subscriber of a topic is found from bit
    sets of the members at each load, and a member's partitions are grouped by topic
    (``held``) only once the rebalance touches it.
    """
    members = len(subscribed)
    owner_of = owned.owner_of  # complete for every member grouped into held (see _Held)
    ntopics = len(layout.topics)
    offsets, counts = layout.offsets, layout.counts
    subs: list[list[int]] = [[] for _ in range(ntopics)]
    # topics_of[i]: the topics member i subscribes to (in no particular order: nothing here
    # depends on it), one list per distinct subscription.
    topics_of: list[list[int]] = []
    by_subscription = _topic_lists(layout, members)
    subs_of = subs.__getitem__
    for i, names in enumerate(subscribed):
        ks = by_subscription.get(names)
        if ks is None:
            ks = by_subscription[names] = list(map(layout.index.__getitem__, names))
        topics_of.append(ks)
        # subs[k].append(i) for each topic, in C; i grows, so each subs[k] stays sorted.
        deque(map(list.append, map(subs_of, ks), repeat(i)), 0)
    topic_sets = _TopicSets(topics_of)

    load = list(owned.loads)

    # Fill: the most constrained topics first, each partition to the least loaded subscriber.
    # filled_by[g]: the member holding id g (the fill's choice, then kept up to date by moves).
    filled_by = [-1] * layout.total
    # What the fill gave each member, in the order given.
    fills: list[list[int]] = [[] for _ in range(members)]
    by_level = sorted(range(ntopics), key=lambda k: (len(subs[k]), k))
    if not hinted and not any(owned.loads):
        # Nobody owned anything: every partition is free, and a member's ids are found in what
        # the fill wrote when a move needs them (_FilledIds): no list per member is built.
        filled, marks, fill = _fill_free(layout, subs, load, filled_by, by_level)
        held = _Held(layout, owned, fills, filled, None, (marks, fill))
    else:
        # Per topic given out (in fill order), how many partitions each member got (a Counter of
        # the receivers, so the fill writes nothing per member): noted when topics have two
        # partitions or more per subscriber on average (each member is then given several of a
        # topic, and grouping a touched member from these saves a topic lookup per partition);
        # otherwise members get one partition of a topic or none, few are touched, and looking
        # their partitions' topics up costs less.
        pairs = sum(map(len, subs))
        record = pairs > 0 and sum(compress(counts, subs)) >= 1.5 * pairs
        fill_order: list[int] | None = [] if record else None
        fill_runs: list[Counter[int]] | None = [] if record else None
        for k in by_level:
            if not subs[k]:
                continue
            free = owned.free(k)
            given: list[int] = []  # members given a hinted partition of k, one entry each
            if hinted and free:
                rest = []
                name = layout.topics[k]
                for g in free:
                    i = hinted.get(g, -1)
                    if i >= 0 and name in subscribed[i]:
                        filled_by[g] = i
                        fills[i].append(g)
                        given.append(i)
                        load[i] += 1
                    else:
                        rest.append(g)
                free = rest
            if not free:
                if given and fill_order is not None and fill_runs is not None:
                    fill_order.append(k)
                    fill_runs.append(Counter(given))
                continue
            receivers = _water_fill(free, subs[k], load)
            if len(free) == counts[k]:
                filled_by[offsets[k] : offsets[k] + counts[k]] = receivers
            else:
                deque(map(setitem, repeat(filled_by), free, receivers), 0)
            # fills[i].append(g) for each partition given, in C.
            deque(map(list.append, map(fills.__getitem__, receivers), free), 0)
            if fill_order is not None and fill_runs is not None:
                fill_order.append(k)
                fill_runs.append(Counter(given + receivers if given else receivers))
        # held[i][k]: the ids of topic k member i holds; owned ones first, so the ones popped
        # when moving are the newly given ones. Grouped only when the rebalance touches the member.
        held = _Held(layout, owned, fills, fill_order, fill_runs)
    # Partitions held that the member did not own: so far, all it was given.
    fresh_count = list(map(sub, load, owned.loads))

    # Rebalance: move from a loaded member to the least loaded eligible member while that member
    # has 2+ fewer. Every move lowers the sum of squared loads, so this terminates.
    least_finder = _LeastLoaded(members, subs, load, topics_of)
    least_of = least_finder.least_of

    # least[k]: cached least_of(k), -1 if unknown. Kept up to date per move instead of
    # recomputed, so a check costs O(topics held).
    least = [-1] * ntopics
    # rank[i]: (load, member) of member i as one int, load * members + i, which orders as the
    # pair does; kept up to date by move.
    rank = list(map(add, map(mul, load, repeat(members)), range(members)))

    # Owned partitions currently away from their owner: original owner, and holder.
    origin: dict[int, int] = {}
    holder: dict[int, int] = {}
    touched: set[int] = set()  # members whose partitions the rebalance changed

    def move(src: int, dst: int, k: int, n: int) -> None:
        touched.add(src)
        touched.add(dst)
        ids = held[src][k]
        # Taken before filled_by changes (a _FilledIds list is made from it).
        into = held[dst].setdefault(k, [])
        moving = ids[len(ids) - n :]
        deque(
            map(setitem, repeat(filled_by), moving, repeat(dst)), 0
        )  # who holds what, for the end
        del ids[len(ids) - n :]
        if not ids:
            del held[src][k]
        into.extend(moving)
        least_finder.moved(src, load[src], load[src] - n)
        least_finder.moved(dst, load[dst], load[dst] + n)
        load[src] -= n
        load[dst] += n
        fresh_count[src] -= sum(1 for g in moving if owner_of[g] != src)
        fresh_count[dst] += sum(1 for g in moving if owner_of[g] != dst)
        for g in moving:
            if owner_of[g] == dst:
                origin.pop(g, None)
                holder.pop(g, None)
            elif owner_of[g] == src:
                origin[g] = src
                holder[g] = dst
            elif g in holder:
                holder[g] = dst
        # dst is heavier: it is no longer the least of its topics. src is lighter: it is
        # now the least of its topics whose known least it beats. (Both checks in C.)
        its = topics_of[dst]
        cached = list(map(least.__getitem__, its))
        if dst in cached:
            for j in compress(range(len(its)), map(eq, repeat(dst), cached)):
                least[its[j]] = -1
        rank[src] = load[src] * members + src
        rank[dst] = load[dst] * members + dst
        its = topics_of[src]
        cached = list(map(least.__getitem__, its))
        beaten = map(lt, repeat(rank[src]), map(rank.__getitem__, cached))
        for j in compress(range(len(its)), beaten):
            if cached[j] >= 0:
                least[its[j]] = src

    # Fresh partitions already moved sideways once (see below); bounds those moves.
    swapped: set[int] = set()
    budget = [members + layout.total]  # sideways chains allowed (termination)
    # Work allowed for the searches that avoid revocations: they keep small and typical groups
    # sticky, and this cap keeps a pathological large group linear (it then just revokes).
    work = [8 * (members + layout.total) + 100_000]

    def raise_up(b: int) -> bool:
        """Give ``b`` one newly given partition from a member with more, if there is one.

        Used instead of revoking an owned partition: moving a fresh one sideways keeps the
        assignment sticky, so the follow-up cooperative round has nothing left to revoke. A
        move between loads differing by one changes no load count, so each fresh partition
        moves sideways at most once (termination)."""
        lb = load[b]
        wanted = topic_sets[b]
        found: tuple[int, int, int] | None = None  # (-load of donor, topic, donor)
        work[0] -= members
        if work[0] < 0:
            return False
        for c in range(members):
            if not fresh_count[c] or c == b or load[c] <= lb:
                continue
            work[0] -= len(held[c])
            for k2, ids in held[c].items():
                if k2 in wanted and owner_of[ids[-1]] != c and ids[-1] not in swapped:
                    cand = (-load[c], k2, c)
                    if found is None or cand < found:
                        found = cand
        if found is None:
            return False
        _, k2, c = found
        swapped.add(held[c][k2][-1])
        move(c, b, k2, 1)
        return True

    def least_load(k: int) -> int:
        b = least[k]
        if b < 0:
            b = least[k] = least_of(k)
        return load[b]

    def settled(y: int, k: int) -> bool:
        """Would ``y`` stay violation-free after receiving one more partition of topic ``k``?
        (Every topic it would hold has a subscriber with at most one fewer.)"""
        after = load[y] + 1
        if least_load(k) < after - 1:
            return False
        return all(least_load(kk) >= after - 1 for kk in held[y])

    def augment(a: int, slack: int) -> bool:
        """Lower ``a`` by one along a chain of newly given partitions ending at a member with
        ``slack`` fewer than ``a`` or less (each hop: a member passes one of its new partitions
        to an eligible member). Only new partitions move, so nothing owned is revoked. With
        slack 2 the sum of squared loads drops; with slack 1 it stays (a sideways chain), so
        those are rationed by ``budget`` to guarantee termination."""
        target = load[a] - slack
        parent: dict[int, tuple[int, int]] = {a: (-1, -1)}
        expanded: set[int] = set()
        frontier = [a]
        end = -1
        while frontier and end < 0:
            nxt: list[int] = []
            for x in frontier:
                if not fresh_count[x]:
                    continue
                work[0] -= len(held[x])
                if work[0] < 0:
                    return False
                for k, ids in held[x].items():
                    if k in expanded or owner_of[ids[-1]] == x:
                        continue
                    expanded.add(k)
                    work[0] -= len(subs[k])
                    for y in subs[k]:
                        if y in parent:
                            continue
                        parent[y] = (x, k)
                        if load[y] <= target and (slack > 1 or settled(y, k)):
                            end = y
                            break
                        nxt.append(y)
                    if end >= 0:
                        break
                if end >= 0:
                    break
            frontier = nxt
        if end < 0:
            return False
        hops: list[tuple[int, int, int]] = []
        y = end
        while y != a:
            x, k = parent[y]
            hops.append((x, y, k))
            y = x
        # Apply from the end so each giver still holds the new partition it is passing on.
        for x, y, k in hops:
            move(x, y, k, 1)
        return True

    def lower_down(a: int) -> bool:
        """Hand one of ``a``'s newly given partitions to an eligible member with one fewer
        (a sideways move, at most once per partition), instead of revoking an owned one.

        Only to a member that stays violation-free with it (``settled``): otherwise the
        receiver would just revoke an owned partition in ``a``'s place, one move more."""
        la = load[a]
        for k, ids in held[a].items():
            g = ids[-1]
            if owner_of[g] == a or g in swapped:
                continue
            b = least[k]
            if b < 0:
                b = least[k] = least_of(k)
            if b != a and load[b] == la - 1 and settled(b, k):
                swapped.add(g)
                move(a, b, k, 1)
                return True
        return False

    changed = True
    while changed:
        changed = False
        # Never decreases (a move only raises the receiver), so a stale value is a safe bound.
        floor_load = min((load[i] for i in range(members) if topics_of[i]), default=0)
        # Donors by current load, heaviest first (a max-heap of (-load, member)). The heaviest
        # member gives, only down to the next heaviest one's load, then goes back in the heap;
        # so partitions always leave whoever is heaviest right now. Walking a fixed order
        # instead lets a lighter member drain itself (its "next" is the newcomer) while a
        # heavier one keeps its surplus, which then has to be moved to the drained member: one
        # needless move of an owned partition per such pair.
        donors = [(-load[i], i) for i in range(members)]
        heapq.heapify(donors)
        while donors:
            negl, a = heapq.heappop(donors)
            if -negl != load[a]:
                # Received partitions since it was pushed: requeue at its current load.
                heapq.heappush(donors, (-load[a], a))
                continue
            while donors and -donors[0][0] != load[donors[0][1]]:
                _, c = heapq.heappop(donors)
                heapq.heappush(donors, (-load[c], c))
            cap = -donors[0][0] if donors else 0
            exhausted = False
            while load[a] >= cap:
                la = load[a]
                if la - 2 < floor_load or not least_finder.lighter_near(a, la - 2):
                    # Nobody sharing a topic with a has 2+ fewer: no topic of a has a taker.
                    exhausted = True
                    break
                # The smallest (owned flag, load of b, topic) among the topics a holds whose
                # least loaded subscriber b has 2+ fewer: newly given partitions move first.
                # Least subscribers, their loads, the flags and the minimum, all in C.
                topics_held = held[a]
                keys = list(topics_held)
                bs = list(map(least.__getitem__, keys))
                if -1 in bs:
                    for j in compress(range(len(bs)), map(eq, repeat(-1), bs)):
                        bs[j] = least[keys[j]] = least_of(keys[j])
                lbs = list(map(load.__getitem__, bs))
                takers = list(compress(range(len(lbs)), map(ge, repeat(la - 2), lbs)))
                if not takers:
                    exhausted = True
                    break
                ks = list(map(keys.__getitem__, takers))
                if owned.loads[a]:
                    lasts = map(_last, map(topics_held.__getitem__, ks))
                    flags = map(int, map(eq, repeat(a), map(owner_of.__getitem__, lasts)))
                    owned_flag, lb, k = min(
                        zip(flags, map(lbs.__getitem__, takers), ks, strict=True)
                    )
                else:  # nothing a holds is its own: the least (load of b, topic), no tuples
                    owned_flag = 0
                    taken = list(map(lbs.__getitem__, takers))
                    lb = min(taken)
                    k = min(compress(ks, map(eq, repeat(lb), taken)))
                best_b = least[k]
                changed = True
                if owned_flag:
                    if augment(a, 2) or lower_down(a) or raise_up(best_b):
                        continue
                    if budget[0] > 0 and augment(a, 1):
                        budget[0] -= 1
                        continue
                fresh = 1
                if not owned_flag:
                    ids = held[a][k]
                    fresh = 0
                    for g in reversed(ids):
                        if owner_of[g] == a:
                            break
                        fresh += 1
                move(a, best_b, k, min(fresh, (la - lb) // 2, max(1, la - cap + 1)))
            if not exhausted:
                heapq.heappush(donors, (-load[a], a))

    detoured = bool(origin)
    if detoured:
        work_left = 2 * (members + layout.total) + 10_000
        _undo_detours(
            held, owner_of, origin, holder, subs, topic_sets, offsets, load, work_left, touched
        )

    if not any(owned.loads):
        # Nobody owned anything (a fresh group): filled_by, kept up to date by every move,
        # says who holds each partition, so the assignments are built topic by topic.
        return _fresh_plan(layout, member_ids, filled_by, owned.claimed)

    kept: list[list[int]] = []
    added: list[list[int]] = []
    out_whole = list(owned.whole)
    ready: list[dict[str, tuple[int, ...]] | None] = [None] * members
    for i in range(members):
        if i not in touched:
            # The rebalance left it alone: it kept all it owned, and gained what the fill
            # gave it.
            kept.append([] if out_whole[i] is not None else owned.ids(i))
            added.append(fills[i])
            continue
        out_whole[i] = None
        mine_held = held[i]
        if isinstance(mine_held, _TopicIds):  # all given: no need to make every list
            mine = mine_held.ids()
            kept.append([])
            added.append(mine)
            continue
        ready[i], mine = _grouped_held(layout, mine_held)
        if detoured:  # taking back detours moves partitions without counting them
            kept.append([g for g in mine if owner_of[g] == i])
            added.append([g for g in mine if owner_of[g] != i])
        elif not fresh_count[i]:
            kept.append(mine)
            added.append([])
        elif fresh_count[i] == len(mine):
            kept.append([])
            added.append(mine)
        else:
            kept.append([g for g in mine if owner_of[g] == i])
            added.append([g for g in mine if owner_of[g] != i])
    return Plan(layout, member_ids, kept, added, owned.claimed, out_whole, owned.ordered, ready)


def _undo_detours(
    held: _Held,
    owner_of: list[int],
    origin: dict[int, int],
    holder: dict[int, int],
    subs: list[list[int]],
    topic_sets: _TopicSets,
    offsets: list[int],
    loads: list[int],
    work: int,
    touched: set[int],
) -> None:
    """Take back moves the plan does not need, in place, never leaving it less balanced.

    The balancer fixes each imbalance where it sees it, so a plan can route a partition
    through a detour: ``x`` receives ``g`` from its owner ``y`` while ``y`` (or someone ``y``
    gives to, and so on) hands its own partitions on to others. A detour is a cycle of
    single-partition hops ``x -> y -> ... -> x`` between subscribers, which changes no load. A
    hop costs +1 move if the giver hands over a partition it owned, -1 if it hands one back to
    its owner, 0 otherwise. For given loads, a plan moves the fewest partitions exactly when
    no cycle has a negative cost (the optimality condition of min-cost circulations), so
    cycles through a -1 hop are applied first. Then paths ``a -> ... -> b`` of negative cost,
    which move one unit of load from ``a`` to ``b``: another, equally balanced split of the
    loads can need fewer moves than the one the greedy pass found. Each cycle or path is kept
    only if no more partitions could then move to an eligible member with 2+ fewer (a member
    on it may come to hold a new topic). Searches are Bellman-Ford (queue based) within a
    ``work`` budget linear in the group's size: past it, the plan is kept as it is.
    """
    members = held.members

    def hops_from(u: int) -> Iterator[tuple[int, int, int]]:
        """(topic, receiver, cost) of every hop ``u`` can make."""
        nonlocal work
        for k, ids in held[u].items():
            work -= len(ids)
            back: set[int] = set()
            base = 1
            for g in ids:
                if owner_of[g] != u:
                    base = 0
                    o = origin.get(g, -1)
                    if o >= 0:
                        back.add(o)
            work -= len(subs[k])
            for v in subs[k]:
                if v != u:
                    yield k, v, -1 if v in back else base

    def pick(u: int, k: int, v: int) -> int:
        """The partition of topic ``k`` that ``u`` gives ``v``: v's own, else a moved one,
        else (only then) one ``u`` owns."""
        ids = held[u][k]
        moved = -1
        for g in ids:
            if owner_of[g] != u:
                if origin.get(g, -1) == v:
                    return g
                if moved < 0:
                    moved = g
        return moved if moved >= 0 else ids[0]

    def path_to(y: int, x: int) -> list[tuple[int, int, int]] | None:
        """Hops (giver, receiver, topic) of a path y -> ... -> x of cost <= 0, or None."""
        nonlocal work
        dist = {y: 0}
        parent: dict[int, tuple[int, int]] = {}
        relaxed = [0] * members
        queue = deque([y])
        queued = {y}
        while queue:
            u = queue.popleft()
            queued.discard(u)
            du = dist[u]
            for k, v, cost in hops_from(u):
                nd = du + cost
                if nd < dist.get(v, members + 1):
                    dist[v] = nd
                    parent[v] = (u, k)
                    if v == x:
                        if nd <= 0:
                            return _trace(parent, y, x)
                        continue  # x ends the path; it never gives on it
                    relaxed[v] += 1
                    if relaxed[v] > members:
                        return None  # a negative cycle elsewhere: found from its own hop
                    if v not in queued:
                        queued.add(v)
                        queue.append(v)
            if work < 0:
                return None
        return None

    def apply(chosen: list[tuple[int, int, int, int]]) -> None:
        """Make each hop (giver, receiver, topic, partition), keeping origin/holder right."""
        for u, v, kk, gg in chosen:
            touched.add(u)
            touched.add(v)
            ids = held[u][kk]
            ids.remove(gg)
            if not ids:
                del held[u][kk]
            held[v].setdefault(kk, []).append(gg)
            if owner_of[gg] == v:
                origin.pop(gg, None)
                holder.pop(gg, None)
            elif owner_of[gg] == u:
                origin[gg] = u
                holder[gg] = v
            elif gg in holder:
                holder[gg] = v

    load = list(loads)

    def imbalance() -> int:
        """Partitions that could move to an eligible member with 2+ fewer."""
        nonlocal work
        work -= len(subs) + members
        least = [min([load[v] for v in s], default=0) for s in subs]
        return sum(
            len(ids)
            for u in range(members)
            for k, ids in held[u].items()
            if load[u] - least[k] >= 2
        )

    before = imbalance()
    tried_cycles: set[int] = set()
    improved = True
    while improved and work > 0:
        improved = False
        for g in sorted(holder):
            x = holder.get(g, -1)
            if x < 0 or g in tried_cycles:
                continue  # went home with an earlier cycle, or its cycle did not fit
            y = origin[g]
            k = bisect_left(offsets, g + 1) - 1
            if k not in topic_sets[y]:
                continue
            path = path_to(y, x)
            if path is None:
                if work < 0:
                    return
                continue
            # Choose every partition first, then apply: nobody passes on what it receives in
            # the same cycle.
            chosen = [(u, v, kk, pick(u, kk, v)) for u, v, kk in path]
            chosen.append((x, y, k, g))
            apply(chosen)
            if imbalance() > before:
                # A member on the cycle would hold a topic someone eligible has 2 fewer of.
                apply([(v, u, kk, gg) for u, v, kk, gg in reversed(chosen)])
                tried_cycles.add(g)
                continue
            improved = True

    # Then paths: a -> ... -> b of negative cost move one unit of load from a to b and save a
    # move; they are applied only if the plan stays as balanced as it was (a different but
    # equally balanced load split can need fewer moves than the one the greedy pass found).
    def negative_path(tried: set[tuple[tuple[int, int, int], ...]]) -> list[tuple[int, int, int]]:
        """Hops of a simple path of negative cost not tried yet (Bellman-Ford from each
        member in turn, heaviest first), or [] if there is none within the budget."""
        least = [min([load[v] for v in s], default=0) for s in subs]
        for a in sorted(range(members), key=lambda i: (-load[i], i)):
            # Least load per topic once a has given one away.
            after = [min(n, load[a] - 1) if k in topic_sets[a] else n for k, n in enumerate(least)]
            dist = {a: 0}
            parent: list[tuple[int, int] | None] = [None] * members
            relaxed = [0] * members
            queue = deque([a])
            queued = {a}
            while queue:
                if work < 0:
                    return []
                u = queue.popleft()
                queued.discard(u)
                du = dist[u]
                for k, v, cost in hops_from(u):
                    nd = du + cost
                    if v == a or nd >= dist.get(v, members + 1):
                        continue
                    if k not in held[v] and load[v] - after[k] >= 2:
                        continue  # v would hold a topic someone eligible has 2 fewer of
                    dist[v] = nd
                    parent[v] = (u, k)
                    if nd < 0 and load[v] + 1 - after[k] < 2:
                        hops = _trace_back(parent, v)
                        if hops and tuple(hops) not in tried:
                            return hops
                    relaxed[v] += 1
                    if relaxed[v] > members:
                        queue.clear()
                        break
                    if v not in queued:
                        queued.add(v)
                        queue.append(v)
        return []

    tried: set[tuple[tuple[int, int, int], ...]] = set()
    while work > 0:
        path = negative_path(tried)
        if not path:
            return
        tried.add(tuple(path))
        chosen = [(u, v, kk, pick(u, kk, v)) for u, v, kk in path]
        apply(chosen)
        a, b = path[0][0], path[-1][1]
        load[a] -= 1
        load[b] += 1
        if imbalance() > before:
            apply([(v, u, kk, gg) for u, v, kk, gg in reversed(chosen)])
            load[a] += 1
            load[b] -= 1


def _trace_back(parent: Sequence[tuple[int, int] | None], v: int) -> list[tuple[int, int, int]]:
    """The hops of the parent chain ending at ``v``; [] if it is not a simple path."""
    hops: list[tuple[int, int, int]] = []
    seen = {v}
    step = parent[v]
    while step is not None:
        u, k = step
        if u in seen:
            return []
        seen.add(u)
        hops.append((u, v, k))
        v = u
        step = parent[v]
    hops.reverse()
    return hops


def _trace(
    parent: Mapping[int, tuple[int, int]], y: int, x: int
) -> list[tuple[int, int, int]] | None:
    """The hops of the parent chain from ``y`` to ``x``; None if it is not a simple path."""
    hops: list[tuple[int, int, int]] = []
    seen = {x}
    v = x
    while v != y:
        u, k = parent[v]
        if u in seen:
            return None
        seen.add(u)
        hops.append((u, v, k))
        v = u
    hops.reverse()
    return hops
