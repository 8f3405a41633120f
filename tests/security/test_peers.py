"""Independent clients over TLS and SASL, on both brokers: librdkafka and kafka-python.

They authenticate with their own TLS and SASL code (C and pure Python), so the embedded
broker's handshake is checked against more than aiokafka; on Kafka 2.3 the same calls show the
test setup (certificates, JAAS, SCRAM users) is what a real deployment accepts.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.security.secured import PASSWORD, TOPIC, USER, SecuredBroker

pytestmark = pytest.mark.peers

WAYS_IN = [
    pytest.param("SSL", None, id="SSL"),
    pytest.param("SASL_PLAINTEXT", "PLAIN", id="SASL_PLAINTEXT-PLAIN"),
    pytest.param("SASL_PLAINTEXT", "SCRAM-SHA-256", id="SASL_PLAINTEXT-SCRAM-SHA-256"),
    pytest.param("SASL_SSL", "SCRAM-SHA-512", id="SASL_SSL-SCRAM-SHA-512"),
]


def librdkafka_config(
    broker: SecuredBroker, listener: str, mechanism: str | None, password: str = PASSWORD
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": broker.address(listener),
        "security.protocol": listener,
    }
    if "SSL" in listener:
        config["ssl.ca.location"] = str(broker.pki.ca_cert)
    if mechanism is not None:
        config.update(
            {"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": password}
        )
    return config


@pytest.mark.parametrize(("listener", "mechanism"), WAYS_IN)
def test_librdkafka_lists_topics(
    secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_config(secured, listener, mechanism))
    assert TOPIC in admin.list_topics(timeout=20).topics


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_librdkafka_reports_the_brokers_refusal(secured: SecuredBroker, mechanism: str) -> None:
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list[Any] = []
    config = librdkafka_config(secured, "SASL_PLAINTEXT", mechanism, password="wrong")
    config["error_cb"] = errors.append
    admin = AdminClient(config)
    deadline = time.monotonic() + 20
    while not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        assert time.monotonic() < deadline, errors
        admin.poll(0.2)  # serves error_cb; returns as soon as one is queued
    refusal = next(e for e in errors if e.code() == KafkaError._AUTHENTICATION)
    assert "Authentication failed" in refusal.str()


@pytest.mark.parametrize(("listener", "mechanism"), WAYS_IN)
def test_kafka_python_lists_topics(
    secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    import kafka

    options: dict[str, Any] = {
        "bootstrap_servers": secured.address(listener),
        "security_protocol": listener,
        "request_timeout_ms": 20_000,
    }
    if "SSL" in listener:
        options["ssl_cafile"] = str(secured.pki.ca_cert)
    if mechanism is not None:
        options.update(
            sasl_mechanism=mechanism, sasl_plain_username=USER, sasl_plain_password=PASSWORD
        )
    consumer = kafka.KafkaConsumer(**options)
    try:
        assert TOPIC in consumer.topics()
    finally:
        consumer.close()
