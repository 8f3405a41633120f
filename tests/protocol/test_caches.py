"""The fast path's caches: a cache hit gives exactly what parsing or encoding gives, results
stay independent of one another, and nothing a peer sends can grow or poison a cache."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aiogroup.errors import CodecError, InvalidFieldError, TruncatedError
from aiogroup.protocol import (
    Assignment,
    Subscription,
    _reader,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiogroup.protocol import consumer as consumer_module

from .wire import i16, i32, string

INT32 = st.integers(-(2**31), 2**31 - 1)
topic_names = st.text("abc.-_é", max_size=6)
partitions_by_topic = st.dictionaries(
    topic_names, st.lists(st.integers(0, 9), max_size=6), max_size=4
)


def careful(data: bytes, max_version: int = 3) -> Subscription:
    return consumer_module._decode_subscription_carefully(data, max_version)


def careful_error(data: bytes) -> tuple[type[CodecError], str | None, int | None]:
    with pytest.raises(CodecError) as info:
        careful(data)
    return type(info.value), info.value.field, info.value.offset


# --- the last topics array read --------------------------------------------------------------


def test_repeated_topics_array_gives_fresh_equal_lists() -> None:
    wire = encode_subscription(Subscription(["b", "a"], owned_partitions={"a": [1]}))
    first = decode_subscription(wire)
    assert _reader._last_strings[0] == i32(2) + string("a") + string("b")
    second = decode_subscription(wire)
    assert first == second and second.topics == ["a", "b"]
    assert first.topics is not second.topics
    first.topics.append("mutated")  # type: ignore[attr-defined]
    assert decode_subscription(wire).topics == ["a", "b"]


def test_cached_topics_array_with_different_fields_after_it() -> None:
    topics = ["orders", "audit"]
    decode_subscription(encode_subscription(Subscription(topics, rack_id="r1")))
    other = Subscription(topics, b"x", {"orders": [5, 2]}, 9, None)
    wire = encode_subscription(other)
    assert wire.startswith(i16(3) + _reader._last_strings[0])  # the cache is used
    assert decode_subscription(wire) == Subscription(
        ["audit", "orders"], b"x", {"orders": (2, 5)}, 9
    )
    # Truncated or corrupted after the cached array: the same errors as without any cache.
    for cut in range(len(_reader._last_strings[0]) + 2, len(wire)):
        broken = wire[:cut]
        decode_subscription(wire)  # warm the cache again
        with pytest.raises(CodecError) as info:
            decode_subscription(broken)
        assert (type(info.value), info.value.field, info.value.offset) == careful_error(broken)


def test_a_longer_array_is_not_mistaken_for_the_cached_one() -> None:
    decode_subscription(encode_subscription(Subscription(["a"])))
    # Same first topic, one more after it: the count differs, so the cached bytes do not match.
    assert decode_subscription(encode_subscription(Subscription(["a", "b"]))).topics == ["a", "b"]
    assert decode_subscription(encode_subscription(Subscription([]))).topics == []
    assert decode_subscription(encode_subscription(Subscription(["a"]))).topics == ["a"]


@given(
    st.lists(topic_names, max_size=5),
    st.lists(st.tuples(partitions_by_topic, INT32, st.integers(0, 3)), min_size=1, max_size=4),
)
def test_members_sharing_topics_decode_as_if_alone(
    topics: list[str], members: list[tuple[dict[str, list[int]], int, int]]
) -> None:
    """A sequence of members with the same topics: every fast decode equals the careful one
    and encodes back to the same bytes (the encoder's cache is hit too)."""
    for owned, generation, version in members:
        wire = encode_subscription(Subscription(topics, None, owned, generation), version)
        fast = decode_subscription(wire)
        assert fast == careful(wire) and fast.version == version
        assert encode_subscription(fast, version) == wire
        assert wire == consumer_module._encode_subscription_carefully(fast, version)


# --- the last topics array written -----------------------------------------------------------


def test_changing_the_topics_list_after_encoding_is_seen() -> None:
    topics = ["b", "a"]
    first = encode_subscription(Subscription(topics), 0)
    topics.append("c")
    assert encode_subscription(Subscription(topics), 0) == encode_subscription(
        Subscription(["a", "b", "c"]), 0
    )
    topics[:] = ["b", "a"]
    assert encode_subscription(Subscription(topics), 0) == first
    # A tuple with the same names gives the same bytes; so does an empty list after a full one.
    assert encode_subscription(Subscription(("a", "b")), 0) == first
    assert encode_subscription(Subscription([]), 0) == i16(0) + i32(0) + i32(-1)
    assert encode_subscription(Subscription(()), 0) == i16(0) + i32(0) + i32(-1)


@pytest.mark.parametrize(
    "bad",
    [["a", 1], ["a", None], ["a", "\ud800"], ["a", "x" * 0x8000], ("a", b"b")],
)
def test_invalid_topics_after_a_cached_array_are_still_rejected(bad: Any) -> None:
    encode_subscription(Subscription(["a"]), 0)
    encode_subscription(Subscription(["a", "b"]), 0)  # the cache holds a near miss
    with pytest.raises(InvalidFieldError) as info:
        encode_subscription(Subscription(bad), 0)
    assert info.value.field == "topics"


@pytest.mark.parametrize("bad", [1, "\ud800", "r" * 0x8000, b"rack"])
def test_invalid_rack_ids_are_rejected(bad: Any) -> None:
    encode_subscription(Subscription([], rack_id="rack"))  # cached header for a valid rack
    with pytest.raises(InvalidFieldError) as info:
        encode_subscription(Subscription([], rack_id=bad))
    assert info.value.field == "rack_id"


# --- per-topic headers and struct formats ----------------------------------------------------


def test_many_partition_counts_of_one_topic() -> None:
    """More distinct counts than a topic keeps: every one is still written correctly."""
    counts = range(3 * _reader._COUNTS_PER_TOPIC)
    for n in counts:
        a = Assignment({"many-counts": list(range(n, 0, -1))})
        wire = encode_assignment(a)
        assert wire == i16(3) + i32(1) + string("many-counts") + i32(n) + b"".join(
            i32(p) for p in range(1, n + 1)
        ) + i32(-1)
        assert decode_assignment(wire).partitions == {"many-counts": tuple(range(1, n + 1))}
    assert len(_reader._TOPIC_HEADERS["many-counts"]) == _reader._COUNTS_PER_TOPIC


def test_garbage_counts_and_lengths_add_no_struct_formats() -> None:
    before = (len(_reader._ARRAY_UNPACK), len(_reader._HEAD_UNPACK), len(_reader._ARRAY_STRUCTS))
    cases = [
        i16(0) + i32(1) + string("t") + i32(987_654) + i32(1) + i32(-1),  # count past the end
        i16(0) + i32(1) + i16(12_345) + b"t" * 8 + i32(-1),  # topic past the end
        i16(0) + i32(1) + string("t") + i32(-77) + i32(-1),  # negative count
    ]
    for wire in cases:
        with pytest.raises((TruncatedError, InvalidFieldError)):
            decode_assignment(wire)
    after = (len(_reader._ARRAY_UNPACK), len(_reader._HEAD_UNPACK), len(_reader._ARRAY_STRUCTS))
    assert after == before
    for n in (987_654, -77):
        assert n not in _reader._ARRAY_UNPACK and n not in _reader._ARRAY_STRUCTS
    assert 12_345 not in _reader._HEAD_UNPACK


def test_zero_and_one_partition_lists() -> None:
    a = Assignment({"z": [], "o": (7,), "l": [3]})
    wire = encode_assignment(a)
    assert decode_assignment(wire).partitions == {"l": (3,), "o": (7,), "z": ()}
    with pytest.raises(InvalidFieldError):
        encode_assignment(Assignment({"o": [1.0]}))  # type: ignore[list-item]
    with pytest.raises(InvalidFieldError):
        encode_assignment(Assignment({"o": [2**31]}))


# --- block templates (decode) and topic layouts (encode) of large arrays ---------------------

many_topics = st.lists(
    st.sampled_from([f"topic-{i:03d}" for i in range(40)]), min_size=16, max_size=40, unique=True
)


@st.composite
def large_blocks(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly one partition per topic (the template's layout), some topics with none or
    several, some lists unsorted or given as lists: every shape the fast paths meet."""
    topics = draw(many_topics)
    out: dict[str, Any] = {}
    odd = draw(st.sampled_from([0, 1, 3, 8]))  # in 24: how often a topic has 0, 2 or 3
    for t in topics:
        n = draw(st.sampled_from([1] * (24 - odd) + [0, 2, 3][: odd and 3] * odd))
        parts = draw(st.lists(st.integers(0, 70000), min_size=n, max_size=n))
        out[t] = list(parts) if draw(st.integers(0, 5)) == 0 else tuple(parts)
    return out


def careful_assignment(a: Assignment) -> bytes:
    w = _reader.Writer()
    w.int16(3, "version")
    w.topic_partitions(a.partitions, "assigned_partitions")
    w.nullable_bytes(a.user_data, "user_data")
    return w.getvalue()


@given(st.lists(large_blocks(), min_size=1, max_size=6))
def test_large_arrays_encode_and_decode_as_the_careful_path(blocks: list[dict[str, Any]]) -> None:
    """A run of members whose arrays share a layout (templates made and used) or not (missed):
    the bytes are the careful writer's, and decoding gives back what the careful reader
    reads, whatever was decoded before."""
    for parts in blocks + blocks:  # twice: the second pass meets templates made by the first
        assignment = Assignment(parts)
        wire = encode_assignment(assignment)
        assert wire == careful_assignment(assignment)
        decoded = decode_assignment(wire)
        reader = _reader.Reader(wire, 2)
        n = reader.count("assigned_partitions", 6)
        expect = {}
        for _ in range(n):
            topic = reader.string("t")
            expect[topic] = reader.int32_array("p")
        assert decoded.partitions == expect
        assert {t: sorted(ps) for t, ps in parts.items()} == {
            t: list(ps) for t, ps in decoded.partitions.items()
        }
        sub = Subscription(sorted(parts), owned_partitions=parts, generation_id=3)
        assert decode_subscription(encode_subscription(sub)) == careful(encode_subscription(sub))


def test_a_template_does_not_read_a_block_with_other_headers() -> None:
    """Same count and sizes, one topic name different: the template must not match."""
    topics = [f"topic-{i:03d}" for i in range(20)]
    first = encode_assignment(Assignment({t: (1,) for t in topics}))
    decode_assignment(first)
    decode_assignment(first)  # now a template
    assert _reader._template is not None
    other = [*topics[:-1], "topic-999"]
    wire = encode_assignment(Assignment({t: (2,) for t in other}))
    assert decode_assignment(wire).partitions == {t: (2,) for t in other}
    # A negative or large partition in the template's layout is read as it is.
    odd = encode_assignment(
        Assignment({t: (-5 if i == 3 else 70000,) for i, t in enumerate(topics)})
    )
    assert decode_assignment(odd).partitions == {
        t: (-5 if i == 3 else 70000,) for i, t in enumerate(topics)
    }
