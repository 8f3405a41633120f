"""Inside ``on_partitions_revoked`` a revoked partition is still owned (KIP-429): the manual
commit pattern of aiokafka and Java (``position`` then ``commit`` per revoked partition) works
there, and so do ``committed`` and ``seek``, during a cooperative rebalance, during
``close()`` and during ``hand_off()``."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup import Consumer
from aiogroup.consumer.errors import ConsumerStoppedError
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.embedded.broker import EmbeddedBroker

from .helpers import CONVERGE_S, produce, read_until, unique, wait_for

pytestmark = pytest.mark.timeout(120)

TP = TopicPartition


class ManualCommits:
    """The listener of a service that commits by hand in its revoke callback."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.revoked: list[TopicPartition] = []
        #: (partition, position, committed after the commit) per revoked partition
        self.commits: list[tuple[TopicPartition, int, int | None]] = []
        self.errors: list[BaseException] = []
        self.seek_to: int | None = None

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        assert self.consumer is not None
        for tp in sorted(partitions):
            self.revoked.append(tp)
            try:
                if self.seek_to is not None:
                    self.consumer.seek(tp, self.seek_to)
                position = await self.consumer.position(tp)
                await self.consumer.commit({tp: position})
                self.commits.append((tp, position, await self.consumer.committed(tp)))
            except Exception as exc:
                self.errors.append(exc)

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        pass


def _consumer(
    broker: EmbeddedBroker,
    group: str,
    topic: str,
    listener: Any,
    assignor: str = "cooperative-sticky",
) -> Consumer:
    return Consumer(
        broker.bootstrap,
        group,
        topics=[topic],
        listener=listener,
        assignors=[assignor],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=200,
        fetch_max_wait_ms=100,
    )


async def _read_all(consumer: Consumer, count: int) -> dict[TopicPartition, int]:
    """Read ``count`` records; the positions they leave behind."""
    records = await read_until(consumer, lambda rs: len(rs) >= count)
    ends: dict[TopicPartition, int] = {}
    for r in records:
        tp = TP(r.topic, r.partition)
        ends[tp] = max(ends.get(tp, 0), r.offset + 1)
    return ends


async def _keep_polling(consumer: Consumer) -> None:
    while True:
        await consumer.getmany(timeout_ms=50)


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"])
async def test_position_and_commit_in_the_revoke_of_a_rebalance(
    embedded_broker: EmbeddedBroker, assignor: str
) -> None:
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 4)
    await produce(embedded_broker.bootstrap, topic, {p: 10 for p in range(4)})
    listener = ManualCommits()
    a = listener.consumer = _consumer(embedded_broker, group, topic, listener, assignor)
    async with a:
        positions = await _read_all(a, 40)
        poller = asyncio.create_task(_keep_polling(a))
        b = _consumer(embedded_broker, group, topic, None, assignor)
        async with b:
            await wait_for(
                lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2,
                CONVERGE_S,
                "the hand-over",
            )
            poller.cancel()
            await asyncio.gather(poller, return_exceptions=True)
            assert listener.errors == []
            # cooperative: only what moves is revoked; eager: everything, then 2 come back
            assert len(listener.revoked) == (2 if assignor == "cooperative-sticky" else 4)
            expected = [(tp, positions[tp], positions[tp]) for tp in listener.revoked]
            assert listener.commits == expected
            # b starts the moved partitions where a committed: nothing read twice
            assert [await b.position(tp) for tp in sorted(b.assignment())] == [10, 10]


@pytest.mark.parametrize("how", ["close", "hand_off"])
async def test_position_and_commit_in_the_revoke_of_a_leaving_consumer(
    embedded_broker: EmbeddedBroker, how: str
) -> None:
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 3)
    await produce(embedded_broker.bootstrap, topic, {p: 5 for p in range(3)})
    listener = ManualCommits()
    a = listener.consumer = _consumer(embedded_broker, group, topic, listener)
    await a.start()
    try:
        positions = await _read_all(a, 15)
        if how == "hand_off":
            a.hand_off()
            with pytest.raises(ConsumerStoppedError):
                await _keep_polling(a)
    finally:
        await a.close()
    assert listener.errors == []
    assert sorted(listener.revoked) == sorted(positions)
    assert listener.commits == [(tp, positions[tp], positions[tp]) for tp in listener.revoked]


async def test_seek_in_the_revoke_callback_moves_what_is_committed(
    embedded_broker: EmbeddedBroker,
) -> None:
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 2)
    await produce(embedded_broker.bootstrap, topic, {p: 6 for p in range(2)})
    listener = ManualCommits()
    listener.seek_to = 3
    a = listener.consumer = _consumer(embedded_broker, group, topic, listener)
    async with a:
        await _read_all(a, 12)
    assert listener.errors == []
    assert listener.commits == [(tp, 3, 3) for tp in listener.revoked]
    assert len(listener.revoked) == 2


async def test_position_in_the_revoke_callback_before_any_was_known(
    embedded_broker: EmbeddedBroker,
) -> None:
    """The consumer's own lookup of the committed offset never came back (dropped) when the
    partition is revoked: ``position()`` in the callback looks it up itself."""
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 1)
    tp = TP(topic, 0)
    await produce(embedded_broker.bootstrap, topic, {0: 8})
    first = _consumer(embedded_broker, group, topic, None)
    async with first:
        await _read_all(first, 8)
        await first.commit({tp: 5})
    embedded_broker.faults.drop("OffsetFetch")
    listener = ManualCommits()
    a = listener.consumer = _consumer(embedded_broker, group, topic, listener)
    await a.start()
    try:
        await wait_for(
            lambda: any(e.api == "OffsetFetch" for e in embedded_broker.faults.events),
            CONVERGE_S,
            "the dropped lookup",
        )
        assert a.assignment() == {tp}
    finally:
        await a.close()
    assert listener.errors == []
    assert listener.commits == [(tp, 5, 5)]
