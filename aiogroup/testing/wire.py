"""Kafka wire framing for the embedded broker, on top of kafka-python 3's schema-driven messages.

We never hand-write request or response structs: kafka-python 3 generates them from Apache
Kafka's JSON message definitions (every version, flexible versions included). This module adds
what a *server* needs around them:

* read the fixed request-header prefix (api_key, api_version, correlation_id) and pick the
  message class, then decode header + body with ``ApiMessage.decode(header=True)``;
* encode a response body built from plain dicts (``{"error_code": 0, "members": [{...}]}``)
  into a framed response with the right header version: v1 (tagged fields) for flexible
  versions, v0 otherwise, and always v0 for ApiVersions (KIP-511);
* refuse frames that are too large before allocating them, and turn every decoding failure
  into a :class:`MalformedRequestError` (never ``struct.error``/``IndexError``/... ).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kafka.protocol import admin as _admin
from kafka.protocol import consumer as _consumer
from kafka.protocol import metadata as _metadata
from kafka.protocol import producer as _producer
from kafka.protocol import sasl as _sasl

from aiogroup.errors import InvalidFieldError, RemoteProtocolError, TruncatedError
from aiogroup.protocol import messages as _kip848

__all__ = [
    "API_NAMES",
    "KAFKA_23_VERSIONS",
    "KAFKA_39_VERSIONS",
    "KAFKA_41_VERSIONS",
    "KIP848_APIS",
    "KIP_896_REMOVED",
    "LIVE_VERSIONS",
    "MAX_FRAME_BYTES",
    "SUPPORTED_VERSIONS",
    "FrameTooLargeError",
    "MalformedRequestError",
    "Request",
    "UnsupportedRequestError",
    "blocking_request",
    "build",
    "decode_request",
    "encode_response",
    "frame_size",
    "request_class",
    "versions_for",
]

#: Frames above this size are refused before a buffer is allocated (Kafka's
#: ``socket.request.max.bytes`` defaults to 100 MiB as well).
MAX_FRAME_BYTES: Final = 100 * 1024 * 1024

_LEN = struct.Struct(">i")
_PREFIX = struct.Struct(">hhi")

# API key -> (request class, response class). Only the APIs the embedded broker serves.
_CLASSES: Final[dict[int, tuple[Any, Any]]] = {
    0: (_producer.ProduceRequest, _producer.ProduceResponse),
    1: (_consumer.FetchRequest, _consumer.FetchResponse),
    2: (_consumer.ListOffsetsRequest, _consumer.ListOffsetsResponse),
    3: (_metadata.MetadataRequest, _metadata.MetadataResponse),
    8: (_consumer.OffsetCommitRequest, _consumer.OffsetCommitResponse),
    9: (_consumer.OffsetFetchRequest, _consumer.OffsetFetchResponse),
    10: (_metadata.FindCoordinatorRequest, _metadata.FindCoordinatorResponse),
    11: (_consumer.JoinGroupRequest, _consumer.JoinGroupResponse),
    12: (_consumer.HeartbeatRequest, _consumer.HeartbeatResponse),
    13: (_consumer.LeaveGroupRequest, _consumer.LeaveGroupResponse),
    14: (_consumer.SyncGroupRequest, _consumer.SyncGroupResponse),
    15: (_admin.DescribeGroupsRequest, _admin.DescribeGroupsResponse),
    16: (_admin.ListGroupsRequest, _admin.ListGroupsResponse),
    17: (_sasl.SaslHandshakeRequest, _sasl.SaslHandshakeResponse),
    18: (_metadata.ApiVersionsRequest, _metadata.ApiVersionsResponse),
    19: (_admin.CreateTopicsRequest, _admin.CreateTopicsResponse),
    20: (_admin.DeleteTopicsRequest, _admin.DeleteTopicsResponse),
    22: (_producer.InitProducerIdRequest, _producer.InitProducerIdResponse),
    36: (_sasl.SaslAuthenticateRequest, _sasl.SaslAuthenticateResponse),
    37: (_admin.CreatePartitionsRequest, _admin.CreatePartitionsResponse),
    42: (_admin.DeleteGroupsRequest, _admin.DeleteGroupsResponse),
    68: (_kip848.ConsumerGroupHeartbeatRequest, _kip848.ConsumerGroupHeartbeatResponse),
    69: (_kip848.ConsumerGroupDescribeRequest, _kip848.ConsumerGroupDescribeResponse),
}

#: The versions we advertise in ApiVersions, and accept. Produce/Fetch start where record
#: batches (magic v2) start; Fetch/Produce stop before topic ids replace names (v13).
SUPPORTED_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    0: (3, 11),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 7),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 9),  # OffsetCommit (v9: KIP-848's member epoch; v10 addresses topics by id)
    9: (1, 9),  # OffsetFetch (v8: batched groups; v9: KIP-848's member and epoch)
    10: (0, 4),  # FindCoordinator (v4: batched keys)
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups (v6: GROUP_ID_NOT_FOUND for an unknown group, KIP-1043)
    16: (0, 4),  # ListGroups
    17: (0, 1),  # SaslHandshake (v1: tokens in SaslAuthenticate, KIP-152)
    18: (0, 4),  # ApiVersions (v4: as v3, KAFKA-17011 is about features we do not list)
    19: (2, 7),  # CreateTopics
    20: (1, 5),  # DeleteTopics (v6 addresses topics by id)
    22: (0, 4),  # InitProducerId (idempotent producers)
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    68: (0, 1),  # ConsumerGroupHeartbeat (KIP-848; v1: the member id is the client's, KIP-1082)
    69: (0, 1),  # ConsumerGroupDescribe (KIP-848; v1: member types)
}

#: What serving KIP-848's consumer groups adds (the rest serves the classic protocol alone):
#: Kafka 4.x's versions, or 3.7-3.9's behind ``group.coordinator.rebalance.protocols``
#: (ConsumerGroupHeartbeat v0, before KIP-1082).
KIP848_APIS: Final = frozenset({68, 69})
_CLASSIC_ONLY: Final[dict[int, tuple[int, int]]] = {8: (2, 8), 9: (1, 8)}

#: What Apache Kafka 2.3.0 advertises for those APIs (its ApiVersions answer), for the
#: ``kafka2`` flavour: it closes the connection on anything newer.
KAFKA_23_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    0: (0, 7),
    1: (0, 11),
    2: (0, 5),
    3: (0, 8),
    8: (0, 7),
    9: (0, 5),
    10: (0, 2),
    11: (0, 5),
    12: (0, 3),
    13: (0, 2),
    14: (0, 3),
    15: (0, 3),
    16: (0, 2),
    17: (0, 1),
    18: (0, 2),
    19: (0, 3),
    20: (0, 3),
    22: (0, 1),
    36: (0, 1),
    37: (0, 1),
    42: (0, 1),
}


#: What Apache Kafka 3.9.1 advertises for those APIs (the ``kafka3`` flavour's broker). It still
#: serves every version KIP-896 removed in 4.0, and advertises KIP-848's APIs at v0 whether or
#: not ``group.coordinator.rebalance.protocols`` enables the consumer protocol.
KAFKA_39_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    0: (0, 11),
    1: (0, 17),
    2: (0, 9),
    3: (0, 12),
    8: (0, 9),
    9: (0, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    17: (0, 1),
    18: (0, 4),
    19: (0, 7),
    20: (0, 6),
    22: (0, 5),
    36: (0, 2),
    37: (0, 3),
    42: (0, 2),
    68: (0, 0),
    69: (0, 0),
}

#: What Apache Kafka 4.1.1 advertises for those APIs (the ``kafka4`` flavour's broker): the
#: versions KIP-896 removed are gone (:data:`KIP_896_REMOVED`), DescribeGroups has v6.
KAFKA_41_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    0: (0, 13),
    1: (4, 18),
    2: (1, 10),
    3: (0, 13),
    8: (2, 9),
    9: (1, 9),
    10: (0, 6),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 6),
    16: (0, 5),
    17: (0, 1),
    18: (0, 4),
    19: (2, 7),
    20: (1, 6),
    22: (0, 5),
    36: (0, 2),
    37: (0, 3),
    42: (0, 2),
    68: (0, 1),
    69: (0, 1),
}

#: The versions of these APIs Kafka 3.9 served and 4.0 removed (KIP-896): a broker of 4.x
#: closes the connection of a request in one of them, as of any version it does not serve.
KIP_896_REMOVED: Final[dict[int, tuple[int, int]]] = {
    1: (0, 3),  # Fetch
    2: (0, 0),  # ListOffsets
    8: (0, 1),  # OffsetCommit
    9: (0, 0),  # OffsetFetch
    19: (0, 1),  # CreateTopics
    20: (0, 0),  # DeleteTopics
}

#: Each coordinator flavour's Kafka version's ApiVersions answer (for these APIs).
LIVE_VERSIONS: Final[dict[str, dict[int, tuple[int, int]]]] = {
    "kafka2": KAFKA_23_VERSIONS,
    "kafka3": KAFKA_39_VERSIONS,
    "kafka4": KAFKA_41_VERSIONS,
}


def versions_for(flavour: str, consumer_protocol: bool | None = None) -> dict[int, tuple[int, int]]:
    """The API versions a broker of coordinator ``flavour`` serves: ours, within what that
    flavour's Kafka version serves (Kafka 2.3.0, 3.9.1, 4.1.1: :data:`LIVE_VERSIONS`). An API
    or version outside them closes the connection, as Kafka's does (KIP-511: ApiVersions is
    answered with UNSUPPORTED_VERSION and these versions).

    ``consumer_protocol`` (None: the flavour's default, ``kafka4`` only) keeps KIP-848's APIs
    and OffsetCommit/OffsetFetch v9; on ``kafka3`` ConsumerGroupHeartbeat is v0, as 3.7-3.9
    served it behind a flag. Without it they are gone and the offsets APIs stop at v8."""
    if consumer_protocol is None:
        consumer_protocol = flavour == "kafka4"
    theirs_by_key = dict(LIVE_VERSIONS[flavour])
    if not consumer_protocol and flavour != "kafka2":
        for key in KIP848_APIS:
            theirs_by_key.pop(key, None)
        theirs_by_key.update(_CLASSIC_ONLY)
    out = {}
    for key, (lo, hi) in SUPPORTED_VERSIONS.items():
        theirs = theirs_by_key.get(key)
        if theirs is not None and max(lo, theirs[0]) <= min(hi, theirs[1]):
            out[key] = (max(lo, theirs[0]), min(hi, theirs[1]))
    return out


API_NAMES: Final[dict[int, str]] = {
    key: req.__name__[: -len("Request")] for key, (req, _) in _CLASSES.items()
}
API_KEYS_BY_NAME: Final[dict[str, int]] = {name: key for key, name in API_NAMES.items()}


class MalformedRequestError(InvalidFieldError, RemoteProtocolError):
    """A request frame that cannot be decoded; the server closes the connection."""


class FrameTooLargeError(MalformedRequestError):
    """A length prefix above :data:`MAX_FRAME_BYTES` (or negative)."""


class UnsupportedRequestError(MalformedRequestError):
    """An API key we do not serve, or a version outside what we advertise."""

    def __init__(self, message: str, *, api_key: int, api_version: int, correlation_id: int):
        super().__init__(message, field="request_api_key", offset=0)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class Request:
    """A decoded request: header fields plus the kafka-python body object."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str
    body: Any

    @property
    def api_name(self) -> str:
        return API_NAMES.get(self.api_key, f"api{self.api_key}")


def frame_size(prefix: bytes, limit: int = MAX_FRAME_BYTES) -> int:
    """The payload size announced by a 4-byte length prefix; refuses absurd sizes."""
    if len(prefix) != 4:
        raise TruncatedError("length prefix needs 4 bytes", field="size", offset=0)
    (size,) = _LEN.unpack(prefix)
    if size < 0 or size > limit:
        raise FrameTooLargeError(f"frame size {size} outside 0..{limit}", field="size", offset=0)
    return int(size)


def request_class(api_key: int) -> Any:
    """kafka-python's request class for ``api_key`` (KeyError-free: None if unknown)."""
    pair = _CLASSES.get(api_key)
    return None if pair is None else pair[0]


def decode_request(
    payload: bytes, versions: Mapping[int, tuple[int, int]] = SUPPORTED_VERSIONS
) -> Request:
    """Decode one request payload (without its length prefix); ``versions`` are the API
    versions served (default: every one we support).

    Raises :class:`UnsupportedRequestError` for an API or version we do not serve (with the
    correlation id so that ApiVersions can still be answered, as KIP-511 asks) and
    :class:`MalformedRequestError` for anything else that does not decode.
    """
    if len(payload) < _PREFIX.size:
        raise MalformedRequestError(
            f"request of {len(payload)} bytes is shorter than a header", field="header", offset=0
        )
    api_key, api_version, correlation_id = _PREFIX.unpack_from(payload, 0)
    served = versions.get(api_key)
    if served is None or not served[0] <= api_version <= served[1]:
        raise UnsupportedRequestError(
            f"unsupported API {api_key} version {api_version}",
            api_key=api_key,
            api_version=api_version,
            correlation_id=correlation_id,
        )
    cls = _CLASSES[api_key][0]
    try:
        body = cls.decode(bytes(payload), version=api_version, header=True)
    except Exception as exc:  # kafka-python raises struct.error, IndexError, ValueError, ...
        raise MalformedRequestError(
            f"cannot decode {cls.__name__} v{api_version}: {type(exc).__name__}: {exc}"[:300],
            field="body",
            offset=0,
        ) from exc
    header = body.header
    client_id = header.client_id if header is not None else None
    return Request(
        api_key=api_key,
        api_version=api_version,
        correlation_id=correlation_id,
        client_id=client_id or "",
        body=body,
    )


def build(container: Any, values: Mapping[str, Any], version: int | None = None) -> Any:
    """Build a kafka-python data object of class ``container`` from a (nested) dict.

    Nested struct arrays take lists of dicts, nested structs a dict. Keys that do not exist in
    the schema raise ``ValueError`` (a bug in the broker, not bad input). Fields the chosen
    version does not have are ignored at encode time, so one dict serves every version.
    """
    kwargs: dict[str, Any] = {}
    fields = container.fields
    for name, value in values.items():
        fld = fields.get(name)
        if fld is None:
            raise ValueError(f"{container.__name__} has no field {name!r}")
        if value is not None and fld.is_struct_array():
            value = [build(fld.data_class, item) for item in value]
        elif value is not None and fld.is_struct() and isinstance(value, Mapping):
            value = build(fld.data_class, value)
        kwargs[name] = value
    if version is not None:
        kwargs["version"] = version
    return container(**kwargs)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, values: Mapping[str, Any]
) -> bytes:
    """Encode a framed response (length prefix, response header, body) from a dict."""
    cls = _CLASSES[api_key][1]
    msg = build(cls, values, api_version)
    msg.with_header(correlation_id=correlation_id)
    # kafka-python picks header v1 for flexible versions and keeps v0 for ApiVersions.
    return bytes(msg.encode(header=True, framed=True))


def encode_request(
    api_key: int,
    api_version: int,
    values: Mapping[str, Any],
    *,
    correlation_id: int = 0,
    client_id: str = "aiogroup-test",
) -> bytes:
    """Encode a framed request from a dict (tests and raw clients use it)."""
    cls = _CLASSES[api_key][0]
    msg = build(cls, values, api_version)
    msg.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(msg.encode(header=True, framed=True))


def decode_response(api_key: int, api_version: int, payload: bytes) -> Any:
    """Decode a response payload (no length prefix) into kafka-python's object."""
    cls = _CLASSES[api_key][1]
    try:
        return cls.decode(bytes(payload), version=api_version, header=True)
    except Exception as exc:
        raise MalformedRequestError(
            f"cannot decode {cls.__name__} v{api_version}: {type(exc).__name__}: {exc}"[:300],
            field="body",
            offset=0,
        ) from exc


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Read exactly ``n`` bytes from a blocking socket (``ConnectionError`` at end of stream)."""
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def blocking_request(
    sock: socket.socket,
    api: str,
    version: int,
    values: Mapping[str, Any],
    *,
    correlation_id: int = 1,
    client_id: str = "aiogroup-test",
) -> Any:
    """Send one request on a connected blocking socket and return the decoded response."""
    api_key = API_KEYS_BY_NAME[api]
    sock.sendall(
        encode_request(api_key, version, values, correlation_id=correlation_id, client_id=client_id)
    )
    size = frame_size(recv_exactly(sock, 4))
    return decode_response(api_key, version, recv_exactly(sock, size))
