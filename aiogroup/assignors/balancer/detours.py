"""Taking back detours: moves the plan does not need, never leaving it less balanced
(:func:`undo_detours`)."""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Mapping, Sequence

from aiogroup.assignors.balancer.held import Held

__all__ = ["undo_detours"]


def undo_detours(
    held: Held,
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
