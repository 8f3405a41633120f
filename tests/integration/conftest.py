"""Brokers for the integration tests: Tansu (always), Apache Kafka 2.3 and 4.1.1 (local JVM)
and Apache Kafka via testcontainers (Docker).

Every test that takes ``cluster`` runs once per broker kind. Tansu gets a broker per module;
Kafka 2.3 and Kafka 4.1.1 (KRaft) are each the session's one broker of that version
(``aiogroup.testing.fixtures``: they take seconds and ~300 MB to start), marked ``kafka23`` /
``kafka4``, skipped with the reason where they cannot run (failed under
``AIOGROUP_REQUIRE_KAFKA=1``, as CI sets). The Docker variant is marked ``docker`` and skips
with the reason :func:`docker_engine_available` gives when no Docker engine answers. Each test
uses fresh group ids and topics.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from aiogroup.testing.fixtures import (  # noqa: F401 - the session fixtures, by name
    KAFKA_IMAGE,
    apache_kafka,
    apache_kafka4,
)
from aiogroup.testing.launchers.tansu import TansuBroker, docker_engine_available, find_tansu


@dataclass(frozen=True)
class Cluster:
    kind: str  # "tansu", "kafka23", "kafka4" or "kafka"
    bootstrap: str


def _tansu() -> Iterator[Cluster]:
    if find_tansu() is None:
        pytest.skip("Tansu is not installed: pip install 'aiogroup[broker]'")
    with TansuBroker() as broker:
        yield Cluster("tansu", broker.bootstrap)


def _kafka() -> Iterator[Cluster]:
    ok, reason = docker_engine_available()
    if not ok:
        pytest.skip(f"Apache Kafka tests need a Docker engine: {reason}")
    from testcontainers.community.kafka import KafkaContainer

    container = KafkaContainer(KAFKA_IMAGE).with_env(
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0"
    )
    with container as kafka:
        yield Cluster("kafka", kafka.get_bootstrap_server())


@pytest.fixture(
    scope="module",
    params=[
        pytest.param("tansu", marks=pytest.mark.tansu),
        pytest.param("kafka23", marks=pytest.mark.kafka23),
        pytest.param("kafka4", marks=pytest.mark.kafka4),
        pytest.param("kafka", marks=pytest.mark.docker),
    ],
)
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    if request.param == "kafka23":
        yield Cluster("kafka23", request.getfixturevalue("apache_kafka").bootstrap)
        return
    if request.param == "kafka4":
        yield Cluster("kafka4", request.getfixturevalue("apache_kafka4").bootstrap)
        return
    yield from (_tansu() if request.param == "tansu" else _kafka())
