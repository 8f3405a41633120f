"""Primitives for Kafka's non-flexible (classic) encoding: a fast path and a careful path.

Wire primitives (all big-endian):

- ``int16`` / ``int32``
- ``string``: int16 length then UTF-8 bytes (non-nullable: a negative length is invalid)
- ``nullable string``: as ``string``, with length -1 meaning null
- ``nullable bytes``: int32 length then bytes, -1 meaning null
- ``array``: int32 count then the elements (non-nullable: every consumer-protocol array is)

Java's generated readers treat *any* negative length of a nullable field as null; we accept only
the -1 marker that every writer produces and reject other negatives as invalid.

Two paths, same results:

- The **fast path** (``scan_*`` / ``pack_*``) parses or writes whole arrays in tight loops with
  local variables, one ``struct`` call per partition list. It gives up (returns ``None`` or
  raises :class:`Slow`) at the first thing that is not plainly valid.
- The **careful path** (:class:`Reader` / :class:`Writer`) checks every field before touching
  the buffer, and raises :class:`~aiogroup.errors.TruncatedError` or
  :class:`~aiogroup.errors.InvalidFieldError` naming the field and its offset. Callers fall back
  to it whenever the fast path gives up, so errors are always precise and the fast path never
  has to be.

Neither path lets ``struct.error``, ``IndexError`` or ``UnicodeDecodeError`` escape, and every
count is checked against the bytes left *before* anything is allocated.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from aiogroup.errors import InvalidFieldError, TruncatedError

__all__ = [
    "INT16_MAX",
    "INT32_MAX",
    "INT32_MIN",
    "Reader",
    "Slow",
    "Writer",
    "as_bytes",
    "pack_strings",
    "pack_topic_partitions",
    "scan_strings",
    "scan_topic_partitions",
]

INT16_MAX = 0x7FFF
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
unpack_i16 = _I16.unpack_from
unpack_i32 = _I32.unpack_from
pack_i16 = _I16.pack
pack_i32 = _I32.pack

# Compiled formats for partition arrays and topic headers, reused across calls (struct's own
# cache keeps only 100 formats). A Struct's size does not depend on its repeat count, and every
# cache here is bounded, so hostile input cannot grow them without limit.
_CACHE_LIMIT = 4096
#: Kafka's longest legal topic name; only names up to this length are cached.
_MAX_CACHED_NAME = 249


class _ArrayStructs(dict[int, struct.Struct]):
    """``n -> Struct(">{n}i")``, built on first use."""

    def __missing__(self, n: int) -> struct.Struct:
        s = struct.Struct(f">{n}i")
        if len(self) < _CACHE_LIMIT:
            self[n] = s
        return s


_ARRAY_STRUCTS = _ArrayStructs()


class _HeadStructs(dict[int, struct.Struct]):
    """``n -> Struct(">{n}si")``: a topic of ``n`` bytes then its partition count."""

    def __missing__(self, n: int) -> struct.Struct:
        s = struct.Struct(f">{n}si")
        if len(self) < _CACHE_LIMIT:
            self[n] = s
        return s


_HEAD_STRUCTS = _HeadStructs()

# Topic names are few and repeat in every member's payload: decoding shares one str per name
# (a 1M-partition group would otherwise hold a million copies), encoding reuses its header.
# At most _CACHE_LIMIT names of at most _MAX_CACHED_NAME bytes: about 2 MB at worst.
_TOPIC_NAMES: dict[bytes, str] = {}
_TOPIC_HEADERS: dict[str, bytes] = {}
_FAST_SEQUENCES = (tuple, list)


def as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as ``bytes``: one copy for a bytearray or memoryview, so slices are cheap and the
    caller may reuse its buffer."""
    return data if type(data) is bytes else bytes(data)


class Slow(Exception):
    """Internal signal: the fast path met something unusual; use the careful path."""


# --- fast path: decoding ----------------------------------------------------------------------


def scan_strings(buf: bytes, pos: int) -> tuple[list[str], int] | None:
    """Parse an array of non-nullable strings at ``pos``; ``None`` if anything is off."""
    end = len(buf)
    try:
        n: int = unpack_i32(buf, pos)[0]
        pos += 4
        if n < 0 or 2 * n > end - pos:
            return None
        result: list[str] = []
        append = result.append
        names = _TOPIC_NAMES
        for _ in range(n):
            slen: int = unpack_i16(buf, pos)[0]
            p_next = pos + 2 + slen
            if slen < 0 or p_next > end:
                return None
            raw = buf[pos + 2 : p_next]
            text = names.get(raw)
            if text is None:
                text = raw.decode("utf-8")
                if slen <= _MAX_CACHED_NAME and len(names) < _CACHE_LIMIT:
                    names[raw] = text
            append(text)
            pos = p_next
    except (struct.error, UnicodeDecodeError):
        return None
    return result, pos


def scan_topic_partitions(buf: bytes, pos: int) -> tuple[dict[str, tuple[int, ...]], int] | None:
    """Parse an array of ``(topic, [int32])`` at ``pos``; ``None`` if anything is off.

    Wire order is kept: partitions are neither sorted nor deduplicated. A topic that appears
    twice is left to the careful path, which concatenates its lists so nothing is lost.
    """
    end = len(buf)
    structs = _ARRAY_STRUCTS
    heads = _HEAD_STRUCTS
    names = _TOPIC_NAMES
    result: dict[str, tuple[int, ...]] = {}
    try:
        n: int = unpack_i32(buf, pos)[0]
        pos += 4
        # Each element is at least a 2-byte topic length and a 4-byte partition count.
        if n < 0 or 6 * n > end - pos:
            return None
        for _ in range(n):
            tlen: int = unpack_i16(buf, pos)[0]
            if tlen < 0:
                return None
            # The topic bytes and the partition count in one call (struct.error if short).
            raw, cnt = heads[tlen].unpack_from(buf, pos + 2)
            topic = names.get(raw)
            if topic is None:
                topic = raw.decode("utf-8")
                if tlen <= _MAX_CACHED_NAME and len(names) < _CACHE_LIMIT:
                    names[raw] = topic
            p_partitions = pos + 6 + tlen
            pos = p_partitions + 4 * cnt
            if cnt < 0 or pos > end:
                return None
            result[topic] = structs[cnt].unpack_from(buf, p_partitions)
    except (struct.error, UnicodeDecodeError):
        return None
    if len(result) != n:  # a repeated topic
        return None
    return result, pos


# --- fast path: encoding ----------------------------------------------------------------------


def pack_strings(values: Any, out: list[bytes]) -> None:
    """Append an array of strings, sorted, to ``out``; raise :class:`Slow` on anything odd."""
    if type(values) not in _FAST_SEQUENCES:
        raise Slow
    ordered = sorted(values)
    out.append(pack_i32(len(ordered)))
    append = out.append
    for value in ordered:
        if type(value) is not str:
            raise Slow
        raw = value.encode("utf-8")
        if len(raw) > INT16_MAX:
            raise Slow
        append(pack_i16(len(raw)))
        append(raw)


def pack_topic_partitions(mapping: Any, out: list[bytes]) -> None:
    """Append ``{topic: partitions}`` to ``out``, topics and partitions sorted.

    One cached topic header and one ``struct.pack`` per topic. Raises :class:`Slow` (or
    lets ``TypeError`` and friends out, which the caller treats the same) when the input is
    anything but a dict of str to a list/tuple of ints that fit an int32.
    """
    if not isinstance(mapping, dict):
        raise Slow
    topics = sorted(mapping)
    out.append(pack_i32(len(topics)))
    append = out.append
    structs = _ARRAY_STRUCTS
    headers = _TOPIC_HEADERS
    for topic in topics:
        values = mapping[topic]
        if type(values) not in _FAST_SEQUENCES:
            raise Slow
        header = headers.get(topic)
        if header is None:
            header = _topic_header(topic)
        append(header)
        # One pack for the partition count and the partitions.
        n = len(values)
        append(structs[n + 1].pack(n, *sorted(values)))


def _topic_header(topic: object) -> bytes:
    if type(topic) is not str:
        raise Slow
    raw = topic.encode("utf-8")
    if len(raw) > INT16_MAX:
        raise Slow
    header = pack_i16(len(raw)) + raw
    if len(raw) <= _MAX_CACHED_NAME and len(_TOPIC_HEADERS) < _CACHE_LIMIT:
        _TOPIC_HEADERS[topic] = header
    return header


FAST_ENCODE_ERRORS = (Slow, struct.error, TypeError, AttributeError, UnicodeError, ValueError)


# --- careful path ------------------------------------------------------------------------------


class Reader:
    """A cursor over an immutable byte buffer; every method names the field it reads."""

    __slots__ = ("_buf", "_end", "pos")

    def __init__(self, data: bytes, pos: int = 0) -> None:
        self._buf = data
        self._end = len(data)
        self.pos = pos

    @property
    def remaining(self) -> int:
        """Bytes not yet read."""
        return self._end - self.pos

    def _need(self, n: int, field: str) -> None:
        if self._end - self.pos < n:
            raise TruncatedError(
                f"need {n} bytes, {self._end - self.pos} left", field=field, offset=self.pos
            )

    def int16(self, field: str) -> int:
        """Read a big-endian int16."""
        self._need(2, field)
        value: int = unpack_i16(self._buf, self.pos)[0]
        self.pos += 2
        return value

    def int32(self, field: str) -> int:
        """Read a big-endian int32."""
        self._need(4, field)
        value: int = unpack_i32(self._buf, self.pos)[0]
        self.pos += 4
        return value

    def count(self, field: str, min_element_size: int) -> int:
        """Read a non-nullable array count and check the elements can fit in what is left.

        The check runs before anything is allocated, so a count of two billion in a tiny buffer
        is rejected at once.
        """
        start = self.pos
        n = self.int32(field)
        if n < 0:
            raise InvalidFieldError(
                f"array count {n} (a non-nullable array cannot be null)", field=field, offset=start
            )
        left = self._end - self.pos
        if n * min_element_size > left:
            raise TruncatedError(
                f"array count {n} needs at least {n * min_element_size} bytes, {left} left",
                field=field,
                offset=start,
            )
        return n

    def _length(self, n: int, start: int, field: str, header: int) -> None:
        left = self._end - start - header
        if n > left:
            raise TruncatedError(f"length {n} but {left} bytes left", field=field, offset=start)

    def _utf8(self, n: int, start: int, field: str) -> str:
        pos = self.pos
        try:
            text = self._buf[pos : pos + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidFieldError(
                f"invalid UTF-8 at byte {exc.start} of the string", field=field, offset=start
            ) from None
        self.pos = pos + n
        return text

    def string(self, field: str) -> str:
        """Read a non-nullable int16-length UTF-8 string."""
        start = self.pos
        n = self.int16(field)
        if n < 0:
            raise InvalidFieldError(
                f"string length {n} (a non-nullable string cannot be null)",
                field=field,
                offset=start,
            )
        self._length(n, start, field, 2)
        return self._utf8(n, start, field)

    def nullable_string(self, field: str) -> str | None:
        """Read an int16-length UTF-8 string where -1 means null."""
        start = self.pos
        n = self.int16(field)
        if n == -1:
            return None
        if n < 0:
            raise InvalidFieldError(
                f"string length {n} (only -1 marks null)", field=field, offset=start
            )
        self._length(n, start, field, 2)
        return self._utf8(n, start, field)

    def nullable_bytes(self, field: str) -> bytes | None:
        """Read int32-length bytes where -1 means null."""
        start = self.pos
        n = self.int32(field)
        if n == -1:
            return None
        if n < 0:
            raise InvalidFieldError(
                f"bytes length {n} (only -1 marks null)", field=field, offset=start
            )
        self._length(n, start, field, 4)
        pos = self.pos
        self.pos = pos + n
        return self._buf[pos : pos + n]

    def int32_array(self, field: str) -> tuple[int, ...]:
        """Read an int32 count then that many int32s, in one ``struct.unpack_from`` call."""
        n = self.count(field, 4)
        if n == 0:
            return ()
        values: tuple[int, ...] = _ARRAY_STRUCTS[n].unpack_from(self._buf, self.pos)
        self.pos += 4 * n
        return values

    def string_array(self, field: str) -> list[str]:
        """Read an array of non-nullable strings."""
        n = self.count(field, 2)
        return [self.string(field) for _ in range(n)]

    def topic_partitions(self, field: str) -> dict[str, tuple[int, ...]]:
        """Read an array of ``(string topic, [int32 partition])``.

        Tries :func:`scan_topic_partitions` first (same result), and re-reads field by field to
        name the field and offset when that gives up.
        """
        scanned = scan_topic_partitions(self._buf, self.pos)
        if scanned is not None:
            self.pos = scanned[1]
            return scanned[0]
        n = self.count(field, 6)
        result: dict[str, tuple[int, ...]] = {}
        topic_field = field + ".topic"
        partitions_field = field + ".partitions"
        for _ in range(n):
            topic = self.string(topic_field)
            partitions = self.int32_array(partitions_field)
            previous = result.get(topic)
            result[topic] = partitions if previous is None else previous + partitions
        return result


class Writer:
    """Collects encoded chunks, validating every value; :meth:`getvalue` joins them once."""

    __slots__ = ("_parts",)

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def getvalue(self) -> bytes:
        """The bytes written so far."""
        return b"".join(self._parts)

    def int16(self, value: int, field: str) -> None:
        """Write an int16, refusing values that do not fit."""
        try:
            self._parts.append(pack_i16(value))
        except struct.error:
            raise InvalidFieldError(f"{value!r} is not an int16", field=field) from None

    def int32(self, value: int, field: str) -> None:
        """Write an int32, refusing values that do not fit."""
        try:
            self._parts.append(pack_i32(value))
        except struct.error:
            raise InvalidFieldError(f"{value!r} is not an int32", field=field) from None

    def _count(self, n: int, field: str) -> None:
        if n > INT32_MAX:
            raise InvalidFieldError(f"{n} elements do not fit an int32 count", field=field)
        self._parts.append(pack_i32(n))

    def string(self, value: str, field: str) -> None:
        """Write a non-nullable string (int16 length, UTF-8)."""
        if not isinstance(value, str):
            raise InvalidFieldError(f"expected a str, got {type(value).__name__}", field=field)
        try:
            raw = value.encode("utf-8")
        except UnicodeEncodeError:
            # Lone surrogates cannot be written as UTF-8.
            raise InvalidFieldError("string is not encodable as UTF-8", field=field) from None
        if len(raw) > INT16_MAX:
            raise InvalidFieldError(
                f"string of {len(raw)} UTF-8 bytes exceeds the int16 length limit", field=field
            )
        self._parts.append(pack_i16(len(raw)))
        self._parts.append(raw)

    def nullable_string(self, value: str | None, field: str) -> None:
        """Write a string, or the -1 null marker."""
        if value is None:
            self._parts.append(pack_i16(-1))
        else:
            self.string(value, field)

    def nullable_bytes(self, value: bytes | bytearray | memoryview | None, field: str) -> None:
        """Write int32-length bytes, or the -1 null marker."""
        if value is None:
            self._parts.append(pack_i32(-1))
            return
        if not isinstance(value, bytes | bytearray | memoryview):
            raise InvalidFieldError(f"expected bytes, got {type(value).__name__}", field=field)
        raw = bytes(value)
        self._count(len(raw), field)
        self._parts.append(raw)

    def int32_array(self, values: Sequence[int], field: str) -> None:
        """Write an int32 count then the values, sorted ascending.

        Accepts what ``struct`` accepts on the fast path: ints and objects with ``__index__``.
        """
        ints: list[int] = []
        for v in values:
            try:
                i = operator.index(v)
            except TypeError:
                raise InvalidFieldError(f"partition {v!r} is not an int", field=field) from None
            if not INT32_MIN <= i <= INT32_MAX:
                raise InvalidFieldError(f"partition {v!r} is not an int32", field=field)
            ints.append(i)
        self._count(len(ints), field)
        if ints:
            ints.sort()
            self._parts.append(_ARRAY_STRUCTS[len(ints)].pack(*ints))

    def string_array(self, values: Iterable[str], field: str) -> None:
        """Write an array of strings, sorted."""
        if isinstance(values, str | bytes):
            raise InvalidFieldError("expected a sequence of str, not a single value", field=field)
        items = list(values)
        for value in items:
            if not isinstance(value, str):
                raise InvalidFieldError(f"expected a str, got {type(value).__name__}", field=field)
        items.sort()
        self._count(len(items), field)
        for value in items:
            self.string(value, field)

    def topic_partitions(self, partitions: object, field: str) -> None:
        """Write ``{topic: partitions}`` as an array of (topic, [int32]), topics and partitions
        sorted (KAFKA-12898: brokers compare metadata bytes, so the bytes must be deterministic).
        """
        items_method = getattr(partitions, "items", None)
        if items_method is None:
            raise InvalidFieldError(
                f"expected a mapping of topic to partitions, got {type(partitions).__name__}",
                field=field,
            )
        items: list[tuple[object, object]] = list(items_method())
        topic_field = field + ".topic"
        partitions_field = field + ".partitions"
        for topic, values in items:
            if not isinstance(topic, str):
                raise InvalidFieldError(
                    f"topic names must be str, got {type(topic).__name__}", field=topic_field
                )
            if isinstance(values, str | bytes) or not isinstance(
                values, Sequence | set | frozenset
            ):
                raise InvalidFieldError(
                    f"partitions of {topic!r} must be a sequence of int", field=partitions_field
                )
        items.sort(key=_first)
        self._count(len(items), field)
        for topic, values in items:
            self.string(topic, topic_field)  # type: ignore[arg-type]
            self.int32_array(list(values), partitions_field)  # type: ignore[call-overload]


def _first(item: tuple[object, object]) -> Any:
    return item[0]
