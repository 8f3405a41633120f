"""SASL authentication of a new connection on the embedded broker, as Kafka 2.3 does it.

On a SASL listener the broker serves nothing until the client is authenticated (Kafka's
``SaslServerAuthenticator``, KIP-43 and KIP-152):

1. ApiVersions may come first (any number of times); an unsupported version gets the KIP-511
   answer (v0, UNSUPPORTED_VERSION) and the connection stays open.
2. SaslHandshake names the mechanism; the answer lists the enabled ones. A mechanism that is not
   enabled gets UNSUPPORTED_SASL_MECHANISM (33) and the connection is closed.
3. After SaslHandshake v1 the tokens travel in SaslAuthenticate requests; a refused token gets
   SASL_AUTHENTICATION_FAILED (58) with Kafka's message, then the connection is closed. After
   SaslHandshake v0 they travel as bare length-prefixed frames, and a refusal just closes.
4. Any other request before authentication, a SaslAuthenticate before the handshake, or a
   second handshake closes the connection (Kafka's IllegalSaslStateException; a second
   handshake is first answered with ILLEGAL_SASL_STATE, 34).

Once authenticated (and on PLAINTEXT and SSL listeners) SaslHandshake and SaslAuthenticate get
ILLEGAL_SASL_STATE and the connection stays open, as on Kafka 2.3.

KIP-368 (Kafka 2.2+), when the broker has ``connections_max_reauth_ms``: the session's lifetime
(that, cut to an OAUTHBEARER token's expiry) goes out in SaslAuthenticate v1+; a SaslHandshake on
the authenticated connection, at least 1 s after the last re-authentication began, starts the
exchange again (:func:`authenticate_session` with ``handshake=``), for the same principal only;
the server closes a connection whose session is over at its next other request.

:func:`authenticate` reaches the server only through a :class:`SaslChannel` (one connection:
read a frame, answer, write raw tokens, refuse, close), which the server implements; this
module imports nothing of the server's.
"""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aiogroup.errors import ConfigurationError, RemoteProtocolError, TruncatedError
from aiogroup.testing import wire
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import MECHANISMS, SaslCredentials, SaslRejected, SaslServer, sasl_server

__all__ = [
    "ListenerSecurity",
    "SaslChannel",
    "Session",
    "already_authenticated",
    "authenticate",
    "authenticate_session",
    "resolve_listeners",
]

_API_VERSIONS, _HANDSHAKE, _AUTHENTICATE = 18, 17, 36
_UNSUPPORTED_SASL_MECHANISM, _ILLEGAL_SASL_STATE, _SASL_AUTHENTICATION_FAILED = 33, 34, 58
_UNSUPPORTED_VERSION = 35


@dataclass(frozen=True)
class ListenerSecurity:
    """What one listener of the embedded broker needs: its TLS context and SASL mechanisms."""

    ssl_context: ssl.SSLContext | None
    mechanisms: tuple[str, ...]


T = TypeVar("T")


def _for(value: T | Mapping[str, T], name: str) -> T | None:
    if isinstance(value, Mapping):
        return value.get(name)
    return value


def resolve_listeners(
    listeners: Sequence[Listener],
    ssl_context: ssl.SSLContext | Mapping[str, ssl.SSLContext] | None,
    mechanisms: Sequence[str] | Mapping[str, Sequence[str]],
) -> dict[str, ListenerSecurity]:
    """Each listener's settings (a mapping gives them per listener name, as Kafka's
    ``listener.name.<name>.`` prefix does); refuses what cannot be served."""
    names = ["PLAINTEXT"]
    out: dict[str, ListenerSecurity] = {}
    for listener in listeners:
        listener.check()
        names.append(listener.name)
        context = _for(ssl_context, listener.name) if listener.tls else None
        if listener.tls and not isinstance(context, ssl.SSLContext):
            raise ConfigurationError(f"listener {listener.name} needs a server ssl_context")
        enabled = tuple(_for(mechanisms, listener.name) or ()) if listener.sasl else ()
        known = (*MECHANISMS, "OAUTHBEARER")
        unknown = [m for m in enabled if m not in known]
        if listener.sasl and (unknown or not enabled):
            raise ConfigurationError(
                f"listener {listener.name}: sasl_mechanisms must be some of "
                f"{', '.join(known)}, not {list(enabled)}"
            )
        out[listener.name] = ListenerSecurity(context, enabled)
    if len(set(names)) != len(names):
        raise ConfigurationError(f"listener names must be unique: {names}")
    return out


def already_authenticated(request: wire.Request) -> dict[str, Any]:
    """Kafka's answer to SaslHandshake / SaslAuthenticate on an authenticated connection."""
    if request.api_key == _HANDSHAKE:
        return {"error_code": _ILLEGAL_SASL_STATE, "mechanisms": []}
    return {
        "error_code": _ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }


class SaslChannel(Protocol):
    """One connection as :func:`authenticate` sees it. The server implements it
    (:class:`~aiogroup.testing.embedded.broker.EmbeddedBroker` passes one per connection to a
    SASL listener); a test may pass a fake."""

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """The API versions served (requests are decoded against them)."""
        ...

    async def read_frame(self) -> bytes:
        """The next frame's payload. Raises ``asyncio.IncompleteReadError`` when the client
        went away, :class:`~aiogroup.testing.wire.MalformedRequestError` or
        :class:`~aiogroup.errors.TruncatedError` for a bad length prefix."""
        ...

    async def write(self, data: bytes) -> None:
        """Write raw bytes (the bare tokens of SaslHandshake v0)."""
        ...

    async def answer(
        self, api_key: int, api_version: int, correlation_id: int, values: dict[str, Any]
    ) -> None:
        """Send a response."""
        ...

    def api_versions_answer(self, error_code: int) -> dict[str, Any]:
        """The server's ApiVersions response values, with ``error_code``."""
        ...

    def identify(self, client_id: str) -> None:
        """A request named its client id."""
        ...

    def refuse(self, why: str) -> None:
        """Note why the connection is being closed (the server then closes it)."""
        ...

    async def close(self) -> None:
        """Close the connection once what was written has reached the client."""
        ...


async def _read_payload(channel: SaslChannel) -> bytes | None:
    """One frame's payload, or None when the client went away or sent a bad length."""
    try:
        return await channel.read_frame()
    except asyncio.IncompleteReadError:
        return None
    except (wire.MalformedRequestError, TruncatedError) as exc:
        channel.refuse(f"bad frame during SASL authentication: {exc}")
        return None


async def _close_after(channel: SaslChannel, why: str) -> None:
    """Record why and close gracefully, so the answer just written reaches the client."""
    channel.refuse(why)
    await channel.close()


@dataclass(frozen=True)
class Session:
    """An authenticated SASL session: who, and for how long (0: no limit, no KIP-368)."""

    principal: str
    lifetime_ms: int = 0


def _wall_ms() -> int:
    return int(time.time() * 1000)


async def authenticate(
    channel: SaslChannel, enabled: Sequence[str], credentials: SaslCredentials
) -> str | None:
    """Run the SASL exchange on ``channel`` with the ``enabled`` mechanisms against
    ``credentials``; the authenticated user, or None (the server closes the connection)."""
    session = await authenticate_session(channel, enabled, credentials)
    return None if session is None else session.principal


async def authenticate_session(
    channel: SaslChannel,
    enabled: Sequence[str],
    credentials: SaslCredentials,
    *,
    reauth_ms: int | None = None,
    now_ms: Callable[[], int] = _wall_ms,
    handshake: wire.Request | None = None,
    principal: str | None = None,
) -> Session | None:
    """:func:`authenticate`, with KIP-368: ``reauth_ms`` (``connections.max.reauth.ms``) gives
    the session a lifetime, cut to the OAUTHBEARER token's expiry, sent in SaslAuthenticate v1+.
    A re-authentication passes the SaslHandshake already read (``handshake``) and the
    connection's ``principal``, which must not change (Kafka refuses that)."""
    exchange: SaslServer | None = None
    legacy = False  # SaslHandshake v0: bare token frames
    while True:
        if handshake is not None:
            request, handshake = handshake, None
            exchange, legacy, ok = await _handshake(channel, request, enabled, credentials, now_ms)
            if not ok:
                return None
            continue
        payload = await _read_payload(channel)
        if payload is None:
            return None
        if exchange is not None and legacy:
            try:
                reply = exchange.respond(payload)
            except SaslRejected as exc:
                await _close_after(channel, f"SASL/{exchange.mechanism} failed: {exc}")
                return None
            await channel.write(struct.pack(">i", len(reply)) + reply)
            if exchange.complete and exchange.principal is not None:
                return Session(exchange.principal, _lifetime(exchange, reauth_ms, now_ms))
            continue
        try:
            request = wire.decode_request(payload, channel.api_versions)
        except wire.UnsupportedRequestError as exc:
            if exc.api_key == _API_VERSIONS:
                values = channel.api_versions_answer(_UNSUPPORTED_VERSION)
                await channel.answer(_API_VERSIONS, 0, exc.correlation_id, values)
                continue
            channel.refuse(f"during SASL authentication: {exc}")
            return None
        except RemoteProtocolError as exc:
            channel.refuse(f"malformed request during SASL authentication: {exc}")
            return None
        if request.client_id:
            channel.identify(request.client_id)

        answer = _answerer(channel, request)
        if request.api_key == _API_VERSIONS:
            await answer(channel.api_versions_answer(0))
        elif request.api_key == _HANDSHAKE and exchange is None:
            exchange, legacy, ok = await _handshake(channel, request, enabled, credentials, now_ms)
            if not ok:
                return None
        elif request.api_key == _AUTHENTICATE and exchange is not None:
            try:
                token = exchange.respond(bytes(request.body.auth_bytes or b""))
                if exchange.complete and principal is not None and exchange.principal != principal:
                    raise SaslRejected(
                        f"Cannot change principals during re-authentication from {principal}: "
                        f"{exchange.principal}"
                    )
            except SaslRejected as exc:
                await answer(
                    {
                        "error_code": _SASL_AUTHENTICATION_FAILED,
                        "error_message": str(exc),
                        "auth_bytes": b"",
                        "session_lifetime_ms": 0,
                    }
                )
                await _close_after(channel, f"SASL/{exchange.mechanism} failed: {exc}")
                return None
            lifetime = _lifetime(exchange, reauth_ms, now_ms) if exchange.complete else 0
            await answer(
                {"error_code": 0, "error_message": None, "auth_bytes": token,
                 "session_lifetime_ms": lifetime}
            )  # fmt: skip
            if exchange.complete and exchange.principal is not None:
                return Session(exchange.principal, lifetime)
        elif request.api_key == _HANDSHAKE:
            await answer({"error_code": _ILLEGAL_SASL_STATE, "mechanisms": []})
            await _close_after(channel, "a second SaslHandshake")
            return None
        else:
            channel.refuse(f"unexpected {request.api_name} request during SASL authentication")
            return None


def _answerer(
    channel: SaslChannel, request: wire.Request
) -> Callable[[dict[str, Any]], Awaitable[None]]:
    async def answer(values: dict[str, Any]) -> None:
        await channel.answer(request.api_key, request.api_version, request.correlation_id, values)

    return answer


async def _handshake(
    channel: SaslChannel,
    request: wire.Request,
    enabled: Sequence[str],
    credentials: SaslCredentials,
    now_ms: Callable[[], int],
) -> tuple[SaslServer | None, bool, bool]:
    """Answer a SaslHandshake: ``(exchange, legacy, ok)``; not ok: refused and closed."""
    answer = _answerer(channel, request)
    mechanism = request.body.mechanism
    if mechanism not in enabled:
        await answer({"error_code": _UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(enabled)})
        await _close_after(channel, f"unsupported SASL mechanism {mechanism!r}")
        return None, False, False
    await answer({"error_code": 0, "mechanisms": list(enabled)})
    return sasl_server(mechanism, credentials, now_ms=now_ms()), request.api_version == 0, True


def _lifetime(exchange: SaslServer, reauth_ms: int | None, now_ms: Callable[[], int]) -> int:
    """KIP-368: ``connections.max.reauth.ms``, cut to the token's expiry (0: no limit)."""
    if not reauth_ms:
        return 0
    expires: int | None = getattr(exchange, "expires_ms", None)
    if expires is None:
        return reauth_ms
    return max(1, min(reauth_ms, expires - now_ms()))
