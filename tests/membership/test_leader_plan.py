"""``leader_plan`` (KIP-429 2a-2f) against the set algebra it replaced.

The leader's plan works per topic on the members' partition tuples; the reference below is the
earlier implementation, written with the public per-partition helpers of
:mod:`aiogroup.membership.deltas` (``owners_by_claims``, ``withhold_moving_partitions``,
``validate_cooperative``). Both must give the same assignments (the same ``Assignment`` object
where nothing changed), the same withheld and given-back partitions and the same 2a-2c sets,
on any input: conflicting claims at equal or different generations, a member listing a
partition twice, claims of partitions or topics the leader's metadata does not have, members
with no subscription, and assignors that hand out anything.
"""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.membership.deltas import (
    LeaderPlan,
    claimants,
    leader_plan,
    owners_by_claims,
    unassigned_partitions,
    validate_cooperative,
    withhold_moving_partitions,
)
from aiogroup.protocol.types import Assignment, Subscription, TopicPartition

TOPICS = ["a", "b", "c", "gone"]


def reference(
    assignments: Mapping[str, Assignment],
    subscriptions: Mapping[str, Subscription],
    partitions_per_topic: Mapping[str, int],
) -> tuple[dict[str, Assignment], frozenset[TopicPartition], frozenset[TopicPartition]]:
    """The cooperative leader plan as one set-algebra pass over every partition."""
    owners = owners_by_claims(subscriptions)
    result, withheld = withhold_moving_partitions(dict(assignments), owners)
    assigned_keys = {
        (t, p) for a in assignments.values() for t, ps in a.partitions.items() for p in ps
    }
    extra: dict[str, dict[str, list[int]]] = {}
    given_back: list[TopicPartition] = []
    for (topic, p), owner in sorted(owners.items(), key=lambda kv: kv[0]):
        if owner is None or (topic, p) in assigned_keys:
            continue
        if 0 <= p < partitions_per_topic.get(topic, 0):
            continue
        sub = subscriptions.get(owner)
        if sub is not None and owner in result and topic in set(sub.topics):
            extra.setdefault(owner, {}).setdefault(topic, []).append(p)
            given_back.append(TopicPartition(topic, p))
    for member_id, more in extra.items():
        # Topics given back are merged in, sorted; the others are kept as they were.
        old = result[member_id]
        topics = sorted({*old.partitions, *more})
        parts = {
            t: tuple(sorted({*old.partitions.get(t, ()), *more[t]}))
            if t in more
            else tuple(old.partitions[t])
            for t in topics
        }
        result[member_id] = Assignment(parts, old.user_data, old.version)
    assert not validate_cooperative(result, owners)
    return result, withheld, frozenset(given_back)


partition_lists = st.lists(st.integers(0, 5), max_size=5).map(tuple)
by_topic = st.dictionaries(st.sampled_from(TOPICS), partition_lists, max_size=4)


@st.composite
def rounds(
    draw: st.DrawFn,
) -> tuple[dict[str, Assignment], dict[str, Subscription], dict[str, int]]:
    ppt = draw(st.dictionaries(st.sampled_from(TOPICS[:3]), st.integers(0, 5), min_size=1))
    members = draw(st.lists(st.sampled_from("mnopq"), min_size=1, max_size=5, unique=True))
    subscriptions: dict[str, Subscription] = {}
    assignments: dict[str, Assignment] = {}
    for m in members:
        owned = draw(by_topic)
        if draw(st.booleans()):  # some members are undecodable: no subscription
            subscriptions[m] = Subscription(
                draw(st.lists(st.sampled_from(TOPICS), max_size=4, unique=True)),
                owned_partitions=owned,
                generation_id=draw(st.integers(-1, 2)),
            )
        # An assignment that often equals the claims, as a sticky assignor's does.
        parts = owned if draw(st.booleans()) else draw(by_topic)
        assignments[m] = Assignment(parts, draw(st.sampled_from([None, b"x"])))
    return assignments, subscriptions, ppt


def _items(result: Mapping[str, Assignment]) -> list[tuple[str, list[object], object]]:
    """Everything visible, orders included."""
    return [(m, list(a.partitions.items()), a.user_data) for m, a in result.items()]


@settings(max_examples=400, deadline=None)
@given(rounds())
def test_leader_plan_equals_the_set_algebra(
    case: tuple[dict[str, Assignment], dict[str, Subscription], dict[str, int]],
) -> None:
    assignments, subscriptions, ppt = case
    want, want_withheld, want_back = reference(assignments, subscriptions, ppt)
    got, plan = leader_plan(assignments, subscriptions, ppt, cooperative=True)
    assert _items(got) == _items(want)
    for m, a in got.items():
        assert (a is assignments[m]) == (want[m] is assignments[m]), m
    assert plan.withheld == want_withheld
    assert plan.given_back == want_back
    owners = owners_by_claims(subscriptions)
    assert plan.owned == frozenset(TopicPartition(t, p) for t, p in owners)
    assigned = frozenset(
        TopicPartition(t, p)
        for a in assignments.values()
        for t, ps in a.partitions.items()
        for p in ps
    )
    assert plan.assigned == assigned
    assert plan.unknown_but_owned == plan.owned - assigned


@settings(max_examples=100, deadline=None)
@given(rounds())
def test_eager_plan_changes_nothing(
    case: tuple[dict[str, Assignment], dict[str, Subscription], dict[str, int]],
) -> None:
    assignments, subscriptions, ppt = case
    got, plan = leader_plan(assignments, subscriptions, ppt, cooperative=False)
    assert got == assignments and all(got[m] is assignments[m] for m in got)
    assert plan.withheld == plan.given_back == frozenset()


def test_large_group_passes_owners_through_and_withholds_only_moves() -> None:
    """The shape the fast path is for: everyone keeps what it owns, one member takes a
    partition another still claims, and one takes a free one."""
    ppt = {f"t{k}": 101 for k in range(20)}
    subs = {
        f"m{i:02d}": Subscription(
            sorted(ppt), owned_partitions={t: (i, i + 50) for t in ppt}, generation_id=3
        )
        for i in range(50)
    }
    assignments = {m: Assignment(dict(s.owned_partitions)) for m, s in subs.items()}
    assignments["m00"] = Assignment({**subs["m00"].owned_partitions, "t3": (0, 1, 50)})
    assignments["m01"] = Assignment({**subs["m01"].owned_partitions, "t4": (1, 51, 100)})
    got, plan = leader_plan(assignments, subs, ppt, cooperative=True)
    assert plan.withheld == {TopicPartition("t3", 1)}
    assert got["m00"].partitions["t3"] == (0, 50)
    assert got["m01"] is assignments["m01"]  # t4-100 is owned by nobody: handed out at once
    assert all(got[m] is assignments[m] for m in got if m != "m00")
    assert isinstance(plan, LeaderPlan) and plan.ready_to_migrate == {TopicPartition("t4", 100)}


def unassigned_reference(
    assignments: Mapping[str, Assignment], ppt: Mapping[str, int]
) -> frozenset[TopicPartition]:
    taken = {(t, p) for a in assignments.values() for t, ps in a.partitions.items() for p in ps}
    return frozenset(
        TopicPartition(t, p) for t, n in ppt.items() for p in range(n) if (t, p) not in taken
    )


def claimants_reference(
    subscriptions: Mapping[str, Subscription], partitions: frozenset[TopicPartition]
) -> dict[TopicPartition, frozenset[str]]:
    found: dict[TopicPartition, set[str]] = {}
    for member_id, sub in subscriptions.items():
        for t, ps in sub.owned_partitions.items():
            for p in ps:
                if TopicPartition(t, p) in partitions:
                    found.setdefault(TopicPartition(t, p), set()).add(member_id)
    return {tp: frozenset(ms) for tp, ms in found.items()}


@settings(max_examples=200, deadline=None)
@given(rounds(), st.sets(st.tuples(st.sampled_from(TOPICS), st.integers(0, 5))))
def test_unassigned_and_claimants_per_topic(
    case: tuple[dict[str, Assignment], dict[str, Subscription], dict[str, int]],
    wanted: set[tuple[str, int]],
) -> None:
    assignments, subscriptions, ppt = case
    assert unassigned_partitions(assignments, ppt) == unassigned_reference(assignments, ppt)
    partitions = frozenset(TopicPartition(t, p) for t, p in wanted)
    assert claimants(subscriptions, partitions) == claimants_reference(subscriptions, partitions)
