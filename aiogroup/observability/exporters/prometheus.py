"""A Prometheus collector for group members' and consumers' metrics (``prometheus_client``).

Usage::

    from prometheus_client import start_http_server
    from aiogroup.observability.exporters.prometheus import register

    async with GroupMember(...) as member:
        register(member)            # on prometheus_client's default registry
        start_http_server(9100)

    register(consumer)              # a Consumer: its fetch and poll metrics too

Names follow the mapping Micrometer's ``KafkaClientMetrics`` applies to Java's consumer (so a
dashboard built for Java consumers reads these too): ``kafka_`` + the group without ``-metrics``
+ the name, dashes as underscores. Java's metric ``rebalance-latency-avg`` of group
``consumer-coordinator-metrics`` becomes ``kafka_consumer_coordinator_rebalance_latency_avg``,
``records-lag`` of ``consumer-fetch-manager-metrics``
``kafka_consumer_fetch_manager_records_lag``, ``last-poll-seconds-ago`` of ``consumer-metrics``
``kafka_consumer_last_poll_seconds_ago``; counters (Java's ``*-total``) are Prometheus counters
ending in ``_total``. Labels: ``client_id`` (Java's ``client-id`` tag) and ``group_id``, and for
per-partition metrics ``topic`` (dots as underscores, as Java tags it) and ``partition``, for
per-broker ones (``consumer-node-metrics``: ``kafka_consumer_node_records_fetched_total``, which
broker served the records, KIP-392) ``node_id`` (the broker id). Values
are Java's units (latencies in milliseconds); an average or maximum with nothing observed yet is
``NaN``, as in Java. A metric no registered source has (a member's fetch metrics) is left out.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from typing import Any

from aiogroup.observability.exporters import (
    EXPORTED,
    Members,
    MetricInfo,
    Scope,
    scoped_values,
    topic_tag,
)
from aiogroup.observability.metrics import MetricsSource

__all__ = [
    "PREFIX",
    "KafkaConsumerCollector",
    "KafkaCoordinatorCollector",
    "prometheus_name",
    "register",
]

#: Java's group ``consumer-coordinator-metrics`` as Micrometer names it.
PREFIX = "kafka_consumer_coordinator_"


def prometheus_name(info: MetricInfo) -> str:
    """``rebalance-total`` -> ``kafka_consumer_coordinator_rebalance`` (a counter: the client
    library adds ``_total``); ``rebalance-latency-avg`` -> ``..._rebalance_latency_avg``;
    ``records-lag`` (``consumer-fetch-manager-metrics``) ->
    ``kafka_consumer_fetch_manager_records_lag``."""
    name = info.name.removesuffix("-total") if info.kind == "counter" else info.name
    group = info.group.removesuffix("-metrics")
    return f"kafka_{group}_{name}".replace("-", "_")


#: The labels beyond ``client_id`` and ``group_id``, per scope, in :func:`scoped_values`'s
#: order of tags (Java's tag names, as Micrometer writes them).
_LABELS: dict[Scope, list[str]] = {
    "client": [], "partition": ["topic", "partition"], "node": ["node_id"],
}  # fmt: skip


class KafkaConsumerCollector(Members):
    """Collects ``source.metrics`` (and a consumer's ``partition_metrics``) of every member or
    consumer added, at each scrape."""

    def describe(self) -> list[Any]:
        # Names only, so the registry checks them without reading any member.
        return list(self._families().values())

    def collect(self) -> Iterator[Any]:
        families = self._families()
        for source in self.members():
            labels = [source.client_id, source.group_id or ""]
            for info, family in families.items():
                for tags, value in scoped_values(source, info):
                    if "topic" in tags:
                        tags["topic"] = topic_tag(tags["topic"])
                    family.add_metric([*labels, *tags.values()], value)
        yield from (family for family in families.values() if family.samples)

    def _families(self) -> dict[MetricInfo, Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[MetricInfo, Any] = {}
        for info in EXPORTED:
            unit = "" if info.unit == "1" else f", {info.unit}"
            help_text = f"{info.description} (Java: {info.name}{unit})"
            kind = CounterMetricFamily if info.kind == "counter" else GaugeMetricFamily
            labels = ["client_id", "group_id"]
            labels += _LABELS[info.scope]
            families[info] = kind(prometheus_name(info), help_text, labels=labels)
        return families


#: The collector's name before it published a consumer's metrics too.
KafkaCoordinatorCollector = KafkaConsumerCollector


def register(member: MetricsSource, registry: Any = None) -> KafkaConsumerCollector:
    """Publish the metrics of ``member`` (a GroupMember or a Consumer) on ``registry``
    (default: prometheus_client's).

    One collector serves every member registered on the same registry; call
    ``collector.remove(member)`` once the member is closed.
    """
    from prometheus_client import REGISTRY

    target = REGISTRY if registry is None else registry
    collector = _collectors.get(target)
    if collector is None:
        collector = _collectors[target] = KafkaConsumerCollector()
        target.register(collector)
    collector.add(member)
    return collector


_collectors: weakref.WeakKeyDictionary[Any, KafkaConsumerCollector] = weakref.WeakKeyDictionary()
