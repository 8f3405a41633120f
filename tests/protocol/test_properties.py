"""Hypothesis properties of the codecs: round trips, old readers, fast path == careful path,
and arbitrary or mutated bytes that either decode or raise our CodecError (nothing else)."""

from __future__ import annotations

import contextlib
import random
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from aiogroup.errors import CodecError
from aiogroup.protocol import (
    Assignment,
    StickyUserData,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
    generation_from_user_data,
)
from aiogroup.protocol import consumer as consumer_module
from aiogroup.protocol._reader import Writer

INT32 = st.integers(-(2**31), 2**31 - 1)
# Small alphabet so topics repeat and sort in interesting ways; plus any text at times.
topic_names = st.one_of(st.text("abc.-_é", max_size=6), st.text(max_size=12))
partition_lists = st.one_of(
    st.lists(st.integers(0, 50), max_size=8),
    st.lists(INT32, max_size=8),
)
partitions_by_topic = st.dictionaries(topic_names, partition_lists, max_size=5)
user_data = st.one_of(st.none(), st.binary(max_size=20))
rack_ids = st.one_of(st.none(), st.text(max_size=8))

subscriptions = st.builds(
    Subscription,
    topics=st.lists(topic_names, max_size=6),
    user_data=user_data,
    owned_partitions=partitions_by_topic,
    generation_id=INT32,
    rack_id=rack_ids,
)
assignments = st.builds(Assignment, partitions=partitions_by_topic, user_data=user_data)
versions = st.integers(0, 3)


def canonical(partitions: Any) -> dict[str, tuple[int, ...]]:
    return {t: tuple(sorted(p)) for t, p in sorted(partitions.items())}


def expected_subscription(sub: Subscription, written: int, read: int = 3) -> Subscription:
    """What a reader of version ``read`` gets from ``sub`` written at version ``written``."""
    seen = min(written, read)
    return Subscription(
        topics=sorted(sub.topics),
        user_data=sub.user_data,
        owned_partitions=canonical(sub.owned_partitions) if seen >= 1 else {},
        generation_id=sub.generation_id if seen >= 2 else -1,
        rack_id=sub.rack_id if seen >= 3 else None,
    )


@given(subscriptions, versions)
def test_subscription_round_trip(sub: Subscription, version: int) -> None:
    wire = encode_subscription(sub, version)
    back = decode_subscription(wire)
    assert back == expected_subscription(sub, version)
    assert back.version == version
    # Ordering is canonical: decoding then encoding again gives the same bytes.
    assert encode_subscription(back, version) == wire
    # Decoded partitions are tuples in sorted topic order.
    assert list(back.owned_partitions) == sorted(back.owned_partitions)
    assert all(type(p) is tuple for p in back.owned_partitions.values())


@given(subscriptions, versions, versions)
def test_old_reader_reads_newer_versions(sub: Subscription, written: int, read: int) -> None:
    wire = encode_subscription(sub, written)
    old = decode_subscription(wire, max_version=read)
    assert old == expected_subscription(sub, written, read)
    assert old.version == written


@given(subscriptions, st.integers(4, 0x7FFF), st.binary(max_size=16))
def test_future_versions_parse_known_fields(sub: Subscription, version: int, tail: bytes) -> None:
    wire = struct.pack(">h", version) + encode_subscription(sub, 3)[2:] + tail
    back = decode_subscription(wire)
    assert back == expected_subscription(sub, 3)
    assert back.version == version


@given(assignments, versions, st.binary(max_size=8))
def test_assignment_round_trip(a: Assignment, version: int, tail: bytes) -> None:
    wire = encode_assignment(a, version)
    back = decode_assignment(wire)
    assert back == Assignment(canonical(a.partitions), a.user_data)
    assert back.version == version
    assert encode_assignment(back, version) == wire
    # A newer version with extra fields reads the same.
    newer = struct.pack(">h", 4 + version) + wire[2:] + tail
    assert decode_assignment(newer) == back


@given(partitions_by_topic, INT32, st.binary(max_size=8))
def test_sticky_round_trip_and_v0_fallback(partitions: Any, generation: int, tail: bytes) -> None:
    raw = encode_sticky_user_data(partitions, generation)
    assert decode_sticky_user_data(raw) == StickyUserData(canonical(partitions), generation)
    assert generation_from_user_data(raw) == generation
    # Without its generation the block reads as v0 (KIP-341).
    v0 = raw[:-4]
    assert decode_sticky_user_data(v0) == StickyUserData(canonical(partitions), -1)
    assert decode_sticky_user_data(v0 + tail[:3]).generation == -1
    # Trailing bytes after v1 are ignored.
    assert decode_sticky_user_data(raw + tail) == decode_sticky_user_data(raw)


@given(subscriptions, versions)
def test_fast_and_careful_encoders_agree(sub: Subscription, version: int) -> None:
    fast = encode_subscription(sub, version)
    careful = consumer_module._encode_subscription_carefully(sub, version)
    assert fast == careful
    # Sets, ranges and other sequences go the careful way and still give the same bytes.
    loose = Subscription(
        topics=tuple(sub.topics),
        user_data=bytearray(sub.user_data) if sub.user_data is not None else None,  # type: ignore[arg-type]
        owned_partitions={t: frozenset(p) for t, p in sub.owned_partitions.items()},  # type: ignore[misc]
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    deduped = Subscription(
        topics=sub.topics,
        user_data=sub.user_data,
        owned_partitions={t: sorted(set(p)) for t, p in sub.owned_partitions.items()},
        generation_id=sub.generation_id,
        rack_id=sub.rack_id,
    )
    assert encode_subscription(loose, version) == encode_subscription(deduped, version)


def _decoders() -> list[Callable[[bytes], object]]:
    return [
        decode_subscription,
        lambda b: decode_subscription(b, max_version=0),
        decode_assignment,
        decode_sticky_user_data,
        lambda b: generation_from_user_data(b, strict=True),
    ]


def _check_bytes(data: bytes) -> None:
    """Every decoder either decodes ``data`` or raises a CodecError; nothing else escapes."""
    for decode in _decoders():
        try:
            decoded = decode(data)
        except CodecError:
            continue
        if isinstance(decoded, Subscription):
            # Whatever decodes can be encoded again, canonically, and reads back the same.
            version = min(decoded.version, 3)
            again = decode_subscription(encode_subscription(decoded, version))
            assert again == expected_subscription(decoded, version)
        elif isinstance(decoded, Assignment):
            again_a = decode_assignment(encode_assignment(decoded, min(decoded.version, 3)))
            assert again_a.partitions == canonical(decoded.partitions)
    # The lenient generation reader never raises.
    assert isinstance(generation_from_user_data(data), int)
    # The fast path gives up or agrees with the careful path.
    for max_version in (0, 3):
        fast = consumer_module._scan_subscription(data, max_version)
        if fast is not None:
            careful = consumer_module._decode_subscription_carefully(data, max_version)
            assert fast == careful and fast.version == careful.version


@given(st.binary(max_size=64))
@example(b"")
@example(b"\x00\x03\x7f\xff\xff\xff")
@example(b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00\x00\x01\x00\x01a\xff\xff\xff\xff")
def test_arbitrary_bytes_decode_or_raise_codec_error(data: bytes) -> None:
    _check_bytes(data)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["subscription", "assignment", "sticky"]))
    if kind == "subscription":
        wire = encode_subscription(draw(subscriptions), draw(versions))
    elif kind == "assignment":
        wire = encode_assignment(draw(assignments), draw(versions))
    else:
        wire = encode_sticky_user_data(draw(partitions_by_topic), draw(INT32))
    data = bytearray(wire)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["flip", "set", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and data:
            data[at] = draw(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]))
        elif op == "cut":
            del data[at:]
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4))
        elif op == "delete" and data:
            del data[at : at + draw(st.integers(1, 4))]
    return bytes(data)


@given(mutated())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_mutated_payloads_decode_or_raise_codec_error(data: bytes) -> None:
    _check_bytes(data)


def test_careful_writer_rejects_what_fast_path_skips() -> None:
    # Sanity for the fallback: the careful writer validates every element itself.
    with pytest.raises(CodecError):
        Writer().int32_array([1, 2**31], "p")


# --- the long run ---------------------------------------------------------------------------

SEED_PAYLOADS = 400
MUTANTS_PER_PAYLOAD = 300  # 120,000 mutated inputs in all


def _seed_payloads(rng: random.Random) -> list[bytes]:
    def topic() -> str:
        return rng.choice(["a", "b", "topic", "é", "", "x" * rng.randint(0, 40)])

    def partitions() -> dict[str, list[int]]:
        return {
            topic(): [rng.choice([0, 1, 7, 2**31 - 1, -1]) for _ in range(rng.randint(0, 6))]
            for _ in range(rng.randint(0, 4))
        }

    payloads = []
    for i in range(SEED_PAYLOADS):
        ud = rng.choice([None, b"", bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 9)))])
        if i % 3 == 0:
            sub = Subscription(
                topics=[topic() for _ in range(rng.randint(0, 4))],
                user_data=ud,
                owned_partitions=partitions(),
                generation_id=rng.randint(-1, 9),
                rack_id=rng.choice([None, "", "rack"]),
            )
            payloads.append(encode_subscription(sub, rng.randint(0, 3)))
        elif i % 3 == 1:
            payloads.append(encode_assignment(Assignment(partitions(), ud), rng.randint(0, 3)))
        else:
            payloads.append(encode_sticky_user_data(partitions(), rng.randint(-1, 9)))
    return payloads


def _mutate(rng: random.Random, wire: bytes) -> bytes:
    data = bytearray(wire)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(5)
        at = rng.randrange(len(data)) if data else 0
        if op == 0 and data:
            data[at] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            data[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
        elif op == 2:
            del data[at:]
        elif op == 3:
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
        elif data:
            del data[at : at + rng.randint(1, 4)]
    return bytes(data)


@pytest.mark.slow
def test_many_mutated_payloads() -> None:
    """120,000 seeded mutants of valid payloads: each decodes or raises CodecError."""
    rng = random.Random(429)
    outcomes = {"decoded": 0, "rejected": 0}
    decoders = _decoders()
    for wire in _seed_payloads(rng):
        for _ in range(MUTANTS_PER_PAYLOAD):
            data = _mutate(rng, wire)
            for decode in decoders:
                try:
                    decode(data)
                except CodecError:
                    outcomes["rejected"] += 1
                else:
                    outcomes["decoded"] += 1
            generation_from_user_data(data)
            fast = consumer_module._scan_subscription(data, 3)
            if fast is not None:
                assert fast == consumer_module._decode_subscription_carefully(data, 3)
    # Both outcomes are common, so the loop really exercises errors and successes.
    assert outcomes["decoded"] > 10_000 and outcomes["rejected"] > 10_000, outcomes


@pytest.mark.slow
def test_many_random_byte_strings() -> None:
    """50,000 seeded random byte strings, some behind a plausible version header."""
    rng = random.Random(341)
    decoders = _decoders()
    for i in range(50_000):
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 40)))
        if i % 2:
            data = struct.pack(">h", rng.randint(0, 5)) + data
        for decode in decoders:
            with contextlib.suppress(CodecError):
                decode(data)


@pytest.mark.slow
@given(mutated())
@settings(max_examples=3_000, suppress_health_check=[HealthCheck.too_slow])
def test_mutated_payloads_long_run(data: bytes) -> None:
    _check_bytes(data)
