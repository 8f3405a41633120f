"""The embedded broker's in-memory log (sans-I/O): batches, offsets, CRC, reads, ListOffsets."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from aiogroup.errors import CodecError, TruncatedError
from aiogroup.testing.embedded.log import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    CorruptBatchError,
    Log,
    PartitionLog,
    split_batches,
)


def batch(values: list[bytes], *, timestamp: int = 1000) -> bytes:
    """A v2 record batch as a producer sends it (offsets from 0)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for i, value in enumerate(values):
        builder.append(i, timestamp=timestamp + i, key=None, value=value, headers=[])
    return bytes(builder.build())


def decode(data: bytes) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    pos = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">i", data, pos + 8)
        b = DefaultRecordBatch(data[pos : pos + 12 + length])
        assert b.validate_crc()
        out.extend((r.offset, r.value) for r in b)
        pos += 12 + length
    return out


def test_append_assigns_offsets_and_keeps_crc_valid() -> None:
    log = PartitionLog()
    assert log.append(batch([b"a", b"b", b"c"])) == 0
    assert log.append(batch([b"d"])) == 3
    assert log.append(batch([b"e", b"f"])) == 4
    assert log.high_watermark == 6
    # The base offset rewrite is outside the CRC: every stored batch still validates.
    assert decode(log.read(0, 1 << 20)) == [
        (0, b"a"),
        (1, b"b"),
        (2, b"c"),
        (3, b"d"),
        (4, b"e"),
        (5, b"f"),
    ]


def test_read_returns_whole_batches_from_the_one_holding_the_offset() -> None:
    log = PartitionLog()
    for values in ([b"a", b"b", b"c"], [b"d"], [b"e", b"f"]):
        log.append(batch(values))
    # offset 1 lives in the first batch: the whole batch comes back (clients skip < offset).
    assert [o for o, _ in decode(log.read(1, 1 << 20))] == [0, 1, 2, 3, 4, 5]
    assert [o for o, _ in decode(log.read(3, 1 << 20))] == [3, 4, 5]
    assert log.read(6, 1 << 20) == b""


def test_read_respects_max_bytes_but_always_returns_one_batch() -> None:
    log = PartitionLog()
    sizes = []
    for i in range(4):
        raw = batch([bytes([65 + i]) * 100])
        sizes.append(len(raw))
        log.append(raw)
    # KIP-74: the first batch comes back even if it alone exceeds max_bytes.
    assert len(log.read(0, 1)) == sizes[0]
    assert len(log.read(0, sizes[0] + sizes[1])) == sizes[0] + sizes[1]
    assert len(log.read(0, sizes[0] + sizes[1] - 1)) == sizes[0]


def test_corrupt_crc_is_rejected_and_nothing_is_appended() -> None:
    good = batch([b"x"])
    bad = bytearray(batch([b"y"]))
    bad[-1] ^= 0xFF
    log = PartitionLog()
    with pytest.raises(CorruptBatchError, match="crc"):
        log.append(good + bytes(bad))
    assert log.high_watermark == 0 and log.batch_count == 0
    # With verification off the same bytes are accepted.
    assert log.append(bytes(bad), verify_crc=False) == 0


def test_wrong_magic_and_truncation_are_codec_errors() -> None:
    raw = bytearray(batch([b"x"]))
    raw[16] = 1
    with pytest.raises(CorruptBatchError, match="magic"):
        split_batches(bytes(raw))
    with pytest.raises(TruncatedError):
        split_batches(batch([b"x"])[:-3])
    with pytest.raises(TruncatedError):
        split_batches(b"\x00" * 20)
    small = bytearray(batch([b"x"]))
    struct.pack_into(">i", small, 8, 5)
    with pytest.raises(CodecError):
        split_batches(bytes(small))


def test_list_offsets_earliest_latest_and_by_timestamp() -> None:
    log = PartitionLog()
    log.append(batch([b"a", b"b"], timestamp=1000))  # offsets 0-1, ts 1000-1001
    log.append(batch([b"c"], timestamp=5000))  # offset 2, ts 5000
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP) == (0, -1)
    assert log.offset_for_timestamp(LATEST_TIMESTAMP) == (3, -1)
    assert log.offset_for_timestamp(1001) == (0, 1001)
    assert log.offset_for_timestamp(4000) == (2, 5000)
    assert log.offset_for_timestamp(9000) == (-1, -1)


def test_topics_create_delete_and_grow() -> None:
    log = Log()
    topic = log.create_topic("t", 2)
    assert log.partition("t", 1) is topic.partitions[1]
    assert log.partition("t", 2) is None and log.partition("nope", 0) is None
    log.add_partitions("t", 5)
    assert len(log.topics["t"].partitions) == 5
    assert log.delete_topic("t") and not log.delete_topic("t")
    with pytest.raises(CodecError):
        log.create_topic("", 1)
