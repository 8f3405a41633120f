"""Manual assignment and forcing a rebalance with :class:`aiogroup.Consumer`.

Three short programs in one, against the embedded broker (``python
examples/manual_assignment.py``), or any cluster (``--bootstrap host:9092``; the topic is
created on the embedded broker only):

1. a consumer **without a group** reads partitions it names (``assign``): no coordinator, no
   rebalance, positions from ``auto_offset_reset``;
2. a consumer **with a group id** reads and commits as a standalone member; a fresh one starts
   at the commit;
3. a **subscribed** consumer forces a rebalance with a reason (``enforce_rebalance``): one new
   generation.

docs/consumer.md prints its output; the test suite runs it and compares.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Sequence

from aiokafka import AIOKafkaProducer

from aiogroup import Consumer, TopicPartition
from aiogroup.errors import GroupIdRequiredError, IllegalStateError
from aiogroup.testing import EmbeddedBroker

TOPIC = "orders"


async def produce(bootstrap: str, topic: str) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    await producer.start()
    try:
        for i in range(6):
            await producer.send_and_wait(topic, b"order %d" % i, partition=i % 3)
    finally:
        await producer.stop()


async def read(consumer: Consumer, count: int) -> list[str]:
    out: list[str] = []
    while len(out) < count:
        batch = await consumer.getmany(timeout_ms=1000)
        for records in batch.values():
            out.extend(f"{r.partition}:{r.offset}={r.value!r}" for r in records)
    return sorted(out)


async def without_a_group(bootstrap: str, topic: str) -> None:
    async with Consumer(bootstrap, None, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        print("1. no group, assigned", sorted(p.partition for p in consumer.assignment()))
        print("   read", await read(consumer, 4))
        try:
            await consumer.commit()
        except GroupIdRequiredError:
            print("   commit() without a group id: GroupIdRequiredError")
        print("   member id", repr(consumer.member.member_id), "(never joined)")


async def with_a_group(bootstrap: str, topic: str, group: str) -> None:
    tp = TopicPartition(topic, 2)
    async with Consumer(
        bootstrap, group, enable_auto_commit=False, auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([tp])
        print("2. group, assigned", [tp.partition], "read", await read(consumer, 2))
        await consumer.commit({tp: 1})  # only the first record counts as processed
        try:
            consumer.subscribe([topic])
        except IllegalStateError:
            print("   subscribe() while assigned: IllegalStateError")
    async with Consumer(bootstrap, group, auto_offset_reset="earliest") as fresh:
        fresh.assign([tp])
        print(
            "   a fresh consumer: committed",
            await fresh.committed(tp),
            "reads",
            await read(fresh, 1),
        )


async def forced_rebalance(bootstrap: str, topic: str, group: str) -> None:
    async with Consumer(bootstrap, group, topics=[topic], heartbeat_interval_ms=200) as consumer:
        outcome = await consumer.member.wait_for_assignment(30)
        first = outcome.generation_id
        consumer.enforce_rebalance("a new model version is deployed")
        async for outcome in consumer.member.rebalances():
            if outcome.generation_id > first:
                break
        print(
            "3. subscribed: enforce_rebalance() moved generation",
            first,
            "->",
            outcome.generation_id,
        )


@contextlib.asynccontextmanager
async def cluster(bootstrap: str | None) -> AsyncIterator[str]:
    if bootstrap is not None:
        yield bootstrap
        return
    async with EmbeddedBroker(topics={TOPIC: 3}) as broker:
        yield broker.bootstrap


async def run(bootstrap: str | None, topic: str) -> None:
    async with cluster(bootstrap) as servers:
        await produce(servers, topic)
        await without_a_group(servers, topic)
        await with_a_group(servers, topic, f"replay-{uuid.uuid4().hex[:8]}")
        await forced_rebalance(servers, topic, f"billing-{uuid.uuid4().hex[:8]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="a cluster (default: the embedded broker)")
    parser.add_argument("--topic", default=TOPIC, help="a topic with 3 empty partitions")
    args = parser.parse_args(argv)
    asyncio.run(run(args.bootstrap, args.topic))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
