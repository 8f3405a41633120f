"""The consumer against injected faults on the embedded broker: corrupt batches, leader
errors, lost connections."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiogroup.consumer import ConsumerRecord, CorruptRecordError
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker, RawClient
from aiogroup.testing.fixtures import BrokerHandle, _embedded_config

from .batches import batch, corrupt
from .helpers import CONVERGE_S, by_partition, consumer, produce, read_until, unique

pytestmark = pytest.mark.timeout(120)

TP = TopicPartition


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    # CRCs are not checked on produce, so a corrupt batch can be stored and served.
    async with EmbeddedBroker(coordinator_config=_embedded_config(), verify_crc=False) as b:
        yield b


def handle(broker: EmbeddedBroker) -> BrokerHandle:
    return BrokerHandle("embedded", broker.bootstrap)


async def produce_raw(bootstrap: str, topic: str, partition: int, records: bytes) -> None:
    async with RawClient(bootstrap) as client:
        r = await client.request(
            "Produce",
            7,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": topic, "partition_data": [{"index": partition, "records": records}]}
                ],
            },
        )
    assert r.responses[0].partition_responses[0].error_code == 0


async def test_corrupt_batch_raises_with_partition_and_offset_others_keep_flowing(
    broker: EmbeddedBroker,
) -> None:
    topic = unique("t")
    broker.create_topic(topic, 2)
    tp0 = TP(topic, 0)
    await produce_raw(broker.bootstrap, topic, 0, batch([b"a0", b"a1"]))
    await produce_raw(broker.bootstrap, topic, 0, corrupt(batch([b"bad2", b"bad3"])))
    await produce_raw(broker.bootstrap, topic, 0, batch([b"a4"]))
    await produce(broker.bootstrap, topic, {1: 50})
    async with consumer(handle(broker), unique("g"), [topic], retry_backoff_ms=50) as c:
        records: list[ConsumerRecord] = []
        errors: list[CorruptRecordError] = []

        async def read() -> None:
            while len(errors) < 2 or len(records) < 52:
                try:
                    batch_ = await c.getmany(timeout_ms=200)
                except CorruptRecordError as exc:
                    errors.append(exc)
                    continue
                for rs in batch_.values():
                    records.extend(rs)

        await asyncio.wait_for(read(), CONVERGE_S)
        got = by_partition(records)
        assert got[TP(topic, 1)] == list(range(50))  # the other partition flowed
        assert got[tp0] == [0, 1]  # nothing past the corrupt batch
        assert all((e.partition, e.offset) == (tp0, 2) for e in errors)  # refetched, same error
        assert "CRC" in str(errors[0]) and f"{topic}-0" in str(errors[0])
        assert await c.position(tp0) == 2
        c.seek(tp0, 4)  # the application skips it
        after = await read_until(c, lambda rs: len(rs) >= 1)
        assert [(r.partition, r.offset, r.value) for r in after] == [(0, 4, b"a4")]


@pytest.mark.parametrize("code", [6, 74, 3])
async def test_leader_errors_refresh_metadata_and_lose_nothing(
    broker: EmbeddedBroker, code: int
) -> None:
    topic = unique("t")
    broker.create_topic(topic, 3)
    await produce(broker.bootstrap, topic, {0: 100, 1: 100, 2: 100})
    async with consumer(handle(broker), unique("g"), [topic]) as c:
        first = await read_until(c, lambda rs: len(rs) >= 300)
        calls = 0
        plane: Any = c._fetcher._plane
        original = plane.metadata

        async def counted(topics: Any) -> Any:
            nonlocal calls
            calls += 1
            return await original(topics)

        plane.metadata = counted
        broker.faults.fail("Fetch", code, count=3)
        await produce(broker.bootstrap, topic, {0: 100, 1: 100, 2: 100})
        second = await read_until(c, lambda rs: len(rs) >= 300)
        assert calls >= 1  # NOT_LEADER / FENCED_LEADER_EPOCH / UNKNOWN_TOPIC: ask again
    assert sorted(by_partition(first + second).items()) == [
        (TP(topic, p), list(range(200))) for p in range(3)
    ]


async def test_lost_connections_mid_fetch_lose_and_repeat_nothing(broker: EmbeddedBroker) -> None:
    topic = unique("t")
    broker.create_topic(topic, 2)
    async with consumer(handle(broker), unique("g"), [topic], client_id="cut-me") as c:
        await produce(broker.bootstrap, topic, {0: 500, 1: 500})
        records = await read_until(c, lambda rs: len(rs) >= 100, max_records=50)
        for _ in range(3):
            broker.faults.cut(client_id="cut-me")
            records += await read_until(c, lambda rs: len(rs) >= 50, max_records=50)
        records += await read_until(c, lambda rs: len(records) + len(rs) >= 1000)
    assert sorted(by_partition(records).items()) == [
        (TP(topic, 0), list(range(500))),
        (TP(topic, 1), list(range(500))),
    ]
