"""What each member validly owns (:mod:`aiogroup.assignors.balancer.owned`).

``OwnedClaims`` (plainly valid claims, checked per topic) must answer every question the
general path asks exactly as ``OwnedIds`` (member by member) does: loads, ids, free ids per
topic, who owns each id, which ids are claimed, whole claims and whether they are sorted. And
it must decline anything that is not plainly valid, which ``OwnedIds`` then handles.
"""

from __future__ import annotations

import logging
import random
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, MemberClaim
from aiogroup.assignors.balancer.owned import OwnedClaims, OwnedIds
from aiogroup.protocol.types import PartitionsByTopic


@st.composite
def plain_groups(
    draw: st.DrawFn,
) -> tuple[Layout, list[MemberClaim], list[frozenset[str]]]:
    """Members on random subsets of the topics, each claiming distinct existing partitions of
    its own topics (in tuples, in random order), nobody a partition twice."""
    counts = {f"t{k}": draw(st.integers(1, 10)) for k in range(draw(st.integers(1, 5)))}
    layout = Layout(counts)
    names = sorted(counts)
    size = draw(st.integers(1, 6))
    subscribed = [
        frozenset(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        for _ in range(size)
    ]
    rnd = random.Random(draw(st.integers(0, 10_000)))
    owned: list[dict[str, list[int]]] = [{} for _ in range(size)]
    for topic, count in counts.items():
        takers = [i for i in range(size) if topic in subscribed[i]]
        for p in range(count):
            if takers and rnd.random() < 0.7:
                owned[rnd.choice(takers)].setdefault(topic, []).append(p)
    claims = []
    for i, mine in enumerate(owned):
        items = list(mine.items())
        if rnd.random() < 0.5:
            rnd.shuffle(items)
        claim = {t: tuple(rnd.sample(ps, len(ps)) if rnd.random() < 0.3 else ps) for t, ps in items}
        claims.append(MemberClaim(f"m{i}", sorted(subscribed[i]), claim, 1))
    return layout, claims, subscribed


@settings(max_examples=300, deadline=None)
@given(plain_groups())
def test_owned_claims_answer_as_owned_ids(
    group: tuple[Layout, list[MemberClaim], list[frozenset[str]]],
) -> None:
    layout, claims, subscribed = group
    view = OwnedClaims.of(layout, claims, subscribed)
    ref = OwnedIds(layout, [c.member_id for c in claims], claims, subscribed)
    assert view is not None
    assert view.loads == ref.loads
    assert view.whole == ref.whole and view.ordered == ref.ordered
    for k in range(len(layout.topics)):
        assert view.free(k) == ref.free(k)
    for g in range(-1, layout.total + 1):
        assert (g in view.claimed) == (g in ref.claimed)
    for i in range(len(claims)):
        assert view.ids(i) == ref.ids(i)
    assert view.owner_of == ref.owner_of  # complete once every member's ids were asked for


@pytest.mark.parametrize(
    ("claims", "loads"),
    [
        ([MemberClaim("a", ["t"], {"t": (0,), "u": (1,)})], [1]),  # a topic not subscribed
        ([MemberClaim("a", ["t"], {"t": (0, 0)})], [1]),  # a partition listed twice
        ([MemberClaim("a", ["t"], {"t": (0,)}), MemberClaim("b", ["t"], {"t": (0,)})], [0, 0]),
        ([MemberClaim("a", ["t"], {"t": (5,)})], [0]),  # no such partition
        ([MemberClaim("a", ["t"], {"t": (-1,)})], [0]),
        ([MemberClaim("a", ["t"], {"t": [0]})], [1]),  # partitions in a list
        ([MemberClaim("a", ["t"], cast(PartitionsByTopic, {"t": ("0",)}))], [0]),  # not an int
    ],
)
def test_owned_claims_decline_what_is_not_plain(
    claims: list[MemberClaim], loads: list[int]
) -> None:
    """Each of these is declined; member by member, only the valid, uncontested part is
    owned, and no claim stands whole for it."""
    layout = Layout({"t": 3, "u": 2})
    subscribed = [frozenset(c.topics) for c in claims]
    assert OwnedClaims.of(layout, claims, subscribed) is None
    logging.disable(logging.WARNING)
    try:
        ref = OwnedIds(layout, [c.member_id for c in claims], claims, subscribed)
    finally:
        logging.disable(logging.NOTSET)
    assert ref.loads == loads
    assert ref.whole == [None] * len(claims)
