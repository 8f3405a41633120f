"""The JSONL telemetry sink and the peer wrappers (no broker, no Spark)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from aiogroup.observability.telemetry import (
    SCHEMA_VERSION,
    JsonlTelemetry,
    KafkaPythonListener,
    confluent_callbacks,
    confluent_generation,
)
from aiogroup.protocol.types import TopicPartition


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        self.now += 0.5
        return self.now


def read_events(directory: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        events.extend(json.loads(line) for line in path.read_text().splitlines())
    return sorted(events, key=lambda e: e["seq"])


def test_events_are_versioned_lines(tmp_path: Path) -> None:
    clock = FakeClock()
    t = JsonlTelemetry(tmp_path, "m1", clock=clock)
    t.joined("g", "m1-abc", 3, "cooperative-sticky", leader=True)
    tps = [TopicPartition("b", 1), TopicPartition("a", 2), TopicPartition("a", 0)]
    t.partitions_assigned(tps, 3, "cooperative-sticky", 10.0, 10.25)
    t.partitions_revoked([TopicPartition("a", 0)], 4, "cooperative-sticky", 11.0, 11.5)
    t.partitions_lost([], 4, "cooperative-sticky", 12.0, 12.0)
    t.rebalance_completed(4, 0.75)
    t.rebalance_failed("REBALANCE_IN_PROGRESS", 1.5)
    t.offsets_committed({TopicPartition("a", 2): 42}, 4)
    t.processed(TopicPartition("a", 2), 40, 41)
    t.close()
    t.close()  # idempotent
    events = read_events(tmp_path)
    assert [e["type"] for e in events] == [
        "joined",
        "partitions_assigned",
        "partitions_revoked",
        "partitions_lost",
        "rebalance_completed",
        "rebalance_failed",
        "offsets_committed",
        "processed",
        "closed",
    ]
    assert all(e["v"] == SCHEMA_VERSION for e in events)
    assert all(e["group"] == "g" and e["member"] == "m1" for e in events)
    assert all(e["member_id"] == "m1-abc" and e["client"] == "aiogroup" for e in events)
    assigned = events[1]
    assert assigned["partitions"] == {"a": [0, 2], "b": [1]}
    assert (assigned["started"], assigned["ended"]) == (10.0, 10.25)
    assert assigned["rebalance_protocol"] == "cooperative"
    assert events[0]["leader"] is True
    assert events[6]["offsets"] == {"a": {"2": 42}}
    assert (events[7]["first"], events[7]["last"]) == (40, 41)
    assert [e["seq"] for e in events] == list(range(len(events)))
    ts = [e["ts"] for e in events]
    assert ts == sorted(ts)


def test_rotation_by_size(tmp_path: Path) -> None:
    t = JsonlTelemetry(tmp_path, "rot", max_bytes=2048)
    for i in range(100):
        t.processed(TopicPartition("t", i), i, i)
    t.close()
    files = sorted(tmp_path.glob("rot.*.jsonl"))
    assert len(files) > 2
    assert all(f.stat().st_size <= 2048 for f in files)
    events = read_events(tmp_path)
    assert [e["partition"] for e in events if e["type"] == "processed"] == list(range(100))


def test_appends_to_existing_file(tmp_path: Path) -> None:
    for _ in range(2):
        t = JsonlTelemetry(tmp_path, "same")
        t.rebalance_completed(1, 0.1)
        t.close()
    assert len(list(tmp_path.glob("*.jsonl"))) == 1
    assert len(read_events(tmp_path)) == 4


def test_sink_never_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    t = JsonlTelemetry(blocker / "sub", "m")
    t.rebalance_completed(1, 0.1)
    t.partitions_assigned([object()], 1, "range", 0.0, 0.0)  # type: ignore[list-item]
    t.offsets_committed({"bad": 1}, 1)  # type: ignore[dict-item]
    t.close()
    assert t.errors >= 3
    assert t.written == 0


def test_unserialisable_extra_is_stringified(tmp_path: Path) -> None:
    t = JsonlTelemetry(tmp_path, "m")
    t.joined("g", "id", 1, "range", when=object())
    t.close()
    assert t.errors == 0
    assert read_events(tmp_path)[0]["when"].startswith("<object")


class FakeTP:
    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition


class FakeConfluent:
    def __init__(self, generation: int) -> None:
        self.generation = generation

    def consumer_group_metadata(self) -> bytes:
        return b"CGMDv2:" + struct.pack("=i", self.generation) + b"g\x00\x00\x01"

    def memberid(self) -> str:
        return "rdkafka-1"


def test_confluent_generation() -> None:
    assert confluent_generation(FakeConfluent(7)) == 7
    assert confluent_generation(object()) is None


def test_confluent_callbacks_wrap_user_callbacks(tmp_path: Path) -> None:
    clock = FakeClock()
    t = JsonlTelemetry(tmp_path, "c1", clock=clock)
    seen: list[str] = []

    def user_assign(consumer: Any, partitions: list[Any]) -> None:
        seen.append(f"assign {len(partitions)}")

    def user_revoke(consumer: Any, partitions: list[Any]) -> None:
        raise RuntimeError("user bug")

    cbs = confluent_callbacks(
        t, protocol="cooperative-sticky", group_id="g", on_assign=user_assign, on_revoke=user_revoke
    )
    consumer = FakeConfluent(2)
    cbs["on_assign"](consumer, [FakeTP("t", 0), FakeTP("t", 1)])
    with pytest.raises(RuntimeError, match="user bug"):
        cbs["on_revoke"](consumer, [FakeTP("t", 1)])
    with pytest.raises(RuntimeError, match="user bug"):  # on_lost falls back to on_revoke
        cbs["on_lost"](consumer, [FakeTP("t", 0)])
    t.close()
    events = read_events(tmp_path)
    types = [e["type"] for e in events]
    assert types[:3] == ["joined", "partitions_assigned", "rebalance_completed"]
    assert types[3:] == ["partitions_revoked", "partitions_lost", "closed"]
    assert seen == ["assign 2"]
    assert all(e["client"] == "librdkafka" for e in events)
    assert events[0]["generation_id"] == 2 and events[0]["member_id"] == "rdkafka-1"
    assert events[1]["partitions"] == {"t": [0, 1]}
    assert events[1]["started"] < events[1]["ended"]
    assert "user bug" in events[3]["error"]
    assert events[2]["latency_s"] > 0


class UserListener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.calls: list[str] = []

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.calls.append("revoked")

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.calls.append("assigned")


class FakeGeneration:
    generation_id = 5
    member_id = "kp-1"
    protocol = "range"


class FakeKafkaPython:
    class _coordinator:  # mimics kafka-python
        _generation = FakeGeneration()


def test_kafka_python_listener(tmp_path: Path) -> None:
    t = JsonlTelemetry(tmp_path, "k1", clock=FakeClock())
    user = UserListener()
    listener = KafkaPythonListener(t, user, consumer=FakeKafkaPython(), group_id="g")
    assert isinstance(listener, ConsumerRebalanceListener)
    listener.on_partitions_revoked(set())
    listener.on_partitions_assigned({FakeTP("t", 3)})
    listener.on_partitions_lost({FakeTP("t", 3)})
    t.close()
    events = read_events(tmp_path)
    assert [e["type"] for e in events] == [
        "partitions_revoked",
        "joined",
        "partitions_assigned",
        "rebalance_completed",
        "partitions_lost",
        "closed",
    ]
    assert user.calls == ["revoked", "assigned", "revoked"]
    assert events[2]["protocol"] == "range" and events[2]["rebalance_protocol"] == "eager"
    assert events[2]["generation_id"] == 5 and events[2]["member_id"] == "kp-1"
    assert all(e["client"] == "kafka-python" for e in events)


def test_a_member_running_eager_under_a_cooperative_group_protocol_says_so(
    tmp_path: Path,
) -> None:
    """[cooperative-sticky, range] in a group whose vote picked cooperative-sticky runs eager
    (KIP-429): the member tells its own protocol; the name alone would say cooperative."""
    t = JsonlTelemetry(tmp_path, "m", clock=FakeClock())
    t.joined("g", "m-1", 3, "cooperative-sticky", rebalance_protocol="eager")
    t.partitions_assigned([TopicPartition("t", 0)], 3, "cooperative-sticky", 1.0, 2.0,
                          rebalance_protocol="eager")  # fmt: skip
    t.joined("g", "m-1", 4, "cooperative-sticky")
    t.close()
    events = read_events(tmp_path)
    assert [e["rebalance_protocol"] for e in events[:3]] == ["eager", "eager", "cooperative"]


def test_a_consumer_protocol_member_runs_cooperatively(tmp_path: Path) -> None:
    """KIP-848's group protocol (``"consumer"``, as a librdkafka or Java member with
    ``group.protocol=consumer`` names it) revokes only what moves: cooperative, not eager."""
    t = JsonlTelemetry(tmp_path, "m", clock=FakeClock())
    t.joined("g", "m-1", 3, "consumer")
    t.joined("g", "m-1", 4, "range")
    t.close()
    events = read_events(tmp_path)
    assert [e["rebalance_protocol"] for e in events[:2]] == ["cooperative", "eager"]


def test_observe_records_generations_without_callbacks(tmp_path: Path) -> None:
    from aiogroup.observability.telemetry import ConfluentRecorder

    t = JsonlTelemetry(tmp_path, "c2", clock=FakeClock())
    rec = ConfluentRecorder(t, protocol="cooperative-sticky", group_id="g")
    consumer = FakeConfluent(-1)
    rec.observe(consumer)  # not in a generation yet: nothing
    consumer.generation = 4
    rec.observe(consumer)
    rec.observe(consumer)  # same generation: once
    rec.observe(object())  # broken consumer: no event, no exception
    consumer.generation = 5
    rec.callbacks()["on_assign"](consumer, [])
    t.close()
    events = read_events(tmp_path)
    assert [(e["type"], e["generation_id"]) for e in events] == [
        ("joined", 4),
        ("joined", 5),
        ("partitions_assigned", 5),
        ("rebalance_completed", 5),
        ("closed", 5),
    ]
    assert t.errors == 0
