"""The embedded broker on rules where it differed from every Apache Kafka version, over the wire.

Each was seen on a live Kafka 2.3 broker and read in Kafka's code (cited per test); the
conformance suite (tests/conformance) replays them against Kafka 2.3 as well.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiogroup.testing import wire
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.rules import CoordinatorConfig

from .test_broker_wire import closed_by_peer

pytestmark = pytest.mark.timeout(60)

CONFIG = CoordinatorConfig(group_min_session_timeout_ms=1000)
META = b"\x00\x01\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x00"  # consumer Subscription v1 of ["t"]


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with EmbeddedBroker(topics={"t": 2}, coordinator_config=CONFIG) as b:
        yield b


def join_values(group: str, member_id: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout_ms": 6000,
        "rebalance_timeout_ms": 6000,
        "member_id": member_id,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": META}],
        **extra,
    }


def commit_values(group: str, topic: str, partition: int) -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": topic,
                "partitions": [
                    {"partition_index": partition, "committed_offset": 5, "committed_metadata": ""}
                ],
            }
        ],
    }


async def fetched(client: RawClient, group: str, topic: str, partition: int) -> int:
    resp = await client.request(
        "OffsetFetch",
        5,
        {"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}]},
    )
    return int(resp.topics[0].partitions[0].committed_offset)


async def test_commit_to_unknown_topic_or_partition_is_refused_and_creates_no_group(
    broker: EmbeddedBroker,
) -> None:
    # KafkaApis.handleOffsetCommitRequest: partitions not in the metadata cache are answered
    # UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the request.
    async with RawClient(broker.bootstrap) as c:
        for topic, partition in (("nope", 0), ("t", 2)):
            resp = await c.request("OffsetCommit", 7, commit_values("g-unknown", topic, partition))
            assert resp.topics[0].partitions[0].error_code == 3
        assert broker.group("g-unknown") is None
        listed = await c.request("ListGroups", 2, {})
        assert [g.group_id for g in listed.groups] == []
        assert await fetched(c, "g-unknown", "t", 2) == -1
        # A commit mixing both stores the known partition only.
        mixed = commit_values("g-mixed", "t", 0)
        mixed["topics"].append(commit_values("g-mixed", "nope", 0)["topics"][0])
        resp = await c.request("OffsetCommit", 7, mixed)
        codes = {t.name: t.partitions[0].error_code for t in resp.topics}
        assert codes == {"t": 0, "nope": 3}
        assert await fetched(c, "g-mixed", "t", 0) == 5


async def test_offsets_of_a_deleted_topic_are_gone_when_it_comes_back(
    broker: EmbeddedBroker,
) -> None:
    # GroupCoordinator.handleDeletedPartitions (on StopReplica with delete): the offsets go.
    async with RawClient(broker.bootstrap) as c:
        assert (await c.request("OffsetCommit", 7, commit_values("g-del", "t", 1))).topics[
            0
        ].partitions[0].error_code == 0
        assert await fetched(c, "g-del", "t", 1) == 5
        await c.request("DeleteTopics", 3, {"topic_names": ["t"], "timeout_ms": 5000})
        created = await c.request(
            "CreateTopics",
            3,
            {
                "topics": [
                    {
                        "name": "t",
                        "num_partitions": 2,
                        "replication_factor": 1,
                        "assignments": [],
                        "configs": [],
                    }
                ],
                "timeout_ms": 5000,
            },
        )
        assert created.topics[0].error_code == 0
        assert await fetched(c, "g-del", "t", 1) == -1
        # Empty and without offsets: Kafka 4.x keeps it until its periodic cleanup (up to 3.x
        # the deletion dropped it at once: tests/testing/test_coordinator_flavours.py).
        view = broker.group("g-del")
        assert view is not None and view.state == "Empty"


async def test_idle_connections_are_closed() -> None:
    # connections.max.idle.ms: Kafka's selector closes a connection idle that long.
    async with EmbeddedBroker(connections_max_idle_ms=300) as broker:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
        try:
            assert await closed_by_peer(reader, timeout=10.0)
            assert broker.faults.events_of("idle")
        finally:
            writer.close()
        # A connection in use stays open past the idle time.
        async with RawClient(broker.bootstrap) as c:
            for _ in range(4):
                await c.request("ApiVersions", 0, {})
                await asyncio.sleep(0.15)  # the pause under test, not synchronisation
            assert (await c.request("ApiVersions", 0, {})).error_code == 0


async def join_with_id(client: RawClient, group: str) -> Any:
    first = await client.request("JoinGroup", 5, join_values(group))
    return await client.request("JoinGroup", 5, join_values(group, first.member_id))


async def test_superseded_join_is_never_answered(broker: EmbeddedBroker) -> None:
    # GroupMetadata.updateMember overwrites the parked callback: the first JoinGroup of a
    # member that sends a second one (from another connection) is never answered.
    clients = [RawClient(broker.bootstrap) for _ in range(3)]
    a, a2, c = [await client.connect() for client in clients]
    try:
        leader = await join_with_id(a, "g-sup")
        await a.request(
            "SyncGroup",
            3,
            {"group_id": "g-sup", "generation_id": 1, "member_id": leader.member_id,
             "assignments": []},
        )  # fmt: skip
        c_join = asyncio.ensure_future(join_with_id(c, "g-sup"))
        await broker.wait_for_group("g-sup", lambda v: v is not None and len(v.members) == 2)
        a_first = await a.request("JoinGroup", 5, join_values("g-sup", leader.member_id))
        c_first = await c_join
        assert a_first.generation_id == c_first.generation_id == 2  # both in generation 2
        for client, member in ((c, c_first), (a, a_first)):
            sync = {"group_id": "g-sup", "generation_id": 2, "assignments": []}
            synced = asyncio.ensure_future(
                client.request("SyncGroup", 3, {**sync, "member_id": member.member_id})
            )
        await synced
        # The leader rejoins (a rebalance); c has not rejoined yet, so it stays parked.
        parked = asyncio.ensure_future(
            a.request("JoinGroup", 5, join_values("g-sup", leader.member_id))
        )
        await broker.wait_for_group(
            "g-sup", lambda v: v is not None and v.state == "PreparingRebalance"
        )
        again = asyncio.ensure_future(
            a2.request("JoinGroup", 5, join_values("g-sup", leader.member_id))
        )
        await broker.wait_until(lambda: broker.member_connections(leader.member_id) == 2)
        c_again = await c.request("JoinGroup", 5, join_values("g-sup", c_first.member_id))
        assert c_again.generation_id == 3
        assert (await again).generation_id == 3
        await asyncio.sleep(0.2)  # give a wrongly sent answer time to arrive
        assert not parked.done()
        parked.cancel()
    finally:
        for client in clients:
            await client.close()


async def test_kafka2_flavour_serves_kafka_23s_versions() -> None:
    config = CoordinatorConfig(flavour="kafka2")
    async with EmbeddedBroker(coordinator_config=config) as broker:
        async with RawClient(broker.bootstrap) as c:
            versions = await c.broker_versions()
            assert versions[11] == (0, 5) and versions[15] == (0, 3) and versions[14] == (0, 3)
            assert await c.version("DescribeGroups") == 3
            described = await c.request("DescribeGroups", None, {"groups": ["x"]})
            assert described.groups[0].group_state == "Dead"
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
        try:
            from aiogroup.testing import wire

            writer.write(wire.encode_request(15, 4, {"groups": ["x"]}, correlation_id=1))
            await writer.drain()
            assert await closed_by_peer(reader)  # as Kafka 2.3 does on DescribeGroups v4
        finally:
            writer.close()


@pytest.mark.parametrize(
    ("flavour", "listed"),
    [("kafka2", {}), ("kafka3", {18: (0, 4)}), ("kafka4", {18: (0, 4)})],
)
async def test_an_unknown_api_versions_version_per_flavour(
    flavour: str, listed: dict[int, tuple[int, int]]
) -> None:
    # KIP-511 (2.4): UNSUPPORTED_VERSION listing ApiVersions' own versions; Kafka 2.3 lists
    # nothing (live 2.3.0, 3.9.1 and 4.1.1 checked; the conformance scenario
    # api_versions_unsupported compares them).
    config = CoordinatorConfig(flavour=flavour)
    async with (
        EmbeddedBroker(coordinator_config=config) as broker,
        RawClient(broker.bootstrap) as c,
    ):
        frame = wire.encode_request(18, 3, {"client_software_name": "x"}, correlation_id=3)
        await c.send_raw(frame[:6] + (99).to_bytes(2, "big") + frame[8:])
        answer = wire.decode_response(18, 0, await c.read_frame())
        assert answer.error_code == 35
        got = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
        assert got == listed


async def test_sync_group_v5_without_protocol_type_or_name(broker: EmbeddedBroker) -> None:
    # KafkaApis: from v5 the protocol type and name are mandatory (INCONSISTENT_GROUP_PROTOCOL).
    async with RawClient(broker.bootstrap) as c:
        for missing in ("protocol_type", "protocol_name"):
            values = {
                "group_id": "g5",
                "generation_id": 1,
                "member_id": "m",
                "protocol_type": "consumer",
                "protocol_name": "range",
                "assignments": [],
            }
            values[missing] = None
            assert (await c.request("SyncGroup", 5, values)).error_code == 23


async def test_command_line_broker_takes_a_flavour() -> None:
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup.testing.embedded",
        "--port", "0", "--flavour", "kafka2",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        bootstrap = line.rsplit(" ", 1)[-1].strip()
        async with RawClient(bootstrap) as c:
            assert (await c.broker_versions())[11] == (0, 5)  # Kafka 2.3's JoinGroup
    finally:
        proc.terminate()
        await proc.wait()
