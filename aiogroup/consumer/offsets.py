"""Offset look-ups and commit arguments of :class:`~aiogroup.consumer.Consumer`:
ListOffsets by timestamp (``offsets_for_times``, ``beginning_offsets``, ``end_offsets``, the
position of a partition being revoked) and the forms ``commit({tp: ...})`` accepts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from aiogroup.errors import AiogroupError, ConfigurationError, error_for_code
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.consumer.state import ConsumerState
    from aiogroup.consumer.wire import DataPlane, ListedOffset

__all__ = ["OffsetAndTimestamp", "OffsetQueries", "list_offsets", "offset_of"]

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


class OffsetQueries:
    """The :class:`~aiogroup.consumer.Consumer` calls that look offsets up, without moving
    positions: what the last Fetch answers said (``highwater``, ``last_stable_offset``,
    ``last_poll_timestamp``) and ListOffsets (``offsets_for_times``, ``beginning_offsets``,
    ``end_offsets``). A part of the Consumer, which provides what they read."""

    _state: ConsumerState
    _plane: DataPlane
    _request_timeout: float

    def _ensure_open(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        raise NotImplementedError  # the Consumer's

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark last seen in a Fetch answer for ``partition``."""
        st = self._state.get(partition)
        return None if st is None else st.high_watermark

    def last_stable_offset(self, partition: TopicPartition) -> int | None:
        """The last stable offset last seen for ``partition`` (read_committed reads up to it)."""
        st = self._state.get(partition)
        return None if st is None else st.last_stable_offset

    def last_poll_timestamp(self, partition: TopicPartition) -> int | None:
        """When (loop time, ms) a Fetch answer for ``partition`` last arrived."""
        st = self._state.get(partition)
        return None if st is None or st.last_fetch is None else int(st.last_fetch * 1000)

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first offset whose timestamp is at or after the given one
        (ms since the epoch), with that record's timestamp; None if there is none."""
        for tp, ts in timestamps.items():
            if ts < 0:
                raise ConfigurationError(f"timestamp for {tp} must be >= 0, not {ts}")
        listed = await self._list_offsets({tp: int(ts) for tp, ts in timestamps.items()})
        return {
            tp: None if o.offset < 0 else OffsetAndTimestamp(o.offset, o.timestamp)
            for tp, o in listed.items()
        }

    async def beginning_offsets(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """The first offset of each partition (does not move positions)."""
        listed = await self._list_offsets({tp: -2 for tp in partitions})
        return {tp: o.offset for tp, o in listed.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The offset after the last record of each partition (the high watermark; the last
        stable offset under read_committed)."""
        listed = await self._list_offsets({tp: -1 for tp in partitions})
        return {tp: o.offset for tp, o in listed.items()}

    async def _list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, ListedOffset]:
        self._ensure_open(timestamps)
        config = self._state.config
        return await list_offsets(
            self._plane,
            timestamps,
            read_committed=config.read_committed,
            request_timeout=self._request_timeout,
            retry_backoff=config.retry_backoff_ms / 1000,
        )
