"""The rebalance listener a Consumer gives its member: the consumer's bookkeeping around the
user's callbacks (KAFKA-14196: fetching of revoked partitions stops before the callback; with
auto-commit their processed positions are committed first, KIP-70; lost partitions are dropped
without a commit; assigned ones are tracked before the callback, so it may seek)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.consumer.consumer import Consumer

__all__ = ["Hooks"]

Partitions = frozenset[TopicPartition]


class Hooks:
    """The listener the member calls: the consumer's bookkeeping around the user's callbacks."""

    def __init__(self, consumer: Consumer, listener: Any) -> None:
        self._consumer = consumer
        self.listener = listener

    async def _user(self, name: str, partitions: Partitions) -> None:
        listener = self.listener
        if listener is None:
            return
        method = getattr(listener, name, None)
        if method is None and name == "on_partitions_lost":
            method = getattr(listener, "on_partitions_revoked", None)
        if method is None:
            return
        result = method(partitions)
        if inspect.isawaitable(result):
            await result

    async def on_partitions_revoked(self, partitions: Partitions) -> None:
        consumer = self._consumer
        consumer._state.stop(partitions)  # KAFKA-14196: nothing more of them, from now
        # Still owned until the callback returns (KIP-429): position, commit, committed and
        # seek work for them inside it, during close() and hand_off() too.
        consumer._revoking = partitions
        try:
            if consumer._auto_commit:
                # Java revokes inside poll(), once the records of the previous poll are
                # processed; here the application may still be working on its last records
                # of these partitions: wait until it asks for more (bounded), then commit.
                await consumer._wait_released(partitions)
                await consumer._commit_quietly(partitions, "before revoking")
            await self._user("on_partitions_revoked", partitions)
        finally:
            consumer._revoking = frozenset()
            consumer._state.remove(partitions)
            consumer._meters.forget(partitions)

    async def on_partitions_lost(self, partitions: Partitions) -> None:
        consumer = self._consumer
        consumer._state.stop(partitions)  # never committed: another member may own them
        try:
            await self._user("on_partitions_lost", partitions)
        finally:
            consumer._state.remove(partitions)
            consumer._meters.forget(partitions)

    async def on_partitions_assigned(self, partitions: Partitions) -> None:
        consumer = self._consumer
        consumer._state.add(partitions)  # before the callback, so it can seek
        try:
            await self._user("on_partitions_assigned", partitions)
        finally:
            consumer._fetcher.wake()
