"""A Fetch response (v4-v12) read straight into the core's values (sans-I/O).

kafka-python's schema-driven decoder builds an object per topic, per partition and per aborted
transaction, then :mod:`aiogroup.consumer.wire` read them back into
:class:`~aiogroup.consumer.state.FetchedPartition` values; this module reads the bytes once,
into those values directly. The layout is Kafka's ``FetchResponse.json``: v7 adds the error
code and session id, v11 the preferred read replica (KIP-392), v12 is the first flexible
version (compact arrays, strings and bytes; tagged fields, which are skipped: the diverging
epoch, current leader and snapshot id of KIP-595/KIP-951 are not read). Topic ids (v13+) are
not spoken. Each partition's records are copied out of the response (one ``bytes`` each), so a
partition read to its end frees its memory whatever the others do.

Bad input (cut short, a negative length, bytes left over) raises ``ValueError`` (or
``struct.error``, ``IndexError``); the transport turns any of them into
:class:`~aiogroup.errors.RemoteProtocolError`.
"""

from __future__ import annotations

import struct
from typing import Any

from aiogroup.consumer.state import FetchedPartition, FetchedResponse
from aiogroup.protocol.types import TopicPartition

__all__ = ["FetchResponseDecoder", "decode_fetch_response"]

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_TOP = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)
_PART_V4 = struct.Struct(">ihqq")  # partition, error_code, high_watermark, last_stable_offset
_PART_V5 = struct.Struct(">ihqqq")  # ... log_start_offset
_ABORTED = struct.Struct(">qq")  # producer_id, first_offset


def _uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise ValueError("varint longer than 5 bytes")


def _skip_tags(data: bytes | memoryview, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise ValueError("tagged fields run past the end")
    return pos


def decode_fetch_response(
    data: bytes | memoryview, version: int, *, header: bool = True
) -> FetchedResponse:
    """``data``: the answer after its length prefix (with the response header if ``header``);
    read in place: only each partition's records are copied out."""
    if not isinstance(data, memoryview):
        data = memoryview(data)
    if not 4 <= version <= 12:
        raise ValueError(f"Fetch v{version} is not read here")
    flexible = version >= 12
    pos = 0
    if header:
        pos = 4  # correlation_id (the transport has read it)
        if flexible:
            pos = _skip_tags(data, pos)
    error_code = session_id = 0
    if version >= 7:
        _throttle, error_code, session_id = _TOP.unpack_from(data, pos)
        pos += 10
    else:
        pos += 4
    part_struct = _PART_V5 if version >= 5 else _PART_V4
    part_size = part_struct.size
    unpack_part = part_struct.unpack_from
    unpack_i32 = _I32.unpack_from
    replica = version >= 11
    partitions: list[FetchedPartition] = []
    if flexible:
        topics, pos = _uvarint(data, pos)
        topics -= 1
    else:
        (topics,) = unpack_i32(data, pos)
        pos += 4
    for _ in range(max(topics, 0)):
        if flexible:
            length, pos = _uvarint(data, pos)
            length -= 1
        else:
            (length,) = _I16.unpack_from(data, pos)
            pos += 2
        if length < 0 or pos + length > len(data):
            raise ValueError("topic name cut short or null")
        topic = str(data[pos : pos + length], "utf-8")
        pos += length
        if flexible:
            count, pos = _uvarint(data, pos)
            count -= 1
        else:
            (count,) = unpack_i32(data, pos)
            pos += 4
        for _ in range(max(count, 0)):
            fields = unpack_part(data, pos)
            pos += part_size
            if flexible:
                n, pos = _uvarint(data, pos)
                n -= 1
            else:
                (n,) = unpack_i32(data, pos)
                pos += 4
            aborted: list[tuple[int, int]] | None = None
            if n > 0:
                aborted = []
                for _ in range(n):
                    aborted.append(_ABORTED.unpack_from(data, pos))
                    pos += 16
                    if flexible:
                        pos = _skip_tags(data, pos)
            preferred = -1
            if replica:
                (preferred,) = unpack_i32(data, pos)
                pos += 4
            if flexible:
                size, pos = _uvarint(data, pos)
                size -= 1
            else:
                (size,) = unpack_i32(data, pos)
                pos += 4
            records: bytes | None = None
            if size >= 0:
                end = pos + size
                if end > len(data):
                    raise ValueError("records cut short")
                records = data[pos:end].tobytes()
                pos = end
            if flexible:
                pos = _skip_tags(data, pos)
            partitions.append(
                FetchedPartition(
                    tp=TopicPartition(topic, fields[0]),
                    error_code=fields[1],
                    high_watermark=fields[2],
                    last_stable_offset=fields[3],
                    log_start_offset=fields[4] if version >= 5 else -1,
                    aborted_transactions=aborted,
                    records=records,
                    preferred_read_replica=preferred,
                )
            )
        if flexible:
            pos = _skip_tags(data, pos)
    if flexible:
        pos = _skip_tags(data, pos)
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} bytes left after the Fetch response")
    return FetchedResponse(error_code, session_id, partitions)


class FetchResponseDecoder:
    """Stands where kafka-python's ``FetchResponse`` class stands for the transport:
    ``decode(data, version=..., header=True)`` gives a
    :class:`~aiogroup.consumer.state.FetchedResponse`."""

    API_KEY = 1

    @staticmethod
    def parse_header(stream: Any, version: int) -> None:
        """Move ``stream`` past the response header: a correlation id, then from v12 (flexible)
        its tagged fields. The transport reads only the body after it, without a copy."""
        data = memoryview(stream.getvalue())
        pos = stream.tell() + 4
        if version >= 12:
            pos = _skip_tags(data, pos)
        if pos > len(data):
            raise ValueError("response header cut short")
        stream.seek(pos)

    @staticmethod
    def decode(data: Any, version: int, header: bool = True) -> FetchedResponse:
        return decode_fetch_response(data, version, header=header)
