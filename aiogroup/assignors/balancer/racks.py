"""Rack-aware balancing (KIP-881): balance first, then rack match, then stickiness.

A partition is *matched* when it goes to a member whose rack holds one of its replicas
(:mod:`aiogroup.assignors.racks`). Java's sticky assignors put matching between balance and
stickiness, and so does this module; it is used only when Java's rule says racks can change
something (:func:`rack_view` returns ``None`` otherwise, and the balancer runs as it does
without racks).

Members of one rack are alike to a partition, and partitions whose replicas are on the same
member racks are alike to a member, so the question "which rack gets how many of which
partitions" is small however many partitions there are. It is answered by a minimum-cost flow
(:mod:`~aiogroup.assignors.balancer.flow`) from *cells* (partitions alike to everyone) to
*groups* (members alike to every partition), whose capacities are the balance and whose costs
count a matched partition above every kept one together: the number of matched partitions is
the largest the balance allows, and among those plans the one that lets members keep most of
what they own is taken. Inside a group every member matches alike: each keeps what it owns up
to its quota and its group's share of each cell (matched partitions first), and the rest of the
group's share is handed out in contiguous runs of partition-then-topic order (KAFKA-16277).

- **Equal subscriptions** (:func:`uniform_racks`): cells are the sets of member racks holding
  a replica, groups the racks (and the members without one). Every member gets ``N // M`` or
  one more, as without racks; which racks get the ``N % M`` extra partitions is part of the
  flow.
- **Unequal subscriptions** (:func:`improve_matches`): the general path balances without
  racks; the flow then keeps every member's load, cells are also split by who subscribes to
  the topic, and groups by subscription and load; a member never comes to hold a topic whose
  other subscribers have 2+ fewer partitions (the balance criterion). When that graph is too
  large (members with many different subscriptions), partitions change hands in pairs
  instead, when a swap matches more, within a work budget linear in the group's size: local
  exchanges, not always the maximum. Each step of the budget looks at a partition that can
  raise the match (the holder does not match it, or the taker does): looking at every
  swappable one spent the budget on partitions that could not, and stopped at 74% where the
  same swaps now reach 100% (bench_leader's general shape, 100k partitions, replication 2).
  Only partitions that change hands anyway (that their holder did not own) are swapped:
  stickiness before matching on this path, so that a group handed its own assignment keeps
  it and a cooperative follow-up round settles (moving owned partitions, the swaps, which
  stop short of a local optimum, found more to move every round).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Container, Sequence
from itertools import chain, filterfalse, repeat
from operator import add

from aiogroup.assignors.balancer.flow import MinCostFlow
from aiogroup.assignors.balancer.general import subscribers
from aiogroup.assignors.balancer.layout import Layout, MemberClaim, Plan
from aiogroup.assignors.balancer.uniform import hand_out, owned_by_member, quotas_for
from aiogroup.assignors.base import PartitionRacks
from aiogroup.assignors.racks import rack_aware, racks_of

__all__ = ["FLOW_EDGES", "RackView", "improve_matches", "rack_view", "uniform_racks"]

#: Unequal subscriptions take the flow while its graph has at most this many edges between
#: cells and groups; past it, the swaps.
FLOW_EDGES = 20_000

#: The swaps' work budget: this many steps per partition and member, plus a constant.
SWAP_WORK = 20


class RackView:
    """The racks of one balance: member ``i`` is in rack class ``member_class[i]`` (an index
    into ``names``, the members' racks sorted; ``len(names)`` for no rack), and partition id
    ``g`` is of kind ``kind_of[g]``, whose replicas are on the member racks
    ``kind_racks[kind]`` (other racks are left out: no member can match them)."""

    __slots__ = ("kind_of", "kind_racks", "member_class", "names")

    def __init__(
        self,
        names: list[str],
        member_class: list[int],
        kind_of: list[int],
        kind_racks: list[frozenset[int]],
    ) -> None:
        self.names = names
        self.member_class = member_class
        self.kind_of = kind_of
        self.kind_racks = kind_racks

    @property
    def classes(self) -> int:
        """Rack classes: one per rack, and the last one for members without a rack."""
        return len(self.names) + 1

    def matched(self, g: int, i: int) -> bool:
        """Whether id ``g`` held by member ``i`` is rack-matched."""
        return self.member_class[i] in self.kind_racks[self.kind_of[g]]


def rack_view(
    layout: Layout, claims: Sequence[MemberClaim], partition_racks: PartitionRacks
) -> RackView | None:
    """The racks of a balance, or ``None`` when Java's rule says rack-aware assignment changes
    nothing (:func:`aiogroup.assignors.racks.rack_aware`)."""
    racked = {c.rack for c in claims if c.rack}
    if not racked:
        return None
    per_topic = [
        racks_of(partition_racks, t, n) for t, n in zip(layout.topics, layout.counts, strict=True)
    ]
    if not rack_aware(racked, chain.from_iterable(per_topic)):
        return None
    names = sorted(racked)
    index = {name: k for k, name in enumerate(names)}
    member_class = [index[c.rack] if c.rack else len(names) for c in claims]
    # Kinds are numbered in a fixed order (sorted member racks), never in hash order: the
    # result must not depend on the process's hash seed (KAFKA-12898).
    kind_numbers: dict[frozenset[int], int] = {}
    of_set: dict[frozenset[str], frozenset[int]] = {}
    for seq in per_topic:
        for replica_racks in set(seq).difference(of_set):
            of_set[replica_racks] = frozenset(index[r] for r in replica_racks if r in index)
    for mine in sorted(set(of_set.values()), key=sorted):
        kind_numbers[mine] = len(kind_numbers)
    number = {s: kind_numbers[mine] for s, mine in of_set.items()}
    kind_of: list[int] = []
    for seq in per_topic:
        kind_of.extend(map(number.__getitem__, seq))
    return RackView(names, member_class, kind_of, list(kind_numbers))


# -- the flow and its realisation ---------------------------------------------------------------


class _Cells:
    """Partitions in cells (``cell_of[g]``, ``count[c]``) and members in groups (``group_of[i]``,
    ``members[h]``); ``matched(h, c)`` and ``eligible(h, c)`` say whether a partition of cell
    ``c`` held by a member of group ``h`` is matched, and may be held at all."""

    __slots__ = ("cell_of", "count", "eligible", "group_of", "matched", "members")

    def __init__(
        self,
        cell_of: list[int],
        cells: int,
        group_of: list[int],
        groups: int,
        matched: Callable[[int, int], bool],
        eligible: Callable[[int, int], bool],
    ) -> None:
        self.cell_of = cell_of
        counts = Counter(cell_of)
        self.count = [counts[c] for c in range(cells)]
        self.group_of = group_of
        self.members: list[list[int]] = [[] for _ in range(groups)]
        for i, h in enumerate(group_of):
            self.members[h].append(i)
        self.matched = matched
        self.eligible = eligible


def _candidates(
    layout: Layout, owned: list[list[int]], most: list[int], matched: Callable[[int, int], bool]
) -> list[list[int]]:
    """What each member could keep: its matched partitions first, at most ``most[i]`` (the
    first in partition-then-topic order when it owns more, as without racks)."""
    out: list[list[int]] = []
    for i, ids in enumerate(owned):
        mine = sorted(g for g in ids if matched(g, i))
        other = sorted(g for g in ids if not matched(g, i))
        if len(ids) > most[i]:
            mine.sort(key=layout.pt_key)
            other.sort(key=layout.pt_key)
            out.append((mine + other)[: most[i]])
        else:
            out.append(mine + other)
    return out


def _solve(
    cells: _Cells,
    candidates: list[list[int]],
    floor: list[int],
    spare: list[int],
    pool_of: list[int],
    extras: list[int],
    total: int,
) -> tuple[list[list[int]], list[list[int]], list[list[int]], list[int]]:
    """The flow from cells to groups: each member of group ``h`` takes ``floor[h]``
    partitions, and up to ``spare[h]`` of them one more, of the ``extras[pool_of[h]]`` its pool
    shares out. A member's first ``floor[h]`` candidates may be kept in its base slots, the
    next one only in a one-more slot (which the flow decides to give or not).

    Returns, per group and cell, how many its members keep in base slots, how many in one-more
    slots and how many they take in all; and per group how many one-more slots it got."""
    ncells, ngroups = len(cells.count), len(cells.members)
    cell_of = cells.cell_of
    base_own = [Counter[int]() for _ in range(ngroups)]
    more_own = [Counter[int]() for _ in range(ngroups)]
    for i, ids in enumerate(candidates):
        h = cells.group_of[i]
        base_own[h].update(map(cell_of.__getitem__, ids[: floor[h]]))
        if spare[h]:
            more_own[h].update(map(cell_of.__getitem__, ids[floor[h] : floor[h] + 1]))
    heavy = total + 1  # one matched partition outweighs every kept one together
    # Nodes: cells, groups' base slots, groups' one-more slots, pools, source, sink.
    more_at, pool_at = ncells + ngroups, ncells + 2 * ngroups
    source, sink = pool_at + len(extras), pool_at + len(extras) + 1
    graph = MinCostFlow(sink + 1)
    used = [c for c in range(ncells) if cells.count[c]]
    for c in used:
        graph.add(source, c, cells.count[c], 0)
    keeps: list[list[dict[int, int]]] = [[{} for _ in range(ngroups)] for _ in range(2)]
    moves: list[dict[int, int]] = [{} for _ in range(ngroups)]
    for h in range(ngroups):
        nodes = [ncells + h] + ([more_at + h] if spare[h] else [])
        for c in used:
            if not cells.eligible(h, c):
                continue
            match = heavy if cells.matched(h, c) else 0
            for slot, (node, own) in enumerate(
                zip(nodes, (base_own[h], more_own[h]), strict=False)
            ):
                if own[c]:
                    keeps[slot][h][c] = graph.add(c, node, own[c], -match - 1)
                moves[h][c * 2 + slot] = graph.add(c, node, cells.count[c], -match)
        graph.add(ncells + h, sink, floor[h] * len(cells.members[h]), 0)
    more_edges = [graph.add(more_at + h, pool_at + pool_of[h], spare[h], 0) for h in range(ngroups)]
    for p, extra in enumerate(extras):
        graph.add(pool_at + p, sink, extra, 0)
    sent, _ = graph.solve(source, sink)
    assert sent == total, (sent, total)
    keep_base = [[0] * ncells for _ in range(ngroups)]
    keep_more = [[0] * ncells for _ in range(ngroups)]
    take = [[0] * ncells for _ in range(ngroups)]
    for h in range(ngroups):
        for out, edges in ((keep_base, keeps[0][h]), (keep_more, keeps[1][h])):
            for c, e in edges.items():
                out[h][c] = graph.flow(e)
                take[h][c] += out[h][c]
        for key, e in moves[h].items():
            take[h][key // 2] += graph.flow(e)
    return keep_base, keep_more, take, list(map(graph.flow, more_edges))


def _realize(
    layout: Layout,
    member_ids: list[str],
    claimed: Container[int],
    cells: _Cells,
    candidates: list[list[int]],
    flows: tuple[list[list[int]], list[list[int]], list[list[int]], list[int]],
    floor: list[int],
    quotas: list[int],
) -> Plan:
    """The plan that carries out the flow (``flows``, from :func:`_solve`): members keep
    candidates within their group's keep budgets and their quota; each group's share of each
    cell that is left comes from the partitions nobody keeps, in partition-then-topic order."""
    keep_base, keep_more, take, _ = flows
    members = len(member_ids)
    cell_of = cells.cell_of
    kept: list[list[int]] = [[] for _ in range(members)]
    for h, mine in enumerate(cells.members):
        base, more, share, low = keep_base[h], keep_more[h], take[h], floor[h]
        for i in mine:
            took = kept[i]
            q = quotas[i]
            for g in candidates[i]:
                if len(took) >= q:
                    break
                c = cell_of[g]
                budget = base if len(took) < low or not more[c] else more
                if budget[c]:
                    budget[c] -= 1
                    share[c] -= 1
                    took.append(g)
    kept_ids = set(chain.from_iterable(kept))
    pool = list(filterfalse(kept_ids.__contains__, layout.pt_order()))
    pool_cells = list(map(cell_of.__getitem__, pool))
    by_cell = sorted(range(len(pool)), key=pool_cells.__getitem__)  # stable: pt order kept
    received: list[list[int]] = [[] for _ in cells.members]
    start = 0
    for c in range(len(cells.count)):
        for h, share in enumerate(take):
            n = share[c]
            if n:
                received[h].extend(by_cell[start : start + n])
                start += n
    added: list[list[int]] = [[] for _ in range(members)]
    for h, mine in enumerate(cells.members):
        given = list(map(pool.__getitem__, sorted(received[h])))
        handed = hand_out(given, [quotas[i] for i in mine], [len(kept[i]) for i in mine])
        for i, ids in zip(mine, handed, strict=True):
            added[i] = ids
    return Plan(layout, member_ids, kept, added, claimed)


def _quotas(
    cells: _Cells,
    candidates: list[list[int]],
    floor: list[int],
    got: list[int],
    quotas: list[int],
) -> None:
    """Each member's quota: its group's floor, and the one-more slots the group got to the
    members that could keep the most (as without racks), in ``quotas``."""
    for h, mine in enumerate(cells.members):
        if got[h]:
            share = floor[h] * len(mine) + got[h]
            sizes = [len(candidates[i]) for i in mine]
            for i, q in zip(mine, quotas_for(share, sizes), strict=True):
                quotas[i] = q


# -- equal subscriptions ----------------------------------------------------------------------


def uniform_racks(
    layout: Layout,
    member_ids: list[str],
    claims: list[MemberClaim],
    subscribed: list[frozenset[str]],
    view: RackView,
) -> Plan:
    """The uniform path with racks (see the module doc)."""
    owned, claimed = owned_by_member(layout, member_ids, claims, subscribed)
    members = len(member_ids)
    total = layout.total
    floor, extra = divmod(total, members)
    kind_racks = view.kind_racks
    cells = _Cells(
        view.kind_of,
        len(kind_racks),
        view.member_class,
        view.classes,
        lambda h, c: h in kind_racks[c],
        lambda h, c: True,
    )
    candidates = _candidates(layout, owned, [floor + (extra > 0)] * members, view.matched)
    sizes = list(map(len, cells.members))
    floors = [floor] * len(sizes)
    flows = _solve(cells, candidates, floors, sizes, [0] * len(sizes), [extra], total)
    quotas = [floor] * members
    _quotas(cells, candidates, floors, flows[3], quotas)
    return _realize(layout, member_ids, claimed, cells, candidates, flows, floors, quotas)


# -- unequal subscriptions --------------------------------------------------------------------


def improve_matches(
    plan: Plan,
    claims: list[MemberClaim],
    subscribed: list[frozenset[str]],
    view: RackView,
    flow_edges: int | None = None,
) -> Plan:
    """The general path's plan with as many partitions rack-matched as every member's load and
    the balance criterion allow (see the module doc); ``flow_edges`` bounds the flow's graph
    (default :data:`FLOW_EDGES`)."""
    layout = plan.layout
    member_ids = plan.member_ids
    members = len(member_ids)
    held: list[list[int]] = []
    assignments = plan.assignments()
    index, offsets = layout.index, layout.offsets
    for member_id in member_ids:
        ids: list[int] = []
        for topic, parts in assignments[member_id].items():
            ids.extend(map(add, parts, repeat(offsets[index[topic]])))
        held.append(ids)
    owned, _ = owned_by_member(layout, member_ids, claims, subscribed)
    load = list(map(len, held))
    subs, topics_of = subscribers(layout, subscribed)
    lowest = [min(map(load.__getitem__, s)) if s else 0 for s in subs]

    # Cells: topics with the same subscribers and the same lowest load, by kind.
    kinds = len(view.kind_racks)
    topic_class: dict[tuple[int, tuple[int, ...]], int] = {}
    class_of_topic = [
        topic_class.setdefault((lowest[k], tuple(s)), len(topic_class)) for k, s in enumerate(subs)
    ]
    class_subs = [frozenset(s) for _, s in topic_class]
    class_lowest = [low for low, _ in topic_class]
    cell_of: list[int] = []
    kind_of = view.kind_of
    for k, (start, count) in enumerate(zip(offsets, layout.counts, strict=True)):
        base = class_of_topic[k] * kinds
        cell_of.extend(map(add, kind_of[start : start + count], repeat(base)))
    # Groups: members of one rack class and subscription. When every load is L or L + 1,
    # which members carry the one more may change (one pool, as with equal subscriptions):
    # every topic has a subscriber at L or above, so anyone at L + 1 may hold it. Otherwise the
    # members of one subscription, at L or L + 1 (the balance criterion), may trade theirs (a
    # pool per subscription) unless some topic of theirs has a subscriber below L; and failing
    # that, loads stay as they are and groups are split by load.
    distinct: dict[frozenset[str], int] = {}
    sub_of = [distinct.setdefault(subscribed[i], len(distinct)) for i in range(members)]
    sub_loads: list[list[int]] = [[] for _ in distinct]
    for i, d in enumerate(sub_of):
        sub_loads[d].append(load[i])
    if max(load) == min(load) + 1:
        floor = [min(load)] * len(distinct)
        flexible = [True] * len(distinct)
        pool_of_sub = [0] * len(distinct)
        pool_extra = [load.count(min(load) + 1)]
    else:
        floor = [min(ls) for ls in sub_loads]
        pool_extra = [sum(x > low for x in ls) for ls, low in zip(sub_loads, floor, strict=True)]
        sub_topics = [topics_of[sub_of.index(d)] for d in range(len(distinct))]
        flexible = [
            0 < pool_extra[d] < len(sub_loads[d])
            and max(sub_loads[d]) == floor[d] + 1
            and all(floor[d] <= lowest[k] for k in sub_topics[d])
            for d in range(len(distinct))
        ]
        pool_of_sub = list(range(len(distinct)))
        pool_extra = [e if flexible[d] else 0 for d, e in enumerate(pool_extra)]
    group_key: dict[tuple[int, int, int], int] = {}
    group_of = [
        group_key.setdefault(
            (view.member_class[i], sub_of[i], -1 if flexible[sub_of[i]] else load[i]),
            len(group_key),
        )
        for i in range(members)
    ]
    groups = len(group_key)
    first = [0] * groups
    for i in reversed(range(members)):
        first[group_of[i]] = i
    kind_racks, member_class = view.kind_racks, view.member_class
    most = [floor[sub_of[i]] + 1 if flexible[sub_of[i]] else load[i] for i in range(members)]

    def eligible(h: int, c: int) -> bool:
        i = first[h]
        tc = c // kinds
        return i in class_subs[tc] and most[i] <= class_lowest[tc] + 1

    cells = _Cells(
        cell_of,
        len(topic_class) * kinds,
        group_of,
        groups,
        lambda h, c: member_class[first[h]] in kind_racks[c % kinds],
        eligible,
    )
    used = sum(1 for c in cells.count if c)
    if used * groups > (FLOW_EDGES if flow_edges is None else flow_edges):
        return _swaps(plan, held, owned, load, lowest, subs, topics_of, view)
    candidates = _candidates(layout, owned, most, view.matched)
    floors: list[int] = []
    spare: list[int] = []
    for mine in cells.members:
        d = sub_of[mine[0]]
        floors.append(floor[d] if flexible[d] else load[mine[0]])
        spare.append(len(mine) if flexible[d] else 0)
    pool_of = [pool_of_sub[sub_of[first[h]]] for h in range(groups)]
    flows = _solve(cells, candidates, floors, spare, pool_of, pool_extra, layout.total)
    quotas = [floors[group_of[i]] for i in range(members)]
    _quotas(cells, candidates, floors, flows[3], quotas)
    return _realize(layout, member_ids, plan.claimed, cells, candidates, flows, floors, quotas)


def _swaps(
    plan: Plan,
    held: list[list[int]],
    owned: list[list[int]],
    load: list[int],
    lowest: list[int],
    subs: list[list[int]],
    topics_of: list[list[int]],
    view: RackView,
) -> Plan:
    """Pairs of partitions change hands while that matches more (see the module doc)."""
    layout = plan.layout
    members = len(held)
    owner_of = [-1] * layout.total
    for i, ids in enumerate(owned):
        for g in ids:
            owner_of[g] = i
    holder = [-1] * layout.total
    for i, ids in enumerate(held):
        for g in ids:
            holder[g] = i
    topic_of = layout.topic_index_of
    member_class, kind_of, kind_racks = view.member_class, view.kind_of, view.kind_racks
    topic_sets = [frozenset(ks) for ks in topics_of]

    def may_hold(i: int, k: int) -> bool:
        return load[i] <= lowest[k] + 1

    receivers: dict[tuple[int, int], list[int]] = {}

    def takers(c: int, k: int) -> list[int]:
        found = receivers.get((c, k))
        if found is None:
            found = receivers[(c, k)] = [
                i for i in subs[k] if member_class[i] == c and may_hold(i, k)
            ]
        return found

    total = layout.total
    keyed: dict[int, list[int]] = {}

    def key(i: int, g: int) -> int:
        """Where g goes in member i's givable partitions: those i does not match first, then
        by id (one int: the id, plus ``total`` when matched)."""
        return g + total if member_class[i] in kind_racks[kind_of[g]] else g

    def keys_of(i: int) -> list[int]:
        """Member i's partitions that it did not own, by :func:`key`. What a member owns and
        still holds is never swapped: the swaps stop at a work budget, short of a local
        optimum, so moving owned partitions would let every round handed the previous one's
        result move (and, cooperatively, withhold) more, without end. Swapping only the
        partitions that change hands anyway keeps a group's own assignment as it is, and a
        cooperative follow-up round, whose only such partitions are the ones withheld and now
        released, withholds nothing. Sorted once, then kept up to date by the swaps (the loop
        asks for the same members' lists over and over)."""
        found = keyed.get(i)
        if found is None:
            found = keyed[i] = sorted(
                key(i, g) for g in held[i] if holder[g] == i and owner_of[g] != i
            )
        return found

    classes = len(view.names) + 1
    #: b * classes + ca -> b's givable partitions (keys, in order) that b does not match or
    #: rack class ca does: what b may give a member of rack ca for one of its partitions
    #: without lowering the match. Only these are looked at (each look a step of the budget),
    #: so the same swaps happen as when every givable partition was looked at, in the same
    #: order, and the budget left goes to more. Built on first use, then kept up to date.
    offered: dict[int, list[int]] = {}

    def offers(b: int, ca: int) -> list[int]:
        cb = member_class[b]
        found = offered[b * classes + ca] = [
            k
            for k in keys_of(b)
            if ca in kind_racks[kind_of[k % total]] or cb not in kind_racks[kind_of[k % total]]
        ]
        return found

    def give(i: int, g: int, j: int) -> None:
        """g goes from member i to member j."""
        holder[g] = j
        held[j].append(g)
        ki = key(i, g)
        for mine in (keyed.get(i), *map(offered.get, range(i * classes, (i + 1) * classes))):
            if mine is not None:
                at = bisect_left(mine, ki)
                if at < len(mine) and mine[at] == ki:
                    del mine[at]
        if owner_of[g] == j:
            return
        kj = key(j, g)
        theirs = keyed.get(j)
        if theirs is not None:
            insort(theirs, kj)
        cj, racks_g = member_class[j], kind_racks[kind_of[g]]
        for ca in range(classes):
            theirs = offered.get(j * classes + ca)
            if theirs is not None and (ca in racks_g or cj not in racks_g):
                insort(theirs, kj)

    work = SWAP_WORK * (layout.total + members) + 10_000
    changed = False
    for a in range(members):
        ca = member_class[a]
        wanted_a = topic_sets[a]
        for g in [k % total for k in keys_of(a)]:
            if work <= 0:
                break
            if holder[g] != a or ca in kind_racks[kind_of[g]]:
                continue
            k = topic_of[g]
            swapped = False
            for c in sorted(kind_racks[kind_of[g]]):
                for b in takers(c, k):
                    if b == a:
                        continue
                    found = offered.get(b * classes + ca)
                    if found is None:
                        found = offers(b, ca)
                    if not found:
                        # Nothing to look at: one step, as the swaps looking at every givable
                        # partition spent at least one when b had any (the same swaps happen
                        # no later), so that the budget bounds the time here too.
                        if keyed[b]:
                            work -= 1
                            if work <= 0:
                                break
                        continue
                    for kk in found:
                        work -= 1
                        h = kk % total
                        kh = topic_of[h]
                        if holder[h] == b and kh in wanted_a and may_hold(a, kh):
                            give(a, g, b)
                            give(b, h, a)
                            swapped = changed = True
                            break
                        if work <= 0:
                            break
                    if swapped or work <= 0:
                        break
                if swapped or work <= 0:
                    break
    if not changed:
        return plan
    kept: list[list[int]] = []
    added: list[list[int]] = []
    for i in range(members):
        mine = [g for g in dict.fromkeys(held[i]) if holder[g] == i]  # g may come back
        kept.append([g for g in mine if owner_of[g] == i])
        added.append([g for g in mine if owner_of[g] != i])
    return Plan(layout, plan.member_ids, kept, added, plan.claimed)
