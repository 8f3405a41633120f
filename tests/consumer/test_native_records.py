"""The C decoder of v2 records (``_native_records.c``) against aiokafka's reader, and its
refusals of malformed records (sans-I/O)."""

from __future__ import annotations

import contextlib
import gc
import os
import struct
import sys
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import aiogroup.consumer.records as records_module
from aiogroup.consumer.errors import RecordError
from aiogroup.consumer.records import ConsumerRecord, PartitionRecords, count_records
from aiogroup.protocol.types import TopicPartition

from .batches import GZIP, LZ4, SNAPPY, ZSTD, batch

# CI builds the decoder (gcc is there): these tests fail there rather than skip without it.
pytestmark = pytest.mark.skipif(
    records_module._native_reader is None and not os.environ.get("CI"),
    reason="the C records decoder was not built (no C compiler at install)",
)

TP = TopicPartition("payments", 7)
RECORDS_AT = 61  # a v2 batch's records section starts after its header


def reader(data: bytes, *, count: int, ts_type: int = 0, base: int = 100) -> Any:
    """A RecordReader over a bare records section."""
    assert records_module._native_reader is not None
    return records_module._native_reader(
        ConsumerRecord, TP.topic, TP.partition, ts_type, data, base, 5_000, 9_000, count
    )


def section(data: bytes) -> bytes:
    """The records section of a single uncompressed v2 batch."""
    return data[RECORDS_AT:]


@contextlib.contextmanager
def aiokafka_reader() -> Iterator[None]:
    saved = records_module._native_reader
    records_module._native_reader = None
    try:
        yield
    finally:
        records_module._native_reader = saved


def read(data: bytes, fetch_offset: int, step: int, **kw: Any) -> tuple[list[Any], Any]:
    """Every record, read ``step`` at a time, and the error that stopped the reading."""
    pr = PartitionRecords(TP, data, fetch_offset, **kw)
    out: list[ConsumerRecord] = []
    try:
        while not pr.exhausted:
            pr.drain(out, step)
    except RecordError as exc:
        return out, (type(exc), exc.offset, pr.position)
    return out, pr.position


# -- the same records as aiokafka's reader ----------------------------------------------------

keys_values = st.one_of(st.none(), st.binary(max_size=40))
headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=12))), max_size=3
)


@st.composite
def logs(draw: st.DrawFn) -> bytes:
    """Batches back to back, each with its own codec, base offset, timestamp and headers."""
    out = b""
    offset = draw(st.integers(0, 2**40))
    for _ in range(draw(st.integers(1, 4))):
        records = draw(st.lists(st.tuples(keys_values, keys_values), min_size=1, max_size=30))
        data = batch(
            records,
            offset,
            compression=draw(st.sampled_from([0, 0, GZIP, SNAPPY, LZ4, ZSTD])),
            timestamp=draw(st.integers(-1, 2**42)),
            headers=draw(headers),
        )
        if draw(st.booleans()):  # LogAppendTime: every record takes the batch's max timestamp
            attributes = struct.unpack_from(">h", data, 21)[0] | 0x08
            data = data[:21] + struct.pack(">h", attributes) + data[23:]
        out += data
        offset += len(records)
    return out


@given(logs(), st.integers(0, 40), st.sampled_from([1, 3, 7, 500]))
def test_the_same_records_as_aiokafkas_reader(data: bytes, skip: int, step: int) -> None:
    first = struct.unpack_from(">q", data, 0)[0]
    native = read(data, first + skip, step, check_crcs=False)
    with aiokafka_reader():
        assert read(data, first + skip, step, check_crcs=False) == native
    total = count_records(data)
    assert [r.offset for r in native[0]] == list(range(first + skip, first + total))


@settings(max_examples=300)
@given(
    st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=4),
    st.integers(0, 200),
)
def test_malformed_records_give_the_records_before_them_then_a_record_error(
    edits: list[tuple[int, int]], cut: int
) -> None:
    """Bytes changed or cut inside the records (the CRC not checked, as a broker without
    CRCs or a bug upstream would deliver them): records, or a RecordError after the records
    before the bad one, with the position at the bad offset; never another exception."""
    good = batch([(b"k%d" % i, b"v" * i) for i in range(12)], 40, headers=[("h", b"x")])
    data = bytearray(good)
    for at, value in edits:
        data[RECORDS_AT + at % (len(good) - RECORDS_AT)] = value
    body = bytes(data)
    for candidate in (body, body[: len(body) - cut % (len(body) - RECORDS_AT)]):
        out, end = read(candidate, 40, 5, check_crcs=False)
        offsets = [r.offset for r in out]  # a changed offset delta is not detectable
        assert all(type(r) is ConsumerRecord for r in out)
        if isinstance(end, tuple):
            kind, offset, position = end
            assert issubclass(kind, RecordError)
            assert offset == position == (offsets[-1] + 1 if offsets else 40)


# -- refusals, each named -----------------------------------------------------------------------


def test_a_record_cut_short_is_refused_at_every_byte() -> None:
    body = section(batch([(b"key", b"value")], 0, headers=[("trace", b"abc")]))
    for end in range(len(body)):
        with pytest.raises(ValueError):
            list(reader(body[:end], count=1))
    assert [r.value for r in reader(body, count=1)] == [b"value"]


@pytest.mark.parametrize(
    ("body", "count", "message"),
    [
        (b"", 1, "1 of its records missing"),
        (section(batch([b"a"], 0)) + b"\x00", 1, "1 bytes follow"),
        (section(batch([b"a", b"b"], 0)), 1, "bytes follow"),
        (b"\xff\xff\xff\xff\xff\x01", 1, "longer than 5 bytes"),
        (b"\x7f", 1, "where 0 remain"),  # a negative length (zigzag -64)
        (b"\x00", 1, "without attributes"),
        (b"\x0c\x00\x00\x00\x01\x02a\x00", 1, "end inside its header count"),
        (b"\x0c\x00\x00\x00\x01\x01\x01", 1, "negative header count"),
    ],
)
def test_malformed_sections_are_named(body: bytes, count: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        list(reader(body, count=count))


def test_a_header_key_that_is_not_utf8_is_refused() -> None:
    body = bytearray(section(batch([b"v"], 0, headers=[("é", b"x")])))
    at = body.index("é".encode())
    body[at] = 0xFF
    with pytest.raises(UnicodeDecodeError):
        list(reader(bytes(body), count=1))


def test_fields_offsets_timestamps_and_headers() -> None:
    body = section(
        batch([(b"k", None), (None, b"vv")], 0, timestamp=7, headers=[("a", None), ("b", b"2")])
    )
    records = list(reader(body, count=2, base=2**33))
    assert records == [
        ConsumerRecord("payments", 7, 2**33, 5_000, 0, b"k", None, None, 1, -1,
                       (("a", None), ("b", b"2"))),
        ConsumerRecord("payments", 7, 2**33 + 1, 5_001, 0, None, b"vv", None, -1, 2,
                       (("a", None), ("b", b"2"))),
    ]  # fmt: skip
    appended = list(reader(body, count=2, ts_type=1))
    assert [(r.timestamp, r.timestamp_type) for r in appended] == [(9_000, 1), (9_000, 1)]
    assert all(type(r) is ConsumerRecord and hash(r) == hash(tuple(r)) for r in records)


def test_take_appends_and_says_when_the_batch_ends() -> None:
    body = section(batch([b"a", b"b", b"c"], 0))
    r = reader(body, count=3)
    out: list[Any] = ["already here"]
    assert r.take(out, 2) is False
    assert r.take(out, 1) is True  # known with the last record, not by a further call
    assert r.take(out, 5) is True
    assert [x if isinstance(x, str) else x.value for x in out] == ["already here", b"a", b"b", b"c"]
    with pytest.raises(TypeError):
        r.take((), 1)


def test_only_a_slotless_tuple_type_is_accepted() -> None:
    class WithDict(tuple):  # type: ignore[type-arg]
        pass

    assert records_module._native_reader is not None
    for cls in (dict, WithDict):
        with pytest.raises(TypeError):
            records_module._native_reader(cls, "t", 0, 0, b"", 0, 0, 0, 0)
    with pytest.raises(ValueError, match="negative record count"):
        records_module._native_reader(ConsumerRecord, "t", 0, 0, b"", 0, 0, 0, -1)


# -- no reference or memory kept ----------------------------------------------------------------


def test_no_reference_is_leaked_by_records_or_refusals() -> None:
    topic = "leak-check-topic"
    body = section(batch([(b"k", b"v" * 50)] * 50, 0, headers=[("h", b"x")]))
    bad = body[:-3]
    assert records_module._native_reader is not None

    def once() -> None:
        r = records_module._native_reader(ConsumerRecord, topic, 1, 0, body, 0, 0, 0, 50)
        out: list[Any] = []
        r.take(out, 100)
        r = records_module._native_reader(ConsumerRecord, topic, 1, 0, bad, 0, 0, 0, 50)
        with pytest.raises(ValueError):
            r.take(out, 100)

    once()
    gc.collect()
    before = (sys.getrefcount(topic), sys.getrefcount(ConsumerRecord))
    tracemalloc.start()
    try:
        for _ in range(200):
            once()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert (sys.getrefcount(topic), sys.getrefcount(ConsumerRecord)) == before
    assert grown < 64 * 1024, f"{grown} bytes still held after 20,000 records"
