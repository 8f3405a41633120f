"""KIP-392 on Apache Kafka 4.1.1: a consumer in rack r1 reads from the follower in r1.

Three KRaft nodes (node 1 controller and broker in rack r0, brokers 2 and 3 in r1 and r2),
``replica.selector.class=RackAwareReplicaSelector``; a topic whose two partitions are led by
node 1 and replicated on all three. A consumer with ``client_rack="r1"`` (manual assignment:
no group coordinator to lose when a broker stops) reads:

1. everything produced, all of it from node 2 (the leader only names the replica);
2. after node 2 is stopped (by pid), what is produced next, from the leader;
3. after node 2 is back in the ISR, what is produced next, from node 2 again;
4. with nothing to read, the replica's lease (``metadata_max_age_ms``) ends: the consumer asks
   the leader again, which names node 2 again.

Every record is read once, in order per partition; the per-node counts are the consumer's
``node_metrics`` (``records-fetched-total``), printed for docs/consumer.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from aiogroup import Consumer
from aiogroup.consumer import ConsumerRecord
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker, kafka_available

from .helpers import produce, unique

pytestmark = [pytest.mark.kafka4, pytest.mark.timeout(400)]

LEADER, LOCAL = 1, 2
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
MAX_AGE_MS = 4_000
PER_PARTITION = 1_000


def in_sync(kafka: KafkaBroker, topic: str, node: int, timeout: float = 60.0) -> None:
    """Wait (bounded) until ``node`` is in every partition's ISR of ``topic``."""
    deadline = time.monotonic() + timeout
    while True:
        meta = kafka.request("Metadata", 1, {"topics": [{"name": topic}]})
        if all(node in p.isr_nodes for p in meta.topics[0].partitions):
            return
        assert time.monotonic() < deadline, f"node {node} not back in the ISR of {topic}"
        time.sleep(0.1)  # polling broker state with a bound


def fetched(consumer: Consumer, node: int) -> int:
    return int(consumer.node_metrics.get(node, {}).get("records-fetched-total", 0))


async def read(
    consumer: Consumer, count: int, seen: list[ConsumerRecord], timeout: float = 90.0
) -> None:
    """Read ``count`` more records into ``seen``."""
    want = len(seen) + count
    async with asyncio.timeout(timeout):
        while len(seen) < want:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                seen.extend(records)
    assert len(seen) == want


async def until(consumer: Consumer, done: Callable[[], bool], timeout: float) -> None:
    """Keep polling (nothing to read) until ``done()`` (bounded)."""
    async with asyncio.timeout(timeout):
        while not done():
            assert not await consumer.getmany(timeout_ms=200)


async def test_fetch_from_the_closest_replica_falls_back_and_returns() -> None:
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        pytest.skip(reason)
    config = {
        "replica.selector.class": SELECTOR,
        # A stopped broker is fenced (and leaves the ISR and the metadata) within seconds.
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
    }
    kafka = KafkaBroker(version=KAFKA4_VERSION, brokers=3, racks=["r0", "r1", "r2"], config=config)
    await asyncio.to_thread(kafka.start)
    try:
        await _scenario(kafka)
    finally:
        await asyncio.to_thread(kafka.stop)


async def _scenario(kafka: KafkaBroker) -> None:
    topic = unique("follower")
    # Both partitions led by node 1 (rack r0); node 2 (r1) and node 3 (r2) follow.
    await asyncio.to_thread(kafka.create_topic, topic, replicas=[[1, 2, 3], [1, 3, 2]])
    await asyncio.to_thread(in_sync, kafka, topic, LOCAL)
    tps = [TopicPartition(topic, p) for p in range(2)]
    batch = {0: PER_PARTITION, 1: PER_PARTITION}
    total = 2 * PER_PARTITION
    await produce(kafka.bootstrap, topic, batch, value=lambda p, i: b"a%d-%d" % (p, i))
    seen: list[ConsumerRecord] = []
    consumer = Consumer(
        kafka.bootstrap, None, client_rack="r1", auto_offset_reset="earliest",
        metadata_max_age_ms=MAX_AGE_MS, fetch_max_wait_ms=200, retry_backoff_ms=100,
    )  # fmt: skip
    async with consumer:
        consumer.assign(tps)
        # 1. From the replica in the consumer's rack.
        await read(consumer, total, seen)
        first = {n: fetched(consumer, n) for n in (1, 2, 3)}
        print(f"\nphase 1 (all brokers up): records per node {first}")
        assert first[LOCAL] == total and first[LEADER] == 0 and first[3] == 0
        # 2. The replica stops: the leader serves.
        await asyncio.to_thread(lambda: kafka.stop_broker(LOCAL))  # type: ignore[call-arg]
        await produce(kafka.bootstrap, topic, batch, value=lambda p, i: b"b%d-%d" % (p, i))
        await read(consumer, total, seen)
        second = {n: fetched(consumer, n) - first[n] for n in (1, 2, 3)}
        print(f"phase 2 (node 2 stopped): records per node {second}")
        assert second[LEADER] == total and second[LOCAL] == 0
        # 3. Back in the ISR: the leader names it again.
        await asyncio.to_thread(lambda: kafka.restart_broker(LOCAL))  # type: ignore[call-arg]
        await asyncio.to_thread(in_sync, kafka, topic, LOCAL)
        before = {n: fetched(consumer, n) for n in (1, 2, 3)}
        await produce(kafka.bootstrap, topic, batch, value=lambda p, i: b"c%d-%d" % (p, i))
        await read(consumer, total, seen)
        third = {n: fetched(consumer, n) - before[n] for n in (1, 2, 3)}
        print(f"phase 3 (node 2 back): records per node {third}")
        assert third[LOCAL] > 0 and sum(third.values()) == total
        # 4. Nothing to read: the lease ends, the leader is asked, it names node 2 again.
        asked = consumer.node_metrics[LEADER]["fetch-total"]
        await until(
            consumer, lambda: consumer.node_metrics[LEADER]["fetch-total"] > asked,
            timeout=4 * MAX_AGE_MS / 1000,
        )  # fmt: skip
        local = consumer.node_metrics[LOCAL]["fetch-total"]
        await until(
            consumer, lambda: consumer.node_metrics[LOCAL]["fetch-total"] > local, timeout=10
        )
        totals = {n: fetched(consumer, n) for n in (1, 2, 3)}
        print(f"in all: records per node {totals}, local share {totals[LOCAL] / (3 * total):.3f}")
    # Each record once, in order per partition.
    for tp in tps:
        values = [r.value for r in seen if r.partition == tp.partition]
        expected = [
            b"%s%d-%d" % (round_, tp.partition, i)
            for round_ in (b"a", b"b", b"c")
            for i in range(PER_PARTITION)
        ]
        assert values == expected
