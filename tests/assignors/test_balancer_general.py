"""The general path (:mod:`aiogroup.assignors.balancer.general`): unequal subscriptions.

- ``subscribers`` lists each topic's subscribers and each member's topics (shared per
  subscription);
- ``Rebalance`` leaves no partition that could move to an eligible member with 2+ fewer, and
  keeps its bookkeeping right as it moves (loads, who holds what, owned partitions away from
  their owner, how many each member holds that it did not own);
- ``general`` gives a valid, complete, balanced plan that counts its moves right.
"""

from __future__ import annotations

import logging
from collections import Counter

from hypothesis import event, given, settings

from aiogroup.assignors.balancer import Layout
from aiogroup.assignors.balancer.general import general, subscribers
from aiogroup.assignors.balancer.owned import OwnedClaims, OwnedIds

from .balancer_groups import Group, filled, holdings, unequal_groups, violations


@settings(max_examples=100, deadline=None)
@given(unequal_groups(owning=False))
def test_subscribers(group: Group) -> None:
    layout = Layout(group.counts)
    subscribed = [frozenset(c.topics) for c in group.claims]
    subs, topics_of = subscribers(layout, subscribed)
    for k, name in enumerate(layout.topics):
        assert subs[k] == [i for i, s in enumerate(subscribed) if name in s]
    for i, s in enumerate(subscribed):
        assert sorted(topics_of[i]) == sorted(layout.index[t] for t in s)
        for j in range(i):
            assert (topics_of[j] is topics_of[i]) == (subscribed[j] == s)


@settings(max_examples=200, deadline=None)
@given(unequal_groups())
def test_rebalance_keeps_its_bookkeeping(group: Group) -> None:
    logging.disable(logging.WARNING)  # conflicting claims are warned about, on purpose
    try:
        state = filled(group).rebalance()
    finally:
        logging.disable(logging.NOTSET)
    moves = state.moves
    held_by = holdings(state)  # (groups every member: owner_of is complete after)
    owner_of = state.owned.owner_of
    event(f"moves: {len(moves.touched) > 0}, detours: {len(moves.origin) > 0}")
    assert violations(state, state.load) == 0
    assert state.load == [sum(map(len, state.held[i].values())) for i in range(len(state.load))]
    assert list(Counter(held_by.values()).get(i, 0) for i in range(len(state.load))) == state.load
    for g, i in held_by.items():
        assert state.filled_by[g] == i or (state.filled_by[g] == -1 and owner_of[g] == i)
        assert i in state.subs[state.layout.topic_index_of[g]]
        away = owner_of[g] >= 0 and owner_of[g] != i
        assert (g in moves.holder) == away
        if away:
            assert moves.holder[g] == i and moves.origin[g] == owner_of[g]
    assert moves.fresh_count == [
        sum(1 for g, i in held_by.items() if i == m and owner_of[g] != m)
        for m in range(len(state.load))
    ]


@settings(max_examples=200, deadline=None)
@given(unequal_groups())
def test_general_plans_are_valid_complete_and_balanced(group: Group) -> None:
    layout = Layout(group.counts)
    member_ids = [c.member_id for c in group.claims]
    subscribed = [frozenset(c.topics) for c in group.claims]
    logging.disable(logging.WARNING)
    try:
        valid = OwnedIds(layout, member_ids, group.claims, subscribed)
        owned = OwnedClaims.of(layout, group.claims, subscribed) or OwnedIds(
            layout, member_ids, group.claims, subscribed
        )
        plan = general(layout, member_ids, subscribed, owned, {})
    finally:
        logging.disable(logging.NOTSET)
    assignments = plan.assignments()
    holder: dict[tuple[str, int], str] = {}
    for m, parts in assignments.items():
        for t, ps in parts.items():
            assert t in subscribed[member_ids.index(m)]
            for p in ps:
                assert (t, p) not in holder
                holder[(t, p)] = m
    wanted = {t for s in subscribed for t in s}
    assert set(holder) == {(t, p) for t in wanted for p in range(group.counts[t])}
    load = {m: sum(map(len, a.values())) for m, a in assignments.items()}
    for m, parts in assignments.items():
        for t in parts:
            least = min(load[o] for o, s in zip(member_ids, subscribed, strict=True) if t in s)
            assert load[m] - least <= 1, (m, t)
    moved = sum(
        1
        for (t, p), m in holder.items()
        if valid.owner_of[layout.offset_of[t] + p] != member_ids.index(m)
    )
    assert plan.moved() == moved
