"""SASL for the embedded broker: PLAIN and SCRAM-SHA-256/512, sans-I/O, as Apache Kafka does them.

The broker side (:class:`SaslCredentials`, :func:`sasl_server`) keeps users the way Kafka
does: PLAIN users with their passwords (Kafka reads them from the JAAS file), SCRAM users as
salted credentials per mechanism (Kafka keeps them in ZooKeeper; ``kafka-configs.sh`` makes
them with 4096 iterations by default), never the password itself. A server object takes the
client's tokens one by one and answers the next token, or raises :class:`SaslRejected` with the
message Kafka 2.3 sends in its SaslAuthenticate response (SASL_AUTHENTICATION_FAILED, 58).

:class:`ScramClient` is the client side of RFC 5802, and :func:`sasl_login` a blocking client
that runs one whole exchange on a new connection: for raw-protocol tests on either broker and
for waiting until Kafka has picked up new SCRAM credentials.

The servers and :class:`ScramClient` do no I/O and read no clock; nonces and salts come from
``secrets`` unless given.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import secrets
import socket
import ssl
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from aiogroup.errors import ConfigurationError
from aiogroup.testing import wire

__all__ = [
    "MECHANISMS",
    "SCRAM_MECHANISMS",
    "OAuthBearerServer",
    "SaslCredentials",
    "SaslLogin",
    "SaslRejected",
    "SaslServer",
    "ScramClient",
    "ScramCredential",
    "sasl_login",
    "sasl_server",
]

#: SCRAM mechanism -> hashlib name.
SCRAM_MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
#: Kafka's lowest accepted iteration count for SCRAM-SHA-256/512 (and the tool's default).
MIN_ITERATIONS = 4096
#: What Kafka 2.3 answers for any credential it does not accept through the generic path
#: (SaslServerAuthenticator, for a SaslException from the mechanism).
_INVALID = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"
)
_PLAIN_INVALID = "Authentication failed: Invalid username or password"


class SaslRejected(Exception):
    """The client's token is refused; ``str(exc)`` is the message sent to the client."""


# --------------------------------------------------------------------------- credentials


def _hmac(name: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, name).digest()


def _salted_password(name: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a broker stores for one SCRAM user and mechanism (RFC 5802, section 3)."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_password(
        cls,
        mechanism: str,
        password: str,
        *,
        iterations: int = MIN_ITERATIONS,
        salt: bytes | None = None,
    ) -> ScramCredential:
        name = _scram_hash(mechanism)
        if iterations < MIN_ITERATIONS:
            raise ConfigurationError(f"{mechanism} needs at least {MIN_ITERATIONS} iterations")
        salt = secrets.token_bytes(32) if salt is None else salt
        salted = _salted_password(name, password, salt, iterations)
        client_key = _hmac(name, salted, b"Client Key")
        return cls(
            salt=salt,
            iterations=iterations,
            stored_key=hashlib.new(name, client_key).digest(),
            server_key=_hmac(name, salted, b"Server Key"),
        )


def _scram_hash(mechanism: str) -> str:
    name = SCRAM_MECHANISMS.get(mechanism)
    if name is None:
        raise ConfigurationError(f"not a SCRAM mechanism: {mechanism!r}")
    return name


class SaslCredentials:
    """The users a broker accepts: PLAIN passwords and SCRAM credentials per mechanism.

    ``SaslCredentials(plain={"alice": "pw"}, scram={"alice": "pw"})`` gives alice PLAIN and both
    SCRAM mechanisms. Changing a user takes effect at that user's next authentication (open
    connections stay authenticated, as in Kafka without re-authentication, KIP-368).
    """

    def __init__(
        self,
        *,
        plain: Mapping[str, str] | None = None,
        scram: Mapping[str, str] | None = None,
    ) -> None:
        self._plain: dict[str, str] = {}
        self._scram: dict[tuple[str, str], ScramCredential] = {}
        for user, password in (plain or {}).items():
            self.set_plain(user, password)
        for user, password in (scram or {}).items():
            self.set_scram(user, password)

    def set_plain(self, user: str, password: str) -> None:
        self._plain[user] = password

    def set_scram(
        self,
        user: str,
        password: str,
        mechanisms: Iterable[str] = tuple(SCRAM_MECHANISMS),
        *,
        iterations: int = MIN_ITERATIONS,
    ) -> None:
        """Store salted credentials for ``user`` (as ``kafka-configs.sh --add-config``)."""
        for mechanism in mechanisms:
            self._scram[(user, mechanism)] = ScramCredential.from_password(
                mechanism, password, iterations=iterations
            )

    def set_scram_credential(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Store a ready-made credential (e.g. one with a known salt)."""
        _scram_hash(mechanism)
        self._scram[(user, mechanism)] = credential

    def remove(self, user: str) -> None:
        """Forget ``user`` for every mechanism."""
        self._plain.pop(user, None)
        for key in [k for k in self._scram if k[0] == user]:
            del self._scram[key]

    def plain_password(self, user: str) -> str | None:
        return self._plain.get(user)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._scram.get((user, mechanism))


# --------------------------------------------------------------------------- servers


class SaslServer:
    """One authentication exchange on the broker side."""

    mechanism: str = ""

    def __init__(self) -> None:
        #: The authenticated user once :attr:`complete`.
        self.principal: str | None = None
        self.complete = False

    def respond(self, token: bytes) -> bytes:
        """The answer to the client's next ``token``; raises :class:`SaslRejected`."""
        raise NotImplementedError


class _PlainServer(SaslServer):
    """RFC 4616: one token ``authzid NUL user NUL password``, an empty answer."""

    mechanism = "PLAIN"

    def __init__(self, credentials: SaslCredentials) -> None:
        super().__init__()
        self._credentials = credentials

    def respond(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslRejected(_INVALID.format(self.mechanism))
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslRejected(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslRejected(_INVALID.format(self.mechanism)) from None
        if not user or not password:
            raise SaslRejected(_PLAIN_INVALID)
        if authzid and authzid != user:
            raise SaslRejected(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        expected = self._credentials.plain_password(user)
        if expected is None or not hmac.compare_digest(
            expected.encode("utf-8"), password.encode("utf-8")
        ):
            raise SaslRejected(_PLAIN_INVALID)
        self.principal, self.complete = user, True
        return b""


def _scram_attributes(message: str) -> dict[str, str]:
    attrs: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ValueError(f"bad SCRAM attribute {part!r}")
        attrs[key] = value
    return attrs


def _scram_name(value: str) -> str:
    """RFC 5802 saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``; any other ``=`` is invalid."""
    out = value.replace("=2C", ",").replace("=3D", "=")
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ValueError(f"bad saslname {value!r}")
    return out


class _ScramServer(SaslServer):
    """RFC 5802 server: client-first -> server-first, client-final -> server-final."""

    def __init__(
        self, mechanism: str, credentials: SaslCredentials, nonce: str | None = None
    ) -> None:
        super().__init__()
        self.mechanism = mechanism
        self._hash = _scram_hash(mechanism)
        self._credentials = credentials
        self._server_nonce = nonce or secrets.token_urlsafe(24)
        self._step = 0
        self._user = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._credential: ScramCredential | None = None

    def _reject(self) -> SaslRejected:
        return SaslRejected(_INVALID.format(self.mechanism))

    def respond(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._reject() from None
        if self._step == 0:
            return self._client_first(text)
        if self._step == 1:
            return self._client_final(text)
        raise self._reject()

    def _client_first(self, text: str) -> bytes:
        # gs2-header: "n," (no channel binding), optional "a=authzid", ","; then the bare part.
        cbind, sep, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if cbind not in ("n", "y") or not sep or not sep2:
            raise self._reject()
        try:
            attrs = _scram_attributes(bare)
            user = _scram_name(attrs["n"])
            client_nonce = attrs["r"]
        except (KeyError, ValueError):
            raise self._reject() from None
        if authzid and _scram_name(authzid.removeprefix("a=")) != user:
            raise SaslRejected(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        credential = self._credentials.scram(user, self.mechanism)
        if credential is None or not client_nonce:
            raise self._reject()
        self._user, self._credential = user, credential
        self._nonce = client_nonce + self._server_nonce
        self._client_first_bare = bare
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._gs2 = f"{cbind},{authzid},"
        self._step = 1
        return self._server_first.encode("utf-8")

    def _client_final(self, text: str) -> bytes:
        assert self._credential is not None
        without_proof, sep, proof_part = text.rpartition(",p=")
        try:
            attrs = _scram_attributes(without_proof)
            proof = base64.b64decode(proof_part, validate=True)
            binding = base64.b64decode(attrs["c"], validate=True)
        except (KeyError, ValueError):
            raise self._reject() from None
        if not sep or attrs.get("r") != self._nonce or binding != self._gs2.encode("utf-8"):
            raise self._reject()
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}"
        signature = _hmac(self._hash, self._credential.stored_key, auth_message.encode("utf-8"))
        if len(proof) != len(signature):
            raise self._reject()
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), self._credential.stored_key
        ):
            raise self._reject()
        server_signature = _hmac(
            self._hash, self._credential.server_key, auth_message.encode("utf-8")
        )
        self.principal, self.complete, self._step = self._user, True, 2
        return b"v=" + base64.b64encode(server_signature)


class OAuthBearerServer(SaslServer):
    """RFC 7628 with Kafka's unsecured JWS validation (``OAuthBearerUnsecuredValidator``, for
    tests): the token is ``base64url(header).base64url(claims).`` with ``{"alg":"none"}``, a
    non-empty ``sub`` (the principal) and an ``exp`` (seconds) after ``now_ms``. A refused token
    gets the error challenge ``{"status":"invalid_token"}``; the client's ``\x01`` then fails
    the exchange with that message. :attr:`expires_ms` is the accepted token's expiry."""

    mechanism = "OAUTHBEARER"
    ERROR = '{"status":"invalid_token"}'

    def __init__(self, now_ms: int) -> None:
        super().__init__()
        self._now_ms = now_ms
        self._refused = False
        self.expires_ms: int | None = None

    def respond(self, token: bytes) -> bytes:
        if self.complete or self._refused:
            raise SaslRejected(self.ERROR)
        claims = self._claims(token)
        sub, exp = claims.get("sub"), claims.get("exp")
        valid = (
            isinstance(sub, str)
            and bool(sub)
            and isinstance(exp, int | float)
            and not isinstance(exp, bool)
            and exp * 1000 > self._now_ms
        )
        if not valid:
            self._refused = True
            return self.ERROR.encode()
        assert isinstance(sub, str) and isinstance(exp, int | float)
        self.principal, self.complete = sub, True
        self.expires_ms = round(exp * 1000)
        return b""

    @staticmethod
    def _claims(message: bytes) -> dict[str, object]:
        import json

        try:
            gs2, _, rest = message.decode("ascii").partition("\x01")
            fields = dict(f.split("=", 1) for f in rest.split("\x01") if "=" in f)
            scheme, _, jws = fields.get("auth", "").partition(" ")
            header, payload, signature = jws.split(".")
            decode = base64.urlsafe_b64decode
            head = json.loads(decode(header + "=" * (-len(header) % 4)))
            claims = json.loads(decode(payload + "=" * (-len(payload) % 4)))
        except (ValueError, UnicodeDecodeError):
            return {}
        if not gs2.startswith(("n,", "y,")) or scheme != "Bearer" or signature:
            return {}
        if not isinstance(head, dict) or head.get("alg") != "none" or not isinstance(claims, dict):
            return {}
        return claims


def sasl_server(
    mechanism: str, credentials: SaslCredentials, *, nonce: str | None = None, now_ms: int = 0
) -> SaslServer:
    """A fresh server exchange for ``mechanism`` (one of :data:`MECHANISMS` or OAUTHBEARER);
    ``nonce`` fixes the SCRAM server nonce (tests), else it is random; ``now_ms`` (wall clock)
    is what OAUTHBEARER checks a token's expiry against."""
    if mechanism == "PLAIN":
        return _PlainServer(credentials)
    if mechanism == "OAUTHBEARER":
        return OAuthBearerServer(now_ms)
    return _ScramServer(mechanism, credentials, nonce)


# --------------------------------------------------------------------------- the client


class ScramClient:
    """RFC 5802 client (no channel binding): :meth:`first`, :meth:`final`, :meth:`verify`."""

    def __init__(
        self, mechanism: str, user: str, password: str, *, nonce: str | None = None
    ) -> None:
        self._hash = _scram_hash(mechanism)
        self.mechanism = mechanism
        self._password = password
        escaped = user.replace("=", "=3D").replace(",", "=2C")
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={escaped},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message; raises ``ValueError`` if the server's answer is malformed."""
        text = server_first.decode("utf-8")
        attrs = _scram_attributes(text)
        nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        if not nonce.startswith(self._nonce):
            raise ValueError("the server nonce does not extend ours")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        salted = _salted_password(self._hash, self._password, salt, iterations)
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        """Whether the server proved it knows our credentials."""
        attrs = _scram_attributes(server_final.decode("utf-8"))
        got = base64.b64decode(attrs.get("v", ""))
        return bool(self._server_signature) and hmac.compare_digest(got, self._server_signature)


# --------------------------------------------------------------------------- a blocking login


@dataclass
class SaslLogin:
    """How one :func:`sasl_login` went.

    ``handshake_error`` and ``mechanisms`` come from SaslHandshake; ``error_code`` and
    ``error_message`` from the SaslAuthenticate that failed (0 / None when every step passed;
    -1 when the broker closed the connection instead of answering). ``usable`` says whether a
    Metadata request was then served on the same connection.
    """

    handshake_error: int = 0
    mechanisms: list[str] = field(default_factory=list)
    error_code: int = 0
    error_message: str | None = None
    usable: bool = False

    @property
    def ok(self) -> bool:
        return self.handshake_error == 0 and self.error_code == 0 and self.usable


def sasl_login(
    host: str,
    port: int,
    mechanism: str,
    user: str,
    password: str,
    *,
    ssl_context: ssl.SSLContext | None = None,
    handshake_version: int = 1,
    timeout: float = 10.0,
) -> SaslLogin:
    """Authenticate on a new connection to ``host:port`` (TLS first if ``ssl_context``).

    SaslHandshake v1 carries the tokens in SaslAuthenticate v1; v0 sends them as bare frames
    (a refusal then shows only as a closed connection, ``error_code`` -1).
    """
    outcome = SaslLogin()
    raw = socket.create_connection((host, port), timeout=timeout)
    sock: socket.socket = (
        ssl_context.wrap_socket(raw, server_hostname=host) if ssl_context is not None else raw
    )
    correlation = iter(range(1, 100))

    def call(api: str, version: int, values: Mapping[str, object]) -> object:
        return wire.blocking_request(sock, api, version, values, correlation_id=next(correlation))

    def token_exchange(token: bytes) -> bytes:
        if handshake_version == 0:
            sock.sendall(struct.pack(">i", len(token)) + token)
            size = wire.frame_size(wire.recv_exactly(sock, 4))
            return wire.recv_exactly(sock, size)
        answer: object = call("SaslAuthenticate", 1, {"auth_bytes": token})
        code = int(getattr(answer, "error_code", -1))
        if code:
            outcome.error_code, outcome.error_message = code, getattr(answer, "error_message", None)
            raise _Refused
        return bytes(getattr(answer, "auth_bytes", b"") or b"")

    with contextlib.closing(sock):
        handshake = call("SaslHandshake", handshake_version, {"mechanism": mechanism})
        outcome.handshake_error = int(getattr(handshake, "error_code", -1))
        outcome.mechanisms = list(getattr(handshake, "mechanisms", None) or [])
        if outcome.handshake_error:
            return outcome
        try:
            if mechanism == "PLAIN":
                token_exchange(f"\0{user}\0{password}".encode())
            else:
                client = ScramClient(mechanism, user, password)
                final = token_exchange(client.final(token_exchange(client.first())))
                if not client.verify(final):
                    outcome.error_code, outcome.error_message = -1, "bad server signature"
                    return outcome
            call("Metadata", 1, {"topics": []})
            outcome.usable = True
        except _Refused:
            pass
        except (ConnectionError, OSError):
            if outcome.error_code == 0:
                outcome.error_code = -1
    return outcome


class _Refused(Exception):
    """SaslAuthenticate answered an error (already recorded in the outcome)."""
