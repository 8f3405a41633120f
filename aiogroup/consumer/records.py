"""Records: one partition's fetched bytes turned into :class:`ConsumerRecord` values (sans-I/O).

Batches are framed by aiokafka's record reader (``aiokafka.record``: record batches v0-v2,
gzip/snappy/lz4/zstd, CRC-32C). The records of a v2 batch are decoded by aiogroup's C decoder
(``_native_records.c``, compiled at install when a C compiler is there; :data:`NATIVE` says
whether it was), which builds each :class:`ConsumerRecord` straight from the batch's bytes;
without it, or with ``AIOGROUP_PURE_PYTHON=1`` in the environment, aiokafka's reader decodes
them, with the same result. This module adds what a consumer needs around them:

- **lazily, batch by batch**: a :class:`PartitionRecords` holds the raw bytes of one partition
  from one Fetch response and decodes a batch only when the application asks for records, so
  the prefetch buffer holds compact bytes, not Python objects;
- **positions**: records before the fetch position are skipped (a compressed batch starts
  before it); after a batch, the position moves to the batch's next offset even if its last
  records were compacted away, so a compacted or control-only tail is never fetched twice;
- **transactions** (KIP-98): control batches are never returned; under ``read_committed`` the
  batches of aborted transactions are skipped, using the response's aborted-transaction list
  (a producer's batches are aborted from its ``first_offset`` until its ABORT marker). The
  broker stops a ``read_committed`` fetch at the last stable offset itself;
- **CRC-32C** (v2 batches, ``check_crcs``): with the optional ``crc32c`` package on a CPU
  that computes it in hardware (SSE4.2, ARMv8: ``pip install 'aiogroup[crc32c]'``) a batch's
  checksum is computed here, over the batch's bytes in place, about ten times faster than
  aiokafka's table-driven one (which is used otherwise, and for legacy v0/v1 entries);
- **bad input** raises :class:`~aiogroup.consumer.errors.CorruptRecordError` naming the
  partition and the offset: a CRC mismatch, a first batch cut short (KIP-74 brokers always
  send at least one whole batch, so that is a truncated response, not a large record), or
  anything the decoder refuses. A deserializer that raises gives
  :class:`~aiogroup.consumer.errors.RecordDeserializationError` at that record's offset. In
  both cases the records before it are returned and the position stays at the bad offset.
"""

from __future__ import annotations

import importlib
import os
import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from itertools import chain, islice
from typing import Any, NamedTuple

from aiogroup.consumer.errors import (
    CorruptRecordError,
    RecordDeserializationError,
    RecordError,
    UnsupportedCodecError,
)
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "AHEAD",
    "AHEAD_BELOW",
    "NATIVE",
    "ConsumerRecord",
    "Deserializer",
    "PartitionRecords",
    "count_records",
    "next_fetch_offset",
]

#: Called with the raw key or value (``None`` for a null one, as aiokafka does).
Deserializer = Callable[[Any], Any]

#: Reads of fewer records than this (``getone()``) convert ``AHEAD`` records at once.
AHEAD_BELOW = 8
AHEAD = 128

_HEADER = struct.Struct(">qi")  # baseOffset / offset, batchLength / message size
_LAST_DELTA = struct.Struct(">i")
_RECORDS_COUNT_AT = 57  # a v2 batch's recordsCount, after baseSequence
_CONTROL_KEY = struct.Struct(">hh")  # version, type (0 = ABORT, 1 = COMMIT)
_LOG_OVERHEAD = 12
_MAGIC_AT = 16
_ABORT = 0

_new = tuple.__new__
_CRC = struct.Struct(">I")
_CRC_AT = 17  # a v2 batch's crc, after baseOffset, batchLength, partitionLeaderEpoch, magic
_CRC_FROM = 21  # the crc covers the batch from its attributes to its end

#: CRC-32C in hardware, when the optional ``crc32c`` package has it (not its software one).
_hardware_crc32c: Callable[[Any], int] | None
try:
    _crc32c_module: Any = importlib.import_module("crc32c")
    _hardware_crc32c = _crc32c_module.crc32c if _crc32c_module.hardware_based else None
except ImportError:  # pragma: no cover - depends on the installation
    _hardware_crc32c = None

#: Codecs by attribute value (the low three bits).
_CODECS = {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}

#: A v2 batch's header: baseOffset, batchLength, partitionLeaderEpoch, magic, crc,
#: attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, producerEpoch,
#: baseSequence, recordsCount; its records follow.
_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_RECORDS_AT = _V2_HEADER.size

#: The C decoder of a v2 batch's records (``_native_records.c``), when it was built at
#: install and ``AIOGROUP_PURE_PYTHON`` is not set; aiokafka's reader decodes them otherwise.
_native_reader: Any
try:
    if os.environ.get("AIOGROUP_PURE_PYTHON"):
        raise ImportError("AIOGROUP_PURE_PYTHON is set")
    _native_reader = importlib.import_module("aiogroup.consumer._native_records").RecordReader
except ImportError:  # pragma: no cover - depends on the installation
    _native_reader = None

#: Whether records are decoded by the C decoder (see ``_native_reader``).
NATIVE = _native_reader is not None


@cache
def _memory_records() -> Any:
    """aiokafka's record reader, loaded with the first response read, not at import (it
    loads aiokafka's codecs: cramjam)."""
    from aiokafka.record.memory_records import MemoryRecords

    return MemoryRecords


@cache
def _decompressor(codec: int) -> Callable[[Any], bytes]:
    """aiokafka's decompression function for a codec (by attribute value)."""
    from aiokafka import codec as codecs

    name = _CODECS.get(codec)
    if name is None:
        raise ValueError(f"unknown compression codec {codec}")
    decode: Callable[[Any], bytes] = getattr(codecs, f"{name}_decode")
    if name == "gzip":
        return decode
    return lambda body: decode(bytes(body))


@cache
def _missing_codecs() -> dict[int, str]:
    """The codecs this installation lacks (by attribute value)."""
    from aiokafka import codec

    return {
        code: name
        for code, name in _CODECS.items()
        if not getattr(codec, f"has_{name}", lambda: False)()
    }


def _is_v2(batch: Any) -> bool:
    return type(batch).__name__ == "DefaultRecordBatch"


class ConsumerRecord(NamedTuple):
    """One record, with aiokafka's field names (``checksum`` is always None for v2 batches)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    #: 0: CreateTime, 1: LogAppendTime.
    timestamp_type: int
    key: Any
    value: Any
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    headers: tuple[tuple[str, bytes | None], ...]


def next_fetch_offset(data: bytes | memoryview) -> int | None:
    """The offset after the last complete batch in ``data`` (``None``: no complete batch).

    Reads only batch headers (no decoding): a v2 batch ends at ``baseOffset +
    lastOffsetDelta + 1``; a legacy (v0/v1) entry carries its last offset. A trailing partial
    batch (a Fetch response may cut the last one) is ignored.
    """
    end = len(data)
    pos = 0
    result: int | None = None
    unpack_header = _HEADER.unpack_from
    unpack_delta = _LAST_DELTA.unpack_from
    while end - pos >= _LOG_OVERHEAD + 5:
        base, length = unpack_header(data, pos)
        size = _LOG_OVERHEAD + length
        if length <= 0 or pos + size > end:
            break
        if data[pos + _MAGIC_AT] >= 2:
            if length < 27:  # shorter than the v2 header up to lastOffsetDelta
                break
            (delta,) = unpack_delta(data, pos + 23)
            result = base + delta + 1
        else:
            result = base + 1
        pos += size
    return result


def count_records(data: bytes | memoryview) -> int:
    """How many records the complete batches of ``data`` hold, from their headers only (a v2
    batch's ``recordsCount``, control records included; a legacy entry counts one)."""
    end = len(data)
    pos = 0
    count = 0
    unpack_header = _HEADER.unpack_from
    unpack_count = _LAST_DELTA.unpack_from
    while end - pos >= _LOG_OVERHEAD + 5:
        _base, length = unpack_header(data, pos)
        size = _LOG_OVERHEAD + length
        if length <= 0 or pos + size > end:
            break
        if data[pos + _MAGIC_AT] >= 2:
            if size < _RECORDS_COUNT_AT + 4:
                break
            count += unpack_count(data, pos + _RECORDS_COUNT_AT)[0]
        else:
            count += 1
        pos += size
    return count


class PartitionRecords:
    """One partition's records from one Fetch response (Java's ``CompletedFetch``).

    ``position`` is where the application stands in this data: the next offset it has not
    been given. :meth:`drain` returns up to ``max_records`` records and moves it.
    """

    __slots__ = (
        "_abort_index",
        "_aborted",
        "_aborted_producers",
        "_ahead",
        "_ahead_at",
        "_ahead_end",
        "_ahead_error",
        "_at",
        "_batches",
        "_check_crcs",
        "_data",
        "_done",
        "_held",
        "_iter",
        "_native_batch",
        "_pending_end",
        "_read_any",
        "_read_committed",
        "_ts_type",
        "fetch_offset",
        "position",
        "size",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        data: bytes,
        fetch_offset: int,
        *,
        aborted_transactions: Sequence[tuple[int, int]] | None = None,
        read_committed: bool = False,
        check_crcs: bool = True,
    ) -> None:
        self.tp = tp
        self.size = len(data)
        self.fetch_offset = fetch_offset
        self.position = fetch_offset
        self._done = False
        self._batches: Any = _memory_records()(data)
        # Where the next batch starts in ``data`` (the batches come in order, back to back).
        self._data = memoryview(data)
        self._at = 0
        # The batch being read: its record iterator (records are decoded one at a time, so
        # none outlives its conversion) and a record taken from it but not returned yet.
        self._iter: Iterator[Any] | None = None
        self._held: Any = None
        # Whether ``_iter`` is the C decoder's reader (its records are ConsumerRecords already).
        self._native_batch = False
        self._ts_type = 0
        self._pending_end = fetch_offset
        self._read_any = False
        self._check_crcs = check_crcs
        self._read_committed = read_committed
        self._aborted = sorted(aborted_transactions or (), key=lambda a: a[1])
        self._abort_index = 0
        self._aborted_producers: set[int] = set()
        # Small reads (getone): records converted ahead, handed out one by one from
        # ``_ahead[_ahead_at:]``; the position they all lead to (past what the conversion
        # skipped) and the error met after them, held until they are handed out.
        self._ahead: list[ConsumerRecord] = []
        self._ahead_at = 0
        self._ahead_end = fetch_offset
        self._ahead_error: RecordError | None = None

    def next_ahead(self) -> ConsumerRecord | None:
        """The next record converted ahead, unless it is the last of them (whose hand-out
        settles the position and any error held: :meth:`drain` does that); None then."""
        at = self._ahead_at
        ahead = self._ahead
        if at + 1 >= len(ahead):
            return None
        record = ahead[at]
        self._ahead_at = at + 1
        self.position = record.offset + 1
        return record

    def drain(
        self,
        out: list[ConsumerRecord],
        max_records: int,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> None:
        """Append up to ``max_records`` records to ``out``, moving :attr:`position`.

        Raises :class:`CorruptRecordError` or :class:`RecordDeserializationError` after
        appending the records before the bad one; :attr:`position` is then the bad offset.

        A read of fewer than ``AHEAD_BELOW`` records without deserializers (``getone()``)
        converts up to ``AHEAD`` records at once and hands them out from that list (one
        conversion loop per ``AHEAD`` records, not one per record); :attr:`position` still
        moves record by record, so nothing outside sees the difference.
        """
        if self._ahead_at < len(self._ahead):
            max_records -= self._hand_ahead(out, max_records)
            if max_records <= 0 or self._ahead_at < len(self._ahead):
                return
        if max_records < AHEAD_BELOW and key_deserializer is None and value_deserializer is None:
            self._fill_ahead()
            self._hand_ahead(out, max_records)
            return
        self._drain(out, max_records, key_deserializer, value_deserializer)

    def _fill_ahead(self) -> None:
        """Convert up to ``AHEAD`` records into ``_ahead`` without moving :attr:`position`."""
        start = self.position
        ahead: list[ConsumerRecord] = []
        try:
            self._drain(ahead, AHEAD, None, None)
        except RecordError as exc:  # raised once the records before it are handed out
            self._ahead_error = exc
        self._ahead, self._ahead_at = ahead, 0
        self._ahead_end = self.position
        self.position = start

    def _hand_ahead(self, out: list[ConsumerRecord], count: int) -> int:
        """Move up to ``count`` records converted ahead to ``out``; how many. The last one
        takes :attr:`position` where the conversion stopped, and raises its error, if any."""
        at = self._ahead_at
        ahead = self._ahead
        taken = ahead[at : at + count]
        at += len(taken)
        self._ahead_at = at
        out.extend(taken)
        if taken:
            self.position = taken[-1].offset + 1
        if at >= len(ahead):
            self._ahead, self._ahead_at = [], 0
            self.position = self._ahead_end
            error, self._ahead_error = self._ahead_error, None
            if error is not None:
                raise error
        return len(taken)

    def _drain(
        self,
        out: list[ConsumerRecord],
        max_records: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        limit = len(out) + max_records
        while len(out) < limit:
            if self._iter is None:
                if not self._next_batch():
                    return
                continue
            if key_deserializer is None and value_deserializer is None and self._ts_type >= 0:
                ended = self._convert(out, limit - len(out))
            else:
                ended = self._convert_deserialized(
                    out, limit - len(out), key_deserializer, value_deserializer
                )
            if ended or self.position >= self._pending_end:
                # The batch is done (read to its last offset: known now, not by the next call,
                # which a partition read to exactly ``max_records`` waited for, holding its
                # bytes, issue 29): step over what compaction removed from its end.
                self._iter = None
                if self._pending_end > self.position:
                    self.position = self._pending_end
                if not self._batches.has_next():
                    self._done = True  # the last batch

    @property
    def exhausted(self) -> bool:
        """Nothing is left to hand out: the last batch is read (or the data is bad) and no
        record converted ahead waits."""
        return self._done and self._ahead_at >= len(self._ahead)

    @property
    def has_pending(self) -> bool:
        """A batch is being read (records of it may remain), or records converted ahead wait."""
        return self._iter is not None or self._ahead_at < len(self._ahead)

    # -- batches --------------------------------------------------------------------------

    def _corrupt(self, message: str, offset: int) -> CorruptRecordError:
        self._done = True
        return CorruptRecordError(message, partition=self.tp, offset=offset)

    def _next_batch(self) -> bool:
        """Load the next batch that has records for the application; False at the end."""
        while True:
            try:
                batch = self._batches.next_batch()
            except Exception as exc:  # aiokafka raises its own and builtin errors
                raise self._corrupt(f"undecodable record batch: {exc!r}", self.position) from exc
            if batch is None:
                if not self._read_any and self.size > 0:
                    raise self._corrupt(
                        f"truncated fetch response: {self.size} bytes hold no complete batch",
                        self.position,
                    )
                self._done = True
                return False
            self._read_any = True
            start = self._at
            try:
                next_offset = int(batch.next_offset)
                base, length = _HEADER.unpack_from(self._data, start)
                end = start + _LOG_OVERHEAD + length
                self._at = end
                if self._check_crcs and not self._crc_ok(batch, base, start, end):
                    raise self._corrupt("record batch CRC mismatch", self.position)
            except CorruptRecordError:
                raise
            except Exception as exc:
                raise self._corrupt(f"undecodable record batch: {exc!r}", self.position) from exc
            if next_offset <= self.position:
                continue  # wholly before the position (the fetch started inside a batch)
            control = bool(batch.is_control_batch)
            if (
                self._read_committed
                and batch.producer_id is not None
                and self._skip_aborted(batch, control)
            ):
                self.position = next_offset
                continue
            if control:
                self.position = next_offset
                continue
            if _missing_codecs():
                missing = _missing_codecs().get(int(getattr(batch, "compression_type", 0)))
                if missing is not None:
                    self._done = True
                    raise UnsupportedCodecError(
                        f"a {missing} record batch needs cramjam "
                        f"(pip install 'aiogroup[compression]')",
                        partition=self.tp,
                        offset=self.position,
                    )
            held = None
            v2 = _is_v2(batch)
            try:
                native = self._native_records(batch, start, end) if v2 else None
                # Without it: iter() sets the batch up (decompression) and returns the batch
                # itself, which refuses a second iter(): wrap its __next__ in a C-level
                # iterator that islice may call iter() on.
                iterator: Iterator[Any] = (
                    native if native is not None else iter(iter(batch).__next__, None)
                )
                if not v2 or batch.base_offset < self.position:
                    # A compressed batch comes whole even when the fetch starts inside it.
                    for record in iterator:
                        if record.offset >= self.position:
                            held = record
                            break
                else:
                    held = next(iterator, None)
            except Exception as exc:
                raise self._corrupt(f"undecodable records: {exc!r}", self.position) from exc
            self._pending_end = next_offset
            if held is None:
                self.position = next_offset
                continue
            self._iter = iterator
            self._held = held
            self._native_batch = native is not None
            # v2 batches carry the timestamp type once for all their records.
            self._ts_type = int(batch.timestamp_type) if v2 else -1
            return True

    def _crc_ok(self, batch: Any, base: int, start: int, end: int) -> bool:
        """Check the CRC of ``batch``, which is ``data[start:end]`` with ``base`` its header's
        base offset: in hardware where possible, else with aiokafka's reader."""
        data = self._data
        if (
            _hardware_crc32c is not None
            and data[start + _MAGIC_AT] >= 2
            and base == batch.base_offset
            and end <= len(data)
        ):
            return bool(
                _hardware_crc32c(data[start + _CRC_FROM : end])
                == _CRC.unpack_from(data, start + _CRC_AT)[0]
            )
        return bool(batch.validate_crc())

    def _native_records(self, batch: Any, start: int, end: int) -> Any:
        """The C decoder's reader over the v2 ``batch`` at ``data[start:end]`` (decompressed
        first, with aiokafka's codecs); None without the decoder."""
        data = self._data
        if _native_reader is None or end > len(data) or end - start < _V2_RECORDS_AT:
            return None
        (base, _, _, magic, _, attributes, _, first_ts, max_ts, _, _, _, count) = (
            _V2_HEADER.unpack_from(data, start)
        )
        if magic != 2 or base != batch.base_offset:
            return None
        body: Any = data[start + _V2_RECORDS_AT : end]
        codec = attributes & 0x07
        if codec:
            body = _decompressor(codec)(body)
        topic, partition = self.tp
        return _native_reader(
            ConsumerRecord,
            topic,
            partition,
            (attributes >> 3) & 1,
            body,
            base,
            first_ts,
            max_ts,
            count,
        )

    def _skip_aborted(self, batch: Any, control: bool) -> bool:
        """KIP-98 read_committed: is this batch part of an aborted transaction?"""
        base = batch.base_offset
        aborted = self._aborted
        while self._abort_index < len(aborted) and aborted[self._abort_index][1] <= base:
            self._aborted_producers.add(aborted[self._abort_index][0])
            self._abort_index += 1
        producer_id = batch.producer_id
        if control:
            if self._is_abort_marker(batch):
                # Kafka may send an ABORT marker for a producer with no aborted batches here.
                self._aborted_producers.discard(producer_id)
            return False
        return bool(batch.is_transactional) and producer_id in self._aborted_producers

    def _is_abort_marker(self, batch: Any) -> bool:
        try:
            records = list(batch)
            key = records[0].key if records else None
            if key is None or len(key) < _CONTROL_KEY.size:
                raise ValueError(f"control record key {key!r}")
            _version, kind = _CONTROL_KEY.unpack_from(key)
        except Exception as exc:
            raise self._corrupt(f"malformed control batch: {exc!r}", self.position) from exc
        return bool(kind == _ABORT)

    # -- records --------------------------------------------------------------------------

    def _convert(self, out: list[ConsumerRecord], count: int) -> bool:
        """Append up to ``count`` records of the current batch; True if it ended."""
        if self._native_batch:
            return self._take_native(out, count)
        iterator = self._iter
        assert iterator is not None
        topic, partition = self.tp
        append = out.append
        cls = ConsumerRecord
        first = len(out)
        held, self._held = self._held, None
        records: Iterable[Any] = (
            islice(iterator, count) if held is None else chain((held,), islice(iterator, count - 1))
        )
        ts_type = self._ts_type
        try:
            for r in records:
                k = r.key
                v = r.value
                h = r.headers
                append(
                    _new(
                        cls,
                        (
                            topic,
                            partition,
                            r.offset,
                            r.timestamp,
                            ts_type,
                            k,
                            v,
                            None,
                            -1 if k is None else len(k),
                            -1 if v is None else len(v),
                            tuple(h) if h else (),
                        ),
                    )
                )
        except Exception as exc:  # the reader refused a record inside the batch
            if len(out) > first:
                self.position = out[-1].offset + 1
            raise self._corrupt(f"undecodable records: {exc!r}", self.position) from exc
        got = len(out) - first
        if got:
            self.position = out[-1].offset + 1
        return got < count

    def _take_native(self, out: list[ConsumerRecord], count: int) -> bool:
        """:meth:`_convert` with the C decoder, which appends ConsumerRecords itself and
        knows when the batch has no record left (also when it gave exactly ``count``)."""
        reader = self._iter
        first = len(out)
        held, self._held = self._held, None
        if held is not None:
            out.append(held)
            count -= 1
        try:
            ended = bool(reader.take(out, count))  # type: ignore[union-attr]
        except Exception as exc:  # the decoder refused a record inside the batch
            if len(out) > first:
                self.position = out[-1].offset + 1
            raise self._corrupt(f"undecodable records: {exc!r}", self.position) from exc
        if len(out) > first:
            self.position = out[-1].offset + 1
        return ended

    def _convert_deserialized(
        self,
        out: list[ConsumerRecord],
        count: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> bool:
        iterator = self._iter
        assert iterator is not None
        topic, partition = self.tp
        append = out.append
        cls = ConsumerRecord
        got = 0
        while got < count:
            r = self._held
            if r is not None:
                self._held = None
            else:
                try:
                    r = next(iterator, None)
                except Exception as exc:
                    raise self._corrupt(f"undecodable records: {exc!r}", self.position) from exc
                if r is None:
                    return True
            k = r.key
            v = r.value
            try:
                key = k if key_deserializer is None else key_deserializer(k)
                value = v if value_deserializer is None else value_deserializer(v)
            except Exception as exc:
                self._held = r  # not advanced past it: the next drain raises again
                self.position = r.offset
                raise RecordDeserializationError(
                    f"deserializer raised {exc!r}", partition=self.tp, offset=r.offset
                ) from exc
            append(
                _new(
                    cls,
                    (
                        topic,
                        partition,
                        r.offset,
                        r.timestamp,
                        r.timestamp_type if self._ts_type < 0 else self._ts_type,
                        key,
                        value,
                        None,
                        -1 if k is None else len(k),
                        -1 if v is None else len(v),
                        tuple(r.headers),
                    ),
                )
            )
            self.position = r.offset + 1
            got += 1
        return False
