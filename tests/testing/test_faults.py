"""Fault injection on the embedded broker: delay, drop, fail, cut, restart, inspection."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.rules import CoordinatorConfig

pytestmark = pytest.mark.timeout(60)

CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with EmbeddedBroker(topics={"t": 2}, coordinator_config=CONFIG) as b:
        yield b


async def join_alone(client: RawClient, group: str, instance: str | None = None) -> tuple[str, int]:
    """Join ``group`` as its only member and sync; returns (member_id, generation)."""
    member_id = ""
    for _ in range(2):
        resp = await client.request(
            "JoinGroup",
            5,
            {
                "group_id": group,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": member_id,
                "group_instance_id": instance,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x01"}],
            },
        )
        member_id = resp.member_id
        if resp.error_code == 79:  # MEMBER_ID_REQUIRED (KIP-394): retry with the given id
            continue
        assert resp.error_code == 0, resp
        break
    sync = await client.request(
        "SyncGroup",
        3,
        {
            "group_id": group,
            "generation_id": resp.generation_id,
            "member_id": member_id,
            "group_instance_id": instance,
            "assignments": [{"member_id": member_id, "assignment": b"\x00\x01"}],
        },
    )
    assert sync.error_code == 0
    return member_id, resp.generation_id


async def heartbeat(client: RawClient, group: str, member_id: str, generation: int) -> int:
    resp = await client.request(
        "Heartbeat", 3, {"group_id": group, "generation_id": generation, "member_id": member_id}
    )
    return int(resp.error_code)


async def test_delay_holds_only_the_matching_response(broker: EmbeddedBroker) -> None:
    async with (
        RawClient(broker.bootstrap, client_id="slow") as slow,
        RawClient(broker.bootstrap, client_id="fast") as fast,
    ):
        rule = broker.faults.delay("Metadata", 1.0, client_id="slow")
        done: list[str] = []

        async def ask(client: RawClient, name: str) -> None:
            await client.request("Metadata", 12, {"topics": None})
            done.append(name)

        slow_task = asyncio.create_task(ask(slow, "slow"))
        await ask(fast, "fast")
        assert done == ["fast"]  # the later, unfaulted request overtook the delayed one
        await slow_task
        assert done == ["fast", "slow"]
        (event,) = broker.faults.events_of("delay")
        assert (event.api, event.client_id, event.rule_id) == ("Metadata", "slow", rule.rule_id)
        assert not broker.faults.rules  # consumed


async def test_count_limits_how_many_responses_are_hit(broker: EmbeddedBroker) -> None:
    broker.faults.fail("Metadata", 5, count=2)  # LEADER_NOT_AVAILABLE
    async with RawClient(broker.bootstrap) as client:
        codes = []
        for _ in range(3):
            meta = await client.request("Metadata", 12, {"topics": [{"name": "t"}]})
            codes.append((meta.topics[0].error_code, meta.topics[0].partitions[0].error_code))
    assert codes == [(5, 5), (5, 5), (0, 0)]
    assert len(broker.faults.events_of("fail")) == 2


async def test_drop_processes_the_request_but_never_answers(broker: EmbeddedBroker) -> None:
    broker.faults.drop("CreateTopics")
    async with RawClient(broker.bootstrap) as client:
        with pytest.raises(TimeoutError):
            await client.request(
                "CreateTopics",
                5,
                {"topics": [{"name": "new", "num_partitions": 3, "replication_factor": 1}]},
                timeout=0.5,
            )
    assert len(broker.log.topics["new"].partitions) == 3
    assert broker.faults.events_of("drop")[0].api == "CreateTopics"


async def test_fail_group_api_is_not_seen_by_the_coordinator(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap, client_id="a") as a:
        member, generation = await join_alone(a, "g")
        broker.faults.fail("Heartbeat", 27, member_id=member)
        assert await heartbeat(a, "g", member, generation) == 27
        assert await heartbeat(a, "g", member, generation) == 0
        view = broker.faults.group_state("g")
        assert view is not None and view.state == "Stable"
        assert broker.faults.generation("g") == generation


async def test_member_filter_spares_other_members(broker: EmbeddedBroker) -> None:
    async with (
        RawClient(broker.bootstrap, client_id="a") as a,
        RawClient(broker.bootstrap, client_id="b") as b,
    ):
        ma, ga = await join_alone(a, "ga")
        mb, gb = await join_alone(b, "gb")
        broker.faults.fail("Heartbeat", 25, member_id=mb, count=3)
        assert await heartbeat(a, "ga", ma, ga) == 0
        assert await heartbeat(b, "gb", mb, gb) == 25
        assert await heartbeat(a, "ga", ma, ga) == 0
        events = broker.faults.events_of("fail")
        assert [e.member_id for e in events] == [mb]


async def test_fail_commit_sets_every_partition_error(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap) as client:
        member, generation = await join_alone(client, "g")
        broker.faults.fail("OffsetCommit", 27)
        commit = {
            "group_id": "g",
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "topics": [
                {
                    "name": "t",
                    "partitions": [
                        {"partition_index": 0, "committed_offset": 5, "committed_metadata": ""},
                        {"partition_index": 1, "committed_offset": 7, "committed_metadata": ""},
                    ],
                }
            ],
        }
        failed = await client.request("OffsetCommit", 8, commit)
        assert [p.error_code for p in failed.topics[0].partitions] == [27, 27]
        ok = await client.request("OffsetCommit", 8, commit)
        assert [p.error_code for p in ok.topics[0].partitions] == [0, 0]


async def test_cut_closes_a_members_connections_only(broker: EmbeddedBroker) -> None:
    async with (
        RawClient(broker.bootstrap, client_id="victim") as victim,
        RawClient(broker.bootstrap, client_id="other") as other,
    ):
        member, _ = await join_alone(victim, "g")
        assert broker.faults.cut(member_id=member) == 1
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await victim.request("Metadata", 12, {"topics": None}, timeout=5)
        assert (await other.request("Metadata", 12, {"topics": None})).topics
        assert broker.faults.cut(client_id="other") == 1
        assert broker.faults.events_of("cut")[0].detail == "1 connections"


async def test_restart_keeps_port_topics_and_committed_offsets(broker: EmbeddedBroker) -> None:
    port = broker.port
    async with RawClient(broker.bootstrap) as client:
        await client.request(
            "OffsetCommit",
            8,
            {
                "group_id": "simple",
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [
                    {
                        "name": "t",
                        "partitions": [
                            {
                                "partition_index": 1,
                                "committed_offset": 42,
                                "committed_metadata": "m",
                            }
                        ],
                    }
                ],
            },
        )
    await broker.restart()
    assert broker.port == port
    async with RawClient(broker.bootstrap) as client:
        meta = await client.request("Metadata", 12, {"topics": None})
        assert [t.name for t in meta.topics] == ["t"]
        fetched = await client.request(
            "OffsetFetch",
            7,
            {"group_id": "simple", "topics": [{"name": "t", "partition_indexes": [1]}]},
        )
        assert fetched.topics[0].partitions[0].committed_offset == 42
    actions = [e.action for e in broker.faults.events]
    assert actions[-3:] == ["restart", "stop", "start"]


async def test_restart_cuts_open_connections(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap) as client:
        await client.request("ApiVersions", 0, {})
        await broker.restart()
        with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
            await client.request("ApiVersions", 0, {}, timeout=5)


def test_arming_rejects_nonsense() -> None:
    broker = EmbeddedBroker()
    with pytest.raises(ConfigurationError):
        broker.faults.fail("NoSuchApi", 27)
    with pytest.raises(ConfigurationError):
        broker.faults.fail("Heartbeat", 0)
    with pytest.raises(ConfigurationError):
        broker.faults.delay(4, 1.0)
    with pytest.raises(ConfigurationError):
        broker.faults.drop("Fetch", count=0)
    with pytest.raises(ConfigurationError):
        broker.faults.cut()
