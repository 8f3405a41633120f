"""The Kafka telemetry sink: the JSON Lines events as records keyed by group and member, sent
with aiogroup's transport; a full buffer drops (counted, logged), never blocks."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from typing import Any

import pytest
from aiokafka.record.memory_records import MemoryRecords

from aiogroup.observability.telemetry import JsonlTelemetry
from aiogroup.observability.telemetry_kafka import KafkaTelemetry, _partition_for, record_key
from aiogroup.protocol.types import TopicPartition as TP
from aiogroup.testing import EmbeddedBroker


def records(broker: EmbeddedBroker, topic: str) -> dict[int, list[tuple[bytes, bytes, int]]]:
    """Every record of ``topic`` per partition: (key, value, timestamp)."""
    out: dict[int, list[tuple[bytes, bytes, int]]] = {}
    for index in range(len(broker.log.topics[topic].partitions)):
        log = broker.log.partition(topic, index)
        assert log is not None
        found = out.setdefault(index, [])
        batches = MemoryRecords(bytes(log.read(0, 1 << 30)))
        while batches.has_next():
            batch = batches.next_batch()
            assert batch is not None
            for r in batch:
                found.append((bytes(r.key), bytes(r.value), int(r.timestamp)))
    return out


async def until(check: Any, what: str) -> None:
    """Wait (bounded) until ``check()`` holds: the sink sends from its own thread."""
    for _ in range(1000):
        if check():
            return
        await asyncio.sleep(0.01)  # polling another thread's progress, bounded
    raise AssertionError(f"timed out waiting for {what}")


def events(sink: Any) -> None:
    sink.joined("g", "m-1", 3, "cooperative-sticky")
    sink.partitions_assigned([TP("orders", 0), TP("orders", 2)], 3, "cooperative-sticky", 1.5, 1.75)
    sink.partitions_revoked([TP("orders", 2)], 4, "cooperative-sticky", 2.0, 2.25)
    sink.rebalance_completed(4, 0.5)


async def test_events_are_the_jsonl_lines_keyed_by_group_and_member(tmp_path: Any) -> None:
    clock = iter(float(t) for t in range(100, 200))
    async with EmbeddedBroker(topics={"telemetry": 3}) as broker:
        sink = KafkaTelemetry(broker.bootstrap, "telemetry", "worker-1",
                              clock=lambda: next(clock))
        events(sink)
        await sink.aclose()
        assert sink.dropped == 0 and sink.errors == 0
        got = records(broker, "telemetry")

    clock = iter(float(t) for t in range(100, 200))
    jsonl = JsonlTelemetry(tmp_path, "worker-1", clock=lambda: next(clock))
    events(jsonl)
    jsonl.close()
    lines = jsonl.path.read_bytes().splitlines()

    key = record_key("g", "worker-1")
    assert key == b"g/worker-1"
    partition = _partition_for(key, 3)
    assert {p for p, rs in got.items() if rs} == {partition}  # one member, one partition
    sent = got[partition]
    assert [r[0] for r in sent] == [key] * len(lines)
    # the values are the file's lines, but for the fields a process writes of itself
    def same(line: bytes) -> dict[str, Any]:
        event: dict[str, Any] = json.loads(line)
        event.pop("pid")
        return event
    assert [same(r[1]) for r in sent] == [same(line) for line in lines]
    assert [r[2] for r in sent] == [int(json.loads(r[1])["ts"] * 1000) for r in sent]
    assert [json.loads(r[1])["type"] for r in sent][-1] == "closed"
    assert sink.metrics()["records-sent-total"] == len(lines)


async def test_a_full_buffer_drops_counts_and_logs_without_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Nothing listens on this port: every event waits in the buffer, and past its bound is
    # dropped at once.
    caplog.set_level(logging.WARNING, "aiogroup.observability.telemetry_kafka")
    sink = KafkaTelemetry("127.0.0.1:9", "telemetry", "worker-2", buffer_events=5,
                          close_timeout_s=0.5, request_timeout_ms=500, retry_backoff_s=0.05)
    began = time.perf_counter()
    for i in range(50):
        sink.rebalance_completed(i, 0.1)
    emitting = time.perf_counter() - began
    assert sink.dropped == 45
    assert sink.metrics()["records-dropped-total"] == 45
    assert sink.metrics()["buffer-records"] == 5
    drops = [r for r in caplog.records if "dropped so far" in r.getMessage()]
    assert len(drops) == 1 and "buffer is full" in drops[0].getMessage()
    sink.close()  # the closed event finds the buffer full; the five waiting are never sent
    assert sink.dropped == 51
    assert "not delivered" in caplog.records[-1].getMessage()
    assert sink.errors == 0
    # not a timed assertion of the sink: a bound that a blocking emit (a connect, a request
    # time-out of 0.5 s per event) could not meet
    assert emitting < 0.5 * 5


async def test_events_wait_while_the_topic_is_away_and_go_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "aiogroup.observability.telemetry_kafka")
    async with EmbeddedBroker(topics={"telemetry": 1}) as broker:
        sink = KafkaTelemetry(broker.bootstrap, "telemetry", "worker-3", retry_backoff_s=0.02)
        sink.rebalance_completed(1, 0.1)
        await until(lambda: sink.written == 1, "the first event")
        topic = broker.log.topics.pop("telemetry")  # the topic disappears for a while
        for i in range(2, 6):
            sink.rebalance_completed(i, 0.1)
        await until(lambda: any("error code 3" in r.getMessage() for r in caplog.records),
                    "the broker's refusal")
        assert sink.written == 1
        broker.log.topics["telemetry"] = topic
        await until(lambda: sink.written == 5, "the rest")
        await sink.aclose()
        got = [json.loads(v)["generation_id"] for _, v, _ in records(broker, "telemetry")[0]]
    assert got[:5] == [1, 2, 3, 4, 5]
    assert sink.dropped == 0


def test_emit_from_other_threads() -> None:
    async def main() -> tuple[int, list[int]]:
        async with EmbeddedBroker(topics={"telemetry": 2}) as broker:
            sink = KafkaTelemetry(broker.bootstrap, "telemetry", "worker-4")

            def peer_callbacks(first: int) -> None:  # as librdkafka's callbacks would
                for i in range(first, first + 100):
                    sink.rebalance_completed(i, 0.0)

            threads = [threading.Thread(target=peer_callbacks, args=(k * 100,)) for k in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            await sink.aclose()
            got = [json.loads(v) for rs in records(broker, "telemetry").values()
                   for _, v, _ in rs]
            return sink.dropped, sorted(e["generation_id"] for e in got
                                        if e["type"] == "rebalance_completed")

    dropped, generations = asyncio.run(main())
    assert dropped == 0
    assert generations == list(range(400))
