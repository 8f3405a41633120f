"""The claims index (:mod:`aiogroup.assignors.balancer.claims`).

- ``ClaimIndex`` answers claimed / distinct / regular / within / plain / unclaimed per topic
  as the claims themselves do;
- ``shared_index`` builds one index for the very same claims (the balancer and the leader's
  KIP-429 plan share it);
- ``ClaimedIds`` says which ids are claimed, from the index;
- ``in_order`` says whether a claim is sorted (a copy of it is then an assignment).
"""

from __future__ import annotations

from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import ClaimIndex, Layout, last_index, shared_index
from aiogroup.assignors.balancer.claims import ClaimedIds, Claims, in_order

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
    # A float among the claims: what a member may send, not what the type says.
    index = ClaimIndex(cast("list[Claims]", [{"a": (True, 2)}, {"b": (1.0,)}, {"c": (1, 2)}]))
    assert not index.plain("a", 3) and not index.plain("b", 3) and index.plain("c", 3)
    assert index.claimed("c", 1) and index.claimed("c", True) and not index.claimed("c", 0)


def test_claim_index_refuses_what_is_not_an_int() -> None:
    index = ClaimIndex(cast("list[Claims]", [{"a": (True, 2)}, {"b": (1.0,)}, {"c": (1, 2)}]))
    assert not index.regular("a") and not index.regular("b") and index.regular("c")


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


def test_shared_index_is_made_once_for_the_same_claims() -> None:
    maps: list[Claims] = [{"a": (0, 1)}, {"b": (2,)}]
    index = shared_index(maps)
    assert shared_index(list(maps)) is index  # the very same claims, in another list
    assert last_index(maps) is index
    equal: list[Claims] = [{"a": (0, 1)}, {"b": (2,)}]  # equal, but not the same objects
    assert last_index(equal) is None
    other = shared_index(equal)
    assert other is not index and other.claims == index.claims
    assert shared_index(equal, keep=False) is other  # handed over, and forgotten
    assert last_index(equal) is None
    made = ClaimIndex(maps)
    assert shared_index(maps, made=made) is made and last_index(maps) is made


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=4), st.data())
def test_claimed_ids_are_the_claims(counts: list[int], data: st.DataObject) -> None:
    layout = Layout({f"t{k}": n for k, n in enumerate(counts)})
    holder = [data.draw(st.integers(-1, 3)) for _ in range(layout.total)]
    maps: list[dict[str, tuple[int, ...]]] = [{} for _ in range(4)]
    for g, i in enumerate(holder):
        if i >= 0:
            k = max(k for k, o in enumerate(layout.offsets) if o <= g)
            topic = layout.topics[k]
            maps[i][topic] = (*maps[i].get(topic, ()), g - layout.offsets[k])
    index = ClaimIndex(maps)
    if data.draw(st.booleans()):  # answered from the unclaimed partitions, or from the claims
        assert all(index.plain(t, n) for t, n in layout.count_of.items())
    claimed = ClaimedIds(layout, index)
    assert len(claimed) == sum(1 for i in holder if i >= 0)
    for g in range(-2, layout.total + 2):
        assert (g in claimed) == (0 <= g < layout.total and holder[g] >= 0)
    assert "0" not in claimed and None not in claimed
