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
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aiogroup.errors import ConfigurationError, RemoteProtocolError, TruncatedError
from aiogroup.testing import wire
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import (
    MECHANISMS,
    SaslRejected,
    SaslServer,
    sasl_server,
)

if TYPE_CHECKING:
    from aiogroup.testing.embedded.broker import EmbeddedBroker, _Connection

__all__ = [
    "ListenerSecurity",
    "already_authenticated",
    "authenticate",
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
        unknown = [m for m in enabled if m not in MECHANISMS]
        if listener.sasl and (unknown or not enabled):
            raise ConfigurationError(
                f"listener {listener.name}: sasl_mechanisms must be some of "
                f"{', '.join(MECHANISMS)}, not {list(enabled)}"
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


async def _read_payload(broker: EmbeddedBroker, conn: _Connection) -> bytes | None:
    """One frame's payload, or None when the client went away or sent a bad length."""
    try:
        size = wire.frame_size(await conn.reader.readexactly(4), broker.max_frame_bytes)
        return await conn.reader.readexactly(size)
    except asyncio.IncompleteReadError:
        return None
    except (wire.MalformedRequestError, TruncatedError) as exc:
        broker._refuse(conn, f"bad frame during SASL authentication: {exc}")
        return None


async def _close_after(broker: EmbeddedBroker, conn: _Connection, why: str) -> None:
    """Record why and close gracefully, so the answer just written reaches the client."""
    broker._refuse(conn, why)
    conn.writer.close()
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.writer.wait_closed(), 5)


async def authenticate(
    broker: EmbeddedBroker, conn: _Connection, enabled: Sequence[str]
) -> str | None:
    """Run the SASL exchange on ``conn`` with the ``enabled`` mechanisms; the authenticated
    user, or None (the connection is closed)."""
    exchange: SaslServer | None = None
    legacy = False  # SaslHandshake v0: bare token frames
    while True:
        payload = await _read_payload(broker, conn)
        if payload is None:
            return None
        if exchange is not None and legacy:
            try:
                reply = exchange.respond(payload)
            except SaslRejected as exc:
                await _close_after(broker, conn, f"SASL/{exchange.mechanism} failed: {exc}")
                return None
            conn.writer.write(struct.pack(">i", len(reply)) + reply)
            await conn.writer.drain()
            if exchange.complete:
                return exchange.principal
            continue
        try:
            request = wire.decode_request(payload, broker.api_versions)
        except wire.UnsupportedRequestError as exc:
            if exc.api_key == _API_VERSIONS:
                values = broker._api_versions_values(_UNSUPPORTED_VERSION)
                await broker._send(conn, _API_VERSIONS, 0, exc.correlation_id, values)
                continue
            broker._refuse(conn, f"during SASL authentication: {exc}")
            return None
        except RemoteProtocolError as exc:
            broker._refuse(conn, f"malformed request during SASL authentication: {exc}")
            return None
        if request.client_id:
            conn.client_id = request.client_id

        async def answer(values: dict[str, Any], request: wire.Request = request) -> None:
            await broker._send(
                conn, request.api_key, request.api_version, request.correlation_id, values
            )

        if request.api_key == _API_VERSIONS:
            await answer(broker._api_versions_values())
        elif request.api_key == _HANDSHAKE and exchange is None:
            mechanism = request.body.mechanism
            if mechanism not in enabled:
                await answer(
                    {"error_code": _UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(enabled)}
                )
                await _close_after(broker, conn, f"unsupported SASL mechanism {mechanism!r}")
                return None
            await answer({"error_code": 0, "mechanisms": list(enabled)})
            exchange = sasl_server(mechanism, broker.sasl_credentials)
            legacy = request.api_version == 0
        elif request.api_key == _AUTHENTICATE and exchange is not None:
            try:
                token = exchange.respond(bytes(request.body.auth_bytes or b""))
            except SaslRejected as exc:
                await answer(
                    {
                        "error_code": _SASL_AUTHENTICATION_FAILED,
                        "error_message": str(exc),
                        "auth_bytes": b"",
                        "session_lifetime_ms": 0,
                    }
                )
                await _close_after(broker, conn, f"SASL/{exchange.mechanism} failed: {exc}")
                return None
            await answer(
                {"error_code": 0, "error_message": None, "auth_bytes": token,
                 "session_lifetime_ms": 0}
            )  # fmt: skip
            if exchange.complete:
                return exchange.principal
        elif request.api_key == _HANDSHAKE:
            await answer({"error_code": _ILLEGAL_SASL_STATE, "mechanisms": []})
            await _close_after(broker, conn, "a second SaslHandshake")
            return None
        else:
            broker._refuse(
                conn, f"unexpected {request.api_name} request during SASL authentication"
            )
            return None
