"""The rebalance listener runner: order, empty sets, first-exception rules, cancellation."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.client.callbacks import (
    ConsumerRebalanceListener,
    RebalanceCallbackError,
    run_callbacks,
)
from aiogroup.errors import CallbackError
from aiogroup.membership import InvokeCallbacks
from aiogroup.observability.metrics import KIP429Metrics
from aiogroup.protocol import TopicPartition

from .helpers import tps

Partitions = frozenset[TopicPartition]


def action(
    *,
    revoked: Partitions = frozenset(),
    assigned: Partitions | None = None,
    lost: Partitions = frozenset(),
) -> InvokeCallbacks:
    return InvokeCallbacks(
        token=7,
        protocol=RebalanceProtocol.COOPERATIVE,
        generation_id=3,
        member_id="m",
        revoked=revoked,
        assigned=assigned,
        lost=lost,
    )


class Recorder(ConsumerRebalanceListener):
    def __init__(self, fail: set[str] | None = None, use_async: bool = False) -> None:
        self.calls: list[tuple[str, Partitions]] = []
        self.fail = fail or set()
        self.use_async = use_async

    def _do(self, name: str, partitions: Partitions) -> object:
        self.calls.append((name, partitions))
        if name in self.fail:
            raise ValueError(name)
        return None

    def on_partitions_revoked(self, partitions: Partitions) -> object:
        if self.use_async:
            return self._async("revoked", partitions)
        return self._do("revoked", partitions)

    def on_partitions_assigned(self, partitions: Partitions) -> object:
        if self.use_async:
            return self._async("assigned", partitions)
        return self._do("assigned", partitions)

    async def _async(self, name: str, partitions: Partitions) -> None:
        await asyncio.sleep(0)
        self._do(name, partitions)


class LostAware(Recorder):
    def on_partitions_lost(self, partitions: Partitions) -> object:
        return self._do("lost", partitions)


@pytest.mark.parametrize("use_async", [False, True])
async def test_seed_example_revoked_fails_assigned_still_runs(use_async: bool) -> None:
    # KIP-429: owned {1,2}, new {2,3}: revoked(1) raises, assigned(3) still runs, the first
    # exception is reported with the original as its cause.
    listener = Recorder(fail={"revoked"}, use_async=use_async)
    done = await run_callbacks(listener, action(revoked=tps("t-1"), assigned=tps("t-3")))
    assert listener.calls == [("revoked", tps("t-1")), ("assigned", tps("t-3"))]
    assert done.token == 7
    err = done.first_error
    assert isinstance(err, RebalanceCallbackError) and isinstance(err, CallbackError)
    assert isinstance(err.__cause__, ValueError) and str(err.__cause__) == "revoked"
    assert err.callback == "on_partitions_revoked" and err.partitions == tps("t-1")


@pytest.mark.parametrize("use_async", [False, True])
async def test_first_exception_wins(use_async: bool) -> None:
    listener = LostAware(fail={"lost", "revoked", "assigned"}, use_async=use_async)
    done = await run_callbacks(
        listener, action(lost=tps("a-0"), revoked=tps("b-0"), assigned=tps("c-0"))
    )
    assert [c[0] for c in listener.calls] == ["lost", "revoked", "assigned"]
    assert isinstance(done.first_error, RebalanceCallbackError)
    assert str(done.first_error.__cause__) == "lost"


async def test_empty_sets_and_assigned_always() -> None:
    listener = LostAware()
    done = await run_callbacks(listener, action(assigned=frozenset()))
    assert listener.calls == [("assigned", frozenset())]  # assigned even when empty
    assert done.first_error is None
    listener2 = LostAware()
    await run_callbacks(listener2, action())  # nothing to deliver: nothing called
    assert listener2.calls == []


async def test_lost_defaults_to_revoked() -> None:
    class OnlyTwo:
        def __init__(self) -> None:
            self.calls: list[tuple[str, Partitions]] = []

        def on_partitions_revoked(self, partitions: Partitions) -> None:
            self.calls.append(("revoked", partitions))

        def on_partitions_assigned(self, partitions: Partitions) -> None:
            self.calls.append(("assigned", partitions))

    listener = OnlyTwo()
    await run_callbacks(listener, action(lost=tps("t-0")))
    assert listener.calls == [("revoked", tps("t-0"))]
    base = Recorder()
    await run_callbacks(base, action(lost=tps("t-9")))
    assert base.calls == [("revoked", tps("t-9"))]  # the base class forwards lost -> revoked


async def test_cancellation_is_not_swallowed() -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    class Slow(Recorder):
        async def on_partitions_revoked(self, partitions: Partitions) -> None:
            started.set()
            await release.wait()

    listener = Slow()
    task = asyncio.create_task(
        run_callbacks(listener, action(revoked=tps("t-0"), assigned=tps("t-1")))
    )
    await asyncio.wait_for(started.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert listener.calls == []  # assigned never ran after the cancellation


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
async def test_base_exceptions_propagate(exc_type: type[BaseException]) -> None:
    class Dies(Recorder):
        def on_partitions_revoked(self, partitions: Partitions) -> None:
            raise exc_type()

    listener = Dies()
    with pytest.raises(exc_type):
        await run_callbacks(listener, action(revoked=tps("t-0"), assigned=tps("t-1")))
    assert listener.calls == []


async def test_latency_recorded_per_callback() -> None:
    ticks = itertools.count(start=0.0, step=0.25)
    sink = KIP429Metrics(started_at=0.0)
    await run_callbacks(
        LostAware(fail={"revoked"}),
        action(lost=tps("a-0"), revoked=tps("b-0"), assigned=tps("c-0")),
        metrics=sink,
        clock=lambda: next(ticks),
    )
    snap = sink.snapshot(10.0)
    for name in ("lost", "revoked", "assigned"):
        assert snap[f"partition-{name}-latency-avg"] == pytest.approx(250.0)
        assert snap[f"partition-{name}-latency-max"] == pytest.approx(250.0)


async def test_no_listener_finishes_cleanly() -> None:
    done = await run_callbacks(None, action(revoked=tps("t-0"), assigned=frozenset()))
    assert done.token == 7 and done.first_error is None
