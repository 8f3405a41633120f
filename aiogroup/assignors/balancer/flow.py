"""A minimum-cost flow for small graphs: successive shortest paths (Bellman-Ford, so costs may
be negative), integer capacities, deterministic.

The rack-aware uniform path (:mod:`~aiogroup.assignors.balancer.racks`) solves its problem on
a graph of a few dozen nodes (kinds of partition, racks), whatever the number of partitions, so
nothing cleverer is needed; each augmentation pushes as much as the path carries.
"""

from __future__ import annotations

__all__ = ["MinCostFlow"]


class MinCostFlow:
    """A directed graph with capacities and costs; :meth:`solve` sends the most flow from
    ``source`` to ``sink`` at the least cost, and :meth:`flow` reads an edge's flow."""

    __slots__ = ("_cap", "_cost", "_head", "_out", "nodes")

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self._out: list[list[int]] = [[] for _ in range(nodes)]
        self._head: list[int] = []
        self._cap: list[int] = []
        self._cost: list[int] = []

    def add(self, tail: int, head: int, capacity: int, cost: int) -> int:
        """Add an edge; returns its handle for :meth:`flow`."""
        edge = len(self._head)
        for a, b, cap, c in ((tail, head, capacity, cost), (head, tail, 0, -cost)):
            self._out[a].append(len(self._head))
            self._head.append(b)
            self._cap.append(cap)
            self._cost.append(c)
        return edge

    def flow(self, edge: int) -> int:
        """The flow sent along ``edge`` (what its reverse edge can take back)."""
        return self._cap[edge ^ 1]

    def solve(self, source: int, sink: int) -> tuple[int, int]:
        """Send the maximum flow at minimum cost; returns ``(flow, cost)``."""
        head, cap, cost, out = self._head, self._cap, self._cost, self._out
        total = spent = 0
        while True:
            # Bellman-Ford (queue-based) from the source over edges with capacity left.
            dist: list[int | None] = [None] * self.nodes
            via = [-1] * self.nodes
            dist[source] = 0
            queue = [source]
            queued = [False] * self.nodes
            queued[source] = True
            pos = 0
            while pos < len(queue):
                a = queue[pos]
                pos += 1
                queued[a] = False
                da = dist[a]
                assert da is not None
                for e in out[a]:
                    if cap[e] > 0:
                        b = head[e]
                        db = da + cost[e]
                        old = dist[b]
                        if old is None or db < old:
                            dist[b] = db
                            via[b] = e
                            if not queued[b]:
                                queued[b] = True
                                queue.append(b)
            if dist[sink] is None:
                return total, spent
            push = None
            b = sink
            while b != source:
                e = via[b]
                push = cap[e] if push is None else min(push, cap[e])
                b = head[e ^ 1]
            assert push is not None
            b = sink
            while b != source:
                e = via[b]
                cap[e] -= push
                cap[e ^ 1] += push
                b = head[e ^ 1]
            total += push
            d = dist[sink]
            assert d is not None
            spent += push * d
