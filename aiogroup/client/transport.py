"""The wire side of a group member: group-coordinator requests over aiokafka's connections.

aiokafka's :class:`~aiokafka.client.AIOKafkaClient` owns connections, bootstrap, cluster
metadata, TLS and SASL, and negotiates ApiVersions on every connection. Request and response
schemas come from kafka-python 3's schema-driven messages (every version, flexible versions
included). :class:`Request` adapts one to what aiokafka's connection expects of a request
(``prepare(versions)`` picking the version, header, body and response decoding).

Broker error codes come back as data (``error_code`` fields of the result types below), for the
membership state machine to judge. Failures to reach a broker (connection lost, request timed
out, node not ready) raise :class:`~aiogroup.errors.BrokerUnreachableError`, a retriable error;
for the coordinator its subclass :class:`~aiogroup.errors.CoordinatorUnreachableError`, and the
coordinator is forgotten so the next call rediscovers it. Every call is bounded by
``request_timeout_ms``.

A connection whose TLS handshake or SASL authentication fails raises an
:class:`~aiogroup.errors.AuthenticationError` instead (:mod:`aiogroup.client.security`): at
:meth:`Transport.start` and on any later connect, never retried as if the network were down.
"""

from __future__ import annotations

import asyncio
import io
import logging
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from aiogroup.client.options import bootstrap_addresses
from aiogroup.client.reachability import Reachability
from aiogroup.client.security import diagnose, security_options
from aiogroup.errors import (
    AiogroupError,
    AuthenticationError,
    BrokerUnreachableError,
    ConfigurationError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    CoordinatorUnreachableError,
    LocalProtocolError,
    NotCoordinatorError,
    RemoteProtocolError,
    UnsupportedApiVersionError,
    error_for_code,
)
from aiogroup.protocol.types import JoinGroupMember, TopicPartition, group_by_topic

if TYPE_CHECKING:
    from aiogroup.client.reauth import SaslSessions

#: The name this record had here before it moved to :mod:`aiogroup.protocol.types`.
JoinedMember = JoinGroupMember

__all__ = [
    "API_VERSIONS",
    "COORDINATOR_ERRORS",
    "BrokerUnreachableError",
    "CommittedOffset",
    "ConsumerGroupHeartbeatResult",
    "CoordinatorUnreachableError",
    "DecodeFailed",
    "JoinGroupMember",
    "JoinGroupResult",
    "PreparedRequest",
    "Request",
    "TopicInfo",
    "Transport",
    "UnsupportedApiVersionError",
]

log = logging.getLogger(__name__)

#: The versions we speak, per API: (lowest, highest). The version used on a connection is the
#: highest both sides support (ApiVersions). OffsetFetch stops at 7 and OffsetCommit at 9: later
#: versions address topics by id (KIP-848 era), which the classic group does not need.
API_VERSIONS: dict[str, tuple[int, int]] = {
    "FindCoordinator": (0, 6),
    "JoinGroup": (0, 9),
    "SyncGroup": (0, 5),
    "Heartbeat": (0, 4),
    "LeaveGroup": (0, 5),
    "OffsetCommit": (2, 9),
    "OffsetFetch": (1, 7),
    "Metadata": (1, 12),
    # Read-only, for ``aiogroup group`` (aiogroup.inspector): Kafka 2.3 speaks 0-3.
    "DescribeGroups": (0, 5),
    # The consumer's data plane (aiogroup.consumer.wire): Fetch from v4 (isolation level,
    # aborted transactions) to v12 (v13+ name topics by id); ListOffsets v1-v7.
    "Fetch": (4, 12),
    "ListOffsets": (1, 7),
    # KIP-848 consumer groups (Kafka 4.x): seen by ``aiogroup group`` (aiogroup.inspector).
    "ConsumerGroupDescribe": (0, 1),
    # group_protocol="consumer": v1 (Kafka 4.0+), whose member id is the client's (KIP-1082).
    "ConsumerGroupHeartbeat": (1, 1),
}

#: OffsetFetch naming the member (v9 adds its id and epoch: KIP-848's coordinator refuses a
#: fetch of a member it fenced); v8 batches groups. Asked for only with a member to name.
OFFSET_FETCH_WITH_MEMBER = (1, 9)

#: What a broker without KIP-848's ConsumerGroupHeartbeat v1 is told.
NO_CONSUMER_PROTOCOL = (
    "ConsumerGroupHeartbeat (KIP-848): needs Kafka 4.0+, or a broker whose "
    "group.coordinator.rebalance.protocols includes 'consumer' ({detail}); use "
    "group_protocol='classic'"
)

#: Error codes meaning "the coordinator moved or is not ready": find it again, then retry.
COORDINATOR_ERRORS = frozenset(
    e.code
    for e in (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError)
)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup response (``members`` is empty unless we are the leader)."""

    error_code: int
    generation_id: int
    protocol_name: str | None
    leader: str
    member_id: str
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error_code: int
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """An OffsetFetch answer for one partition (``offset`` -1: nothing committed)."""

    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class OffsetCommitResult:
    """Per-partition error codes of an OffsetCommit (0 = committed)."""

    errors: dict[TopicPartition, int] = field(default_factory=dict)

    @property
    def error_code(self) -> int:
        """The first non-zero error code, in partition order (0 if all committed)."""
        for tp in sorted(self.errors):
            if self.errors[tp]:
                return self.errors[tp]
        return 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResult:
    """A ConsumerGroupHeartbeat answer (``assignment`` None: unchanged)."""

    error_code: int
    error_message: str = ""
    member_id: str = ""
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: dict[uuid.UUID, tuple[int, ...]] | None = None


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """One topic of a Metadata answer: its partition count and id (None before v10), and,
    when asked (KIP-881), the racks of each partition's replicas in partition order."""

    partitions: int
    topic_id: uuid.UUID | None = None
    partition_racks: tuple[frozenset[str], ...] | None = None


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error_code: int
    offsets: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)


# --------------------------------------------------------------------------- the adapter


class _Header:  # what aiokafka's connection calls on a header
    """What aiokafka needs of a request header: ``encode()``."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def encode(self) -> bytes:
        return self._data


class _ResponseHeader:
    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id


class DecodeFailed:
    """An answer that could not be decoded (``exc`` says why)."""

    def __init__(self, exc: Exception) -> None:
        self.exc = exc


class PreparedRequest:
    """One request at one version, shaped like aiokafka's ``RequestStruct``: the header and body
    bytes (``build_request_header``, ``encode``) and the decoding of the answer's bytes
    (``parse_response_header``, then ``decode``; an undecodable answer decodes to a
    :class:`DecodeFailed`)."""

    def __init__(self, message: Any, response_cls: Any, version: int) -> None:
        self._message = message
        self._response_cls = response_cls
        self.API_KEY: int = message.API_KEY
        self.API_VERSION = version
        self._decoded: Any = None
        try:
            message.API_VERSION = version
            self._body = bytes(message.encode(version=version))
        except Exception as exc:  # a value the schema cannot carry: our bug or bad input
            raise LocalProtocolError(
                f"cannot encode {type(message).__name__} v{version}: {exc!r}"
            ) from exc

    # aiokafka decodes with ``request.RESPONSE_TYPE.decode(buffer)``: this request. A property,
    # as ``self.RESPONSE_TYPE = self`` made every request a reference cycle: its decoded answer
    RESPONSE_TYPE = property(lambda self: self)  # waited for the cyclic GC (issue 29: ~70 MB)

    def build_request_header(self, correlation_id: int, client_id: str) -> _Header:
        self._message.with_header(correlation_id=correlation_id, client_id=client_id)
        flexible = self._message.flexible_version_q(self.API_VERSION)
        return _Header(bytes(self._message.encode_header(flexible=flexible)))

    def encode(self) -> bytes:
        return self._body

    def parse_response_header(self, buffer: io.BytesIO) -> _ResponseHeader:
        data = buffer.read()
        if len(data) < 4:
            self._decoded = DecodeFailed(RemoteProtocolError("response shorter than its header"))
            return _ResponseHeader(-1)
        (correlation_id,) = struct.unpack_from(">i", data, 0)
        try:
            self._decoded = _decode_response(self._response_cls, data, self.API_VERSION)
        except Exception as exc:  # the schema decoder raises many kinds; keep ours only
            self._decoded = DecodeFailed(exc)
        return _ResponseHeader(correlation_id)

    def decode(self, _buffer: io.BytesIO) -> Any:
        return self._decoded

    def __repr__(self) -> str:
        return f"{type(self._message).__name__}_v{self.API_VERSION}"


#: Bytes enough for any response header (a correlation id, and for flexible versions a tagged
#: field count that is 0 in every header Kafka writes).
_HEADER_PEEK = 64


def _decode_response(response_cls: Any, data: bytes, version: int) -> Any:
    """The body of a response (``data`` starts with its header), decoded without copying it
    (kafka-python's ``decode(header=True)`` copies a whole Fetch answer to read its header)."""
    head = io.BytesIO(data[:_HEADER_PEEK])
    try:
        response_cls.parse_header(head, version=version)
        size = head.tell()
    except Exception:
        size = _HEADER_PEEK
    if size >= _HEADER_PEEK and len(data) > _HEADER_PEEK:
        return response_cls.decode(data, version=version, header=True)  # a long header
    return response_cls.decode(memoryview(data)[size:], version=version, header=False)


class Request:
    """A request whose version is chosen per connection (aiokafka's ``Request`` shape).

    ``api`` is its name in :data:`API_VERSIONS`; ``build(version)`` returns the kafka-python
    message for that version, so fields that change shape across versions (LeaveGroup's batch
    form, FindCoordinator's key list) are handled by the caller in one place. After a send,
    ``version`` is the version that was used. :meth:`prepare` picks it against a broker's
    ApiVersions and encodes: a transport (the real one, or a scripted fake) sends what it gives.
    """

    def __init__(
        self,
        api: str,
        request_cls: Any,
        response_cls: Any,
        build: Callable[[int], Any],
        *,
        versions: tuple[int, int] | None = None,
    ) -> None:
        self.api = api
        self.API_KEY: int = request_cls.API_KEY
        self._response_cls = response_cls
        self._build = build
        #: The versions this one request may use (default: the API's in API_VERSIONS).
        self.versions = versions
        self.version = -1

    def prepare(self, broker_versions: Mapping[int, tuple[int, int]]) -> PreparedRequest:
        ours = self.versions or API_VERSIONS.get(self.api)
        if ours is None:  # our bug, never the broker's: say so, not "unreachable"
            raise LocalProtocolError(f"no versions of {self.api} are known to aiogroup")
        theirs = broker_versions.get(self.API_KEY)
        if theirs is None:
            raise UnsupportedApiVersionError(f"the broker does not support {self.api}")
        version = min(ours[1], theirs[1])
        if version < max(ours[0], theirs[0]):
            raise UnsupportedApiVersionError(
                f"{self.api}: we speak {ours[0]}-{ours[1]}, the broker {theirs[0]}-{theirs[1]}"
            )
        self.version = version
        return PreparedRequest(self._build(version), self._response_cls, version)

    def answer(self, decoded: Any) -> Any:
        """What a prepared request decoded its answer to, or a
        :class:`~aiogroup.errors.RemoteProtocolError` for an answer that did not decode."""
        if isinstance(decoded, DecodeFailed):
            raise RemoteProtocolError(
                f"undecodable {self.api} v{self.version} response: {decoded.exc!r}"
            ) from decoded.exc
        return decoded


# --------------------------------------------------------------------------- the transport


class Transport:
    """Group-coordinator requests for one group, over one :class:`~aiokafka.client.AIOKafkaClient`.

    ``client_options`` go to aiokafka's client as they are (``security_protocol``,
    ``ssl_context``, ``sasl_mechanism``, ``sasl_plain_username``, ...).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        *,
        client_id: str = "aiogroup",
        request_timeout_ms: int = 30_000,
        join_timeout_ms: int | None = None,
        **client_options: Any,
    ) -> None:
        from aiokafka.client import AIOKafkaClient

        self.group_id = group_id
        self.request_timeout_ms = request_timeout_ms
        #: JoinGroup is held by the coordinator until the rebalance completes, so it gets the
        #: rebalance timeout plus a margin (as Java does), not the plain request timeout.
        self.join_timeout_ms = max(request_timeout_ms, join_timeout_ms or 0)
        self.client_id = client_id
        self._security = security_options(client_options)
        addresses = bootstrap_addresses(bootstrap_servers)
        self._bootstrap_text = ", ".join(
            f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in addresses
        )
        #: SASL on this client's connections (KIP-368 re-authentication, the OAUTHBEARER
        #: token source); None without SASL.
        self.sasl: SaslSessions | None = None
        client_cls: Any = AIOKafkaClient
        extra: dict[str, Any] = {}
        if self._security.sasl:
            from aiogroup.client.oauth import TokenSource
            from aiogroup.client.reauth import ReauthClient, SaslSessions

            provider = client_options.get("sasl_oauth_token_provider")
            self.sasl = SaslSessions(
                token_source=provider if isinstance(provider, TokenSource) else None
            )
            client_cls, extra = ReauthClient, {"sessions": self.sasl}
        try:
            self._client = client_cls(
                **extra,
                bootstrap_servers=bootstrap_servers,
                client_id=client_id,
                # aiokafka applies one timeout to every request on a connection; ours are
                # enforced per request in _send, so its own is the longest we use.
                request_timeout_ms=self.join_timeout_ms,
                **client_options,
            )
        except (TypeError, ValueError, AssertionError) as exc:  # aiokafka refused an option
            raise ConfigurationError(f"bad client option: {exc}") from exc
        self._coordinator_id: int | None = None
        self._lookup_lock = asyncio.Lock()
        self._started = False
        #: Which brokers this client cannot reach now: one line when one goes away, a reminder
        #: while it stays away, one when it is back (instead of aiokafka's line per attempt).
        self.reachability = Reachability(f"{client_id} (group {group_id})")

    @property
    def coordinator_id(self) -> int | None:
        """The coordinator's node id, or None while unknown."""
        return self._coordinator_id

    async def start(self) -> None:
        """Bootstrap (bounded by the request timeout).

        Raises :class:`~aiogroup.errors.AuthenticationError` when TLS or SASL fails, else
        :class:`~aiogroup.errors.BrokerUnreachableError` when no bootstrap server answers.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        try:
            await asyncio.wait_for(self._client.bootstrap(), self._timeout)
        except TimeoutError as exc:
            raise BrokerUnreachableError(
                f"no bootstrap server answered within {self._timeout:g} s "
                f"({self._bootstrap_text}): check bootstrap_servers and that the cluster is up"
            ) from exc
        except Exception as exc:
            if isinstance(exc, AiogroupError):
                raise
            # aiokafka logged why each server failed; find out whether it was security.
            for host, port, *_ in self._client.hosts:
                refused = await diagnose(
                    host,
                    port,
                    self._security,
                    client_id=self.client_id,
                    timeout=deadline - loop.time(),
                )
                if refused is not None:
                    raise refused from exc
            raise BrokerUnreachableError(
                f"no bootstrap server answered ({self._bootstrap_text}: {exc}): check "
                "bootstrap_servers and that the cluster is up"
            ) from exc
        self._started = True

    async def close(self) -> None:
        """Close every connection (bounded; never raises)."""
        try:
            await asyncio.wait_for(self._client.close(), 5.0)
        except Exception as exc:  # closing must not fail the caller
            log.debug("closing the client failed: %r", exc)
        if self.sasl is not None and self.sasl.token_source is not None:
            await self.sasl.token_source.close()

    @property
    def _timeout(self) -> float:
        return self.request_timeout_ms / 1000

    def coordinator_dead(self) -> None:
        """Forget the coordinator; the next request looks it up again."""
        if self._coordinator_id is not None:
            log.info("coordinator %s marked dead for group %s", self._coordinator_id, self.group_id)
        self._coordinator_id = None

    # ------------------------------------------------------------------ the seam

    async def send(
        self,
        node_id: int | None,
        request: Request,
        *,
        coordination: bool = False,
        timeout: float | None = None,
    ) -> Any:
        """Send ``request`` to broker ``node_id`` (None: any broker this client knows) and
        return kafka-python's decoded answer, within ``timeout`` (default: the request
        timeout). ``coordination``: on the group connection (which a held JoinGroup blocks).

        Raises :class:`~aiogroup.errors.BrokerUnreachableError` when the broker cannot be
        reached, :class:`~aiogroup.errors.AuthenticationError` when TLS or SASL refuses us and
        :class:`~aiogroup.errors.RemoteProtocolError` for an answer that cannot be decoded.
        """
        return await self._send(
            self.any_node() if node_id is None else node_id,
            request,
            coordination=coordination,
            timeout=timeout,
        )

    async def send_to_coordinator(
        self, request: Request, *, timeout: float | None = None, coordination: bool = True
    ) -> Any:
        """Send ``request`` to the group's coordinator (looked up first if unknown); forgets
        the coordinator when it cannot be reached or answers that it moved, so the next call
        looks it up again. Raises :class:`~aiogroup.errors.CoordinatorUnreachableError`."""
        node_id = await self.find_coordinator()
        try:
            response = await self.send(node_id, request, coordination=coordination, timeout=timeout)
        except BrokerUnreachableError as exc:
            self.coordinator_dead()
            if isinstance(exc, CoordinatorUnreachableError):
                raise
            raise CoordinatorUnreachableError(f"the coordinator: {exc}") from exc
        code = getattr(response, "error_code", 0)
        if code in COORDINATOR_ERRORS:
            self.coordinator_dead()
        return response

    def any_node(self) -> int:
        """A broker this client knows (for requests any broker answers)."""
        node = self._client.get_random_node()
        if node is None:
            self._client.force_metadata_update()
            raise BrokerUnreachableError("no broker known (metadata is empty)")
        return int(node)

    def address(self, node_id: int) -> str | None:
        """``host:port`` of broker ``node_id`` as the cluster metadata has it (None: unknown)."""
        broker = self._client.cluster.broker_metadata(node_id)
        return None if broker is None else f"{broker.host}:{broker.port}"

    async def refresh_metadata(self) -> None:
        """Refresh the cluster view (brokers and leaders), bounded by the request timeout, so
        brokers named in an answer (a new leader, the coordinator) can be reached."""
        await asyncio.wait_for(self._client.force_metadata_update(), self._timeout)

    # ------------------------------------------------------------------ plumbing

    async def _send(
        self,
        node_id: int,
        request: Request,
        *,
        coordination: bool,
        timeout: float | None = None,
    ) -> Any:
        from aiokafka.client import ConnectionGroup

        group = ConnectionGroup.COORDINATION if coordination else ConnectionGroup.DEFAULT
        try:
            response = await asyncio.wait_for(
                self._client.send(node_id, request, group=group), timeout or self._timeout
            )
        except asyncio.CancelledError:
            raise
        except AiogroupError:
            raise
        except (OSError, TimeoutError) as exc:
            self._unreachable(node_id, exc)
            raise BrokerUnreachableError(f"{request.api} to node {node_id}: {exc!r}") from exc
        except Exception as exc:  # aiokafka's own errors: connection, timeout, not ready
            from aiokafka.errors import NodeNotReadyError

            if isinstance(exc, NodeNotReadyError):  # the connect failed: why?
                refused = await self._connect_refused(node_id, timeout or self._timeout)
                if refused is not None:
                    raise refused from exc
            self._unreachable(node_id, exc)
            raise BrokerUnreachableError(f"{request.api} to node {node_id}: {exc!r}") from exc
        if self.reachability.is_down(node_id):
            self.reachability.answered(
                node_id, self.address(node_id) or "?", asyncio.get_running_loop().time()
            )
        return request.answer(response)

    def _unreachable(self, node_id: int, exc: BaseException) -> None:
        reason = str(exc) or type(exc).__name__
        self.reachability.failed(
            node_id, self.address(node_id) or "?", reason, asyncio.get_running_loop().time()
        )

    async def _connect_refused(self, node_id: int, timeout: float) -> AuthenticationError | None:
        """Whether connecting to ``node_id`` fails on TLS or SASL (see ``_security``)."""
        broker = self._client.cluster.broker_metadata(node_id)
        if broker is None:
            return None
        return await diagnose(
            broker.host, broker.port, self._security, client_id=self.client_id, timeout=timeout
        )

    async def find_coordinator(self) -> int:
        """Look up (or return the cached) coordinator of our group; its node id."""
        async with self._lookup_lock:
            if self._coordinator_id is not None:
                return self._coordinator_id
            group_id = self.group_id

            def build(version: int) -> Any:
                if version >= 4:
                    return FindCoordinatorRequest(key_type=0, coordinator_keys=[group_id])
                return FindCoordinatorRequest(key=group_id, key_type=0)

            request = Request(
                "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, build
            )
            response = await self.send(None, request)
            if request.version >= 4:
                if not response.coordinators:
                    raise RemoteProtocolError("FindCoordinator answered no coordinator")
                entry = response.coordinators[0]
                error_code, node_id = entry.error_code, entry.node_id
                host, port = entry.host, entry.port
            else:
                error_code, node_id = response.error_code, response.node_id
                host, port = response.host, response.port
            if error_code:
                raise _retriable_or_fatal(error_code, "FindCoordinator")
            if self.address(node_id) is None:
                # The coordinator is not in our metadata yet: refresh so aiokafka can reach it.
                log.debug("coordinator %s (%s:%s) not in metadata; refreshing", node_id, host, port)
                await self.refresh_metadata()
            self._coordinator_id = int(node_id)
            return self._coordinator_id

    # ------------------------------------------------------------------ the group APIs

    async def join_group(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocols: Sequence[tuple[str, bytes]],
        protocol_type: str = "consumer",
        reason: str | None = None,
    ) -> JoinGroupResult:
        """Send JoinGroup; the MEMBER_ID_REQUIRED answer (KIP-394) comes back as a result."""
        group_id = self.group_id

        def build(version: int) -> Any:
            if group_instance_id is not None and version < 5:
                raise UnsupportedApiVersionError(
                    "static membership (KIP-345) needs JoinGroup v5+; the broker is too old"
                )
            return JoinGroupRequest(
                group_id=group_id,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocols=[
                    JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                    for name, metadata in protocols
                ],
                reason=reason,
            )

        request = Request("JoinGroup", JoinGroupRequest, JoinGroupResponse, build)
        r = await self.send_to_coordinator(request, timeout=self.join_timeout_ms / 1000)
        return JoinGroupResult(
            error_code=r.error_code,
            generation_id=r.generation_id,
            protocol_name=r.protocol_name,
            leader=r.leader or "",
            member_id=r.member_id or "",
            members=tuple(
                JoinGroupMember(
                    m.member_id, bytes(m.metadata or b""), group_instance_id=m.group_instance_id
                )
                for m in (r.members or ())
            ),
            skip_assignment=bool(getattr(r, "skip_assignment", False)),
        )

    async def sync_group(
        self,
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_name: str | None,
        assignments: Mapping[str, bytes],
        protocol_type: str = "consumer",
    ) -> SyncGroupResult:
        """Send SyncGroup (the leader passes every member's encoded assignment)."""
        group_id = self.group_id

        def build(version: int) -> Any:
            return SyncGroupRequest(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
                assignments=[
                    SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
                    for m, a in sorted(assignments.items())
                ],
            )

        request = Request("SyncGroup", SyncGroupRequest, SyncGroupResponse, build)
        r = await self.send_to_coordinator(request)
        return SyncGroupResult(error_code=r.error_code, assignment=bytes(r.assignment or b""))

    async def heartbeat(
        self, *, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> int:
        """Send Heartbeat; returns its error code."""
        group_id = self.group_id

        def build(version: int) -> Any:
            return HeartbeatRequest(
                group_id=group_id,
                generation_id=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id,
            )

        request = Request("Heartbeat", HeartbeatRequest, HeartbeatResponse, build)
        r = await self.send_to_coordinator(request)
        return int(r.error_code)

    async def leave_group(
        self, *, member_id: str, group_instance_id: str | None = None, reason: str | None = None
    ) -> int:
        """Send LeaveGroup (the v3+ batch form with one member); returns the error code."""
        group_id = self.group_id

        def build(version: int) -> Any:
            if version >= 3:
                return LeaveGroupRequest(
                    group_id=group_id,
                    members=[
                        LeaveGroupRequest.MemberIdentity(
                            member_id=member_id,
                            group_instance_id=group_instance_id,
                            reason=reason,
                        )
                    ],
                )
            return LeaveGroupRequest(group_id=group_id, member_id=member_id)

        request = Request("LeaveGroup", LeaveGroupRequest, LeaveGroupResponse, build)
        r = await self.send_to_coordinator(request)
        if r.error_code:
            return int(r.error_code)
        for m in getattr(r, "members", None) or ():
            if m.error_code:
                return int(m.error_code)
        return 0

    async def offset_commit(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        metadata: str = "",
        coordination: bool = True,
    ) -> OffsetCommitResult:
        """Commit ``offsets`` (the next offset to read, per partition) for this generation.

        ``coordination=False`` sends it on the ordinary connection to the coordinator's broker
        instead of the group connection, where a held JoinGroup would delay it until the join
        phase completed (a broker handles one request per connection at a time)."""
        group_id = self.group_id
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def build(version: int) -> Any:
            T = OffsetCommitRequest.OffsetCommitRequestTopic
            P = T.OffsetCommitRequestPartition
            return OffsetCommitRequest(
                group_id=group_id,
                generation_id_or_member_epoch=generation_id,
                member_id=member_id,
                group_instance_id=group_instance_id if version >= 7 else None,
                retention_time_ms=-1,
                topics=[
                    T(
                        name=topic,
                        partitions=[
                            P(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata=metadata,
                            )
                            for p, o in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
            )

        request = Request("OffsetCommit", OffsetCommitRequest, OffsetCommitResponse, build)
        r = await self.send_to_coordinator(request, coordination=coordination)
        errors = {
            TopicPartition(t.name, p.partition_index): int(p.error_code)
            for t in r.topics
            for p in t.partitions
        }
        if any(code in COORDINATOR_ERRORS for code in errors.values()):
            self.coordinator_dead()
        return OffsetCommitResult(errors)

    async def offset_fetch(
        self, partitions: Sequence[TopicPartition], *, member: tuple[str, int] | None = None
    ) -> OffsetFetchResult:
        """Fetch the committed offsets of ``partitions`` (require_stable on v7+, KIP-447).

        ``member``: ``(member id, member epoch)`` of a KIP-848 member, sent with v9 (v8's
        batched form up to it), so that the coordinator refuses a member it fenced
        (STALE_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); without it v7 at most, as for anyone."""
        group_id = self.group_id
        by_topic = group_by_topic(partitions)

        def build(version: int) -> Any:
            if version >= 8:
                G = OffsetFetchRequest.OffsetFetchRequestGroup
                T8 = G.OffsetFetchRequestTopics
                member_id, epoch = member or (None, -1)
                group = G(
                    group_id=group_id,
                    member_id=member_id,
                    member_epoch=epoch,
                    topics=[T8(name=t, partition_indexes=list(ps)) for t, ps in by_topic.items()],
                )
                return OffsetFetchRequest(groups=[group], require_stable=True)
            T = OffsetFetchRequest.OffsetFetchRequestTopic
            return OffsetFetchRequest(
                group_id=group_id,
                topics=[T(name=t, partition_indexes=list(ps)) for t, ps in by_topic.items()],
                require_stable=True,
            )

        versions = OFFSET_FETCH_WITH_MEMBER if member is not None else None
        request = Request(
            "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, build, versions=versions
        )
        r = await self.send_to_coordinator(request)
        answered = r
        if request.version >= 8:
            if len(r.groups or ()) != 1:
                raise RemoteProtocolError(f"OffsetFetch answered {len(r.groups or ())} groups")
            answered = r.groups[0]
        error_code = int(getattr(answered, "error_code", 0) or 0)
        offsets: dict[TopicPartition, CommittedOffset] = {}
        for t in answered.topics:
            for p in t.partitions:
                if p.error_code and not error_code:
                    error_code = int(p.error_code)
                offsets[TopicPartition(t.name, p.partition_index)] = CommittedOffset(
                    int(p.committed_offset),
                    p.metadata,
                    int(getattr(p, "committed_leader_epoch", -1)),
                )
        if error_code in COORDINATOR_ERRORS:
            self.coordinator_dead()
        return OffsetFetchResult(error_code, offsets)

    async def consumer_group_heartbeat(
        self,
        *,
        member_id: str,
        member_epoch: int,
        group_instance_id: str | None = None,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribed_topic_names: Sequence[str] | None = None,
        subscribed_topic_regex: str | None = None,
        server_assignor: str | None = None,
        owned: Mapping[uuid.UUID, Sequence[int]] | None = None,
    ) -> ConsumerGroupHeartbeatResult:
        """Send ConsumerGroupHeartbeat v1 (KIP-848); None and -1 leave a field unchanged.

        Raises :class:`~aiogroup.errors.UnsupportedApiVersionError` naming what is missing
        when the broker does not serve v1 (Kafka before 4.0, or the protocol turned off)."""
        from aiogroup.protocol.messages import (
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupHeartbeatResponse,
        )

        group_id = self.group_id
        TP = ConsumerGroupHeartbeatRequest.TopicPartitions

        def build(version: int) -> Any:
            return ConsumerGroupHeartbeatRequest(
                group_id=group_id,
                member_id=member_id,
                member_epoch=member_epoch,
                instance_id=group_instance_id,
                rack_id=rack_id,
                rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=(
                    None if subscribed_topic_names is None else list(subscribed_topic_names)
                ),
                subscribed_topic_regex=subscribed_topic_regex,
                server_assignor=server_assignor,
                topic_partitions=None
                if owned is None
                else [TP(topic_id=t, partitions=list(ps)) for t, ps in owned.items()],
            )

        request = Request(
            "ConsumerGroupHeartbeat",
            ConsumerGroupHeartbeatRequest,
            ConsumerGroupHeartbeatResponse,
            build,
        )
        try:
            r = await self.send_to_coordinator(request)
        except UnsupportedApiVersionError as exc:
            raise UnsupportedApiVersionError(NO_CONSUMER_PROTOCOL.format(detail=exc)) from exc
        assignment = None
        if r.assignment is not None:
            assignment = {
                uuid.UUID(str(t.topic_id)): tuple(int(p) for p in t.partitions)
                for t in r.assignment.topic_partitions or ()
            }
        return ConsumerGroupHeartbeatResult(
            error_code=int(r.error_code),
            error_message=r.error_message or "",
            member_id=r.member_id or "",
            member_epoch=int(r.member_epoch),
            heartbeat_interval_ms=int(r.heartbeat_interval_ms),
            assignment=assignment,
        )

    async def partitions_per_topic(self, topics: Sequence[str] | None) -> dict[str, int]:
        """Metadata for ``topics`` (None: every topic): partition counts of those that exist."""
        return {n: info.partitions for n, info in (await self.topic_metadata(topics)).items()}

    async def topic_metadata(
        self, topics: Sequence[str] | None, *, racks: bool = False
    ) -> dict[str, TopicInfo]:
        """Metadata for ``topics`` (None: every topic): the partition count and id (Metadata
        v10+; KIP-848 assignments name topics by id) of those that exist; with ``racks``, the
        racks of each partition's replicas too (KIP-881: the ``rack`` of each broker in
        ``replica_nodes``, every replica counted as Java does; a broker without one, or
        unknown, adds nothing)."""
        wanted = None if topics is None else sorted(set(topics))
        if wanted is not None and not wanted:
            return {}

        def build(version: int) -> Any:
            T = MetadataRequest.MetadataRequestTopic
            return MetadataRequest(
                topics=None if wanted is None else [T(name=t) for t in wanted],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        request = Request("Metadata", MetadataRequest, MetadataResponse, build)
        r = await self.send(None, request)
        found: dict[str, TopicInfo] = {}
        rack_of: dict[int, str] = {}
        if racks:
            for b in r.brokers or ():
                rack = getattr(b, "rack", None)
                if rack:
                    rack_of[int(b.node_id)] = str(rack)
        sets: dict[frozenset[str], frozenset[str]] = {}  # one object per distinct set
        for t in r.topics:
            if t.error_code == 0 and t.partitions and (wanted is None or t.name in wanted):
                topic_id = getattr(t, "topic_id", None)
                known = topic_id is not None and int(uuid.UUID(str(topic_id))) != 0
                of_partition: tuple[frozenset[str], ...] | None = None
                if racks:
                    count = len(t.partitions)
                    per = [frozenset[str]()] * count
                    for p in t.partitions:
                        index = int(p.partition_index)
                        if 0 <= index < count:
                            found_racks = frozenset(
                                rack_of[n] for n in p.replica_nodes or () if n in rack_of
                            )
                            per[index] = sets.setdefault(found_racks, found_racks)
                    of_partition = tuple(per)
                found[t.name] = TopicInfo(
                    len(t.partitions), uuid.UUID(str(topic_id)) if known else None, of_partition
                )
        return found


def _retriable_or_fatal(code: int, api: str) -> AiogroupError:
    return error_for_code(code, f"{api} failed with error code {code}")
