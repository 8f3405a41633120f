"""The embedded broker's in-memory log: topics, partitions and record batches (magic v2).

Sans-I/O and clock-free. Batches are stored as the producer sent them; only the ``baseOffset``
field (bytes 0-7) is rewritten with the offset the log assigns, and ``partitionLeaderEpoch``
(bytes 12-15) with ours. The batch CRC-32C covers the bytes from ``attributes`` (byte 21) to the
end, so neither rewrite invalidates it; we verify the CRC on append (KIP-98 batch format).

Record batch v2 header layout (offsets in bytes)::

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordCount int32 | 61 records...
"""

from __future__ import annotations

import bisect
import struct
import uuid
from dataclasses import dataclass, field
from typing import Final

from kafka.record.util import calc_crc32c

from aiogroup.errors import InvalidFieldError, TruncatedError

__all__ = [
    "BATCH_HEADER_SIZE",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "CorruptBatchError",
    "Log",
    "PartitionLog",
    "Topic",
    "split_batches",
    "valid_topic_name",
]

BATCH_HEADER_SIZE: Final = 61
LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3  # KIP-734

_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")


class CorruptBatchError(InvalidFieldError):
    """Produced bytes that are not valid v2 record batches (Kafka: CORRUPT_MESSAGE, code 2)."""


@dataclass(frozen=True, slots=True)
class _Batch:
    base_offset: int
    last_offset: int
    max_timestamp: int
    data: bytes


def split_batches(records: bytes, *, verify_crc: bool = True) -> list[bytes]:
    """Split a Produce payload into v2 record batches, validating each one.

    Raises :class:`CorruptBatchError` for a wrong magic byte, a bad length or CRC, and
    :class:`TruncatedError` when the payload ends inside a batch.
    """
    view = memoryview(records)
    out: list[bytes] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < BATCH_HEADER_SIZE:
            raise TruncatedError("record batch header cut short", field="batch", offset=pos)
        (batch_length,) = _I32.unpack_from(view, pos + 8)
        total = 12 + batch_length
        if batch_length < BATCH_HEADER_SIZE - 12:
            raise CorruptBatchError(
                f"batchLength {batch_length} too small", field="batchLength", offset=pos + 8
            )
        if pos + total > len(view):
            raise TruncatedError("record batch cut short", field="records", offset=pos)
        magic = view[pos + 16]
        if magic != 2:
            raise CorruptBatchError(
                f"magic {magic} unsupported (only v2 batches)", field="magic", offset=pos + 16
            )
        if verify_crc:
            (crc,) = _U32.unpack_from(view, pos + 17)
            actual = calc_crc32c(view[pos + 21 : pos + total])
            if crc != actual:
                raise CorruptBatchError(
                    f"crc {crc:#010x} != computed {actual:#010x}", field="crc", offset=pos + 17
                )
        out.append(bytes(view[pos : pos + total]))
        pos += total
    return out


@dataclass(slots=True)
class PartitionLog:
    """One partition: an append-only list of batches with offsets assigned by the log."""

    leader_epoch: int = 0
    log_start_offset: int = 0
    high_watermark: int = 0
    _batches: list[_Batch] = field(default_factory=list)
    _last_offsets: list[int] = field(default_factory=list)

    def append(self, records: bytes, *, verify_crc: bool = True) -> int:
        """Append the batches in ``records``; return the base offset of the first one.

        Validation happens before anything is stored, so a bad payload appends nothing.
        """
        batches = split_batches(records, verify_crc=verify_crc)
        first = self.high_watermark
        for raw in batches:
            (last_delta,) = _I32.unpack_from(raw, 23)
            if last_delta < 0:
                raise CorruptBatchError(
                    f"lastOffsetDelta {last_delta} < 0", field="lastOffsetDelta", offset=23
                )
        for raw in batches:
            (last_delta,) = _I32.unpack_from(raw, 23)
            (max_ts,) = _I64.unpack_from(raw, 35)
            data = bytearray(raw)
            base = self.high_watermark
            _I64.pack_into(data, 0, base)  # outside the CRC: no re-computation needed
            _I32.pack_into(data, 12, self.leader_epoch)
            batch = _Batch(base, base + last_delta, max_ts, bytes(data))
            self._batches.append(batch)
            self._last_offsets.append(batch.last_offset)
            self.high_watermark = batch.last_offset + 1
        return first

    def read(self, offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing ``offset``, up to about ``max_bytes``.

        At least one batch is returned when any exists at or after ``offset``, even if it is
        larger than ``max_bytes`` (KIP-74), so consumers always make progress.
        """
        index = bisect.bisect_left(self._last_offsets, offset)
        out = bytearray()
        while index < len(self._batches):
            data = self._batches[index].data
            if out and len(out) + len(data) > max_bytes:
                break
            out += data
            index += 1
        return bytes(out)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int]:
        """ListOffsets: ``(offset, timestamp)`` for -1 latest, -2 earliest, -3 max timestamp or
        the first batch whose max timestamp is >= ``timestamp`` (``(-1, -1)`` if none)."""
        if timestamp == LATEST_TIMESTAMP:
            return self.high_watermark, -1
        if timestamp == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        if timestamp == MAX_TIMESTAMP:
            if not self._batches:
                return -1, -1
            best = max(self._batches, key=lambda b: b.max_timestamp)
            return best.last_offset, best.max_timestamp
        for batch in self._batches:
            if batch.max_timestamp >= timestamp:
                return batch.base_offset, batch.max_timestamp
        return -1, -1

    @property
    def batch_count(self) -> int:
        return len(self._batches)


@dataclass(slots=True)
class Topic:
    name: str
    partitions: list[PartitionLog]
    topic_id: uuid.UUID = field(default_factory=uuid.uuid4)


_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def valid_topic_name(name: str | None) -> bool:
    """Kafka's topic name rule (``Topic.validate``): 1 to 249 of ``[a-zA-Z0-9._-]``, and
    neither ``.`` nor ``..``."""
    return (
        bool(name)
        and name not in (".", "..")
        and len(name or "") <= 249
        and set(name or "") <= _LEGAL_TOPIC_CHARS
    )


class Log:
    """Every topic of the broker. Plain data; survives a broker restart."""

    def __init__(self) -> None:
        self.topics: dict[str, Topic] = {}
        #: Moves whenever a topic is created, deleted or grows (the coordinator's KIP-848
        #: groups are told the topics again when it moved).
        self.version = 0

    def create_topic(self, name: str, num_partitions: int) -> Topic:
        if not name or num_partitions < 1:
            raise InvalidFieldError(
                f"bad topic {name!r} with {num_partitions} partitions", field="topic"
            )
        topic = Topic(name, [PartitionLog() for _ in range(num_partitions)])
        self.topics[name] = topic
        self.version += 1
        return topic

    def delete_topic(self, name: str) -> bool:
        self.version += 1
        return self.topics.pop(name, None) is not None

    def add_partitions(self, name: str, count: int) -> None:
        topic = self.topics[name]
        while len(topic.partitions) < count:
            topic.partitions.append(PartitionLog())
        self.version += 1

    def partition(self, name: str, index: int) -> PartitionLog | None:
        topic = self.topics.get(name)
        if topic is None or not 0 <= index < len(topic.partitions):
            return None
        return topic.partitions[index]
