"""Sticky user data (KIP-341) and the generation in cooperative-sticky user data."""

from __future__ import annotations

import pytest

from aiogroup.errors import CodecError, InvalidFieldError, TruncatedError
from aiogroup.protocol import (
    StickyUserData,
    decode_sticky_user_data,
    encode_cooperative_user_data,
    encode_sticky_user_data,
    generation_from_user_data,
)

from .wire import i16, i32


def entry(topic: str, partitions: list[int]) -> bytes:
    raw = topic.encode()
    return i16(len(raw)) + raw + i32(len(partitions)) + b"".join(i32(p) for p in partitions)


V0 = i32(2) + entry("a", [0, 2]) + entry("b", [1])
V1 = V0 + i32(5)


def test_encode_is_v1_sorted() -> None:
    assert encode_sticky_user_data({"b": [1], "a": [2, 0]}, 5) == V1
    assert encode_sticky_user_data({}, -1) == i32(0) + i32(-1)
    assert encode_sticky_user_data({"a": (0, 2), "b": (1,)}) == V0 + i32(-1)


def test_decode_v1() -> None:
    data = decode_sticky_user_data(V1)
    assert data == StickyUserData({"a": (0, 2), "b": (1,)}, 5)
    assert all(type(p) is tuple for p in data.partitions.values())


def test_decode_falls_back_to_v0() -> None:
    # No room for a generation: v0, whose generation is unknown (KIP-341).
    assert decode_sticky_user_data(V0) == StickyUserData({"a": (0, 2), "b": (1,)}, -1)
    # 1..3 stray bytes cannot hold a v1 generation either.
    for extra in (b"\x00", b"\x00\x00", b"\x00\x00\x01"):
        assert decode_sticky_user_data(V0 + extra).generation == -1


def test_trailing_bytes_after_v1_ignored() -> None:
    assert decode_sticky_user_data(V1 + b"\xde\xad\xbe\xef\x00") == decode_sticky_user_data(V1)


@pytest.mark.parametrize("data", [None, b"", bytearray(), memoryview(b"")])
def test_no_user_data_means_no_history(data: bytes | bytearray | memoryview | None) -> None:
    assert decode_sticky_user_data(data) == StickyUserData({}, -1)
    assert generation_from_user_data(data) == -1


@pytest.mark.parametrize(
    ("data", "error", "field", "offset"),
    [
        (b"\x00\x00", TruncatedError, "previous_assignment", 0),
        (i32(-1), InvalidFieldError, "previous_assignment", 0),
        (i32(1) + i16(9) + b"abcdef", TruncatedError, "previous_assignment.topic", 4),
        (i32(1) + i16(1) + b"\xff" + i32(0), InvalidFieldError, "previous_assignment.topic", 4),
        (
            i32(1) + entry("a", [])[:-4] + i32(9),
            TruncatedError,
            "previous_assignment.partitions",
            7,
        ),
        (i32(0x10000000) + b"\x00" * 16, TruncatedError, "previous_assignment", 0),
    ],
)
def test_malformed_sticky_user_data(
    data: bytes, error: type[CodecError], field: str, offset: int
) -> None:
    with pytest.raises(error) as info:
        decode_sticky_user_data(data)
    assert (info.value.field, info.value.offset) == (field, offset)
    # The generation helper copes, as Java's cooperative-sticky assignor does...
    assert generation_from_user_data(data) == -1
    # ...unless asked to be strict.
    if len(data) != 4:
        with pytest.raises(error):
            generation_from_user_data(data, strict=True)


def test_cooperative_user_data_is_a_bare_int32() -> None:
    for generation in (-1, 0, 7, 2**31 - 1, -(2**31)):
        raw = encode_cooperative_user_data(generation)
        assert raw == i32(generation)
        assert generation_from_user_data(raw) == generation
    with pytest.raises(InvalidFieldError):
        encode_cooperative_user_data(2**31)


def test_generation_from_each_peer_layout() -> None:
    # Java: bare int32.
    assert generation_from_user_data(i32(42)) == 42
    # librdkafka / franz-go: sticky v1 block, even one with no partitions (8 bytes).
    assert generation_from_user_data(V1) == 5
    assert generation_from_user_data(i32(0) + i32(3)) == 3
    assert generation_from_user_data(bytearray(V1)) == 5
    # A sticky v0 block carries no generation.
    assert generation_from_user_data(V0) == -1
    # kafka-python: empty.
    assert generation_from_user_data(b"") == -1


def test_encode_rejects() -> None:
    with pytest.raises(InvalidFieldError) as info:
        encode_sticky_user_data({"t": [2**31]}, 1)
    assert info.value.field == "previous_assignment.partitions"
    with pytest.raises(InvalidFieldError) as info:
        encode_sticky_user_data({"t": [1]}, 2**31)
    assert info.value.field == "generation"


def test_any_sequence_or_set_of_partitions_encodes_the_same() -> None:
    expected = encode_sticky_user_data({"a": [0, 1], "b": [3]}, 2)
    assert encode_sticky_user_data({"b": {3}, "a": range(2)}, 2) == expected
    assert encode_sticky_user_data({"b": frozenset([3]), "a": (1, 0)}, 2) == expected
    # bool is an int to struct; both paths agree on it.
    assert encode_sticky_user_data({"a": [True, 0], "b": {3}}, 2) == expected
