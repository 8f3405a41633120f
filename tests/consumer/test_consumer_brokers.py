"""aiogroup.Consumer end to end on every broker the suite has (embedded, Tansu, Kafka 2.3)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from typing import Any

import pytest

from aiogroup.consumer import (
    ConsumerRecord,
    ConsumerStoppedError,
    NoOffsetForPartitionError,
    PollIntervalExceededError,
    RecordDeserializationError,
)
from aiogroup.errors import LocalProtocolError
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from .helpers import (
    CONVERGE_S,
    Callbacks,
    by_partition,
    consumer,
    make_topic,
    poll_until,
    produce,
    read_until,
    unique,
    until,
    wait_for,
)

pytestmark = pytest.mark.timeout(180)

TP = TopicPartition


@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_reads_every_record_commits_and_restarts_from_the_commit(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 3)
    await produce(
        kafka_broker.bootstrap,
        topic,
        {0: 200, 1: 150, 2: 0},
        headers=lambda p, i: [("n", b"%d" % i)],
    )
    start_ms = int(time.time() * 1000) - 600_000
    async with consumer(kafka_broker, group, [topic], enable_auto_commit=False) as c:
        records = await read_until(c, lambda rs: len(rs) >= 350)
        assert len(records) == 350
        assert by_partition(records) == {
            TP(topic, 0): list(range(200)),
            TP(topic, 1): list(range(150)),
        }
        first = next(r for r in records if r.partition == 1 and r.offset == 7)
        assert (first.key, first.value, first.headers) == (b"k7", b"1-7", (("n", b"7"),))
        assert first.timestamp > start_ms and first.timestamp_type == 0
        assert first.serialized_value_size == 3
        assert c.assignment() == {TP(topic, 0), TP(topic, 1), TP(topic, 2)}
        assert await c.position(TP(topic, 0)) == 200
        assert c.highwater(TP(topic, 1)) == 150
        await c.commit()
        assert await c.committed(TP(topic, 0)) == 200
        # Every assigned partition's position, as Java's commitSync(): p2 was reset to 0.
        assert await c.committed(TP(topic, 2)) == 0
    await produce(kafka_broker.bootstrap, topic, {0: 5})
    async with consumer(kafka_broker, group, [topic]) as c:
        records = await read_until(c, lambda rs: len(rs) >= 5)
        assert [(r.partition, r.offset) for r in records] == [(0, o) for o in range(200, 205)]


async def test_auto_offset_reset_policies(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    await produce(kafka_broker.bootstrap, topic, {0: 10})
    tp = TP(topic, 0)
    async with consumer(kafka_broker, unique("g"), [topic], auto_offset_reset="earliest") as c:
        assert [r.offset for r in await read_until(c, lambda rs: len(rs) >= 10)] == list(range(10))
    async with consumer(kafka_broker, unique("g"), [topic], auto_offset_reset="none") as c:
        with pytest.raises(NoOffsetForPartitionError) as info:
            await asyncio.wait_for(c.getmany(timeout_ms=int(CONVERGE_S * 1000)), CONVERGE_S)
        assert info.value.partition == tp
        c.seek(tp, 4)  # the application decides where to start
        assert [r.offset for r in await read_until(c, lambda rs: len(rs) >= 6)] == list(
            range(4, 10)
        )
    if kafka_broker.kind == "tansu":
        pytest.skip("Tansu's ListOffsets(latest) answers an offset inside the last batch")
    async with consumer(kafka_broker, unique("g"), [topic], auto_offset_reset="latest") as c:
        await wait_for(lambda: c.assignment() == {tp}, CONVERGE_S, "the assignment")
        assert await asyncio.wait_for(c.position(tp), CONVERGE_S) == 10
        await produce(kafka_broker.bootstrap, topic, {0: 2})
        assert [r.offset for r in await read_until(c, lambda rs: len(rs) >= 2)] == [10, 11]
        await c.commit()
        assert await c.committed(tp) == 12


async def test_seek_positions_and_offset_lookups(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 2)
    before = int(time.time() * 1000) - 1
    await produce(kafka_broker.bootstrap, topic, {0: 30, 1: 3})
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    async with consumer(kafka_broker, unique("g"), [topic], enable_auto_commit=False) as c:
        await read_until(c, lambda rs: len(rs) >= 33)
        assert await c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        if kafka_broker.kind != "tansu":  # Tansu's ListOffsets(latest) is off (docs/consumer.md)
            assert await c.end_offsets([tp0, tp1]) == {tp0: 30, tp1: 3}
        found = await c.offsets_for_times({tp0: before})
        hit = found[tp0]
        assert hit is not None and hit.offset == 0
        assert hit.timestamp >= before
        if kafka_broker.kind != "tansu":  # Tansu answers offset 0 for a future timestamp
            future = int(time.time() * 1000) + 3_600_000
            assert (await c.offsets_for_times({tp0: future}))[tp0] is None
        c.seek(tp0, 25)
        assert await c.position(tp0) == 25
        records = await read_until(c, lambda rs: len(rs) >= 5)
        assert [(r.partition, r.offset) for r in records] == [(0, o) for o in range(25, 30)]
        assert await c.seek_to_beginning(tp1)
        assert await c.position(tp1) == 0
        records = await read_until(c, lambda rs: len(rs) >= 3)
        assert [(r.partition, r.offset) for r in records] == [(1, 0), (1, 1), (1, 2)]
        await c.commit({tp1: 2})
        assert await c.seek_to_committed(tp1)
        assert await c.position(tp1) == 2
        if kafka_broker.kind != "tansu":
            assert await c.seek_to_end(tp0)
            assert await c.position(tp0) == 30
        with pytest.raises(LocalProtocolError):
            c.seek(TP(topic, 9), 0)


async def test_pause_and_resume(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 2)
    tp0, tp1 = TP(topic, 0), TP(topic, 1)
    async with consumer(kafka_broker, unique("g"), [topic]) as c:
        await wait_for(lambda: c.assignment() == {tp0, tp1}, CONVERGE_S, "the assignment")
        c.pause(tp0)
        assert c.paused() == {tp0}
        await produce(kafka_broker.bootstrap, topic, {0: 4, 1: 4})
        records = await read_until(c, lambda rs: len(rs) >= 4)
        assert {r.partition for r in records} == {1}
        assert await c.getmany(timeout_ms=300) == {}
        c.resume(tp0)
        records = await read_until(c, lambda rs: len(rs) >= 4)
        assert [(r.partition, r.offset) for r in records] == [(0, o) for o in range(4)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_compressed_records(kafka_broker: BrokerHandle, codec: str) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    await produce(
        kafka_broker.bootstrap,
        topic,
        {0: 500},
        value=lambda p, i: b"compressible-%d-" % i * 10,
        compression_type=codec,
    )
    async with consumer(kafka_broker, unique("g"), [topic]) as c:
        records = await read_until(c, lambda rs: len(rs) >= 500)
        assert [r.offset for r in records] == list(range(500))
        assert records[123].value == b"compressible-123-" * 10


async def test_deserializers_and_a_failing_one(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    payloads = [b'{"n": 0}', b'{"n": 1}', b"not json", b'{"n": 3}']
    await produce(kafka_broker.bootstrap, topic, {0: 4}, value=lambda p, i: payloads[i])
    tp = TP(topic, 0)
    async with consumer(
        kafka_broker,
        unique("g"),
        [topic],
        value_deserializer=json.loads,
        key_deserializer=lambda k: k.decode() if k is not None else None,
    ) as c:
        good = await read_until(c, lambda rs: len(rs) >= 2, max_records=1)
        assert [r.value for r in good] == [{"n": 0}, {"n": 1}] and good[0].key == "k0"
        with pytest.raises(RecordDeserializationError) as info:
            await asyncio.wait_for(c.getmany(timeout_ms=int(CONVERGE_S * 1000)), CONVERGE_S)
        assert (info.value.partition, info.value.offset) == (tp, 2)
        assert await c.position(tp) == 2  # not advanced past the bad record
        with pytest.raises(RecordDeserializationError):
            await c.getmany(timeout_ms=1000)
        c.seek(tp, 3)
        assert [r.value for r in await read_until(c, lambda rs: len(rs) >= 1)] == [{"n": 3}]


async def test_auto_commit_on_its_interval_and_on_close(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 1)
    await produce(kafka_broker.bootstrap, topic, {0: 20})
    tp = TP(topic, 0)
    async with consumer(kafka_broker, group, [topic], auto_commit_interval_ms=200) as c:
        records = await read_until(c, lambda rs: len(rs) >= 20, max_records=5)
        # Until the application asks again, its last records may be in processing: the
        # interval commits up to them (at-least-once, as Java commits in the next poll).
        await until(
            lambda: _committed_is(c, tp, records[-5].offset), CONVERGE_S, "the first commit"
        )
        assert await c.getmany(timeout_ms=10) == {}

        async def committed() -> bool:
            return await c.committed(tp) == 20

        await until(committed, CONVERGE_S, "the interval's auto-commit")
    # On close: read a few more, close, and the commit lands without an explicit call.
    await produce(kafka_broker.bootstrap, topic, {0: 3})
    async with consumer(kafka_broker, group, [topic], auto_commit_interval_ms=3_600_000) as c:
        assert [r.offset for r in await read_until(c, lambda rs: len(rs) >= 3)] == [20, 21, 22]
    async with consumer(kafka_broker, group, [topic], enable_auto_commit=False) as c:
        assert await c.committed(tp) == 23


async def _committed_is(c: Any, tp: TopicPartition, offset: int) -> bool:
    return bool(await c.committed(tp) == offset)


async def test_poll_interval_leaves_the_group_and_the_next_call_rejoins(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 2)
    callbacks = Callbacks()
    lost = callbacks.lost

    await produce(kafka_broker.bootstrap, topic, {0: 5, 1: 5})
    async with consumer(
        kafka_broker,
        group,
        [topic],
        max_poll_interval_ms=1500,
        enable_auto_commit=False,
        listener=callbacks,
    ) as c:
        await read_until(c, lambda rs: len(rs) >= 10)
        # The application stops asking for records: the member leaves (KIP-62).
        await wait_for(lambda: lost, CONVERGE_S, "the poll-timeout leave")
        assert lost == [frozenset({TP(topic, 0), TP(topic, 1)})]
        await wait_for(
            lambda: c.member.state is MemberState.UNJOINED, CONVERGE_S, "the member to leave"
        )
        with pytest.raises(PollIntervalExceededError, match="max_poll_interval_ms"):
            await c.commit({TP(topic, 0): 5})
        # The next call rejoins; nothing was committed, so everything comes again.
        records = await read_until(c, lambda rs: len(rs) >= 10)
        assert sorted((r.partition, r.offset) for r in records) == sorted(
            (p, o) for p in (0, 1) for o in range(5)
        )
        await c.commit()
        assert await c.committed(TP(topic, 0)) == 5


async def test_iteration_and_getone(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    topic = unique("t")
    make_topic(kafka_broker, topic, 1)
    await produce(kafka_broker.bootstrap, topic, {0: 5})
    async with consumer(kafka_broker, unique("g"), [topic]) as c:
        one = await asyncio.wait_for(c.getone(), CONVERGE_S)
        assert one.offset == 0
        seen = []
        async for record in c:
            seen.append(record.offset)
            if len(seen) == 4:
                break
        assert seen == [1, 2, 3, 4]
        assert await c.position(TP(topic, 0)) == 5
    with pytest.raises(ConsumerStoppedError):
        await c.getmany()


async def test_subscribe_pattern_and_unsubscribe(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    prefix = unique("p")
    first, second = f"{prefix}-a", f"{prefix}-b"
    make_topic(kafka_broker, first, 1)
    make_topic(kafka_broker, second, 1)
    await produce(kafka_broker.bootstrap, first, {0: 3})
    await produce(kafka_broker.bootstrap, second, {0: 2})
    callbacks = Callbacks()
    revoked = callbacks.revoked
    group = unique("g")
    async with consumer(kafka_broker, group, [first], listener=callbacks) as c:
        assert [r.value for r in await read_until(c, lambda rs: len(rs) >= 3)] == [
            b"0-0",
            b"0-1",
            b"0-2",
        ]
        c.subscribe(pattern=f"{prefix}-.*")  # KIP-70: both topics from the next rebalance
        records = await read_until(c, lambda rs: len(rs) >= 2)
        assert {(r.topic, r.offset) for r in records} == {(second, 0), (second, 1)}
        assert c.assignment() == {TP(first, 0), TP(second, 0)}
        c.subscribe([second])  # first is revoked, its position committed first
        await poll_until(c, lambda: c.assignment() == {TP(second, 0)}, CONVERGE_S, "revoking")
        assert revoked and TP(first, 0) in revoked[-1]
        assert await c.committed(TP(first, 0)) == 3
        c.unsubscribe()
        await wait_for(lambda: c.assignment() == set(), CONVERGE_S, "the unsubscribe")
        assert await c.getmany(timeout_ms=100) == {}


@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_incremental_fetch_sessions_where_the_broker_has_them(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """KIP-227: after a full fetch, requests to a broker that opened a session name only what
    changed; a broker that opens none (the embedded one) gets full requests throughout."""
    topic = unique("t")
    make_topic(kafka_broker, topic, 4)
    requests: list[tuple[bool, int, int]] = []
    async with consumer(kafka_broker, unique("g"), [topic]) as c:
        plane: Any = c._fetcher._plane
        original = plane.fetch

        async def recorded(plan: Any) -> Any:
            response = await original(plan)
            requests.append((plan.session.full, len(plan.session.to_send), response.session_id))
            return response

        plane.fetch = recorded
        for i in range(5):  # a few rounds with data on one partition at a time
            await produce(kafka_broker.bootstrap, topic, {i % 4: 20})
            await read_until(c, lambda rs: len(rs) >= 20)
    sessions = {sid for _, _, sid in requests}
    incremental = [n for full, n, _ in requests if not full]
    if kafka_broker.kind == "kafka23":
        assert sessions - {0}, "Kafka 2.3 opened no fetch session"
        assert incremental and min(incremental) < 4  # unchanged partitions were not re-sent
    elif sessions == {0}:
        assert not incremental  # no session: every request is full


async def test_cancelled_calls_lose_no_record(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    """Cancelling getmany/getone (a timeout around them, a shutdown) never drops records whose
    positions moved: every record still comes out exactly once."""
    topic = unique("t")
    make_topic(kafka_broker, topic, 2)
    await produce(kafka_broker.bootstrap, topic, {0: 300, 1: 300})
    seen: list[tuple[int, int]] = []
    async with consumer(kafka_broker, unique("g"), [topic], enable_auto_commit=False) as c:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + CONVERGE_S
        i = 0
        while len(seen) < 600 and loop.time() < deadline:
            i += 1
            call: Awaitable[ConsumerRecord | dict[TopicPartition, list[ConsumerRecord]]] = (
                c.getone() if i % 3 == 0 else c.getmany(timeout_ms=1000, max_records=7)
            )
            task = asyncio.ensure_future(call)
            done, _ = await asyncio.wait({task}, timeout=0 if i % 2 else 0.05)
            if not done:
                task.cancel()
            try:
                result = await task
            except asyncio.CancelledError:
                continue
            if isinstance(result, dict):
                seen.extend((r.partition, r.offset) for rs in result.values() for r in rs)
            else:
                seen.append((result.partition, result.offset))
    assert sorted(seen) == sorted((p, o) for p in (0, 1) for o in range(300))
