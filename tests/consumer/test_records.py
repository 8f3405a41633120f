"""Fetched bytes to records: codecs, positions, transactions, and bad input (sans-I/O)."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.record.util import calc_crc32c

from aiogroup.consumer.errors import (
    CorruptRecordError,
    RecordDeserializationError,
    RecordError,
    UnsupportedCodecError,
)
from aiogroup.consumer.records import ConsumerRecord, PartitionRecords, next_fetch_offset
from aiogroup.protocol.types import TopicPartition

from .batches import ABORT, COMMIT, GZIP, LZ4, SNAPPY, ZSTD, batch, control_batch, corrupt

TP = TopicPartition("orders", 3)


@pytest.fixture(autouse=True, scope="module", params=["native", "aiokafka"])
def decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    """Every test here runs with the C decoder of v2 records and with aiokafka's reader."""
    import aiogroup.consumer.records as records_module

    saved = records_module._native_reader
    if request.param == "native" and saved is None:
        if os.environ.get("CI"):  # CI builds it (gcc is there): its absence is a failure
            pytest.fail("the C records decoder was not built")
        pytest.skip("the C records decoder was not built (no C compiler at install)")
    if request.param == "aiokafka":
        records_module._native_reader = None
    yield request.param
    records_module._native_reader = saved


def read_all(pr: PartitionRecords, step: int = 1000, **kw: object) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    while not pr.exhausted:
        before = len(out)
        pr.drain(out, step, **kw)  # type: ignore[arg-type]
        if len(out) == before and not pr.exhausted:
            pr.drain(out, step, **kw)  # type: ignore[arg-type]
    return out


def test_records_carry_keys_values_headers_timestamps_and_sizes() -> None:
    data = batch([(b"k0", b"v0"), (None, b"value-1"), (b"k2", None)], 10, headers=[("h", b"x")])
    pr = PartitionRecords(TP, data, 10)
    records = read_all(pr)
    assert [r.offset for r in records] == [10, 11, 12]
    first = records[0]
    assert first == ConsumerRecord(
        "orders", 3, 10, 1000, 0, b"k0", b"v0", None, 2, 2, (("h", b"x"),)
    )
    assert (records[1].key, records[1].serialized_key_size, records[1].serialized_value_size) == (
        None,
        -1,
        7,
    )
    assert records[2].value is None and records[2].serialized_value_size == -1
    assert records[2].timestamp == 1002
    assert pr.position == 13


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_every_compression_codec(codec: int) -> None:
    values = [b"value-%d" % i * 20 for i in range(200)]
    data = batch(values, 0, compression=codec) + batch([b"tail"], 200, compression=codec)
    records = read_all(PartitionRecords(TP, data, 0))
    assert [r.value for r in records] == [*values, b"tail"]
    assert [r.offset for r in records] == list(range(201))


def test_a_codec_this_installation_lacks_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import aiogroup.consumer.records as records_module

    monkeypatch.setattr(records_module, "_missing_codecs", lambda: {SNAPPY: "snappy"})
    data = batch([b"a"], 0) + batch([b"b"], 1, compression=SNAPPY)
    pr = PartitionRecords(TP, data, 0)
    out: list[ConsumerRecord] = []
    with pytest.raises(UnsupportedCodecError, match="cramjam") as info:
        pr.drain(out, 10)
    assert [r.value for r in out] == [b"a"] and info.value.offset == 1 and pr.position == 1


def test_legacy_message_sets_v0_and_v1() -> None:
    from aiokafka.record.legacy_records import LegacyRecordBatchBuilder

    data = b""
    for magic in (0, 1):
        builder = LegacyRecordBatchBuilder(magic, 0, 1 << 20)
        for i in range(3):
            offset = magic * 3 + i
            builder.append(offset, timestamp=1000 + i, key=None, value=b"m%d-%d" % (magic, i))
        data += bytes(builder.build())
    assert next_fetch_offset(data) == 6
    pr = PartitionRecords(TP, data, 1)
    records = read_all(pr)
    assert [(r.offset, r.value) for r in records] == [
        (1, b"m0-1"),
        (2, b"m0-2"),
        (3, b"m1-0"),
        (4, b"m1-1"),
        (5, b"m1-2"),
    ]
    assert records[-1].timestamp == 1002 and pr.position == 6


def test_records_before_the_fetch_offset_are_skipped() -> None:
    # A compressed batch is returned whole even when the fetch starts inside it.
    data = batch([b"a", b"b", b"c", b"d"], 100, compression=GZIP)
    pr = PartitionRecords(TP, data, 102)
    assert [r.value for r in read_all(pr)] == [b"c", b"d"]
    assert pr.position == 104


def test_batches_wholly_before_the_position_are_skipped() -> None:
    data = batch([b"a", b"b"], 0) + batch([b"c"], 2)
    assert [r.offset for r in read_all(PartitionRecords(TP, data, 2))] == [2]


def test_drain_in_pieces_moves_the_position_record_by_record() -> None:
    data = batch([b"%d" % i for i in range(5)], 0) + batch([b"5", b"6"], 5)
    pr = PartitionRecords(TP, data, 0)
    out: list[ConsumerRecord] = []
    pr.drain(out, 2)
    assert [r.offset for r in out] == [0, 1] and pr.position == 2
    pr.drain(out, 3)
    assert [r.offset for r in out] == [0, 1, 2, 3, 4] and pr.position == 5
    pr.drain(out, 10)
    assert [r.offset for r in out] == list(range(7)) and pr.position == 7 and pr.exhausted


def _compacted(data: bytes, last_offset_delta: int) -> bytes:
    """A batch whose last records were compacted away: lastOffsetDelta beyond its records."""
    out = bytearray(data)
    struct.pack_into(">i", out, 23, last_offset_delta)
    struct.pack_into(">I", out, 17, calc_crc32c(bytes(out[21:])))
    return bytes(out)


def test_position_steps_over_a_compacted_tail() -> None:
    data = _compacted(batch([b"a", b"b"], 0), 5) + batch([b"g"], 6)
    pr = PartitionRecords(TP, data, 0)
    out: list[ConsumerRecord] = []
    pr.drain(out, 2)
    pr.drain(out, 1)
    assert [r.offset for r in out] == [0, 1, 6]
    assert next_fetch_offset(data) == 7
    only = PartitionRecords(TP, _compacted(batch([b"a"], 0), 3), 0)
    assert [r.offset for r in read_all(only)] == [0]
    assert only.position == 4  # the next fetch starts after the batch, not inside it


def test_control_batches_are_never_returned_and_moved_past() -> None:
    data = batch([b"t1"], 0, producer_id=5, transactional=True) + control_batch(1, 5, COMMIT)
    pr = PartitionRecords(TP, data, 0)
    assert [r.value for r in read_all(pr)] == [b"t1"]
    assert pr.position == 2


def _transactions() -> tuple[bytes, list[tuple[int, int]]]:
    data = (
        batch([b"plain"], 0)
        + batch([b"aborted-1", b"aborted-2"], 1, producer_id=7, transactional=True)
        + batch([b"committed-1"], 3, producer_id=8, transactional=True)
        + control_batch(4, 7, ABORT)
        + control_batch(5, 8, COMMIT)
        + batch([b"later-7"], 6, producer_id=7, transactional=True)
        + control_batch(7, 7, COMMIT)
        + batch([b"after"], 8)
    )
    return data, [(7, 1)]


def test_read_committed_skips_aborted_transactions() -> None:
    data, aborted = _transactions()
    pr = PartitionRecords(TP, data, 0, aborted_transactions=aborted, read_committed=True)
    records = read_all(pr)
    assert [r.value for r in records] == [b"plain", b"committed-1", b"later-7", b"after"]
    assert pr.position == 9


def test_read_uncommitted_returns_aborted_records_but_no_markers() -> None:
    data, aborted = _transactions()
    pr = PartitionRecords(TP, data, 0, aborted_transactions=aborted, read_committed=False)
    assert [r.offset for r in read_all(pr)] == [0, 1, 2, 3, 6, 8]


def test_abort_marker_without_aborted_batches_here_is_harmless() -> None:
    data = control_batch(0, 9, ABORT) + batch([b"x"], 1, producer_id=9, transactional=True)
    pr = PartitionRecords(TP, data, 0, aborted_transactions=[(9, 0)], read_committed=True)
    assert [r.value for r in read_all(pr)] == [b"x"]


def test_crc_mismatch_names_partition_and_offset_after_the_good_records() -> None:
    data = batch([b"a", b"b"], 0) + corrupt(batch([b"c", b"d"], 2))
    pr = PartitionRecords(TP, data, 0)
    out: list[ConsumerRecord] = []
    with pytest.raises(CorruptRecordError) as info:
        pr.drain(out, 100)
    assert [r.value for r in out] == [b"a", b"b"]
    assert info.value.partition == TP and info.value.offset == 2
    assert "orders-3" in str(info.value) and "offset 2" in str(info.value)
    assert pr.position == 2 and pr.exhausted
    assert info.value.error_code == 2


def test_crc_in_place_checks_each_batch_where_it_lies(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CRC-32C of the optional hardware package, played by a software one: it is handed
    # each v2 batch's bytes from its attributes to its end, in place, and catches a mismatch.
    seen: list[int] = []

    def crc(data: memoryview) -> int:
        seen.append(len(data))
        return int(calc_crc32c(bytes(data)))

    monkeypatch.setattr("aiogroup.consumer.records._hardware_crc32c", crc)
    first, second = batch([b"a", b"b"], 0), batch([b"c", b"d"], 2)
    pr = PartitionRecords(TP, first + corrupt(second) + batch([b"e"], 4), 0)
    out: list[ConsumerRecord] = []
    with pytest.raises(CorruptRecordError) as info:
        pr.drain(out, 100)
    assert [r.value for r in out] == [b"a", b"b"] and info.value.offset == 2
    assert seen == [len(first) - 21, len(second) - 21]
    seen.clear()
    good = first + second + batch([b"e"], 4)
    assert [r.value for r in read_all(PartitionRecords(TP, good[:-3], 0))] == [
        b"a",
        b"b",
        b"c",
        b"d",
    ]
    assert len(seen) == 2  # the cut last batch is never handed out, nor checked


def test_crc_is_not_checked_when_disabled() -> None:
    data = corrupt(batch([b"abcdefghijkl"], 0), at=len(batch([b"abcdefghijkl"], 0)) - 3)
    assert len(read_all(PartitionRecords(TP, data, 0, check_crcs=False))) == 1


def test_a_response_without_one_complete_batch_is_truncated() -> None:
    whole = batch([b"x" * 100], 40)
    pr = PartitionRecords(TP, whole[:50], 40)
    with pytest.raises(CorruptRecordError, match="truncated") as info:
        pr.drain([], 10)
    assert info.value.offset == 40 and pr.position == 40
    assert next_fetch_offset(whole[:50]) is None


def test_a_trailing_partial_batch_is_ignored() -> None:
    data = batch([b"a"], 0) + batch([b"b"], 1)[:30]
    pr = PartitionRecords(TP, data, 0)
    assert [r.value for r in read_all(pr)] == [b"a"]
    assert pr.position == 1 and next_fetch_offset(data) == 1


def test_deserializer_error_stops_at_the_record_and_does_not_advance() -> None:
    data = batch([b"1", b"2", b"x", b"4"], 0)
    pr = PartitionRecords(TP, data, 0)

    def value(raw: bytes | None) -> int:
        return int(raw or b"")

    out: list[ConsumerRecord] = []
    with pytest.raises(RecordDeserializationError) as info:
        pr.drain(out, 10, value_deserializer=value)
    assert [r.value for r in out] == [1, 2]
    assert info.value.offset == 2 and info.value.partition == TP
    assert isinstance(info.value.__cause__, ValueError)
    assert pr.position == 2
    with pytest.raises(RecordDeserializationError):  # the same record again: nothing skipped
        pr.drain([], 10, value_deserializer=value)
    assert pr.position == 2


def test_key_deserializer_sees_none_keys_as_aiokafka_does() -> None:
    seen: list[bytes | None] = []

    def key(raw: bytes | None) -> str:
        seen.append(raw)
        return "none" if raw is None else raw.decode()

    records = read_all(
        PartitionRecords(TP, batch([(None, b"a"), (b"k", b"b")], 0), 0), key_deserializer=key
    )
    assert [r.key for r in records] == ["none", "k"] and seen == [None, b"k"]


def test_next_fetch_offset() -> None:
    assert next_fetch_offset(b"") is None
    assert next_fetch_offset(batch([b"a", b"b", b"c"], 7)) == 10
    two = batch([b"a"], 0) + batch([b"b", b"c"], 1)
    assert next_fetch_offset(two) == 3
    assert next_fetch_offset(two + b"\x00" * 7) == 3
    assert next_fetch_offset(b"\x00" * 8 + b"\xff\xff\xff\xff" + b"\x00" * 60) is None


@given(st.binary(max_size=400))
def test_arbitrary_bytes_give_records_or_a_record_error(data: bytes) -> None:
    pr = PartitionRecords(TP, data, 0)
    with contextlib.suppress(RecordError):
        read_all(pr)
    next_fetch_offset(data)


_VALID = batch([b"a", b"bb"], 0) + batch([b"ccc"], 2, compression=GZIP) + control_batch(3, 4, ABORT)


@given(st.lists(st.tuples(st.integers(0, len(_VALID) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_batches_give_records_or_a_record_error(edits: list[tuple[int, int]]) -> None:
    data = bytearray(_VALID)
    for at, value in edits:
        data[at] = value
    for check_crcs in (True, False):
        pr = PartitionRecords(
            TP,
            bytes(data),
            0,
            check_crcs=check_crcs,
            aborted_transactions=[(4, 0)],
            read_committed=True,
        )
        try:
            records = read_all(pr)
        except RecordError:
            continue
        assert all(isinstance(r, ConsumerRecord) for r in records)


# -- small reads (getone): records converted ahead ---------------------------------------------


@st.composite
def logs(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]]]:
    """Batches back to back: plain, compressed, compacted at the tail, transactional with
    their markers (some aborted), and perhaps one corrupt batch; the aborted transactions."""
    data, offset, aborted = b"", 0, []
    for kind in draw(st.lists(st.sampled_from("pgctx"), min_size=1, max_size=8)):
        n = draw(st.integers(1, 150))
        values = [b"v%d" % (offset + i) for i in range(n)]
        if kind == "p":
            data += batch(values, offset)
        elif kind == "g":
            data += batch(values, offset, compression=GZIP)
        elif kind == "c":
            gap = draw(st.integers(1, 4))
            data += _compacted(batch(values, offset), n - 1 + gap)
            n += gap
        elif kind == "t":
            pid = 20 + offset
            data += batch(values, offset, producer_id=pid, transactional=True)
            abort = draw(st.booleans())
            data += control_batch(offset + n, pid, ABORT if abort else COMMIT)
            if abort:
                aborted.append((pid, offset))
            n += 1
        else:
            data += corrupt(batch([*values, b"pad", b"pad"], offset))
            n += 2
        offset += n
    return data, aborted


def _read(
    pr: PartitionRecords, steps: list[int], **kw: object
) -> tuple[list[int], list[int], object]:
    """Offsets handed out, the position after each drain, and the error met (type, offset)."""
    out: list[ConsumerRecord] = []
    positions: list[int] = []
    counts: list[int] = []
    error: object = None
    at = 0
    while not pr.exhausted:
        step = steps[at % len(steps)]
        at += 1
        before = len(out)
        try:
            pr.drain(out, step, **kw)  # type: ignore[arg-type]
        except RecordError as exc:
            error = (type(exc), exc.offset)
        positions.append(pr.position)
        counts.append(len(out))
        # the position never lags a record handed out
        assert len(out) == before or pr.position > out[-1].offset
        if error is not None:
            break
    offsets = [r.offset for r in out]
    for count, position in zip(counts, positions, strict=True):
        # ... nor passes one not handed out yet
        assert count == len(offsets) or position <= offsets[count]
    return offsets, positions, error


@given(logs(), st.lists(st.integers(1, 9), min_size=1, max_size=5), st.booleans())
def test_small_reads_hand_out_what_record_by_record_reads_do(
    log: tuple[bytes, list[tuple[int, int]]], steps: list[int], committed: bool
) -> None:
    """Records converted ahead (no deserializer) against the same reads converted one by one
    (a deserializer turns converting ahead off) and one large read: the same records, the
    same error, the same last position (past compacted tails and markers); in between, each
    position is past every record handed out and at or before the next one."""
    data, aborted = log
    kw = {"aborted_transactions": aborted, "read_committed": committed}
    ahead = _read(PartitionRecords(TP, data, 0, **kw), steps)  # type: ignore[arg-type]
    one_by_one = _read(
        PartitionRecords(TP, data, 0, **kw), steps, value_deserializer=lambda v: v  # type: ignore[arg-type]
    )
    whole = _read(PartitionRecords(TP, data, 0, **kw), [10_000])  # type: ignore[arg-type]
    for other in (one_by_one, whole):
        assert (ahead[0], ahead[2], ahead[1][-1:]) == (other[0], other[2], other[1][-1:])


def test_records_converted_ahead_come_one_by_one_then_the_error() -> None:
    data = batch([b"%d" % i for i in range(5)], 0) + corrupt(batch([b"x", b"y"], 5))
    pr = PartitionRecords(TP, data, 0)
    out: list[ConsumerRecord] = []
    pr.drain(out, 1)
    assert [r.offset for r in out] == [0] and pr.position == 1 and pr.has_pending
    got = [pr.next_ahead() for _ in range(4)]
    # the last one converted ahead is left to drain, which settles position and error
    assert [r.offset for r in got if r] == [1, 2, 3] and got[-1] is None and pr.position == 4
    assert not pr.exhausted
    with pytest.raises(CorruptRecordError) as info:
        pr.drain(out, 1)
    assert [r.offset for r in out] == [0, 4] and info.value.offset == 5 and pr.position == 5
    assert pr.exhausted
