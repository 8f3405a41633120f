"""A member's KIP-429 metrics: ``member.metrics``, the user's sink, and the exporters (issue 16).

Names are Java's (``consumer-coordinator-metrics``); the Prometheus text and the OpenTelemetry
instruments carry them under the names their documentation gives.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import pytest

from aiogroup.client import GroupMember
from aiogroup.observability.metrics import KIP429Metrics
from aiogroup.testing import EmbeddedBroker
from tests.client.helpers import FAST

pytestmark = pytest.mark.timeout(60)

#: Java's consumer-coordinator-metrics for KIP-429 (ConsumerCoordinator's metrics and its
#: rebalance callback metrics), plus assigned-partitions.
#: Java's commit sensor of the same group (ConsumerCoordinator's commit-latency).
COMMIT_NAMES = {"commit-latency-avg", "commit-latency-max", "commit-rate", "commit-total"}
JAVA_NAMES = COMMIT_NAMES | {
    "rebalance-latency-avg",
    "rebalance-latency-max",
    "rebalance-latency-total",
    "rebalance-total",
    "rebalance-rate-per-hour",
    "failed-rebalance-total",
    "failed-rebalance-rate-per-hour",
    "last-rebalance-seconds-ago",
    "partition-revoked-latency-avg",
    "partition-revoked-latency-max",
    "partition-assigned-latency-avg",
    "partition-assigned-latency-max",
    "partition-lost-latency-avg",
    "partition-lost-latency-max",
    "assigned-partitions",
}


class Listener:
    def on_partitions_assigned(self, partitions: Any) -> None:
        pass

    def on_partitions_revoked(self, partitions: Any) -> None:
        pass


class FixedSource:
    """What the exporters read from a member, with fixed values."""

    group_id = "billing"
    client_id = "svc-1"

    @property
    def metrics(self) -> dict[str, float]:
        sink = KIP429Metrics(started_at=0.0)
        sink.observe("rebalance-latency", 0.25, 10.0)
        sink.observe("rebalance-latency", 0.75, 20.0)
        sink.observe("failed-rebalance", 1.0, 15.0)
        sink.observe("partition-assigned-latency", 0.003, 20.0)
        snapshot = sink.snapshot(50.0)
        snapshot["assigned-partitions"] = 3.0
        return snapshot


async def test_member_metrics_needs_no_clock(embedded_broker: EmbeddedBroker) -> None:
    embedded_broker.create_topic("orders", 3)
    member = GroupMember(
        embedded_broker.bootstrap, "billing", topics=["orders"], listener=Listener(), **FAST
    )
    before = member.metrics
    assert set(before) == JAVA_NAMES
    assert before["rebalance-total"] == 0 and before["last-rebalance-seconds-ago"] == -1
    assert math.isnan(before["rebalance-latency-avg"])
    async with member:
        await member.wait_for_assignment(timeout=10)
        after = member.metrics
    assert after["rebalance-total"] == 1
    assert after["failed-rebalance-total"] == 0
    assert 0 < after["rebalance-latency-avg"] == after["rebalance-latency-max"] < 10_000
    assert 0 <= after["last-rebalance-seconds-ago"] < 10
    assert after["assigned-partitions"] == 3
    assert 0 <= after["partition-assigned-latency-avg"] < 1_000  # the callback ran, in ms
    assert math.isnan(after["partition-lost-latency-avg"])


async def test_the_users_sink_sees_every_observation_too(embedded_broker: EmbeddedBroker) -> None:
    class Raising:
        def observe(self, name: str, value: float, now: float) -> None:
            raise RuntimeError("a broken exporter")

    embedded_broker.create_topic("orders", 1)
    sink = KIP429Metrics()
    async with GroupMember(
        embedded_broker.bootstrap, "a", topics=["orders"], metrics=sink, **FAST
    ) as member:
        await member.wait_for_assignment(timeout=10)
        assert sink.snapshot(0.0)["rebalance-total"] == member.metrics["rebalance-total"] == 1
    # A sink that raises does not break the member (and the member's own metrics go on).
    async with GroupMember(
        embedded_broker.bootstrap, "b", topics=["orders"], metrics=Raising(), **FAST
    ) as member:
        await member.wait_for_assignment(timeout=10)
        assert member.metrics["rebalance-total"] == 1


#: The exposition of FixedSource's metrics, as Prometheus scrapes it.
PROMETHEUS_TEXT = (Path(__file__).parents[1] / "data" / "kip429_prometheus.txt").read_text()


def test_prometheus_text() -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from aiogroup.observability.exporters.prometheus import register

    registry = CollectorRegistry()
    collector = register(FixedSource(), registry)
    assert generate_latest(registry).decode() == PROMETHEUS_TEXT
    assert register(FixedSource(), registry) is collector  # one collector per registry
    assert (
        generate_latest(registry).decode().count("kafka_consumer_coordinator_rebalance_total{") == 2
    )


async def test_prometheus_scrapes_a_running_member(embedded_broker: EmbeddedBroker) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    from aiogroup.observability.exporters.prometheus import register

    embedded_broker.create_topic("orders", 3)
    registry = CollectorRegistry()
    async with GroupMember(
        embedded_broker.bootstrap, "billing", topics=["orders"], client_id="svc-1", **FAST
    ) as member:
        collector = register(member, registry)
        await member.wait_for_assignment(timeout=10)
        text = generate_latest(registry).decode()
    labels = '{client_id="svc-1",group_id="billing"}'
    assert f"kafka_consumer_coordinator_rebalance_total{labels} 1.0\n" in text
    assert f"kafka_consumer_coordinator_assigned_partitions{labels} 3.0\n" in text
    collector.remove(member)
    assert "svc-1" not in generate_latest(registry).decode()


def test_opentelemetry_instruments() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import Gauge, InMemoryMetricReader, Sum

    from aiogroup.observability.exporters.opentelemetry import instrument

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    instrument(FixedSource(), provider.get_meter("test"))
    data = reader.get_metrics_data()
    assert data is not None
    (scope,) = [s for r in data.resource_metrics for s in r.scope_metrics]
    found = {m.name: m for m in scope.metrics}
    names = {n.removeprefix("kafka.consumer.coordinator.") for n in found}
    # Averages and maxima never observed are left out (Java's NaN); FixedSource commits none.
    assert names == JAVA_NAMES - COMMIT_NAMES - {
        "partition-revoked-latency-avg",
        "partition-revoked-latency-max",
        "partition-lost-latency-avg",
        "partition-lost-latency-max",
    }
    avg = found["kafka.consumer.coordinator.rebalance-latency-avg"]
    (point,) = cast(Gauge, avg.data).data_points
    assert point.value == 500.0 and avg.unit == "ms"
    assert dict(point.attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.consumer.group.name": "billing",
        "messaging.client.id": "svc-1",
    }
    total = cast(Sum, found["kafka.consumer.coordinator.rebalance-total"].data)
    assert total.is_monotonic and total.data_points[0].value == 2.0
