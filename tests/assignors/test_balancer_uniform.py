"""The uniform path (:mod:`aiogroup.assignors.balancer.uniform`): equal subscriptions.

- ``quotas_for`` gives ``N // M`` each and ``N % M`` one more, first to members owning more;
- ``hand_out`` fills each member up to its quota from one pool, in member order;
- ``free_in_pt_order`` lists the free and dropped ids in partition-then-topic order;
- ``uniform_by_topic`` (whole claims) plans exactly as ``uniform_by_member`` (ids) does, and
  declines what it cannot take.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import ClaimIndex, Layout, MemberClaim
from aiogroup.assignors.balancer.uniform import (
    free_in_pt_order,
    hand_out,
    quotas_for,
    uniform_by_member,
    uniform_by_topic,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.lists(st.integers(0, 60), min_size=1, max_size=12))
def test_quotas(total: int, sizes: list[int]) -> None:
    quotas = quotas_for(total, sizes)
    floor, extra = divmod(total, len(sizes))
    assert sum(quotas) == total and set(quotas) <= {floor, floor + 1}
    # The one-more slots: members owning more than the floor first, then the others, each
    # in member order.
    order = [i for i, n in enumerate(sizes) if n > floor] + [
        i for i, n in enumerate(sizes) if n <= floor
    ]
    assert [i for i, q in enumerate(quotas) if q > floor] == sorted(order[:extra])


def test_hand_out() -> None:
    pool = [10, 11, 12, 13, 14]
    assert hand_out(pool, [2, 3, 2], [1, 0, 2]) == [[10], [11, 12, 13], []]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=4), st.data())
def test_free_in_pt_order(counts: list[int], data: st.DataObject) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    claimed = sorted(data.draw(st.sets(st.integers(0, layout.total - 1))))
    dropped = sorted(data.draw(st.sets(st.sampled_from(claimed)))) if claimed else []
    claims: dict[str, tuple[int, ...]] = {}
    for g in claimed:
        k = max(k for k, o in enumerate(layout.offsets) if o <= g)
        claims[layout.topics[k]] = (*claims.get(layout.topics[k], ()), g - layout.offsets[k])
    free = [g for g in range(layout.total) if g not in claimed]
    want = sorted(free + dropped, key=layout.pt_key)
    assert free_in_pt_order(layout, ClaimIndex([claims]), dropped) == want


@st.composite
def equal_groups(draw: st.DrawFn) -> tuple[Layout, list[MemberClaim], frozenset[str]]:
    """Members on every topic, claiming distinct existing partitions (tuples, random order),
    sometimes more than their quota."""
    counts = {f"t{k}": draw(st.integers(1, 12)) for k in range(draw(st.integers(1, 4)))}
    layout = Layout(counts)
    size = draw(st.integers(1, 7))
    rnd = random.Random(draw(st.integers(0, 10_000)))
    share = draw(st.sampled_from([0.0, 0.5, 0.9, 1.0]))
    owned: list[dict[str, list[int]]] = [{} for _ in range(size)]
    for topic, count in counts.items():
        for p in range(count):
            if rnd.random() < share:
                owned[rnd.randrange(size)].setdefault(topic, []).append(p)
    topics = sorted(counts)
    claims = [
        MemberClaim(f"m{i}", topics, {t: tuple(rnd.sample(ps, len(ps))) for t, ps in mine.items()})
        for i, mine in enumerate(owned)
    ]
    return layout, claims, frozenset(topics)


@settings(max_examples=300, deadline=None)
@given(equal_groups())
def test_by_topic_plans_as_by_member(
    group: tuple[Layout, list[MemberClaim], frozenset[str]],
) -> None:
    layout, claims, subscribed = group
    member_ids = [c.member_id for c in claims]
    fast = uniform_by_topic(layout, member_ids, claims, subscribed)
    slow = uniform_by_member(layout, member_ids, claims, [subscribed] * len(claims))
    assert fast is not None
    got, want = fast.assignments(), slow.assignments()
    assert [(m, list(a.items())) for m, a in got.items()] == [
        (m, list(a.items())) for m, a in want.items()
    ]
    assert fast.moved() == slow.moved()
    for g in range(layout.total):
        assert (g in fast.claimed) == (g in slow.claimed)
    loads = sorted(sum(map(len, a.values())) for a in got.values())
    assert loads[-1] - loads[0] <= 1 and sum(loads) == layout.total


def test_by_topic_declines_what_is_not_plain() -> None:
    layout = Layout({"t": 4})
    subscribed = frozenset({"t"})
    for owned in ({"t": (0, 0)}, {"t": [0]}, {"t": (9,)}, {"u": (0,)}):
        claims = [MemberClaim("a", ["t"], owned), MemberClaim("b", ["t"])]
        assert uniform_by_topic(layout, ["a", "b"], claims, subscribed) is None, owned
    twice = [MemberClaim("a", ["t"], {"t": (0,)}), MemberClaim("b", ["t"], {"t": (0,)})]
    assert uniform_by_topic(layout, ["a", "b"], twice, subscribed) is None


def test_by_member_settles_a_conflict_by_generation() -> None:
    layout = Layout({"t": 4})
    claims = [
        MemberClaim("a", ["t"], {"t": (0, 1)}, 1),
        MemberClaim("b", ["t"], {"t": (1, 2)}, 2),
    ]
    plan = uniform_by_member(layout, ["a", "b"], claims, [frozenset({"t"})] * 2)
    assert plan.kept == [[0], [1, 2]]
    assert plan.assignments() == {"a": {"t": (0, 3)}, "b": {"t": (1, 2)}}
    assert plan.moved() == 1 and 1 in plan.claimed and 3 not in plan.claimed
