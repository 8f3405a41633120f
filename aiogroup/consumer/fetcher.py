"""The asyncio fetch driver: carries out what the sans-I/O core plans, and nothing else.

One task wakes whenever something changed (a response arrived, the application read records,
a partition was assigned, sought, paused or resumed) or a backoff ended, and asks the core
(:class:`~aiogroup.consumer.state.ConsumerState`) for the requests to send now: Fetch (at most
one per leader, each in its own task, so a slow broker delays only its own partitions),
committed offsets (OffsetFetch through the group member), ListOffsets to leaders, and Metadata
when leaders are unknown or moved. Answers go back into the core; records arriving wake the
application's ``getmany``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from aiogroup.client.signal import Signal
from aiogroup.consumer.records import count_records
from aiogroup.consumer.state import ConsumerState, FetchPlan
from aiogroup.consumer.wire import DataPlane
from aiogroup.observability.registry import MetricsRegistry
from aiogroup.protocol.types import TopicPartition

__all__ = ["Fetcher"]

log = logging.getLogger("aiogroup.consumer")

CommittedLookup = Callable[
    [Sequence[TopicPartition]], Awaitable[Mapping[TopicPartition, int | None]]
]


class Fetcher:
    """Runs the core's fetches, position lookups and metadata refreshes."""

    def __init__(
        self,
        state: ConsumerState,
        plane: DataPlane,
        committed: CommittedLookup,
        *,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300_000,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self._state = state
        #: Where each Fetch answer's latency and size go (``fetch-latency-*``, ...).
        self._metrics = metrics
        self._plane = plane
        self._committed = committed
        self._backoff = max(retry_backoff_ms, 1) / 1000
        self._metadata_max_age = metadata_max_age_ms / 1000
        self._task: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._wakeup: asyncio.Future[None] | None = None
        self._data = Signal()
        self._metadata_task: asyncio.Task[None] | None = None
        self._metadata_at = 0.0
        self._metadata_retry_at = 0.0
        self._stopped = False
        #: The last exception a background request ended with (for logs and tests).
        self.last_error: BaseException | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._stopped = False
            self._task = asyncio.create_task(self._run(), name="aiogroup-fetcher")

    async def stop(self) -> None:
        """Cancel everything in flight (the core keeps its positions)."""
        self._stopped = True
        tasks = [t for t in (self._task, *self._tasks) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self._task = None
        self._tasks.clear()
        self._metadata_task = None
        self._notify_data()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- signals --------------------------------------------------------------------------

    def wake(self) -> None:
        """Something changed: plan again soon."""
        waiter = self._wakeup
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def data_waiter(self) -> asyncio.Future[bool]:
        """A future that completes when records or errors next arrive, or a position becomes
        known (a committed offset looked up, an offset reset answered): ``position()`` waits
        on it too."""
        return self._data.next()

    def _notify_data(self) -> None:
        self._data.fire()

    # -- the loop -------------------------------------------------------------------------

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        state = self._state
        while not self._stopped:
            now = loop.time()
            try:
                self._step(now)
            except Exception:  # a bug here must not stop consuming silently
                log.exception("the fetch driver failed to plan")
                raise
            deadline = state.next_deadline(now)
            if state.metadata_needed and self._metadata_task is None:
                retry = self._metadata_retry_at
                deadline = retry if deadline is None else min(deadline, retry)
            refresh = self._metadata_at + self._metadata_max_age
            deadline = refresh if deadline is None else min(deadline, refresh)
            waiter = loop.create_future()
            self._wakeup = waiter
            handle = loop.call_at(max(deadline, now + 0.001), _resolve, waiter)
            try:
                await waiter
            finally:
                handle.cancel()
                self._wakeup = None

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _step(self, now: float) -> None:
        state = self._state
        if (
            (
                (state.metadata_needed and now >= self._metadata_retry_at)
                or now >= self._metadata_at + self._metadata_max_age
            )
            and self._metadata_task is None
            and state.topics
        ):
            self._metadata_task = self._spawn(self._refresh_metadata())
        lookups = state.take_committed_lookups(now)
        if lookups:
            self._spawn(self._lookup_committed(lookups))
        for node, timestamps in state.take_resets(now).items():
            self._spawn(self._list_offsets(node, timestamps))
        for plan in state.plan(now):
            self._spawn(self._fetch(plan))

    # -- requests -------------------------------------------------------------------------

    async def _fetch(self, plan: FetchPlan) -> None:
        loop = asyncio.get_running_loop()
        sent = loop.time()
        try:
            response = await self._plane.fetch(plan)
        except asyncio.CancelledError:
            self._state.on_fetch_failed(plan, loop.time(), "cancelled")
            raise
        except Exception as exc:
            self.last_error = exc
            log.info("Fetch to node %s failed: %r", plan.node_id, exc)
            self._state.on_fetch_failed(plan, loop.time(), str(exc) or type(exc).__name__)
        else:
            now = loop.time()
            if self._metrics is not None:
                data = [p.records for p in response.partitions if p.records]
                size = sum(len(d) for d in data)
                count = sum(count_records(d) for d in data)
                self._metrics.record_fetch(now - sent, size, now, node=plan.node_id, records=count)
            got = self._state.on_fetch_response(plan, response, now)
            # Plan the next Fetch before waking the application: its task is then queued ahead
            # of the application's, so the request is written before the application decodes
            # and processes what arrived (woken first, a busy application held the next Fetch
            # back for as long as it took: tens to hundreds of ms at 10k records/s).
            self._plan_now(now)
            if got or self._state.has_records():  # records, or an error to raise
                self._notify_data()
        self.wake()

    def _plan_now(self, now: float) -> None:
        """The driver loop's step, run at once (the loop still runs on :meth:`wake`)."""
        if self._stopped:
            return
        try:
            self._step(now)
        except Exception:  # the driver loop logs and raises it on its own step
            log.debug("planning after a Fetch answer failed; the driver retries", exc_info=True)

    async def _refresh_metadata(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            view = await self._plane.metadata(self._state.topics)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.last_error = exc
            log.info("metadata request failed: %r", exc)
            self._metadata_retry_at = loop.time() + self._backoff
        else:
            self._state.on_metadata(view.leaders, view.brokers)
            self._metadata_at = loop.time()
            if self._state.metadata_needed:
                # Some partition has no leader yet (a new topic, an election): ask again soon.
                self._metadata_retry_at = loop.time() + self._backoff
        finally:
            self._metadata_task = None
        self.wake()

    async def _lookup_committed(self, partitions: Sequence[TopicPartition]) -> None:
        loop = asyncio.get_running_loop()
        try:
            offsets = await self._committed(partitions)
        except asyncio.CancelledError:
            self._state.lookup_failed(partitions, loop.time(), "cancelled")
            raise
        except Exception as exc:
            self.last_error = exc
            log.info("committed offsets lookup failed, retrying: %r", exc)
            self._state.lookup_failed(partitions, loop.time(), str(exc) or type(exc).__name__)
        else:
            self._state.on_committed({tp: offsets.get(tp) for tp in partitions})
            self._notify_data()  # positions are known now (or an error is there to raise)
        self.wake()

    async def _list_offsets(self, node_id: int, timestamps: Mapping[TopicPartition, int]) -> None:
        loop = asyncio.get_running_loop()
        state = self._state
        epochs = {tp: leader[1] for tp in timestamps if (leader := state.leader(tp)) is not None}
        try:
            offsets, errors = await self._plane.list_offsets(
                node_id,
                timestamps,
                isolation_level=1 if state.config.read_committed else 0,
                leader_epochs=epochs,
            )
        except asyncio.CancelledError:
            state.on_reset_offsets({}, {tp: -1 for tp in timestamps}, loop.time())
            raise
        except Exception as exc:
            self.last_error = exc
            log.info("ListOffsets to node %s failed: %r", node_id, exc)
            state.on_reset_offsets({}, {tp: -1 for tp in timestamps}, loop.time())
            state.metadata_needed = True
        else:
            state.on_reset_offsets({tp: o.offset for tp, o in offsets.items()}, errors, loop.time())
            self._notify_data()  # positions reset (or an error is there to raise)
        self.wake()


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
