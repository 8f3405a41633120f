"""The general path: unequal subscriptions.

1. Each member keeps what it validly owns (:mod:`~aiogroup.assignors.balancer.owned`).
2. The fill hands free partitions to the least loaded subscriber, most constrained topics
   first, hinted ones to the member a previous plan meant them for
   (:mod:`~aiogroup.assignors.balancer.fill`).
3. :class:`Rebalance` moves partitions until none could move to an eligible member with 2+
   fewer: whoever is heaviest gives (a max-heap of donors), newly given partitions before owned
   ones, and before revoking an owned partition it looks for a chain of newly given ones that
   fixes the same imbalance (:meth:`Rebalance.augment`, :meth:`Rebalance.lower_down`,
   :meth:`Rebalance.raise_up`).
4. Detours are taken back (:mod:`~aiogroup.assignors.balancer.detours`).
5. :func:`held_plan` turns what each member holds into the plan, grouping only the members
   the rebalance touched.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping
from itertools import compress, repeat
from operator import add, eq, ge, itemgetter, lt, mul, setitem, sub

from aiogroup.assignors.balancer.detours import undo_detours
from aiogroup.assignors.balancer.fill import fill_fresh, fill_unowned, fresh_plan
from aiogroup.assignors.balancer.held import Held, TopicIds, grouped_held
from aiogroup.assignors.balancer.layout import Layout, Plan
from aiogroup.assignors.balancer.least import LeastLoaded
from aiogroup.assignors.balancer.owned import Owned

__all__ = ["Rebalance", "TopicSets", "general", "held_plan", "subscribers"]

_last_item = itemgetter(-1)


def general(
    layout: Layout,
    member_ids: list[str],
    subscribed: list[frozenset[str]],
    owned: Owned,
    hinted: Mapping[int, int],
) -> Plan:
    """Unequal subscriptions: keep, fill the least loaded eligible member, then rebalance until
    no partition could move to an eligible member with 2+ fewer partitions.

    ``owned`` says what each member validly owns
    (:class:`~aiogroup.assignors.balancer.owned.OwnedIds`,
    :class:`~aiogroup.assignors.balancer.owned.OwnedClaims`). ``hinted`` maps a partition id
    to the member index a previous plan meant it for; free partitions go there first when that
    member subscribes to the topic. A member whose claim is exactly what it validly owns
    (``owned.whole``) and that only gains partitions keeps its claim as the kept part
    (:attr:`Plan.whole`).

    At a million partitions the work is kept per topic and per member, never per partition in
    Python: the fill hands each topic's free partitions out in bulk (the exact order a heap of
    ``(load, member)`` would give), the least loaded subscriber of a topic is found from bit
    sets of the members at each load, and a member's partitions are grouped by topic
    (``held``) only once the rebalance touches it.
    """
    members = len(subscribed)
    ntopics = len(layout.topics)
    subs, topics_of = subscribers(layout, subscribed)
    topic_sets = TopicSets(topics_of)

    load = list(owned.loads)

    # Fill: the most constrained topics first, each partition to the least loaded subscriber.
    # filled_by[g]: the member holding id g (the fill's choice, then kept up to date by moves).
    filled_by = [-1] * layout.total
    # What the fill gave each member, in the order given.
    fills: list[list[int]] = [[] for _ in range(members)]
    by_level = sorted(range(ntopics), key=lambda k: (len(subs[k]), k))
    if not hinted and not any(owned.loads):
        # Nobody owned anything: every partition is free, and a member's ids are found in what
        # the fill wrote when a move needs them (FilledIds): no list per member is built.
        filled, marks, fill = fill_fresh(layout, subs, load, filled_by, by_level)
        held = Held(layout, owned, fills, filled, None, (marks, fill))
    else:
        fill_order, fill_runs = fill_unowned(
            layout, owned, subscribed, subs, hinted, load, filled_by, fills, by_level
        )
        # held[i][k]: the ids of topic k member i holds; owned ones first, so the ones popped
        # when moving are the newly given ones. Grouped only when the rebalance touches the member.
        held = Held(layout, owned, fills, fill_order, fill_runs)

    moves = Rebalance(layout, owned, subs, topics_of, topic_sets, load, held, filled_by)
    moves.run()

    detoured = bool(moves.origin)
    if detoured:
        work_left = 2 * (members + layout.total) + 10_000
        undo_detours(
            held,
            owned.owner_of,
            moves.origin,
            moves.holder,
            subs,
            topic_sets,
            layout.offsets,
            load,
            work_left,
            moves.touched,
        )

    if not any(owned.loads):
        # Nobody owned anything (a fresh group): filled_by, kept up to date by every move,
        # says who holds each partition, so the assignments are built topic by topic.
        return fresh_plan(layout, member_ids, filled_by, owned.claimed)
    return held_plan(
        layout, member_ids, owned, held, fills, moves.fresh_count, moves.touched, detoured
    )


#: The layout of the last :func:`subscribers` call, and the topic indices of each subscription
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


def subscribers(
    layout: Layout, subscribed: list[frozenset[str]]
) -> tuple[list[list[int]], list[list[int]]]:
    """``subs[k]``: the members subscribed to topic ``k``, ascending; ``topics_of[i]``: the
    topics member ``i`` subscribes to (in no particular order: nothing depends on it), one list
    per distinct subscription (shared: nobody may change them)."""
    members = len(subscribed)
    subs: list[list[int]] = [[] for _ in range(len(layout.topics))]
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
    return subs, topics_of


class TopicSets(dict[int, set[int]]):
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


class Rebalance:
    """The moves after the fill: from a loaded member to the least loaded eligible member while
    that member has 2+ fewer. Every move lowers the sum of squared loads, so this terminates.

    The state is shared with the caller and changed in place: ``load`` (per member), ``held``
    (per member, its ids by topic) and ``filled_by`` (who holds each id, read by
    :func:`~aiogroup.assignors.balancer.fill.fresh_plan`). What the moves leave for the steps
    after them: ``origin`` and ``holder`` (owned partitions away from their owner: the owner,
    and who holds it), ``touched`` (members whose partitions changed) and ``fresh_count`` (per
    member, how many it holds that it did not own).

    The methods bind the state they use to local names first: they run in the loops of a
    million-partition rebalance. ``work`` and ``budget`` are one-element lists so that a
    method's loop updates them through a local name too.
    """

    __slots__ = (
        "budget",
        "filled_by",
        "fresh_count",
        "held",
        "holder",
        "least",
        "least_finder",
        "least_of",
        "load",
        "members",
        "origin",
        "owned",
        "owner_of",
        "rank",
        "subs",
        "swapped",
        "topic_sets",
        "topics_of",
        "touched",
        "work",
    )

    def __init__(
        self,
        layout: Layout,
        owned: Owned,
        subs: list[list[int]],
        topics_of: list[list[int]],
        topic_sets: TopicSets,
        load: list[int],
        held: Held,
        filled_by: list[int],
    ) -> None:
        members = len(load)
        self.members = members
        self.owned = owned
        self.owner_of = owned.owner_of  # complete for every member grouped into held (see Held)
        self.subs = subs
        self.topics_of = topics_of
        self.topic_sets = topic_sets
        self.load = load
        self.held = held
        self.filled_by = filled_by
        # Partitions held that the member did not own: so far, all it was given.
        self.fresh_count = list(map(sub, load, owned.loads))
        self.least_finder = LeastLoaded(members, subs, load, topics_of)
        self.least_of = self.least_finder.least_of
        # least[k]: cached least_of(k), -1 if unknown. Kept up to date per move instead of
        # recomputed, so a check costs O(topics held).
        self.least = [-1] * len(subs)
        # rank[i]: (load, member) of member i as one int, load * members + i, which orders as
        # the pair does; kept up to date by move.
        self.rank = list(map(add, map(mul, load, repeat(members)), range(members)))
        # Owned partitions currently away from their owner: original owner, and holder.
        self.origin: dict[int, int] = {}
        self.holder: dict[int, int] = {}
        self.touched: set[int] = set()  # members whose partitions the rebalance changed
        # Fresh partitions already moved sideways once (see raise_up); bounds those moves.
        self.swapped: set[int] = set()
        self.budget = [members + layout.total]  # sideways chains allowed (termination)
        # Work allowed for the searches that avoid revocations: they keep small and typical
        # groups sticky, and this cap keeps a pathological large group linear (it then just
        # revokes).
        self.work = [8 * (members + layout.total) + 100_000]

    def move(self, src: int, dst: int, k: int, n: int) -> None:
        """Move the last ``n`` ids of topic ``k`` that ``src`` holds to ``dst``."""
        touched = self.touched
        touched.add(src)
        touched.add(dst)
        held = self.held
        ids = held[src][k]
        # Taken before filled_by changes (a FilledIds list is made from it).
        into = held[dst].setdefault(k, [])
        moving = ids[len(ids) - n :]
        deque(
            map(setitem, repeat(self.filled_by), moving, repeat(dst)), 0
        )  # who holds what, for the end
        del ids[len(ids) - n :]
        if not ids:
            del held[src][k]
        into.extend(moving)
        load = self.load
        least_finder = self.least_finder
        least_finder.moved(src, load[src], load[src] - n)
        least_finder.moved(dst, load[dst], load[dst] + n)
        load[src] -= n
        load[dst] += n
        owner_of = self.owner_of
        fresh_count = self.fresh_count
        fresh_count[src] -= sum(1 for g in moving if owner_of[g] != src)
        fresh_count[dst] += sum(1 for g in moving if owner_of[g] != dst)
        origin, holder = self.origin, self.holder
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
        least, topics_of, rank, members = self.least, self.topics_of, self.rank, self.members
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

    def raise_up(self, b: int) -> bool:
        """Give ``b`` one newly given partition from a member with more, if there is one.

        Used instead of revoking an owned partition: moving a fresh one sideways keeps the
        assignment sticky, so the follow-up cooperative round has nothing left to revoke. A
        move between loads differing by one changes no load count, so each fresh partition
        moves sideways at most once (termination)."""
        load, held, owner_of, swapped = self.load, self.held, self.owner_of, self.swapped
        fresh_count, work, members = self.fresh_count, self.work, self.members
        lb = load[b]
        wanted = self.topic_sets[b]
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
        self.move(c, b, k2, 1)
        return True

    def least_load(self, k: int) -> int:
        """The load of the least loaded subscriber of topic ``k``."""
        least = self.least
        b = least[k]
        if b < 0:
            b = least[k] = self.least_of(k)
        return self.load[b]

    def settled(self, y: int, k: int) -> bool:
        """Would ``y`` stay violation-free after receiving one more partition of topic ``k``?
        (Every topic it would hold has a subscriber with at most one fewer.)"""
        least_load = self.least_load
        after = self.load[y] + 1
        if least_load(k) < after - 1:
            return False
        return all(least_load(kk) >= after - 1 for kk in self.held[y])

    def augment(self, a: int, slack: int) -> bool:
        """Lower ``a`` by one along a chain of newly given partitions ending at a member with
        ``slack`` fewer than ``a`` or less (each hop: a member passes one of its new partitions
        to an eligible member). Only new partitions move, so nothing owned is revoked. With
        slack 2 the sum of squared loads drops; with slack 1 it stays (a sideways chain), so
        those are rationed by ``budget`` to guarantee termination."""
        load, held, owner_of, subs = self.load, self.held, self.owner_of, self.subs
        fresh_count, work, settled = self.fresh_count, self.work, self.settled
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
        move = self.move
        for x, y, k in hops:
            move(x, y, k, 1)
        return True

    def lower_down(self, a: int) -> bool:
        """Hand one of ``a``'s newly given partitions to an eligible member with one fewer
        (a sideways move, at most once per partition), instead of revoking an owned one.

        Only to a member that stays violation-free with it (``settled``): otherwise the
        receiver would just revoke an owned partition in ``a``'s place, one move more."""
        load, owner_of, swapped = self.load, self.owner_of, self.swapped
        least, least_of, settled = self.least, self.least_of, self.settled
        la = load[a]
        for k, ids in self.held[a].items():
            g = ids[-1]
            if owner_of[g] == a or g in swapped:
                continue
            b = least[k]
            if b < 0:
                b = least[k] = least_of(k)
            if b != a and load[b] == la - 1 and settled(b, k):
                swapped.add(g)
                self.move(a, b, k, 1)
                return True
        return False

    def run(self) -> None:
        """Move partitions until none could move to an eligible member with 2+ fewer."""
        members, load, held, owner_of = self.members, self.load, self.held, self.owner_of
        least, least_of, least_finder = self.least, self.least_of, self.least_finder
        topics_of, budget, owned_loads = self.topics_of, self.budget, self.owned.loads
        move, augment = self.move, self.augment
        lower_down, raise_up = self.lower_down, self.raise_up
        changed = True
        while changed:
            changed = False
            # Never decreases (a move only raises the receiver), so a stale value is a safe
            # bound.
            floor_load = min((load[i] for i in range(members) if topics_of[i]), default=0)
            # Donors by current load, heaviest first (a max-heap of (-load, member)). The
            # heaviest member gives, only down to the next heaviest one's load, then goes back
            # in the heap; so partitions always leave whoever is heaviest right now. Walking a
            # fixed order instead lets a lighter member drain itself (its "next" is the
            # newcomer) while a heavier one keeps its surplus, which then has to be moved to
            # the drained member: one needless move of an owned partition per such pair.
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
                    # The smallest (owned flag, load of b, topic) among the topics a holds
                    # whose least loaded subscriber b has 2+ fewer: newly given partitions move
                    # first. Least subscribers, their loads, the flags and the minimum, all in C.
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
                    if owned_loads[a]:
                        lasts = map(_last_item, map(topics_held.__getitem__, ks))
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


def held_plan(
    layout: Layout,
    member_ids: list[str],
    owned: Owned,
    held: Held,
    fills: list[list[int]],
    fresh_count: list[int],
    touched: set[int],
    detoured: bool,
) -> Plan:
    """The plan of a group where members owned partitions: a member the rebalance left alone
    kept all it owned (its claim stands for it when whole) and gained what the fill gave it;
    a touched one is grouped from ``held``. ``detoured``: detours were taken back, which moves
    partitions without counting them in ``fresh_count``."""
    members = len(member_ids)
    owner_of = owned.owner_of
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
        if isinstance(mine_held, TopicIds):  # all given: no need to make every list
            mine = mine_held.ids()
            kept.append([])
            added.append(mine)
            continue
        ready[i], mine = grouped_held(layout, mine_held)
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
