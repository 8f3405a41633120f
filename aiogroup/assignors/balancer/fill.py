"""The fill: free partitions handed to the least loaded subscriber, most constrained topics
first.

- :func:`water_fill` hands one topic's free partitions out in bulk, in exactly the order
  popping a heap of ``(load, member)`` would give.
- :func:`fill_unowned`: the fill of a group where members own partitions (or some are hinted):
  hinted partitions to the member they were meant for, the rest water-filled.
- :func:`fill_fresh`: the fill of a fresh group (nobody owned anything, nothing hinted), which
  writes nothing per member: who holds each id (one list) and, in :class:`FillBytes`, the
  receivers of each topic as machine integers that ``bytearray.find`` searches.
- :func:`fresh_plan`: a fresh group's plan, built topic by topic from who holds each id.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections import Counter, defaultdict, deque
from collections.abc import Container, Mapping, Sequence
from itertools import compress, repeat
from operator import setitem

from aiogroup.assignors.balancer.layout import Layout, Plan
from aiogroup.assignors.balancer.owned import Owned

__all__ = [
    "ROW_BYTES_ANYWAY",
    "ROW_BYTES_PER_PARTITION",
    "FillBytes",
    "fill_fresh",
    "fill_unowned",
    "fresh_plan",
    "water_fill",
]


def water_fill(free: Sequence[int], subscribers: list[int], load: list[int]) -> list[int]:
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


#: The byte rows of :func:`fill_fresh` are used while they take at most this many bytes per
#: partition, plus the allowance below; otherwise a set per topic.
ROW_BYTES_PER_PARTITION = 8
ROW_BYTES_ANYWAY = 1 << 20


def fill_fresh(
    layout: Layout,
    subs: list[list[int]],
    load: list[int],
    filled_by: list[int],
    by_level: list[int],
) -> tuple[list[int], bytearray | list[set[int]], FillBytes]:
    """The fill of a group where nobody owned anything (every partition free, nothing
    hinted): each topic in ``by_level`` order handed out by :func:`water_fill`, its holders
    written to ``filled_by`` and to a :class:`FillBytes`.

    Returns the topics filled, in order; who received partitions of each (a row of one byte
    per member per topic, laid end to end, so that member ``i``'s column is one C-level
    slice; or a set per topic when the rows would take more memory than eight bytes per
    partition); and the :class:`FillBytes`."""
    members = len(load)
    filling = [k for k in by_level if subs[k]]
    marks: bytearray | list[set[int]]
    rows = members * len(filling) <= ROW_BYTES_PER_PARTITION * layout.total + ROW_BYTES_ANYWAY
    marks = bytearray() if rows else []
    fill = FillBytes(members, layout.total)
    for k in filling:
        start, count = layout.offsets[k], layout.counts[k]
        receivers = water_fill(range(start, start + count), subs[k], load)
        filled_by[start : start + count] = receivers
        fill.write(start, receivers)
        if isinstance(marks, bytearray):
            row = bytearray(members)
            deque(map(setitem, repeat(row), receivers, repeat(1)), 0)
            marks += row
        else:
            marks.append(set(receivers))
    return filling, marks, fill


def fill_unowned(
    layout: Layout,
    owned: Owned,
    subscribed: list[frozenset[str]],
    subs: list[list[int]],
    hinted: Mapping[int, int],
    load: list[int],
    filled_by: list[int],
    fills: list[list[int]],
    by_level: list[int],
) -> tuple[list[int] | None, list[Counter[int]] | None]:
    """The fill of a group where members own partitions, or some are hinted: each topic in
    ``by_level`` order, its partitions nobody validly owns (``owned.free``) to the member a
    previous plan meant them for (``hinted``) if it subscribes to the topic, the rest by
    :func:`water_fill` to the topic's subscribers (``subs``). Who holds each id is written to
    ``filled_by``, what each member was given (in the order given) to ``fills``, and ``load``
    is raised accordingly.

    Returns, per topic given out (in fill order), how many partitions each member got (a
    Counter of the receivers, so the fill writes nothing per member): noted when topics have
    two partitions or more per subscriber on average (each member is then given several of a
    topic, and grouping a touched member from these saves a topic lookup per partition);
    otherwise members get one partition of a topic or none, few are touched, and looking their
    partitions' topics up costs less (``None, None``).
    """
    offsets, counts = layout.offsets, layout.counts
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
        receivers = water_fill(free, subs[k], load)
        if len(free) == counts[k]:
            filled_by[offsets[k] : offsets[k] + counts[k]] = receivers
        else:
            deque(map(setitem, repeat(filled_by), free, receivers), 0)
        # fills[i].append(g) for each partition given, in C.
        deque(map(list.append, map(fills.__getitem__, receivers), free), 0)
        if fill_order is not None and fill_runs is not None:
            fill_order.append(k)
            fill_runs.append(Counter(given + receivers if given else receivers))
    return fill_order, fill_runs


class FillBytes:
    """Who the fill gave each id to, as fixed-width machine integers laid end to end (one
    ``array`` item per id), so the ids a member was given in a topic are found with
    ``bytearray.find`` (C-level, a few bytes a nanosecond) instead of comparing every id's
    holder as a Python int. Written once per topic by the fill; moves do not change it (see
    :class:`~aiogroup.assignors.balancer.held.FilledIds`)."""

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


def fresh_plan(
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
