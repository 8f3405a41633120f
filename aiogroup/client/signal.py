"""The next time something happens, as one future every waiter shares.

The member's ``changed()``, the consumer's wait for a poll and the fetcher's wait for data are
the same thing: any number of tasks wait for the *next* occurrence, and one ``fire()`` wakes
them all. Take :meth:`Signal.next` *before* checking your condition, then await it (shielded
where one waiter's cancellation must not cancel the others).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["Signal", "loop_time"]


def loop_time() -> float:
    """The running loop's clock, or outside a loop the default loop's (``time.monotonic``):
    the clock every deadline and "since" of a member and its consumer is taken in."""
    try:
        return asyncio.get_running_loop().time()
    except RuntimeError:
        return time.monotonic()


class Signal:
    """One shared future per next occurrence."""

    __slots__ = ("_future",)

    def __init__(self) -> None:
        self._future: asyncio.Future[bool] | None = None

    def next(self) -> asyncio.Future[bool]:
        """The future the next :meth:`fire` completes (with True); shared by every caller."""
        future = self._future
        if future is None or future.done():
            future = self._future = asyncio.get_running_loop().create_future()
        return future

    def fire(self) -> None:
        """Wake every waiter of the current occurrence; later callers get a new future."""
        future, self._future = self._future, None
        if future is not None and not future.done():
            future.set_result(True)
