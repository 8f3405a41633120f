"""Consumer-protocol Subscription and Assignment: layouts, versions, malformed input."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiogroup.errors import CodecError, InvalidFieldError, TruncatedError
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

from .wire import i16, i32, int32s, string

# A Subscription written field by field, independently of the codec.
V0_FIELDS = i32(2) + string("a") + string("b") + i32(2) + b"ud"
OWNED = i32(2) + string("a") + int32s([0, 3]) + string("b") + int32s([])
V1_FIELDS = V0_FIELDS + OWNED
V2_FIELDS = V1_FIELDS + i32(7)
V3_FIELDS = V2_FIELDS + string("rack-1")
FULL = Subscription(
    topics=["b", "a"],
    user_data=b"ud",
    owned_partitions={"b": [], "a": [3, 0]},
    generation_id=7,
    rack_id="rack-1",
)


@pytest.mark.parametrize(
    ("version", "body"),
    [(0, V0_FIELDS), (1, V1_FIELDS), (2, V2_FIELDS), (3, V3_FIELDS)],
)
def test_subscription_layout_per_version(version: int, body: bytes) -> None:
    wire = i16(version) + body
    assert encode_subscription(FULL, version) == wire
    sub = decode_subscription(wire)
    assert sub.version == version
    assert list(sub.topics) == ["a", "b"]
    assert sub.user_data == b"ud"
    # Fields the version does not carry take their defaults.
    assert sub.owned_partitions == ({"a": (0, 3), "b": ()} if version >= 1 else {})
    assert sub.generation_id == (7 if version >= 2 else -1)
    assert sub.rack_id == ("rack-1" if version >= 3 else None)


def test_default_encode_version_is_3() -> None:
    assert encode_subscription(FULL) == i16(3) + V3_FIELDS
    assert encode_assignment(Assignment({"t": [1]}))[:2] == i16(3)


def test_null_and_empty_user_data_and_rack() -> None:
    sub = Subscription(topics=["t"], user_data=None, rack_id=None)
    wire = encode_subscription(sub)
    assert wire == i16(3) + i32(1) + string("t") + i32(-1) + i32(0) + i32(-1) + i16(-1)
    back = decode_subscription(wire)
    assert back.user_data is None and back.rack_id is None
    empty = decode_subscription(encode_subscription(Subscription(["t"], b"", rack_id="")))
    assert empty.user_data == b"" and empty.rack_id == ""


@pytest.mark.parametrize("version", [4, 5, 100, 0x7FFF])
def test_newer_subscription_versions_parse_known_fields(version: int) -> None:
    # A future version appends fields; we read V3's and ignore the rest, as Java does.
    wire = i16(version) + V3_FIELDS + b"\x00\x01future fields\xff"
    sub = decode_subscription(wire)
    assert sub == FULL.__class__(
        topics=["a", "b"],
        user_data=b"ud",
        owned_partitions={"a": (0, 3), "b": ()},
        generation_id=7,
        rack_id="rack-1",
    )
    assert sub.version == version


def test_newer_version_missing_v3_fields_is_truncated() -> None:
    # Java reads a newer version as V3 and needs every V3 field.
    with pytest.raises(TruncatedError) as info:
        decode_subscription(i16(4) + V2_FIELDS)
    assert info.value.field == "rack_id"
    assert info.value.offset == 2 + len(V2_FIELDS)


@pytest.mark.parametrize(
    ("version", "body", "field"),
    [
        (1, V0_FIELDS, "owned_partitions"),
        (2, V1_FIELDS, "generation_id"),
        (3, V2_FIELDS, "rack_id"),
        (3, V1_FIELDS, "generation_id"),
        (3, V0_FIELDS, "owned_partitions"),
    ],
)
def test_declared_version_requires_its_fields(version: int, body: bytes, field: str) -> None:
    """A V1..V3 payload cut short is truncated, not an older version.

    Java's generated readers read every field of the declared version and fail with a buffer
    underflow (SchemaException); they do not fall back to an older layout.
    """
    with pytest.raises(TruncatedError) as info:
        decode_subscription(i16(version) + body)
    assert info.value.field == field
    assert info.value.offset == 2 + len(body)


def test_old_reader_ignores_newer_fields() -> None:
    wire = encode_subscription(FULL, 3)
    for max_version in range(4):
        sub = decode_subscription(wire, max_version=max_version)
        assert sub.version == 3
        assert list(sub.topics) == ["a", "b"]
        assert sub.user_data == b"ud"
        assert bool(sub.owned_partitions) == (max_version >= 1)
        assert sub.generation_id == (7 if max_version >= 2 else -1)
        assert sub.rack_id == ("rack-1" if max_version >= 3 else None)
    # An old reader does not need the newer fields to be complete.
    assert list(decode_subscription(i16(3) + V0_FIELDS, max_version=0).topics) == ["a", "b"]


def test_negative_version_rejected() -> None:
    for version in (-1, -0x8000):
        with pytest.raises(InvalidFieldError) as info:
            decode_subscription(i16(version) + V3_FIELDS)
        assert info.value.field == "version" and info.value.offset == 0
        with pytest.raises(InvalidFieldError):
            decode_assignment(i16(version) + i32(0) + i32(-1))


def test_encode_is_deterministic_whatever_the_input_order() -> None:
    a = Subscription(["x", "a", "m"], None, {"z": [5, 1, 3], "b": (2, 0)}, 1, None)
    b = Subscription(("m", "x", "a"), None, {"b": [0, 2], "z": (3, 5, 1)}, 1, None)
    assert encode_subscription(a) == encode_subscription(b)
    back = decode_subscription(encode_subscription(a))
    assert list(back.topics) == ["a", "m", "x"]
    assert list(back.owned_partitions.items()) == [("b", (0, 2)), ("z", (1, 3, 5))]
    x = Assignment({"z": [9, 1], "a": [3, 2]}, b"u")
    y = Assignment({"a": (2, 3), "z": (1, 9)}, b"u")
    assert encode_assignment(x) == encode_assignment(y)


def test_decode_keeps_wire_order_and_duplicates() -> None:
    # librdkafka does not always sort; decode keeps what was sent, merging a repeated topic.
    wire = (
        i16(0)
        + i32(3)
        + string("z")
        + int32s([2, 1])
        + string("a")
        + int32s([7])
        + string("z")
        + int32s([0, 2])
        + i32(0)
    )
    a = decode_assignment(wire)
    assert list(a.partitions.items()) == [("z", (2, 1, 0, 2)), ("a", (7,))]
    assert a.user_data == b""
    # Encoding sorts but keeps every element.
    assert decode_assignment(encode_assignment(a, 0)).partitions == {"a": (7,), "z": (0, 1, 2, 2)}


def test_assignment_layout() -> None:
    wire = i16(1) + i32(1) + string("t") + int32s([0, 4]) + i32(3) + b"abc"
    for version in range(4):
        assert (
            encode_assignment(Assignment({"t": [4, 0]}, b"abc"), version) == i16(version) + wire[2:]
        )
    a = decode_assignment(wire)
    assert a.partitions == {"t": (0, 4)} and a.user_data == b"abc" and a.version == 1
    assert decode_assignment(i16(9) + wire[2:] + b"future") == a
    assert decode_assignment(bytearray(wire)) == a
    assert decode_assignment(memoryview(wire)) == a
    null = decode_assignment(i16(0) + i32(0) + i32(-1))
    assert null.partitions == {} and null.user_data is None


def test_decoded_partitions_are_tuples() -> None:
    sub = decode_subscription(encode_subscription(FULL))
    assert all(type(p) is tuple for p in sub.owned_partitions.values())
    a = decode_assignment(encode_assignment(Assignment({"t": [1, 2]})))
    assert all(type(p) is tuple for p in a.partitions.values())


# --- malformed input -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "error", "field", "offset"),
    [
        (b"", TruncatedError, "version", 0),
        (b"\x00", TruncatedError, "version", 0),
        (i16(0), TruncatedError, "topics", 2),
        (i16(0) + i32(-1), InvalidFieldError, "topics", 2),
        (i16(0) + i32(0x7FFFFFFF), TruncatedError, "topics", 2),
        (i16(0) + i32(1) + i16(-1), InvalidFieldError, "topics", 6),
        (i16(0) + i32(1) + i16(5) + b"ab", TruncatedError, "topics", 6),
        (i16(0) + i32(1) + string("t") + i32(-2), InvalidFieldError, "user_data", 9),
        (i16(0) + i32(1) + string("t") + i32(10) + b"x", TruncatedError, "user_data", 9),
        (i16(0) + i32(1) + string("t"), TruncatedError, "user_data", 9),
        (i16(1) + i32(0) + i32(-1) + i32(-5), InvalidFieldError, "owned_partitions", 10),
        (i16(1) + i32(0) + i32(-1) + i32(1000), TruncatedError, "owned_partitions", 10),
        (
            i16(1) + i32(0) + i32(-1) + i32(1) + string("t") + i32(2) + i32(0),
            TruncatedError,
            "owned_partitions.partitions",
            17,
        ),
        (
            i16(1) + i32(0) + i32(-1) + i32(1) + string("t") + i32(-1),
            InvalidFieldError,
            "owned_partitions.partitions",
            17,
        ),
        (i16(3) + i32(0) + i32(-1) + i32(0) + i32(1) + i16(-2), InvalidFieldError, "rack_id", 18),
        (
            i16(3) + i32(0) + i32(-1) + i32(0) + i32(1) + i16(3) + b"r",
            TruncatedError,
            "rack_id",
            18,
        ),
    ],
)
def test_malformed_subscription(
    wire: bytes, error: type[CodecError], field: str, offset: int
) -> None:
    with pytest.raises(error) as info:
        decode_subscription(wire)
    assert info.value.field == field
    assert info.value.offset == offset
    assert field in str(info.value) and f"offset {offset}" in str(info.value)


def test_invalid_utf8_rejected() -> None:
    wire = i16(0) + i32(1) + i16(2) + b"\xc3\x28" + i32(-1)
    with pytest.raises(InvalidFieldError) as info:
        decode_subscription(wire)
    assert info.value.field == "topics" and info.value.offset == 6
    rack = i16(3) + i32(0) + i32(-1) + i32(0) + i32(1) + i16(1) + b"\xff"
    with pytest.raises(InvalidFieldError, match="UTF-8"):
        decode_subscription(rack)
    topic = i16(0) + i32(1) + i16(1) + b"\x80" + int32s([]) + i32(-1)
    with pytest.raises(InvalidFieldError) as info:
        decode_assignment(topic)
    assert info.value.field == "assigned_partitions.topic"


def test_huge_counts_rejected_before_allocating() -> None:
    # Each count claims two billion elements; the buffer holds a few bytes.
    for wire in (
        i16(0) + i32(0x7FFFFFFF) + b"\x00" * 8,
        i16(0) + i32(1) + string("t") + i32(0x7FFFFFFF) + b"\x00" * 8,
    ):
        with pytest.raises(TruncatedError, match="array count 2147483647"):
            decode_assignment(wire)
    with pytest.raises(TruncatedError):
        decode_subscription(i16(0) + i32(0) + i32(0x7FFFFFFF) + b"x")


# --- encode validation -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sub", "version", "field"),
    [
        (Subscription(["t" * 0x8000]), 0, "topics"),
        (Subscription(["é" * 0x4000]), 0, "topics"),  # 32768 UTF-8 bytes
        (Subscription(["\ud800"]), 0, "topics"),
        (Subscription("topic"), 0, "topics"),
        (Subscription([1]), 0, "topics"),  # type: ignore[list-item]
        (Subscription(["t", None]), 0, "topics"),  # type: ignore[list-item]
        (Subscription([], "text"), 0, "user_data"),  # type: ignore[arg-type]
        (Subscription([], owned_partitions={"t": [2**31]}), 1, "owned_partitions.partitions"),
        (
            Subscription([], owned_partitions={"t": [-(2**31) - 1]}),
            1,
            "owned_partitions.partitions",
        ),
        (Subscription([], owned_partitions={"t": [1.5]}), 1, "owned_partitions.partitions"),  # type: ignore[list-item]
        (Subscription([], owned_partitions={"t": [1, "2"]}), 1, "owned_partitions.partitions"),  # type: ignore[list-item]
        (Subscription([], owned_partitions={"t": "12"}), 1, "owned_partitions.partitions"),  # type: ignore[dict-item]
        (Subscription([], owned_partitions={"t" * 0x8000: [1]}), 1, "owned_partitions.topic"),
        (Subscription([], owned_partitions={1: [1], "a": [1]}), 1, "owned_partitions.topic"),  # type: ignore[dict-item]
        (Subscription([], owned_partitions=[("t", [1])]), 1, "owned_partitions"),  # type: ignore[arg-type]
        (Subscription([], generation_id=2**31), 2, "generation_id"),
        (Subscription([], rack_id="r" * 0x8000), 3, "rack_id"),
        (Subscription([]), 4, "version"),
        (Subscription([]), -1, "version"),
    ],
)
def test_encode_rejects_unwritable_values(sub: Subscription, version: int, field: str) -> None:
    with pytest.raises(InvalidFieldError) as info:
        encode_subscription(sub, version)
    assert info.value.field == field


def test_limits_that_fit_are_written() -> None:
    sub = Subscription(
        ["t" * 0x7FFF],
        owned_partitions={"t": (-(2**31), 2**31 - 1)},
        generation_id=-(2**31),
        rack_id="",
    )
    assert decode_subscription(encode_subscription(sub)) == sub


def test_fields_a_version_lacks_are_dropped_on_encode() -> None:
    # Like Java's "ignorable" fields: owned partitions are simply not written at V0.
    wire = encode_subscription(FULL, 0)
    assert wire == i16(0) + V0_FIELDS
    # But they are still validated only when written.
    bad = Subscription(["t"], owned_partitions={"t": [2**40]})
    assert decode_subscription(encode_subscription(bad, 0)).owned_partitions == {}


def test_assignment_encode_rejects() -> None:
    with pytest.raises(InvalidFieldError) as info:
        encode_assignment(Assignment({"t": [2**31]}))
    assert info.value.field == "assigned_partitions.partitions"
    with pytest.raises(InvalidFieldError):
        encode_assignment(Assignment({"t": [1]}), 7)
    with pytest.raises(InvalidFieldError):
        encode_assignment(Assignment({"t": [1]}, user_data=[1]))  # type: ignore[arg-type]


def test_hostile_counts_allocate_nothing_big() -> None:
    import tracemalloc

    filler = b"\x00" * 64
    cases: list[tuple[Callable[[bytes], object], bytes]] = [
        (decode_subscription, i16(0) + i32(0x7FFFFFFF) + filler),  # two billion topics
        (decode_subscription, i16(0) + i32(0) + i32(0x7FFFFFF0) + filler),  # user data
        (decode_subscription, i16(1) + i32(0) + i32(-1) + i32(0x7FFFFFFF) + filler),  # owned
        (decode_assignment, i16(0) + i32(0x7FFFFFFF) + filler),
        (decode_assignment, i16(0) + i32(1) + string("t") + i32(0x3FFFFFFF) + filler),
        (decode_sticky_user_data, i32(1) + string("t") + i32(0x3FFFFFFF) + filler),
    ]
    tracemalloc.start()
    try:
        for decode, wire in cases:
            with pytest.raises(CodecError):
                decode(wire)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, peak


def test_long_topic_names_are_not_cached() -> None:
    from aiogroup.protocol import _reader

    before = len(_reader._TOPIC_NAMES)
    for i in range(20):
        name = f"{i:05d}" + "x" * 30_000
        wire = encode_assignment(Assignment({name: [1]}))
        assert list(decode_assignment(wire).partitions) == [name]
    assert len(_reader._TOPIC_NAMES) == before
    assert all(len(k) <= 249 for k in _reader._TOPIC_HEADERS)
