"""The asyncio fetch driver over a scripted data plane: what it wakes, and when.

``Consumer.position()`` waits on the fetcher's data signal; a partition whose position becomes
known with no record to return (a committed offset at the end of the log, ``latest`` on a
quiet topic) must still wake it, or it sleeps for the whole request timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

import pytest

from aiogroup.consumer.fetcher import Fetcher
from aiogroup.consumer.state import (
    ConsumerState,
    FetchConfig,
    FetchedPartition,
    FetchedResponse,
    FetchPlan,
)
from aiogroup.consumer.wire import ClusterView, DataPlane, ListedOffset
from aiogroup.protocol.types import TopicPartition

from .batches import batch

A = TopicPartition("t", 0)


class QuietPlane:
    """A leader for every partition, ``end`` from ListOffsets, and fetches nothing answers."""

    def __init__(self, end: int) -> None:
        self.end = end
        self.listed: list[Mapping[TopicPartition, int]] = []
        self.fetching = asyncio.Event()

    @property
    def request_timeout(self) -> float:
        return 30.0

    async def metadata(self, topics: Iterable[str]) -> ClusterView:
        return ClusterView(leaders={A: (1, 0)}, partitions={A.topic: 1})

    async def list_offsets(
        self,
        node_id: int,
        timestamps: Mapping[TopicPartition, int],
        *,
        isolation_level: int = 0,
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> tuple[dict[TopicPartition, ListedOffset], dict[TopicPartition, int]]:
        self.listed.append(dict(timestamps))
        return {tp: ListedOffset(self.end, -1) for tp in timestamps}, {}

    async def fetch(self, plan: FetchPlan) -> FetchedResponse:
        self.fetching.set()  # only planned once the position is known
        await asyncio.Event().wait()  # a long poll on a quiet partition
        raise AssertionError("unreachable")


@pytest.mark.parametrize("committed", [5, None], ids=["committed-offset", "reset-latest"])
async def test_a_position_becoming_known_wakes_the_waiters(committed: int | None) -> None:
    state = ConsumerState(FetchConfig(auto_offset_reset="latest"))
    plane = QuietPlane(end=9)

    async def lookup(parts: Sequence[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        return {tp: committed for tp in parts}

    fetcher = Fetcher(state, cast(DataPlane, plane), lookup)
    state.add([A])
    waiter = fetcher.data_waiter()
    assert state.position(A) is None
    fetcher.start()
    try:
        await plane.fetching.wait()
        assert state.position(A) == (9 if committed is None else committed)
        assert bool(plane.listed) is (committed is None)
        assert waiter.done(), "position known, but nothing woke the tasks waiting for it"
    finally:
        await fetcher.stop()


class AnsweringPlane(QuietPlane):
    """The first Fetch is answered with one record; later ones are long polls (counted)."""

    def __init__(self) -> None:
        super().__init__(end=0)
        self.fetches = 0

    async def fetch(self, plan: FetchPlan) -> FetchedResponse:
        self.fetches += 1
        if self.fetches == 1:
            part = FetchedPartition(A, 0, high_watermark=1, records=batch([b"r"], 0))
            return FetchedResponse(0, 0, [part])
        return await super().fetch(plan)


async def test_the_next_fetch_leaves_before_the_application_is_woken() -> None:
    """An answer with records plans the next Fetch before it wakes the application, so the
    request goes out while the application decodes and processes what came (woken first, a
    busy application held it back for as long as that took)."""
    state = ConsumerState(FetchConfig(auto_offset_reset="earliest"))
    plane = AnsweringPlane()

    async def lookup(parts: Sequence[TopicPartition]) -> Mapping[TopicPartition, int | None]:
        return dict.fromkeys(parts)

    fetcher = Fetcher(state, cast(DataPlane, plane), lookup)
    state.add([A])
    fetcher.start()
    try:
        while not state.has_records():
            await fetcher.data_waiter()  # the application waits for records
        assert plane.fetches == 2, "the application ran before the next Fetch left"
    finally:
        await fetcher.stop()
