"""``Consumer.hand_off()`` on every broker: a leaving consumer keeps delivering its partitions'
records until the round that moves them, the rest of the group takes them in the very next
round, nothing is processed twice, and peers (librdkafka, kafka-python) as the group's leader
do the same."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from aiogroup.consumer import Consumer
from aiogroup.consumer.errors import ConsumerStoppedError
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)
from tests.integration.harness import double_ownership, ownership, read_events, start_peer

from .helpers import (
    CONVERGE_S,
    Pacer,
    Reader,
    consumer,
    make_topic,
    sharing,
    unique,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)

TP = TopicPartition


class Stamped:
    """A listener stamping each callback with the wall clock and the member's generation (in
    the format of the peers' event logs, so one timeline holds both)."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.consumer: Consumer | None = None
        self.events: list[dict[str, Any]] = []

    def _note(self, event: str, partitions: frozenset[TopicPartition]) -> None:
        generation = self.consumer.member.generation_id if self.consumer is not None else -1
        self.events.append(
            {
                "t": time.time(),
                "who": self.who,
                "event": event,
                "generation": generation,
                "partitions": sorted([tp.topic, tp.partition] for tp in partitions),
            }
        )

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._note("assigned", partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._note("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._note("lost", partitions)


class IterReader(Reader):
    """A Reader that iterates with ``async for`` and notes when the iteration ended."""

    ended_at: float | None = None

    async def _read(self) -> None:
        loop = asyncio.get_running_loop()
        async for record in self.consumer:
            self.records.append((loop.time(), TP(record.topic, record.partition), record.offset))
        self.ended_at = loop.time()


@pytest.mark.parametrize("how", ["hand_off", "close"])
@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_hand_off_keeps_reading_until_the_round_that_moves_the_partitions(
    kafka_broker: BrokerHandle,  # noqa: F811
    how: str,
) -> None:
    """After ``hand_off()``, or a ``close()`` from another task while the application reads
    (a SIGTERM handler: the default shutdown, issue 23.9), the leaving consumer goes on
    delivering its partitions' records through its hand-off JoinGroup; its partitions are
    revoked (never lost), committed, and picked up by the other member in the generation right
    after the hand-off round; every record is read once; ``async for`` ends by itself once the
    member has left."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    loop = asyncio.get_running_loop()
    la, lb = Stamped("a"), Stamped("b")
    # The hand-off round lasts until b's next heartbeat tells it of the rebalance: with b
    # heartbeating every 2 s and a record every 12 ms per partition, a round too short to see
    # a record of a's partitions (under 12 ms) comes less than once in 150 runs (it came
    # once in 6 with b at 500 ms and a record every 24 ms).
    async with Pacer(kafka_broker.bootstrap, topic, 6, every_s=0.002) as pacer:
        a = consumer(kafka_broker, group, [topic], listener=la)
        b = consumer(kafka_broker, group, [topic], listener=lb, heartbeat_interval_ms=2000)
        la.consumer, lb.consumer = a, b
        async with b:
            rb = Reader(b, "b").start()
            await wait_for(lambda: len(b.assignment()) == 6, CONVERGE_S, "b owns everything")
            async with a:
                ra = IterReader(a, "a").start()
                await wait_for(
                    sharing(a, b, ra, 3, 10), CONVERGE_S, "a and b sharing the topic, a reading"
                )
                handed = a.assignment()
                hand_off_gen = a.member.generation_id
                asked_at = loop.time()
                closing = None
                if how == "hand_off":
                    a.hand_off()
                else:
                    closing = asyncio.create_task(a.close())
                await wait_for(lambda: a.handing_off, CONVERGE_S, "the hand-off to start")
                await wait_for(lambda: ra.ended_at is not None, CONVERGE_S, "a's loop to end")
                assert a.member.state is MemberState.CLOSED
                if closing is not None:
                    await asyncio.wait_for(closing, CONVERGE_S)
                assert a.assignment() == frozenset()
                said = "handed its partitions over" if how == "hand_off" else "is closed"
                with pytest.raises(ConsumerStoppedError, match=said):
                    await a.getmany(timeout_ms=10)
            await wait_for(
                lambda: len(b.assignment()) == 6 and b.member.state is MemberState.STABLE,
                CONVERGE_S,
                "b to take a's partitions",
            )
            sent = await pacer.stop()
            everything = {(TP(topic, p), o) for p, n in sent.items() for o in range(n)}
            await wait_for(
                lambda: ra.offsets() | rb.offsets() >= everything, CONVERGE_S, "every record"
            )
            await rb.stop()
        await ra.stop()

    # a kept delivering its partitions' records after hand_off(), through its hand-off
    # JoinGroup (a plain close stops them at once).
    joining = [t for t, s in ra.states if s is MemberState.JOINING and t >= asked_at]
    assert joining, f"no hand-off JoinGroup seen: {ra.states}"
    after = [t for t, tp, _ in ra.records if tp in handed and t > joining[0]]
    assert after, "no record of a's partitions after its hand-off JoinGroup was sent"
    # Revoked, never lost; the round that revoked them was a's last, and b received them in
    # the generation after it (the round a's leave started), not later.
    revoked = [e for e in la.events if e["event"] == "revoked"]
    assert [e for e in la.events if e["event"] == "lost"] == []
    assert {(t, p) for e in revoked for t, p in e["partitions"]} == {
        (tp.topic, tp.partition) for tp in handed
    }
    last_gen = revoked[-1]["generation"]
    assert isinstance(last_gen, int) and last_gen > hand_off_gen
    got = [
        e
        for e in lb.events
        if e["event"] == "assigned"
        and e["generation"] > hand_off_gen
        and {(t, p) for t, p in e["partitions"]}
        & {(tp.topic, tp.partition) for tp in handed}
    ]
    assert got and got[0]["generation"] == last_gen + 1, (la.events, lb.events)
    assert double_ownership(sorted(la.events + lb.events, key=lambda e: e["t"])) == []
    both = ra.offsets() & rb.offsets()
    assert not both, f"processed twice: {sorted(both)[:10]}"


@pytest.mark.parametrize("peer", ["confluent", "kafka-python"])
async def test_hand_off_with_a_peer_as_the_leader(
    kafka_broker: BrokerHandle,  # noqa: F811
    peer: str,
    tmp_path: Path,
) -> None:
    """Under a peer's leadership a hand-off is a plain leave: librdkafka's leader gives the
    partitions a member claims of topics it no longer subscribes to straight to others
    (trusting KIP-429 1a), so handing off under it made the peer own ours while we still did
    (found by this test). Our member sees no HAND_OFF_AWARE in its assignment and leaves as a
    close does: no JoinGroup after ``hand_off()``, revoked (not lost), never owned twice."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    log = tmp_path / "peer.jsonl"
    leader = start_peer(peer, "peer", kafka_broker.bootstrap, group, [topic], log)
    try:
        await wait_for(
            lambda: len(ownership(read_events(log)).get("peer", ())) == 6,
            CONVERGE_S,
            "the peer (the leader) to own everything",
        )
        mine = Stamped("ours")
        ours = consumer(kafka_broker, group, [topic], listener=mine)
        mine.consumer = ours
        async with ours:
            reader = IterReader(ours, "ours").start()
            await wait_for(
                lambda: (
                    len(ours.assignment()) == 3
                    and ours.member.state is MemberState.STABLE
                    and len(ownership(read_events(log)).get("peer", ())) == 3
                ),
                CONVERGE_S,
                "the peer and ours sharing the topic",
            )
            assert not ours.member.is_leader
            handed = {(tp.topic, tp.partition) for tp in ours.assignment()}
            asked_at = asyncio.get_running_loop().time()
            ours.hand_off()
            await wait_for(lambda: reader.ended_at is not None, CONVERGE_S, "our loop to end")
            await wait_for(
                lambda: len(ownership(read_events(log)).get("peer", ())) == 6,
                CONVERGE_S,
                "the peer to take our partitions",
            )
            await reader.stop()
    finally:
        leader.terminate()
    assert [e for e in mine.events if e["event"] == "lost"] == []
    assert not [s for t, s in reader.states if t >= asked_at and s is MemberState.JOINING]
    timeline = sorted(mine.events + read_events(log), key=lambda e: e["t"])
    assert double_ownership(timeline) == []
    revoked_at = max(
        e["t"]
        for e in mine.events
        if e["event"] == "revoked" and {tuple(p) for p in e["partitions"]} & handed
    )
    taken = [
        e
        for e in read_events(log)
        if e["event"] == "assigned" and {tuple(p) for p in e["partitions"]} & handed
    ]
    assert taken and taken[-1]["t"] >= revoked_at


@pytest.mark.parametrize("case", ["from the reader", "opted out", "eager", "static"])
async def test_close_stops_at_once_where_a_hand_off_would_not_help(
    embedded_broker: EmbeddedBroker, case: str
) -> None:
    """``close()`` hands off only for someone still reading, under COOPERATIVE, for a dynamic
    member (issue 23.9): called from the reading task itself, with ``hand_off_on_close=False``,
    under an eager assignor or for a static member it revokes and leaves at once."""
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 2)
    by_case: dict[str, dict[str, Any]] = {
        "opted out": {"hand_off_on_close": False},
        "eager": {"assignors": ["range"]},
        "static": {"group_instance_id": "i-1"},
    }
    options = by_case.get(case, {})
    c = Consumer(embedded_broker.bootstrap, group, topics=[topic], session_timeout_ms=6000,
                 heartbeat_interval_ms=200, **options)  # fmt: skip
    await c.start()
    try:
        await c.member.wait_for_assignment(timeout=CONVERGE_S)
        assert await c.getmany(timeout_ms=10) == {}  # a reader: this task
        if case != "from the reader":
            reader = asyncio.create_task(c.getmany(timeout_ms=60_000))
            await wait_for(lambda: c._polling > 0, CONVERGE_S, "the reader to wait")
            await c.close()
            assert not c.handing_off
            with pytest.raises(ConsumerStoppedError):
                await reader
            return
        await c.close()
        assert not c.handing_off
    finally:
        await c.close()


async def test_close_from_a_signal_handler_hands_off_on_the_embedded_broker(
    embedded_broker: EmbeddedBroker,
) -> None:
    """The default path, quickly: a reader iterates, close() is called from another task;
    the reader is served until the member has left, and close() waits for that."""
    topic, group = unique("t"), unique("g")
    embedded_broker.create_topic(topic, 2)
    c = Consumer(embedded_broker.bootstrap, group, topics=[topic], session_timeout_ms=6000,
                 heartbeat_interval_ms=200)  # fmt: skip
    await c.start()
    ended = asyncio.Event()

    async def read() -> None:
        async for _ in c:
            pass
        ended.set()

    reader = asyncio.create_task(read())
    try:
        await c.member.wait_for_assignment(timeout=CONVERGE_S)
        await wait_for(lambda: c._polling > 0, CONVERGE_S, "the reader to wait")
        await asyncio.wait_for(c.close(), CONVERGE_S)
        assert c.handing_off and c.member.state is MemberState.CLOSED
        await asyncio.wait_for(ended.wait(), CONVERGE_S)  # async for ended by itself
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await c.close()
