"""Fixtures of the security tests: a session CA and the secured brokers (see ``secured.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KAFKA_VERSION
from aiogroup.testing.tls import Pki, make_pki
from tests.security.secured import SecuredBroker, start_embedded, start_kafka


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def other_pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """An unrelated CA: clients trusting it must refuse the brokers' certificates."""
    return make_pki(tmp_path_factory.mktemp("other-pki"), ca_name="some other CA")


@pytest.fixture(
    scope="package",
    params=[
        pytest.param("embedded", id="embedded"),
        pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
        pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23),
    ],
)
def secured(request: pytest.FixtureRequest, pki: Pki) -> Iterator[SecuredBroker]:
    """The secured broker of each kind, shared by the package's tests."""
    if request.param == "embedded":
        yield from start_embedded(pki)
    else:
        version = KAFKA4_VERSION if request.param == "kafka4" else KAFKA_VERSION
        yield from start_kafka(pki, request.param, version)
