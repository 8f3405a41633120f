"""A Fetch answer is freed as soon as nothing reads it any more, by reference counting alone
(issue 29).

aiokafka's connection decodes an answer with ``request.RESPONSE_TYPE.decode(buffer)``. The
transport's prepared request once answered that with ``self.RESPONSE_TYPE = self``: every
request was a reference cycle holding the answer it decoded, so each Fetch answer (12 MiB with
12 partitions of 10 KiB records) stayed in memory until the cyclic garbage collector's next
full pass, long after its records were read: ~70 MB more peak RSS than aiokafka on the
``10KB`` benchmark shape. These tests run with the cyclic collector off, so anything left to
it stays, and is counted.
"""

from __future__ import annotations

import gc
import io
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest

from aiogroup.client.transport import PreparedRequest
from aiogroup.consumer.fetch_response import FetchResponseDecoder
from aiogroup.consumer.state import FetchedResponse
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.wire import encode_response

from .batches import batch


@pytest.fixture
def no_cyclic_gc() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def live(kind: type) -> int:
    """Objects of ``kind`` still tracked: alive, or cyclic garbage the collector has not run
    for (it is off)."""
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def fetch_answer(records: bytes) -> bytes:
    """A Fetch v12 answer (after its length prefix) with one partition holding ``records``."""
    part = {
        "partition_index": 0, "error_code": 0, "high_watermark": 10, "last_stable_offset": 10,
        "log_start_offset": 0, "aborted_transactions": None, "preferred_read_replica": -1,
        "records": records,
    }  # fmt: skip
    body = {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "partitions": [part]}]}  # fmt: skip
    return encode_response(1, 12, 42, body)[4:]


def test_a_prepared_request_is_freed_with_its_answer_without_the_cyclic_gc(
    no_cyclic_gc: None,
) -> None:
    message = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id="",
    )  # fmt: skip
    prepared = PreparedRequest(message, FetchResponseDecoder, 12)
    data = fetch_answer(batch([b"v" * 10_000] * 10))
    # What aiokafka's connection does with an answer (conn.py, _handle_frame).
    buffer = io.BytesIO(data)
    header = prepared.parse_response_header(buffer)
    response: Any = prepared.RESPONSE_TYPE.decode(buffer)
    assert header.correlation_id == 42
    assert isinstance(response, FetchedResponse) and response.partitions[0].records
    gone = weakref.ref(prepared)
    del prepared
    assert gone() is None, "the prepared request is a reference cycle: it holds its answer"
    assert live(FetchedResponse) == 1  # the one we hold
    del response
    assert live(FetchedResponse) == 0


async def test_a_consumer_keeps_no_fetch_answer_it_has_read(no_cyclic_gc: None) -> None:
    """End to end on the embedded broker: 400 records read over many Fetch answers (small
    ones: ``max_partition_fetch_bytes=1``); afterwards no answer is left, and no request but
    the ones in flight (the old code left 13 of each here)."""
    from aiogroup import Consumer
    from aiogroup.testing import EmbeddedBroker

    partitions = [TopicPartition("t", p) for p in range(4)]
    batches = 10
    async with EmbeddedBroker(topics={"t": len(partitions)}) as broker:
        for tp in partitions:
            log = broker.log.partition(tp.topic, tp.partition)
            assert log is not None
            for i in range(batches):
                log.append(batch([b"v" * 1000] * 10, 10 * i))
        consumer = Consumer(
            broker.bootstrap,
            None,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=1,  # one batch (KIP-74) per partition per answer
        )
        async with consumer:
            consumer.assign(partitions)
            got = 0
            while got < len(partitions) * batches * 10:
                records = await consumer.getmany(timeout_ms=10_000)
                assert records, "no records within 10 s"
                got += sum(len(rs) for rs in records.values())
                del records
            # Fetches go on (empty answers now): the one in flight, and one being planned.
            assert live(PreparedRequest) <= 2, live(PreparedRequest)
            assert live(FetchedResponse) <= 1, live(FetchedResponse)
