"""KIP-848's server assignors (uniform, range): Kafka's examples, and balance and stickiness
over random groups (Hypothesis)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.testing.embedded.hashorder import JavaMap
from aiogroup.testing.embedded.server_assignors import (
    GroupSpec,
    JavaIntSet,
    MemberSpec,
    Result,
    java_uuid_hash,
    java_uuid_order,
    range_assign,
    stored_order,
    uniform_assign,
    uuid_sort_key,
)

Frozen = dict[str, dict[uuid.UUID, frozenset[int]]]


def frozen(result: Result) -> Frozen:
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in result.items()}


def uniform(group: GroupSpec) -> Frozen:
    return frozen(uniform_assign(group))


def ranged(group: GroupSpec) -> Frozen:
    return frozen(range_assign(group))

T1, T2, T3 = (uuid.UUID(int=(i << 64) | i) for i in (1, 2, 3))


def spec(
    members: dict[str, MemberSpec], partitions: dict[uuid.UUID, int], homogeneous: bool = False
) -> GroupSpec:
    owners = {(t, p): m for m, s in members.items() for t, ps in s.assignment.items() for p in ps}
    return GroupSpec(members, homogeneous, partitions, owners)


def test_java_int_sets_iterate_by_bucket() -> None:
    # 8 partitions in a set of capacity 16: 16 shares bucket 0, so it comes first.
    assert stored_order(range(9, 17)) == (16, 9, 10, 11, 12, 13, 14, 15)
    # Within a bucket, insertion order: the order of the list the set was rebuilt from.
    assert stored_order([37, 21, 20, 36, 32]) == (32, 20, 36, 37, 21)
    grown = JavaIntSet()
    for p in range(13):  # past 12 of 16: doubled
        grown.add(p * 16)
    assert list(grown) == [0, 32, 64, 96, 128, 160, 192, 16, 48, 80, 112, 144, 176]


def test_kafka_uuid_helpers() -> None:
    # Uuid.hashCode folds the 128 bits to 32 with xors; compareTo reads signed halves.
    assert java_uuid_hash(uuid.UUID(int=(1 << 64) | 1)) == 0
    assert java_uuid_hash(uuid.UUID(int=1)) == 1
    negative = uuid.UUID(int=1 << 127)
    assert uuid_sort_key(negative) < uuid_sort_key(T1)
    assert java_uuid_order([uuid.UUID(int=3), uuid.UUID(int=1), uuid.UUID(int=2)]) == [
        uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3),
    ]  # fmt: skip


# --- uniform, heterogeneous: Kafka's UniformHeterogeneousAssignmentBuilderTest cases ----------


def test_heterogeneous_first_assignment_two_members_two_topics() -> None:
    members = {"A": MemberSpec(frozenset({T1, T3})), "B": MemberSpec(frozenset({T3}))}
    out = uniform(spec(members, {T1: 3, T3: 6}))
    assert out == {"A": {T1: frozenset({0, 1, 2}), T3: frozenset({4})},
                   "B": {T3: frozenset({0, 1, 2, 3, 5})}}  # fmt: skip


def test_heterogeneous_more_members_than_partitions() -> None:
    members = {
        "A": MemberSpec(frozenset({T3})),
        "B": MemberSpec(frozenset({T3})),
        "C": MemberSpec(frozenset({T1})),
    }
    out = uniform(spec(members, {T1: 2, T3: 1}))
    assert out == {"A": {T3: frozenset({0})}, "B": {}, "C": {T1: frozenset({0, 1})}}


def test_heterogeneous_rebalances_an_unbalanced_previous_assignment() -> None:
    f = frozenset
    members = {
        "A": MemberSpec(f({T1}), {T1: f({0, 1, 2})}),
        "B": MemberSpec(f({T1, T2}), {T1: f({3}), T2: f({0})}),
        "C": MemberSpec(f({T1, T2, T3}), {T1: f({4, 5}), T2: f({1, 2, 3}), T3: f({0, 1, 2, 3})}),
    }
    out = uniform(spec(members, {T1: 6, T2: 4, T3: 4}))
    assert out == {
        "A": {T1: f({0, 1, 2, 5})},
        "B": {T1: f({3}), T2: f({0, 1, 2, 3})},
        "C": {T1: f({4}), T3: f({0, 1, 2, 3})},
    }


# --- uniform, homogeneous -------------------------------------------------------------------


def test_homogeneous_keeps_up_to_the_quota_and_deals_the_rest_in_member_order() -> None:
    f = frozenset
    members = {
        "a": MemberSpec(f({T1}), {T1: f({0, 1, 2})}),
        "b": MemberSpec(f({T1}), {T1: f({3, 4, 5})}),
        "c": MemberSpec(f({T1})),
    }
    out = uniform(spec(members, {T1: 6}, homogeneous=True))
    assert out == {"a": {T1: f({0, 1})}, "b": {T1: f({3, 4})}, "c": {T1: f({2, 5})}}


def test_homogeneous_extra_partitions_go_to_members_that_already_have_them() -> None:
    f = frozenset
    # 7 partitions over 3: two members get 3. b holds 3 and keeps them; a holds 2 and gives
    # the extra quota to a later member; c must take one.
    members = {
        "a": MemberSpec(f({T1}), {T1: f({0, 1})}),
        "b": MemberSpec(f({T1}), {T1: f({2, 3, 4})}),
        "c": MemberSpec(f({T1})),
    }
    out = uniform(spec(members, {T1: 7}, homogeneous=True))
    sizes = sorted(len(out[m].get(T1, ())) for m in "abc")
    assert sizes == [2, 2, 3]
    assert out["a"][T1] >= f({0, 1}) and out["b"][T1] >= f({2, 3})


# --- range ----------------------------------------------------------------------------------


def test_range_co_partitions_sorted_members() -> None:
    members = {"m2": MemberSpec(frozenset({T1, T2})), "m1": MemberSpec(frozenset({T1, T2}))}
    out = ranged(spec(members, {T1: 3, T2: 3}, homogeneous=True))
    f = frozenset
    assert out == {"m1": {T1: f({0, 1}), T2: f({0, 1})}, "m2": {T1: f({2}), T2: f({2})}}


def test_range_puts_static_members_first_by_instance_id() -> None:
    members = {
        "dyn": MemberSpec(frozenset({T1})),
        "z": MemberSpec(frozenset({T1}), instance_id="i-2"),
        "y": MemberSpec(frozenset({T1}), instance_id="i-1"),
    }
    out = ranged(spec(members, {T1: 4}, homogeneous=True))
    f = frozenset
    assert out == {"y": {T1: f({0, 1})}, "z": {T1: f({2})}, "dyn": {T1: f({3})}}


def test_range_heterogeneous_counts_subscribers_per_topic() -> None:
    members = {"a": MemberSpec(frozenset({T1, T2})), "b": MemberSpec(frozenset({T2}))}
    out = ranged(spec(members, {T1: 2, T2: 3}))
    f = frozenset
    assert out == {"a": {T1: f({0, 1}), T2: f({0, 1})}, "b": {T2: f({2})}}


# --- properties -------------------------------------------------------------------------------

TOPICS = [uuid.UUID(int=(i * 7919) << 70 | i) for i in range(1, 5)]


@st.composite
def groups(draw: st.DrawFn, homogeneous: bool) -> GroupSpec:
    counts = {t: draw(st.integers(1, 8)) for t in TOPICS[: draw(st.integers(1, 4))]}
    topics = sorted(counts, key=uuid_sort_key)
    names = draw(st.lists(st.text("abcdefgh", min_size=1, max_size=4), min_size=1, max_size=6,
                          unique=True))  # fmt: skip
    owners: dict[tuple[uuid.UUID, int], str] = {}
    members: dict[str, MemberSpec] = {}
    shared = frozenset(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
    for name in JavaMap(names):
        mine = (
            shared
            if homogeneous
            else frozenset(draw(st.lists(st.sampled_from(topics), unique=True)))
        )
        # A previous target: some partitions nobody else had, of any topic.
        held: dict[uuid.UUID, set[int]] = {}
        for t in topics:
            for p in range(counts[t]):
                if (t, p) not in owners and draw(st.integers(0, 3)) == 0:
                    owners[(t, p)] = name
                    held.setdefault(t, set()).add(p)
        members[name] = MemberSpec(mine, {t: frozenset(ps) for t, ps in held.items()})
    return GroupSpec(members, homogeneous, counts, owners)


def check_valid(group: GroupSpec, out: Frozen) -> None:
    seen: set[tuple[uuid.UUID, int]] = set()
    for member, assignment in out.items():
        for t, ps in assignment.items():
            assert t in group.members[member].topic_ids, "only subscribed topics"
            for p in ps:
                assert 0 <= p < group.partitions[t] and (t, p) not in seen
                seen.add((t, p))
    wanted = {(t, p) for m in group.members.values() for t in m.topic_ids
              for p in range(group.partitions[t])}  # fmt: skip
    assert seen == wanted, "every subscribed partition is assigned once"


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_balanced_and_sticky(group: GroupSpec) -> None:
    out = uniform(group)
    check_valid(group, out)
    sizes = [sum(len(ps) for ps in out.get(m, {}).values()) for m in group.members]
    assert max(sizes) - min(sizes) <= 1
    total = sum(sizes)
    quota_max = -(-total // len(sizes))
    for member, spec_ in group.members.items():
        kept = sum(len(spec_.assignment.get(t, frozenset()) & out[member].get(t, frozenset()))
                   for t in spec_.topic_ids)  # fmt: skip
        had = sum(len(spec_.assignment.get(t, ())) for t in spec_.topic_ids)
        assert kept >= min(had, total // len(sizes)), "keeps what balance allows"
        assert kept <= quota_max


@settings(max_examples=150, deadline=None)
@given(groups(homogeneous=False))
def test_uniform_heterogeneous_assigns_everything_once(group: GroupSpec) -> None:
    out = uniform(group)
    check_valid(group, out)
    # Members with identical subscriptions differ by at most one partition.
    by_topics: dict[frozenset[uuid.UUID], list[int]] = {}
    for member, spec_ in group.members.items():
        if spec_.topic_ids:
            size = sum(len(ps) for ps in out.get(member, {}).values())
            by_topics.setdefault(spec_.topic_ids, []).append(size)
    if len(by_topics) == 1:
        [sizes] = by_topics.values()
        assert max(sizes) - min(sizes) <= 1


@settings(max_examples=100, deadline=None)
@given(st.booleans().flatmap(groups))
def test_range_assigns_everything_once(group: GroupSpec) -> None:
    check_valid(group, ranged(group))
