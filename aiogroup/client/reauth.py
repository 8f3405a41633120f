"""KIP-368 SASL re-authentication on aiokafka's connections.

A broker with ``connections.max.reauth.ms`` set (or one validating expiring OAUTHBEARER tokens)
answers SaslAuthenticate v1+ with ``session_lifetime_ms``: the connection must authenticate
again before then, or the broker closes it at its next request. aiokafka does not re-authenticate,
so aiogroup's client (:class:`ReauthClient`) opens :class:`ReauthConnection` s, which:

- note the session lifetime the broker gave (any mechanism: PLAIN, SCRAM, OAUTHBEARER, GSSAPI);
- at 85-95% of it (:func:`~aiogroup.client.oauth_token.reauthentication_delay_ms`, the Java
  client's window) close the connection to new requests, wait for the answers of those in
  flight (Kafka takes no other request on a connection while it re-authenticates), run
  SaslHandshake and SaslAuthenticate again on the same connection (OAUTHBEARER with the
  token source's current, refreshed, token), then let the held requests go;
- on a refusal, log it, count it, keep it as :attr:`SaslSessions.last_error` and close the
  connection: the held requests fail as a lost connection does (retriable), and the next
  request reconnects, where a refusal that persists surfaces as an
  :class:`~aiogroup.errors.AuthenticationError` (see :mod:`aiogroup.client.security`).

The timers and the waiting live here (the driver); the arithmetic is sans-I/O in
:mod:`aiogroup.client.oauth_token`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import random
from dataclasses import dataclass
from typing import Any

from aiokafka.client import AIOKafkaClient, ConnectionGroup
from aiokafka.conn import AIOKafkaConnection, CloseReason
from aiokafka.errors import BrokerResponseError, KafkaError

from aiogroup.client.oauth import TokenSource
from aiogroup.client.oauth_token import (
    ERROR_ACK,
    client_first_message,
    reauthentication_delay_ms,
)
from aiogroup.errors import (
    AiogroupError,
    AuthenticationError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    UnsupportedSaslMechanismError,
)

__all__ = ["OAuthBearerExchange", "ReauthClient", "ReauthConnection", "SaslSessions"]

log = logging.getLogger(__name__)

SASL_AUTHENTICATE = 36
#: The broker's refusals by error code (anything else: SaslAuthenticationError).
_REFUSALS: dict[int, type[AuthenticationError]] = {
    e.code: e
    for e in (IllegalSaslStateError, SaslAuthenticationError, UnsupportedSaslMechanismError)
}
#: The connection whose re-authentication the current task runs (its requests pass the gate).
_REAUTHENTICATING: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "aiogroup_reauthenticating", default=None
)


@dataclass
class SaslSessions:
    """SASL on one client's connections: ``authentications`` (connections authenticated when
    opened), ``reauthentications`` and ``reauthentication_failures`` (KIP-368), how many
    re-authentications ``waited_for_in_flight`` answers and how many requests were
    ``held_requests`` meanwhile, the last
    ``session_lifetime_ms`` a broker gave (0: none), the ``last_error`` of a re-authentication,
    and the OAUTHBEARER ``token_source`` (None for other mechanisms)."""

    authentications: int = 0
    reauthentications: int = 0
    reauthentication_failures: int = 0
    #: Re-authentications that first waited for answers in flight, and requests held back
    #: while one ran (sent right after it).
    waited_for_in_flight: int = 0
    held_requests: int = 0
    session_lifetime_ms: int = 0
    last_error: AuthenticationError | None = None
    token_source: TokenSource | None = None


class ReauthConnection(AIOKafkaConnection):  # type: ignore[misc]  # aiokafka is untyped
    """aiokafka's connection, re-authenticating before the broker's session lifetime ends."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        sessions: SaslSessions | None = None,
        rng: random.Random | None = None,
        **options: Any,
    ) -> None:
        super().__init__(host, port, **options)
        self._sessions = sessions or SaslSessions()
        self._rng = rng or random.Random()
        self._session_lifetime_ms = 0
        self._gate: asyncio.Event | None = None
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        #: Set when the last answer in flight has arrived (a re-authentication waits for it).
        self._drained: asyncio.Event | None = None

    async def connect(self) -> Any:
        result = await super().connect()
        if self._security_protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            self._sessions.authentications += 1
            self._schedule()
        return result

    def send(self, request: Any, expect_response: bool = True) -> Any:
        if self._gate is not None and _REAUTHENTICATING.get() is not self:
            return self._send_after_reauthentication(request, expect_response)
        sent = super().send(request, expect_response)
        if getattr(request, "API_KEY", None) == SASL_AUTHENTICATE:
            return self._note_session(sent)
        return sent

    def close(self, reason: Any = None, exc: BaseException | None = None) -> Any:
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        task, self._reauth_task = self._reauth_task, None
        if task is not None and not task.done():
            try:
                current = asyncio.current_task()
            except RuntimeError:  # closed from __del__, no loop running
                current = None
            if task is not current:
                task.cancel()
        return super().close(reason=reason, exc=exc)

    def _handle_frame(self, resp: Any) -> None:
        super()._handle_frame(resp)
        if self._drained is not None and not self._requests:
            self._drained.set()
            self._drained = None

    def authenticator_oauth(self) -> OAuthBearerExchange:
        return OAuthBearerExchange(self._sasl_oauth_token_provider)

    # ------------------------------------------------------------------ internals

    async def _note_session(self, sent: Any) -> Any:
        response = await sent
        if getattr(response, "error_code", -1) == 0:
            self._session_lifetime_ms = int(getattr(response, "session_lifetime_ms", 0) or 0)
        return response

    async def _send_after_reauthentication(self, request: Any, expect_response: bool) -> Any:
        self._sessions.held_requests += 1
        while (gate := self._gate) is not None:
            await gate.wait()
        return await self.send(request, expect_response)

    def _schedule(self) -> None:
        delay = reauthentication_delay_ms(self._session_lifetime_ms, self._rng.random())
        if delay is None or not self.connected():
            return
        self._sessions.session_lifetime_ms = self._session_lifetime_ms
        log.debug(
            "%s:%s: session lifetime %d ms, re-authenticating in %d ms",
            self.host, self.port, self._session_lifetime_ms, delay,
        )  # fmt: skip
        self._reauth_timer = self._loop.call_later(delay / 1000, self._begin)

    def _begin(self) -> None:
        self._reauth_timer = None
        if self.connected():
            self._reauth_task = self._loop.create_task(
                self._reauthenticate(), name=f"aiogroup-reauth-{self.host}:{self.port}"
            )

    async def _reauthenticate(self) -> None:
        gate = asyncio.Event()
        self._gate = gate
        failed: BaseException | None = None
        try:
            if self._requests:  # every answer first (those given up on too): Kafka takes no
                self._sessions.waited_for_in_flight += 1  # other request meanwhile
                self._drained = asyncio.Event()
                await self._drained.wait()
            if not self.connected():
                return
            _REAUTHENTICATING.set(self)  # this task's context only
            self._session_lifetime_ms = 0
            await self._do_sasl_handshake()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # aiokafka's errors, the token source's, a lost connection
            failed = exc
        finally:
            self._gate = None
            gate.set()
        if failed is None:
            self._sessions.reauthentications += 1
            log.debug("%s:%s: re-authenticated", self.host, self.port)
            self._schedule()
            return
        self._refused(failed)

    def _refused(self, failed: BaseException) -> None:
        where = f"{self.host}:{self.port}"
        if not isinstance(failed, AuthenticationError | BrokerResponseError):
            # Not a refusal: the connection broke or timed out; the next request reconnects.
            log.info("re-authenticating the connection to %s broke off: %r", where, failed)
            self.close(reason=CloseReason.CONNECTION_BROKEN, exc=failed)
            return
        error: AuthenticationError
        if isinstance(failed, AuthenticationError):
            error = failed
        else:
            code = getattr(failed, "errno", None)
            told = failed.args[0] if failed.args and isinstance(failed.args[0], str) else ""
            cls = _REFUSALS.get(code, SaslAuthenticationError) if isinstance(code, int) else None
            error = (cls or SaslAuthenticationError)(  # the broker's words
                f"re-authenticating the connection to {where} with {self._sasl_mechanism} "
                f"(KIP-368) failed: {told or repr(failed)}"
            )
        self._sessions.reauthentication_failures += 1
        self._sessions.last_error = error
        log.warning(
            "re-authenticating the connection to %s failed, closing it (the next request "
            "connects and authenticates anew): %s",
            where,
            error,
        )
        self.close(reason=CloseReason.AUTH_FAILURE, exc=failed)


class OAuthBearerExchange:
    """The client side of one OAUTHBEARER exchange, in the shape of aiokafka's authenticators
    (``step(challenge)`` -> ``(bytes, expect_answer)`` or None when done).

    Unlike aiokafka's, it answers the server's error challenge (a refused token: RFC 7628
    section 3.2.2, Kafka sends ``{"status":"invalid_token"}`` with error code 0) with the
    ``\x01`` the RFC asks for, so that the broker fails the SaslAuthenticate with its reason;
    aiokafka's stops there and takes itself for authenticated, and the broker then refuses the
    next request with ILLEGAL_SASL_STATE."""

    def __init__(self, provider: Any) -> None:
        self._provider = provider
        self._sent = False

    async def step(self, challenge: bytes | None) -> tuple[bytes, bool] | None:
        if not self._sent:
            self._sent = True
            token = await self._provider.token()
            extensions = getattr(self._provider, "extensions", None)
            found = extensions() if callable(extensions) else {}
            return client_first_message(token, found or {}), True
        if challenge:
            log.debug("OAUTHBEARER: the broker refused the token: %r", challenge[:200])
            return ERROR_ACK, True
        return None


class ReauthClient(AIOKafkaClient):  # type: ignore[misc]  # aiokafka is untyped
    """aiokafka's client whose connections are :class:`ReauthConnection` s.

    Only how a connection is opened differs: ``_get_conn`` for the brokers, ``bootstrap`` for
    the first metadata (so that a refused OAUTHBEARER token is seen there too)."""

    def __init__(self, *, sessions: SaslSessions, **options: Any) -> None:
        super().__init__(**options)
        self.sasl_sessions = sessions
        self._reauth_rng = random.Random()

    def _connection(self, host: str, port: int, **extra: Any) -> ReauthConnection:
        return ReauthConnection(
            host,
            port,
            sessions=self.sasl_sessions,
            rng=self._reauth_rng,
            client_id=self._client_id,
            request_timeout_ms=self._request_timeout_ms,
            ssl_context=self._ssl_context,
            security_protocol=self._security_protocol,
            max_idle_ms=self._connections_max_idle_ms,
            sasl_mechanism=self._sasl_mechanism,
            sasl_plain_username=self._sasl_plain_username,
            sasl_plain_password=self._sasl_plain_password,
            sasl_kerberos_service_name=self._sasl_kerberos_service_name,
            sasl_kerberos_domain_name=self._sasl_kerberos_domain_name,
            sasl_oauth_token_provider=self._sasl_oauth_token_provider,
            **extra,
        )

    async def bootstrap(self) -> None:
        """The first cluster metadata, from the first bootstrap server that answers (as
        aiokafka's, over a :class:`ReauthConnection`)."""
        from aiokafka.errors import KafkaConnectionError
        from aiokafka.protocol.metadata import MetadataRequest

        for host, port, _ in self.hosts:
            conn = self._connection(host, port)
            try:
                await conn.connect()
            except AiogroupError:
                raise
            except (OSError, TimeoutError, KafkaError) as err:
                log.error('Unable connect to "%s:%s": %s', host, port, err)
                continue
            try:
                metadata = await conn.send(MetadataRequest([]))
            except (KafkaError, TimeoutError) as err:
                log.warning('Unable to request metadata from "%s:%s": %s', host, port, err)
                conn.close()
                continue
            self.cluster.update_metadata(metadata)
            if self.cluster.brokers():
                conn.close()
            else:  # no brokers listed yet: keep this connection until there are
                self._conns[("bootstrap", ConnectionGroup.DEFAULT)] = conn
            break
        else:
            raise KafkaConnectionError(f"Unable to bootstrap from {self.hosts}")
        if getattr(self, "_sync_task", None) is None:  # the metadata refresher, as aiokafka's
            self._sync_task = asyncio.get_running_loop().create_task(self._md_synchronizer())

    async def _get_conn(
        self, node_id: Any, *, group: Any = ConnectionGroup.DEFAULT, no_hint: bool = False
    ) -> Any:
        conn_id = (node_id, group)
        conn = self._conns.get(conn_id)
        if conn is not None:
            if conn.connected():
                return conn
            del self._conns[conn_id]
        broker = self.cluster.broker_metadata(node_id)
        if broker is None:
            log.error("Unable connect to node with id %s: not in the current metadata", node_id)
            self.force_metadata_update()
            return None
        async with self._get_conn_lock:
            if conn_id in self._conns:
                return self._conns[conn_id]
            conn = self._connection(
                broker.host, broker.port, on_close=self._on_connection_closed
            )
            try:
                await conn.connect()
            except AiogroupError:  # the token source's: it reaches the caller as it is
                raise
            except (OSError, TimeoutError, KafkaError) as err:
                log.error("Unable connect to node with id %s: %s", node_id, err)
                self.force_metadata_update()
                return None
            self._conns[conn_id] = conn
            return conn
