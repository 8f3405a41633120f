"""Bytes written field by field, independently of the codec, for the protocol tests."""

from __future__ import annotations

import struct


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def string(s: str) -> bytes:
    raw = s.encode()
    return i16(len(raw)) + raw


def int32s(values: list[int]) -> bytes:
    return i32(len(values)) + b"".join(i32(v) for v in values)
