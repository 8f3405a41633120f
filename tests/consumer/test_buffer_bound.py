"""The prefetch buffer stays bounded by the fetch settings however long the application stops
reading: 1,000 partitions of 1 MB values, answered as a broker would (sans-I/O).

The bound (docs/consumer.md, "How fetching works"): a Fetch leaves only while the buffer holds
less than ``fetch_max_bytes``, asking for at most what is left of it, so with one broker the
buffer never holds more than ``fetch_max_bytes``, and with ``B`` brokers (one request in flight
each) never more than ``B * fetch_max_bytes``; plus, per response, the one batch KIP-74 lets a
broker send whole even when it is larger than what was asked for.
"""

from __future__ import annotations

import struct

import pytest

from aiogroup.consumer.state import ConsumerState, FetchConfig, FetchedPartition, FetchedResponse
from aiogroup.protocol.types import TopicPartition

from .batches import batch

MB = 1_000_000
PARTITIONS = [TopicPartition("big", p) for p in range(1000)]


def one_mb_batch_at(offset: int, cache: dict[int, bytes] = {}) -> bytes:  # noqa: B006
    """One v2 batch holding one 1 MB value at ``offset`` (the base offset is outside the CRC,
    so one built batch serves every offset; one bytes object per offset, shared)."""
    if offset not in cache:
        data = bytearray(cache[0] if cache else batch([b"v" * MB], 0))
        struct.pack_into(">q", data, 0, offset)
        cache[offset] = bytes(data)
    return cache[offset]


def answer(state: ConsumerState, now: float) -> int:
    """Answer every planned Fetch as a broker does: each partition's next batch while the
    response stays within ``max_bytes`` and its ``partition_max_bytes``, except that the first
    batch comes whole (KIP-74). Returns how many requests were answered."""
    plans = state.plan(now)
    for plan in plans:
        parts = []
        size = 0
        for tp, sent in plan.session.fetching.items():
            data = one_mb_batch_at(sent.fetch_offset)
            fits = size + len(data) <= plan.max_bytes and len(data) <= sent.max_bytes
            if size and not fits:
                parts.append(FetchedPartition(tp, 0, high_watermark=10**6, records=b""))
                continue
            size += len(data)
            parts.append(FetchedPartition(tp, 0, high_watermark=10**6, records=data))
        state.on_fetch_response(plan, FetchedResponse(0, 0, parts), now)
    return len(plans)


@pytest.mark.parametrize("brokers", [1, 3])
def test_a_consumer_that_stops_reading_buffers_at_most_fetch_max_bytes_per_broker(
    brokers: int,
) -> None:
    config = FetchConfig(auto_offset_reset="earliest")  # Java's defaults: 50 MiB, 1 MiB
    bound = brokers * config.fetch_max_bytes + brokers * len(one_mb_batch_at(0))
    state = ConsumerState(config)
    state.add(PARTITIONS)
    state.on_metadata({tp: (tp.partition % brokers, 0) for tp in PARTITIONS})
    state.take_committed_lookups(0.0)
    state.on_committed({tp: 0 for tp in PARTITIONS})
    now = 0.0
    highest = 0
    for _ in range(10_000):  # the application never reads
        now += 0.01
        if not answer(state, now):
            break
        highest = max(highest, state.buffered_bytes)
        assert state.buffered_bytes <= bound, (state.buffered_bytes, bound)
    else:
        pytest.fail("the consumer never stopped fetching")
    assert state.plan(now + 60) == []  # it stays stopped
    # Not vacuous: the buffer filled up to the bound's fetch_max_bytes part, far below the
    # 1,000 MB (a response of each partition) the rest of the rules would allow.
    assert highest >= config.fetch_max_bytes and highest <= bound
    # Reading frees the buffer and fetching starts again.
    state.collect(500, now, allowed=set(PARTITIONS))
    assert state.buffered_bytes < highest
    assert state.plan(now + 1) != []


def test_one_broker_with_a_small_fetch_max_bytes() -> None:
    config = FetchConfig(auto_offset_reset="earliest", fetch_max_bytes=4 * 1024 * 1024)
    state = ConsumerState(config)
    state.add(PARTITIONS)
    state.on_metadata({tp: (1, 0) for tp in PARTITIONS})
    state.take_committed_lookups(0.0)
    state.on_committed({tp: 0 for tp in PARTITIONS})
    now = 0.0
    while answer(state, now):
        now += 0.01
        assert state.buffered_bytes <= config.fetch_max_bytes + len(one_mb_batch_at(0))
    assert state.buffered_bytes >= config.fetch_max_bytes - len(one_mb_batch_at(0))


async def test_a_running_consumer_on_1000_partitions_stays_within_the_bound() -> None:
    """End to end on the embedded broker: 1,000 partitions, 1 MB values in 24 of them (24 MB,
    three times ``fetch_max_bytes``), a consumer that never reads. Every Fetch answer it
    buffers is checked against the bound (one broker: ``fetch_max_bytes`` plus one batch)."""
    from aiogroup import Consumer
    from aiogroup.testing import EmbeddedBroker

    from .helpers import wait_for

    fetch_max = 8 * 1024 * 1024
    async with EmbeddedBroker(topics={"big": 1000}) as broker:
        for p in range(0, 1000, 1000 // 24):
            log = broker.log.partition("big", p)
            assert log is not None
            log.append(one_mb_batch_at(0))
        consumer = Consumer(
            broker.bootstrap, None, auto_offset_reset="earliest", fetch_max_bytes=fetch_max
        )
        async with consumer:
            state = consumer._state  # the consumer's own figure (no public view of it)
            seen: list[int] = []
            receive = state.on_fetch_response

            def checked(*args: object, **kwargs: object) -> int:
                got = receive(*args, **kwargs)  # type: ignore[arg-type]
                seen.append(state.buffered_bytes)
                return got

            state.on_fetch_response = checked  # type: ignore[method-assign]
            consumer.assign(PARTITIONS)
            bound = fetch_max + len(one_mb_batch_at(0))
            await wait_for(
                lambda: max(seen, default=0) > bound
                or (state.buffered_bytes >= fetch_max and not state._in_flight),
                60,
                "the buffer to fill up to fetch_max_bytes",
            )
            assert max(seen) <= bound, max(seen)
            # It stopped at the bound with three times as much to read.
            assert max(seen) >= fetch_max and consumer.highwater(PARTITIONS[0]) == 1
