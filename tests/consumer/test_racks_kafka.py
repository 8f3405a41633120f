"""KIP-881 on Apache Kafka 4.1.1: a group's leader assigns each member the partitions whose
replicas are in its rack.

Three KRaft nodes in racks r0, r1 and r2; a topic of six partitions, one replica each, placed
round the nodes (partition p on node p % 3 + 1, so in rack r{p % 3}); three Consumers with
``client_rack`` r0, r1 and r2 (Subscription v3's rack_id) joining one by one under the default
cooperative-sticky assignor. The leader asks the Metadata for the partitions' racks (only
because a member has a rack) and hands each member the two partitions of its rack: balance
first, then racks, as Java's assignors do.
"""

from __future__ import annotations

import asyncio

import pytest

from aiogroup import Consumer
from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker, kafka_available

from .helpers import unique

pytestmark = [pytest.mark.kafka4, pytest.mark.timeout(300)]

RACKS = ["r0", "r1", "r2"]
PARTITIONS = 6


def owned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


async def settle(consumers: list[Consumer], want: dict[int, set[int]], timeout: float) -> None:
    """Poll every consumer until each owns what ``want`` says (bounded)."""
    try:
        async with asyncio.timeout(timeout):
            while any(owned(c) != want[i] for i, c in enumerate(consumers)):
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
    except TimeoutError:
        got = {i: owned(c) for i, c in enumerate(consumers)}
        raise AssertionError(f"members own {got}, their racks' partitions are {want}") from None


async def test_each_member_gets_the_partitions_of_its_rack() -> None:
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        pytest.skip(reason)
    kafka = KafkaBroker(version=KAFKA4_VERSION, brokers=3, racks=RACKS)
    await asyncio.to_thread(kafka.start)
    try:
        topic, group = unique("racks"), unique("g")
        await asyncio.to_thread(
            kafka.create_topic, topic, replicas=[[p % 3 + 1] for p in range(PARTITIONS)]
        )
        consumers: list[Consumer] = []
        try:
            for rack in RACKS:
                consumer = Consumer(
                    kafka.bootstrap, group, topics=[topic], client_rack=rack,
                    session_timeout_ms=10_000, heartbeat_interval_ms=500,
                )  # fmt: skip
                await consumer.start()
                consumers.append(consumer)
                # Balance first: n members share the six partitions evenly; once all three
                # are in, each holds exactly the two partitions of its own rack.
                if len(consumers) < len(RACKS):
                    async with asyncio.timeout(60):
                        while sorted(len(owned(c)) for c in consumers) != [
                            PARTITIONS // len(consumers)
                        ] * len(consumers):
                            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))
            want = {i: {p for p in range(PARTITIONS) if p % 3 == i} for i in range(len(RACKS))}
            await settle(consumers, want, 60)
        finally:
            for consumer in consumers:
                await consumer.stop()
    finally:
        await asyncio.to_thread(kafka.stop)
