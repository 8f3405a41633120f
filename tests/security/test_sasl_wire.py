"""The SASL exchange on the wire: the embedded broker answers as Kafka 2.3 does.

Raw requests with blocking sockets (``aiogroup.testing.sasl.sasl_login`` and
``wire.blocking_request``), the same assertions on both brokers: error codes, Kafka's error
messages, which requests are served before authentication and which close the connection.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest

from aiogroup.testing import wire
from aiogroup.testing.sasl import sasl_login
from tests.security.secured import PASSWORD, USER, SecuredBroker

ENABLED = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
SCRAM_INVALID = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)


@contextlib.contextmanager
def raw(broker: SecuredBroker, listener: str) -> Iterator[socket.socket]:
    with socket.create_connection((broker.host, broker.ports[listener]), timeout=10) as sock:
        yield sock


def closed(sock: socket.socket) -> bool:
    """Whether the broker closed the connection (end of stream or reset), bounded by the
    socket timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("mechanism", sorted(ENABLED))
@pytest.mark.parametrize("handshake_version", [0, 1])
def test_a_good_login_serves_requests(
    secured: SecuredBroker, mechanism: str, handshake_version: int
) -> None:
    login = sasl_login(
        secured.host,
        secured.ports["SASL_PLAINTEXT"],
        mechanism,
        USER,
        PASSWORD,
        handshake_version=handshake_version,
    )
    assert login.ok, login
    assert set(login.mechanisms) == ENABLED


def test_the_same_over_tls(secured: SecuredBroker) -> None:
    login = sasl_login(
        secured.host,
        secured.ports["SASL_SSL"],
        "SCRAM-SHA-512",
        USER,
        PASSWORD,
        ssl_context=secured.pki.client_context(),
    )
    assert login.ok, login


@pytest.mark.parametrize(
    ("mechanism", "user", "message"),
    [
        ("PLAIN", USER, "Authentication failed: Invalid username or password"),
        ("PLAIN", "mallory", "Authentication failed: Invalid username or password"),
        ("SCRAM-SHA-256", USER, SCRAM_INVALID.format("SCRAM-SHA-256")),
        ("SCRAM-SHA-512", USER, SCRAM_INVALID.format("SCRAM-SHA-512")),
        ("SCRAM-SHA-512", "mallory", SCRAM_INVALID.format("SCRAM-SHA-512")),
    ],
)
def test_a_refused_login_gets_kafkas_message(
    secured: SecuredBroker, mechanism: str, user: str, message: str
) -> None:
    login = sasl_login(secured.host, secured.ports["SASL_PLAINTEXT"], mechanism, user, "wrong")
    assert (login.handshake_error, login.error_code, login.error_message) == (0, 58, message)
    assert not login.usable


def test_a_refused_legacy_login_just_closes(secured: SecuredBroker) -> None:
    """After SaslHandshake v0 tokens carry no header, so a refusal is a closed connection."""
    login = sasl_login(
        secured.host,
        secured.ports["SASL_PLAINTEXT"],
        "SCRAM-SHA-256",
        USER,
        "wrong",
        handshake_version=0,
    )
    assert (login.error_code, login.error_message, login.usable) == (-1, None, False)


def test_a_mechanism_not_enabled(secured: SecuredBroker) -> None:
    login = sasl_login(secured.host, secured.ports["SASL_PLAINTEXT"], "GSSAPI", USER, PASSWORD)
    assert login.handshake_error == 33 and set(login.mechanisms) == ENABLED
    only_plain = sasl_login(
        secured.host, secured.ports["PLAIN_ONLY"], "SCRAM-SHA-256", USER, PASSWORD
    )
    assert (only_plain.handshake_error, only_plain.mechanisms) == (33, ["PLAIN"])


def test_before_authentication_only_api_versions_and_the_handshake_are_served(
    secured: SecuredBroker,
) -> None:
    with raw(secured, "SASL_PLAINTEXT") as sock:
        versions = wire.blocking_request(sock, "ApiVersions", 0, {})
        keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        assert versions.error_code == 0 and keys[17][1] >= 1 and keys[36][1] >= 1
        with pytest.raises(ConnectionError):
            wire.blocking_request(sock, "Metadata", 1, {"topics": []}, correlation_id=2)
    # SaslAuthenticate before the handshake
    with raw(secured, "SASL_PLAINTEXT") as sock, pytest.raises(ConnectionError):
        wire.blocking_request(sock, "SaslAuthenticate", 1, {"auth_bytes": b"\0a\0b"})
    with raw(secured, "SASL_PLAINTEXT") as sock:  # a second handshake
        first = wire.blocking_request(sock, "SaslHandshake", 1, {"mechanism": "PLAIN"})
        second = wire.blocking_request(
            sock, "SaslHandshake", 1, {"mechanism": "PLAIN"}, correlation_id=2
        )
        assert (first.error_code, second.error_code) == (0, 34)
        assert closed(sock)


@pytest.mark.parametrize("listener", ["PLAINTEXT", "SASL_PLAINTEXT"])
def test_sasl_requests_once_authenticated_get_illegal_sasl_state(
    secured: SecuredBroker, listener: str
) -> None:
    """On a PLAINTEXT listener a connection is authenticated from the start."""
    with raw(secured, listener) as sock:
        correlation = 1
        if listener == "SASL_PLAINTEXT":
            wire.blocking_request(sock, "SaslHandshake", 1, {"mechanism": "PLAIN"})
            done = wire.blocking_request(
                sock, "SaslAuthenticate", 1, {"auth_bytes": f"\0{USER}\0{PASSWORD}".encode()},
                correlation_id=2,
            )  # fmt: skip
            assert done.error_code == 0
            correlation = 3
        handshake = wire.blocking_request(
            sock, "SaslHandshake", 1, {"mechanism": "PLAIN"}, correlation_id=correlation
        )
        assert (handshake.error_code, handshake.mechanisms) == (34, [])
        again = wire.blocking_request(
            sock, "SaslAuthenticate", 1, {"auth_bytes": b"x"}, correlation_id=correlation + 1
        )
        assert again.error_code == 34
        assert again.error_message == (
            "SaslAuthenticate request received after successful authentication"
        )
        metadata = wire.blocking_request(
            sock, "Metadata", 1, {"topics": []}, correlation_id=correlation + 2
        )
        assert [b.port for b in metadata.brokers] == [secured.ports[listener]]


def test_an_unsupported_api_versions_version_is_answered_before_authentication(
    secured: SecuredBroker,
) -> None:
    """KIP-511: the v0 answer with UNSUPPORTED_VERSION, and the connection stays usable.

    The request is written as a client newer than the broker writes it: a flexible (v2) header,
    as ApiVersions v3+ has. Kafka 4.x reads the header of an unknown ApiVersions version that
    way and closes a connection whose v1 header does not parse as one (found on 4.1.1); Kafka
    2.3, which knows no flexible headers, reads past it."""
    with raw(secured, "SASL_PLAINTEXT") as sock:
        body = {"client_software_name": "aiogroup", "client_software_version": "1"}
        frame = wire.encode_request(18, 3, body, correlation_id=1)
        # Rewrite the version to 99 (the header's second int16).
        sock.sendall(frame[:6] + (99).to_bytes(2, "big") + frame[8:])
        size = wire.frame_size(wire.recv_exactly(sock, 4))
        answer = wire.decode_response(18, 0, wire.recv_exactly(sock, size))
        assert answer.error_code == 35
        handshake = wire.blocking_request(
            sock, "SaslHandshake", 1, {"mechanism": "PLAIN"}, correlation_id=2
        )
        assert handshake.error_code == 0
