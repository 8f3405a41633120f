"""Publish a member's or a consumer's metrics to a monitoring system, under Java's names.

* :mod:`aiogroup.observability.exporters.prometheus`: a ``prometheus_client`` collector
  (``pip install 'aiogroup[prometheus]'``).
* :mod:`aiogroup.observability.exporters.opentelemetry`: observable instruments on an OpenTelemetry
  meter
  (``pip install 'aiogroup[opentelemetry]'``).

Both read ``source.metrics`` (and a consumer's ``partition_metrics`` and ``node_metrics``; see
:mod:`aiogroup.observability.registry`) when scraped or collected; nothing is recorded twice and
nothing runs between scrapes. :data:`CATALOGUE` lists what they publish: each metric a member
(Java's ``consumer-coordinator-metrics``) or a consumer (also ``consumer-fetch-manager-metrics``,
``consumer-metrics`` and, per broker fetched from, ``consumer-node-metrics``) keeps, with its
group, its kind (a counter only ever grows), its unit and its scope (the client, a partition or
a broker: :func:`scoped_values` gives each value with its Java tags). A name Java keeps both
per client and per partition (``records-lag-max``, ``records-lead-min``) is published per
partition only, as Micrometer and OpenTelemetry's Kafka metrics reporter keep the most
detailed of the two (:data:`EXPORTED`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from aiogroup.observability.metrics import MetricsSource
from aiogroup.observability.registry import (
    CONSUMER_METRICS,
    COORDINATOR_METRICS,
    FETCH_MANAGER_METRICS,
    NODE_METRICS,
)
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "CATALOGUE",
    "EXPORTED",
    "Members",
    "MetricInfo",
    "NodeMetricsSource",
    "PartitionMetricsSource",
    "Scope",
    "partition_values",
    "scoped_values",
    "topic_tag",
]

#: Where a metric is kept: once per client, per partition (Java's tags ``topic`` and
#: ``partition``) or per broker (``node-id``).
Scope = Literal["client", "partition", "node"]


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """One published metric: Java's name, its kind, its unit and what it means; its Java
    group, and its :data:`Scope`."""

    name: str
    kind: Literal["gauge", "counter"]
    unit: str
    description: str
    group: str = COORDINATOR_METRICS
    scope: Scope = "client"


@runtime_checkable
class PartitionMetricsSource(MetricsSource, Protocol):
    """A source with per-partition metrics too (a :class:`~aiogroup.Consumer`)."""

    @property
    def partition_metrics(self) -> dict[TopicPartition, dict[str, float]]: ...


@runtime_checkable
class NodeMetricsSource(MetricsSource, Protocol):
    """A source with per-broker metrics too (a :class:`~aiogroup.Consumer`: which broker served
    its records, KIP-392)."""

    @property
    def node_metrics(self) -> dict[int, dict[str, float]]: ...


def topic_tag(topic: str) -> str:
    """The ``topic`` tag as Java writes it (dots become underscores, for JMX)."""
    return topic.replace(".", "_")


def partition_values(
    source: MetricsSource, name: str
) -> Iterator[tuple[TopicPartition, float]]:
    """``(partition, value)`` of per-partition metric ``name`` (nothing for a source without
    partitions)."""
    if isinstance(source, PartitionMetricsSource):
        for tp, values in source.partition_metrics.items():
            value = values.get(name)
            if value is not None:
                yield tp, value


def scoped_values(
    source: MetricsSource, info: MetricInfo
) -> Iterator[tuple[dict[str, str], float]]:
    """Each value of ``info`` at ``source`` with its Java tags beyond the client's: ``{}`` for
    a client-level metric, ``{"topic", "partition"}`` per partition, ``{"node-id"}`` (the
    broker id) per broker. A value the source does not keep (yet) is left out."""
    if info.scope == "partition":
        for tp, value in partition_values(source, info.name):
            yield {"topic": tp.topic, "partition": str(tp.partition)}, value
    elif info.scope == "node":
        if isinstance(source, NodeMetricsSource):
            for node, values in source.node_metrics.items():
                got = values.get(info.name)
                if got is not None:
                    yield {"node-id": str(node)}, got
    else:
        client = source.metrics.get(info.name)
        if client is not None:
            yield {}, client


def _latency(kind: str) -> tuple[MetricInfo, MetricInfo]:
    return (
        MetricInfo(
            f"partition-{kind}-latency-avg",
            "gauge",
            "ms",
            f"Average time of an on_partitions_{kind} callback",
        ),
        MetricInfo(
            f"partition-{kind}-latency-max",
            "gauge",
            "ms",
            f"Longest on_partitions_{kind} callback",
        ),
    )


#: Every metric the exporters publish, in Java's order.
CATALOGUE: tuple[MetricInfo, ...] = (
    MetricInfo(
        "rebalance-latency-avg",
        "gauge",
        "ms",
        "Average time of a successful rebalance, callbacks included",
    ),
    MetricInfo("rebalance-latency-max", "gauge", "ms", "Longest successful rebalance"),
    MetricInfo("rebalance-latency-total", "counter", "ms", "Time spent in successful rebalances"),
    MetricInfo("rebalance-total", "counter", "1", "Successful rebalances"),
    MetricInfo(
        "rebalance-rate-per-hour", "gauge", "1/h", "Successful rebalances per hour, recently"
    ),
    MetricInfo(
        "failed-rebalance-total",
        "counter",
        "1",
        "Failed rebalances (a JoinGroup or SyncGroup error)",
    ),
    MetricInfo(
        "failed-rebalance-rate-per-hour", "gauge", "1/h", "Failed rebalances per hour, recently"
    ),
    MetricInfo(
        "last-rebalance-seconds-ago",
        "gauge",
        "s",
        "Seconds since the last successful rebalance (-1 before the first)",
    ),
    *_latency("revoked"),
    *_latency("assigned"),
    *_latency("lost"),
    MetricInfo("assigned-partitions", "gauge", "1", "Partitions the member owns now"),
    MetricInfo("commit-latency-avg", "gauge", "ms", "Average time of an answered OffsetCommit"),
    MetricInfo("commit-latency-max", "gauge", "ms", "Longest answered OffsetCommit"),
    MetricInfo("commit-rate", "gauge", "1/s", "OffsetCommit answers per second, recently"),
    MetricInfo("commit-total", "counter", "1", "OffsetCommit answers"),
    *(
        MetricInfo(
            name,
            "counter" if name.endswith("-total") else "gauge",
            unit,
            description,
            FETCH_MANAGER_METRICS,
        )
        for name, unit, description in (
            ("fetch-latency-avg", "ms", "Average time of an answered Fetch"),
            ("fetch-latency-max", "ms", "Longest answered Fetch"),
            ("fetch-rate", "1/s", "Fetch answers per second, recently"),
            ("fetch-total", "1", "Fetch answers"),
            ("fetch-size-avg", "By", "Average record bytes per Fetch answer"),
            ("fetch-size-max", "By", "Most record bytes in one Fetch answer"),
            ("bytes-consumed-rate", "By/s", "Record bytes fetched per second"),
            ("bytes-consumed-total", "By", "Record bytes fetched"),
            ("records-consumed-rate", "1/s", "Records handed out per second"),
            ("records-consumed-total", "1", "Records handed to the application"),
            ("records-lag-max", "1", "Largest recent lag of any partition"),
            ("records-lead-min", "1", "Smallest recent lead of any partition"),
        )
    ),
    *(
        MetricInfo(name, "gauge", unit, description, CONSUMER_METRICS)
        for name, unit, description in (
            ("last-poll-seconds-ago", "s", "Since the application last asked for records"),
            ("time-between-poll-avg", "ms", "Average time between two calls for records"),
            ("time-between-poll-max", "ms", "Longest time between two calls for records"),
            ("poll-idle-ratio-avg", "1", "Share of time spent waiting inside getmany/getone"),
        )
    ),
    *(
        MetricInfo(name, "gauge", "1", description, FETCH_MANAGER_METRICS, "partition")
        for name, description in (
            ("records-lag", "Records between the position and the partition's end, latest"),
            ("records-lag-avg", "Average recent lag of the partition"),
            ("records-lag-max", "Largest recent lag of the partition"),
            ("records-lead", "Records between the log start and the position, latest"),
            ("records-lead-avg", "Average recent lead of the partition"),
            ("records-lead-min", "Smallest recent lead of the partition"),
        )
    ),
    *(
        MetricInfo(name, "counter", unit, description, NODE_METRICS, "node")
        for name, unit, description in (
            ("fetch-total", "1", "Fetch answers from the broker"),
            ("bytes-fetched-total", "By", "Record bytes in the broker's Fetch answers"),
            ("records-fetched-total", "1", "Records in the broker's complete batches"),
        )
    ),
)

_PER_PARTITION = {info.name for info in CATALOGUE if info.scope == "partition"}

#: What the exporters publish: :data:`CATALOGUE` but the client-level metrics whose name is
#: also a per-partition one (those are published per partition).
EXPORTED: tuple[MetricInfo, ...] = tuple(
    info for info in CATALOGUE if info.scope == "partition" or info.name not in _PER_PARTITION
)


class Members:
    """The members an exporter reports; each is read at every scrape or collection."""

    def __init__(self, *members: MetricsSource) -> None:
        self._members: list[MetricsSource] = list(members)

    def add(self, member: MetricsSource) -> None:
        if member not in self._members:
            self._members.append(member)

    def remove(self, member: MetricsSource) -> None:
        """Stop reporting ``member`` (once it is closed)."""
        if member in self._members:
            self._members.remove(member)

    def members(self) -> list[MetricsSource]:
        return list(self._members)
