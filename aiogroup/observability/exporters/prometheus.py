"""A Prometheus collector for group members' KIP-429 metrics (``prometheus_client``).

Usage::

    from prometheus_client import start_http_server
    from aiogroup.observability.exporters.prometheus import register

    async with GroupMember(...) as member:
        register(member)            # on prometheus_client's default registry
        start_http_server(9100)

Names follow the mapping Micrometer's ``KafkaClientMetrics`` applies to Java's consumer (so a
dashboard built for Java consumers reads these too): Java's metric ``rebalance-latency-avg`` of
group ``consumer-coordinator-metrics`` becomes ``kafka_consumer_coordinator_rebalance_latency_avg``;
counters (Java's ``*-total``) are Prometheus counters ending in ``_total``. Labels: ``client_id``
(Java's ``client-id`` tag) and ``group_id``. Values are Java's units (latencies in
milliseconds); an average or maximum with nothing observed yet is ``NaN``, as in Java.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from aiogroup.observability.exporters import CATALOGUE, Members, MetricInfo
from aiogroup.observability.metrics import MetricsSource

__all__ = ["PREFIX", "KafkaCoordinatorCollector", "prometheus_name", "register"]

#: Java's group ``consumer-coordinator-metrics`` as Micrometer names it.
PREFIX = "kafka_consumer_coordinator_"


def prometheus_name(info: MetricInfo) -> str:
    """``rebalance-total`` -> ``kafka_consumer_coordinator_rebalance`` (a counter: the client
    library adds ``_total``); ``rebalance-latency-avg`` -> ``..._rebalance_latency_avg``."""
    name = info.name.removesuffix("-total") if info.kind == "counter" else info.name
    return PREFIX + name.replace("-", "_")


class KafkaCoordinatorCollector(Members):
    """Collects ``member.metrics`` of every member added, at each scrape."""

    def describe(self) -> list[Any]:
        # Names only, so the registry checks them without reading any member.
        return list(self._families().values())

    def collect(self) -> Iterator[Any]:
        families = self._families()
        for member in self.members():
            snapshot = member.metrics
            labels = [member.client_id, member.group_id]
            for info, family in families.items():
                value = snapshot.get(info.name)
                if value is not None:
                    family.add_metric(labels, value)
        yield from families.values()

    def _families(self) -> dict[MetricInfo, Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[MetricInfo, Any] = {}
        for info in CATALOGUE:
            unit = "" if info.unit == "1" else f", {info.unit}"
            help_text = f"{info.description} (Java: {info.name}{unit})"
            kind = CounterMetricFamily if info.kind == "counter" else GaugeMetricFamily
            families[info] = kind(
                prometheus_name(info), help_text, labels=["client_id", "group_id"]
            )
        return families


def register(member: MetricsSource, registry: Any = None) -> KafkaCoordinatorCollector:
    """Publish ``member``'s metrics on ``registry`` (default: prometheus_client's).

    One collector serves every member registered on the same registry; call
    ``collector.remove(member)`` once the member is closed.
    """
    from prometheus_client import REGISTRY

    target = REGISTRY if registry is None else registry
    collector = _collectors.get(target)
    if collector is None:
        collector = _collectors[target] = KafkaCoordinatorCollector()
        target.register(collector)
    collector.add(member)
    return collector


_collectors: weakref.WeakKeyDictionary[Any, KafkaCoordinatorCollector] = weakref.WeakKeyDictionary()
