"""KIP-848 through the wire, raw requests: the embedded broker answers what Apache Kafka
4.1.1 answers. The same transcripts run on both (``kafka_broker``: ``embedded``, ``kafka4``);
the expected values are what Kafka 4.1.1 gave (member ids, being random, are named)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from aiogroup.protocol.consumer import decode_assignment, encode_assignment, encode_subscription
from aiogroup.protocol.types import Assignment, Subscription
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.fixtures import BrokerHandle, embedded_broker, kafka_broker  # noqa: F401

pytestmark = pytest.mark.timeout(120)

KINDS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]


def kafka_id() -> str:
    """A member id as Java's consumer makes one (``Uuid.randomUuid().toString()``)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


class Wire:
    """One raw connection speaking ConsumerGroupHeartbeat v1 for a group."""

    def __init__(self, client: RawClient, group: str) -> None:
        self.client = client
        self.group = group
        self.names: dict[str, str] = {}

    def name(self, member_id: str, label: str) -> str:
        self.names[member_id] = label
        return member_id

    def words(self, text: str | None) -> str | None:
        for member_id, label in self.names.items():
            text = text.replace(member_id, label) if text else text
        return text.replace(self.group, "G") if text else text

    async def topic(self, name: str, partitions: int) -> uuid.UUID:
        await self.client.request("CreateTopics", 4, {
            "topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                        "assignments": [], "configs": []}],
            "timeout_ms": 10_000, "validate_only": False,
        })  # fmt: skip
        # The coordinator learns of a topic after Metadata does (Kafka's metadata image): a
        # probe member joins until it is assigned something.
        for _ in range(200):
            probe = kafka_id()
            r = await self.heartbeat(group_id=unique("probe"), member_id=probe, member_epoch=0,
                                     rebalance_timeout_ms=1000, subscribed_topic_names=[name],
                                     topic_partitions=[])  # fmt: skip
            if r.error_code == 0 and r.assignment and r.assignment.topic_partitions:
                return uuid.UUID(str(r.assignment.topic_partitions[0].topic_id))
        raise AssertionError(f"the coordinator never saw {name}")

    async def heartbeat(self, **fields: Any) -> Any:
        values: dict[str, Any] = {
            "group_id": self.group, "member_id": "", "member_epoch": 0, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None,
        }  # fmt: skip
        values.update(fields)
        return await self.client.request("ConsumerGroupHeartbeat", 1, values)

    async def beat(self, **fields: Any) -> tuple[Any, ...]:
        """A heartbeat's answer as (error, message, epoch, interval, partitions or None)."""
        r = await self.heartbeat(**fields)
        parts = None
        if r.assignment is not None:
            parts = sorted(p for t in r.assignment.topic_partitions for p in t.partitions)
        return (r.error_code, self.words(r.error_message), r.member_epoch,
                r.heartbeat_interval_ms, parts)  # fmt: skip


async def describe(client: RawClient, group: str) -> Any:
    values = {"group_ids": [group], "include_authorized_operations": False}
    return await client.request("ConsumerGroupDescribe", 1, values)


def owned(topic_id: uuid.UUID, *partitions: int) -> list[dict[str, Any]]:
    return [{"topic_id": topic_id, "partitions": list(partitions)}]


@pytest.mark.parametrize("kafka_broker", KINDS, indirect=True)
async def test_join_revoke_acknowledge_leave_and_describe(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    async with RawClient(kafka_broker.bootstrap) as client:
        w = Wire(client, unique("g"))
        topic = unique("t")
        tid = await w.topic(topic, 6)
        a, b = w.name(kafka_id(), "A"), w.name(kafka_id(), "B")
        join = {"member_epoch": 0, "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": [topic], "topic_partitions": []}  # fmt: skip
        assert await w.beat(member_id=a, **join) == (0, None, 1, 5000, [0, 1, 2, 3, 4, 5])
        # b's target is held by a: nothing yet, at the new epoch.
        assert await w.beat(member_id=b, **join) == (0, None, 2, 5000, [])
        # a keeps 0-2 and must revoke 3-5 first, at its epoch.
        everything = owned(tid, *range(6))
        assert await w.beat(member_id=a, member_epoch=1, topic_partitions=everything) == (
            0, None, 1, 5000, [0, 1, 2],
        )  # fmt: skip
        assert await w.beat(member_id=b, member_epoch=2) == (0, None, 2, 5000, None)
        # a acknowledged: it moves to epoch 2, and only then does b get 3-5.
        assert await w.beat(member_id=a, member_epoch=1, topic_partitions=owned(tid, 0, 1, 2)) == (
            0, None, 2, 5000, None,
        )  # fmt: skip
        assert await w.beat(member_id=b, member_epoch=2, topic_partitions=owned(tid)) == (
            0, None, 2, 5000, [3, 4, 5],
        )  # fmt: skip

        [g] = (await describe(client, w.group)).groups
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch) == (
            0,
            "Stable",
            2,
            2,
        )
        assert g.assignor_name == "uniform"
        members = sorted(
            (w.words(m.member_id), m.member_epoch, m.subscribed_topic_regex, m.rack_id,
             m.instance_id, m.member_type, list(m.subscribed_topic_names),
             sorted(p for t in m.assignment.topic_partitions for p in t.partitions),
             sorted(p for t in m.target_assignment.topic_partitions for p in t.partitions),
             [t.topic_name for t in m.assignment.topic_partitions])
            for m in g.members
        )  # fmt: skip
        assert members == [
            ("A", 2, "", None, None, 1, [topic], [0, 1, 2], [0, 1, 2], [topic]),
            ("B", 2, "", None, None, 1, [topic], [3, 4, 5], [3, 4, 5], [topic]),
        ]

        # Fencing.
        assert await w.beat(member_id=a, member_epoch=7) == (
            110, "The consumer group member has a greater member epoch (7) than the one known by "
            "the group coordinator (2). The member must abandon all its partitions and rejoin.",
            0, 0, None,
        )  # fmt: skip
        assert (await w.beat(member_id=a, member_epoch=1, topic_partitions=owned(tid, 0)))[:3] == (
            0, None, 2,
        )  # fmt: skip
        assert await w.beat(member_id=w.name("nobody", "N"), member_epoch=1) == (
            25, "Member N is not a member of group G.", 0, 0, None,
        )  # fmt: skip

        # b leaves: its partitions go back to a at the next epoch.
        r = await w.heartbeat(member_id=b, member_epoch=-1)
        assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval_ms) == (0, b, -1, 0)
        assert await w.beat(member_id=a, member_epoch=2, topic_partitions=owned(tid, 0, 1, 2)) == (
            0, None, 3, 5000, [0, 1, 2, 3, 4, 5],
        )  # fmt: skip

        # Commits and fetches carry the epoch (OffsetCommit / OffsetFetch v9).
        async def commit(epoch: int, version: int = 9, group: str = w.group) -> int:
            r = await client.request("OffsetCommit", version, {
                "group_id": group, "generation_id_or_member_epoch": epoch, "member_id": a,
                "group_instance_id": None, "retention_time_ms": -1,
                "topics": [{"name": topic, "partitions": [{
                    "partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
                    "committed_metadata": ""}]}],
            })  # fmt: skip
            return int(r.topics[0].partitions[0].error_code)

        assert [await commit(2), await commit(3), await commit(3, 8)] == [113, 0, 35]
        assert await commit(3, group=unique("missing")) == 69

        async def fetch(epoch: int) -> tuple[int, list[tuple[int, int]]]:
            r = await client.request("OffsetFetch", 9, {"groups": [{
                "group_id": w.group, "member_id": a, "member_epoch": epoch,
                "topics": [{"name": topic, "partition_indexes": [0]}]}], "require_stable": True,
            })  # fmt: skip
            [group] = r.groups
            parts = [
                (p.partition_index, p.committed_offset) for t in group.topics for p in t.partitions
            ]
            return int(group.error_code), parts

        assert [await fetch(2), await fetch(3)] == [(113, []), (0, [(0, 5)])]

        listed = await client.request("ListGroups", 4, {"states_filter": []})
        assert [
            (g.protocol_type, g.group_state) for g in listed.groups if g.group_id == w.group
        ] == [("consumer", "Stable")]
        described = await client.request(
            "DescribeGroups", 5, {"groups": [w.group], "include_authorized_operations": False}
        )
        assert [(g.error_code, g.group_state) for g in described.groups] == [(0, "Dead")]
        deleted = await client.request("DeleteGroups", 2, {"groups_names": [w.group]})
        assert [r.error_code for r in deleted.results] == [68]


@pytest.mark.parametrize("kafka_broker", KINDS, indirect=True)
async def test_static_members_and_request_errors(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    async with RawClient(kafka_broker.bootstrap) as client:
        w = Wire(client, unique("g"))
        topic = unique("t")
        await w.topic(topic, 2)
        s1, s2 = w.name(kafka_id(), "S1"), w.name(kafka_id(), "S2")
        join = {"member_epoch": 0, "instance_id": "i1", "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": [topic], "topic_partitions": []}  # fmt: skip
        assert await w.beat(member_id=s1, **join) == (0, None, 1, 5000, [0, 1])
        assert await w.beat(member_id=s2, **join) == (
            111, "Static member S2 with instance id i1 cannot join the group because the "
            "instance id is owned by S1 member.", 0, 0, None,
        )  # fmt: skip
        r = await w.heartbeat(member_id=s1, member_epoch=-2, instance_id="i1")
        assert (r.error_code, r.member_id, r.member_epoch) == (0, s1, -2)
        # The new instance takes the partitions over, at the same epoch.
        assert await w.beat(member_id=s2, **join) == (0, None, 1, 5000, [0, 1])
        assert await w.beat(member_id=s1, member_epoch=1, instance_id="i1") == (
            82, "Static member S1 with instance id i1 was fenced by member S2.", 0, 0, None,
        )  # fmt: skip

        fresh = {"member_epoch": 0, "rebalance_timeout_ms": 1000, "topic_partitions": [],
                 "subscribed_topic_names": [topic]}  # fmt: skip
        assert await w.beat(member_id="", **fresh) == (42, "MemberId can't be empty.", 0, 0, None)
        assert await w.beat(member_id=kafka_id(), **{**fresh, "rebalance_timeout_ms": -1}) == (
            42, "RebalanceTimeoutMs must be provided in first request.", 0, 0, None,
        )  # fmt: skip
        assert await w.beat(member_id=kafka_id(), server_assignor="sticky", **fresh) == (
            112, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.",
            0, 0, None,
        )  # fmt: skip
        assert await w.beat(group_id=w.group + "-x", member_id=s2, member_epoch=3) == (
            69, "Consumer group G-x not found.", 0, 0, None,
        )  # fmt: skip
        d = await describe(client, w.group + "-y")
        assert (d.groups[0].error_code, w.words(d.groups[0].error_message)) == (
            69, "Group G-y not found.",
        )  # fmt: skip


#: Regular expressions as RE2/J reads them: the error Kafka 4.1.1 answers (0: accepted) and
#: RE2/J's description. ``\\pN`` (a Unicode class) is the one difference: Python's ``re``
#: has no ``\\p``, so the embedded broker refuses what Kafka accepts (no topic name needs it).
REGEXES = [
    ("(?=a)", 128, "invalid or unsupported Perl syntax"),
    ("(a)\\1", 128, "invalid escape sequence"),
    ("a++", 128, "invalid nested repetition operator"),
    ("a\\Z", 128, "invalid escape sequence"),
    ("(unclosed", 128, "missing closing )"),
    ("a)", 128, "regexp/syntax: internal error"),
    ("[a", 128, "missing closing ]"),
    ("*a", 128, "missing argument to repetition operator"),
    ("a**", 128, "invalid nested repetition operator"),
    ("a\\", 128, "trailing backslash at end of expression"),
    ("x{2}+", 128, "invalid nested repetition operator"),
    ("a{1001}", 128, "invalid repeat count"),
    ("[z-a]", 128, "invalid character class range"),
    ("(?<n>a)", 0, None),
    ("(?P<n>a)\\z", 0, None),
    ("(?i)A.*", 0, None),
]


@pytest.mark.parametrize("kafka_broker", KINDS, indirect=True)
async def test_regular_expressions_are_read_as_re2j_reads_them(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    async with RawClient(kafka_broker.bootstrap) as client:
        w = Wire(client, unique("g"))
        for pattern, code, description in REGEXES:
            r = await w.heartbeat(
                group_id=unique("rx"), member_id=kafka_id(), member_epoch=0,
                rebalance_timeout_ms=1000, subscribed_topic_regex=pattern, topic_partitions=[],
            )  # fmt: skip
            expected = None
            if description is not None:
                expected = (
                    f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                    f"{description}."
                )
            assert (r.error_code, r.error_message) == (code, expected), pattern


async def test_a_heartbeat_failure_is_injected_before_the_coordinator_sees_it(
    embedded_broker: EmbeddedBroker,  # noqa: F811
) -> None:
    async with RawClient(embedded_broker.bootstrap) as client:
        embedded_broker.create_topic("t", 1)
        w = Wire(client, "g")
        member = kafka_id()
        embedded_broker.faults.fail("ConsumerGroupHeartbeat", 15)  # COORDINATOR_NOT_AVAILABLE
        join = {"member_epoch": 0, "rebalance_timeout_ms": 1000,
                "subscribed_topic_names": ["t"], "topic_partitions": []}  # fmt: skip
        assert await w.beat(member_id=member, **join) == (15, None, 0, 0, None)
        assert embedded_broker.consumer_group("g") is None
        assert await w.beat(member_id=member, **join) == (0, None, 1, 5000, [0])
        view = embedded_broker.consumer_group("g")
        assert view is not None and view.members[0].assigned == {("t", 0)}


class ClassicWire:
    """A classic-protocol member on its own connection (JoinGroup v9, SyncGroup v5)."""

    def __init__(self, client: RawClient, group: str, topic: str) -> None:
        self.client, self.group, self.topic = client, group, topic
        self.member_id = ""
        self.generation = -1
        self.partitions: list[int] = []

    async def join(self) -> Any:
        metadata = encode_subscription(
            Subscription(topics=[self.topic], owned_partitions={self.topic: self.partitions}), 1
        )
        r = await self.client.request("JoinGroup", 9, {
            "group_id": self.group, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
            "member_id": self.member_id, "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": metadata}], "reason": None,
        })  # fmt: skip
        self.member_id = r.member_id or self.member_id
        if r.error_code == 0:
            self.generation = r.generation_id
        return r

    async def sync(self, plan: dict[str, list[int]] | None = None) -> Any:
        assignments = [
            {"member_id": m, "assignment": encode_assignment(Assignment({self.topic: ps}))}
            for m, ps in (plan or {}).items()
        ]
        r = await self.client.request("SyncGroup", 5, {
            "group_id": self.group, "generation_id": self.generation, "member_id": self.member_id,
            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
            "assignments": assignments,
        })  # fmt: skip
        if r.error_code == 0 and r.assignment:
            self.partitions = sorted(decode_assignment(r.assignment).partitions.get(self.topic, []))
        return r

    async def heartbeat(self) -> int:
        r = await self.client.request("Heartbeat", 4, {
            "group_id": self.group, "generation_id": self.generation,
            "member_id": self.member_id, "group_instance_id": None,
        })  # fmt: skip
        return int(r.error_code)


@pytest.mark.parametrize("kafka_broker", KINDS, indirect=True)
async def test_a_mixed_group_upgrades_shares_and_downgrades(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A classic group of one member becomes a consumer group when a consumer-protocol member
    joins; a second classic member joins it with JoinGroup; when the consumer-protocol member
    leaves, it is a classic group again (``group.consumer.migration.policy=bidirectional``)."""
    async with RawClient(kafka_broker.bootstrap) as c1, RawClient(kafka_broker.bootstrap) as c2:
        w = Wire(c1, unique("g"))
        topic = unique("t")
        await w.topic(topic, 4)
        a, b = ClassicWire(c1, w.group, topic), ClassicWire(c2, w.group, topic)
        assert (await a.join()).error_code == 79  # MEMBER_ID_REQUIRED
        joined = await a.join()
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, a.member_id)
        assert (await a.sync({a.member_id: [0, 1, 2, 3]})).error_code == 0
        assert a.partitions == [0, 1, 2, 3]

        m = w.name(kafka_id(), "M")
        join = {"member_epoch": 0, "rebalance_timeout_ms": 30_000,
                "subscribed_topic_names": [topic], "topic_partitions": []}  # fmt: skip
        # The upgrade: the group epoch is the generation, bumped by m's join.
        assert await w.beat(member_id=m, **join) == (0, None, 2, 5000, [])
        [g] = (await describe(c1, w.group)).groups
        members = sorted(
            (
                x.member_type,
                x.member_epoch,
                sum(len(t.partitions) for t in x.assignment.topic_partitions),
            )
            for x in g.members
        )
        assert (g.group_state, g.group_epoch, g.assignment_epoch, members) == (
            "Reconciling", 2, 2, [(0, 1, 4), (1, 2, 0)],
        )  # fmt: skip
        assert await a.heartbeat() == 27  # REBALANCE_IN_PROGRESS: rejoin

        # A classic member joins the consumer group: answered at once, never the leader.
        assert (await b.join()).error_code == 79
        joined = await b.join()
        assert (joined.error_code, joined.generation_id, joined.protocol_type) == (0, 3, "consumer")
        assert (joined.protocol_name, joined.leader, list(joined.members)) == ("range", "", [])

        epoch = 2
        for _ in range(10):  # everyone follows until the group is Stable
            for c in (a, b):
                if await c.heartbeat() != 0:
                    assert (await c.join()).error_code == 0
                    assert (await c.sync()).error_code == 0
            r = await w.heartbeat(member_id=m, member_epoch=epoch)  # m only gains: no acks
            epoch = r.member_epoch
            [g] = (await describe(c1, w.group)).groups
            if g.group_state == "Stable":
                break
        assert g.group_state == "Stable" and g.group_epoch == 3
        assert sorted(x.member_type for x in g.members) == [0, 0, 1]

        # m leaves: only classic members remain, the group is a classic group again.
        r = await w.heartbeat(member_id=m, member_epoch=-1)
        assert r.error_code == 0
        described = await c1.request(
            "DescribeGroups", 5, {"groups": [w.group], "include_authorized_operations": False}
        )
        [cg] = described.groups
        assert (cg.error_code, cg.group_state, cg.protocol_type, len(cg.members)) == (
            0, "PreparingRebalance", "consumer", 2,
        )  # fmt: skip
        [gone] = (await describe(c1, w.group)).groups
        assert (gone.error_code, w.words(gone.error_message)) == (
            69, "Group G is not a consumer group.",
        )  # fmt: skip
        assert await a.heartbeat() == 27
