"""Taking back detours: moves the plan does not need, never leaving it less balanced.

The balancer fixes each imbalance where it sees it, so a plan can route a partition through a
detour: ``x`` receives ``g`` from its owner ``y`` while ``y`` (or someone ``y`` gives to, and so
on) hands its own partitions on to others. A detour is a cycle of single-partition hops ``x ->
y -> ... -> x`` between subscribers, which changes no load. A hop costs +1 move if the giver
hands over a partition it owned, -1 if it hands one back to its owner, 0 otherwise. For given
loads, a plan moves the fewest partitions exactly when no cycle has a negative cost (the
optimality condition of min-cost circulations), so cycles through a -1 hop are applied first
(:meth:`Detours.cycles`). Then paths ``a -> ... -> b`` of negative cost, which move one unit of
load from ``a`` to ``b``: another, equally balanced split of the loads can need fewer moves
than the one the greedy pass found (:meth:`Detours.paths`). Each cycle or path is kept only if
no more partitions could then move to an eligible member with 2+ fewer (a member on it may come
to hold a new topic). Searches are Bellman-Ford (queue based) within a ``work`` budget linear
in the group's size: past it, the plan is kept as it is.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

__all__ = ["Detours", "HeldPlan", "undo_detours"]

#: A hop: (giver, receiver, topic).
Hop = tuple[int, int, int]


class HeldPlan(Protocol):
    """What the detours need of the plan's ``held``
    (:class:`~aiogroup.assignors.balancer.held.Held`, or a plan written out by hand):
    ``held[i]``, member ``i``'s partitions as ``{topic index: [ids]}``, changed in place; and
    ``members``, how many members there are."""

    @property
    def members(self) -> int: ...

    def __getitem__(self, i: int, /) -> dict[int, list[int]]: ...


def undo_detours(
    held: HeldPlan,
    owner_of: list[int],
    origin: dict[int, int],
    holder: dict[int, int],
    subs: list[list[int]],
    topic_sets: dict[int, set[int]],
    offsets: list[int],
    loads: list[int],
    work: int,
    touched: set[int],
) -> None:
    """Take back moves the plan does not need, in place (``held``, ``origin``, ``holder``;
    members whose partitions change are added to ``touched``), never leaving it less balanced.

    ``owner_of[g]``: the member that validly owns id ``g`` (see
    :class:`~aiogroup.assignors.balancer.owned.OwnedIds`); ``origin`` and ``holder``: owned
    partitions away from their owner, the owner and who holds it; ``subs[k]``: the subscribers
    of topic ``k``; ``topic_sets[i]``: the topics member ``i`` subscribes to; ``loads``: each
    member's load (not changed: the search works on a copy); ``work``: the budget.
    """
    Detours(held, owner_of, origin, holder, subs, topic_sets, loads, work, touched).run(offsets)


class Detours:
    """The state of one :func:`undo_detours`: the plan's ``held``, ``origin``, ``holder`` and
    ``touched``, changed in place as cycles and paths are applied; ``load``, a copy of the
    members' loads the paths change; ``work``, the budget left, spent by every search."""

    __slots__ = (
        "held",
        "holder",
        "load",
        "members",
        "origin",
        "owner_of",
        "subs",
        "topic_sets",
        "touched",
        "work",
    )

    def __init__(
        self,
        held: HeldPlan,
        owner_of: list[int],
        origin: dict[int, int],
        holder: dict[int, int],
        subs: list[list[int]],
        topic_sets: dict[int, set[int]],
        loads: list[int],
        work: int,
        touched: set[int],
    ) -> None:
        self.members = held.members
        self.held = held
        self.owner_of = owner_of
        self.origin = origin
        self.holder = holder
        self.subs = subs
        self.topic_sets = topic_sets
        self.work = work
        self.touched = touched
        self.load = list(loads)

    def run(self, offsets: list[int]) -> None:
        """Cycles first, then paths, while the budget lasts."""
        before = self.imbalance()
        if self.cycles(before, offsets):
            self.paths(before)

    def hops_from(self, u: int) -> Iterator[tuple[int, int, int]]:
        """(topic, receiver, cost) of every hop ``u`` can make."""
        held, owner_of, origin, subs = self.held, self.owner_of, self.origin, self.subs
        for k, ids in held[u].items():
            self.work -= len(ids)
            back: set[int] = set()
            base = 1
            for g in ids:
                if owner_of[g] != u:
                    base = 0
                    o = origin.get(g, -1)
                    if o >= 0:
                        back.add(o)
            self.work -= len(subs[k])
            for v in subs[k]:
                if v != u:
                    yield k, v, -1 if v in back else base

    def pick(self, u: int, k: int, v: int) -> int:
        """The partition of topic ``k`` that ``u`` gives ``v``: v's own, else a moved one,
        else (only then) one ``u`` owns."""
        owner_of, origin = self.owner_of, self.origin
        ids = self.held[u][k]
        moved = -1
        for g in ids:
            if owner_of[g] != u:
                if origin.get(g, -1) == v:
                    return g
                if moved < 0:
                    moved = g
        return moved if moved >= 0 else ids[0]

    def path_to(self, y: int, x: int) -> list[Hop] | None:
        """Hops (giver, receiver, topic) of a path y -> ... -> x of cost <= 0, or None."""
        members = self.members
        dist = {y: 0}
        parent: dict[int, tuple[int, int]] = {}
        relaxed = [0] * members
        queue = deque([y])
        queued = {y}
        while queue:
            u = queue.popleft()
            queued.discard(u)
            du = dist[u]
            for k, v, cost in self.hops_from(u):
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
            if self.work < 0:
                return None
        return None

    def apply(self, chosen: list[tuple[int, int, int, int]]) -> None:
        """Make each hop (giver, receiver, topic, partition), keeping origin/holder right."""
        held, owner_of, origin, holder = self.held, self.owner_of, self.origin, self.holder
        touched = self.touched
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

    def imbalance(self) -> int:
        """Partitions that could move to an eligible member with 2+ fewer."""
        held, load, subs, members = self.held, self.load, self.subs, self.members
        self.work -= len(subs) + members
        least = [min([load[v] for v in s], default=0) for s in subs]
        return sum(
            len(ids)
            for u in range(members)
            for k, ids in held[u].items()
            if load[u] - least[k] >= 2
        )

    def cycles(self, before: int, offsets: list[int]) -> bool:
        """Apply the cycles through a hop that hands a partition back to its owner, while
        ``imbalance()`` stays at ``before``. False if the budget ran out in a search (the paths
        are then not searched)."""
        origin, holder, topic_sets = self.origin, self.holder, self.topic_sets
        pick, apply = self.pick, self.apply
        tried_cycles: set[int] = set()
        improved = True
        while improved and self.work > 0:
            improved = False
            for g in sorted(holder):
                x = holder.get(g, -1)
                if x < 0 or g in tried_cycles:
                    continue  # went home with an earlier cycle, or its cycle did not fit
                y = origin[g]
                k = bisect_left(offsets, g + 1) - 1
                if k not in topic_sets[y]:
                    continue
                path = self.path_to(y, x)
                if path is None:
                    if self.work < 0:
                        return False
                    continue
                # Choose every partition first, then apply: nobody passes on what it receives
                # in the same cycle.
                chosen = [(u, v, kk, pick(u, kk, v)) for u, v, kk in path]
                chosen.append((x, y, k, g))
                apply(chosen)
                if self.imbalance() > before:
                    # A member on the cycle would hold a topic someone eligible has 2 fewer of.
                    apply([(v, u, kk, gg) for u, v, kk, gg in reversed(chosen)])
                    tried_cycles.add(g)
                    continue
                improved = True
        return True

    def paths(self, before: int) -> None:
        """Apply paths a -> ... -> b of negative cost: each moves one unit of load from a to b
        and saves a move; kept only if the plan stays as balanced as it was (a different but
        equally balanced load split can need fewer moves than the one the greedy pass
        found)."""
        load, pick, apply = self.load, self.pick, self.apply
        tried: set[tuple[Hop, ...]] = set()
        while self.work > 0:
            path = self.negative_path(tried)
            if not path:
                return
            tried.add(tuple(path))
            chosen = [(u, v, kk, pick(u, kk, v)) for u, v, kk in path]
            apply(chosen)
            a, b = path[0][0], path[-1][1]
            load[a] -= 1
            load[b] += 1
            if self.imbalance() > before:
                apply([(v, u, kk, gg) for u, v, kk, gg in reversed(chosen)])
                load[a] += 1
                load[b] -= 1

    def negative_path(self, tried: set[tuple[Hop, ...]]) -> list[Hop]:
        """Hops of a simple path of negative cost not tried yet (Bellman-Ford from each
        member in turn, heaviest first), or [] if there is none within the budget."""
        held, load, subs, members = self.held, self.load, self.subs, self.members
        topic_sets = self.topic_sets
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
                if self.work < 0:
                    return []
                u = queue.popleft()
                queued.discard(u)
                du = dist[u]
                for k, v, cost in self.hops_from(u):
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
