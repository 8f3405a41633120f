"""A record that arrives while the application waits is handed over at once (issue 29.3).

No timing is measured: every consumer here runs with ``fetch_max_wait_ms`` of ten minutes and
each record must reach the application within a bound far below it (and the test's timeout is
below it too). A consumer that waited for ``fetch_max_wait_ms`` anywhere (the broker holding
a Fetch that has its byte, the next Fetch leaving late, the waiting application not woken, one
broker's long poll holding another's records) fails instead of passing slowly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiogroup.consumer import Consumer, ConsumerRecord
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)
from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker, kafka_available

from .batches import COMMIT, control_batch
from .helpers import CONVERGE_S, consumer, make_topic, unique, wait_for

#: fetch_max_wait_ms of every consumer here: far longer than the test may take.
WAIT_MS = 600_000
#: How long a record may take to reach the waiting application (generous for a loaded
#: machine, and a tenth of WAIT_MS: waiting for a long poll to run out cannot pass).
HANDED_OVER_S = 60.0

pytestmark = pytest.mark.timeout(240)

TP = TopicPartition


def _skip_tansu(broker: BrokerHandle) -> None:
    if broker.kind == "tansu":
        pytest.skip(
            "Tansu answers a long poll on its own schedule, not when a record arrives "
            "(aiokafka waits as long there: 1.5 s with fetch_max_wait_ms=4000)"
        )


async def _producer(bootstrap: str) -> Any:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await producer.start()
    return producer


async def _ready(c: Consumer, partitions: list[TopicPartition]) -> None:
    """Joined, every partition assigned and its position known (so Fetches are in flight)."""
    await wait_for(lambda: c.assignment() == set(partitions), CONVERGE_S, "the assignment")
    for tp in partitions:
        assert await asyncio.wait_for(c.position(tp), CONVERGE_S) == 0


async def _next(c: Consumer, mode: str, it: AsyncIterator[ConsumerRecord]) -> ConsumerRecord:
    if mode == "getmany":
        batch = await c.getmany(timeout_ms=WAIT_MS)
        (records,) = batch.values()
        (record,) = records
        return record
    if mode == "getone":
        return await c.getone()
    return await anext(it)


async def _hand_over(
    c: Consumer, producer: Any, topic: str, partitions: list[int], mode: str
) -> None:
    """For each partition in turn: the application waits, one record is produced to it, and
    the application must get it at once."""
    it = aiter(c)
    for i, p in enumerate(partitions):
        reader = asyncio.ensure_future(_next(c, mode, it))
        try:
            # The application is waiting (nothing buffered) before the record is produced.
            await wait_for(lambda: c._polling > 0, CONVERGE_S, "the application to wait")
            assert not reader.done()
            await producer.send_and_wait(topic, b"r%d" % i, partition=p)
            record = await asyncio.wait_for(asyncio.shield(reader), HANDED_OVER_S)
        finally:
            reader.cancel()
        assert (record.partition, record.value) == (p, b"r%d" % i)


@pytest.mark.parametrize("mode", ["getmany", "getone", "async-for"])
async def test_a_record_is_handed_over_while_the_application_waits(
    kafka_broker: BrokerHandle,  # noqa: F811
    mode: str,
) -> None:
    """(a) the buffer empty and a long poll at the broker; (b, d) the next Fetch leaves as
    soon as an answer arrives, so every later record too; (c) records on one partition while
    the others stay quiet."""
    _skip_tansu(kafka_broker)
    topic = unique("t")
    make_topic(kafka_broker, topic, 3)
    producer = await _producer(kafka_broker.bootstrap)
    try:
        async with consumer(kafka_broker, unique("g"), [topic], fetch_max_wait_ms=WAIT_MS) as c:
            await _ready(c, [TP(topic, p) for p in range(3)])
            await _hand_over(c, producer, topic, [0, 0, 1, 2, 2, 0], mode)
    finally:
        await producer.stop()


async def test_a_record_on_one_broker_does_not_wait_for_another_brokers_long_poll() -> None:
    """(e) Two leaders on two Kafka 4.1.1 brokers: records on broker 2, again and again, while
    broker 1 holds its long poll for ten minutes."""
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        pytest.skip(reason)
    kafka = KafkaBroker(version=KAFKA4_VERSION, brokers=2)
    await asyncio.to_thread(kafka.start)
    try:
        topic = unique("t")
        await asyncio.to_thread(kafka.create_topic, topic, replicas=[[1], [2]])
        handle = BrokerHandle("kafka4", kafka.bootstrap, apache=kafka)
        producer = await _producer(kafka.bootstrap)
        try:
            async with consumer(handle, unique("g"), [topic], fetch_max_wait_ms=WAIT_MS) as c:
                await _ready(c, [TP(topic, 0), TP(topic, 1)])
                assert {c._state.leader(TP(topic, p))[0] for p in (0, 1)} == {1, 2}  # type: ignore[index]
                await _hand_over(c, producer, topic, [1, 1, 1, 0, 1], "getmany")
        finally:
            await producer.stop()
    finally:
        await asyncio.to_thread(kafka.stop)


async def test_responses_without_records_for_the_application_do_not_stop_fetching(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A buffered response holds its partition back from fetching (``max_buffered_responses``,
    one by default); when the application reads it and it held no record for it (transaction
    markers, aborted records) the partition must be fetched again at once, or the next record
    waits for some unrelated wake-up."""
    _skip_tansu(kafka_broker)
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    tp = TP(topic, 0)
    producer = await _producer(kafka_broker.bootstrap)
    try:
        async with consumer(kafka_broker, unique("g"), [topic], fetch_max_wait_ms=WAIT_MS) as c:
            plane: Any = c._fetcher._plane
            original = plane.fetch
            rewritten = 0

            async def markers_only(plan: Any) -> Any:
                # The first record comes back as a COMMIT marker at its offset.
                nonlocal rewritten
                response = await original(plan)
                parts = []
                for part in response.partitions:
                    if part.records and rewritten < 1:
                        rewritten += 1
                        (offset,) = struct.unpack_from(">q", part.records)
                        part = dataclasses.replace(part, records=control_batch(offset, 5, COMMIT))
                    parts.append(part)
                return dataclasses.replace(response, partitions=parts)

            plane.fetch = markers_only
            await _ready(c, [tp])
            state: Any = c._state
            # The application reads nothing while a response arrives: the partition is held back.
            await producer.send_and_wait(topic, b"marker-0", partition=0)
            await wait_for(lambda: len(state.get(tp).buffer) == 1, CONVERGE_S, "one buffered")
            assert rewritten == 1
            await producer.send_and_wait(topic, b"record", partition=0)
            batch = await asyncio.wait_for(c.getmany(timeout_ms=WAIT_MS), HANDED_OVER_S)
            assert [(r.offset, r.value) for r in batch[tp]] == [(1, b"record")]
    finally:
        await producer.stop()
