"""Rebalance listeners and the runner that invokes them (KIP-429 callback semantics).

A listener has ``on_partitions_revoked`` and ``on_partitions_assigned`` and may have
``on_partitions_lost`` (if it has not, lost partitions go to ``on_partitions_revoked``, as
Java's default method does). Each may be a plain function or a coroutine function: the runner
awaits whatever is awaitable. Partitions arrive as ``frozenset[TopicPartition]``; sort them if
order matters to you (``sorted(partitions)`` orders by topic, then partition).

The runner, :func:`run_callbacks`, follows KIP-429 "Rebalance Callback Error Handling":

- order: lost, then revoked, then assigned; an empty lost or revoked set is not delivered;
  assigned is delivered whenever the machine asks (always after SyncGroup, even empty);
- if a callback raises, the remaining callbacks still run; the **first** exception is kept,
  wrapped in :class:`RebalanceCallbackError` (the original is ``__cause__``) and returned in
  ``CallbacksFinished.first_error``; the machine raises it to the user, and the assignment
  change stands;
- ``asyncio.CancelledError``, ``KeyboardInterrupt`` and ``SystemExit`` are never swallowed;
- each callback's latency goes to the metrics sink (``partition-*-latency``).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from aiogroup.membership.actions import InvokeCallbacks
from aiogroup.membership.errors import RebalanceCallbackError
from aiogroup.membership.events import CallbacksFinished
from aiogroup.observability.metrics import (
    PARTITION_ASSIGNED_LATENCY,
    PARTITION_LOST_LATENCY,
    PARTITION_REVOKED_LATENCY,
    MetricsSink,
)
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "ConsumerRebalanceListener",
    "RebalanceCallbackError",
    "RebalanceListener",
    "run_callbacks",
]

Partitions = frozenset[TopicPartition]
#: Callbacks may return anything; an awaitable result is awaited.
_Result = object


@runtime_checkable
class RebalanceListener(Protocol):
    """What the runner needs; ``on_partitions_lost`` is optional (falls back to revoked)."""

    def on_partitions_revoked(self, partitions: Partitions) -> _Result: ...

    def on_partitions_assigned(self, partitions: Partitions) -> _Result: ...


class ConsumerRebalanceListener:
    """A convenient base class: every callback does nothing; lost calls revoked (as Java)."""

    def on_partitions_revoked(self, partitions: Partitions) -> _Result:
        return None

    def on_partitions_assigned(self, partitions: Partitions) -> _Result:
        return None

    def on_partitions_lost(self, partitions: Partitions) -> _Result:
        return self.on_partitions_revoked(partitions)


async def _call(
    name: str,
    func: Callable[[Partitions], _Result],
    partitions: Partitions,
    metric: str,
    clock: Callable[[], float],
    metrics: MetricsSink | None,
) -> BaseException | None:
    start = clock()
    error: BaseException | None = None
    try:
        result = func(partitions)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # BaseException (cancellation, exit) propagates
        error = RebalanceCallbackError(
            f"{name}({sorted(partitions)}) raised {exc!r}",
            callback=name,
            partitions=frozenset(partitions),
        )
        error.__cause__ = exc
    finally:
        if metrics is not None:
            end = clock()
            metrics.observe(metric, end - start, end)
    return error


async def run_callbacks(
    listener: RebalanceListener | None,
    action: InvokeCallbacks,
    *,
    metrics: MetricsSink | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CallbacksFinished:
    """Run the callbacks ``action`` asks for and return the event to feed back to the machine.

    ``clock`` times each callback for ``metrics`` (the runner belongs to the I/O side).
    """
    first: BaseException | None = None
    if listener is None:
        return CallbacksFinished(action.token, None)
    if action.lost:
        lost_cb = getattr(listener, "on_partitions_lost", None)
        func = lost_cb if callable(lost_cb) else listener.on_partitions_revoked
        name = "on_partitions_lost" if callable(lost_cb) else "on_partitions_revoked"
        err = await _call(name, func, action.lost, PARTITION_LOST_LATENCY, clock, metrics)
        first = first or err
    if action.revoked:
        err = await _call(
            "on_partitions_revoked",
            listener.on_partitions_revoked,
            action.revoked,
            PARTITION_REVOKED_LATENCY,
            clock,
            metrics,
        )
        first = first or err
    if action.assigned is not None:
        err = await _call(
            "on_partitions_assigned",
            listener.on_partitions_assigned,
            action.assigned,
            PARTITION_ASSIGNED_LATENCY,
            clock,
            metrics,
        )
        first = first or err
    return CallbacksFinished(action.token, first)
