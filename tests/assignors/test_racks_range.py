"""Rack-aware ``range`` (KIP-881) against Java's ``RangeAssignor`` (kafka-clients 4.1.1).

Java's rules, which the cross-check holds us to on random groups: rack-aware only for topics
that need it (some member of the topic has a rack, some partition has a replica there, and the
partitions are not all on the same racks); a member without a rack matches any partition;
co-partitioned topics (same members, same partition count) keep partition ``p`` together; the
quotas are the plain ones, so the balance is the plain one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings

from aiogroup.assignors.base import run_assignor
from aiogroup.assignors.racks import rack_match
from aiogroup.assignors.range import RangeAssignor
from aiogroup.protocol.types import Subscription

from .invariants import check_complete, check_valid, loads
from .java_assignors import JavaAssignors, java_assignors
from .rack_groups import RackGroup, rack_groups

ABC = [frozenset("a"), frozenset("b"), frozenset("c")]


@pytest.fixture(scope="module")
def java() -> Iterator[JavaAssignors]:
    yield from java_assignors()


def ours(group: RackGroup) -> dict[str, dict[str, tuple[int, ...]]]:
    result = RangeAssignor().assign_partitions(
        group.partitions_per_topic, group.subscriptions, group.partition_racks
    )
    check_valid(group.partitions_per_topic, group.subscriptions, result)
    check_complete(group.partitions_per_topic, group.subscriptions, result)
    return {m: {t: tuple(ps) for t, ps in a.partitions.items()} for m, a in result.items()}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(group=rack_groups(static=True))
def test_range_equals_java(java: JavaAssignors, group: RackGroup) -> None:
    expected = java.assign("range", group.partitions_per_topic, group.racks, group.subscriptions)
    assert ours(group) == expected


def test_co_partitioned_topics_follow_the_racks() -> None:
    # Partition p of t1 and t2 on rack "abc"[p % 3]: the member on that rack gets both.
    subs = {
        "c0": Subscription(["t1", "t2"], rack_id="c"),
        "c1": Subscription(["t1", "t2"], rack_id="b"),
        "c2": Subscription(["t1", "t2"], rack_id="a"),
    }
    group = RackGroup({"t1": 6, "t2": 6}, {"t1": ABC * 2, "t2": ABC * 2}, subs)
    assert ours(group) == {
        "c0": {"t1": (2, 5), "t2": (2, 5)},
        "c1": {"t1": (1, 4), "t2": (1, 4)},
        "c2": {"t1": (0, 3), "t2": (0, 3)},
    }
    # Without racks: the plain contiguous ranges.
    assert RangeAssignor().assign({"t1": 6, "t2": 6}, subs)["c0"].partitions == {
        "t1": (0, 1),
        "t2": (0, 1),
    }


def test_balance_is_the_plain_one_and_racks_match_more() -> None:
    subs = {f"c{i}": Subscription(["t"], rack_id="abc"[i % 3]) for i in range(6)}
    racks = {"t": [frozenset("abc"[p % 3]) for p in range(13)]}
    plain = RangeAssignor().assign({"t": 13}, subs)
    aware = RangeAssignor().assign_partitions({"t": 13}, subs, racks)
    assert sorted(loads(plain).values()) == sorted(loads(aware).values())
    assert rack_match(aware, subs, racks).matched > rack_match(plain, subs, racks).matched
    # Rack a holds 5 partitions (0, 3, ..., 12) and its two members 3 + 2 slots (c0 has the
    # one extra): every partition is matched.
    assert rack_match(aware, subs, racks).matched == 13


def test_same_racks_everywhere_is_the_plain_rule() -> None:
    # Every partition on racks a and b: nothing to gain, Java's rule keeps the plain ranges.
    subs = {f"c{i}": Subscription(["t"], rack_id="ab"[i % 2]) for i in range(3)}
    racks = {"t": [frozenset("ab")] * 7}
    assert RangeAssignor().assign_partitions({"t": 7}, subs, racks) == RangeAssignor().assign(
        {"t": 7}, subs
    )


def test_run_assignor_gives_the_racks_to_assign_partitions() -> None:
    subs = {f"c{i}": Subscription(["t"], rack_id="abc"[i]) for i in range(3)}
    racks = {"t": ABC * 2}
    expected = RangeAssignor().assign_partitions({"t": 6}, subs, racks)
    assert run_assignor(RangeAssignor(), {"t": 6}, subs, racks) == expected
    assert expected != RangeAssignor().assign({"t": 6}, subs)


def test_a_subclass_overriding_assign_keeps_its_assign() -> None:
    calls: list[str] = []

    class Logged(RangeAssignor):
        def assign(self, partitions_per_topic, subscriptions, *, group_instance_ids=None):  # type: ignore[no-untyped-def]
            calls.append("assign")
            return super().assign(partitions_per_topic, subscriptions)

    subs = {f"c{i}": Subscription(["t"], rack_id="abc"[i]) for i in range(3)}
    run_assignor(Logged(), {"t": 6}, subs, {"t": ABC * 2})
    assert calls == ["assign"]
