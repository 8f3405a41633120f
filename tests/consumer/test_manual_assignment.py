"""Manual assignment (``Consumer.assign``) and ``enforce_rebalance``, on the embedded broker,
Apache Kafka 4.1.1 and (the smoke cases) Kafka 2.3: ``-k 'embedded or kafka4 or kafka23'``.

A manually assigned consumer never talks to a group coordinator to read: the proof is what
the client sent (its transport, on every broker) and what the embedded broker received."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import Any

import pytest

from aiogroup import Consumer
from aiogroup.client.transport import Request
from aiogroup.errors import GroupIdRequiredError, IllegalStateError, LocalProtocolError
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from .helpers import (
    CONVERGE_S,
    by_partition,
    consumer,
    make_topic,
    produce,
    read_until,
    unique,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

TP = TopicPartition
GROUP_APIS = {"FindCoordinator", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"}


def assigned(broker: BrokerHandle, group: str | None, **options: Any) -> Consumer:
    settings: dict[str, Any] = {
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 10_000,
        "client_id": unique("manual"),
    }
    settings.update(options)
    return Consumer(broker.bootstrap, group, **settings)


def spy(c: Consumer) -> Counter[str]:
    """Count the requests the consumer's transport sends, by API (every broker kind)."""
    sent: Counter[str] = Counter()
    transport = c.member.transport
    send = transport.send

    async def counted(node_id: int | None, request: Request, **kw: Any) -> Any:
        sent[request.api] += 1
        return await send(node_id, request, **kw)

    transport.send = counted  # type: ignore[method-assign]
    return sent


def received(broker: BrokerHandle, client_id: str) -> Counter[str]:
    """What the embedded broker received from ``client_id``, by API."""
    embedded = broker.embedded
    assert embedded is not None
    counts = embedded.call(lambda: dict(embedded.broker.requests))
    return Counter({api: n for (client, api), n in counts.items() if client == client_id})


async def test_assign_reads_without_any_group_traffic(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 3)
    await produce(kafka_broker.bootstrap, topic, {0: 30, 1: 20, 2: 10})
    p0, p1, p2 = TP(topic, 0), TP(topic, 1), TP(topic, 2)
    c = assigned(kafka_broker, None)
    c.assign([p0, p1])  # before start: applied when it starts
    sent = spy(c)
    async with c:
        assert c.assignment() == {p0, p1}
        records = await read_until(c, lambda rs: len(rs) >= 50)
        assert by_partition(records) == {p0: list(range(30)), p1: list(range(20))}
        assert await c.position(p0) == 30 and c.highwater(p1) == 20
        if kafka_broker.kind != "tansu":  # Tansu's ListOffsets(latest) is off (docs/consumer.md)
            assert await c.end_offsets([p0, p2]) == {p0: 30, p2: 10}
        c.seek(p1, 18)
        assert [(r.partition, r.offset) for r in await read_until(c, lambda rs: len(rs) >= 2)] == [
            (1, 18),
            (1, 19),
        ]
        assert await c.seek_to_beginning(p0)
        c.pause(p1)
        one = await c.getone()
        assert (one.partition, one.offset) == (0, 0)
        c.resume(p1)
        async for record in c:  # the iteration works too
            assert (record.partition, record.offset) == (0, 1)
            break
        # Nothing of a group: no group id to commit to, nothing to rebalance.
        with pytest.raises(GroupIdRequiredError, match="group_id"):
            await c.commit()
        with pytest.raises(GroupIdRequiredError):
            await c.committed(p0)
        with pytest.raises(IllegalStateError, match="manual assignment"):
            c.enforce_rebalance()
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            c.subscribe([topic])
        assert c.member.generation_id == -1 and c.member.member_id == ""
    assert sent["Fetch"] > 0 and sent["ListOffsets"] > 0
    assert not GROUP_APIS & (+sent).keys() and sent["OffsetFetch"] == sent["OffsetCommit"] == 0
    if kafka_broker.embedded is not None:
        seen = received(kafka_broker, c.client_id)
        assert seen["Fetch"] > 0
        assert not (GROUP_APIS | {"OffsetFetch", "OffsetCommit"}) & (+seen).keys(), seen


async def test_assign_with_a_group_commits_as_a_simple_member(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 2)
    await produce(kafka_broker.bootstrap, topic, {0: 12, 1: 5})
    p0, p1 = TP(topic, 0), TP(topic, 1)
    c = assigned(kafka_broker, group, enable_auto_commit=False)
    sent = spy(c)
    async with c:
        c.assign([p0, p1])
        await read_until(c, lambda rs: len(rs) >= 17)
        c.seek(p1, 3)
        await c.commit()  # the positions: 12 and 3
        await c.commit({p0: 10})
        assert await c.committed(p0) == 10 and await c.committed(p1) == 3
    assert sent["OffsetCommit"] == 2 and sent["FindCoordinator"] >= 1
    assert sent["JoinGroup"] == sent["SyncGroup"] == sent["Heartbeat"] == 0
    if kafka_broker.embedded is not None:
        seen = received(kafka_broker, c.client_id)
        assert seen["OffsetCommit"] == 2 and seen["JoinGroup"] == seen["Heartbeat"] == 0
    # A fresh consumer of the group sees the commits and starts there; auto-commit on close.
    async with assigned(kafka_broker, group, auto_commit_interval_ms=3_600_000) as fresh:
        fresh.assign([p0, p1])
        assert await fresh.committed(p0) == 10
        records = await read_until(fresh, lambda rs: len(rs) >= 4)
        assert by_partition(records) == {p0: [10, 11], p1: [3, 4]}
    async with assigned(kafka_broker, group) as third:
        assert await third.committed(p0) == 12 and await third.committed(p1) == 5


@pytest.mark.parametrize("kafka_broker", ["embedded", "kafka4"], indirect=True)
async def test_auto_commit_on_its_interval_for_a_manual_assignment(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 1)
    await produce(kafka_broker.bootstrap, topic, {0: 8})
    tp = TP(topic, 0)
    async with assigned(kafka_broker, group, auto_commit_interval_ms=100) as c:
        c.assign([tp])
        await read_until(c, lambda rs: len(rs) >= 8)
        assert await c.getmany(timeout_ms=10) == {}  # the 8 records are processed

        async def committed() -> Any:
            return await c.committed(tp) == 8

        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONVERGE_S
        while not await committed():
            assert loop.time() < deadline, "no auto-commit"
            await asyncio.sleep(0.05)  # polling a condition with a bound


@pytest.mark.parametrize("kafka_broker", ["embedded", "kafka4"], indirect=True)
async def test_reassign_keeps_kept_positions_and_forgets_dropped_ones(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 3)
    await produce(kafka_broker.bootstrap, topic, {0: 5, 1: 5, 2: 5})
    p0, p1, p2 = TP(topic, 0), TP(topic, 1), TP(topic, 2)
    async with assigned(kafka_broker, group, enable_auto_commit=False) as c:
        c.assign([p0, p1])
        await read_until(c, lambda rs: len(rs) >= 10)
        c.seek(p1, 2)
        c.assign([p1, p2])
        assert c.assignment() == {p1, p2}
        assert await c.position(p1) == 2  # kept
        with pytest.raises(LocalProtocolError, match="not assigned"):
            await c.position(p0)  # forgotten
        records = await read_until(c, lambda rs: len(rs) >= 8)
        assert by_partition(records) == {p1: [2, 3, 4], p2: [0, 1, 2, 3, 4]}
        c.assign([])  # unassigns: the consumer may subscribe now
        assert c.assignment() == set()
        c.subscribe([topic])
        with pytest.raises(IllegalStateError, match="mutually exclusive"):
            c.assign([p0])
        await wait_for(lambda: c.assignment() == {p0, p1, p2}, CONVERGE_S, "the group")


async def test_assign_and_subscribe_are_mutually_exclusive() -> None:
    tp = TP("orders", 0)
    subscribed = Consumer("127.0.0.1:1", "g", topics=["orders"])
    with pytest.raises(IllegalStateError, match=r"mutually exclusive.*subscribed"):
        subscribed.assign([tp])
    manual = Consumer("127.0.0.1:1", "g")
    manual.assign([tp])
    with pytest.raises(IllegalStateError, match=r"mutually exclusive.*manual assignment"):
        manual.subscribe(["orders"])
    with pytest.raises(IllegalStateError, match=r"enforce_rebalance.*manual assignment"):
        manual.enforce_rebalance("why not")
    manual.assign([])
    manual.subscribe(["orders"])  # allowed once unassigned
    with pytest.raises(GroupIdRequiredError, match="group_id"):
        Consumer("127.0.0.1:1", None, topics=["orders"])
    nameless = Consumer("127.0.0.1:1", None)
    with pytest.raises(IllegalStateError, match="no group_id"):
        nameless.enforce_rebalance()
    with pytest.raises(GroupIdRequiredError, match="group_id"):
        nameless.subscribe(["orders"])


@pytest.mark.parametrize("kafka_broker", ["embedded", "kafka4"], indirect=True)
async def test_a_topic_that_does_not_exist_yet_gives_nothing_until_it_does(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic = unique("t")
    tp = TP(topic, 0)
    async with assigned(kafka_broker, None) as c:
        c.assign([tp])
        assert await c.getmany(timeout_ms=1000) == {}  # no error: Java's behaviour
        make_topic(kafka_broker, topic, 1)
        await produce(kafka_broker.bootstrap, topic, {0: 3})
        records = await read_until(c, lambda rs: len(rs) >= 3)
        assert [r.offset for r in records] == [0, 1, 2]


@pytest.mark.parametrize("kafka_broker", ["embedded", "kafka4"], indirect=True)
async def test_enforce_rebalance_makes_one_new_generation_with_the_reason(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 2)
    async with consumer(kafka_broker, group, [topic]) as c:
        member = c.member
        await wait_for(
            lambda: member.state is MemberState.STABLE and len(c.assignment()) == 2,
            CONVERGE_S,
            "the first generation",
        )
        first, rounds = member.generation_id, len(member.outcomes)
        c.enforce_rebalance("a test asked for it")
        await wait_for(
            lambda: member.generation_id > first and member.state is MemberState.STABLE,
            CONVERGE_S,
            "the enforced rebalance",
        )
        assert member.generation_id == first + 1
        assert len(member.outcomes) == rounds + 1
        assert c.assignment() == {TP(topic, 0), TP(topic, 1)}
    if kafka_broker.embedded is not None:
        embedded = kafka_broker.embedded
        reasons = embedded.call(lambda: list(embedded.broker.join_reasons))
        assert (group, "a test asked for it") in reasons


async def test_enforce_rebalance_under_the_consumer_protocol_is_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from aiogroup.testing import EmbeddedBroker

    async with EmbeddedBroker(topics={"orders": 1}) as broker:
        c = Consumer(broker.bootstrap, "g", group_protocol="consumer")
        async with c:
            with caplog.at_level(logging.WARNING, "aiogroup"):
                c.enforce_rebalance("ignored")
                await wait_for(
                    lambda: "not supported by the consumer group protocol" in caplog.text,
                    CONVERGE_S,
                    "the warning",
                )
