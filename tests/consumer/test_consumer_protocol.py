"""``group_protocol="consumer"`` (KIP-848) end to end on the embedded broker and on Apache Kafka
4.1.1, the same scenarios on both: aiogroup Consumers alone (join, a second joins and only what
moves is revoked while the kept partitions keep flowing, leave, a static member's restart), a
member whose heartbeats stop past the session (lost, then rejoined), a regex subscription
evaluated by the broker; and the clear error on a broker without KIP-848 (the embedded broker
with the ``kafka3`` flavour, Kafka 2.3)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aiogroup import Consumer, GroupMember
from aiogroup.errors import UnsupportedApiVersionError
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from .helpers import Callbacks, Reader, make_topic, produce, unique, wait_for

pytestmark = pytest.mark.timeout(240)

#: The group's session and heartbeat interval on the broker (KIP-848: the broker's, per group);
#: the members' session_timeout_ms matches it, as docs/consumer-protocol.md advises.
SESSION_MS = 6000
INTERVAL_MS = 300
CONVERGE_S = 60.0


#: The brokers serving KIP-848 the scenarios run on.
KIP848_BROKERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]
on_kip848_brokers = pytest.mark.parametrize("kafka_broker", KIP848_BROKERS, indirect=True)


def fast_group(broker: BrokerHandle, group: str) -> None:
    """Give ``group`` a short session and heartbeat interval (a group config, Kafka 4.x)."""
    if broker.embedded is not None:
        broker.embedded.set_group_config(
            group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=INTERVAL_MS
        )
        return
    assert broker.apache is not None
    broker.apache.run_tool(
        "kafka-configs", "--bootstrap-server", broker.bootstrap, "--alter",
        "--entity-type", "groups", "--entity-name", group, "--add-config",
        f"consumer.session.timeout.ms={SESSION_MS},consumer.heartbeat.interval.ms={INTERVAL_MS}",
    )  # fmt: skip


def kip848(broker: BrokerHandle, group: str, topics: list[str], **options: Any) -> Consumer:
    settings: dict[str, Any] = {
        "group_protocol": "consumer",
        "session_timeout_ms": SESSION_MS,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 10_000,
        "close_timeout_s": 20,
    }
    settings.update(options)
    return Consumer(broker.bootstrap, group, topics=topics, **settings)


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


async def poll(consumer: Consumer, condition: Callable[[], Any], what: str) -> None:
    """Keep ``consumer`` asking for records (a revocation waits for it) until ``condition``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CONVERGE_S
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await consumer.getmany(timeout_ms=50)


@on_kip848_brokers
async def test_join_share_and_leave_revoking_only_what_moves(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    fast_group(kafka_broker, group)
    await produce(kafka_broker.bootstrap, topic, dict.fromkeys(range(6), 30))
    calls_a, calls_b = Callbacks(), Callbacks()
    async with kip848(kafka_broker, group, [topic], listener=calls_a) as a:
        assert a.member.group_protocol == "consumer" and not a.member.is_leader
        reader = Reader(a, "a").start()
        await wait_for(lambda: len(reader.records) == 180, CONVERGE_S, "a reads everything")
        assert owned(a) == set(range(6)) and a.member.generation_id > 0
        kept_before = len(reader.records)
        async with kip848(kafka_broker, group, [topic], listener=calls_b) as b:
            await produce(kafka_broker.bootstrap, topic, dict.fromkeys(range(6), 20))
            await poll(b, lambda: len(owned(a)) == 3 and len(owned(b)) == 3, "a 3/3 split")
            assert owned(a).isdisjoint(owned(b))
            # Only what moved was revoked from a; a was never handed its own partitions back.
            revoked = {tp.partition for ps in calls_a.revoked for tp in ps}
            assert revoked == set(range(6)) - owned(a) and not calls_a.lost
            assert {tp.partition for ps in calls_b.assigned for tp in ps} == owned(b)
            # The kept partitions' records flowed on through the move.
            kept = {TopicPartition(topic, p) for p in owned(a)}
            await wait_for(
                lambda: sum(1 for _, tp, _ in reader.records[kept_before:] if tp in kept) >= 60,
                CONVERGE_S,
                "a's kept partitions keep flowing",
            )
            assert b.member.state is MemberState.STABLE
            await reader.stop()
            b_owned = owned(b)
        # b left (epoch -1): its partitions come back to a at once.
        await poll(a, lambda: owned(a) == set(range(6)), "a owning everything again")
        assert not calls_a.lost and not calls_b.lost
        assert {tp.partition for tp in calls_b.revoked[-1]} == b_owned  # revoked as it left


@on_kip848_brokers
async def test_commits_carry_the_epoch_and_a_restart_reads_on_from_them(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 2)
    fast_group(kafka_broker, group)
    await produce(kafka_broker.bootstrap, topic, {0: 10, 1: 10})
    async with kip848(kafka_broker, group, [topic], enable_auto_commit=False) as c:
        await wait_for(lambda: len(owned(c)) == 2, CONVERGE_S, "assigned")
        batch: dict[TopicPartition, list[Any]] = {}
        while sum(len(v) for v in batch.values()) < 20:
            for tp, rs in (await c.getmany(timeout_ms=200)).items():
                batch.setdefault(tp, []).extend(rs)
        await c.commit({TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 4})
        committed = await c.member.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert committed == {TopicPartition(topic, 0): 7, TopicPartition(topic, 1): 4}
    async with kip848(kafka_broker, group, [topic]) as again:
        first = await again.getone()
        assert (first.partition, first.offset) in {(0, 7), (1, 4)}


@on_kip848_brokers
async def test_a_static_member_restarting_keeps_its_partitions(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 4)
    fast_group(kafka_broker, group)
    async with kip848(kafka_broker, group, [topic], group_instance_id="static-b") as a:
        await wait_for(lambda: len(owned(a)) == 4, CONVERGE_S, "a owning everything")
        b = kip848(kafka_broker, group, [topic], group_instance_id="static-a")
        await b.start()
        await poll(a, lambda: len(owned(a)) == 2 and len(owned(b)) == 2, "a 2/2 split")
        before = owned(b)
        await b.close()  # epoch -2: the broker keeps b's partitions for its return
        b2 = kip848(kafka_broker, group, [topic], group_instance_id="static-a")
        await b2.start()
        try:
            await wait_for(lambda: owned(b2) == before, CONVERGE_S, "b back with its partitions")
            assert len(owned(a)) == 2  # a was never given b's partitions meanwhile
        finally:
            await b2.close()


@on_kip848_brokers
async def test_a_member_whose_heartbeats_stop_reports_lost_and_rejoins(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 4)
    fast_group(kafka_broker, group)
    calls = Callbacks()
    opts: dict[str, Any] = {
        "group_protocol": "consumer",
        "session_timeout_ms": SESSION_MS,
        "request_timeout_ms": 20_000,
    }
    a = GroupMember(kafka_broker.bootstrap, group, topics=[topic], listener=calls, **opts)
    b = GroupMember(kafka_broker.bootstrap, group, topics=[topic], **opts)
    async with a, b:
        await wait_for(lambda: len(a.assignment) == 2 and len(b.assignment) == 2, CONVERGE_S, "2/2")
        mine = a.assignment
        # A scripted fault: a's heartbeats hang (as a process paused past its session would).
        transport: Any = a.transport
        original: Callable[..., Awaitable[Any]] = transport.consumer_group_heartbeat
        resume = asyncio.Event()

        async def stuck(**kw: Any) -> Any:
            await resume.wait()
            return await original(**kw)

        transport.consumer_group_heartbeat = stuck
        # From the session deadline on, a acts on nothing; then it reports its partitions lost.
        await wait_for(lambda: calls.lost, SESSION_MS / 1000 * 3, "a reporting lost")
        assert calls.lost[-1] == mine and a.assignment == frozenset()
        # The broker fenced a too and gave its partitions to b.
        await wait_for(lambda: len(b.assignment) == 4, CONVERGE_S, "b owning everything")
        transport.consumer_group_heartbeat = original
        resume.set()
        # a rejoined with epoch 0 and gets its share again.
        await wait_for(
            lambda: len(a.assignment) == 2 and len(b.assignment) == 2, CONVERGE_S, "rejoined"
        )
        assert a.assignment.isdisjoint(b.assignment)


@on_kip848_brokers
async def test_a_regex_is_evaluated_by_the_broker(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    prefix = unique("rx").replace("-", "_")
    group = unique("g")
    make_topic(kafka_broker, f"{prefix}-one", 2)
    make_topic(kafka_broker, f"{prefix}-two", 1)
    make_topic(kafka_broker, f"other_{prefix}", 1)
    fast_group(kafka_broker, group)
    member = GroupMember(
        kafka_broker.bootstrap, group, pattern=rf"{prefix}-(one|two)\Z",
        group_protocol="consumer", group_remote_assignor="range",
    )  # fmt: skip
    async with member:
        await wait_for(lambda: len(member.assignment) == 3, CONVERGE_S, "both topics assigned")
        assert {tp.topic for tp in member.assignment} == {f"{prefix}-one", f"{prefix}-two"}


async def refuses_kip848(bootstrap: str, topic: str) -> None:
    member = GroupMember(bootstrap, unique("g"), topics=[topic], group_protocol="consumer")
    await member.start()
    try:
        with pytest.raises(UnsupportedApiVersionError) as caught:
            await member.wait_for_assignment(30)
        assert member.state is MemberState.FATAL  # never a silent fall back to classic
    finally:
        await member.close()
    words = str(caught.value)
    assert "ConsumerGroupHeartbeat (KIP-848)" in words and "Kafka 4.0+" in words
    assert "use group_protocol='classic'" in words
    final: MemberState = member.state  # (read again: the close moved it on)
    assert final is MemberState.CLOSED


@pytest.mark.parametrize(
    "config",
    [
        # Kafka 3.x: no KIP-848 unless the flag is on; with it (3.7-3.9), only v0, before the
        # client-generated member id (KIP-1082); Kafka 4 with the consumer protocol turned off.
        pytest.param(CoordinatorConfig(flavour="kafka3"), id="kafka3"),
        pytest.param(CoordinatorConfig(flavour="kafka3", consumer_protocol=True), id="kafka3-v0"),
        pytest.param(CoordinatorConfig(consumer_protocol=False), id="kafka4-classic-only"),
    ],
)
async def test_an_embedded_broker_without_kip848_v1_is_a_clear_error(
    config: CoordinatorConfig,
) -> None:
    topic = unique("t")
    with ThreadedBroker(coordinator_config=config, topics={topic: 1}) as broker:
        await refuses_kip848(broker.bootstrap, topic)


@pytest.mark.parametrize(
    "kafka_broker", [pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23)],
    indirect=True,
)  # fmt: skip
async def test_kafka23_is_a_clear_error(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    await refuses_kip848(kafka_broker.bootstrap, topic)


@on_kip848_brokers
async def test_a_classic_group_upgrades_online_and_downgrades_back(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A classic Consumer (``range``) alone; a ``group_protocol="consumer"`` Consumer joins:
    the group becomes a consumer group and both share the partitions (the classic one as a
    classic member of it); the second leaves: a classic group again, the first owns all."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    fast_group(kafka_broker, group)
    classic = Consumer(
        kafka_broker.bootstrap, group, topics=[topic], assignors=["range"],
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=INTERVAL_MS,
        fetch_max_wait_ms=100, close_timeout_s=20,
    )  # fmt: skip
    async with classic:
        await poll(classic, lambda: len(owned(classic)) == 6, "the classic member owning all")
        async with kip848(kafka_broker, group, [topic]) as modern:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CONVERGE_S
            while not (len(owned(classic)) == 3 and len(owned(modern)) == 3):
                assert loop.time() < deadline, "timed out waiting for a 3/3 split"
                await asyncio.gather(classic.getmany(timeout_ms=50), modern.getmany(timeout_ms=50))
            assert owned(classic).isdisjoint(owned(modern))
            if kafka_broker.embedded is not None:
                view = kafka_broker.embedded.consumer_group(group)
                assert view is not None and {m.uses_classic_protocol for m in view.members} == {
                    True, False,
                }  # fmt: skip
        await poll(classic, lambda: len(owned(classic)) == 6, "the classic member owning all again")
        if kafka_broker.embedded is not None:
            assert kafka_broker.embedded.consumer_group(group) is None  # downgraded
            assert kafka_broker.embedded.group(group) is not None


@on_kip848_brokers
async def test_a_group_an_aiogroup_cooperative_leader_marks_upgrades_online(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """An aiogroup cooperative-sticky leader marks its assignments (hand-off awareness) with
    entries no topic can be named after, not with user data, which Kafka 4.1's online upgrade
    refuses ("userData from a custom assignor would be lost"): a consumer-protocol member
    joins such a group, the group becomes a consumer group, the classic member keeps what
    does not move and gives up only the rest."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 4)
    fast_group(kafka_broker, group)
    classic = Consumer(
        kafka_broker.bootstrap, group, assignors=["cooperative-sticky"],
        session_timeout_ms=SESSION_MS, heartbeat_interval_ms=INTERVAL_MS,
        fetch_max_wait_ms=100, close_timeout_s=20,
    )  # fmt: skip
    calls = Callbacks()
    classic.subscribe([topic], listener=calls)
    async with classic:
        await poll(classic, lambda: len(owned(classic)) == 4, "the classic member owning all")
        if kafka_broker.embedded is not None:
            view = kafka_broker.embedded.group(group)
            assert view is not None
            assert any(b"aiogroup:hand-off/1" in (m.assignment or b"") for m in view.members), (
                "the leader wrote no mark: this test would prove nothing"
            )
        before = owned(classic)
        async with kip848(kafka_broker, group, [topic]) as modern:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + CONVERGE_S
            while not (len(owned(classic)) == 2 and len(owned(modern)) == 2):
                assert loop.time() < deadline, "timed out waiting for a 2/2 split"
                await asyncio.gather(classic.getmany(timeout_ms=50), modern.getmany(timeout_ms=50))
            assert owned(classic).isdisjoint(owned(modern))
            # Cooperative all along: only what moved was revoked, nothing lost.
            assert {tp.partition for tp in set().union(*calls.revoked)} == before - owned(classic)
            assert not calls.lost
            if kafka_broker.embedded is not None:
                assert kafka_broker.embedded.consumer_group(group) is not None  # upgraded
