"""Group members' KIP-429 metrics as OpenTelemetry observable instruments.

Usage (with any configured ``MeterProvider``)::

    from aiogroup.observability.exporters.opentelemetry import instrument

    async with GroupMember(...) as member:
        instrument(member)          # on the global meter provider's "aiogroup" meter

Each metric of :data:`aiogroup.observability.exporters.CATALOGUE` is an instrument named
``kafka.consumer.coordinator.<Java's name>`` (``kafka.consumer.coordinator.rebalance-latency-avg``;
a Prometheus exporter of OpenTelemetry then shows the same names as
:mod:`aiogroup.observability.exporters.prometheus`). Java's ``*-total`` metrics are observable
counters, the
rest observable gauges; units are Java's (``ms``, ``s``). Attributes: ``messaging.system``
(``kafka``), ``messaging.consumer.group.name`` and ``messaging.client.id``, as OpenTelemetry's
messaging conventions name them. Averages and maxima with nothing observed yet are not reported
(Java reports ``NaN``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from aiogroup.observability.exporters import CATALOGUE, Members, MetricInfo
from aiogroup.observability.metrics import MetricsSource

__all__ = ["PREFIX", "KafkaCoordinatorInstruments", "instrument"]

PREFIX = "kafka.consumer.coordinator."


class KafkaCoordinatorInstruments(Members):
    """One observable instrument per metric on ``meter``, reporting every member added."""

    def __init__(self, meter: Any, *members: MetricsSource) -> None:
        super().__init__(*members)
        self.instruments = [self._create(meter, info) for info in CATALOGUE]

    def _create(self, meter: Any, info: MetricInfo) -> Any:
        create = (
            meter.create_observable_counter
            if info.kind == "counter"
            else meter.create_observable_gauge
        )
        return create(
            PREFIX + info.name,
            callbacks=[self._callback(info.name)],
            unit=info.unit,
            description=info.description,
        )

    def _callback(self, name: str) -> Callable[[Any], Iterable[Any]]:
        from opentelemetry.metrics import Observation

        def observe(options: Any) -> Iterable[Any]:
            out = []
            for member in self.members():
                value = member.metrics.get(name)
                if value is None or math.isnan(value):
                    continue
                attributes = {
                    "messaging.system": "kafka",
                    "messaging.consumer.group.name": member.group_id,
                    "messaging.client.id": member.client_id,
                }
                out.append(Observation(value, attributes))
            return out

        return observe


def instrument(member: MetricsSource, meter: Any = None) -> KafkaCoordinatorInstruments:
    """Report ``member``'s metrics through ``meter`` (default: the global provider's
    ``aiogroup`` meter). The instruments are created once per meter; later members join them.
    Call ``instruments.remove(member)`` once the member is closed."""
    if meter is None:
        from opentelemetry import metrics

        meter = metrics.get_meter("aiogroup")
    entry = _by_meter.get(id(meter))
    if entry is None:
        entry = _by_meter[id(meter)] = (meter, KafkaCoordinatorInstruments(meter))
    entry[1].add(member)
    return entry[1]


# Keyed by id, holding the meter itself so the id stays unique while the entry lives.
_by_meter: dict[int, tuple[Any, KafkaCoordinatorInstruments]] = {}
