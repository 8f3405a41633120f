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
from bisect import bisect_left
from collections import Counter, deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import chain, compress, filterfalse, repeat
from operator import add, eq, gt

from aiogroup.assignors.range import refuse_bare_string
from aiogroup.protocol.types import NO_GENERATION, PartitionsByTopic

__all__ = ["Layout", "MemberClaim", "Plan", "balance", "gc_paused"]

logger = logging.getLogger("aiogroup.assignors")


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
        self._single_of: list[tuple[int]] | None = None
        self._part_of: list[int] | None = None
        self._singletons: list[tuple[int]] | None = None

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
    def part_of(self) -> list[int]:
        """Partition number of each id."""
        if self._part_of is None:
            self._part_of = list(chain.from_iterable(map(range, self.counts)))
        return self._part_of

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

    def grouped(self, ids: list[int]) -> dict[str, tuple[int, ...]]:
        """Turn ids into ``{topic: (p, ...)}``, topics and partitions sorted.

        ``ids`` must be sorted. Most members hold one partition per topic, so the dict is built
        with ``dict(zip(...))`` and only topics seen more than once are fixed up.
        """
        if not ids:
            return {}
        topic_of = self.topic_of
        out: dict[str, tuple[int, ...]] = dict(
            zip(map(topic_of.__getitem__, ids), map(self.single_of.__getitem__, ids), strict=True)
        )
        if len(out) != len(ids):
            names = list(map(topic_of.__getitem__, ids))
            part_of = self.part_of
            for name in set(compress(names[1:], map(eq, names[1:], names))):
                start = self.offset_of[name]
                lo = bisect_left(ids, start)
                hi = bisect_left(ids, start + self.count_of[name], lo)
                out[name] = tuple(map(part_of.__getitem__, ids[lo:hi]))
        return out


@dataclass(slots=True)
class Plan:
    """The balancer's result.

    ``member_ids`` is sorted; for member ``i``, ``kept[i]`` are the partitions it validly owned
    and keeps, ``added[i]`` the ones it is newly given. ``claimed`` holds every existing partition
    any member claims (valid or not), which the cooperative adjust step needs.
    """

    layout: Layout
    member_ids: list[str]
    kept: list[list[int]]
    added: list[list[int]]
    claimed: set[int]

    def assignments(self) -> dict[str, dict[str, tuple[int, ...]]]:
        """Per member id, its partitions grouped by topic, sorted."""
        out: dict[str, dict[str, tuple[int, ...]]] = {}
        layout = self.layout
        for member_id, kept, added in zip(self.member_ids, self.kept, self.added, strict=True):
            out[member_id] = layout.grouped(sorted(chain(kept, added)))
        return out

    def moved(self) -> int:
        """Partitions given to a member that did not validly own them."""
        return sum(map(len, self.added))


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
                if len(flat) == len(vals):
                    # One partition per topic (the common shape): no duplicates possible.
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
                problems["of a topic it does not subscribe to"] += 1
                foreign.append(ident)
    for what, n in sorted(problems.items()):
        logger.warning("member %r claims %d partition(s) %s; ignored", claim.member_id, n, what)
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

    wanted: set[str] = set()
    for claim in claims:
        wanted.update(claim.topics)
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
    layout = Layout(counts)

    # Members usually share one topic list: compute each distinct subscription once.
    seen_subs: dict[tuple[str, ...], frozenset[str]] = {}
    subscribed: list[frozenset[str]] = []
    for c in claims:
        key = tuple(c.topics)
        subs = seen_subs.get(key)
        if subs is None:
            subs = seen_subs[key] = frozenset(key).intersection(counts)
        subscribed.append(subs)
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
    if all(s == subscribed[0] for s in subscribed):
        kept, added = _uniform(layout, owned, claimed)
    else:
        hinted: dict[int, int] = {}
        if hint:
            position = {m: i for i, m in enumerate(member_ids)}
            for (topic, p), member in hint.items():
                k = layout.index.get(topic)
                i = position.get(member)
                if k is not None and i is not None and 0 <= p < layout.counts[k]:
                    hinted[layout.offsets[k] + p] = i
        kept, added = _general(layout, subscribed, owned, hinted)
    return Plan(layout, member_ids, kept, added, claimed)


def _uniform(
    layout: Layout, owned: list[list[int]], claimed: set[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Everyone subscribes to the same topics: quotas of ``N // M`` and ``N // M + 1``."""
    total = layout.total
    members = len(owned)
    floor, extra = divmod(total, members)
    sizes = list(map(len, owned))
    # The extra slots go first to members that own more than the floor: each one saves a move.
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

    kept: list[list[int]] = []
    trimmed = False
    for i, ids in enumerate(owned):
        quota = floor + plus[i]
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

    added: list[list[int]] = []
    pos = 0
    for i in range(members):
        need = floor + plus[i] - len(kept[i])
        added.append(pool[pos : pos + need])
        pos += need
    return kept, added


def _general(
    layout: Layout,
    subscribed: list[frozenset[str]],
    owned: list[list[int]],
    hinted: Mapping[int, int],
) -> tuple[list[list[int]], list[list[int]]]:
    """Unequal subscriptions: keep, fill the least loaded eligible member, then rebalance until
    no partition could move to an eligible member with 2+ fewer partitions.

    ``hinted`` maps a partition id to the member index a previous plan meant it for; free
    partitions go there first when that member subscribes to the topic."""
    members = len(owned)
    ntopics = len(layout.topics)
    subs: list[list[int]] = [[] for _ in range(ntopics)]
    for i, names in enumerate(subscribed):
        for name in names:
            subs[layout.index[name]].append(i)
    for s in subs:
        s.sort()

    offsets = layout.offsets
    # held[i][k]: the ids of topic k member i holds; owned ones first, so the ones popped when
    # moving are the newly given ones.
    held: list[dict[int, list[int]]] = [{} for _ in range(members)]
    load = [0] * members
    fresh_count = [0] * members  # partitions held that the member did not own
    taken: set[int] = set()
    for i, ids in enumerate(owned):
        ids.sort()
        h = held[i]
        for ident in ids:
            k = bisect_left(offsets, ident + 1) - 1
            h.setdefault(k, []).append(ident)
        load[i] = len(ids)
        taken.update(ids)

    # Fill: the most constrained topics first, each partition to the least loaded subscriber.
    for k in sorted(range(ntopics), key=lambda k: (len(subs[k]), k)):
        if not subs[k]:
            continue
        start = offsets[k]
        free = [g for g in range(start, start + layout.counts[k]) if g not in taken]
        if hinted and free:
            rest = []
            name = layout.topics[k]
            for g in free:
                i = hinted.get(g, -1)
                if i >= 0 and name in subscribed[i]:
                    held[i].setdefault(k, []).append(g)
                    load[i] += 1
                    fresh_count[i] += 1
                else:
                    rest.append(g)
            free = rest
        if not free:
            continue
        heap = [(load[i], i) for i in subs[k]]
        heapq.heapify(heap)
        for ident in free:
            n, i = heap[0]
            held[i].setdefault(k, []).append(ident)
            heapq.heapreplace(heap, (n + 1, i))
        for n, i in heap:
            fresh_count[i] += n - load[i]
            load[i] = n

    # Rebalance: move from a loaded member to the least loaded eligible member while that member
    # has 2+ fewer. Every move lowers the sum of squared loads, so this terminates.
    owned_sets = [set(ids) for ids in owned]
    topic_sets = [{layout.index[name] for name in names} for names in subscribed]
    topics_of: list[list[int]] = [[] for _ in range(members)]
    for k, s in enumerate(subs):
        for i in s:
            topics_of[i].append(k)
    # Members with the same subscription form a class; each class keeps a heap of
    # (load, member) with stale entries skipped lazily, so the least loaded subscriber of a
    # topic is found among a few class heads rather than among all its subscribers.
    class_of: dict[frozenset[str], int] = {}
    member_class = [class_of.setdefault(names, len(class_of)) for names in subscribed]
    class_heaps: list[list[tuple[int, int]]] = [[] for _ in range(len(class_of))]
    for i, c in enumerate(member_class):
        class_heaps[c].append((load[i], i))
    for class_heap in class_heaps:
        heapq.heapify(class_heap)
    topic_classes: list[list[int]] = [[] for _ in range(ntopics)]
    for names, c in class_of.items():
        for name in names:
            topic_classes[layout.index[name]].append(c)

    def class_head(c: int) -> tuple[int, int]:
        ch = class_heaps[c]
        while load[ch[0][1]] != ch[0][0]:
            heapq.heappop(ch)
        return ch[0]

    def least_of(k: int) -> int:
        """The least loaded subscriber of topic ``k``, lowest index on ties."""
        return min(map(class_head, topic_classes[k]))[1]

    # least[k]: cached least_of(k), -1 if unknown. Kept up to date per move instead of
    # recomputed, so a check costs O(topics held).
    least = [least_of(k) if s else -1 for k, s in enumerate(subs)]

    # Owned partitions currently away from their owner: original owner, and holder.
    origin: dict[int, int] = {}
    holder: dict[int, int] = {}

    def move(src: int, dst: int, k: int, n: int) -> None:
        ids = held[src][k]
        moving = ids[len(ids) - n :]
        del ids[len(ids) - n :]
        if not ids:
            del held[src][k]
        held[dst].setdefault(k, []).extend(moving)
        load[src] -= n
        load[dst] += n
        heapq.heappush(class_heaps[member_class[src]], (load[src], src))
        heapq.heappush(class_heaps[member_class[dst]], (load[dst], dst))
        os_src, os_dst = owned_sets[src], owned_sets[dst]
        fresh_count[src] -= sum(1 for g in moving if g not in os_src)
        fresh_count[dst] += sum(1 for g in moving if g not in os_dst)
        for g in moving:
            if g in os_dst:
                origin.pop(g, None)
                holder.pop(g, None)
            elif g in os_src:
                origin[g] = src
                holder[g] = dst
            elif g in holder:
                holder[g] = dst
        for kd in topics_of[dst]:
            if least[kd] == dst:
                least[kd] = -1
        ls = load[src]
        for ks in topics_of[src]:
            c = least[ks]
            if c >= 0 and (ls < load[c] or (ls == load[c] and src < c)):
                least[ks] = src

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
            os_c = owned_sets[c]
            work[0] -= len(held[c])
            for k2, ids in held[c].items():
                if k2 in wanted and ids[-1] not in os_c and ids[-1] not in swapped:
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
                    if k in expanded or ids[-1] in owned_sets[x]:
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
            if g in owned_sets[a] or g in swapped:
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
                if la - 2 < floor_load:
                    exhausted = True
                    break
                # (owned flag, load of b, topic): newly given partitions move first.
                best: tuple[int, int, int] | None = None
                best_b = -1
                for k, ids in held[a].items():
                    b = least[k]
                    if b < 0:
                        b = least[k] = least_of(k)
                    lb = load[b]
                    if lb <= la - 2:
                        cand = (1 if ids[-1] in owned_sets[a] else 0, lb, k)
                        if best is None or cand < best:
                            best = cand
                            best_b = b
                if best is None:
                    exhausted = True
                    break
                owned_flag, lb, k = best
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
                    os_a = owned_sets[a]
                    fresh = 0
                    for g in reversed(ids):
                        if g in os_a:
                            break
                        fresh += 1
                move(a, best_b, k, min(fresh, (la - lb) // 2, max(1, la - cap + 1)))
            if not exhausted:
                heapq.heappush(donors, (-load[a], a))

    if origin:
        work_left = 2 * (members + layout.total) + 10_000
        _undo_detours(held, owned_sets, origin, holder, subs, topic_sets, offsets, work_left)

    kept: list[list[int]] = []
    added: list[list[int]] = []
    for i in range(members):
        mine = list(chain.from_iterable(held[i].values()))
        os_ = owned_sets[i]
        kept.append([g for g in mine if g in os_])
        added.append([g for g in mine if g not in os_])
    return kept, added


def _undo_detours(
    held: list[dict[int, list[int]]],
    owned_sets: list[set[int]],
    origin: dict[int, int],
    holder: dict[int, int],
    subs: list[list[int]],
    topic_sets: list[set[int]],
    offsets: list[int],
    work: int,
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
    members = len(held)
    owner_of = origin  # only partitions away from their owner have one that is not the holder

    def hops_from(u: int) -> Iterator[tuple[int, int, int]]:
        """(topic, receiver, cost) of every hop ``u`` can make."""
        nonlocal work
        mine = owned_sets[u]
        for k, ids in held[u].items():
            work -= len(ids)
            back: set[int] = set()
            base = 1
            for g in ids:
                if g not in mine:
                    base = 0
                    o = owner_of.get(g, -1)
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
        mine = owned_sets[u]
        moved = -1
        for g in ids:
            if g not in mine:
                if owner_of.get(g, -1) == v:
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
            ids = held[u][kk]
            ids.remove(gg)
            if not ids:
                del held[u][kk]
            held[v].setdefault(kk, []).append(gg)
            if gg in owned_sets[v]:
                origin.pop(gg, None)
                holder.pop(gg, None)
            elif gg in owned_sets[u]:
                origin[gg] = u
                holder[gg] = v
            elif gg in holder:
                holder[gg] = v

    load = [sum(map(len, h.values())) for h in held]

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
