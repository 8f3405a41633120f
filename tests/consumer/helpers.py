"""Helpers for consumer tests on real brokers: topics, producing, reading everything."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Self

from aiogroup.consumer import Consumer, ConsumerRecord
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import BrokerHandle

SESSION_MS = 6000
HEARTBEAT_MS = 500
#: Generous bound for anything involving a rebalance (Tansu holds each JoinGroup for half a
#: session; a cooperative join takes two rebalances).
CONVERGE_S = 60.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def make_topic(broker: BrokerHandle, name: str, partitions: int) -> None:
    """Create ``name`` and wait until every partition has a leader (blocking)."""
    if broker.embedded is not None:
        broker.embedded.create_topic(name, partitions)
    elif broker.apache is not None:
        broker.apache.create_topic(name, partitions)
    else:
        from tests.integration.harness import create_topics

        create_topics(broker.bootstrap, {name: partitions})


async def produce(
    bootstrap: str,
    topic: str,
    per_partition: dict[int, int],
    *,
    value: Callable[[int, int], bytes] = lambda p, i: b"%d-%d" % (p, i),
    key: Callable[[int, int], bytes | None] = lambda p, i: b"k%d" % i,
    headers: Callable[[int, int], list[tuple[str, bytes]]] | None = None,
    compression_type: str | None = None,
    **producer_options: Any,
) -> None:
    """Send ``per_partition[p]`` records to each partition ``p`` (aiokafka's producer)."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        linger_ms=5,
        compression_type=compression_type,
        max_batch_size=64 * 1024,
        **producer_options,
    )
    await producer.start()
    try:
        futures = []
        for p, count in per_partition.items():
            for i in range(count):
                futures.append(
                    await producer.send(
                        topic,
                        value(p, i),
                        key=key(p, i),
                        partition=p,
                        headers=headers(p, i) if headers else None,
                    )
                )
        await producer.flush()
        await asyncio.gather(*futures)
    finally:
        await producer.stop()


async def read_until(
    consumer: Consumer,
    done: Callable[[list[ConsumerRecord]], bool],
    timeout: float = CONVERGE_S,
    *,
    max_records: int | None = None,
) -> list[ConsumerRecord]:
    """getmany until ``done(records so far)``; fails after ``timeout`` (a bound, not a sleep)."""
    records: list[ConsumerRecord] = []

    async def loop() -> None:
        while not done(records):
            batch = await consumer.getmany(timeout_ms=200, max_records=max_records)
            for rs in batch.values():
                records.extend(rs)

    await asyncio.wait_for(loop(), timeout)
    return records


async def wait_for(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it is truthy (bounded; a condition poll, not a sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = condition()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)  # polling a condition with a bound


async def until(check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
    """Like :func:`wait_for` for an async condition."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)  # polling a condition with a bound


def by_partition(records: Iterable[ConsumerRecord]) -> dict[TopicPartition, list[int]]:
    out: dict[TopicPartition, list[int]] = {}
    for r in records:
        out.setdefault(TopicPartition(r.topic, r.partition), []).append(r.offset)
    return out


def consumer(broker: BrokerHandle, group: str, topics: list[str], **options: Any) -> Consumer:
    """A Consumer with test timings (short session, fast heartbeats)."""
    settings: dict[str, Any] = {
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 10_000,
    }
    settings.update(options)
    return Consumer(broker.bootstrap, group, topics=topics, **settings)


class Pacer:
    """Produces keyed records round-robin over partitions at a steady pace until stopped, so
    records keep arriving while a test rebalances (the pace is load, not synchronisation)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, every_s: float = 0.004):
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.every_s = every_s
        self.sent: dict[int, int] = {p: 0 for p in range(partitions)}
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def __aenter__(self) -> Pacer:
        from aiokafka import AIOKafkaProducer

        self._producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=2)
        await self._producer.start()
        self._task = asyncio.create_task(self._run())
        return self

    async def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            p = i % self.partitions
            await self._producer.send(self.topic, b"%d" % self.sent[p], partition=p)
            self.sent[p] += 1
            i += 1
            await asyncio.sleep(self.every_s)  # the production rate

    async def stop(self) -> dict[int, int]:
        """Stop and flush; returns how many records each partition got."""
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
        await self._producer.flush()
        return dict(self.sent)

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
        await self._producer.stop()


class Reader:
    """Consumes in a background task, stamping every record with the monotonic time it was
    handed over, and every member state change; the test judges from the stamps."""

    def __init__(self, consumer: Consumer, name: str, max_records: int = 20) -> None:
        self.consumer = consumer
        self.name = name
        self.max_records = max_records
        self.records: list[tuple[float, TopicPartition, int]] = []
        self.states: list[tuple[float, Any]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.error: BaseException | None = None

    def start(self) -> Self:
        self._tasks = [asyncio.create_task(self._read()), asyncio.create_task(self._watch())]
        return self

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                batch = await self.consumer.getmany(timeout_ms=100, max_records=self.max_records)
                now = loop.time()
                for tp, rs in batch.items():
                    self.records.extend((now, tp, r.offset) for r in rs)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            self.error = exc
            raise

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        member = self.consumer.member
        last = None
        while True:
            changed = member.changed()
            if member.state is not last:
                last = member.state
                self.states.append((loop.time(), last))
            await changed

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def offsets(self) -> set[tuple[TopicPartition, int]]:
        return {(tp, o) for _, tp, o in self.records}


def sharing(
    a: Consumer, b: Consumer, reader: Reader, each: int, records: int
) -> Callable[[], bool]:
    """A condition: ``a`` and ``b`` each own ``each`` partitions, both STABLE, and ``reader``
    has read more than ``records`` records."""
    from aiogroup.membership import MemberState

    def check() -> bool:
        return (
            len(a.assignment()) == each
            and len(b.assignment()) == each
            and a.member.state is MemberState.STABLE
            and b.member.state is MemberState.STABLE
            and len(reader.records) > records
        )

    return check


async def poll_until(
    consumer: Consumer, condition: Callable[[], Any], timeout: float, what: str
) -> list[ConsumerRecord]:
    """Keep a slow application asking for records (as a Java application keeps polling: a
    revocation waits for it) until ``condition()`` holds; returns what was read (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    records: list[ConsumerRecord] = []
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        batch = await consumer.getmany(timeout_ms=50, max_records=1)
        for rs in batch.values():
            records.extend(rs)
        await asyncio.sleep(0.02)  # the application's work on that record (a slow reader)
    return records


class Callbacks:
    """A rebalance listener that keeps every callback's partitions, by kind."""

    def __init__(self) -> None:
        self.assigned: list[frozenset[TopicPartition]] = []
        self.revoked: list[frozenset[TopicPartition]] = []
        self.lost: list[frozenset[TopicPartition]] = []

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.assigned.append(partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.revoked.append(partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.lost.append(partitions)
