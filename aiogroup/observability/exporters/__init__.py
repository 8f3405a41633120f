"""Publish a member's KIP-429 metrics to a monitoring system, under Java's names.

* :mod:`aiogroup.observability.exporters.prometheus`: a ``prometheus_client`` collector
  (``pip install 'aiogroup[prometheus]'``).
* :mod:`aiogroup.observability.exporters.opentelemetry`: observable instruments on an OpenTelemetry
  meter
  (``pip install 'aiogroup[opentelemetry]'``).

Both read ``member.metrics`` (see :mod:`aiogroup.observability.metrics`) when scraped or
collected; nothing
is recorded twice and nothing runs between scrapes. :data:`CATALOGUE` lists what they publish:
each metric of Java's ``consumer-coordinator-metrics`` group that a member keeps, with its kind
(a counter only ever grows) and unit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiogroup.observability.metrics import MetricsSource

__all__ = ["CATALOGUE", "Members", "MetricInfo"]


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """One published metric: Java's name, its kind, its unit and what it means."""

    name: str
    kind: Literal["gauge", "counter"]
    unit: str
    description: str


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
