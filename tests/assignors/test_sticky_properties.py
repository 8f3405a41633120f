"""Hypothesis properties of ``sticky`` and ``cooperative-sticky``: the invariants of
notes/design.md (valid, complete, balanced, sticky, deterministic, cooperative-safe, conflicting
claims), on arbitrary groups including bad claims."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import MemberClaim, balance
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol import encode_sticky_user_data
from aiogroup.protocol.types import Assignment, Subscription
from tests.assignors.invariants import (
    check_balanced,
    check_complete,
    check_cooperative_safe,
    check_valid,
    claims_of,
    min_moves_uniform,
    owners,
)

TOPICS = ["a", "b", "c", "d", "e", "f"]


@dataclass
class Group:
    ppt: dict[str, int]
    topics: dict[str, list[str]]
    owned: dict[str, dict[str, tuple[int, ...]]]
    gens: dict[str, int]

    def coop(self) -> dict[str, Subscription]:
        return {
            m: Subscription(self.topics[m], None, self.owned[m], self.gens[m], version=3)
            for m in self.topics
        }

    def eager(self) -> dict[str, Subscription]:
        return {
            m: Subscription(
                self.topics[m], encode_sticky_user_data(self.owned[m], self.gens[m]), version=0
            )
            for m in self.topics
        }


@st.composite
def groups(draw: st.DrawFn, *, uniform: bool | None = None, bad: bool = True) -> Group:
    ntopics = draw(st.integers(1, len(TOPICS)))
    ppt = {t: draw(st.integers(0, 7)) for t in TOPICS[:ntopics]}
    if draw(st.booleans()):
        ppt["gone"] = 0
    members = [f"m{i}" for i in range(draw(st.integers(1, 7)))]
    is_uniform = draw(st.booleans()) if uniform is None else uniform
    if is_uniform:
        shared = draw(st.lists(st.sampled_from(list(ppt)), min_size=1, unique=True))
        topics = {m: list(shared) for m in members}
    else:
        topics = {
            m: draw(st.lists(st.sampled_from(list(ppt)), min_size=1, unique=True)) for m in members
        }
    existing = [(t, p) for t, n in ppt.items() for p in range(n)]
    owned: dict[str, dict[str, tuple[int, ...]]] = {}
    gens: dict[str, int] = {}
    for m in members:
        picks = draw(st.lists(st.sampled_from(existing), unique=True)) if existing else []
        if bad and draw(st.integers(0, 4)) == 0:
            picks += draw(
                st.lists(
                    st.tuples(st.sampled_from([*ppt, "ghost"]), st.integers(-2, 9)), max_size=3
                )
            )
        by_topic: dict[str, list[int]] = {}
        for t, p in picks:
            by_topic.setdefault(t, []).append(p)
        owned[m] = {t: tuple(ps) for t, ps in by_topic.items()}
        gens[m] = draw(st.integers(-1, 3))
    return Group(ppt, topics, owned, gens)


def shuffled(group: Group, seed: int) -> Group:
    """The same group, every mapping and list in another order."""
    rnd = random.Random(seed)

    def shuf(d: dict) -> dict:  # type: ignore[type-arg]
        items = list(d.items())
        rnd.shuffle(items)
        return dict(items)

    topics = {m: rnd.sample(ts, len(ts)) for m, ts in group.topics.items()}
    owned = {
        m: shuf({t: tuple(rnd.sample(ps, len(ps))) for t, ps in o.items()})
        for m, o in group.owned.items()
    }
    return Group(shuf(group.ppt), shuf(topics), shuf(owned), shuf(group.gens))


def as_dicts(result: dict[str, Assignment]) -> list[tuple[str, list[tuple[str, tuple[int, ...]]]]]:
    """Result with all orders made visible (member order, topic order)."""
    return [(m, [(t, tuple(ps)) for t, ps in a.partitions.items()]) for m, a in result.items()]


def winners(group: Group) -> dict[tuple[str, int], str | None]:
    """The rightful owner of each validly claimed partition: sole claimant or unique highest
    generation; ``None`` for an equal-generation tie."""
    valid: dict[tuple[str, int], list[str]] = {}
    for m, owned in group.owned.items():
        for t, ps in owned.items():
            if t not in group.topics[m] or t not in group.ppt:
                continue
            for p in set(ps):
                if 0 <= p < group.ppt[t]:
                    valid.setdefault((t, p), []).append(m)
    out: dict[tuple[str, int], str | None] = {}
    for tp, ms in valid.items():
        top = max(group.gens[m] for m in ms)
        best = [m for m in ms if group.gens[m] == top]
        out[tp] = best[0] if len(best) == 1 else None
    return out


@settings(max_examples=150)
@given(groups())
def test_eager_valid_complete_balanced(group: Group) -> None:
    subs = group.eager()
    result = StickyAssignor().assign(group.ppt, subs)
    check_valid(group.ppt, subs, result)
    check_complete(group.ppt, subs, result)
    check_balanced(group.ppt, subs, result)


@settings(max_examples=150)
@given(groups())
def test_cooperative_valid_safe_and_plan_balanced(group: Group) -> None:
    subs = group.coop()
    result = CooperativeStickyAssignor().assign(group.ppt, subs)
    check_valid(group.ppt, subs, result)
    check_cooperative_safe(group.owned, result)
    # The intended plan (before withholding) is complete and balanced.
    plan = balance(
        group.ppt,
        [MemberClaim(m, group.topics[m], group.owned[m], group.gens[m]) for m in group.topics],
    )
    intended = {m: Assignment(p) for m, p in plan.assignments().items()}
    check_complete(group.ppt, subs, intended)
    check_balanced(group.ppt, subs, intended)
    # Conflicting claims (KAFKA-14639): a contested partition goes to its rightful owner or to
    # nobody this round.
    claims = claims_of(group.owned)
    right = winners(group)
    for tp, (member,) in owners(result).items():
        if len(claims.get(tp, ())) > 1:
            assert right.get(tp) == member, f"{tp} went to {member}, claims {claims[tp]}"


@settings(max_examples=100)
@given(groups(), st.integers(0, 2**32))
def test_deterministic_kafka_12898(group: Group, seed: int) -> None:
    other = shuffled(group, seed)
    # Fresh instances: a cooperative leader remembers what it withheld (a hint for the next
    # round), so only the same history may be expected to give the same output.
    for make in (StickyAssignor, CooperativeStickyAssignor):
        subs_a = group.eager() if make is StickyAssignor else group.coop()
        subs_b = other.eager() if make is StickyAssignor else other.coop()
        first = make().assign(group.ppt, subs_a)
        second = make().assign(other.ppt, subs_b)
        assert as_dicts(first) == as_dicts(second)


@settings(max_examples=100)
@given(groups(uniform=True, bad=False))
def test_uniform_moves_are_minimal(group: Group) -> None:
    """With equal subscriptions and no conflicting claims, exactly the minimum number of
    partitions changes hands."""
    claims = claims_of(group.owned)
    for tp in [tp for tp, ms in claims.items() if len(ms) > 1]:
        for m in sorted(claims[tp])[1:]:
            owned = dict(group.owned[m])
            owned[tp[0]] = tuple(p for p in owned[tp[0]] if p != tp[1])
            group.owned[m] = {t: ps for t, ps in owned.items() if ps}
    assignor = StickyAssignor()
    subs = group.eager()
    assignor.assign(group.ppt, subs)
    total = sum(n for t, n in group.ppt.items() if t in next(iter(group.topics.values())))
    counts = [
        sum(len(ps) for t, ps in group.owned[m].items() if t in group.topics[m])
        for m in sorted(group.topics)
    ]
    assert assignor.last_moved == min_moves_uniform(total, counts)


@settings(max_examples=100)
@given(groups())
def test_output_fed_back_is_a_fixed_point(group: Group) -> None:
    """Sticky: when everyone owns what the last round gave them, nothing moves."""
    first = StickyAssignor().assign(group.ppt, group.eager())
    again = Group(
        group.ppt,
        group.topics,
        {m: {t: tuple(ps) for t, ps in a.partitions.items()} for m, a in first.items()},
        {m: 10 for m in group.topics},
    )
    assignor = CooperativeStickyAssignor()
    second = assignor.assign(group.ppt, again.coop())
    assert as_dicts(second) == as_dicts(first)
    assert assignor.last_moved == 0
    assert assignor.last_withheld == 0


@pytest.mark.slow
@settings(max_examples=600)
@given(groups())
def test_cooperative_many_examples(group: Group) -> None:
    test_cooperative_valid_safe_and_plan_balanced.hypothesis.inner_test(group)  # type: ignore[attr-defined]
    test_eager_valid_complete_balanced.hypothesis.inner_test(group)  # type: ignore[attr-defined]
