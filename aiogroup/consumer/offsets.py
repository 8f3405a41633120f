"""Offset look-ups and commit arguments of :class:`~aiogroup.consumer.Consumer`:
ListOffsets by timestamp (``offsets_for_times``, ``beginning_offsets``, ``end_offsets``, the
position of a partition being revoked) and the forms ``commit({tp: ...})`` accepts."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aiogroup.errors import AiogroupError, ConfigurationError, error_for_code
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.consumer.wire import DataPlane, ListedOffset

__all__ = ["OffsetAndTimestamp", "list_offsets", "offset_of"]

#: ListOffsets answers retried after a metadata refresh: the leader moved or is not known yet.
_RETRIED = frozenset({3, 5, 6, 74, 75, 78})


class OffsetAndTimestamp(tuple[int, int]):
    """``offsets_for_times`` answer: the first offset at or after the timestamp, and its time."""

    __slots__ = ()

    def __new__(cls, offset: int, timestamp: int) -> OffsetAndTimestamp:
        return tuple.__new__(cls, (offset, timestamp))

    @property
    def offset(self) -> int:
        return self[0]

    @property
    def timestamp(self) -> int:
        return self[1]

    def __repr__(self) -> str:
        return f"OffsetAndTimestamp(offset={self[0]}, timestamp={self[1]})"


async def list_offsets(
    plane: DataPlane,
    timestamps: Mapping[TopicPartition, int],
    *,
    read_committed: bool,
    request_timeout: float,
    retry_backoff: float,
) -> dict[TopicPartition, ListedOffset]:
    """ListOffsets of each partition at its timestamp (-2 earliest, -1 latest), from each
    partition's leader; leader errors refresh the metadata and retry within the timeout."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request_timeout
    pending = dict(timestamps)
    result: dict[TopicPartition, ListedOffset] = {}
    isolation = 1 if read_committed else 0
    while pending:
        view = await asyncio.wait_for(plane.metadata({tp.topic for tp in pending}), request_timeout)
        by_node: dict[int, dict[TopicPartition, int]] = {}
        for tp, ts in pending.items():
            leader = view.leaders.get(tp)
            if leader is not None:
                by_node.setdefault(leader[0], {})[tp] = ts
        for node, part in by_node.items():
            offsets, errors = await plane.list_offsets(node, part, isolation_level=isolation)
            result.update(offsets)
            for tp in offsets:
                pending.pop(tp, None)
            for tp, code in errors.items():
                if code not in _RETRIED:
                    raise _list_error(tp, code)
        if pending:
            if loop.time() >= deadline:
                raise TimeoutError(f"no offsets for {sorted(pending)} in time")
            await asyncio.sleep(retry_backoff)  # backoff
    return result


def offset_of(tp: TopicPartition, value: Any) -> int:
    """The offset of a ``commit({tp: value})`` entry: an int, or aiokafka's ``(offset, "")``."""
    if isinstance(value, int):
        return value
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], int):
        if value[1]:
            raise ConfigurationError(
                f"commit metadata is not supported ({tp}: {value[1]!r}); commit plain offsets"
            )
        return value[0]
    raise ConfigurationError(f"commit offset for {tp} must be an int, not {value!r}")


def _list_error(tp: TopicPartition, code: int) -> AiogroupError:
    return error_for_code(code, f"ListOffsets for {tp} failed with error {code}")
