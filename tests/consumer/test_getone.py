"""``getone()`` / ``async for`` take records converted ahead (issue 29) without collect's walk:
the positions, commits, seeks, pauses and revocations around them behave exactly as for
records taken one at a time. On the embedded broker and on Apache Kafka 4.1.1."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup import Consumer
from aiogroup.consumer.records import AHEAD
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from .helpers import CONVERGE_S, consumer, make_topic, produce, unique, wait_for

pytestmark = pytest.mark.timeout(180)

TP = TopicPartition
BROKERS = pytest.mark.parametrize(
    "kafka_broker",
    ["embedded", pytest.param("kafka4", marks=pytest.mark.kafka4)],
    indirect=True,
)
PER_PARTITION = 3 * AHEAD + 17  # several conversions ahead, and a partial last one


def quick_ones(c: Consumer) -> list[int]:
    """Count the records ``getone()`` took the quick way (a list the test reads)."""
    state: Any = c._state  # the consumer's own core: no public view of which way was taken
    taken: list[int] = []
    next_one = state.next_one

    def counted(allowed: Any) -> Any:
        got = next_one(allowed)
        if got is not None:
            taken.append(got[1].offset)
        return got

    state.next_one = counted
    return taken


async def next_records(c: Consumer, n: int) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in [await asyncio.wait_for(c.getone(), 30)
                                               for _ in range(n)]]  # fmt: skip


@BROKERS
async def test_getone_keeps_positions_commits_seeks_and_pauses_exact(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("one"), unique("g")
    make_topic(kafka_broker, topic, 2)
    await produce(kafka_broker.bootstrap, topic, {0: PER_PARTITION, 1: PER_PARTITION})
    p0, p1 = TP(topic, 0), TP(topic, 1)
    c = Consumer(kafka_broker.bootstrap, group, auto_offset_reset="earliest",
                 enable_auto_commit=False, fetch_max_wait_ms=100)  # fmt: skip
    c.assign([p0, p1])
    quick = quick_ones(c)
    nexts = {0: 0, 1: 0}

    def check(got: list[tuple[int, int]]) -> None:
        for partition, offset in got:
            assert offset == nexts[partition], (partition, offset, nexts)
            nexts[partition] = offset + 1

    async with c:
        got = await next_records(c, 10)
        check(got)
        partition, offset = got[-1]
        tp = TP(topic, partition)
        # the position is right after the last record handed out, not after those converted
        assert await c.position(tp) == offset + 1
        await c.commit()
        assert await c.committed(tp) == offset + 1
        # a seek drops what was converted ahead: the partition starts again where asked
        c.seek(tp, 5)
        nexts[partition] = 5
        check(await next_records(c, 3))
        # a paused partition gives nothing, even with records converted ahead
        c.pause(tp)
        other = 1 - partition
        during = await next_records(c, AHEAD + 20)
        assert {p for p, _ in during} == {other}
        check(during)
        c.resume(tp)
        rest = await next_records(c, sum(PER_PARTITION - n for n in nexts.values()))
        check(rest)
        assert nexts == {0: PER_PARTITION, 1: PER_PARTITION}
        for p in (p0, p1):
            assert await c.position(p) == PER_PARTITION
    # most records went the quick way: all but about one per conversion ahead
    assert len(quick) > 2 * PER_PARTITION * 0.9, len(quick)


@BROKERS
async def test_getone_hands_out_no_record_of_a_revoked_partition(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A reader taking records the quick way while a second member joins: after the revoke
    callback no record of a partition it lost comes out, while records of the one it kept
    do."""
    topic, group = unique("one"), unique("g")
    make_topic(kafka_broker, topic, 2)
    await produce(kafka_broker.bootstrap, topic, {0: PER_PARTITION, 1: PER_PARTITION})
    revoked: set[TopicPartition] = set()

    class Listener:
        def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
            revoked.update(partitions)

        def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
            pass

    first = consumer(kafka_broker, group, [topic], listener=Listener(),
                     assignors=["cooperative-sticky"])  # fmt: skip
    quick = quick_ones(first)
    async with first:
        await next_records(first, 5)
        second = consumer(kafka_broker, group, [topic], assignors=["cooperative-sticky"])
        async with second:
            after: list[tuple[int, int]] = []

            async def read_first() -> None:
                while True:
                    r = await first.getone()
                    if revoked:
                        after.append((r.partition, r.offset))

            reader = asyncio.ensure_future(read_first())
            try:
                await wait_for(lambda: revoked and len(second.assignment()) == 1, CONVERGE_S,
                               "the second member taking a partition")  # fmt: skip
                # more records in both: the first reads on, from its kept partition only
                await produce(kafka_broker.bootstrap, topic, {0: 50, 1: 50})
                await wait_for(lambda: len(after) >= 50, CONVERGE_S, "the first reading on")
            finally:
                reader.cancel()
                await asyncio.gather(reader, return_exceptions=True)
            lost = {tp.partition for tp in revoked}
            assert not [x for x in after if x[0] in lost], after[:5]
    assert quick  # the quick way was taken before the rebalance
