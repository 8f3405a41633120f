"""The balancer's layout (:mod:`aiogroup.assignors.balancer.layout`): partitions as ids and
back, the plan's assignments, and each member's claim checked as ids.

- ``Layout.grouped`` groups ids the same way whatever path it takes;
- ``Layout.pt_order`` and ``pt_key`` order ids by partition, then topic (KAFKA-16277);
- ``Plan.assignments`` gives the same whether a member's whole claim stands for what it keeps
  or its kept ids are listed;
- ``valid_ids`` keeps exactly the valid part of a claim, whichever path it takes, and
  ``resolve`` settles partitions claimed by several members by generation.
"""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, MemberClaim, Plan
from aiogroup.assignors.balancer.claims import in_order
from aiogroup.assignors.balancer.layout import resolve, valid_ids


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


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5))
def test_partition_then_topic_order(counts: list[int]) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    want = sorted(
        range(layout.total),
        key=lambda g: (layout.part_of[g], max(k for k, o in enumerate(layout.offsets) if o <= g)),
    )
    assert layout.pt_order() == want
    assert sorted(range(layout.total), key=layout.pt_key) == want


def test_layout_of_reuses_the_last_layout_of_the_same_counts() -> None:
    first = Layout.of({"a": 3, "b": 2})
    assert Layout.of({"b": 2, "a": 3}) is first
    assert Layout.of({"a": 3, "b": 4}) is not first
    assert not Layout({"a": 3}).indexed
    layout = Layout({"a": 3})
    assert layout.topic_index_of == [0, 0, 0] and layout.indexed


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=4), st.integers(1, 4), st.data())
def test_whole_claims_assign_as_their_ids(
    counts: list[int], members: int, data: st.DataObject
) -> None:
    """A member whose whole claim stands for what it keeps (``Plan.whole``) gets the same
    assignment, in the same order, as one whose kept ids are listed; with ``ordered`` told or
    not."""
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    holder = [data.draw(st.integers(-1, members - 1)) for _ in range(layout.total)]
    kept_by = [data.draw(st.booleans()) for _ in range(layout.total)]
    rnd = random.Random(data.draw(st.integers(0, 1000)))
    kept: list[list[int]] = [[] for _ in range(members)]
    added: list[list[int]] = [[] for _ in range(members)]
    whole: list[dict[str, tuple[int, ...]] | None] = []
    for g, (i, keep) in enumerate(zip(holder, kept_by, strict=True)):
        if i >= 0:
            (kept if keep else added)[i].append(g)
    for i in range(members):
        claim: dict[str, list[int]] = {}
        for g in kept[i]:
            k = max(k for k, o in enumerate(layout.offsets) if o <= g)
            claim.setdefault(layout.topics[k], []).append(g - layout.offsets[k])
        items = list(claim.items())
        rnd.shuffle(items)
        whole.append({t: tuple(rnd.sample(ps, len(ps))) for t, ps in items} or None)
    ordered = [w is not None and in_order(w, [len(ps) for ps in w.values()]) for w in whole]
    want = Plan(layout, [f"m{i}" for i in range(members)], kept, added, set()).assignments()
    ids = [f"m{i}" for i in range(members)]
    no_kept: list[list[int]] = [[] for _ in range(members)]
    for told in (ordered, [False] * members):
        got = Plan(layout, ids, no_kept, added, set(), whole, told).assignments()
        assert [(m, list(a.items())) for m, a in got.items()] == [
            (m, list(a.items())) for m, a in want.items()
        ]


def reference_ids(
    layout: Layout, claim: dict[str, object], subscribed: frozenset[str]
) -> tuple[list[int], list[int]]:
    """What a claim validly holds, one partition at a time: ints only, of an existing
    partition, the first time it is listed; of a subscribed topic (valid) or not (foreign)."""
    valid: list[int] = []
    foreign: list[int] = []
    seen: set[int] = set()
    for topic, parts in claim.items():
        k = layout.index.get(topic)
        if not isinstance(parts, tuple | list):
            continue
        for p in parts:
            if not isinstance(p, int) or k is None or not 0 <= p < layout.counts[k]:
                continue
            g = layout.offsets[k] + int(p)
            if g not in seen:
                seen.add(g)
                (valid if topic in subscribed else foreign).append(g)
    return valid, foreign


partition = st.one_of(st.integers(-1, 6), st.sampled_from([True, "1", 1.0]))
claims = st.dictionaries(
    st.sampled_from(["a", "b", "c", "ghost"]),
    st.one_of(
        st.lists(st.integers(0, 5), max_size=4, unique=True).map(tuple),
        st.lists(partition, max_size=4).map(tuple),
        st.lists(st.integers(-1, 6), max_size=3),
        st.just(7),
    ),
    max_size=4,
)


@settings(max_examples=400, deadline=None)
@given(claims, st.sets(st.sampled_from(["a", "b", "c"])))
def test_valid_ids_keep_the_valid_part(claim: dict[str, object], topics: set[str]) -> None:
    """Plain claims take the C-level path, anything else the careful one: both keep exactly
    the valid partitions, in the claim's order, and the existing ones of other topics."""
    logging.disable(logging.WARNING)  # bad claims are warned about, on purpose
    try:
        layout = Layout({"a": 3, "b": 6, "c": 1})
        subscribed = frozenset(topics)
        got = valid_ids(layout, MemberClaim("m", sorted(topics), claim), subscribed)  # type: ignore[arg-type]
    finally:
        logging.disable(logging.NOTSET)
    assert got == reference_ids(layout, claim, subscribed)


def test_valid_ids_warn_about_bad_claims(caplog: pytest.LogCaptureFixture) -> None:
    layout = Layout({"a": 3})
    claim = MemberClaim("m", ["a"], {"a": (0, 0, 5, -1), "ghost": (0,)})
    with caplog.at_level(logging.DEBUG, logger="aiogroup.assignors"):
        assert valid_ids(layout, claim, frozenset({"a"})) == ([0], [])
    levels = {r.getMessage().split(" ignored")[0]: r.levelno for r in caplog.records}
    assert [lv for m, lv in levels.items() if "listed twice" in m] == [logging.WARNING]
    assert [lv for m, lv in levels.items() if "do not exist" in m] == [logging.WARNING]
    # Legal: every member handing off at once (a whole service stopping) leaves nobody
    # subscribed to the topic they still own.
    assert [lv for m, lv in levels.items() if "no member subscribes" in m] == [logging.DEBUG]


def test_resolve_by_generation(caplog: pytest.LogCaptureFixture) -> None:
    """The highest generation keeps a partition claimed twice; at equal highest generations
    nobody does."""
    owned = [[0, 1], [1, 2], [2, 3]]
    resolve(["a", "b", "c"], [1, 2, 2], owned)
    assert owned == [[0], [1], [3]]
    stale = [r.getMessage() for r in caplog.records if "higher generation" in r.getMessage()]
    ties = [r.getMessage() for r in caplog.records if "same generation" in r.getMessage()]
    assert len(stale) == 1 and "'a'" in stale[0]
    assert len(ties) == 2 and "'b'" in ties[0] and "'c'" in ties[1]
