"""Record batches for tests, built with aiokafka's C builder (what producers send)."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from aiokafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.util import calc_crc32c

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
ABORT, COMMIT = 0, 1

Record = tuple[bytes | None, bytes | None]


def batch(
    records: Sequence[Record | bytes],
    base_offset: int = 0,
    *,
    compression: int = 0,
    producer_id: int = -1,
    transactional: bool = False,
    timestamp: int = 1_000,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> bytes:
    """One v2 batch holding ``records`` (values, or (key, value)) from ``base_offset``."""
    builder = DefaultRecordBatchBuilder(
        2,
        compression,
        int(transactional),
        producer_id,
        0 if producer_id >= 0 else -1,
        0 if producer_id >= 0 else -1,
        1 << 22,
    )
    for i, rec in enumerate(records):
        key, value = (None, rec) if isinstance(rec, bytes) else rec
        builder.append(i, timestamp + i, key, value, list(headers))
    data = bytearray(builder.build())
    struct.pack_into(">q", data, 0, base_offset)  # outside the CRC, as the broker does
    return bytes(data)


def control_batch(offset: int, producer_id: int, kind: int) -> bytes:
    """A transaction marker (ABORT or COMMIT) at ``offset`` for ``producer_id``."""
    data = bytearray(
        batch(
            [(struct.pack(">hh", 0, kind), struct.pack(">hi", 0, 0))],
            offset,
            producer_id=producer_id,
            transactional=True,
        )
    )
    (attributes,) = struct.unpack_from(">h", data, 21)
    struct.pack_into(">h", data, 21, attributes | 0x20)  # isControlBatch
    struct.pack_into(">I", data, 17, calc_crc32c(bytes(data[21:])))
    return bytes(data)


def corrupt(data: bytes, at: int = 70) -> bytes:
    """``data`` with one byte flipped inside the CRC's range (the CRC no longer matches)."""
    out = bytearray(data)
    out[at] ^= 0x01
    return bytes(out)
