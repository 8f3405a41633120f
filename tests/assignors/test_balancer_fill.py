"""The fill (:mod:`aiogroup.assignors.balancer.fill`), each part against the plain code it
stands for or the rules it follows:

- ``water_fill`` hands a topic's free partitions out as popping a heap of ``(load, member)``;
- ``fill_unowned`` gives hinted partitions to their member when it subscribes, every other
  free partition to a subscriber, and notes what it gave consistently;
- the fill of a group where nobody owned anything (``fill_fresh``, with ``FilledIds`` finding
  a member's partitions only when a move needs them) plans exactly as the general fill does;
- ``FillBytes`` finds what the fill gave a member;
- ``fresh_plan`` groups each member's partitions from who holds each id.
"""

from __future__ import annotations

import heapq
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, MemberClaim, balance, fill
from aiogroup.assignors.balancer.fill import FillBytes, fresh_plan, water_fill

from .balancer_groups import Group, filled, unequal_groups


def heap_fill(free: list[int], subscribers: list[int], load: list[int]) -> list[int]:
    """The loop water_fill replaces: each partition to the least loaded, lowest index."""
    heap = [(load[i], i) for i in subscribers]
    heapq.heapify(heap)
    receivers = []
    for _ in free:
        n, i = heap[0]
        receivers.append(i)
        heapq.heapreplace(heap, (n + 1, i))
    for n, i in heap:
        load[i] = n
    return receivers


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=1, max_size=12),
    st.data(),
)
def test_water_fill_is_the_heap(loads: list[int], data: st.DataObject) -> None:
    members = list(range(len(loads)))
    subscribers = sorted(data.draw(st.lists(st.sampled_from(members), min_size=1, unique=True)))
    free = list(range(100, 100 + data.draw(st.integers(1, 40))))
    want_load, got_load = list(loads), list(loads)
    want = heap_fill(free, subscribers, want_load)
    assert water_fill(free, subscribers, got_load) == want
    assert got_load == want_load


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=2, max_size=6), st.booleans(), st.data())
def test_a_fresh_group_plans_as_the_general_fill_would(
    counts: list[int], rows: bool, data: st.DataObject
) -> None:
    """Nobody owns anything: the fill that writes nothing per member gives the same plan as
    the general fill, which a hint forces (a hint for a topic its member does not subscribe
    to is ignored by that fill, so it changes nothing else). Both ways of noting who received
    partitions of a topic: byte rows, and the sets used when rows would take too much memory."""
    ppt = {f"t{k}": n for k, n in enumerate(counts)}
    names = sorted(ppt)
    size = data.draw(st.integers(2, 12))
    subs = [
        data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True)) for _ in range(size)
    ]
    outside = [(m, t) for m, ts in enumerate(subs) for t in names if t not in ts]
    if not outside:  # everyone on every topic: the uniform path, not this one
        subs[0] = names[:1]
        outside = [(0, t) for t in names[1:]]
    m, topic = data.draw(st.sampled_from(outside))
    claims = [MemberClaim(f"m{i:02d}", ts) for i, ts in enumerate(subs)]
    per, anyway = (fill.ROW_BYTES_PER_PARTITION, fill.ROW_BYTES_ANYWAY) if rows else (0, 0)
    with patch.multiple(fill, ROW_BYTES_PER_PARTITION=per, ROW_BYTES_ANYWAY=anyway):
        plain = balance(ppt, claims)
    forced = balance(ppt, claims, hint={(topic, 0): f"m{m:02d}"})
    assert plain.assignments() == forced.assignments()
    assert plain.moved() == forced.moved()


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([3, 300, 70_000]), st.data())
def test_fill_bytes_find_what_the_fill_gave(members: int, data: st.DataObject) -> None:
    """One, two or four bytes per id; a member's bytes may also appear across two ids (the
    high byte of one and the low byte of the next), which is not a match."""
    values = [v for v in (0, 1, 2, 255, 256, 257, 65_535, 65_536, members - 1) if v < members]
    receivers = data.draw(st.lists(st.sampled_from(values), min_size=1, max_size=40))
    fill = FillBytes(members, len(receivers) + 5)
    fill.write(5, receivers)
    for i in set(receivers):
        start = data.draw(st.integers(5, 5 + len(receivers)))
        end = data.draw(st.integers(start, 5 + len(receivers)))
        want = [5 + j for j, r in enumerate(receivers) if r == i and start <= 5 + j < end]
        assert fill.given(i, start, end) == want


@settings(max_examples=200, deadline=None)
@given(unequal_groups(), st.data())
def test_fill_unowned_gives_out_every_free_partition(group: Group, data: st.DataObject) -> None:
    layout = Layout(group.counts)
    members = len(group.claims)
    hinted = {
        data.draw(st.integers(0, layout.total - 1)): data.draw(st.integers(0, members - 1))
        for _ in range(data.draw(st.integers(0, 4)))
    }
    state = filled(group, hinted)
    owned, subs = state.owned, state.subs
    for k in range(len(layout.topics)):
        if not subs[k]:
            continue
        for g in owned.free(k):
            i = hinted.get(g, -1)
            if i >= 0 and layout.topics[k] in state.subscribed[i]:
                assert state.filled_by[g] == i  # its hinted member first
            else:
                assert state.filled_by[g] in subs[k]
    given_to = [[g for g, i in enumerate(state.filled_by) if i == m] for m in range(members)]
    assert [sorted(ids) for ids in state.fills] == given_to
    assert state.load == [n + len(ids) for n, ids in zip(owned.loads, state.fills, strict=True)]
    topic_of = layout.topic_index_of
    for ids in state.fills:  # one run per topic
        runs = [
            topic_of[g] for j, g in enumerate(ids) if j == 0 or topic_of[ids[j - 1]] != topic_of[g]
        ]
        assert len(runs) == len(set(runs))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(1, 4), st.data())
def test_fresh_plan_groups_by_holder(counts: list[int], members: int, data: st.DataObject) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    holder = [data.draw(st.integers(-1, members - 1)) for _ in range(layout.total)]
    ids = [f"m{i}" for i in range(members)]
    want: dict[str, dict[str, tuple[int, ...]]] = {m: {} for m in ids}
    for g, i in enumerate(holder):
        if i >= 0:
            k = max(k for k, o in enumerate(layout.offsets) if o <= g)
            mine = want[ids[i]]
            mine[layout.topics[k]] = (*mine.get(layout.topics[k], ()), g - layout.offsets[k])
    assigned = sum(1 for i in holder if i >= 0)
    for claimed in (set(), {0}):  # nothing to withhold: no ids; else every id given, listed
        plan = fresh_plan(layout, ids, holder, claimed)
        got = plan.assignments()
        assert [(m, list(a.items())) for m, a in got.items()] == [
            (m, list(a.items())) for m, a in want.items()
        ]
        assert plan.moved() == assigned
        if claimed:
            assert plan.added == [
                [g for g, j in enumerate(holder) if j == i] for i in range(members)
            ]
