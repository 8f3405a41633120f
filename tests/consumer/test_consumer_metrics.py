"""A running consumer's metrics under Java's names, each held to what the test saw happen: the
Fetch answers the data plane received (counted and measured around it), the records handed
out, the commits answered, the application's calls. Java's windows are 30 s, so within a test
every value is still in the first sample: a rate is its total over the elapsed time plus one
window (Rate.windowSize)."""

from __future__ import annotations

import asyncio
import itertools
import math
from typing import Any

import pytest

from aiogroup.client.transport import Transport
from aiogroup.consumer.state import FetchedResponse
from aiogroup.consumer.wire import DataPlane
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from aiogroup.testing.fixtures import BrokerHandle

from .helpers import consumer, produce, read_until, unique

pytestmark = pytest.mark.timeout(120)

#: Clock reads on either side of one await differ by scheduling only; this bounds it.
JITTER_MS = 25.0


class Timed:
    """Wraps an async method to keep, per answered call, its start, end and answer."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> None:
        self.calls: list[tuple[float, float, Any]] = []
        original = getattr(cls, name)

        async def timed(this: Any, *args: Any, **kwargs: Any) -> Any:
            loop = asyncio.get_running_loop()
            start = loop.time()
            answer = await original(this, *args, **kwargs)
            self.calls.append((start, loop.time(), answer))
            return answer

        monkeypatch.setattr(cls, name, timed)

    def durations_ms(self) -> list[float]:
        return [(end - start) * 1000 for start, end, _ in self.calls]


def handle(broker: EmbeddedBroker) -> BrokerHandle:
    return BrokerHandle("embedded", broker.bootstrap)


def within_first_window(rate: float, total: float, elapsed_s: float) -> None:
    """A rate of ``total`` recorded within ``elapsed_s``, all in Java's first 30 s window."""
    assert total / (30.0 + elapsed_s) <= rate <= total / 30.0


async def test_fetch_and_consumed_metrics_are_the_fetches_answered_and_records_handed_out(
    embedded_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 3)
    for _ in range(3):  # three batches per partition: one per Fetch (below)
        await produce(embedded_broker.bootstrap, topic, {0: 40, 1: 40, 2: 40})
    fetches = Timed(monkeypatch, DataPlane, "fetch")
    embedded_broker.faults.delay("Fetch", 0.3, count=1)  # one answer at least 300 ms late
    loop = asyncio.get_running_loop()
    began = loop.time()
    one_batch = {"max_partition_fetch_bytes": 1}  # KIP-74: a whole batch all the same
    async with consumer(handle(embedded_broker), unique("g"), [topic], **one_batch) as c:
        before = c.metrics
        assert before["fetch-total"] == 0 and math.isnan(before["fetch-latency-avg"])
        records = await read_until(c, lambda rs: len(rs) >= 150, max_records=40)
        m = c.metrics
        answers = list(fetches.calls)  # the same moment: no await between the two reads
        elapsed = loop.time() - began
    sizes = [
        sum(len(p.records) for p in answer.partitions if p.records)
        for _, _, answer in answers
        if isinstance(answer, FetchedResponse)
    ]
    assert m["fetch-total"] == len(answers) >= 2
    assert m["bytes-consumed-total"] == sum(sizes) > 0
    assert m["fetch-size-max"] == max(sizes)
    assert m["fetch-size-avg"] == pytest.approx(sum(sizes) / len(sizes))
    durations = fetches.durations_ms()
    assert m["fetch-latency-max"] >= 300.0  # milliseconds, the delayed answer
    assert m["fetch-latency-max"] == pytest.approx(max(durations), abs=JITTER_MS)
    assert m["fetch-latency-avg"] == pytest.approx(sum(durations) / len(durations), abs=JITTER_MS)
    within_first_window(m["fetch-rate"], len(answers), elapsed)
    within_first_window(m["bytes-consumed-rate"], sum(sizes), elapsed)
    # Records count when handed to the application, not when fetched (300 are buffered).
    assert m["records-consumed-total"] == len(records)
    within_first_window(m["records-consumed-rate"], len(records), elapsed)


async def test_lag_and_lead_per_partition_and_current_lag(
    embedded_broker: EmbeddedBroker,
) -> None:
    topic = unique("orders.v1")  # a dot: Java's topic tag writes it as "_"
    embedded_broker.create_topic(topic, 3)
    await produce(embedded_broker.bootstrap, topic, {0: 60, 1: 80, 2: 100})
    tps = [TopicPartition(topic, p) for p in range(3)]
    async with consumer(handle(embedded_broker), unique("g"), [topic]) as c:
        records = await read_until(c, lambda rs: len(rs) >= 70, max_records=35)
        await read_until(c, lambda rs: all(c.highwater(tp) is not None for tp in tps))
        positions = {tp: await c.position(tp) for tp in tps}
        ends = {tp: c.highwater(tp) for tp in tps}
        assert ends == {tps[0]: 60, tps[1]: 80, tps[2]: 100}
        for tp in tps:
            assert c.current_lag(tp) == ends[tp] - positions[tp]  # type: ignore[operator]
        per = c.partition_metrics
        read = {TopicPartition(r.topic, r.partition) for r in records}
        assert set(per) == read  # recorded as the application is given records
        lags = {tp: per[tp]["records-lag"] for tp in read}
        for tp in read:
            assert per[tp]["records-lag"] == ends[tp] - positions[tp]  # type: ignore[operator]
            assert per[tp]["records-lead"] == positions[tp]  # the log starts at 0
            assert per[tp]["records-lag-max"] >= per[tp]["records-lag"]
            assert per[tp]["records-lead-min"] <= per[tp]["records-lead"]
        m = c.metrics
        assert m["records-lag-max"] == max(p["records-lag-max"] for p in per.values())
        assert m["records-lead-min"] == min(p["records-lead-min"] for p in per.values())
        assert max(lags.values()) <= m["records-lag-max"]
        with pytest.raises(Exception, match="not assigned"):
            c.current_lag(TopicPartition(topic, 7))
    assert c.partition_metrics == {}  # revoked on close: Java removes the sensors


async def test_poll_metrics_time_the_applications_calls(embedded_broker: EmbeddedBroker) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 1)
    await produce(embedded_broker.bootstrap, topic, {0: 50})
    loop = asyncio.get_running_loop()
    async with consumer(handle(embedded_broker), unique("g"), [topic]) as c:
        assert c.metrics["last-poll-seconds-ago"] == -1.0  # never asked yet
        calls: list[tuple[float, float]] = []
        got = 0
        while got < 50 or len(calls) < 6:
            start = loop.time()
            batch = await c.getmany(timeout_ms=100, max_records=10)
            calls.append((start, loop.time()))
            got += sum(map(len, batch.values()))
            await asyncio.sleep(0.05)  # the application's work on the batch, between calls
        m = c.metrics
    assert m["last-poll-seconds-ago"] == 0.0  # whole seconds; just asked
    gaps = [0.0] + [(b[0] - a[0]) * 1000 for a, b in itertools.pairwise(calls)]
    assert m["time-between-poll-max"] == pytest.approx(max(gaps), abs=JITTER_MS)
    assert m["time-between-poll-max"] >= 50.0
    assert m["time-between-poll-avg"] == pytest.approx(sum(gaps) / len(gaps), abs=JITTER_MS)
    ratios = [
        (end - start) / ((end - start) + gap / 1000)
        for (start, end), gap in zip(calls, gaps, strict=True)
        if end > start
    ]
    assert 0.0 < m["poll-idle-ratio-avg"] < 1.0
    assert m["poll-idle-ratio-avg"] == pytest.approx(sum(ratios) / len(ratios), abs=0.1)


async def test_commit_metrics(
    embedded_broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 1)
    await produce(embedded_broker.bootstrap, topic, {0: 10})
    commits = Timed(monkeypatch, Transport, "offset_commit")
    loop = asyncio.get_running_loop()
    began = loop.time()
    async with consumer(
        handle(embedded_broker), unique("g"), [topic], enable_auto_commit=False
    ) as c:
        await read_until(c, lambda rs: len(rs) >= 10)
        embedded_broker.faults.delay("OffsetCommit", 0.3, count=1)
        await c.commit()
        await c.commit({TopicPartition(topic, 0): 5})
        m = c.member.metrics
        assert c.metrics["commit-total"] == m["commit-total"]  # one registry
        elapsed = loop.time() - began
    durations = commits.durations_ms()
    assert m["commit-total"] == len(durations) == 2
    assert m["commit-latency-max"] >= 300.0
    assert m["commit-latency-max"] == pytest.approx(max(durations), abs=JITTER_MS)
    assert m["commit-latency-avg"] == pytest.approx(sum(durations) / 2, abs=JITTER_MS)
    within_first_window(m["commit-rate"], 2, elapsed)


async def test_prometheus_scrapes_a_consumer_as_micrometer_names_javas(
    embedded_broker: EmbeddedBroker,
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from aiogroup.observability.exporters.prometheus import register

    topic = unique("orders.v1")
    embedded_broker.create_topic(topic, 1)
    await produce(embedded_broker.bootstrap, topic, {0: 30})
    registry = CollectorRegistry()
    group = unique("g")
    async with consumer(handle(embedded_broker), group, [topic], client_id="svc-7") as c:
        collector = register(c, registry)
        await read_until(c, lambda rs: len(rs) >= 20, max_records=20)
        text = generate_latest(registry).decode()
        lag = c.partition_metrics[TopicPartition(topic, 0)]["records-lag"]
        consumed = c.metrics["records-consumed-total"]
        nodes = c.node_metrics
        collector.remove(c)
    labels = f'client_id="svc-7",group_id="{group}"'
    java_topic = topic.replace(".", "_")
    lines = set(text.splitlines())
    assert (
        f'kafka_consumer_fetch_manager_records_lag{{{labels},partition="0",'
        f'topic="{java_topic}"}} {lag}'
    ) in lines
    assert f"kafka_consumer_fetch_manager_records_consumed_total{{{labels}}} {consumed}" in lines
    # per broker fetched from (consumer-node-metrics, tag node-id): the one embedded broker
    ((node, fetched),) = nodes.items()
    assert fetched["records-fetched-total"] >= 20
    for name, value in fetched.items():
        series = f"kafka_consumer_node_{name.replace('-', '_')}"
        assert f'{series}{{{labels},node_id="{node}"}} {value}' in lines, series
    assert any(line.startswith("kafka_consumer_time_between_poll_avg{") for line in lines)
    assert any(line.startswith("kafka_consumer_coordinator_commit_total{") for line in lines)
    # records-lag-max is published per partition (as Micrometer keeps the finer one), only.
    lag_max = [line for line in lines if "fetch_manager_records_lag_max{" in line]
    assert lag_max and all('partition="0"' in line for line in lag_max)


class FixedConsumer:
    """What the exporters read of a consumer, with fixed values."""

    group_id = "billing"
    client_id = "svc-1"

    @property
    def metrics(self) -> dict[str, float]:
        return {"records-consumed-total": 12.0, "records-lag-max": 9.0, "fetch-latency-avg": 3.5}

    @property
    def partition_metrics(self) -> dict[TopicPartition, dict[str, float]]:
        return {
            TopicPartition("orders.v1", 2): {"records-lag": 9.0, "records-lag-max": 9.0},
            TopicPartition("orders.v1", 3): {"records-lag": math.nan, "records-lag-max": 4.0},
        }

    @property
    def node_metrics(self) -> dict[int, dict[str, float]]:
        return {1: {"records-fetched-total": 7.0}, 3: {"records-fetched-total": 5.0}}


def test_opentelemetry_reports_partition_metrics_with_messaging_attributes() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum

    from aiogroup.observability.exporters.opentelemetry import instrument

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument(FixedConsumer(), provider.get_meter("test"))
    data = reader.get_metrics_data()
    assert data is not None
    found = {m.name: m for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert set(found) == {
        "kafka.consumer.fetch.manager.records-consumed-total",
        "kafka.consumer.fetch.manager.fetch-latency-avg",
        "kafka.consumer.fetch.manager.records-lag",
        "kafka.consumer.fetch.manager.records-lag-max",
        "kafka.consumer.node.records-fetched-total",
    }  # the client-level records-lag-max is not published: the per-partition one is
    total = cast_sum(found["kafka.consumer.fetch.manager.records-consumed-total"].data, Sum)
    assert total.is_monotonic and total.data_points[0].value == 12.0
    lag = found["kafka.consumer.fetch.manager.records-lag"].data
    assert isinstance(lag, Gauge)
    (point,) = lag.data_points  # partition 3's lag is nan: not reported
    assert point.value == 9.0
    assert dict(point.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.consumer.group.name": "billing",
        "messaging.client.id": "svc-1",
        "messaging.destination.name": "orders.v1",
        "messaging.destination.partition.id": "2",
    }
    per_node = cast_sum(found["kafka.consumer.node.records-fetched-total"].data, Sum)
    assert per_node.is_monotonic
    assert sorted((dict(p.attributes or {})["kafka.node.id"], p.value)
                  for p in per_node.data_points) == [("1", 7.0), ("3", 5.0)]  # fmt: skip
    lag_max = found["kafka.consumer.fetch.manager.records-lag-max"].data
    assert isinstance(lag_max, Gauge)
    assert sorted(p.value for p in lag_max.data_points) == [4.0, 9.0]


def cast_sum(data: Any, kind: type) -> Any:
    assert isinstance(data, kind)
    return data
