"""The pytest fixtures users import from ``aiogroup.testing.fixtures``."""

from __future__ import annotations

import asyncio

import pytest

from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    embedded_broker,
    kafka_broker,
    start_broker,
    threaded_broker,
)

pytestmark = pytest.mark.timeout(60)


async def test_embedded_broker_fixture(embedded_broker: EmbeddedBroker) -> None:  # noqa: F811
    async with RawClient(embedded_broker.bootstrap) as client:
        meta = await client.request("Metadata", 12, {"topics": [{"name": "auto"}]})
    assert meta.topics[0].error_code == 0
    assert "auto" in embedded_broker.log.topics


def test_threaded_broker_fixture(threaded_broker: ThreadedBroker) -> None:  # noqa: F811
    threaded_broker.create_topic("x", 2)

    async def partitions() -> list[int]:
        async with RawClient(threaded_broker.bootstrap) as client:
            meta = await client.request("Metadata", 1, {"topics": [{"name": "x"}]})
            return [p.partition_index for p in meta.topics[0].partitions]

    assert asyncio.run(partitions()) == [0, 1]
    assert threaded_broker.group("nobody") is None


def test_kafka_broker_fixture_speaks_kafka(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    async def probe() -> tuple[int, int]:
        async with RawClient(kafka_broker.bootstrap) as client:
            versions = await client.request("ApiVersions", 0, {})
            coordinator = await client.request("FindCoordinator", 1, {"key": "g", "key_type": 0})
            return versions.error_code, coordinator.error_code

    assert asyncio.run(probe()) == (0, 0)
    assert (kafka_broker.embedded is not None) == (kafka_broker.kind == "embedded")
    assert kafka_broker.kafka_semantics == (kafka_broker.kind != "tansu")


def test_start_broker_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError, match="unknown broker kind"), start_broker("zookeeper"):
        pass


def test_session_brokers_stop_when_the_session_finishes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before a pytest-xdist worker reports itself finished (after which it is ended within
    seconds): every broker is stopped even when one stop fails, and that failure is raised."""
    from types import SimpleNamespace

    from aiogroup.testing import fixtures
    from aiogroup.testing.launchers.kafka import KafkaBroker

    stopped: list[str] = []

    def stop(self: KafkaBroker) -> None:
        stopped.append(self.version)
        if self.version == "2.3.0":
            raise RuntimeError("ZooKeeper would not stop")

    monkeypatch.setattr(type(KafkaBroker(version="2.3.0")), "stop", stop)
    monkeypatch.setattr(type(KafkaBroker(version="4.1.1")), "stop", stop)
    held = {
        "2.3.0": KafkaBroker(version="2.3.0"),
        "3.9.1": fixtures._KafkaMissing("no Java here"),
        "4.1.1": KafkaBroker(version="4.1.1"),
    }
    session = SimpleNamespace(config=SimpleNamespace(stash={fixtures._KAFKA_KEY: held}))
    with pytest.raises(RuntimeError, match="would not stop"):
        fixtures.pytest_sessionfinish(session)  # type: ignore[arg-type]
    assert stopped == ["2.3.0", "4.1.1"]
