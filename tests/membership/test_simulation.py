"""Multi-member flows through the fake coordinator, with the real assignors (no sockets)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.range import RangeAssignor
from aiogroup.membership import CoordinatorLost, MemberState
from aiogroup.protocol import TopicPartition

from .helpers import FixedAssignor
from .simulator import FakeGroup, SimMember, all_partitions

CLUSTER = {"t": 6, "u": 3}
TOPICS = frozenset(CLUSTER)


def owned(group: FakeGroup) -> dict[str, frozenset[TopicPartition]]:
    return {
        m.name: m.machine.assignment
        for m in group.members
        if m.machine.state is not MemberState.CLOSED
    }


def assert_complete_and_balanced(group: FakeGroup) -> None:
    by_member = owned(group)
    union = frozenset().union(*by_member.values())
    assert union == all_partitions(group.cluster)
    sizes = [len(v) for v in by_member.values()]
    assert max(sizes) - min(sizes) <= 1, by_member


def revoked_and_assigned_same_round(m: SimMember) -> bool:
    return any(cb.assigned and cb.revoked & cb.assigned for cb in m.callbacks)


def test_cooperative_scale_out_moves_only_what_it_must() -> None:
    g = FakeGroup(CLUSTER)
    a = g.add("a", [CooperativeStickyAssignor()], TOPICS)
    g.run(g.all_stable)
    assert a.machine.protocol is RebalanceProtocol.COOPERATIVE
    assert a.machine.assignment == all_partitions(CLUSTER)
    before = a.machine.assignment
    b = g.add("b", [CooperativeStickyAssignor()], TOPICS)
    c = g.add("c", [CooperativeStickyAssignor()], TOPICS)
    g.run(g.all_stable)
    assert_complete_and_balanced(g)
    # KIP-429: a keeps 3 of its partitions and never revokes them; nobody loses anything.
    assert a.machine.assignment <= before
    revoked_by_a = frozenset().union(*(cb.revoked for cb in a.callbacks))
    assert revoked_by_a == before - a.machine.assignment
    for m in (a, b, c):
        assert not any(cb.lost for cb in m.callbacks)
        assert not revoked_and_assigned_same_round(m)
        assert m.raised == []
    # Cooperative callbacks: assigned is delivered on every completed rebalance.
    assert all(cb.assigned is not None for cb in b.callbacks if not cb.revoked)


def test_eager_range_group_revokes_everything_each_round() -> None:
    g = FakeGroup(CLUSTER)
    a = g.add("a", [RangeAssignor()], TOPICS)
    g.run(g.all_stable)
    b = g.add("b", [RangeAssignor()], TOPICS)
    g.run(g.all_stable)
    assert_complete_and_balanced(g)
    revoked = [cb.revoked for cb in a.callbacks if cb.revoked]
    assert revoked == [all_partitions(CLUSTER)]  # eager: the full set, before joining
    assigned = [cb.assigned for cb in a.callbacks if cb.assigned is not None]
    assert assigned[-1] == a.machine.assignment  # eager: the full new set
    assert b.machine.protocol is RebalanceProtocol.EAGER


def test_rolling_upgrade_to_cooperative_keeps_ownership_exclusive() -> None:
    """KIP-429's upgrade: [range, cooperative-sticky] (EAGER) members are bounced one at a time
    into [cooperative-sticky] (COOPERATIVE) members; ownership stays exclusive throughout."""
    g = FakeGroup(CLUSTER)
    first = [g.add(n, [RangeAssignor(), CooperativeStickyAssignor()], TOPICS) for n in "abc"]
    g.run(g.all_stable)
    assert g.protocol == "range"
    for old in first:
        g.close(old)
        g.run(g.all_stable)
        g.add(old.name + "2", [CooperativeStickyAssignor()], TOPICS)
        g.run(g.all_stable)  # check_exclusive runs after every event
    assert g.protocol == "cooperative-sticky"
    assert_complete_and_balanced(g)


def test_member_leaving_hands_its_partitions_over() -> None:
    g = FakeGroup(CLUSTER)
    members = [g.add(n, [CooperativeStickyAssignor()], TOPICS) for n in "abc"]
    g.run(g.all_stable)
    gone = members[1]
    g.close(gone)
    g.run(g.all_stable)
    assert gone.machine.state is MemberState.CLOSED
    assert_complete_and_balanced(g)
    # Partitions of the leaving member were revoked by it (not lost), and it committed first.
    assert [cb.revoked for cb in gone.callbacks if cb.revoked][-1] != frozenset()
    assert any(mid.startswith("b-") for mid, _ in g.commits)


def test_member_forgotten_by_coordinator_reports_lost_and_rejoins() -> None:
    g = FakeGroup(CLUSTER)
    g.add("a", [CooperativeStickyAssignor()], TOPICS)
    b = g.add("b", [CooperativeStickyAssignor()], TOPICS)
    g.run(g.all_stable)
    had = b.machine.assignment
    # The coordinator expires b's session (it stops knowing the member id).
    del g.group[b.machine.member_id]
    g._rebalance()
    g.run(g.all_stable)
    lost = [cb.lost for cb in b.callbacks if cb.lost]
    assert lost == [had]  # KIP-429 1d
    assert_complete_and_balanced(g)
    assert Counter(len(v) for v in owned(g).values()) == Counter({5: 1, 4: 1})


class NaiveCooperative(FixedAssignor):
    """Claims COOPERATIVE support but ignores ownership: round-robin over sorted members."""

    name = "naive"

    def assign(self, partitions_per_topic, subscriptions):  # type: ignore[no-untyped-def]
        members = sorted(subscriptions)
        tps = sorted(
            TopicPartition(t, p) for t, n in partitions_per_topic.items() for p in range(n)
        )
        self.plan = {m: frozenset(tps[i :: len(members)]) for i, m in enumerate(members)}
        return super().assign(partitions_per_topic, subscriptions)


def test_leader_withholds_when_the_assignor_does_not() -> None:
    """KIP-429 2d on the leader: a careless cooperative assignor cannot cause double ownership;
    the group converges in a follow-up rebalance."""
    g = FakeGroup(CLUSTER)
    a = g.add("a", [NaiveCooperative()], TOPICS)
    g.run(g.all_stable)
    b = g.add("b", [NaiveCooperative()], TOPICS)
    g.run(g.all_stable)  # check_exclusive after every event
    assert_complete_and_balanced(g)
    leader = a if a.machine.is_leader else b
    assert leader.machine.last_leader_plan is not None
    assert g.generations_completed >= 3  # join a, join b (withheld), follow-up


# -- a randomised whole-group property ----------------------------------------------------------


operations = st.lists(
    st.one_of(
        st.tuples(st.just("join"), st.integers(0, 9)),
        st.tuples(st.just("close"), st.integers(0, 9)),
        st.tuples(st.just("kick"), st.integers(0, 9)),
        st.tuples(st.just("grow"), st.sampled_from(sorted(CLUSTER))),
        st.tuples(st.just("disconnect"), st.integers(0, 9)),
    ),
    min_size=1,
    max_size=8,
)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, cooperative=st.booleans())
def test_random_group_histories_stay_exclusive_and_converge(
    ops: list[tuple[str, object]], cooperative: bool
) -> None:
    g = FakeGroup(CLUSTER)

    def assignors() -> list[PartitionAssignor]:
        return [CooperativeStickyAssignor()] if cooperative else [RangeAssignor()]

    g.add("m0", assignors(), TOPICS)
    g.run(g.all_stable)
    names = iter(f"m{i}" for i in range(1, 100))
    for op, arg in ops:
        live = g.live()
        if op == "join" and len(live) < 5:
            g.add(next(names), assignors(), TOPICS)
        elif op == "close" and live:
            g.close(live[int(str(arg)) % len(live)])
        elif op == "kick" and live:
            g.kick(live[int(str(arg)) % len(live)])
        elif op == "disconnect" and live:
            g.queue.append((live[int(str(arg)) % len(live)], CoordinatorLost()))
        elif op == "grow":
            grown = dict(g.cluster)
            grown[str(arg)] += 1
            g.update_cluster(grown)
        g.run(g.all_stable)  # exclusive ownership is checked after every event
        if g.live():
            by_member = owned(g)
            assert frozenset().union(*by_member.values()) == all_partitions(g.cluster)
            if cooperative:
                sizes = [len(v) for v in by_member.values()]
                assert max(sizes) - min(sizes) <= 1, by_member
    for m in g.members:
        assert not any(isinstance(r.error, Exception) and r.fatal for r in m.raised)
        assert not revoked_and_assigned_same_round(m)
