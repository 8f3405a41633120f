"""The pieces the balancer uses at scale, each against the plain code it stands for.

At a million partitions the sticky balancer replaces per-partition loops with bulk steps; each
must answer exactly as the loop would, or the plan changes:

- ``water_fill`` hands a topic's free partitions out as popping a heap of ``(load, member)``;
- ``LeastLoaded`` finds the least loaded subscriber of a topic (lowest index on ties) from bit
  sets, and whether a lighter member shares a topic with a donor;
- ``ClaimIndex`` answers claimed / distinct / regular / within / plain / unclaimed per topic;
- ``TopicIds`` behaves as the dict of lists it stands for;
- the fill of a group where nobody owned anything (``fill_fresh``, with ``FilledIds`` finding
  a member's partitions only when a move needs them) plans exactly as the general fill does;
- ``Layout.grouped`` groups ids the same way whatever path it takes, and ``in_order`` says
  whether a claim is sorted.
"""

from __future__ import annotations

import heapq
from itertools import chain
from unittest.mock import patch

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import ClaimIndex, Layout, MemberClaim, balance, fill
from aiogroup.assignors.balancer.claims import in_order
from aiogroup.assignors.balancer.fill import FillBytes, water_fill
from aiogroup.assignors.balancer.held import TopicIds
from aiogroup.assignors.balancer.least import LeastLoaded


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


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_least_loaded_is_the_minimum(data: st.DataObject) -> None:
    members = data.draw(st.integers(1, 10))
    ntopics = data.draw(st.integers(1, 6))
    topics_of = [
        data.draw(st.lists(st.integers(0, ntopics - 1), unique=True)) for _ in range(members)
    ]
    subs = [[i for i in range(members) if k in topics_of[i]] for k in range(ntopics)]
    load = data.draw(st.lists(st.integers(0, 5), min_size=members, max_size=members))
    finder = LeastLoaded(members, subs, load, topics_of)
    for _ in range(data.draw(st.integers(0, 8))):
        i = data.draw(st.integers(0, members - 1))
        new = max(0, load[i] + data.draw(st.integers(-2, 2)))
        finder.moved(i, load[i], new)
        load[i] = new
        for k in range(ntopics):
            want = min(((load[m], m) for m in subs[k]), default=(0, -1))[1]
            assert finder.least_of(k) == want
    for a in range(members):
        for limit in range(-1, 7):
            near = {m for k in topics_of[a] for m in subs[k]}
            want_near = any(load[m] <= limit for m in near)
            finder2 = LeastLoaded(members, subs, list(load), topics_of)
            assert finder2.lighter_near(a, limit) == want_near


claims = st.dictionaries(
    st.sampled_from("abc"), st.lists(st.integers(-1, 6), max_size=4).map(tuple), max_size=3
)


@settings(max_examples=300, deadline=None)
@given(st.lists(claims, max_size=5))
def test_claim_index_answers_as_the_claims_do(maps: list[dict[str, tuple[int, ...]]]) -> None:
    index = ClaimIndex(maps)
    for topic in "abcd":
        every = [p for m in maps for p in m.get(topic, ())]
        assert sorted(index.claims.get(topic, [])) == sorted(every)
        assert index.distinct(topic) == (len(set(every)) == len(every))
        assert index.regular(topic) == (len(set(every)) == len(every))
        for p in range(-2, 8):
            assert index.claimed(topic, p) == (p in every)
        if index.regular(topic):
            count = 7
            assert index.within(topic, count) == all(0 <= p < count for p in every)
            if index.within(topic, count):
                want = [p for p in range(count) if p not in every]
                assert index.unclaimed(topic, count) == want


@settings(max_examples=300, deadline=None)
@given(st.lists(claims, max_size=5), st.integers(1, 9), st.booleans())
def test_plain_is_regular_and_within(
    maps: list[dict[str, tuple[int, ...]]], count: int, large: bool
) -> None:
    """``plain`` answers as ``regular`` and ``within`` together, and once a topic is found
    plain, the index still answers every other question as the claims do (from the partitions
    nobody claims). ``large``: a topic of far more partitions than claims (the other way)."""
    if large:
        count += 1000
    index = ClaimIndex(maps)
    for topic in "abcd":
        every = [p for m in maps for p in m.get(topic, ())]
        want = len(set(every)) == len(every) and all(0 <= p < count for p in every)
        assert ClaimIndex(maps).plain(topic, count) == want
        assert index.plain(topic, count) == want
        assert index.distinct(topic) == (len(set(every)) == len(every))
        for p in range(-2, count + 2):
            assert index.claimed(topic, p) == (p in every)
        if want:
            assert index.within(topic, count) and index.regular(topic)
            assert index.unclaimed(topic, count) == [p for p in range(count) if p not in every]


def test_plain_refuses_what_is_not_an_int() -> None:
    index = ClaimIndex([{"a": (True, 2)}, {"b": (1.0,)}, {"c": (1, 2)}])
    assert not index.plain("a", 3) and not index.plain("b", 3) and index.plain("c", 3)
    assert index.claimed("c", 1) and index.claimed("c", True) and not index.claimed("c", 0)


def test_claim_index_refuses_what_is_not_an_int() -> None:
    index = ClaimIndex([{"a": (True, 2)}, {"b": (1.0,)}, {"c": (1, 2)}])
    assert not index.regular("a") and not index.regular("b") and index.regular("c")


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
@given(st.lists(st.integers(1, 5), min_size=1, max_size=6), st.data())
def test_grouped_paths_agree(counts: list[int], data: st.DataObject) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    ids = sorted(data.draw(st.sets(st.integers(0, layout.total - 1))))
    want: dict[str, list[int]] = {}
    for g in ids:
        k = max(k for k, o in enumerate(layout.offsets) if o <= g)
        want.setdefault(layout.topics[k], []).append(g - layout.offsets[k])
    expected = {t: tuple(ps) for t, ps in want.items()}
    assert layout.grouped(ids) == expected
    assert list(layout.grouped(ids)) == list(expected)
    names = [layout.topics[max(k for k, o in enumerate(layout.offsets) if o <= g)] for g in ids]
    if ids:
        assert layout._cut(ids, names) == expected
    assert Layout({f"t{k}": n for k, n in enumerate(counts)})._grouped_few(ids) == expected


@given(claims.filter(bool))
def test_in_order(claim: dict[str, tuple[int, ...]]) -> None:
    clean = {t: tuple(dict.fromkeys(ps)) for t, ps in claim.items()}  # no partition twice
    lens = [len(ps) for ps in clean.values()]
    want = (
        bool(lens)
        and 0 not in lens
        and list(clean) == sorted(clean)
        and all(list(ps) == sorted(ps) for ps in clean.values())
    )
    assert in_order(clean, lens) == want


def test_in_order_with_tuples_longer_than_a_byte() -> None:
    """Lengths of 256 or more cannot be a bytes mask: the other way gives the same answer."""
    long = tuple(range(300))
    assert in_order({"a": long, "b": (3, 5, 9)}, [300, 3])
    assert not in_order({"a": long, "b": (3, 9, 5)}, [300, 3])
    assert not in_order({"a": (*long[:-2], 299, 298), "b": (3, 5, 9)}, [300, 3])
    assert not in_order({"a": (3, 9, 5), "b": (1,)}, [3, 1])


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
