"""The event loop's side of the sans-I/O coordinator: its clock, its timer, its parked answers.

:class:`CoordinatorDriver` gives :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`
the loop's monotonic clock (:meth:`~CoordinatorDriver.now`), keeps one timer at the
coordinator's next deadline (:meth:`~CoordinatorDriver.rearm`, after every call that may have
moved it), and turns a parked JoinGroup or SyncGroup answer into something to await
(:meth:`~CoordinatorDriver.deferred`). The timer runs only while the broker is started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from aiogroup.testing.embedded.coordinator import GroupCoordinator

__all__ = ["CoordinatorDriver"]

T = TypeVar("T")


class CoordinatorDriver:
    """Drives ``coordinator`` on the running loop; ``on_change`` is called whenever the
    coordinator may have changed (the broker wakes the tests waiting on its state)."""

    def __init__(self, coordinator: GroupCoordinator, on_change: Callable[[], None]) -> None:
        self.coordinator = coordinator
        self._on_change = on_change
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running = False
        self._timer: asyncio.TimerHandle | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """The broker is serving on ``loop``: from now on :meth:`rearm` arms the timer."""
        self._loop = loop
        self._running = True

    def stop(self) -> None:
        """The broker stopped: no timer until the next :meth:`start`."""
        self._running = False
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def now(self) -> float:
        loop = self._loop or asyncio.get_running_loop()
        return loop.time()

    def rearm(self) -> None:
        """(Re)arm the single coordinator timer and wake group watchers."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running and self._loop is not None:
            deadline = self.coordinator.next_deadline()
            if deadline is not None:
                self._timer = self._loop.call_at(deadline, self._on_timer)
        self._on_change()

    def _on_timer(self) -> None:
        self._timer = None
        self.coordinator.on_timer(self.now())
        self.rearm()

    async def deferred(self, call: Callable[[Callable[[T], None]], None]) -> T:
        """Run ``call(respond)`` (a coordinator call taking a ``respond`` callback) and wait
        for the answer it gives, now or later."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()

        def respond(answer: T) -> None:
            if not fut.done():
                fut.set_result(answer)

        try:
            call(respond)
        finally:
            self.rearm()
        return await fut
