"""Who holds what (:mod:`aiogroup.assignors.balancer.held`), grouped lazily per member:

- ``TopicIds`` behaves as the dict of lists it stands for;
- ``Held`` groups a member as what it owns (topics ascending), then what the fill gave it
  (in fill order), whether the fill noted its runs or not;
- in a fresh group, a member's ``FilledIds`` are what the fill gave it, topic by topic;
- ``grouped_held`` is ``Layout.grouped`` of everything a member holds.
"""

from __future__ import annotations

from itertools import chain
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, fill
from aiogroup.assignors.balancer.fill import fill_fresh
from aiogroup.assignors.balancer.general import subscribers
from aiogroup.assignors.balancer.held import FilledIds, Held, TopicIds, grouped_held
from aiogroup.assignors.balancer.owned import OwnedIds

from .balancer_groups import Group, filled, unequal_groups


def test_topic_ids_behave_as_a_dict_of_lists() -> None:
    given_ids = [10, 11, 20, 30, 31, 32]
    # One run per topic: topics 1, 2, 3 with 2, 1 and 3 ids.
    lazy = TopicIds(given_ids, [1, 2, 3], [2, 1, 3])
    plain = {1: [10, 11], 2: [20], 3: [30, 31, 32]}
    assert list(lazy) == list(plain) and len(lazy) == 3 and 2 in lazy
    assert lazy[3][-1] == 32
    del lazy[3][-1:]
    del plain[3][-1:]
    lazy.setdefault(4, []).append(40)
    plain.setdefault(4, []).append(40)
    del lazy[2]
    del plain[2]
    assert sorted(lazy.ids()) == sorted(chain.from_iterable(plain.values()))
    assert lazy.get(9) is None and lazy.get(1) == [10, 11]
    assert list(lazy.items()) == list(plain.items())


@settings(max_examples=200, deadline=None)
@given(unequal_groups(), st.booleans())
def test_held_is_owned_then_given(group: Group, record: bool) -> None:
    state = filled(group, record=record)
    topic_of = state.layout.topic_index_of
    for i in range(len(group.claims)):
        mine = state.held[i]  # (marks what i owns in owner_of, if not marked yet)
        owned = [g for g, o in enumerate(state.owned.owner_of) if o == i]
        want: dict[int, list[int]] = {}
        for g in chain(owned, state.fills[i]):
            want.setdefault(topic_of[g], []).append(g)
        if not owned:
            assert isinstance(mine, TopicIds)
            assert sorted(mine.ids()) == sorted(state.fills[i])
        assert list(mine.items()) == list(want.items())


@settings(max_examples=200, deadline=None)
@given(unequal_groups(owning=False), st.booleans())
def test_filled_ids_are_what_the_fill_gave(group: Group, rows: bool) -> None:
    layout = Layout(group.counts)
    subscribed = [frozenset(c.topics) for c in group.claims]
    owned = OwnedIds(layout, [c.member_id for c in group.claims], group.claims, subscribed)
    subs, _ = subscribers(layout, subscribed)
    load = [0] * len(group.claims)
    filled_by = [-1] * layout.total
    by_level = sorted(range(len(subs)), key=lambda k: (len(subs[k]), k))
    per, anyway = (fill.ROW_BYTES_PER_PARTITION, fill.ROW_BYTES_ANYWAY) if rows else (0, 0)
    with patch.multiple(fill, ROW_BYTES_PER_PARTITION=per, ROW_BYTES_ANYWAY=anyway):
        order, marks, fill_bytes = fill_fresh(layout, subs, load, filled_by, by_level)
    assert isinstance(marks, bytearray) == rows
    held = Held(layout, owned, [[] for _ in load], order, None, (marks, fill_bytes))
    for i in range(len(load)):
        want: dict[int, list[int]] = {}
        for k in order:
            start, count = layout.offsets[k], layout.counts[k]
            ids = [g for g in range(start, start + count) if filled_by[g] == i]
            if ids:
                want[k] = ids
        assert isinstance(held[i], FilledIds)
        assert list(held[i].items()) == list(want.items())


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.data())
def test_grouped_held_is_layout_grouped(counts: list[int], data: st.DataObject) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    ids = sorted(data.draw(st.sets(st.integers(0, layout.total - 1), min_size=1)))
    held: dict[int, list[int]] = {}
    for g in data.draw(st.permutations(ids)):  # topics, and ids in a topic, in any order
        held.setdefault(layout.topic_index_of[g], []).append(g)
    assert grouped_held(layout, held) == (layout.grouped(ids), ids)
    assert list(grouped_held(layout, held)[0]) == list(layout.grouped(ids))
