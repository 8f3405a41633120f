"""pytest fixtures for code that talks to Kafka, loaded by aiogroup's pytest plugin.

Installing aiogroup registers them with pytest (entry point ``pytest11``, see
:mod:`aiogroup.testing.pytest_plugin`); no ``pytest_plugins`` line is needed. They work with
pytest-asyncio in both its ``strict`` (default) and ``auto`` modes.

* ``embedded_broker`` (async, function scope): an :class:`EmbeddedBroker` on the test's loop.
* ``threaded_broker`` (function scope): the same on its own thread, for blocking clients
  (confluent-kafka, kafka-python) and sync tests.
* ``kafka_broker`` (module scope), parametrised over three brokers:

  - ``embedded``: ours, in a thread;
  - ``tansu``: the Tansu binary from the ``broker`` extra (skipped when it is not installed);
  - ``kafka``: Apache Kafka in Docker via testcontainers (skipped, with the reason, when no
    Docker engine answers).

  Each yields a :class:`BrokerHandle`: ``handle.bootstrap``, ``handle.kind`` and, for the
  embedded broker only, ``handle.embedded`` (fault injection, group inspection). Tests that need
  Kafka's exact group semantics can ``handle.require_kafka_semantics()`` to skip on Tansu.

The ``tansu`` and ``kafka`` parameters carry the ``tansu`` / ``docker`` markers, so
``-m "not docker"`` deselects them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pytest

from aiogroup.testing.broker import EmbeddedBroker, ThreadedBroker
from aiogroup.testing.coordinator import CoordinatorConfig
from aiogroup.testing.tansu import TansuBroker, docker_engine_available, find_tansu

__all__ = [
    "BROKER_KINDS",
    "BrokerHandle",
    "embedded_broker",
    "kafka_broker",
    "start_broker",
    "threaded_broker",
]

BROKER_KINDS = ("embedded", "tansu", "kafka")

#: Kafka's image, started in KRaft mode with no initial rebalance delay (fast tests).
KAFKA_IMAGE = "apache/kafka:3.9.0"


@dataclass
class BrokerHandle:
    """A running broker of any kind."""

    kind: str
    bootstrap: str
    embedded: ThreadedBroker | None = None

    @property
    def kafka_semantics(self) -> bool:
        """False on Tansu, which has no protocol vote, weak static membership, etc."""
        return self.kind != "tansu"

    def require_kafka_semantics(self, why: str = "") -> None:
        if not self.kafka_semantics:
            pytest.skip(f"Tansu deviates from Apache Kafka here{': ' + why if why else ''}")


def _embedded_config() -> CoordinatorConfig:
    # Kafka's defaults except the initial rebalance delay (0, as KAFKA_GROUP_INITIAL_REBALANCE_
    # DELAY_MS=0 in our Docker setup) and a 1 s minimum session for fast tests.
    return CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)


@contextlib.contextmanager
def start_broker(kind: str) -> Iterator[BrokerHandle]:
    """Start a broker of ``kind`` ('embedded', 'tansu' or 'kafka'); skips when unavailable."""
    if kind == "embedded":
        with ThreadedBroker(coordinator_config=_embedded_config()) as threaded:
            yield BrokerHandle("embedded", threaded.bootstrap, threaded)
    elif kind == "tansu":
        if find_tansu() is None:
            pytest.skip("Tansu is not installed (pip install 'aiogroup[broker]')")
        with TansuBroker() as tansu:
            yield BrokerHandle("tansu", tansu.bootstrap)
    elif kind == "kafka":
        ok, reason = docker_engine_available()
        if not ok:
            pytest.skip(f"Apache Kafka needs Docker: {reason}")
        with _kafka_container() as bootstrap:
            yield BrokerHandle("kafka", bootstrap)
    else:
        raise ValueError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}")


@contextlib.contextmanager
def _kafka_container() -> Iterator[str]:  # pragma: no cover - needs Docker
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        from testcontainers.kafka import KafkaContainer

    container: Any = KafkaContainer(KAFKA_IMAGE).with_kraft()
    container.with_env("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
    container.with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "true")
    with container:
        yield str(container.get_bootstrap_server())


_Fixture = TypeVar("_Fixture", bound=Callable[..., Any])


def _async_fixture(fn: _Fixture) -> _Fixture:
    """Declare an async fixture through pytest-asyncio: its strict mode runs no other kind."""
    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - without pytest-asyncio no async test runs anyway
        return cast(_Fixture, pytest.fixture(fn))
    return cast(_Fixture, pytest_asyncio.fixture(fn))


@_async_fixture
async def embedded_broker() -> AsyncIterator[EmbeddedBroker]:
    """An embedded broker on the running test loop."""
    async with EmbeddedBroker(coordinator_config=_embedded_config()) as broker:
        yield broker


@pytest.fixture
def threaded_broker() -> Iterator[ThreadedBroker]:
    """An embedded broker on its own thread (for blocking clients)."""
    with ThreadedBroker(coordinator_config=_embedded_config()) as broker:
        yield broker


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("embedded", id="embedded"),
        pytest.param("tansu", id="tansu", marks=pytest.mark.tansu),
        pytest.param("kafka", id="kafka", marks=pytest.mark.docker),
    ],
)
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[BrokerHandle]:
    """One broker per kind, shared by a module's tests (use fresh group ids and topics)."""
    with start_broker(request.param) as handle:
        yield handle
