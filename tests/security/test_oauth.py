"""OAUTHBEARER with token refresh and KIP-368 re-authentication, on the embedded broker and
Apache Kafka 4.1.1.

Both brokers accept unsecured JWS tokens (Kafka's ``OAuthBearerUnsecuredValidatorCallbackHandler``,
the embedded broker's :class:`~aiogroup.testing.sasl.OAuthBearerServer`) and have
``connections.max.reauth.ms`` = 3 s: every SASL session lasts at most 3 s (less when the token
expires sooner), and a connection that has not re-authenticated by then is closed at its next
request. Tokens live 4 s. A consumer in a group reads records produced all along for several
token lifetimes and re-authentication periods: nothing is lost, no connection is dropped, every
token is replaced before it expires, every connection re-authenticates (the embedded broker
counts them too).

A raw aiokafka connection (no re-authentication) on the same listener shows that the broker
does close a connection whose session ran out, so the consumer's unbroken connections are
the re-authentication's doing.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from aiogroup import Consumer, TopicPartition
from aiogroup.client.oauth import TokenSource
from aiogroup.errors import OAuthTokenError, SaslAuthenticationError
from aiogroup.testing import ThreadedBroker
from aiogroup.testing.launchers.kafka import (
    KAFKA4_VERSION,
    KafkaBroker,
    kafka_available,
    security_config,
)
from aiogroup.testing.listeners import Listener
from aiogroup.testing.oauth import UnsecuredTokens, unsecured_jws

pytestmark = [pytest.mark.timeout(240)]

REAUTH_MS = 3_000
TOKEN_MS = 4_000
RUN_S = 15.0
TOPIC = "payments"
PARTITIONS = 3


@dataclass
class OAuthBroker:
    kind: str
    bootstrap: str  # PLAINTEXT, for the producer
    sasl_port: int
    #: Re-authentications the broker accepted (None: not counted, Kafka's are in JMX).
    reauthentications: Callable[[], int | None]

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"


@pytest.fixture(
    scope="module",
    params=["embedded", pytest.param("kafka4", marks=pytest.mark.kafka4)],
)
def kafka(request: pytest.FixtureRequest) -> Iterator[OAuthBroker]:
    if request.param == "embedded":
        with ThreadedBroker(
            topics={TOPIC: PARTITIONS},
            listeners=[Listener("SASL_PLAINTEXT")],
            sasl_mechanisms=["PLAIN", "OAUTHBEARER"],
            connections_max_reauth_ms=REAUTH_MS,
        ) as embedded:
            inner = embedded.broker
            yield OAuthBroker(
                "embedded", embedded.bootstrap, inner.ports["SASL_PLAINTEXT"],
                lambda: inner.reauthentications,
            )  # fmt: skip
        return
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        message = f"Apache Kafka {KAFKA4_VERSION} cannot run here: {reason}"
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"{message} (AIOGROUP_REQUIRE_KAFKA=1)", pytrace=False)
        pytest.skip(message)
    settings = security_config(mechanisms=["PLAIN", "OAUTHBEARER"], reauth_ms=REAUTH_MS)
    with KafkaBroker(version=KAFKA4_VERSION, **settings) as broker:
        broker.create_topic(TOPIC, PARTITIONS)
        yield OAuthBroker("kafka4", broker.bootstrap, broker.ports["SASL_PLAINTEXT"], lambda: None)


def oauth_options(provider: object) -> dict[str, object]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "OAUTHBEARER",
        "sasl_oauth_token_provider": provider,
    }


async def test_a_consumer_runs_through_token_lifetimes_and_reauthentications(
    kafka: OAuthBroker,
) -> None:
    from aiokafka import AIOKafkaProducer

    tokens = UnsecuredTokens("alice", lifetime_ms=TOKEN_MS)
    sent: set[bytes] = set()
    got: dict[bytes, TopicPartition] = {}
    loop = asyncio.get_running_loop()
    producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap, linger_ms=5)
    await producer.start()
    consumer = Consumer(
        kafka.address,
        "oauth-group",
        topics=[TOPIC],
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10_000,
        **oauth_options(tokens),  # type: ignore[arg-type]
    )
    try:
        async with asyncio.timeout(RUN_S + 90):
            async with consumer:
                sasl = consumer.member.transport.sasl
                assert sasl is not None and sasl.token_source is not None
                await consumer.member.wait_for_assignment()
                stop_at = loop.time() + RUN_S
                n = 0
                # Records for RUN_S, then an idle tail of two sessions: the fetches are long
                # polls then, in flight almost all the time.
                idle_until = stop_at + 2 * REAUTH_MS / 1000
                while loop.time() < idle_until or len(got) < len(sent):
                    if loop.time() < stop_at:
                        value = b"r%d" % n
                        await producer.send_and_wait(TOPIC, value, partition=n % PARTITIONS)
                        sent.add(value)
                        n += 1
                    batches = await consumer.getmany(timeout_ms=100)
                    for tp, records in batches.items():
                        for r in records:
                            assert r.value is not None
                            got[r.value] = tp
                stats = sasl.token_source.stats
                connections = sasl.authentications
                reauths = sasl.reauthentications
                waited, held = sasl.waited_for_in_flight, sasl.held_requests
    finally:
        await producer.stop()
    # Nothing lost, nothing read twice (one member, no rebalance after the first).
    assert set(got) == sent and len(sent) > 50
    # Every token was replaced before it expired, by the background refresh.
    issued = tokens.issued
    assert len(issued) >= RUN_S * 1000 // TOKEN_MS
    for before, after in itertools.pairwise(issued):
        assert before.expires_at_ms is not None and after.expires_at_ms is not None
        assert after.expires_at_ms - TOKEN_MS < before.expires_at_ms
    assert stats.failures == 0 and stats.provider_calls == tokens.calls == len(issued)
    # (Fetched by the background refresh, or by a re-authentication that found the refresh due
    # or under 1.5 s left: with 4 s tokens and 3 s sessions mostly the latter.)
    # Every connection re-authenticated all along; none was closed and reopened (the broker
    # closes a connection that misses its deadline, as the last test shows).
    assert sasl.reauthentication_failures == 0 and sasl.last_error is None
    assert 0 < sasl.session_lifetime_ms <= REAUTH_MS
    # Three: the bootstrap connection (closed once the first metadata is in), the group's and
    # the fetches'. A connection the broker closed would have been reopened: a fourth.
    assert connections <= 3, f"{connections} authentications: connections were dropped"
    assert reauths >= 2 * int(RUN_S * 1000 / (REAUTH_MS * 0.95) - 1)
    # In the idle tail re-authentications waited for the long polls' answers, and requests
    # made meanwhile were held, then sent; none failed (nothing lost above).
    assert waited >= 1 and held >= 1
    counted = kafka.reauthentications()
    assert counted is None or counted >= reauths  # the broker's count (the embedded one's)
    print(f"\n{kafka.kind}: {len(sent)} records; {tokens.calls} tokens; {sasl}; broker {counted}")


async def test_a_token_the_broker_refuses_at_reauthentication_surfaces(
    kafka: OAuthBroker,
) -> None:
    """Tokens turn bad (no ``exp`` claim) while the consumer runs: the re-authentication is
    refused, counted and logged, and the consumer's next call raises the broker's refusal."""
    good = UnsecuredTokens("alice", lifetime_ms=TOKEN_MS)
    turned = threading.Event()  # read by the provider in its worker thread

    def provider() -> str:
        if turned.is_set():
            return unsecured_jws("alice", lifetime_ms=None)  # no exp: refused
        return good().value

    consumer = Consumer(
        kafka.address,
        "oauth-bad",
        topics=[TOPIC],
        auto_offset_reset="earliest",
        session_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=5_000,
        **oauth_options(provider),  # type: ignore[arg-type]
    )
    async with asyncio.timeout(60):
        with pytest.raises(SaslAuthenticationError, match="invalid_token"):
            async with consumer:
                await consumer.member.wait_for_assignment()
                sasl = consumer.member.transport.sasl
                assert sasl is not None
                turned.set()
                while True:
                    await consumer.getmany(timeout_ms=200)
    assert sasl is not None and sasl.reauthentication_failures >= 1
    assert isinstance(sasl.last_error, SaslAuthenticationError)
    assert "OAUTHBEARER (KIP-368) failed" in str(sasl.last_error)


async def test_without_reauthentication_the_broker_closes_the_connection(
    kafka: OAuthBroker,
) -> None:
    """The control: aiokafka's own connection authenticates once; after the session lifetime
    its next request finds the connection closed by the broker."""
    from aiokafka.conn import create_conn
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.protocol.metadata import MetadataRequest

    source = TokenSource(UnsecuredTokens("alice", lifetime_ms=60_000))
    conn = await create_conn(
        "127.0.0.1", kafka.sasl_port, **oauth_options(source)
    )
    loop = asyncio.get_running_loop()
    opened = loop.time()
    try:
        await conn.send(MetadataRequest([]))  # within the session: answered
        async with asyncio.timeout(30):
            while loop.time() < opened + REAUTH_MS / 1000 + 0.5:  # the session runs out
                await asyncio.sleep(0.1)
        with pytest.raises((KafkaConnectionError, ConnectionError, asyncio.TimeoutError)):
            await conn.send(MetadataRequest([]))
    finally:
        conn.close()
        await source.close()


async def test_a_refused_or_missing_token_fails_the_start_clearly(kafka: OAuthBroker) -> None:
    """At start: a token the broker refuses is SaslAuthenticationError with its reason (not
    the ILLEGAL_SASL_STATE that aiokafka's exchange leads to); a provider that fails is
    OAuthTokenError with the provider's exception as the cause."""
    address = kafka.address

    def refused() -> str:
        return unsecured_jws("alice", lifetime_ms=None)  # no exp

    def broken() -> str:
        raise PermissionError("the identity provider said no")

    async with asyncio.timeout(30):
        with pytest.raises(SaslAuthenticationError, match="invalid_token"):
            async with Consumer(address, "g-refused", topics=[TOPIC], **oauth_options(refused)):  # type: ignore[arg-type]
                pass
        with pytest.raises(OAuthTokenError, match="the identity provider said no") as info:
            async with Consumer(address, "g-broken", topics=[TOPIC], **oauth_options(broken)):  # type: ignore[arg-type]
                pass
    assert isinstance(info.value.__cause__, PermissionError)


async def test_a_reauthentication_waits_for_the_answer_in_flight_and_holds_new_requests() -> None:
    """On one connection (PLAIN, to show re-authentication is not OAUTHBEARER's alone): a
    Metadata request the broker answers 1.5 s late spans the re-authentication time (85-95% of
    a 1.5 s session). The re-authentication waits for its answer; a request made meanwhile is
    held, then sent; both are answered, nothing is reconnected."""
    from aiogroup.client.transport import Transport
    from aiogroup.testing import EmbeddedBroker, SaslCredentials

    async with EmbeddedBroker(
        topics={TOPIC: 1},
        listeners=[Listener("SASL_PLAINTEXT")],
        sasl_credentials=SaslCredentials(plain={"alice": "alice-secret"}),
        connections_max_reauth_ms=1_500,
    ) as broker:
        transport = Transport(
            f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}", "g",
            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
            sasl_plain_username="alice", sasl_plain_password="alice-secret",
        )  # fmt: skip
        await transport.start()
        sasl = transport.sasl
        assert sasl is not None
        try:
            async with asyncio.timeout(20):
                assert await transport.partitions_per_topic([TOPIC]) == {TOPIC: 1}
                opened = sasl.authentications
                assert sasl.session_lifetime_ms == 1_500
                broker.faults.delay("Metadata", 1.5)
                slow = asyncio.create_task(transport.partitions_per_topic([TOPIC]))
                while sasl.waited_for_in_flight == 0:  # the re-authentication is due, waiting
                    await asyncio.sleep(0.01)
                held = asyncio.create_task(transport.partitions_per_topic([TOPIC]))
                assert await slow == {TOPIC: 1} and await held == {TOPIC: 1}
        finally:
            await transport.close()
    assert sasl.reauthentications >= 1 and broker.reauthentications == sasl.reauthentications
    assert sasl.held_requests >= 1 and sasl.reauthentication_failures == 0
    assert sasl.authentications == opened
