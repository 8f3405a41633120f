"""ThreadedBroker: an :class:`~aiogroup.testing.embedded.broker.EmbeddedBroker` on its own thread.

For blocking code (threads, real clients such as confluent-kafka or kafka-python)::

    with ThreadedBroker(topics={"t": 3}) as broker:
        confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, ...})
        broker.faults.cut(member_id=m)   # the same fault API, run on the broker's loop
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future as ConcurrentFuture
from types import TracebackType
from typing import Any, TypeVar

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupView
from aiogroup.testing.embedded.faults import FaultEvent, FaultRule
from aiogroup.testing.embedded.messages import GroupView
from aiogroup.testing.loop_thread import start_loop_thread, stop_loop_thread

__all__ = ["ThreadedBroker"]

T = TypeVar("T")


class ThreadedBroker:
    """An :class:`EmbeddedBroker` on its own event loop in a daemon thread, for blocking code.

    Calls that touch the broker are forwarded to its loop; they block the caller until done.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._broker: EmbeddedBroker | None = None

    @property
    def broker(self) -> EmbeddedBroker:
        if self._broker is None:
            raise ConfigurationError("the threaded broker is not started")
        return self._broker

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    @property
    def faults(self) -> _ThreadedFaults:
        return _ThreadedFaults(self)

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run ``fn()`` on the broker's loop and return its result."""

        async def run() -> T:
            return fn()

        return self.run(run(), timeout)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 30.0) -> T:
        if self._loop is None:
            coro.close()
            raise ConfigurationError("the threaded broker is not started")
        fut: ConcurrentFuture[T] = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return fut.result(timeout)

    def start(self) -> ThreadedBroker:
        if self._thread is not None:
            return self
        self._loop, self._thread, self._broker = start_loop_thread(
            lambda: EmbeddedBroker(**self._kwargs).start(),
            name="aiogroup-embedded-broker",
            timeout=30,
        )
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        with contextlib.suppress(Exception):
            self.run(self.broker.stop(), 15)
        stop_loop_thread(loop, thread, 15)
        self._loop = self._thread = None

    def restart(self) -> None:
        self.run(self.broker.restart())

    def group(self, group_id: str) -> GroupView | None:
        return self.call(lambda: self.broker.group(group_id))

    def wait_for_group(
        self, group_id: str, predicate: Callable[[GroupView | None], bool], timeout: float = 10.0
    ) -> GroupView | None:
        """Block until ``predicate(view)`` holds; raises ``TimeoutError`` after ``timeout``."""
        return self.run(self.broker.wait_for_group(group_id, predicate, timeout), timeout + 5)

    def consumer_group(self, group_id: str) -> ConsumerGroupView | None:
        return self.call(lambda: self.broker.consumer_group(group_id))

    def wait_for_consumer_group(
        self,
        group_id: str,
        predicate: Callable[[ConsumerGroupView | None], bool],
        timeout: float = 10.0,
    ) -> ConsumerGroupView | None:
        """:meth:`wait_for_group` for a KIP-848 consumer group."""
        return self.run(
            self.broker.wait_for_consumer_group(group_id, predicate, timeout), timeout + 5
        )

    def set_group_config(self, group_id: str, **settings: int | None) -> None:
        """:meth:`EmbeddedBroker.set_group_config`."""
        self.call(lambda: self.broker.set_group_config(group_id, **settings))

    def create_topic(self, name: str, num_partitions: int = 1) -> None:
        self.call(lambda: self.broker.create_topic(name, num_partitions))

    def __enter__(self) -> ThreadedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class _ThreadedFaults:
    """``broker.faults`` of a :class:`ThreadedBroker`: the same calls, run on the broker loop."""

    def __init__(self, owner: ThreadedBroker) -> None:
        self._owner = owner

    def delay(self, api: str | int, seconds: float, **kw: Any) -> FaultRule:
        return self._owner.call(lambda: self._owner.broker.faults.delay(api, seconds, **kw))

    def drop(self, api: str | int, **kw: Any) -> FaultRule:
        return self._owner.call(lambda: self._owner.broker.faults.drop(api, **kw))

    def fail(self, api: str | int, error_code: int, **kw: Any) -> FaultRule:
        return self._owner.call(lambda: self._owner.broker.faults.fail(api, error_code, **kw))

    def cut(self, **kw: Any) -> int:
        return self._owner.call(lambda: self._owner.broker.faults.cut(**kw))

    def clear(self) -> None:
        self._owner.call(self._owner.broker.faults.clear)

    def group_state(self, group_id: str) -> GroupView | None:
        return self._owner.group(group_id)

    def generation(self, group_id: str) -> int:
        return self._owner.call(lambda: self._owner.broker.faults.generation(group_id))

    @property
    def events(self) -> list[FaultEvent]:
        return self._owner.call(lambda: list(self._owner.broker.faults.events))

    def events_of(self, action: str) -> list[FaultEvent]:
        return self._owner.call(lambda: self._owner.broker.faults.events_of(action))
