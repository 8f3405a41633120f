"""Unmodified real clients on the embedded broker's data plane and admin APIs.

librdkafka (confluent-kafka), kafka-python 3 and aiokafka produce, fetch, list offsets and
administer topics; Fetch long-polls; the broker also runs as ``python -m``.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.launchers.tansu import free_port

pytestmark = [pytest.mark.peers, pytest.mark.timeout(120)]


@pytest.fixture
def threaded() -> Iterator[ThreadedBroker]:
    with ThreadedBroker(topics={"t": 2}) as broker:
        yield broker


def consume_confluent(bootstrap: str, topic: str, partitions: int, want: int) -> list[bytes]:
    import confluent_kafka as ck

    consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "reader"})
    consumer.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < want and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def test_librdkafka_and_kafka_python_produce_and_consume(threaded: ThreadedBroker) -> None:
    import confluent_kafka as ck
    import kafka

    producer = ck.Producer({"bootstrap.servers": threaded.bootstrap, "linger.ms": 5})
    for i in range(20):
        producer.produce("t", value=b"c%d" % i, partition=i % 2)
    assert producer.flush(30) == 0
    kp = kafka.KafkaProducer(bootstrap_servers=threaded.bootstrap, linger_ms=5)
    for i in range(10):
        kp.send("t", value=b"k%d" % i, partition=0)
    kp.flush(30)
    kp.close()

    got = consume_confluent(threaded.bootstrap, "t", 2, 30)
    assert sorted(got) == sorted([b"c%d" % i for i in range(20)] + [b"k%d" % i for i in range(10)])

    kc = kafka.KafkaConsumer(
        bootstrap_servers=threaded.bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=20000,
    )
    tp0 = kafka.TopicPartition("t", 0)
    kc.assign([tp0])
    offsets = []
    for m in kc:
        offsets.append(m.offset)
        if len(offsets) == 20:
            break
    assert offsets == list(range(20))  # 10 + 10 records, offsets assigned by the broker
    assert kc.end_offsets([tp0]) == {tp0: 20}
    assert kc.beginning_offsets([tp0]) == {tp0: 0}
    kc.close()


async def test_aiokafka_idempotent_producer_and_consumer() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async with EmbeddedBroker() as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
        await producer.start()
        try:
            for i in range(5):
                await producer.send_and_wait("auto", b"a%d" % i)  # auto-created topic
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            tp = TopicPartition("auto", 0)
            consumer.assign([tp])
            got: list[bytes] = []
            async with asyncio.timeout(20):
                while len(got) < 5:
                    batch = await consumer.getmany(tp, timeout_ms=500)
                    got.extend(m.value for m in batch.get(tp, []))
            assert got == [b"a%d" % i for i in range(5)]
            assert await consumer.end_offsets([tp]) == {tp: 5}
        finally:
            await consumer.stop()


async def test_fetch_long_poll_is_woken_by_produce() -> None:
    async with EmbeddedBroker(topics={"t": 1}) as broker:
        from tests.testing.test_broker_log import batch

        async with RawClient(broker.bootstrap) as fetcher, RawClient(broker.bootstrap) as writer:
            fetch = asyncio.create_task(
                fetcher.request(
                    "Fetch",
                    11,
                    {
                        "max_wait_ms": 30000,
                        "min_bytes": 1,
                        "max_bytes": 1 << 20,
                        "topics": [
                            {
                                "topic": "t",
                                "partitions": [
                                    {
                                        "partition": 0,
                                        "fetch_offset": 0,
                                        "partition_max_bytes": 1 << 20,
                                    }
                                ],
                            }
                        ],
                    },
                    timeout=60,
                )
            )
            await broker.wait_until(lambda: broker.parked_fetches == 1)
            assert not fetch.done()
            produced = await writer.request(
                "Produce",
                8,
                {
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topic_data": [
                        {"name": "t", "partition_data": [{"index": 0, "records": batch([b"x"])}]}
                    ],
                },
            )
            assert produced.responses[0].partition_responses[0].error_code == 0
            # Well before max_wait_ms: the append woke the parked fetch.
            resp = await asyncio.wait_for(fetch, 10)
            part = resp.responses[0].partitions[0]
            assert (part.error_code, part.high_watermark) == (0, 1)
            assert bytes(part.records) == batch([b"x"])


async def test_produce_errors_per_partition() -> None:
    async with EmbeddedBroker(topics={"t": 1}) as broker, RawClient(broker.bootstrap) as client:
        resp = await client.request(
            "Produce",
            8,
            {
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [
                    {"name": "t", "partition_data": [{"index": 0, "records": b"\x00" * 70}]},
                    {"name": "nope", "partition_data": [{"index": 0, "records": b""}]},
                ],
            },
        )
        codes = [r.partition_responses[0].error_code for r in resp.responses]
        assert codes == [2, 3]  # CORRUPT_MESSAGE, UNKNOWN_TOPIC_OR_PARTITION
        assert broker.log.topics["t"].partitions[0].high_watermark == 0


def test_admin_topics_with_confluent(threaded: ThreadedBroker) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": threaded.bootstrap})
    admin.create_topics([NewTopic("new", 3, 1)])["new"].result(20)
    with pytest.raises(Exception, match=r"TOPIC_ALREADY_EXISTS|already exists"):
        admin.create_topics([NewTopic("new", 3, 1)])["new"].result(20)
    admin.create_partitions([NewPartitions("new", 5)])["new"].result(20)
    topics = admin.list_topics(timeout=20).topics
    assert len(topics["new"].partitions) == 5
    admin.delete_topics(["new"])["new"].result(20)
    assert "new" not in admin.list_topics(timeout=20).topics


@pytest.mark.parametrize(
    "module", ["aiogroup.testing.embedded", "aiogroup.testing.embedded.broker"]
)  # the second: the older spelling, kept working
def test_runs_as_a_module(module: str) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", module,
         "--port", str(port), "--topic", "x:3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # printed once listening
        assert f"127.0.0.1:{port}" in line

        async def check() -> list[int]:
            async with RawClient(f"127.0.0.1:{port}") as client:
                meta = await client.request("Metadata", 12, {"topics": [{"name": "x"}]})
                return [p.partition_index for p in meta.topics[0].partitions]

        assert asyncio.run(check()) == [0, 1, 2]
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


async def test_aiokafka_group_consumers_split_and_commit() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    from aiogroup.testing.embedded.rules import CoordinatorConfig

    config = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)
    async with EmbeddedBroker(topics={"t": 4}, coordinator_config=config) as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await producer.start()
        try:
            for i in range(8):
                await producer.send_and_wait("t", b"x", partition=i % 4)
        finally:
            await producer.stop()
        consumers = [
            AIOKafkaConsumer(
                "t",
                bootstrap_servers=broker.bootstrap,
                group_id="ag",
                auto_offset_reset="earliest",
                heartbeat_interval_ms=200,
                session_timeout_ms=6000,
            )
            for _ in range(2)
        ]
        for c in consumers:
            await c.start()
        try:
            await broker.wait_for_group(
                "ag",
                lambda v: (
                    v is not None
                    and v.state == "Stable"
                    and len(v.members) == 2
                    and all(m.assignment for m in v.members)
                ),
                timeout=30,
            )
            read = 0
            async with asyncio.timeout(30):
                while read < 8:
                    for c in consumers:
                        batches = await c.getmany(timeout_ms=100)
                        read += sum(len(b) for b in batches.values())
            owned = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            assert sorted(owned[0] + owned[1]) == [0, 1, 2, 3] and all(owned)
            for c in consumers:
                await c.commit()
            committed = [await consumers[0].committed(TopicPartition("t", p)) for p in range(4)]
            assert committed == [2, 2, 2, 2]
        finally:
            for c in consumers:
                await c.stop()
        view = broker.group("ag")
        assert view is not None and view.state == "Empty"  # both left on stop()
