"""User data of the sticky and cooperative-sticky assignors.

Sticky user data carries no version field (KIP-341)::

    v0  previous_assignment [(topic string, partitions [int32])]
    v1  v0 + generation int32

A reader tries v1 first; if the bytes do not fit it falls back to v0, whose generation is
unknown (-1). Bytes after the v1 generation are ignored, like Java's ``Schema.read``.

kafka-python 3 (3.0.12) writes its sticky user data with its generic versioned encoder: an
int16 version (``00 01``) and then the v1 block. Read as the standard layout, those two bytes
make the topic count at least 65,536, which the few bytes that follow cannot hold; so when the
standard layout does not fit and the bytes start with ``00 01``, the v1 block after them is
read. (Java, librdkafka and kafka-python itself cannot read each other's layout: kafka-python's
leader drops a Java member's previous assignment, and until now ours dropped kafka-python's.)

In cooperative-sticky user data the peers disagree:

- Java writes a bare int32 generation (and, from Subscription V2 on, the generation also travels
  in the Subscription itself, KIP-792);
- librdkafka and franz-go write a sticky v1 block (previous assignment + generation);
- kafka-python writes empty user data.

:func:`generation_from_user_data` reads all of these. (From Subscription V2 on, the generation in
the Subscription itself takes precedence; choosing between the two is the assignor's job.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from aiogroup.errors import CodecError
from aiogroup.protocol._reader import (
    FAST_ENCODE_ERRORS,
    Reader,
    Writer,
    as_bytes,
    pack_i32,
    pack_topic_partitions,
)
from aiogroup.protocol.types import NO_GENERATION, PartitionsByTopic

__all__ = [
    "StickyUserData",
    "decode_sticky_user_data",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "generation_from_user_data",
]

Buffer = bytes | bytearray | memoryview

_FIELD = "previous_assignment"


@dataclass(frozen=True, slots=True)
class StickyUserData:
    """A member's previous assignment and the generation it was made in (-1: unknown, v0)."""

    partitions: PartitionsByTopic = field(default_factory=dict)
    generation: int = NO_GENERATION


def encode_sticky_user_data(
    partitions: Mapping[str, Collection[int]], generation: int = NO_GENERATION
) -> bytes:
    """Encode sticky user data v1 (KIP-341): topics and partitions sorted, then the generation.

    Raises :class:`~aiogroup.errors.InvalidFieldError` for values the wire cannot carry.
    """
    out: list[bytes] = []
    try:
        pack_topic_partitions(partitions, out)
        out.append(pack_i32(generation))
        return b"".join(out)
    except FAST_ENCODE_ERRORS:
        w = Writer()
        w.topic_partitions(partitions, _FIELD)
        w.int32(generation, "generation")
        return w.getvalue()


def decode_sticky_user_data(data: Buffer | None) -> StickyUserData:
    """Decode sticky user data: v1 if it fits, else v0 with generation -1, else kafka-python
    3's layout (``00 01`` + v1).

    Empty or null user data (a member with no history) gives an empty assignment and generation
    -1, as Java's ``AbstractStickyAssignor`` treats it. Bytes that fit no layout raise the
    :class:`~aiogroup.errors.CodecError` of the standard (v0) attempt. (Java silently ignores such a
    previous assignment; callers that want that should catch ``CodecError``.)
    """
    if not data:
        return StickyUserData({}, NO_GENERATION)
    raw = as_bytes(data)
    try:
        return _decode_sticky(Reader(raw))
    except CodecError as standard_error:
        if raw[:2] == _KAFKA_PYTHON_VERSION:
            with contextlib.suppress(CodecError):
                return _decode_sticky(Reader(raw, 2), versioned=True)
        raise standard_error


#: The int16 version kafka-python 3 writes before its sticky v1 block.
_KAFKA_PYTHON_VERSION = b"\x00\x01"


def _decode_sticky(r: Reader, *, versioned: bool = False) -> StickyUserData:
    # v1 and v0 share the assignment prefix: if it does not parse, neither layout fits.
    partitions = r.topic_partitions(_FIELD)
    if r.remaining >= 4:
        return StickyUserData(partitions, r.int32("generation"))
    if versioned:  # kafka-python's version 1 has the generation: without it, it is truncated
        r.int32("generation")
    # v0: no generation (KIP-341: "the generation is unknown").
    return StickyUserData(partitions, NO_GENERATION)


def encode_cooperative_user_data(generation: int) -> bytes:
    """Encode cooperative-sticky user data as Java writes it: a bare int32 generation."""
    w = Writer()
    w.int32(generation, "generation")
    return w.getvalue()


def generation_from_user_data(data: Buffer | None, *, strict: bool = False) -> int:
    """The generation in cooperative-sticky (or sticky) user data, -1 if there is none.

    Understands a bare int32 (Java), a sticky v1 block (librdkafka, franz-go: its generation),
    a sticky v0 block (-1), and empty or null user data (-1, kafka-python).

    Bytes that fit none of these give -1, as in Java's ``CooperativeStickyAssignor``, which falls
    back to the default generation when user data cannot be parsed: one odd peer must not stop
    the leader from assigning. Pass ``strict=True`` to get the
    :class:`~aiogroup.errors.CodecError` instead.
    """
    if not data:
        return NO_GENERATION
    raw = as_bytes(data)
    if len(raw) == 4:
        # A sticky block is at least 8 bytes (count + generation), so 4 bytes is Java's int32.
        return Reader(raw).int32("generation")
    try:
        return decode_sticky_user_data(raw).generation
    except CodecError:
        if strict:
            raise
        return NO_GENERATION
