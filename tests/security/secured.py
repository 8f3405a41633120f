"""The secured brokers of the security tests: the embedded one and Apache Kafka (4.1.1 in KRaft
mode, and 2.3.0 with ZooKeeper).

Both get the same listeners beside PLAINTEXT, each on its own port:

* ``SSL``: TLS with a broker certificate from a CA made for the test session;
* ``SASL_PLAINTEXT`` and ``SASL_SSL``: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512;
* ``MTLS``: TLS that requires a client certificate (Kafka's ``ssl.client.auth=required``);
* ``PLAIN_ONLY``: SASL_PLAINTEXT enabling PLAIN alone.

The user ``alice`` has a PLAIN password (Kafka: in the JAAS file) and SCRAM credentials for both
mechanisms (Kafka: created with its own ``kafka-configs``). Each Kafka starts once for the
package (a few seconds); without Java it is skipped with the reason (a failure under
``AIOGROUP_REQUIRE_KAFKA=1``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.launchers.kafka import KafkaBroker, kafka_available, security_config
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import SaslCredentials
from aiogroup.testing.tls import Pki

USER = "alice"
PASSWORD = "alice-secret"
TOPIC = "secured-orders"
PARTITIONS = 2
#: The listeners both brokers offer beside PLAINTEXT.
EXTRA_LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS", "PLAIN_ONLY")


@dataclass
class SecuredBroker:
    """A running broker of either kind with the listeners above."""

    kind: str
    pki: Pki
    ports: dict[str, int]
    host: str = "127.0.0.1"
    threaded: ThreadedBroker | None = None
    kafka: KafkaBroker | None = None
    counter: list[int] = field(default_factory=lambda: [0])

    def address(self, listener: str) -> str:
        return f"{self.host}:{self.ports[listener]}"

    def group(self, name: str) -> str:
        """A fresh group id (the broker is shared by every test of the package)."""
        self.counter[0] += 1
        return f"{name}-{self.kind}-{self.counter[0]}"


def client_options(
    broker: SecuredBroker,
    listener: str,
    mechanism: str | None = None,
    *,
    user: str = USER,
    password: str = PASSWORD,
    context: ssl.SSLContext | None = None,
) -> dict[str, Any]:
    """The aiokafka options a client uses on ``listener`` (as the docs show them)."""
    protocol = {"MTLS": "SSL", "PLAIN_ONLY": "SASL_PLAINTEXT"}.get(listener, listener)
    options: dict[str, Any] = {"security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = context or broker.pki.client_context(
            client_cert=listener == "MTLS"
        )
    if protocol.startswith("SASL_"):
        options.update(
            sasl_mechanism=mechanism or "PLAIN",
            sasl_plain_username=user,
            sasl_plain_password=password,
        )
    return options


def start_embedded(pki: Pki) -> Iterator[SecuredBroker]:
    listeners = [Listener(name) for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL")]
    listeners += [
        Listener("MTLS", protocol="SSL"),
        Listener("PLAIN_ONLY", protocol="SASL_PLAINTEXT"),
    ]
    server = pki.server_context()
    with ThreadedBroker(
        coordinator_config=CoordinatorConfig(
            initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000
        ),
        topics={TOPIC: PARTITIONS},
        listeners=listeners,
        ssl_context={
            "SSL": server,
            "SASL_SSL": server,
            "MTLS": pki.server_context(require_client_cert=True),
        },
        sasl_credentials=SaslCredentials(plain={USER: PASSWORD}, scram={USER: PASSWORD}),
        sasl_mechanisms={
            "SASL_PLAINTEXT": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            "SASL_SSL": ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            "PLAIN_ONLY": ("PLAIN",),
        },
    ) as threaded:
        yield SecuredBroker("embedded", pki, threaded.broker.ports, threaded=threaded)


def start_kafka(pki: Pki, kind: str, version: str) -> Iterator[SecuredBroker]:
    """Apache Kafka ``version`` with the listeners above (SCRAM users through its own tool:
    ZooKeeper on 2.3, the admin API on KRaft)."""
    ok, reason = kafka_available(version)
    if not ok:
        message = f"Apache Kafka {version} cannot run here: {reason}"
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"{message} (AIOGROUP_REQUIRE_KAFKA=1)", pytrace=False)
        pytest.skip(message)
    settings = security_config(pki=pki, plain_users={USER: PASSWORD})
    settings["listeners"] += [
        Listener("MTLS", protocol="SSL"),
        Listener("PLAIN_ONLY", protocol="SASL_PLAINTEXT"),
    ]
    settings["config"].update(
        {
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.plain_only.sasl.enabled.mechanisms": "PLAIN",
        }
    )
    with KafkaBroker(version=version, **settings) as kafka:
        kafka.add_scram_user(USER, PASSWORD)
        kafka.create_topic(TOPIC, PARTITIONS)
        yield SecuredBroker(kind, pki, kafka.ports, kafka=kafka)
