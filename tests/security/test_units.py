"""The pieces without a broker: SCRAM and PLAIN, the test PKI, listener settings, and how
connection failures are classified at the transport boundary."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import ssl
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from aiogroup.client.security import SecurityOptions, classify
from aiogroup.errors import (
    ConfigurationError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from aiogroup.testing.embedded.auth import resolve_listeners
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.launchers.kafka import sasl_jaas, security_config
from aiogroup.testing.launchers.tansu import free_port
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import (
    SaslCredentials,
    SaslRejected,
    ScramClient,
    ScramCredential,
    sasl_login,
    sasl_server,
)
from aiogroup.testing.tls import Pki, make_pki, write_jks_truststore

# --------------------------------------------------------------------------- SCRAM

# RFC 7677, section 3: SCRAM-SHA-256 for user "user", password "pencil".
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def test_the_scram_client_matches_rfc_7677() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=RFC_CLIENT_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = (
        f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    )
    assert client.final(server_first) == RFC_CLIENT_FINAL
    assert client.verify(RFC_SERVER_FINAL)
    assert not client.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_the_scram_server_matches_rfc_7677() -> None:
    credentials = SaslCredentials()
    credentials.set_scram_credential(
        "user",
        "SCRAM-SHA-256",
        ScramCredential.from_password("SCRAM-SHA-256", "pencil", salt=RFC_SALT),
    )
    server = sasl_server("SCRAM-SHA-256", credentials, nonce=RFC_SERVER_NONCE)
    first = server.respond(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        f"r={RFC_CLIENT_NONCE}{RFC_SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    )
    assert server.respond(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert (server.complete, server.principal) == (True, "user")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_round_trip_and_refusals(mechanism: str) -> None:
    credentials = SaslCredentials(scram={"a=b,c": "pw"})  # names are escaped on the wire
    client = ScramClient(mechanism, "a=b,c", "pw")
    server = sasl_server(mechanism, credentials)
    assert client.verify(server.respond(client.final(server.respond(client.first()))))
    assert server.principal == "a=b,c"

    wrong = ScramClient(mechanism, "a=b,c", "not-pw")
    server = sasl_server(mechanism, credentials)
    final = wrong.final(server.respond(wrong.first()))
    with pytest.raises(SaslRejected, match=f"invalid credentials with SASL mechanism {mechanism}"):
        server.respond(final)

    stranger = ScramClient(mechanism, "nobody", "pw")
    with pytest.raises(SaslRejected, match="invalid credentials"):
        sasl_server(mechanism, credentials).respond(stranger.first())

    # A replayed final message carries the old nonce: refused.
    server = sasl_server(mechanism, credentials)
    server.respond(ScramClient(mechanism, "a=b,c", "pw").first())
    with pytest.raises(SaslRejected):
        server.respond(final)


@pytest.mark.parametrize(
    "token",
    [b"", b"garbage", b"n,,", b"x,,n=a,r=b", b"n,,n=a", b"\xff\xfe", b"n,,n=a=b,r=x"],
)
def test_malformed_scram_tokens_are_refused(token: bytes) -> None:
    server = sasl_server("SCRAM-SHA-256", SaslCredentials(scram={"a": "pw"}))
    with pytest.raises(SaslRejected):
        server.respond(token)


def test_scram_needs_kafkas_minimum_iterations() -> None:
    with pytest.raises(ConfigurationError, match="4096"):
        ScramCredential.from_password("SCRAM-SHA-256", "pw", iterations=1000)
    with pytest.raises(ConfigurationError, match="not a SCRAM mechanism"):
        ScramCredential.from_password("SCRAM-SHA-1", "pw")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"\0alice\0pw", None),
        (b"alice\0alice\0pw", None),
        (b"\0alice\0wrong", "Invalid username or password"),
        (b"\0bob\0pw", "Invalid username or password"),
        (b"\0alice\0", "Invalid username or password"),
        (b"eve\0alice\0pw", "authorization id that is different from username"),
        (b"alice\0pw", "expected 3 tokens, got 2"),
        (b"\0\xff\0pw", "invalid credentials"),
    ],
)
def test_plain(token: bytes, message: str | None) -> None:
    server = sasl_server("PLAIN", SaslCredentials(plain={"alice": "pw"}))
    if message is None:
        assert server.respond(token) == b"" and server.principal == "alice"
    else:
        with pytest.raises(SaslRejected, match=message):
            server.respond(token)


def test_removed_users_are_refused() -> None:
    credentials = SaslCredentials(plain={"alice": "pw"}, scram={"alice": "pw"})
    credentials.remove("alice")
    with pytest.raises(SaslRejected):
        sasl_server("PLAIN", credentials).respond(b"\0alice\0pw")
    assert credentials.scram("alice", "SCRAM-SHA-512") is None


# --------------------------------------------------------------------------- TLS material


def test_the_pki_verifies_and_an_unrelated_ca_does_not(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "a")
    other = make_pki(tmp_path / "b")

    async def handshake(client: ssl.SSLContext, server: ssl.SSLContext) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.close()

        async with await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server) as srv:
            port = srv.sockets[0].getsockname()[1]
            _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
            writer.close()

    asyncio.run(handshake(pki.client_context(), pki.server_context()))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        asyncio.run(handshake(other.client_context(), pki.server_context()))


def test_the_jks_truststore_layout(tmp_path: Path) -> None:
    path = write_jks_truststore(tmp_path / "t.jks", [("CA", b"\x30\x03abc")], "secret")
    data = path.read_bytes()
    body, digest = data[:-20], data[-20:]
    assert struct.unpack(">III", body[:12]) == (0xFEEDFEED, 2, 1)
    assert struct.unpack(">I", body[12:16]) == (2,)  # a trusted certificate entry
    assert body[16:20] == b"\x00\x02ca"  # aliases are stored in lower case
    assert body[28:35] == b"\x00\x05X.509"
    assert body[35:39] == struct.pack(">I", 5) and body.endswith(b"\x30\x03abc")
    assert (
        digest == hashlib.sha1("secret".encode("utf-16-be") + b"Mighty Aphrodite" + body).digest()
    )


def test_kafka_settings(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    settings = security_config(pki=pki, plain_users={"alice": "pw"}, client_auth="required")
    assert [x.name for x in settings["listeners"]] == ["SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    assert settings["config"]["ssl.client.auth"] == "required"
    assert settings["config"]["ssl.keystore.location"] == str(pki.keystore)
    assert 'user_alice="pw"' in settings["jaas"]
    assert "ScramLoginModule required" in settings["jaas"]
    with pytest.raises(ConfigurationError):
        pki.kafka_config(client_auth="maybe")
    with pytest.raises(ConfigurationError):
        sasl_jaas({"al ice": "pw"})
    with pytest.raises(ConfigurationError):
        sasl_jaas({"alice": 'p"w'})
    assert security_config(sasl=True)["listeners"] == [Listener("SASL_PLAINTEXT")]


# --------------------------------------------------------------------------- listeners


def test_embedded_listener_settings_are_checked(tmp_path: Path) -> None:
    pki: Pki = make_pki(tmp_path)
    with pytest.raises(ConfigurationError, match="needs a server ssl_context"):
        EmbeddedBroker(listeners=[Listener("SSL")])
    with pytest.raises(ConfigurationError, match="needs a server ssl_context"):
        EmbeddedBroker(
            listeners=[Listener("X", protocol="SSL")], ssl_context={"Y": pki.server_context()}
        )
    with pytest.raises(ConfigurationError, match="not one of"):
        EmbeddedBroker(listeners=[Listener("TLS")])
    with pytest.raises(ConfigurationError, match="unique"):
        EmbeddedBroker(listeners=[Listener("PLAINTEXT")])
    with pytest.raises(ConfigurationError, match="sasl_mechanisms"):
        EmbeddedBroker(listeners=[Listener("SASL_PLAINTEXT")], sasl_mechanisms=["GSSAPI"])
    with pytest.raises(ConfigurationError, match="sasl_mechanisms"):
        EmbeddedBroker(listeners=[Listener("SASL_PLAINTEXT")], sasl_mechanisms={"OTHER": ["PLAIN"]})
    resolved = resolve_listeners(
        [Listener("A", protocol="SASL_SSL"), Listener("B", protocol="SASL_PLAINTEXT")],
        pki.server_context(),
        {"A": ["PLAIN"], "B": ["SCRAM-SHA-512"]},
    )
    assert resolved["A"].mechanisms == ("PLAIN",) and resolved["A"].ssl_context is not None
    assert resolved["B"].mechanisms == ("SCRAM-SHA-512",) and resolved["B"].ssl_context is None


# --------------------------------------------------------------------------- classification


class _AiokafkaLike(Exception):
    def __init__(self, errno: int, message: str) -> None:
        super().__init__(message)
        self.errno = errno


SASL = SecurityOptions(
    {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256",
     "sasl_plain_username": "alice"}
)  # fmt: skip
PLAINTEXT = SecurityOptions({})


@pytest.mark.parametrize(
    ("exc", "security", "expected", "words"),
    [
        (
            ssl.SSLCertVerificationError(1, "certificate verify failed: unable to get issuer"),
            SASL,
            SslAuthenticationError,
            "certificate verify failed",
        ),
        (
            ssl.SSLError(1, "[SSL] wrong version"),
            SASL,
            SslAuthenticationError,
            "client certificate",
        ),
        (ConnectionResetError(), SASL, SslAuthenticationError, "a TLS listener"),
        (ConnectionResetError(), PLAINTEXT, None, ""),
        (
            _AiokafkaLike(58, "Authentication failed: x"),
            SASL,
            SaslAuthenticationError,
            "'alice' with SCRAM-SHA-256",
        ),
        (_AiokafkaLike(33, "no such"), SASL, UnsupportedSaslMechanismError, "SCRAM-SHA-256"),
        (_AiokafkaLike(34, ""), SASL, IllegalSaslStateError, "did not expect SASL"),
        (ValueError("Server sent wrong signature!"), SASL, SaslAuthenticationError, "SCRAM answer"),
        (ValueError("x"), PLAINTEXT, None, ""),
        (OSError("refused"), PLAINTEXT, None, ""),
    ],
)
def test_connection_failures_are_classified(
    exc: BaseException, security: SecurityOptions, expected: type[Exception] | None, words: str
) -> None:
    found = classify(exc, security, "h:1")
    if expected is None:
        assert found is None
    else:
        assert type(found) is expected and words in str(found) and "h:1" in str(found)


def test_sasl_error_codes_are_registered() -> None:
    assert type(error_for_code(58)) is SaslAuthenticationError
    assert type(error_for_code(33)) is UnsupportedSaslMechanismError
    assert type(error_for_code(34)) is IllegalSaslStateError


# --------------------------------------------------------------------------- command lines


def test_the_embedded_broker_runs_secured_from_the_command_line(tmp_path: Path) -> None:
    """``python -m aiogroup.testing.tls`` writes the material, ``python -m
    aiogroup.testing.embedded`` serves SASL_SSL with it; a SCRAM login over TLS works."""
    done = subprocess.run(
        [sys.executable, "-m", "aiogroup.testing.tls", str(tmp_path)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert str(tmp_path / "ca.pem") in done.stdout
    port, secure = free_port(), free_port()
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "aiogroup.testing.embedded", "--port", str(port),
            "--listener", f"SASL_SSL:{secure}", "--ssl-cert", str(tmp_path / "broker.pem"),
            "--ssl-key", str(tmp_path / "broker.key"), "--scram-user", "alice:pw",
            "--sasl-mechanisms", "SCRAM-SHA-512",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        assert f"127.0.0.1:{port}" in proc.stdout.readline()  # printed once listening
        assert f"SASL_SSL (SASL_SSL) on port {secure}" in proc.stdout.readline()
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        login = sasl_login("127.0.0.1", secure, "SCRAM-SHA-512", "alice", "pw", ssl_context=context)
        assert login.ok and login.mechanisms == ["SCRAM-SHA-512"]
        refused = sasl_login("127.0.0.1", secure, "PLAIN", "alice", "pw", ssl_context=context)
        assert refused.handshake_error == 33
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_restarted_embedded_broker_keeps_its_listener_ports(tmp_path: Path) -> None:
    from aiogroup.testing.embedded.threaded import ThreadedBroker

    pki = make_pki(tmp_path)
    with ThreadedBroker(
        listeners=[Listener("SASL_SSL")],
        ssl_context=pki.server_context(),
        sasl_credentials=SaslCredentials(scram={"alice": "pw"}),
    ) as threaded:
        port = threaded.broker.ports["SASL_SSL"]
        threaded.restart()
        assert threaded.broker.ports["SASL_SSL"] == port
        login = sasl_login(
            "127.0.0.1", port, "SCRAM-SHA-256", "alice", "pw", ssl_context=pki.client_context()
        )
        assert login.ok, login
