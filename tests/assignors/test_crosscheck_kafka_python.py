"""Cross-check: our range/roundrobin against kafka-python 3's on random groups.

kafka-python's assignors take a ``ClusterMetadata`` (only ``partitions_for_topic`` is used) and
the JoinGroup response members (``member_id``, ``group_instance_id``, ``metadata.topics``). We
feed both sides the same group and compare partitions per member.

They agree on every input Java's rules and kafka-python's code both cover. Where they differ,
a test below names the difference and shows that we follow Java's documented rule:

1. kafka-python splits static from dynamic members with an unsorted ``itertools.groupby`` into
   a dict, so when input order interleaves them (static, dynamic, static) a static member is
   dropped from the rotation and gets nothing. Java sorts all members with one comparator
   (``MemberInfo.compareTo``, KIP-345). The random cross-check therefore hands kafka-python its
   members statics-first, the only order it handles.
2. Java compares strings by UTF-16 code unit; Python by code point. They disagree only for
   characters above U+FFFF against U+E000..U+FFFF, which the random ids avoid.
3. kafka-python's range counts a member twice if its subscription lists a topic twice, then
   overwrites the first range with the second, leaving partitions unassigned. Java keeps one
   entry per member. (Its roundrobin agrees with Java here.)
4. kafka-python's roundrobin crashes (``KeyError``) whenever the member whose turn it is is not
   subscribed to the partition's topic: its skip loop binds the ``(group_instance_id,
   member_id)`` tuple where it means the member id. Java skips that member (its javadoc's
   "unequal subscriptions" example). So roundrobin is cross-checked on identical subscriptions,
   and on unequal ones only where kafka-python survives; when it raises, the test checks that
   the input is one that needs a skip.

kafka-python's range also writes ``(topic, [])`` entries for a topic with no partitions; that is
representation only, and is normalised away before comparing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aiogroup.assignors.range import RangeAssignor
from aiogroup.assignors.roundrobin import RoundRobinAssignor
from aiogroup.protocol.types import Subscription

kafka_range = pytest.importorskip("kafka.coordinator.assignors.range")
kafka_roundrobin = pytest.importorskip("kafka.coordinator.assignors.roundrobin")

Plan = dict[str, dict[str, tuple[int, ...]]]


class FakeClusterMetadata:
    """The one ``ClusterMetadata`` method kafka-python's assignors call."""

    def __init__(self, partitions_per_topic: Mapping[str, int]) -> None:
        self._partitions = dict(partitions_per_topic)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._partitions.get(topic)
        return None if count is None else set(range(count))


@dataclass
class FakeProtocolMetadata:
    topics: list[str]


@dataclass
class FakeMember:
    """Shaped like kafka-python's JoinGroupResponse member as its assignors read it."""

    member_id: str
    group_instance_id: str | None
    metadata: FakeProtocolMetadata = field(default_factory=lambda: FakeProtocolMetadata([]))


def kafka_python_plan(
    assignor: Any,
    partitions_per_topic: Mapping[str, int],
    members: list[FakeMember],
) -> Plan:
    result = assignor.assign(FakeClusterMetadata(partitions_per_topic), members)
    plan: Plan = {}
    for member_id, assignment in result.items():
        plan[member_id] = {
            topic: tuple(sorted(parts))
            for topic, parts in sorted(assignment.assigned_partitions)
            if parts  # kafka-python's range writes (topic, []) for empty topics
        }
    return plan


def our_plan(
    assignor: RangeAssignor | RoundRobinAssignor,
    partitions_per_topic: Mapping[str, int],
    members: list[FakeMember],
) -> Plan:
    subscriptions = {m.member_id: Subscription(topics=list(m.metadata.topics)) for m in members}
    ids = {m.member_id: m.group_instance_id for m in members}
    result = assignor.assign(partitions_per_topic, subscriptions, group_instance_ids=ids)
    return {m: {t: tuple(ps) for t, ps in a.partitions.items()} for m, a in result.items()}


def statics_first(members: list[FakeMember]) -> list[FakeMember]:
    """The only input order kafka-python's groupby handles (difference 1)."""
    return [m for m in members if m.group_instance_id is not None] + [
        m for m in members if m.group_instance_id is None
    ]


TOPICS = ["t0", "t1", "t2", "t3", "topic-x", "topic_y"]
ID_ALPHABET = "abcAB0-_.é\u4e2d"  # ASCII and BMP only (difference 2)


@st.composite
def random_groups(draw: st.DrawFn) -> tuple[dict[str, int], list[FakeMember]]:
    partitions = draw(st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 12), max_size=6))
    member_ids = draw(
        st.lists(st.text(ID_ALPHABET, min_size=1, max_size=6), unique=True, max_size=8)
    )
    # Not forced unique: a broker never lets two members share one, but if they did, both
    # sides break the tie by member id (Java leaves it to hash order).
    instance_ids = iter(draw(st.lists(st.text(ID_ALPHABET, max_size=3), min_size=len(member_ids))))
    members = []
    for member_id in member_ids:
        # Topics unique per member (difference 3); "gone" is subscribed but has no metadata.
        topics = draw(st.lists(st.sampled_from([*TOPICS, "gone"]), unique=True, max_size=5))
        instance_id = next(instance_ids) if draw(st.booleans()) else None
        members.append(FakeMember(member_id, instance_id, FakeProtocolMetadata(topics)))
    return partitions, members


@settings(max_examples=250)
@given(random_groups())
def test_range_matches_kafka_python(group: tuple[dict[str, int], list[FakeMember]]) -> None:
    partitions, members = group
    theirs = kafka_python_plan(
        kafka_range.RangePartitionAssignor(), partitions, statics_first(members)
    )
    assert our_plan(RangeAssignor(), partitions, members) == theirs


@settings(max_examples=200)
@given(random_groups(), st.lists(st.sampled_from([*TOPICS, "gone"]), unique=True, max_size=6))
def test_roundrobin_matches_kafka_python_identical_subscriptions(
    group: tuple[dict[str, int], list[FakeMember]], topics: list[str]
) -> None:
    partitions, members = group
    for member in members:  # everyone on the same topics: no member is ever skipped
        member.metadata.topics = list(topics)
    theirs = kafka_python_plan(
        kafka_roundrobin.RoundRobinPartitionAssignor(), partitions, statics_first(members)
    )
    assert our_plan(RoundRobinAssignor(), partitions, members) == theirs


def needs_skip(partitions: Mapping[str, int], members: list[FakeMember]) -> bool:
    """Whether some existing, subscribed topic's partitions are not wanted by every member."""
    wanted = {t for m in members for t in m.metadata.topics if partitions.get(t, 0) > 0}
    return any(not wanted <= set(m.metadata.topics) for m in members)


@settings(max_examples=200)
@given(random_groups())
def test_roundrobin_matches_kafka_python_where_it_runs(
    group: tuple[dict[str, int], list[FakeMember]],
) -> None:
    partitions, members = group
    ours = our_plan(RoundRobinAssignor(), partitions, members)
    try:
        theirs = kafka_python_plan(
            kafka_roundrobin.RoundRobinPartitionAssignor(), partitions, statics_first(members)
        )
    except KeyError:
        event("kafka-python roundrobin raised KeyError (difference 4)")
        assert needs_skip(partitions, members)
        return
    event("compared")
    assert ours == theirs


def test_agreement_on_javadoc_example() -> None:
    # A fixed sanity point, so a broken fake cannot make the random tests vacuous.
    members = [
        FakeMember("C1", None, FakeProtocolMetadata(["t0", "t1"])),
        FakeMember("C0", None, FakeProtocolMetadata(["t0", "t1"])),
    ]
    partitions = {"t0": 3, "t1": 3}
    rr = kafka_python_plan(kafka_roundrobin.RoundRobinPartitionAssignor(), partitions, members)
    assert rr == {"C0": {"t0": (0, 2), "t1": (1,)}, "C1": {"t0": (1,), "t1": (0, 2)}}
    assert our_plan(RoundRobinAssignor(), partitions, members) == rr
    rg = kafka_python_plan(kafka_range.RangePartitionAssignor(), partitions, members)
    assert rg == {"C0": {"t0": (0, 1), "t1": (0, 1)}, "C1": {"t0": (2,), "t1": (2,)}}
    assert our_plan(RangeAssignor(), partitions, members) == rg


# ---------------------------------------------------------------------------------------------
# The named differences
# ---------------------------------------------------------------------------------------------

INTERLEAVED = [
    FakeMember("S-a", "i1", FakeProtocolMetadata(["t"])),
    FakeMember("D-b", None, FakeProtocolMetadata(["t"])),
    FakeMember("S-c", "i0", FakeProtocolMetadata(["t"])),
]


def test_difference_1_interleaved_static_members_range() -> None:
    # Java order: S-c (instance i0), S-a (instance i1), then dynamic D-b.
    java = {"S-c": {"t": (0,)}, "S-a": {"t": (1,)}, "D-b": {"t": (2,)}}
    assert our_plan(RangeAssignor(), {"t": 3}, INTERLEAVED) == java
    # kafka-python loses S-a: groupby yields True:[S-a], False:[D-b], True:[S-c] and the dict
    # keeps only the last True group.
    theirs = kafka_python_plan(kafka_range.RangePartitionAssignor(), {"t": 3}, INTERLEAVED)
    assert theirs == {"S-c": {"t": (0, 1)}, "D-b": {"t": (2,)}, "S-a": {}}
    # Given statics first, kafka-python agrees with Java.
    fixed = kafka_python_plan(
        kafka_range.RangePartitionAssignor(), {"t": 3}, statics_first(INTERLEAVED)
    )
    assert fixed == java


def test_difference_1_interleaved_static_members_roundrobin() -> None:
    java = {"S-c": {"t": (0, 3)}, "S-a": {"t": (1,)}, "D-b": {"t": (2,)}}
    assert our_plan(RoundRobinAssignor(), {"t": 4}, INTERLEAVED) == java
    theirs = kafka_python_plan(
        kafka_roundrobin.RoundRobinPartitionAssignor(), {"t": 4}, INTERLEAVED
    )
    assert theirs == {"S-c": {"t": (0, 2)}, "D-b": {"t": (1, 3)}, "S-a": {}}


def test_difference_2_supplementary_characters_order() -> None:
    # Java's String.compareTo: "\U00010000" (D800 DC00) < "\uffff"; Python says the opposite.
    members = [
        FakeMember("\uffff", None, FakeProtocolMetadata(["t"])),
        FakeMember("\U00010000", None, FakeProtocolMetadata(["t"])),
    ]
    java = {"\U00010000": {"t": (0, 1)}, "\uffff": {"t": (2,)}}
    assert our_plan(RangeAssignor(), {"t": 3}, members) == java
    theirs = kafka_python_plan(kafka_range.RangePartitionAssignor(), {"t": 3}, members)
    assert theirs == {"\uffff": {"t": (0, 1)}, "\U00010000": {"t": (2,)}}


def test_difference_3_duplicate_topic_in_subscription() -> None:
    members = [
        FakeMember("A", None, FakeProtocolMetadata(["t", "t"])),
        FakeMember("B", None, FakeProtocolMetadata(["t"])),
    ]
    java = {"A": {"t": (0, 1)}, "B": {"t": (2, 3)}}
    assert our_plan(RangeAssignor(), {"t": 4}, members) == java
    # kafka-python's range sees [A, A, B]: A gets 0-1, then 2 overwrites it; 0 and 1 are lost.
    theirs = kafka_python_plan(kafka_range.RangePartitionAssignor(), {"t": 4}, members)
    assert theirs == {"A": {"t": (2,)}, "B": {"t": (3,)}}
    # Roundrobin agrees: kafka-python collects topics into a set there.
    rr_theirs = kafka_python_plan(kafka_roundrobin.RoundRobinPartitionAssignor(), {"t": 4}, members)
    assert our_plan(RoundRobinAssignor(), {"t": 4}, members) == rr_theirs


def test_difference_4_roundrobin_skip_crashes_kafka_python() -> None:
    # Java's javadoc "unequal subscriptions" example.
    members = [
        FakeMember("C0", None, FakeProtocolMetadata(["t0"])),
        FakeMember("C1", None, FakeProtocolMetadata(["t0", "t1"])),
        FakeMember("C2", None, FakeProtocolMetadata(["t0", "t1", "t2"])),
    ]
    partitions = {"t0": 1, "t1": 2, "t2": 3}
    java = {"C0": {"t0": (0,)}, "C1": {"t1": (0,)}, "C2": {"t1": (1,), "t2": (0, 1, 2)}}
    assert our_plan(RoundRobinAssignor(), partitions, members) == java
    with pytest.raises(KeyError):
        kafka_python_plan(kafka_roundrobin.RoundRobinPartitionAssignor(), partitions, members)
