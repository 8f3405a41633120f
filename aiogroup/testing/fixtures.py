"""pytest fixtures for code that talks to Kafka, loaded by aiogroup's pytest plugin.

Installing aiogroup registers them with pytest (entry point ``pytest11``, see
:mod:`aiogroup.testing.pytest_plugin`); no ``pytest_plugins`` line is needed. They work with
pytest-asyncio in both its ``strict`` (default) and ``auto`` modes.

* ``embedded_broker`` (async, function scope): an :class:`EmbeddedBroker` on the test's loop.
* ``threaded_broker`` (function scope): the same on its own thread, for blocking clients
  (confluent-kafka, kafka-python) and sync tests.
* ``apache_kafka`` (session scope): Apache Kafka 2.3.0 with ZooKeeper on the local JVM
  (:class:`~aiogroup.testing.launchers.kafka.KafkaBroker`), started once per test session;
  ``apache_kafka4`` the same for Kafka 4.1.1 in KRaft mode.
* ``kafka_broker`` (module scope), parametrised over six brokers:

  - ``embedded``: ours, in a thread;
  - ``tansu``: the Tansu binary from the ``broker`` extra (skipped when it is not installed);
  - ``kafka23``: Apache Kafka 2.3.0 without Docker (the session's ``apache_kafka``; skipped,
    with the reason, when there is no Java >= 11, no pyspark jars or no package index);
  - ``kafka4`` / ``kafka39``: Apache Kafka 4.1.1 / 3.9.1 in KRaft mode without Docker (one
    broker per version per session; skipped, with the reason, when there is no Java >= 17 /
    11 or the pinned jars cannot be downloaded);
  - ``kafka``: Apache Kafka in Docker via testcontainers (skipped, with the reason, when no
    Docker engine answers).

  Each yields a :class:`BrokerHandle`: ``handle.bootstrap``, ``handle.kind``; for the embedded
  broker ``handle.embedded`` (fault injection, group inspection), for the local Apache Kafka
  brokers ``handle.apache`` (topics, tools, the processes). Tests that need Kafka's exact
  group semantics can ``handle.require_kafka_semantics()`` to skip on Tansu.

* ``java_peer`` and ``franz_go_peer`` (session scope): the command lines of the Java
  ``KafkaConsumer`` and franz-go peers of :mod:`aiogroup.testing.peers`, built once (skipped,
  with the reason, when there is no JDK or no Go).

The ``tansu``, ``kafka23``, ``kafka4``, ``kafka39`` and ``kafka`` parameters carry the
``tansu`` / ``kafka23`` / ``kafka4`` / ``kafka39`` / ``docker`` markers, so ``-m "not docker"``
deselects them. With ``AIOGROUP_REQUIRE_KAFKA=1`` in the environment (CI sets it) a local Apache
Kafka or a peer being unavailable fails the tests instead of skipping.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import pytest

from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.launchers.kafka import (
    KAFKA4_VERSION,
    KAFKA39_VERSION,
    KAFKA_VERSION,
    KafkaBroker,
    kafka_available,
)
from aiogroup.testing.launchers.tansu import TansuBroker, docker_engine_available, find_tansu

__all__ = [
    "APACHE_KINDS",
    "BROKER_KINDS",
    "BrokerHandle",
    "apache_kafka",
    "apache_kafka4",
    "embedded_broker",
    "franz_go_peer",
    "java_peer",
    "kafka_broker",
    "session_kafka",
    "start_broker",
    "threaded_broker",
]

BROKER_KINDS = ("embedded", "tansu", "kafka23", "kafka4", "kafka39", "kafka")

#: The local Apache Kafka kinds and the version each runs (:class:`KafkaBroker`).
APACHE_KINDS = {"kafka23": KAFKA_VERSION, "kafka4": KAFKA4_VERSION, "kafka39": KAFKA39_VERSION}

#: Kafka's image (the launcher's default modern version), started in KRaft mode with no
#: initial rebalance delay (fast tests); ``KAFKA39_IMAGE`` is the 3.9 line's.
KAFKA_IMAGE = f"apache/kafka:{KAFKA4_VERSION}"
KAFKA39_IMAGE = f"apache/kafka:{KAFKA39_VERSION}"


@dataclass
class BrokerHandle:
    """A running broker of any kind."""

    kind: str
    bootstrap: str
    embedded: ThreadedBroker | None = None
    apache: KafkaBroker | None = None

    @property
    def kafka_semantics(self) -> bool:
        """False on Tansu, which has no protocol vote, weak static membership, etc."""
        return self.kind != "tansu"

    def require_kafka_semantics(self, why: str = "") -> None:
        if not self.kafka_semantics:
            pytest.skip(f"Tansu deviates from Apache Kafka here{': ' + why if why else ''}")


def _embedded_config() -> CoordinatorConfig:
    # Kafka's defaults except the initial rebalance delay (0, as KAFKA_GROUP_INITIAL_REBALANCE_
    # DELAY_MS=0 in our Docker setup) and a 1 s minimum session for fast tests; KIP-848 groups
    # may lower their own session and heartbeat interval as on the test KRaft brokers
    # (group.consumer.min.session.timeout.ms=1000, group.consumer.min.heartbeat.interval.ms=100).
    return CoordinatorConfig(
        initial_rebalance_delay_ms=0,
        group_min_session_timeout_ms=1000,
        consumer_group=ConsumerGroupSettings(
            min_session_timeout_ms=1000, min_heartbeat_interval_ms=100
        ),
    )


def _kafka_unavailable(version: str, reason: str) -> None:
    message = f"Apache Kafka {version} cannot run here: {reason}"
    if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
        pytest.fail(f"{message} (AIOGROUP_REQUIRE_KAFKA=1)", pytrace=False)
    pytest.skip(message)


@contextlib.contextmanager
def _apache_kafka(version: str) -> Iterator[KafkaBroker]:
    ok, reason = kafka_available(version)
    if not ok:
        _kafka_unavailable(version, reason)
    with KafkaBroker(version=version) as kafka:
        yield kafka


@contextlib.contextmanager
def start_broker(kind: str) -> Iterator[BrokerHandle]:
    """Start a broker of ``kind`` (one of :data:`BROKER_KINDS`); skips when unavailable."""
    if kind == "embedded":
        with ThreadedBroker(coordinator_config=_embedded_config()) as threaded:
            yield BrokerHandle("embedded", threaded.bootstrap, threaded)
    elif kind == "tansu":
        if find_tansu() is None:
            pytest.skip("Tansu is not installed (pip install 'aiogroup[broker]')")
        with TansuBroker() as tansu:
            yield BrokerHandle("tansu", tansu.bootstrap)
    elif kind in APACHE_KINDS:
        with _apache_kafka(APACHE_KINDS[kind]) as kafka:
            yield BrokerHandle(kind, kafka.bootstrap, apache=kafka)
    elif kind == "kafka":
        ok, reason = docker_engine_available()
        if not ok:
            pytest.skip(f"Apache Kafka needs Docker: {reason}")
        with _kafka_container() as bootstrap:
            yield BrokerHandle("kafka", bootstrap)
    else:
        raise ValueError(f"unknown broker kind {kind!r}; expected one of {BROKER_KINDS}")


@contextlib.contextmanager
def _kafka_container(image: str = KAFKA_IMAGE) -> Iterator[str]:  # pragma: no cover - Docker
    try:
        from testcontainers.community.kafka import KafkaContainer
    except ImportError:
        from testcontainers.kafka import KafkaContainer

    container: Any = KafkaContainer(image).with_kraft()
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


_KAFKA_KEY = pytest.StashKey[dict[str, KafkaBroker | BaseException]]()


def session_kafka(config: pytest.Config, version: str = KAFKA_VERSION) -> KafkaBroker:
    """The session's one broker of Kafka ``version``, started on first use and stopped at
    session end.

    Kept in the config's stash (not a fixture) so ``kafka_broker`` finds it however the
    fixtures were registered; a failed start is remembered, so it is tried once per session.
    """
    brokers = config.stash.setdefault(_KAFKA_KEY, {})
    held = brokers.get(version)
    if held is None:
        ok, reason = kafka_available(version)
        if not ok:
            held = brokers[version] = _KafkaMissing(reason)
        else:
            kafka = KafkaBroker(version=version)
            try:
                kafka.start()
            except Exception as exc:
                held = brokers[version] = exc
            else:
                held = brokers[version] = kafka
                config.add_cleanup(kafka.stop)
    if isinstance(held, _KafkaMissing):
        _kafka_unavailable(version, str(held))
    if isinstance(held, BaseException):
        pytest.fail(f"Apache Kafka {version} did not start: {held}", pytrace=False)
    assert isinstance(held, KafkaBroker)
    return held


class _KafkaMissing(Exception):
    """Kafka cannot run on this machine (the reason is the message)."""


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop the session's Kafka brokers when the session finishes, not at unconfigure (where
    ``config.add_cleanup`` would): a pytest-xdist worker reports itself finished after this
    hook, and the controller then ends it within seconds, which, in the middle of the stops,
    left a ZooKeeper running and its work folder behind. A stop that fails does not keep the
    other brokers running; each stop runs once (the cleanup then finds nothing to do)."""
    failures = []
    for held in session.config.stash.get(_KAFKA_KEY, {}).values():
        if isinstance(held, KafkaBroker):
            try:
                held.stop()
            except Exception as exc:  # raised after every broker was tried
                failures.append(exc)
    if failures:
        raise failures[0]


@pytest.fixture(scope="session")
def apache_kafka(pytestconfig: pytest.Config) -> KafkaBroker:
    """Apache Kafka 2.3.0 (and ZooKeeper) for the whole session: use fresh groups and topics.

    Tests that stop or restart the broker start their own :class:`KafkaBroker` instead.
    """
    return session_kafka(pytestconfig, KAFKA_VERSION)


@pytest.fixture(scope="session")
def apache_kafka4(pytestconfig: pytest.Config) -> KafkaBroker:
    """Apache Kafka 4.1.1 (KRaft) for the whole session: use fresh groups and topics."""
    return session_kafka(pytestconfig, KAFKA4_VERSION)


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("embedded", id="embedded"),
        pytest.param("tansu", id="tansu", marks=pytest.mark.tansu),
        pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23),
        pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
        pytest.param("kafka39", id="kafka39", marks=pytest.mark.kafka39),
        pytest.param("kafka", id="kafka", marks=pytest.mark.docker),
    ],
)
def kafka_broker(request: pytest.FixtureRequest) -> Iterator[BrokerHandle]:
    """One broker per kind, shared by a module's tests (use fresh group ids and topics).

    Each local Apache Kafka version is the session's one broker of it (``apache_kafka`` for
    2.3, ``apache_kafka4`` for 4.1.1): they take seconds to start.
    """
    if request.param in APACHE_KINDS:
        kafka = session_kafka(request.config, APACHE_KINDS[request.param])
        yield BrokerHandle(request.param, kafka.bootstrap, apache=kafka)
        return
    with start_broker(request.param) as handle:
        yield handle


def _peer_program(kind: str) -> list[str]:
    from aiogroup.testing.peers import PeerUnavailableError, program

    try:
        return program(kind)
    except PeerUnavailableError as exc:
        message = f"the {kind} peer cannot be built here: {exc}"
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"{message} (AIOGROUP_REQUIRE_KAFKA=1)", pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def java_peer() -> list[str]:
    """The Java ``KafkaConsumer`` peer's command line without options, built once."""
    return _peer_program("java")


@pytest.fixture(scope="session")
def franz_go_peer() -> list[str]:
    """The franz-go peer's command line without options, built once."""
    return _peer_program("franz-go")
