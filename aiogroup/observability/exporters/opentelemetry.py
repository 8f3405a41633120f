"""Group members' and consumers' metrics as OpenTelemetry observable instruments.

Usage (with any configured ``MeterProvider``)::

    from aiogroup.observability.exporters.opentelemetry import instrument

    async with GroupMember(...) as member:
        instrument(member)          # on the global meter provider's "aiogroup" meter

Each metric of :data:`aiogroup.observability.exporters.EXPORTED` is an instrument named
``kafka.`` + Java's group without ``-metrics``, dashes as dots, + ``.`` + Java's name:
``kafka.consumer.coordinator.rebalance-latency-avg``,
``kafka.consumer.fetch.manager.records-lag``, ``kafka.consumer.last-poll-seconds-ago`` (a
Prometheus exporter of OpenTelemetry then shows the same names as
:mod:`aiogroup.observability.exporters.prometheus`). Java's ``*-total`` metrics are observable
counters, the rest observable gauges; units are Java's (``ms``, ``s``, ``By``). Attributes:
``messaging.system`` (``kafka``), ``messaging.consumer.group.name`` and ``messaging.client.id``,
and per partition ``messaging.destination.name`` (the topic) and
``messaging.destination.partition.id``, as OpenTelemetry's messaging conventions name them;
per broker (``kafka.consumer.node.records-fetched-total``: which broker served the records,
KIP-392) ``kafka.node.id``, the broker id (the conventions name no broker attribute: this one
sits beside their ``kafka.cluster.id``).
Averages and maxima with nothing observed yet are not reported (Java reports ``NaN``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from aiogroup.observability.exporters import EXPORTED, Members, MetricInfo, scoped_values
from aiogroup.observability.metrics import MetricsSource

__all__ = [
    "PREFIX",
    "KafkaConsumerInstruments",
    "KafkaCoordinatorInstruments",
    "instrument",
    "instrument_name",
]

#: The prefix of the ``consumer-coordinator-metrics`` group's instruments.
PREFIX = "kafka.consumer.coordinator."

#: Java's tags (:func:`~aiogroup.observability.exporters.scoped_values`) as attributes.
_ATTRIBUTES = {
    "topic": "messaging.destination.name",
    "partition": "messaging.destination.partition.id",
    "node-id": "kafka.node.id",
}


def instrument_name(info: MetricInfo) -> str:
    """``kafka.consumer.coordinator.rebalance-latency-avg``, ``kafka.consumer.last-poll-...``"""
    return "kafka." + info.group.removesuffix("-metrics").replace("-", ".") + "." + info.name


class KafkaConsumerInstruments(Members):
    """One observable instrument per metric on ``meter``, reporting every member added."""

    def __init__(self, meter: Any, *members: MetricsSource) -> None:
        super().__init__(*members)
        self.instruments = [self._create(meter, info) for info in EXPORTED]

    def _create(self, meter: Any, info: MetricInfo) -> Any:
        create = (
            meter.create_observable_counter
            if info.kind == "counter"
            else meter.create_observable_gauge
        )
        return create(
            instrument_name(info),
            callbacks=[self._callback(info)],
            unit=info.unit,
            description=info.description,
        )

    def _callback(self, info: MetricInfo) -> Callable[[Any], Iterable[Any]]:
        from opentelemetry.metrics import Observation

        def observe(options: Any) -> Iterable[Any]:
            out = []
            for member in self.members():
                attributes: dict[str, str] = {
                    "messaging.system": "kafka",
                    "messaging.consumer.group.name": member.group_id or "",
                    "messaging.client.id": member.client_id,
                }
                for tags, value in scoped_values(member, info):
                    if not math.isnan(value):
                        where = {_ATTRIBUTES[tag]: got for tag, got in tags.items()}
                        out.append(Observation(value, {**attributes, **where}))
            return out

        return observe


#: The instruments' name before they reported a consumer's metrics too.
KafkaCoordinatorInstruments = KafkaConsumerInstruments


def instrument(member: MetricsSource, meter: Any = None) -> KafkaConsumerInstruments:
    """Report ``member``'s metrics through ``meter`` (default: the global provider's
    ``aiogroup`` meter). The instruments are created once per meter; later members join them.
    Call ``instruments.remove(member)`` once the member is closed."""
    if meter is None:
        from opentelemetry import metrics

        meter = metrics.get_meter("aiogroup")
    entry = _by_meter.get(id(meter))
    if entry is None:
        entry = _by_meter[id(meter)] = (meter, KafkaConsumerInstruments(meter))
    entry[1].add(member)
    return entry[1]


# Keyed by id, holding the meter itself so the id stays unique while the entry lives.
_by_meter: dict[int, tuple[Any, KafkaConsumerInstruments]] = {}
