"""The consumer protocol: Subscription (JoinGroup metadata) and Assignment (SyncGroup payload).

Both messages start with an int16 version and use the classic (non-flexible) encoding.

Subscription::

    V0  version int16, topics [string], user_data nullable bytes
    V1  + owned_partitions [(topic string, partitions [int32])]       (KIP-429)
    V2  + generation_id int32                                          (KIP-792)
    V3  + rack_id nullable string                                      (KIP-881)

Assignment::

    V0  version int16, assigned_partitions [(topic string, partitions [int32])],
        user_data nullable bytes
    V1-V3 add no fields

Reading follows the Java client (``ConsumerProtocol.deserialize*``): a negative version is an
error; a version above the highest we know is read as the highest we know, the known fields are
parsed and any trailing bytes (fields of the newer version) are ignored, because new versions
only append fields. A payload that declares V1..V3 but stops before that version's fields is
*truncated*, not an older version: Java's generated readers read every field of the declared
version and fail with a buffer underflow, so do we (``TruncatedError``).

Writing is deterministic (KAFKA-12898): topics are sorted, and partitions sorted within each
topic. Fields the chosen version does not carry are dropped, as Java drops its ``ignorable``
fields (e.g. owned partitions at V0). Decoding keeps the wire order: peers (librdkafka) do not
always sort, and a decode-then-encode must not lose anything.
"""

from __future__ import annotations

import struct

from aiogroup.errors import InvalidFieldError
from aiogroup.protocol._reader import (
    _TOPIC_HEADERS,
    _TOPIC_NAMES,
    FAST_ENCODE_ERRORS,
    Reader,
    Slow,
    Writer,
    as_bytes,
    pack_i16,
    pack_i32,
    pack_strings,
    pack_topic_partitions,
    scan_strings,
    scan_topic_partitions,
    unpack_i16,
    unpack_i32,
)
from aiogroup.protocol.types import NO_GENERATION, Assignment, Subscription

__all__ = [
    "ASSIGNMENT_VERSION",
    "SUBSCRIPTION_VERSION",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

#: Highest Subscription version this library reads and writes (V3, KIP-881).
SUBSCRIPTION_VERSION = 3
#: Highest Assignment version this library reads and writes.
ASSIGNMENT_VERSION = 3

Buffer = bytes | bytearray | memoryview

_NULL_BYTES = pack_i32(-1)
_NULL_STRING = pack_i16(-1)


def _pack_user_data(user_data: object, out: list[bytes]) -> None:
    """Fast path for nullable ``user_data``: plain bytes or None, else :class:`Slow`."""
    if type(user_data) is bytes:
        out.append(pack_i32(len(user_data)))
        out.append(user_data)
    elif user_data is None:
        out.append(_NULL_BYTES)
    else:
        raise Slow


def _check_encode_version(version: int, highest: int, what: str) -> None:
    if type(version) is not int or not 0 <= version <= highest:
        raise InvalidFieldError(
            f"cannot write {what} version {version!r}: supported versions are 0..{highest}",
            field="version",
        )


def encode_subscription(sub: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    """Encode ``sub`` at ``version`` (0..3). Topics and partitions are written sorted.

    Raises :class:`~aiogroup.errors.InvalidFieldError` for values the wire cannot carry (a
    topic longer than 32767 UTF-8 bytes, a partition or generation outside int32, ...).
    """
    _check_encode_version(version, SUBSCRIPTION_VERSION, "Subscription")
    out = [pack_i16(version)]
    try:
        pack_strings(sub.topics, out)
        _pack_user_data(sub.user_data, out)
        if version >= 1:
            pack_topic_partitions(sub.owned_partitions, out)
            if version >= 2:
                out.append(pack_i32(sub.generation_id))
                if version >= 3:
                    rack_id = sub.rack_id
                    # A rack is a short string that repeats, like a topic: same cached header.
                    out.append(
                        _NULL_STRING if rack_id is None else _TOPIC_HEADERS[rack_id].header
                    )
        return b"".join(out)
    except FAST_ENCODE_ERRORS:
        return _encode_subscription_carefully(sub, version)


def _encode_subscription_carefully(sub: Subscription, version: int) -> bytes:
    w = Writer()
    w.int16(version, "version")
    w.string_array(sub.topics, "topics")
    w.nullable_bytes(sub.user_data, "user_data")
    if version >= 1:
        w.topic_partitions(sub.owned_partitions, "owned_partitions")
    if version >= 2:
        w.int32(sub.generation_id, "generation_id")
    if version >= 3:
        w.nullable_string(sub.rack_id, "rack_id")
    return w.getvalue()


def decode_subscription(data: Buffer, *, max_version: int = SUBSCRIPTION_VERSION) -> Subscription:
    """Decode a Subscription of any version.

    ``max_version`` caps the fields read, to behave as an older reader would: with
    ``max_version=0`` only the V0 fields are parsed and the rest is ignored as trailing bytes.
    The returned ``version`` is the version written on the wire (it may exceed 3). Partitions
    keep their wire order.

    Raises :class:`~aiogroup.errors.TruncatedError` or
    :class:`~aiogroup.errors.InvalidFieldError` for malformed bytes.
    """
    buf = data if type(data) is bytes else bytes(data)  # as_bytes(data), without the call
    sub = _scan_subscription(buf, max_version)
    return _decode_subscription_carefully(buf, max_version) if sub is None else sub


def _scan_subscription(buf: bytes, max_version: int) -> Subscription | None:
    """The fast path: ``None`` at the first irregularity (the careful path then explains it)."""
    end = len(buf)
    names = _TOPIC_NAMES
    try:
        version: int = unpack_i16(buf, 0)[0]
        if version < 0:
            return None
        # min(version, max_version, SUBSCRIPTION_VERSION), without the call.
        effective = version if version < max_version else max_version
        if effective > SUBSCRIPTION_VERSION:
            effective = SUBSCRIPTION_VERSION
        scanned_topics = scan_strings(buf, 2)
        if scanned_topics is None:
            return None
        topics, pos = scanned_topics
        n: int = unpack_i32(buf, pos)[0]
        pos += 4
        user_data: bytes | None
        if n >= 0:
            if pos + n > end:
                return None
            user_data = buf[pos : pos + n]
            pos += n
        elif n == -1:
            user_data = None
        else:
            return None
        owned: dict[str, tuple[int, ...]] = {}
        generation_id = NO_GENERATION
        rack_id: str | None = None
        if effective >= 1:
            scanned = scan_topic_partitions(buf, pos)
            if scanned is None:
                return None
            owned, pos = scanned
            if effective >= 2:
                generation_id = unpack_i32(buf, pos)[0]
                pos += 4
                if effective >= 3:
                    n = unpack_i16(buf, pos)[0]
                    pos += 2
                    if n >= 0:
                        if pos + n > end:
                            return None
                        # Racks are few, like topics: share one str per name.
                        rack_id = names[buf[pos : pos + n]]
                    elif n != -1:
                        return None
    except (struct.error, UnicodeDecodeError):
        return None
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def _decode_subscription_carefully(buf: bytes, max_version: int) -> Subscription:
    r = Reader(buf)
    version = _read_version(r, "Subscription")
    effective = min(version, max_version, SUBSCRIPTION_VERSION)
    topics = r.string_array("topics")
    user_data = r.nullable_bytes("user_data")
    owned: dict[str, tuple[int, ...]] = {}
    generation_id = NO_GENERATION
    rack_id: str | None = None
    if effective >= 1:
        owned = r.topic_partitions("owned_partitions")
        if effective >= 2:
            generation_id = r.int32("generation_id")
            if effective >= 3:
                rack_id = r.nullable_string("rack_id")
    return Subscription(topics, user_data, owned, generation_id, rack_id, version)


def _read_version(reader: Reader, what: str) -> int:
    version = reader.int16("version")
    if version < 0:
        # Java: SchemaException("Unsupported subscription version: -1").
        raise InvalidFieldError(f"negative {what} version {version}", field="version", offset=0)
    return version


def encode_assignment(a: Assignment, version: int = ASSIGNMENT_VERSION) -> bytes:
    """Encode ``a`` at ``version`` (0..3; all share one layout). Written sorted."""
    _check_encode_version(version, ASSIGNMENT_VERSION, "Assignment")
    out = [pack_i16(version)]
    try:
        pack_topic_partitions(a.partitions, out)
        _pack_user_data(a.user_data, out)
        return b"".join(out)
    except FAST_ENCODE_ERRORS:
        w = Writer()
        w.int16(version, "version")
        w.topic_partitions(a.partitions, "assigned_partitions")
        w.nullable_bytes(a.user_data, "user_data")
        return w.getvalue()


def decode_assignment(data: Buffer, *, max_version: int = ASSIGNMENT_VERSION) -> Assignment:
    """Decode an Assignment of any version (trailing bytes of newer versions are ignored).

    Partitions keep their wire order (librdkafka's lists are not always sorted). ``max_version``
    is accepted for symmetry with :func:`decode_subscription`; every known version has the same
    fields.
    """
    del max_version  # V0..V3 share one layout.
    r = Reader(as_bytes(data))
    version = _read_version(r, "Assignment")
    partitions = r.topic_partitions("assigned_partitions")  # fast path inside
    user_data = r.nullable_bytes("user_data")
    return Assignment(partitions=partitions, user_data=user_data, version=version)
