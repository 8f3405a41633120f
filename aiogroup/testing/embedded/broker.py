"""EmbeddedBroker: a Kafka-faithful, in-process, single-node broker for tests and demos.

It speaks the Kafka wire protocol on 127.0.0.1 (kafka-python 3's schema classes decode and
encode every message), runs Apache Kafka's classic group coordinator
(:mod:`aiogroup.testing.embedded.coordinator`, sans-I/O, driven by the event loop's monotonic
clock), keeps an in-memory log (:mod:`aiogroup.testing.embedded.log`) for
Produce/Fetch/ListOffsets and offers deterministic fault injection
(:mod:`aiogroup.testing.embedded.faults`).

In-process::

    async with EmbeddedBroker(topics={"t": 3}) as broker:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g")

From blocking code (threads, real clients),
:class:`~aiogroup.testing.embedded.threaded.ThreadedBroker` runs one on its own loop; raw
requests: :class:`~aiogroup.testing.embedded.client.RawClient`; as a process:
``python -m aiogroup.testing.embedded --port 9092`` (:mod:`aiogroup.testing.embedded.cli`).

This module is the server: listeners, connections, framing, fault injection, dispatch. The
requests are answered by one handler class per API family, which it composes:
:mod:`~aiogroup.testing.embedded.group_apis` (the coordinator's APIs, driven through
:mod:`~aiogroup.testing.embedded.driver`), :mod:`~aiogroup.testing.embedded.data_apis`
(Produce, Fetch, ListOffsets, Metadata) and :mod:`~aiogroup.testing.embedded.admin_apis`
(ApiVersions, topics, InitProducerId); :mod:`~aiogroup.testing.embedded.connection` is what
they share.

TLS and SASL: ``listeners=[Listener("SSL"), Listener("SASL_PLAINTEXT"), Listener("SASL_SSL")]``
adds listeners beside the PLAINTEXT one (ports in ``broker.ports``); TLS listeners use
``ssl_context`` (a server context, e.g. :meth:`aiogroup.testing.tls.Pki.server_context`), SASL
listeners authenticate against ``sasl_credentials`` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) before
serving any other request, as Kafka's SaslServerAuthenticator does
(:mod:`aiogroup.testing.embedded.auth`).

Like Kafka, each connection is served one request at a time, in order (Kafka mutes a channel
while a request is in flight), so a held JoinGroup or a long-polling Fetch holds that connection
only. A request Kafka never answers (a JoinGroup or SyncGroup superseded by the same member's
next one, the SyncGroup of a member that left) leaves its connection muted until it closes.
Connections idle for ``connections_max_idle_ms`` (``connections.max.idle.ms``, 10 minutes) are
closed, in flight or not, as Kafka's selector does. Malformed input closes the offending
connection, is recorded in ``broker.faults.events`` and never disturbs other connections.

The coordinator's ``flavour`` (``CoordinatorConfig.flavour``) also sets the API versions served:
``kafka2`` serves Kafka 2.3's (and closes the connection on anything newer, as 2.3 does).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import logging
import ssl
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from aiogroup.errors import ConfigurationError, RemoteProtocolError, TruncatedError
from aiogroup.lazy import lazy_attributes
from aiogroup.testing import wire
from aiogroup.testing.embedded import auth
from aiogroup.testing.embedded.admin_apis import AdminApis, api_versions_answer
from aiogroup.testing.embedded.connection import Connection, Handler, Never, Values
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupView
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.data_apis import DataApis
from aiogroup.testing.embedded.driver import CoordinatorDriver
from aiogroup.testing.embedded.faults import GROUP_APIS, Faults
from aiogroup.testing.embedded.group_apis import GroupApis
from aiogroup.testing.embedded.log import Log, valid_topic_name
from aiogroup.testing.embedded.messages import ErrorCode, GroupView
from aiogroup.testing.embedded.rules import FLAVOURS, CoordinatorConfig
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import MECHANISMS, SaslCredentials

if TYPE_CHECKING:
    from aiogroup.testing.embedded.cli import main
    from aiogroup.testing.embedded.client import RawClient
    from aiogroup.testing.embedded.threaded import ThreadedBroker

__all__ = ["EmbeddedBroker", "RawClient", "ThreadedBroker", "main"]

# ThreadedBroker, RawClient and the command line have modules of their own (threaded.py,
# client.py, cli.py); they stay importable from here, where they used to live.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "ThreadedBroker": "aiogroup.testing.embedded.threaded",
        "RawClient": "aiogroup.testing.embedded.client",
        "main": "aiogroup.testing.embedded.cli",
    },
)

logger = logging.getLogger("aiogroup.testing.embedded.broker")


class EmbeddedBroker:
    """A single-node Kafka broker on the loopback interface (node id ``node_id``).

    ``port`` 0 picks a free port at the first start and keeps it across :meth:`restart`.
    ``topics`` maps names to partition counts created at construction. Unknown topics asked for
    in Metadata are created with ``num_partitions`` when ``auto_create_topics`` (Kafka's
    ``auto.create.topics.enable``) and the request allows it. ``connections_max_idle_ms`` is
    Kafka's ``connections.max.idle.ms``.

    ``listeners`` adds TLS and SASL listeners beside the PLAINTEXT one (see the module doc);
    ``sasl_mechanisms`` are those SASL listeners enable (Kafka's ``sasl.enabled.mechanisms``;
    ``OAUTHBEARER`` takes unsecured test tokens). ``connections_max_reauth_ms``
    (``connections.max.reauth.ms``, KIP-368) limits SASL sessions: clients re-authenticate or
    are closed at their next request once it is over.
    ``ssl_context`` and ``sasl_mechanisms`` may also map listener names to their own setting
    (as Kafka's ``listener.name.<name>.`` prefix does), e.g. a listener requiring client
    certificates beside one that does not.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        node_id: int = 1,
        topics: Mapping[str, int] | None = None,
        auto_create_topics: bool = True,
        num_partitions: int = 1,
        coordinator_config: CoordinatorConfig | None = None,
        verify_crc: bool = True,
        max_frame_bytes: int = wire.MAX_FRAME_BYTES,
        cluster_id: str = "aiogroup-embedded",
        listeners: Sequence[Listener] = (),
        ssl_context: ssl.SSLContext | Mapping[str, ssl.SSLContext] | None = None,
        sasl_credentials: SaslCredentials | None = None,
        sasl_mechanisms: Sequence[str] | Mapping[str, Sequence[str]] = MECHANISMS,
        connections_max_idle_ms: int = 600_000,
        connections_max_reauth_ms: int | None = None,
    ) -> None:
        if num_partitions < 1:
            raise ConfigurationError("num_partitions must be >= 1")
        if connections_max_idle_ms <= 0:
            raise ConfigurationError("connections_max_idle_ms must be > 0")
        if connections_max_reauth_ms is not None and connections_max_reauth_ms <= 0:
            raise ConfigurationError("connections_max_reauth_ms must be > 0 (None: off)")
        self.connections_max_idle_ms = connections_max_idle_ms
        #: KIP-368 (``connections.max.reauth.ms``): SASL sessions last this long at most (an
        #: OAUTHBEARER one no longer than its token); None: no limit, no re-authentication.
        self.connections_max_reauth_ms = connections_max_reauth_ms
        #: Re-authentications accepted (KIP-368).
        self.reauthentications = 0
        self._security = auth.resolve_listeners(listeners, ssl_context, sasl_mechanisms)
        self.listeners = list(listeners)
        self.sasl_credentials = sasl_credentials or SaslCredentials()
        self._listener_servers: list[asyncio.Server] = []
        self.host = host
        self.port = port
        self.node_id = node_id
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.verify_crc = verify_crc
        self.max_frame_bytes = max_frame_bytes
        self.cluster_id = cluster_id
        self.log = Log()
        for name, count in (topics or {}).items():
            self.log.create_topic(name, count)
        self.coordinator = GroupCoordinator(coordinator_config or CoordinatorConfig())
        config = self.coordinator.config
        self.api_versions = wire.versions_for(config.flavour, config.serves_consumer_protocol)
        self.faults = Faults(_cutter=self._cut, _group_view=self.coordinator.group_state)
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[int, Connection] = {}
        self._conn_ids = itertools.count(1)
        self._group_event = asyncio.Event()
        self._started_once = False
        #: Requests received, by ``(client id, API name)``, and the ``(group id, reason)`` of
        #: each JoinGroup that gave one (KIP-800): what a test checks a client sent, or never.
        self.requests: Counter[tuple[str, str]] = Counter()
        self.join_reasons: list[tuple[str, str]] = []
        # The request handlers, by API family; each reads the broker's settings as it answers.
        self._driver = CoordinatorDriver(self.coordinator, on_change=self._changed)
        self._data = DataApis(self, on_change=self._changed)
        self._group_apis = GroupApis(self, self._driver)
        self._handlers: dict[int, Handler] = {
            **self._data.handlers(),
            **self._group_apis.handlers(),
            **AdminApis(self, self._driver).handlers(),
        }

    # --- lifecycle --------------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def ports(self) -> dict[str, int]:
        """Listener name -> port (``PLAINTEXT`` is :attr:`port`)."""
        return {"PLAINTEXT": self.port, **{x.name: x.port for x in self.listeners}}

    @property
    def running(self) -> bool:
        return self._server is not None

    async def start(self) -> EmbeddedBroker:
        if self._server is not None:
            return self
        self._loop = asyncio.get_running_loop()
        self._data.reset()
        self._group_event = asyncio.Event()
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, limit=2**16
        )
        self._driver.start(self._loop)
        sock = self._server.sockets[0]
        self.port = int(sock.getsockname()[1])
        for listener in self.listeners:
            server = await asyncio.start_server(
                functools.partial(self._serve, listener=listener),
                self.host,
                listener.port,
                reuse_address=True,
                limit=2**16,
                ssl=self._security[listener.name].ssl_context,
                ssl_handshake_timeout=10.0 if listener.tls else None,
            )
            listener.port = int(server.sockets[0].getsockname()[1])
            self._listener_servers.append(server)
        if self._started_once:
            # A restarted coordinator reloads its groups from the offsets log (see coordinator).
            self.coordinator.failover(self._loop.time())
        self._started_once = True
        self.faults.record("start", detail=self.bootstrap)
        self._driver.rearm()
        return self

    async def stop(self) -> None:
        """Stop listening and close every connection; topics, groups and offsets are kept."""
        server, self._server = self._server, None
        if server is None:
            return
        self._driver.stop()
        server.close()
        servers, self._listener_servers = self._listener_servers, []
        for extra in servers:
            extra.close()
        conns = list(self._connections.values())
        for conn in conns:
            self._close(conn)
        tasks = [c.task for c in conns if c.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        for closing in (server, *servers):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(closing.wait_closed(), 5)
        self.faults.record("stop", detail=self.bootstrap)

    async def restart(self) -> None:
        """Stop then start on the same port (connections are cut, state is kept)."""
        self.faults.record("restart", detail=self.bootstrap)
        await self.stop()
        await self.start()

    async def __aenter__(self) -> EmbeddedBroker:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- helpers for tests ------------------------------------------------------------------

    def create_topic(self, name: str, num_partitions: int = 1) -> None:
        if name in self.log.topics:
            raise ConfigurationError(f"topic {name!r} exists")
        if not valid_topic_name(name):
            raise ConfigurationError(f"invalid topic name {name!r}")
        self.log.create_topic(name, num_partitions)

    def group(self, group_id: str) -> GroupView | None:
        return self.coordinator.group_state(group_id)

    def consumer_group(self, group_id: str) -> ConsumerGroupView | None:
        """A KIP-848 consumer group's snapshot (None: there is no consumer group of that id)."""
        self._group_apis.sync_topics()
        return self.coordinator.consumer_group_state(group_id)

    async def wait_for_consumer_group(
        self,
        group_id: str,
        predicate: Callable[[ConsumerGroupView | None], bool],
        timeout: float = 10.0,
    ) -> ConsumerGroupView | None:
        """:meth:`wait_for_group` for a KIP-848 consumer group."""
        await self.wait_until(lambda: predicate(self.consumer_group(group_id)), timeout)
        return self.consumer_group(group_id)

    def set_group_config(
        self,
        group_id: str,
        *,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
    ) -> None:
        """A consumer group's ``consumer.session.timeout.ms`` and
        ``consumer.heartbeat.interval.ms`` (Kafka's group configs, within the broker's
        ``group.consumer.min/max.*``), taking effect at the members' next heartbeats."""
        self.coordinator.set_group_config(
            group_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
        )

    async def wait_for_group(
        self, group_id: str, predicate: Callable[[GroupView | None], bool], timeout: float = 10.0
    ) -> GroupView | None:
        """Wait until ``predicate(group view)`` holds (checked after every coordinator event);
        raises ``TimeoutError`` after ``timeout`` seconds."""
        await self.wait_until(lambda: predicate(self.group(group_id)), timeout)
        return self.group(group_id)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        """Wait until ``predicate()`` holds, re-checked whenever the broker's state changes
        (coordinator events, appends, parked fetches); ``TimeoutError`` after ``timeout``."""
        async with asyncio.timeout(timeout):
            while True:
                event = self._group_event
                if predicate():
                    return
                await event.wait()

    def _changed(self) -> None:
        event, self._group_event = self._group_event, asyncio.Event()
        event.set()

    @property
    def parked_fetches(self) -> int:
        """Fetch requests waiting for data (long poll)."""
        return self._data.parked

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def member_connections(self, member_id: str) -> int:
        """How many open connections have carried requests of ``member_id``."""
        return sum(
            1
            for c in self._connections.values()
            if member_id in c.member_ids and not c.writer.transport.is_closing()
        )

    # --- connections ------------------------------------------------------------------------

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        listener: Listener | None = None,
    ) -> None:
        peername = writer.get_extra_info("peername")
        peer = f"/{peername[0]}" if isinstance(peername, tuple) else "/127.0.0.1"
        conn = Connection(next(self._conn_ids), peer, reader, writer, listener=listener)
        conn.task = asyncio.current_task()
        self._connections[conn.conn_id] = conn
        self._touch(conn)
        try:
            if listener is not None and listener.sasl:
                enabled = self._security[listener.name].mechanisms
                channel = _SaslChannel(self, conn)
                session = await auth.authenticate_session(
                    channel, enabled, self.sasl_credentials,
                    reauth_ms=self.connections_max_reauth_ms,
                )  # fmt: skip
                if session is None:
                    return
                conn.principal = session.principal
                self._start_session(conn, session)
            await self._read_loop(conn)
        except asyncio.CancelledError:
            pass
        except (ConnectionError, OSError):
            pass
        except Exception as exc:  # a bug in a handler must not take the server down
            logger.exception("internal error on connection %s", conn.conn_id)
            self.faults.record(
                "closed", client_id=conn.client_id, detail=f"internal error: {exc!r}"[:300]
            )
        finally:
            self._connections.pop(conn.conn_id, None)
            self._close(conn)

    def _close(self, conn: Connection) -> None:
        transport = conn.writer.transport
        if not transport.is_closing():
            transport.abort()
        if conn.idle_timer is not None:
            conn.idle_timer.cancel()
            conn.idle_timer = None
        conn.closed.set()

    def _touch(self, conn: Connection) -> None:
        """Note I/O on ``conn``: it is closed once idle for ``connections_max_idle_ms``."""
        loop = self._loop or asyncio.get_running_loop()
        conn.last_io = loop.time()
        if conn.idle_timer is None and not conn.closed.is_set():
            conn.idle_timer = loop.call_at(
                conn.last_io + self.connections_max_idle_ms / 1000, self._idle_check, conn
            )

    def _idle_check(self, conn: Connection) -> None:
        conn.idle_timer = None
        if conn.closed.is_set():
            return
        loop = self._loop or asyncio.get_running_loop()
        deadline = conn.last_io + self.connections_max_idle_ms / 1000
        if loop.time() < deadline:
            conn.idle_timer = loop.call_at(deadline, self._idle_check, conn)
            return
        self.faults.record("idle", client_id=conn.client_id or None, detail=conn.peer)
        self._close(conn)
        if conn.task is not None:
            conn.task.cancel()

    def _cut(self, member_id: str | None, client_id: str | None) -> int:
        victims = [
            c
            for c in self._connections.values()
            if (member_id is not None and member_id in c.member_ids)
            or (client_id is not None and c.client_id == client_id)
        ]
        for conn in victims:
            self._close(conn)
            if conn.task is not None and conn.task is not asyncio.current_task():
                conn.task.cancel()
        self.faults.record(
            "cut", client_id=client_id, member_id=member_id, detail=f"{len(victims)} connections"
        )
        return len(victims)

    def _refuse(self, conn: Connection, why: str) -> None:
        logger.warning("closing connection %s from %s: %s", conn.conn_id, conn.peer, why)
        self.faults.record("closed", client_id=conn.client_id or None, detail=why[:300])

    async def _read_loop(self, conn: Connection) -> None:
        reader = conn.reader
        while True:
            try:
                prefix = await reader.readexactly(4)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    self._refuse(conn, f"truncated length prefix ({len(exc.partial)} bytes)")
                return
            try:
                size = wire.frame_size(prefix, self.max_frame_bytes)
            except (wire.MalformedRequestError, TruncatedError) as exc:
                self._refuse(conn, f"bad frame: {exc}")
                return
            try:
                payload = await reader.readexactly(size)
            except asyncio.IncompleteReadError as exc:
                self._refuse(conn, f"truncated request: {len(exc.partial)} of {size} bytes")
                return
            self._touch(conn)
            try:
                request = wire.decode_request(payload, self.api_versions)
            except wire.UnsupportedRequestError as exc:
                if exc.api_key == 18:
                    # KIP-511: answer an unknown ApiVersions version with v0, UNSUPPORTED_VERSION
                    # and the ApiVersions versions served; the connection stays open.
                    await self._send(
                        conn,
                        exc.api_key,
                        0,
                        exc.correlation_id,
                        self.unsupported_api_versions_answer(),
                    )
                    continue
                self._refuse(conn, str(exc))
                return
            except RemoteProtocolError as exc:
                self._refuse(conn, f"malformed request: {exc}")
                return
            if request.client_id:
                conn.client_id = request.client_id
            if conn.session_deadline is not None:
                now = asyncio.get_running_loop().time()
                if request.api_key == 17 and now - conn.reauth_started >= 1.0:
                    # KIP-368: a SaslHandshake on an authenticated connection whose session has
                    # a lifetime re-authenticates it (Kafka: not within 1 s of the last one).
                    conn.reauth_started = now
                    if not await self._reauthenticate(conn, request):
                        return
                    continue
                if now >= conn.session_deadline and request.api_key != 17:
                    self._refuse(conn, "the SASL session expired (KIP-368)")
                    return
            self._note_member(conn, request.body)
            await self._dispatch(conn, request)

    def _start_session(self, conn: Connection, session: auth.Session) -> None:
        if session.lifetime_ms > 0:
            now = asyncio.get_running_loop().time()
            conn.session_deadline = now + session.lifetime_ms / 1000

    async def _reauthenticate(self, conn: Connection, handshake: wire.Request) -> bool:
        listener = conn.listener
        assert listener is not None
        session = await auth.authenticate_session(
            _SaslChannel(self, conn), self._security[listener.name].mechanisms,
            self.sasl_credentials, reauth_ms=self.connections_max_reauth_ms,
            handshake=handshake, principal=conn.principal,
        )  # fmt: skip
        if session is None:
            return False
        self.reauthentications += 1
        self._start_session(conn, session)
        return True

    def unsupported_api_versions_answer(self) -> Values:
        """ApiVersions' answer to a version it does not serve: UNSUPPORTED_VERSION listing only
        ApiVersions' own versions (Kafka 2.4+, KIP-511), or nothing (Kafka 2.3, the ``kafka2``
        flavour): rule ``api-versions-refusal``."""
        listed = (
            {18: self.api_versions[18]}
            if FLAVOURS[self.coordinator.config.flavour].unsupported_api_versions_lists_itself
            else {}
        )
        return api_versions_answer(listed, ErrorCode.UNSUPPORTED_VERSION)

    def _note_member(self, conn: Connection, body: Any) -> None:
        member_id = getattr(body, "member_id", None)
        if isinstance(member_id, str) and member_id:
            conn.member_ids.add(member_id)

    async def _send(
        self,
        conn: Connection,
        api_key: int,
        api_version: int,
        correlation_id: int,
        values: Values,
    ) -> None:
        frame = wire.encode_response(api_key, api_version, correlation_id, values)
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "conn %s %s: answer %s v%d #%d %r",
                conn.conn_id,
                conn.client_id,
                wire.API_NAMES.get(api_key),
                api_version,
                correlation_id,
                values,
            )
        conn.writer.write(frame)
        await conn.writer.drain()
        self._touch(conn)

    async def _dispatch(self, conn: Connection, request: wire.Request) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "conn %s %s: %s v%d %r",
                conn.conn_id,
                conn.client_id,
                request.api_name,
                request.api_version,
                request.body,
            )
        self.requests[conn.client_id, request.api_name] += 1
        if request.api_key == 11 and getattr(request.body, "reason", None):
            self.join_reasons.append((request.body.group_id, request.body.reason))
        rule = self.faults.take(request.api_key, conn.client_id, frozenset(conn.member_ids))
        values: Values | Never | None
        if rule is not None and rule.action == "fail" and request.api_key in GROUP_APIS:
            values = {"error_code": rule.error_code}
            if request.api_key == 11:
                values.update(
                    generation_id=-1,
                    member_id=request.body.member_id or "",
                    leader="",
                    protocol_name="",
                )
        else:
            values = await self._handlers[request.api_key](conn, request)
            if rule is not None and rule.action == "fail" and isinstance(values, dict):
                values = _with_error(values, rule.error_code)
        if values is None:
            return  # e.g. Produce with acks=0
        if isinstance(values, Never):
            # Kafka never answers this request: the channel stays muted, nothing more is read
            # from it, until it is closed (by the client, the idle timeout or a stop).
            await conn.closed.wait()
            return
        if request.api_key == 11 and values.get("member_id"):
            conn.member_ids.add(values["member_id"])
        if rule is not None:
            if rule.action == "drop":
                return
            if rule.action == "delay":
                await asyncio.sleep(rule.seconds)  # the fault itself, not synchronisation
        await self._send(conn, request.api_key, request.api_version, request.correlation_id, values)


class _SaslChannel:
    """One connection to a SASL listener, as the authenticator sees it
    (:class:`aiogroup.testing.embedded.auth.SaslChannel`)."""

    def __init__(self, broker: EmbeddedBroker, conn: Connection) -> None:
        self._broker = broker
        self._conn = conn

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        return self._broker.api_versions

    async def read_frame(self) -> bytes:
        reader = self._conn.reader
        size = wire.frame_size(await reader.readexactly(4), self._broker.max_frame_bytes)
        return await reader.readexactly(size)

    async def write(self, data: bytes) -> None:
        self._conn.writer.write(data)
        await self._conn.writer.drain()

    async def answer(
        self, api_key: int, api_version: int, correlation_id: int, values: Values
    ) -> None:
        await self._broker._send(self._conn, api_key, api_version, correlation_id, values)

    def api_versions_answer(self, error_code: int) -> Values:
        if error_code == ErrorCode.UNSUPPORTED_VERSION:
            return self._broker.unsupported_api_versions_answer()
        return api_versions_answer(self._broker.api_versions, error_code)

    def identify(self, client_id: str) -> None:
        self._conn.client_id = client_id

    def refuse(self, why: str) -> None:
        self._broker._refuse(self._conn, why)

    async def close(self) -> None:
        self._conn.writer.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._conn.writer.wait_closed(), 5)


def _with_error(values: Values, error_code: int) -> Values:
    """A copy of a response dict with every ``error_code`` (at any depth) set to ``error_code``."""
    out: Values = {}
    for key, value in values.items():
        if key == "error_code":
            out[key] = error_code
        elif isinstance(value, list):
            out[key] = [_with_error(v, error_code) if isinstance(v, dict) else v for v in value]
        elif isinstance(value, dict):
            out[key] = _with_error(value, error_code)
        else:
            out[key] = value
    return out


if __name__ == "__main__":  # python -m aiogroup.testing.embedded.broker, the older spelling
    from aiogroup.testing.embedded.cli import main

    main()
