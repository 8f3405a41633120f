"""A wrong password, an untrusted certificate or a mismatched listener: a clear error, bounded.

Before, every one of these surfaced from ``GroupMember.start()`` as
``CoordinatorUnreachableError("bootstrap failed: ... Unable to bootstrap from [...]")``, a
*retriable* error that names no cause (aiokafka logs the cause and moves on). Now each is an
:class:`~aiogroup.errors.AuthenticationError` that says what failed, never retriable, on both
brokers. Every start is bounded by ``asyncio.timeout``: a hang fails the test.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from aiogroup import GroupMember
from aiogroup.client import MemberClosedError
from aiogroup.errors import (
    AuthenticationError,
    ConfigurationError,
    IllegalSaslStateError,
    KafkaError,
    RetriableError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from aiogroup.testing.tls import Pki
from tests.security.secured import TOPIC, SecuredBroker, client_options

#: The request timeout of these members, and the bound on each start (a hang fails).
REQUEST_TIMEOUT_MS = 10_000
BOUND_S = 30.0


async def start_fails(
    broker: SecuredBroker, listener: str, expected: type[AuthenticationError], **options: Any
) -> AuthenticationError:
    m = GroupMember(
        broker.address(listener),
        broker.group("refused"),
        topics=[TOPIC],
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        **options,
    )
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(expected) as caught:
            await m.start()
    assert not isinstance(caught.value, RetriableError)
    with pytest.raises(MemberClosedError):  # a failed start leaves the member closed
        await m.commit({})
    return caught.value


@pytest.mark.parametrize(
    ("listener", "mechanism", "words"),
    [
        ("SASL_PLAINTEXT", "PLAIN", "Invalid username or password"),
        (
            "SASL_PLAINTEXT",
            "SCRAM-SHA-256",
            "invalid credentials with SASL mechanism SCRAM-SHA-256",
        ),
        (
            "SASL_PLAINTEXT",
            "SCRAM-SHA-512",
            "invalid credentials with SASL mechanism SCRAM-SHA-512",
        ),
        ("SASL_SSL", "PLAIN", "Invalid username or password"),
        ("SASL_SSL", "SCRAM-SHA-512", "invalid credentials with SASL mechanism SCRAM-SHA-512"),
    ],
)
async def test_a_wrong_password_says_authentication_failed(
    secured: SecuredBroker, listener: str, mechanism: str, words: str
) -> None:
    options = client_options(secured, listener, mechanism, password="not-the-password")
    error = await start_fails(secured, listener, SaslAuthenticationError, **options)
    assert isinstance(error, KafkaError) and error.error_code == 58
    assert "SASL authentication as 'alice' with " + mechanism in str(error)
    assert "failed" in str(error) and words in str(error)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_an_unknown_user_says_authentication_failed(
    secured: SecuredBroker, mechanism: str
) -> None:
    options = client_options(secured, "SASL_PLAINTEXT", mechanism, user="mallory")
    error = await start_fails(secured, "SASL_PLAINTEXT", SaslAuthenticationError, **options)
    assert "'mallory'" in str(error) and "Authentication failed" in str(error)


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL", "MTLS"])
async def test_an_untrusted_certificate_says_certificate_verify_failed(
    secured: SecuredBroker, other_pki: Pki, listener: str
) -> None:
    context = other_pki.client_context(client_cert=True)  # trusts another CA only
    options = client_options(secured, listener, "PLAIN", context=context)
    error = await start_fails(secured, listener, SslAuthenticationError, **options)
    assert "certificate verify failed" in str(error)
    assert secured.address(listener) in str(error)


async def test_without_ssl_context_the_system_cas_are_used(secured: SecuredBroker) -> None:
    """No ``ssl_context``: the system's CAs (which never signed the test CA) and hostname checks,
    as the Java client does; aiokafka alone would refuse the option set."""
    error = await start_fails(secured, "SSL", SslAuthenticationError, security_protocol="SSL")
    assert "certificate verify failed" in str(error)


async def test_a_listener_requiring_a_client_certificate_refuses_a_client_without_one(
    secured: SecuredBroker,
) -> None:
    options = client_options(secured, "MTLS", context=secured.pki.client_context())
    error = await start_fails(secured, "MTLS", SslAuthenticationError, **options)
    # Kafka (TLS 1.2 here) refuses in the handshake, the embedded broker (TLS 1.3) after it.
    assert "client certificate" in str(error) and "ssl.client.auth=required" in str(error)
    assert secured.address("MTLS") in str(error)


async def test_a_mechanism_the_listener_does_not_enable(secured: SecuredBroker) -> None:
    options = client_options(secured, "PLAIN_ONLY", "SCRAM-SHA-256")
    error = await start_fails(secured, "PLAIN_ONLY", UnsupportedSaslMechanismError, **options)
    assert isinstance(error, KafkaError) and error.error_code == 33
    assert "does not enable SASL mechanism SCRAM-SHA-256" in str(error)


@pytest.mark.parametrize(
    ("client", "listener", "expected", "words"),
    [
        ("PLAINTEXT", "SSL", SslAuthenticationError, "expects TLS"),
        ("PLAINTEXT", "SASL_SSL", SslAuthenticationError, "expects TLS"),
        ("SASL_PLAINTEXT", "SASL_SSL", SslAuthenticationError, "use SASL_SSL"),
        ("SSL", "PLAINTEXT", SslAuthenticationError, "TLS handshake"),
        ("SASL_PLAINTEXT", "PLAINTEXT", IllegalSaslStateError, "did not expect SASL"),
        ("SASL_SSL", "SSL", IllegalSaslStateError, "did not expect SASL"),
        ("PLAINTEXT", "SASL_PLAINTEXT", SaslAuthenticationError, "requires SASL"),
        ("SSL", "SASL_SSL", SaslAuthenticationError, "requires SASL"),
    ],
)
async def test_a_security_protocol_that_does_not_match_the_listener(
    secured: SecuredBroker,
    client: str,
    listener: str,
    expected: type[AuthenticationError],
    words: str,
) -> None:
    options = client_options(secured, client, "PLAIN")
    error = await start_fails(secured, listener, expected, **options)
    assert words in str(error)


# --------------------------------------------------------------------------- refused at once


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"security_protocol": "TLS"}, "security_protocol must be one of"),
        ({"security_protocol": "SSL", "ssl_context": "ca.pem"}, "ssl.SSLContext"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-1"},
            "sasl_mechanism must be one of",
        ),
        (
            {
                "security_protocol": "SASL_PLAINTEXT",
                "sasl_mechanism": "SCRAM-SHA-256",
                "sasl_plain_username": "alice",
            },
            "needs sasl_plain_password",
        ),
        ({"security_protocol": "SASL_PLAINTEXT"}, "needs sasl_plain_username"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"},
            "needs sasl_oauth_token_provider",
        ),
        ({"sasl_mechansim": "PLAIN"}, "sasl_mechansim"),
    ],
)
async def test_bad_security_options_are_refused_at_construction(
    options: dict[str, Any], words: str
) -> None:
    with pytest.raises(ConfigurationError, match=words):
        GroupMember("127.0.0.1:9", "g", topics=["t"], **options)


async def test_tls_without_a_context_gets_the_default_one() -> None:
    m = GroupMember("127.0.0.1:9", "g", topics=["t"], security_protocol="SSL")
    context = m.transport._security.options["ssl_context"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
