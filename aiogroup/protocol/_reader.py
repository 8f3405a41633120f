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

The fast path keeps a few bounded caches, all keyed by values that fully determine the result
(so a hit gives exactly what parsing or encoding would): compiled ``struct`` formats (bound
methods) per partition count and topic-name length, one shared ``str`` per topic name (and
rack id), the encoded header of each topic with its most used partition counts, and the last
topics array read and written (members of a group nearly always subscribe to the same topics).
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Callable, Iterable, Sequence
from itertools import accumulate, chain, compress, repeat
from operator import mul, ne
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
#: Distinct partition counts whose header bytes are kept per topic.
_COUNTS_PER_TOPIC = 8


class _ArrayStructs(dict[int, struct.Struct]):
    """``n -> Struct(">{n}i")``, built on first use."""

    def __missing__(self, n: int) -> struct.Struct:
        s = struct.Struct(f">{n}i")
        if len(self) < _CACHE_LIMIT:
            self[n] = s
        return s


_ARRAY_STRUCTS = _ArrayStructs()


class _ArrayUnpackers(dict[int, Any]):
    """``n -> Struct(">{n}i").unpack_from``: the bound method, so the hot loops skip an
    attribute lookup per partition list."""

    def __missing__(self, n: int) -> Any:
        f = _ARRAY_STRUCTS[n].unpack_from
        if len(self) < _CACHE_LIMIT:
            self[n] = f
        return f


class _ArrayPackers(dict[int, Any]):
    """``n -> Struct(">{n}i").pack``, bound."""

    def __missing__(self, n: int) -> Any:
        f = _ARRAY_STRUCTS[n].pack
        if len(self) < _CACHE_LIMIT:
            self[n] = f
        return f


_ARRAY_UNPACK = _ArrayUnpackers()
_ARRAY_PACK = _ArrayPackers()


class _HeadUnpackers(dict[int, Any]):
    """``n -> Struct(">{n}si").unpack_from``: a topic of ``n`` bytes then its partition count."""

    def __missing__(self, n: int) -> Any:
        f = struct.Struct(f">{n}si").unpack_from
        if len(self) < _CACHE_LIMIT:
            self[n] = f
        return f


_HEAD_UNPACK = _HeadUnpackers()


class _TopicNames(dict[bytes, str]):
    """UTF-8 topic bytes -> the one shared ``str`` (raises ``UnicodeDecodeError``)."""

    def __missing__(self, raw: bytes) -> str:
        text = raw.decode("utf-8")
        if len(raw) <= _MAX_CACHED_NAME and len(self) < _CACHE_LIMIT:
            self[raw] = text
        return text


class _CountedHeaders(dict[int, bytes]):
    """``n -> topic header + int32 n``: the bytes before a topic's partitions, per count.

    A balanced assignment gives each member one or two distinct counts per topic, so a few
    entries per topic cover nearly every call.
    """

    __slots__ = ("header",)

    def __init__(self, header: bytes) -> None:
        super().__init__()
        self.header = header

    def __missing__(self, n: int) -> bytes:
        value = self.header + pack_i32(n)  # struct.error past int32: the caller falls back
        if len(self) < _COUNTS_PER_TOPIC:
            self[n] = value
        return value


class _TopicHeaders(dict[str, _CountedHeaders]):
    """Topic -> its :class:`_CountedHeaders` (int16 length, UTF-8 bytes, then the count).

    Raises :class:`Slow` for anything that is not a ``str`` of at most 32767 UTF-8 bytes.
    """

    def __missing__(self, topic: str) -> _CountedHeaders:
        if type(topic) is not str:
            raise Slow
        raw = topic.encode("utf-8")
        if len(raw) > INT16_MAX:
            raise Slow
        headers = _CountedHeaders(pack_i16(len(raw)) + raw)
        if len(raw) <= _MAX_CACHED_NAME and len(self) < _CACHE_LIMIT:
            self[topic] = headers
        return headers


# Topic names (and rack ids) are few and repeat in every member's payload: decoding shares one
# str per name (a 1M-partition group would otherwise hold a million copies), encoding reuses
# its header.
# At most _CACHE_LIMIT names of at most _MAX_CACHED_NAME bytes: about 2 MB at worst for the
# names, about 10 MB for the headers (with _COUNTS_PER_TOPIC counts each).
_TOPIC_NAMES = _TopicNames()
_TOPIC_HEADERS = _TopicHeaders()
_FAST_SEQUENCES = (tuple, list)

#: Topic arrays larger than this many bytes are not kept (see :func:`scan_strings`).
_MAX_CACHED_ARRAY = 256 * 1024
#: The last topics array parsed: (its wire bytes, the names).
_last_strings: tuple[bytes, tuple[str, ...]] = (b"", ())
#: The last topics array written: (a copy of the input, its wire bytes).
_last_packed_strings: tuple[Any, bytes] = (None, b"")


def as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    """``data`` as ``bytes``: one copy for a bytearray or memoryview, so slices are cheap and the
    caller may reuse its buffer."""
    return data if type(data) is bytes else bytes(data)


class Slow(Exception):
    """Internal signal: the fast path met something unusual; use the careful path."""


# --- fast path: decoding ----------------------------------------------------------------------


def scan_strings(buf: bytes, pos: int) -> tuple[list[str], int] | None:
    """Parse an array of non-nullable strings at ``pos``; ``None`` if anything is off.

    The members of a group nearly always subscribe to the same topics, so the leader meets the
    same topics array in every member's metadata. The last array parsed is kept as its wire
    bytes: when ``buf`` holds the same bytes at ``pos``, the names are reused without parsing
    (the encoding is self-delimiting, so equal bytes parse to equal names).
    """
    global _last_strings
    block, cached = _last_strings
    if block and buf.startswith(block, pos):
        return list(cached), pos + len(block)
    start = pos
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
            append(names[buf[pos + 2 : p_next]])
            pos = p_next
    except (struct.error, UnicodeDecodeError):
        return None
    if pos - start <= _MAX_CACHED_ARRAY:
        _last_strings = (buf[start:pos], tuple(result))
    return result, pos


class _BlockTemplate:
    """The layout of one ``(topic, [int32])`` array: its topic headers and partition counts.

    The members of a large group own the same topics in the same numbers (one or two partitions
    of each, say), so the leader meets the same layout in nearly every member's payload; only
    the partition numbers differ. A template reads such a block with one ``struct`` call that
    returns the headers (length, name, count) as bytes and the partitions as ints, and accepts
    the result only if every header equals its own: the bytes then parse exactly as the loop
    would parse them.
    """

    __slots__ = (
        "count",
        "head_at",
        "heads",
        "last_at",
        "names",
        "prefix",
        "singles_at",
        "size",
        "slices",
        "unpack",
    )

    def __init__(self, shape: list[tuple[bytes, int]]) -> None:
        fmt = [">i"]
        heads: list[bytes] = []
        head_pos: list[int] = []
        slices: list[slice] = []
        names = _TOPIC_NAMES
        at = 1
        for raw, cnt in shape:
            fmt.append(f"{6 + len(raw)}s{cnt}i")
            heads.append(pack_i16(len(raw)) + raw + pack_i32(cnt))
            head_pos.append(at)
            slices.append(slice(at + 1, at + 1 + cnt))
            at += 1 + cnt
        layout = struct.Struct("".join(fmt))
        self.count = len(shape)
        self.unpack = layout.unpack_from
        self.size = layout.size
        self.heads = tuple(heads)
        # Cheap first checks: the count and first header, and the last header where this
        # layout puts it (a block of other topics almost always fails one of them).
        self.prefix = pack_i32(len(shape)) + heads[0]
        self.last_at = layout.size - 4 * shape[-1][1] - len(heads[-1])
        self.head_at = operator.itemgetter(*head_pos)
        self.names = tuple(names[raw] for raw, _ in shape)
        self.slices = slices
        #: One partition per topic (the usual layout): where those partitions are.
        self.singles_at = (
            operator.itemgetter(*(s.start for s in slices))
            if all(cnt == 1 for _, cnt in shape)
            else None
        )

    def read(self, buf: bytes, pos: int) -> dict[str, tuple[int, ...]] | None:
        """The block at ``pos`` if it has this layout, else ``None``."""
        if not (
            buf.startswith(self.prefix, pos) and buf.startswith(self.heads[-1], pos + self.last_at)
        ):
            return None
        try:
            values = self.unpack(buf, pos)
        except struct.error:  # too few bytes left for this layout
            return None
        if values[0] != self.count or self.head_at(values) != self.heads:
            return None
        if self.singles_at is not None:
            parts = self.singles_at(values)
            if min(parts) >= 0:
                singles = singles_for(max(parts))
                if singles is not None:
                    return dict(zip(self.names, map(singles.__getitem__, parts), strict=True))
        return dict(zip(self.names, map(values.__getitem__, self.slices), strict=True))


#: ``(p,)`` for small partition numbers, shared by every decoded block (grown on demand up to
#: ``_MAX_SINGLE``): one partition per topic is the usual layout of a large group, and a shared
#: tuple costs neither an allocation nor a garbage-collector entry.
_SINGLES: list[tuple[int]] = []
_MAX_SINGLE = 1 << 16


def singles_for(top: int) -> list[tuple[int]] | None:
    """The shared ``(p,)`` tuples, covering ``p <= top``; ``None`` past the bound."""
    if top >= len(_SINGLES):
        if top >= _MAX_SINGLE:
            return None
        _SINGLES.extend((p,) for p in range(len(_SINGLES), max(top + 1, 2 * len(_SINGLES))))
    return _SINGLES


#: Blocks of fewer topics are read by the loop: a template saves little there.
_TEMPLATE_MIN_TOPICS = 16
#: The last block layout seen twice in a row, and the layout of the last block read by the loop.
_template: _BlockTemplate | None = None
_candidate: tuple[tuple[bytes, int], ...] = ()
#: Templates made, by layout (a few: members of a group fall into a few layouts), oldest first.
_templates: dict[tuple[tuple[bytes, int], ...], _BlockTemplate] = {}
_MAX_TEMPLATES = 8
#: The same templates, by their count and first header (the latest for each).
_by_prefix: dict[bytes, _BlockTemplate] = {}


def scan_topic_partitions(buf: bytes, pos: int) -> tuple[dict[str, tuple[int, ...]], int] | None:
    """Parse an array of ``(topic, [int32])`` at ``pos``; ``None`` if anything is off.

    Wire order is kept: partitions are neither sorted nor deduplicated. A topic that appears
    twice is left to the careful path, which concatenates its lists so nothing is lost.

    A block laid out like earlier ones (same topics, same partition counts) is read with one
    call (:class:`_BlockTemplate`): a layout met twice in a row becomes a template, and a few
    are kept, found by the block's first topic.
    """
    global _template
    tmpl = _template
    if tmpl is not None:
        result = tmpl.read(buf, pos)
        if result is not None:
            return result, pos + tmpl.size
        # Members alternating between layouts: the template starting with this block's topic.
        try:
            other = _by_prefix.get(buf[pos : pos + 10 + unpack_i16(buf, pos + 4)[0]])
        except struct.error:
            other = None
        if other is not None and other is not tmpl:
            result = other.read(buf, pos)
            if result is not None:
                _template = other
                return result, pos + other.size
    return _scan_topic_partitions(buf, pos)


def _scan_topic_partitions(buf: bytes, pos: int) -> tuple[dict[str, tuple[int, ...]], int] | None:
    global _template, _candidate
    end = len(buf)
    unpack_arrays = _ARRAY_UNPACK
    unpack_heads = _HEAD_UNPACK
    names = _TOPIC_NAMES
    result: dict[str, tuple[int, ...]] = {}
    shape: list[tuple[bytes, int]] = []
    try:
        n: int = unpack_i32(buf, pos)[0]
        pos += 4
        # Each element is at least a 2-byte topic length and a 4-byte partition count.
        if n < 0 or 6 * n > end - pos:
            return None
        keep_shape = _TEMPLATE_MIN_TOPICS <= n <= _CACHE_LIMIT
        for _ in range(n):
            tlen: int = unpack_i16(buf, pos)[0]
            start = pos + 6 + tlen  # of the partitions
            # Lengths and counts are checked before a Struct is made for them, so garbage
            # cannot fill the caches with formats no valid payload uses.
            if tlen < 0 or start > end:
                return None
            # The topic bytes and the partition count in one call.
            head = unpack_heads[tlen](buf, pos + 2)
            raw, cnt = head
            pos = start + 4 * cnt
            if cnt < 0 or pos > end:
                return None
            result[names[raw]] = unpack_arrays[cnt](buf, start)
            if keep_shape:
                shape.append(head)
    except (struct.error, UnicodeDecodeError):
        return None
    if len(result) != n:  # a repeated topic
        return None
    if shape:
        key = tuple(shape)
        known = _templates.get(key)
        if known is not None:
            _template = known  # a layout met before: read the next block with it
        elif key == _candidate:
            if len(_templates) >= _MAX_TEMPLATES:
                oldest = _templates.pop(next(iter(_templates)))
                if _by_prefix.get(oldest.prefix) is oldest:
                    del _by_prefix[oldest.prefix]
            _template = _templates[key] = _BlockTemplate(shape)
            _by_prefix[_template.prefix] = _template
        _candidate = key
    return result, pos


# --- fast path: encoding ----------------------------------------------------------------------


def pack_strings(values: Any, out: list[bytes]) -> None:
    """Append an array of strings, sorted, to ``out``; raise :class:`Slow` on anything odd.

    The last array written is kept (a copy of the input and its bytes): a member writes the
    same topics at every rebalance, members of a group usually share them, and comparing two
    lists of the same ``str`` objects is far cheaper than sorting and encoding them again. The
    copy holds only exact ``str`` values, so an equal input encodes to the same bytes.
    """
    global _last_packed_strings
    if type(values) not in _FAST_SEQUENCES:
        raise Slow
    key, packed = _last_packed_strings
    if values == key:
        out.append(packed)
        return
    ordered = sorted(values)
    parts = [pack_i32(len(ordered))]
    append = parts.append
    for value in ordered:
        if type(value) is not str:
            raise Slow
        raw = value.encode("utf-8")
        if len(raw) > INT16_MAX:
            raise Slow
        append(pack_i16(len(raw)))
        append(raw)
    packed = b"".join(parts)
    out.append(packed)
    if len(packed) <= _MAX_CACHED_ARRAY:
        # A copy: the caller may change its list afterwards.
        _last_packed_strings = (values[:], packed)


def pack_topic_partitions(mapping: Any, out: list[bytes]) -> None:
    """Append ``{topic: partitions}`` to ``out``, topics and partitions sorted.

    Per topic, one cached header (topic and count) and one ``struct.pack``. Raises
    :class:`Slow` (or lets ``TypeError`` and friends out, which the caller treats the same)
    when the input is anything but a dict of str to a list/tuple of ints that fit an int32.
    """
    if not isinstance(mapping, dict):
        raise Slow
    if len(mapping) >= _TEMPLATE_MIN_TOPICS:
        packed = _pack_by_topics(mapping)
        if packed is not None:
            out.append(packed)
            return
    topics = sorted(mapping)
    append = out.append
    append(pack_i32(len(topics)))
    packers = _ARRAY_PACK
    headers = _TOPIC_HEADERS
    fast = _FAST_SEQUENCES
    for topic in topics:
        values = mapping[topic]
        if type(values) not in fast:
            raise Slow
        n = len(values)
        # The topic and the count come cached; the partitions take one pack of the sorted list
        # (prepending the count to them would copy the argument tuple). Sorting is most of the
        # cost of a short list, and a list of 0 or 1 partitions is sorted already.
        append(headers[topic][n])
        append(packers[n](*sorted(values)) if n > 1 else packers[n](*values))


class _TopicsLayout:
    """How to write one set of topics (the keys of a partitions dict, in their order): the
    order to write them in, their cached headers, and for the usual layout of one partition
    per topic a ``struct`` that writes the whole array in one call.

    A leader writes one assignment per member, and the members of a large group hold the same
    topics: the layout of the last dict written is kept and reused while the keys repeat.
    """

    __slots__ = ("at", "getter", "headers", "keys", "ones", "ordered")

    def __init__(self, keys: tuple[Any, ...]) -> None:
        ordered = sorted(keys)  # TypeError for keys that are not all str: the caller gives up
        self.keys = keys
        self.ordered = tuple(ordered) if ordered != list(keys) else None
        self.getter = operator.itemgetter(*ordered) if self.ordered else None
        # Raises Slow for a topic that is not a str or is too long: the caller gives up.
        self.headers = [_TOPIC_HEADERS[topic] for topic in ordered]
        heads = [h[1] for h in self.headers]
        fmt = f">i{''.join(f'{len(h)}si' for h in heads)}"
        pack = struct.Struct(fmt).pack
        n = len(ordered)
        # (count, head, partition, head, partition, ...): heads sit at the odd positions.
        self.ones: tuple[Callable[..., bytes], list[bytes], int] = (pack, heads, n)
        #: Where each topic's header starts in that layout.
        self.at = list(accumulate((len(h) + 4 for h in heads[:-1]), initial=4))


def _pack_by_topics(mapping: dict[Any, Any]) -> bytes | None:
    """The whole ``(topic, [int32])`` array of ``mapping`` in a few C-level calls, or ``None``
    to let the per-topic loop handle (and judge) it."""
    global _last_layout
    keys = tuple(mapping)
    layout = _last_layout
    try:
        if layout is None or keys != layout.keys:
            if len(keys) > _CACHE_LIMIT:
                return None
            layout = _last_layout = _TopicsLayout(keys)
        values = list(mapping.values()) if layout.getter is None else list(layout.getter(mapping))
        if not _FAST_SEQUENCES_SET.issuperset(map(type, values)):
            return None
        counts = list(map(len, values))
        pack, heads, n = layout.ones
        if counts.count(1) == n:
            return pack(
                n, *chain.from_iterable(zip(heads, chain.from_iterable(values), strict=True))
            )
        several = list(compress(range(n), map(ne, repeat(1), counts)))
        if len(several) * 8 < n:
            # A few topics with other counts: write one partition per topic (the first, or 0),
            # then put each of those topics' real bytes in place, last first.
            firsts = list(values)
            for j in several:
                firsts[j] = _ZERO
            out = pack(
                n, *chain.from_iterable(zip(heads, chain.from_iterable(firsts), strict=True))
            )
            for j in reversed(several):
                at = layout.at[j]
                head = layout.headers[j][counts[j]]
                part = _ARRAY_PACK[counts[j]](*sorted(values[j]))
                out = b"".join((out[:at], head, part, out[at + len(heads[j]) + 4 :]))
            return out
        # Any counts: one pack of every partition, cut per topic behind its header.
        if max(counts) > 1:
            values = list(map(sorted, values))
        body = _ARRAY_PACK[sum(counts)](*chain.from_iterable(values))
        ends = list(accumulate(map(mul, counts, repeat(4))))
        pieces = map(body.__getitem__, map(slice, chain((0,), ends), ends))
        heads_n = map(_CountedHeaders.__getitem__, layout.headers, counts)
        return pack_i32(n) + b"".join(chain.from_iterable(zip(heads_n, pieces, strict=True)))
    except FAST_ENCODE_ERRORS:
        return None


_last_layout: _TopicsLayout | None = None


_ZERO = (0,)


_FAST_SEQUENCES_SET = frozenset(_FAST_SEQUENCES)


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
