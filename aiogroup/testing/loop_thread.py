"""An asyncio event loop of its own in a daemon thread, for servers that synchronous code
(tests, benchmarks, the chaos runner) starts and stops: the threaded embedded broker and the
chaos proxy."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TypeVar

__all__ = ["start_loop_thread", "stop_loop_thread"]

T = TypeVar("T")


def start_loop_thread(
    boot: Callable[[], Awaitable[T]], *, name: str, timeout: float
) -> tuple[asyncio.AbstractEventLoop, threading.Thread, T]:
    """Start a new event loop in a daemon thread, await ``boot()`` on it, then keep the loop
    running until :func:`stop_loop_thread`. Returns the loop, the thread and what ``boot``
    returned; raises what ``boot`` raised (the thread has ended then), or ``TimeoutError``."""
    loop = asyncio.new_event_loop()
    ready: Future[T] = Future()

    def main() -> None:
        asyncio.set_event_loop(loop)

        async def started() -> None:
            try:
                ready.set_result(await boot())
            except BaseException as exc:
                ready.set_exception(exc)

        loop.run_until_complete(started())
        if ready.exception() is None:
            loop.run_forever()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()

    thread = threading.Thread(target=main, name=name, daemon=True)
    thread.start()
    return loop, thread, ready.result(timeout)


def stop_loop_thread(
    loop: asyncio.AbstractEventLoop, thread: threading.Thread, timeout: float
) -> None:
    """Stop a loop started by :func:`start_loop_thread` and wait for its thread."""
    loop.call_soon_threadsafe(loop.stop)
    thread.join(timeout)
