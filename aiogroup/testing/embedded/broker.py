"""EmbeddedBroker: a Kafka-faithful, in-process, single-node broker for tests and demos.

It speaks the Kafka wire protocol on 127.0.0.1 (kafka-python 3's schema classes decode and
encode every message), runs Apache Kafka's classic group coordinator
(:mod:`aiogroup.testing.embedded.coordinator`, sans-I/O, driven here by the event loop's monotonic
clock), keeps an in-memory log (:mod:`aiogroup.testing.embedded.log`) for Produce/Fetch/ListOffsets
and
offers deterministic fault injection (:mod:`aiogroup.testing.embedded.faults`).

In-process::

    async with EmbeddedBroker(topics={"t": 3}) as broker:
        consumer = AIOKafkaConsumer("t", bootstrap_servers=broker.bootstrap, group_id="g")

From blocking code (threads, real clients), :class:`ThreadedBroker` runs one on its own loop::

    with ThreadedBroker() as broker:
        confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, ...})

As a process: ``python -m aiogroup.testing.embedded.broker --port 9092``.

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
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from aiogroup.errors import ConfigurationError, RemoteProtocolError, TruncatedError
from aiogroup.lazy import lazy_attributes
from aiogroup.testing import wire
from aiogroup.testing.embedded import auth
from aiogroup.testing.embedded.coordinator import (
    CoordinatorConfig,
    ErrorCode,
    GroupCoordinator,
    GroupView,
    HeartbeatRequestData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchRequestData,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.faults import GROUP_APIS, Faults
from aiogroup.testing.embedded.log import CorruptBatchError, Log
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

T = TypeVar("T")
Values = dict[str, Any]

_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _valid_topic_name(name: str | None) -> bool:
    return (
        bool(name)
        and name not in (".", "..")
        and len(name or "") <= 249
        and set(name or "") <= _LEGAL_TOPIC_CHARS
    )


@dataclass(eq=False)
class _Connection:
    conn_id: int
    peer: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    client_id: str = ""
    member_ids: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    #: The listener this connection came in on (None: the PLAINTEXT one) and its SASL user.
    listener: Listener | None = None
    principal: str | None = None
    last_io: float = 0.0
    idle_timer: asyncio.TimerHandle | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class _Never:
    """A handler's result for a request Kafka never answers (the connection stays muted)."""


_NEVER = _Never()


class EmbeddedBroker:
    """A single-node Kafka broker on the loopback interface (node id ``node_id``).

    ``port`` 0 picks a free port at the first start and keeps it across :meth:`restart`.
    ``topics`` maps names to partition counts created at construction. Unknown topics asked for
    in Metadata are created with ``num_partitions`` when ``auto_create_topics`` (Kafka's
    ``auto.create.topics.enable``) and the request allows it. ``connections_max_idle_ms`` is
    Kafka's ``connections.max.idle.ms``.

    ``listeners`` adds TLS and SASL listeners beside the PLAINTEXT one (see the module doc);
    ``sasl_mechanisms`` are those SASL listeners enable (Kafka's ``sasl.enabled.mechanisms``).
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
    ) -> None:
        if num_partitions < 1:
            raise ConfigurationError("num_partitions must be >= 1")
        if connections_max_idle_ms <= 0:
            raise ConfigurationError("connections_max_idle_ms must be > 0")
        self.connections_max_idle_ms = connections_max_idle_ms
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
        self.api_versions = wire.versions_for(self.coordinator.config.flavour)
        self.faults = Faults(_cutter=self._cut, _group_view=self.coordinator.group_state)
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connections: dict[int, _Connection] = {}
        self._conn_ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self._data_event = asyncio.Event()
        self._group_event = asyncio.Event()
        self._producer_ids = itertools.count(1000)
        self._parked = 0
        self._started_once = False
        self._handlers: dict[
            int, Callable[[_Connection, wire.Request], Awaitable[Values | _Never | None]]
        ]
        self._handlers = {
            0: self._produce,
            1: self._fetch,
            2: self._list_offsets,
            3: self._metadata,
            8: self._offset_commit,
            9: self._offset_fetch,
            10: self._find_coordinator,
            11: self._join_group,
            12: self._heartbeat,
            13: self._leave_group,
            14: self._sync_group,
            15: self._describe_groups,
            16: self._list_groups,
            17: self._sasl_when_authenticated,
            18: self._api_versions,
            19: self._create_topics,
            20: self._delete_topics,
            22: self._init_producer_id,
            36: self._sasl_when_authenticated,
            37: self._create_partitions,
            42: self._delete_groups,
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
        self._data_event = asyncio.Event()
        self._group_event = asyncio.Event()
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, limit=2**16
        )
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
        self._rearm()
        return self

    async def stop(self) -> None:
        """Stop listening and close every connection; topics, groups and offsets are kept."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        servers, self._listener_servers = self._listener_servers, []
        for extra in servers:
            extra.close()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
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
        if not _valid_topic_name(name):
            raise ConfigurationError(f"invalid topic name {name!r}")
        self.log.create_topic(name, num_partitions)

    def group(self, group_id: str) -> GroupView | None:
        return self.coordinator.group_state(group_id)

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
        return self._parked

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
        conn = _Connection(next(self._conn_ids), peer, reader, writer, listener=listener)
        conn.task = asyncio.current_task()
        self._connections[conn.conn_id] = conn
        self._touch(conn)
        try:
            if listener is not None and listener.sasl:
                enabled = self._security[listener.name].mechanisms
                conn.principal = await auth.authenticate(self, conn, enabled)
                if conn.principal is None:
                    return
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

    def _close(self, conn: _Connection) -> None:
        transport = conn.writer.transport
        if not transport.is_closing():
            transport.abort()
        if conn.idle_timer is not None:
            conn.idle_timer.cancel()
            conn.idle_timer = None
        conn.closed.set()

    def _touch(self, conn: _Connection) -> None:
        """Note I/O on ``conn``: it is closed once idle for ``connections_max_idle_ms``."""
        loop = self._loop or asyncio.get_running_loop()
        conn.last_io = loop.time()
        if conn.idle_timer is None and not conn.closed.is_set():
            conn.idle_timer = loop.call_at(
                conn.last_io + self.connections_max_idle_ms / 1000, self._idle_check, conn
            )

    def _idle_check(self, conn: _Connection) -> None:
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

    def _refuse(self, conn: _Connection, why: str) -> None:
        logger.warning("closing connection %s from %s: %s", conn.conn_id, conn.peer, why)
        self.faults.record("closed", client_id=conn.client_id or None, detail=why[:300])

    async def _read_loop(self, conn: _Connection) -> None:
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
                    # KIP-511: answer an unknown ApiVersions version with v0 and our versions.
                    await self._send(
                        conn,
                        exc.api_key,
                        0,
                        exc.correlation_id,
                        self._api_versions_values(ErrorCode.UNSUPPORTED_VERSION),
                    )
                    continue
                self._refuse(conn, str(exc))
                return
            except RemoteProtocolError as exc:
                self._refuse(conn, f"malformed request: {exc}")
                return
            if request.client_id:
                conn.client_id = request.client_id
            self._note_member(conn, request.body)
            await self._dispatch(conn, request)

    def _note_member(self, conn: _Connection, body: Any) -> None:
        member_id = getattr(body, "member_id", None)
        if isinstance(member_id, str) and member_id:
            conn.member_ids.add(member_id)

    async def _send(
        self,
        conn: _Connection,
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

    async def _dispatch(self, conn: _Connection, request: wire.Request) -> None:
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "conn %s %s: %s v%d %r",
                conn.conn_id,
                conn.client_id,
                request.api_name,
                request.api_version,
                request.body,
            )
        rule = self.faults.take(request.api_key, conn.client_id, frozenset(conn.member_ids))
        values: Values | _Never | None
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
        if isinstance(values, _Never):
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

    # --- coordinator plumbing ---------------------------------------------------------------

    def _now(self) -> float:
        loop = self._loop or asyncio.get_running_loop()
        return loop.time()

    def _rearm(self) -> None:
        """(Re)arm the single coordinator timer and wake group watchers."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._server is not None and self._loop is not None:
            deadline = self.coordinator.next_deadline()
            if deadline is not None:
                self._timer = self._loop.call_at(deadline, self._on_timer)
        self._changed()

    def _on_timer(self) -> None:
        self._timer = None
        self.coordinator.on_timer(self._now())
        self._rearm()

    async def _deferred(self, call: Callable[[Callable[[T], None]], None]) -> T:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()

        def respond(answer: T) -> None:
            if not fut.done():
                fut.set_result(answer)

        try:
            call(respond)
        finally:
            self._rearm()
        return await fut

    # --- group APIs -------------------------------------------------------------------------

    async def _join_group(self, conn: _Connection, req: wire.Request) -> Values | _Never:
        b = req.body
        v = req.api_version
        data = JoinGroupRequestData(
            group_id=b.group_id,
            member_id=b.member_id or "",
            protocol_type=b.protocol_type,
            protocols=[(p.name, bytes(p.metadata or b"")) for p in (b.protocols or [])],
            session_timeout_ms=b.session_timeout_ms,
            rebalance_timeout_ms=b.rebalance_timeout_ms if v >= 1 else None,
            group_instance_id=b.group_instance_id if v >= 5 else None,
            client_id=conn.client_id,
            client_host=conn.peer,
            api_version=v,
            reason=b.reason if v >= 8 else None,
        )
        now = self._now()
        resp: JoinGroupResponseData | None = await self._deferred(
            lambda respond: self.coordinator.join_group(data, now, respond=respond)
        )
        if resp is None:
            return _NEVER
        return {
            "error_code": resp.error_code,
            "generation_id": resp.generation_id,
            "protocol_type": resp.protocol_type,
            "protocol_name": resp.protocol_name if (resp.protocol_name or v >= 7) else "",
            "leader": resp.leader,
            "skip_assignment": resp.skip_assignment,
            "member_id": resp.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in resp.members
            ],
        }

    async def _sync_group(self, conn: _Connection, req: wire.Request) -> Values | _Never:
        b = req.body
        v = req.api_version
        if v >= 5 and (b.protocol_type is None or b.protocol_name is None):
            # KafkaApis: from v5 both must be present (areMandatoryProtocolTypeAndNamePresent).
            return {"error_code": ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "assignment": b""}
        data = SyncGroupRequestData(
            group_id=b.group_id,
            generation_id=b.generation_id,
            member_id=b.member_id,
            assignments=[(a.member_id, bytes(a.assignment or b"")) for a in (b.assignments or [])],
            group_instance_id=b.group_instance_id if v >= 3 else None,
            protocol_type=b.protocol_type if v >= 5 else None,
            protocol_name=b.protocol_name if v >= 5 else None,
            api_version=v,
        )
        now = self._now()
        resp: SyncGroupResponseData | None = await self._deferred(
            lambda respond: self.coordinator.sync_group(data, now, respond=respond)
        )
        if resp is None:
            return _NEVER
        return {
            "error_code": resp.error_code,
            "protocol_type": resp.protocol_type,
            "protocol_name": resp.protocol_name,
            "assignment": resp.assignment,
        }

    async def _heartbeat(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        data = HeartbeatRequestData(
            group_id=b.group_id,
            generation_id=b.generation_id,
            member_id=b.member_id,
            group_instance_id=b.group_instance_id if req.api_version >= 3 else None,
        )
        try:
            resp = self.coordinator.heartbeat(data, self._now())
        finally:
            self._rearm()
        return {"error_code": resp.error_code}

    async def _leave_group(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        if req.api_version <= 2:
            members = [MemberIdentity(member_id=b.member_id)]
        else:
            members = [
                MemberIdentity(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    reason=m.reason if req.api_version >= 5 else None,
                )
                for m in (b.members or [])
            ]
        try:
            resp = self.coordinator.leave_group(
                LeaveGroupRequestData(group_id=b.group_id, members=members), self._now()
            )
        finally:
            self._rearm()
        error_code = resp.error_code
        if req.api_version <= 2 and error_code == ErrorCode.NONE and resp.members:
            error_code = resp.members[0].error_code
        return {
            "error_code": error_code,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": m.error_code,
                }
                for m in resp.members
            ],
        }

    async def _offset_commit(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        partitions = [
            OffsetCommitPartition(
                topic=t.name,
                partition=p.partition_index,
                committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch if req.api_version >= 6 else -1,
                committed_metadata=p.committed_metadata,
            )
            for t in (b.topics or [])
            for p in (t.partitions or [])
        ]
        # KafkaApis answers partitions it does not know UNKNOWN_TOPIC_OR_PARTITION itself; the
        # coordinator sees only the others, and not at all when none is left (so no group is
        # created by a commit that stores nothing).
        known = [p for p in partitions if self.log.partition(p.topic, p.partition) is not None]
        results: dict[tuple[str, int], int] = {
            (p.topic, p.partition): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for p in partitions
            if self.log.partition(p.topic, p.partition) is None
        }
        if known:
            data = OffsetCommitRequestData(
                group_id=b.group_id,
                partitions=known,
                generation_id=b.generation_id_or_member_epoch,
                member_id=b.member_id or "",
                group_instance_id=b.group_instance_id if req.api_version >= 7 else None,
            )
            try:
                resp = self.coordinator.commit_offsets(data, self._now())
            finally:
                self._rearm()
            for topic, partition, error_code in resp.partitions:
                results[(topic, partition)] = error_code
        topics: dict[str, list[Values]] = {}
        for p in partitions:
            topic, partition = p.topic, p.partition
            error_code = results[(topic, partition)]
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "error_code": error_code}
            )
        return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}

    def _fetch_group_offsets(
        self, group_id: str, topics: list[Any] | None, require_stable: bool
    ) -> tuple[int, list[Values]]:
        wanted = (
            None
            if topics is None
            else [(t.name, int(p)) for t in topics for p in (t.partition_indexes or [])]
        )
        resp = self.coordinator.fetch_offsets(
            OffsetFetchRequestData(
                group_id=group_id, partitions=wanted, require_stable=require_stable
            )
        )
        grouped: dict[str, list[Values]] = {}
        for p in resp.partitions:
            grouped.setdefault(p.topic, []).append(
                {
                    "partition_index": p.partition,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": p.error_code,
                }
            )
        return resp.error_code, [{"name": n, "partitions": ps} for n, ps in grouped.items()]

    async def _offset_fetch(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        stable = bool(b.require_stable) if req.api_version >= 7 else False
        if req.api_version >= 8:
            groups = []
            for g in b.groups or []:
                error_code, topics = self._fetch_group_offsets(g.group_id, g.topics, stable)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": error_code})
            return {"groups": groups}
        error_code, topics = self._fetch_group_offsets(b.group_id, b.topics, stable)
        if req.api_version == 1 and error_code != ErrorCode.NONE:
            # v1 has no top-level error: Kafka reports it on every partition.
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = error_code
        return {"topics": topics, "error_code": error_code}

    async def _describe_groups(self, conn: _Connection, req: wire.Request) -> Values:
        include = bool(req.body.include_authorized_operations) if req.api_version >= 3 else False
        described = self.coordinator.describe_groups(
            list(req.body.groups or []),
            api_version=req.api_version,
            include_authorized_operations=include,
        )
        return {
            "groups": [
                {
                    "error_code": g.error_code,
                    "group_id": g.group_id,
                    "group_state": g.group_state,
                    "protocol_type": g.protocol_type,
                    "protocol_data": g.protocol_data,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.member_metadata,
                            "member_assignment": m.member_assignment,
                        }
                        for m in g.members
                    ],
                    "authorized_operations": _bits(g.authorized_operations),
                }
                for g in described
            ]
        }

    async def _list_groups(self, conn: _Connection, req: wire.Request) -> Values:
        states = list(req.body.states_filter or []) if req.api_version >= 4 else []
        listed = self.coordinator.list_groups(states_filter=states or None)
        return {
            "error_code": ErrorCode.NONE,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.group_state,
                }
                for g in listed
            ],
        }

    async def _delete_groups(self, conn: _Connection, req: wire.Request) -> Values:
        try:
            results = self.coordinator.delete_groups(list(req.body.groups_names or []), self._now())
        finally:
            self._rearm()
        return {
            "throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": code} for g, code in results],
        }

    def _advertised_port(self, conn: _Connection) -> int:
        """The port of the listener a request came in on (Kafka answers with that endpoint)."""
        return conn.listener.port if conn.listener is not None else self.port

    async def _sasl_when_authenticated(self, conn: _Connection, req: wire.Request) -> Values:
        return auth.already_authenticated(req)

    async def _find_coordinator(self, conn: _Connection, req: wire.Request) -> Values:
        me = {"node_id": self.node_id, "host": self.host, "port": self._advertised_port(conn)}
        if req.api_version >= 4:
            return {
                "coordinators": [
                    {"key": key, **me, "error_code": ErrorCode.NONE, "error_message": None}
                    for key in (req.body.coordinator_keys or [])
                ]
            }
        return {"error_code": ErrorCode.NONE, "error_message": None, **me}

    # --- cluster and topic APIs -------------------------------------------------------------

    def _api_versions_values(self, error_code: int = ErrorCode.NONE) -> Values:
        return {
            "error_code": error_code,
            "api_keys": [
                {"api_key": key, "min_version": lo, "max_version": hi}
                for key, (lo, hi) in sorted(self.api_versions.items())
            ],
            "throttle_time_ms": 0,
        }

    async def _api_versions(self, conn: _Connection, req: wire.Request) -> Values:
        return self._api_versions_values()

    def _topic_metadata(self, name: str, error_code: int = ErrorCode.NONE) -> Values:
        topic = self.log.topics.get(name)
        if topic is None:
            return {
                "error_code": error_code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "name": name,
                "topic_id": None,
                "is_internal": False,
                "partitions": [],
            }
        return {
            "error_code": ErrorCode.NONE,
            "name": name,
            "topic_id": topic.topic_id,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": ErrorCode.NONE,
                    "partition_index": i,
                    "leader_id": self.node_id,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": [self.node_id],
                    "isr_nodes": [self.node_id],
                    "offline_replicas": [],
                }
                for i, p in enumerate(topic.partitions)
            ],
        }

    async def _metadata(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        v = req.api_version
        requested = b.topics
        if requested is None or (v == 0 and not requested):
            names = sorted(self.log.topics)
        else:
            names = [t.name for t in requested]
        allow_auto = bool(b.allow_auto_topic_creation) if v >= 4 else True
        topics = []
        for name in names:
            if name not in self.log.topics:
                if not _valid_topic_name(name):
                    topics.append(
                        self._topic_metadata(name or "", ErrorCode.INVALID_TOPIC_EXCEPTION)
                    )
                    continue
                if self.auto_create_topics and allow_auto:
                    self.log.create_topic(name, self.num_partitions)
            topics.append(self._topic_metadata(name))
        return {
            "brokers": [
                {
                    "node_id": self.node_id,
                    "host": self.host,
                    "port": self._advertised_port(conn),
                    "rack": None,
                }
            ],
            "cluster_id": self.cluster_id,
            "controller_id": self.node_id,
            "topics": topics,
            "error_code": ErrorCode.NONE,
        }

    async def _create_topics(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        results = []
        for t in b.topics or []:
            count = t.num_partitions if t.num_partitions != -1 else self.num_partitions
            message: str | None = None
            if not _valid_topic_name(t.name):
                error_code, message = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"invalid topic name {t.name!r}",
                )
            elif t.name in self.log.topics:
                error_code, message = (
                    ErrorCode.TOPIC_ALREADY_EXISTS,
                    f"topic {t.name!r} already exists",
                )
            elif t.assignments:
                count = len(t.assignments)
                error_code = ErrorCode.NONE
            elif count < 1:
                error_code, message = (
                    ErrorCode.INVALID_PARTITIONS,
                    "number of partitions must be >= 1",
                )
            else:
                error_code = ErrorCode.NONE
            topic_id = None
            if error_code == ErrorCode.NONE and not b.validate_only:
                topic_id = self.log.create_topic(t.name, count).topic_id
            results.append(
                {
                    "name": t.name,
                    "topic_id": topic_id,
                    "error_code": error_code,
                    "error_message": message,
                    "num_partitions": count if error_code == ErrorCode.NONE else -1,
                    "replication_factor": 1 if error_code == ErrorCode.NONE else -1,
                    "configs": [],
                }
            )
        return {"topics": results}

    async def _delete_topics(self, conn: _Connection, req: wire.Request) -> Values:
        responses = []
        for name in req.body.topic_names or []:
            topic = self.log.topics.get(name)
            found = self.log.delete_topic(name)
            if topic is not None:
                # handleDeletedPartitions: the groups' offsets for the topic go with it.
                try:
                    self.coordinator.delete_partitions(
                        [(name, i) for i in range(len(topic.partitions))], self._now()
                    )
                finally:
                    self._rearm()
            responses.append(
                {
                    "name": name,
                    "error_code": ErrorCode.NONE if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                }
            )
        return {"responses": responses}

    async def _create_partitions(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        results = []
        for t in b.topics or []:
            topic = self.log.topics.get(t.name)
            message: str | None = None
            if topic is None:
                error_code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {t.name!r}"
            elif t.count <= len(topic.partitions):
                error_code = ErrorCode.INVALID_PARTITIONS
                message = f"topic has {len(topic.partitions)} partitions; asked for {t.count}"
            else:
                error_code = ErrorCode.NONE
                if not b.validate_only:
                    self.log.add_partitions(t.name, t.count)
            results.append({"name": t.name, "error_code": error_code, "error_message": message})
        return {"results": results}

    async def _init_producer_id(self, conn: _Connection, req: wire.Request) -> Values:
        return {
            "error_code": ErrorCode.NONE,
            "producer_id": next(self._producer_ids),
            "producer_epoch": 0,
        }

    # --- data plane -------------------------------------------------------------------------

    async def _produce(self, conn: _Connection, req: wire.Request) -> Values | None:
        b = req.body
        appended = False
        responses = []
        for t in b.topic_data or []:
            parts = []
            for p in t.partition_data or []:
                log = self.log.partition(t.name, p.index)
                base, error_code, message = -1, ErrorCode.NONE, None
                if log is None:
                    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.records is None:
                    error_code, message = ErrorCode.CORRUPT_MESSAGE, "null records"
                else:
                    try:
                        base = log.append(bytes(p.records), verify_crc=self.verify_crc)
                        appended = True
                    except (CorruptBatchError, TruncatedError) as exc:
                        error_code, message = ErrorCode.CORRUPT_MESSAGE, str(exc)[:200]
                parts.append(
                    {
                        "index": p.index,
                        "error_code": error_code,
                        "base_offset": base,
                        "log_append_time_ms": -1,
                        "log_start_offset": log.log_start_offset if log is not None else -1,
                        "record_errors": [],
                        "error_message": message,
                    }
                )
            responses.append({"name": t.name, "partition_responses": parts})
        if appended:
            event, self._data_event = self._data_event, asyncio.Event()
            event.set()
            self._changed()
        if b.acks == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _fetch_once(self, b: Any) -> tuple[list[Values], int, bool]:
        remaining = b.max_bytes if b.max_bytes and b.max_bytes > 0 else 2**31 - 1
        total = 0
        error = False
        topics = []
        for t in b.topics or []:
            parts = []
            for p in t.partitions or []:
                log = self.log.partition(t.topic, p.partition)
                entry: Values = {
                    "partition_index": p.partition,
                    "error_code": ErrorCode.NONE,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                if log is None:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    error = True
                else:
                    entry.update(
                        high_watermark=log.high_watermark,
                        last_stable_offset=log.high_watermark,
                        log_start_offset=log.log_start_offset,
                    )
                    if not log.log_start_offset <= p.fetch_offset <= log.high_watermark:
                        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                        error = True
                    elif remaining > 0:
                        limit = min(p.partition_max_bytes, remaining)
                        data = log.read(p.fetch_offset, max(limit, 1))
                        entry["records"] = data
                        total += len(data)
                        remaining -= len(data)
                parts.append(entry)
            topics.append({"topic": t.topic, "partitions": parts})
        return topics, total, error

    async def _fetch(self, conn: _Connection, req: wire.Request) -> Values:
        b = req.body
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, b.max_wait_ms) / 1000
        while True:
            event = self._data_event
            topics, total, error = self._fetch_once(b)
            wait = deadline - loop.time()
            if error or total >= max(1, b.min_bytes) or wait <= 0:
                break
            # Long poll (Kafka's fetch purgatory): woken by the next append, or the deadline.
            self._parked += 1
            self._changed()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), wait)
            finally:
                self._parked -= 1
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "session_id": 0,
            "responses": topics,
        }

    async def _list_offsets(self, conn: _Connection, req: wire.Request) -> Values:
        topics = []
        for t in req.body.topics or []:
            parts = []
            for p in t.partitions or []:
                log = self.log.partition(t.name, p.partition_index)
                if log is None:
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        }
                    )
                    continue
                offset, timestamp = log.offset_for_timestamp(p.timestamp)
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.NONE,
                        "timestamp": timestamp,
                        "offset": offset,
                        "leader_epoch": log.leader_epoch,
                    }
                )
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}


def _bits(bitfield: int) -> set[int]:
    """An int32 bitfield as the set of its bit positions (kafka-python's ``bitfield`` type)."""
    return {i for i in range(32) if (bitfield & 0xFFFFFFFF) >> i & 1}


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
