"""read_committed against a transactional producer (KIP-98), on brokers with transactions."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from .helpers import CONVERGE_S, consumer, make_topic, read_until, unique, wait_for

pytestmark = pytest.mark.timeout(180)

TP = TopicPartition


async def _transactional(bootstrap: str) -> Any:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=unique("tx"), linger_ms=1
    )
    try:
        await asyncio.wait_for(producer.start(), 60)
    except BaseException:
        await producer.stop()
        raise
    return producer


async def test_read_committed_skips_aborted_and_stops_at_the_last_stable_offset(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    if kafka_broker.kind == "embedded":
        pytest.skip(
            "the embedded broker has no transactions (no AddPartitionsToTxn/EndTxn/markers); "
            "read_committed decoding is unit-tested in test_records.py"
        )
    from aiokafka import AIOKafkaProducer

    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    tp = TP(topic, 0)
    try:
        tx = await _transactional(kafka_broker.bootstrap)
    except Exception as exc:
        pytest.skip(f"{kafka_broker.kind} cannot run a transactional producer: {exc!r}")
    plain = AIOKafkaProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=1)
    await plain.start()
    try:
        async with tx.transaction():
            for i in range(3):
                await tx.send(topic, b"committed-%d" % i, partition=0)
        await tx.begin_transaction()
        for i in range(3):
            await tx.send(topic, b"aborted-%d" % i, partition=0)
        await tx.abort_transaction()
        await plain.send_and_wait(topic, b"plain-0", partition=0)
        await tx.begin_transaction()  # left open: the last stable offset stops before it
        await tx.send_and_wait(topic, b"open-0", partition=0)
        await plain.send_and_wait(topic, b"plain-1", partition=0)

        async with (
            consumer(
                kafka_broker, unique("g"), [topic], isolation_level="read_committed"
            ) as committed,
            consumer(kafka_broker, unique("g"), [topic]) as uncommitted,
        ):
            seen = await read_until(committed, lambda rs: len(rs) >= 4)
            assert [r.value for r in seen] == [
                b"committed-0",
                b"committed-1",
                b"committed-2",
                b"plain-0",
            ]
            everything = await read_until(uncommitted, lambda rs: len(rs) >= 9)
            assert [r.value for r in everything] == [
                b"committed-0",
                b"committed-1",
                b"committed-2",
                b"aborted-0",
                b"aborted-1",
                b"aborted-2",
                b"plain-0",
                b"open-0",
                b"plain-1",
            ]
            # Offsets: 0-2 committed, 3 COMMIT marker, 4-6 aborted, 7 ABORT marker,
            # 8 plain-0, 9 open-0, 10 plain-1.
            assert [r.offset for r in seen] == [0, 1, 2, 8]
            lso = committed.last_stable_offset(tp)
            assert lso == 9, lso
            assert await committed.getmany(timeout_ms=500) == {}  # nothing past the LSO
            await tx.commit_transaction()
            rest = await read_until(committed, lambda rs: len(rs) >= 2)
            assert [r.value for r in rest] == [b"open-0", b"plain-1"]
            # The COMMIT marker after them moves the position past it once it is fetched.
            await wait_for(
                lambda: committed.last_stable_offset(tp) == 12, CONVERGE_S, "the new LSO"
            )
            assert await committed.end_offsets([tp]) == {tp: 12}
    finally:
        await plain.stop()
        await tx.stop()
