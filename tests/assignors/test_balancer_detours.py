"""Taking back detours (:mod:`aiogroup.assignors.balancer.detours`).

A cycle of hops that hands partitions back to their owners is taken back; so is a path that
hands one back and moves a unit of load where it balances the plan. Whatever it does, it never
leaves the plan less balanced or with more moves, keeps every partition with one subscriber,
and keeps the record of owned partitions away from their owner right.
"""

from __future__ import annotations

import logging

from hypothesis import event, given, settings

from aiogroup.assignors.balancer.detours import undo_detours

from .balancer_groups import Group, filled, holdings, moved, unequal_groups, violations


class Holding(dict[int, dict[int, list[int]]]):
    """``held`` as the balancer keeps it, for a plan written by hand."""

    def __init__(self, held: dict[int, dict[int, list[int]]]) -> None:
        super().__init__(held)
        self.members = len(held)


def test_a_swap_is_taken_back() -> None:
    """Member 0 holds member 1's partition 2 and member 1 holds member 0's partition 1 (one
    topic, ids 0-3): the cycle 0 -> 1 -> 0 gives both back."""
    held = Holding({0: {0: [0, 2]}, 1: {0: [3, 1]}})
    origin, holder, touched = {2: 1, 1: 0}, {2: 0, 1: 1}, set[int]()
    loads = [2, 2]
    undo_detours(
        held, [0, 0, 1, 1], origin, holder, [[0, 1]], {0: {0}, 1: {0}}, [0], loads, 1000, touched
    )
    assert {i: sorted(held[i][0]) for i in held} == {0: [0, 1], 1: [2, 3]}
    assert origin == holder == {} and touched == {0, 1} and loads == [2, 2]


def test_a_path_gives_a_partition_back() -> None:
    """Topic 0 (ids 0-1) on members 0 and 1, topic 1 (ids 2-3) on members 1 and 2; member 1
    holds member 2's id 2 while member 2 holds nothing. The path 1 -> 2 (cost -1) hands it
    back, one move fewer and better balanced; the caller's loads are left as they were."""
    held = Holding({0: {0: [0]}, 1: {0: [1], 1: [3, 2]}, 2: {}})
    origin, holder, touched = {2: 2}, {2: 1}, set[int]()
    loads = [1, 3, 0]
    topic_sets = {0: {0}, 1: {0, 1}, 2: {1}}
    undo_detours(
        held,
        [0, 1, 2, 1],
        origin,
        holder,
        [[0, 1], [1, 2]],
        topic_sets,
        [0, 2],
        loads,
        1000,
        touched,
    )
    assert held == {0: {0: [0]}, 1: {0: [1], 1: [3]}, 2: {1: [2]}}
    assert origin == holder == {} and touched == {1, 2} and loads == [1, 3, 0]


def test_no_budget_no_change() -> None:
    held = Holding({0: {0: [0, 2]}, 1: {0: [3, 1]}})
    origin, holder = {2: 1, 1: 0}, {2: 0, 1: 1}
    undo_detours(
        held, [0, 0, 1, 1], origin, holder, [[0, 1]], {0: {0}, 1: {0}}, [0], [2, 2], 0, set()
    )
    assert held == {0: {0: [0, 2]}, 1: {0: [3, 1]}} and holder == {2: 0, 1: 1}


@settings(max_examples=300, deadline=None)
@given(unequal_groups())
def test_never_worse(group: Group) -> None:
    logging.disable(logging.WARNING)  # conflicting claims are warned about, on purpose
    try:
        state = filled(group).rebalance()
    finally:
        logging.disable(logging.NOTSET)
    moves = state.moves
    event(f"detours: {len(moves.origin) > 0}")
    before, balance = moved(state), violations(state, state.load)
    loads = list(state.load)
    undo_detours(
        state.held,
        state.owned.owner_of,
        moves.origin,
        moves.holder,
        state.subs,
        state.topic_sets,
        state.layout.offsets,
        loads,
        10_000,
        moves.touched,
    )
    assert loads == state.load  # the caller's loads: not changed
    held_by = holdings(state)
    after = [sum(map(len, state.held[i].values())) for i in range(len(loads))]
    assert sorted(held_by) == sorted(
        g for g, i in enumerate(state.filled_by) if i >= 0 or state.owned.owner_of[g] >= 0
    )
    assert moved(state) <= before and violations(state, after) <= balance
    owner_of = state.owned.owner_of
    for g, i in held_by.items():
        assert i in state.subs[state.layout.topic_index_of[g]]
        away = owner_of[g] >= 0 and owner_of[g] != i
        assert (g in moves.holder) == away
        if away:
            assert moves.holder[g] == i and moves.origin[g] == owner_of[g]
    event(f"moves saved: {before - moved(state)}")
