"""The health signal of a running consumer on the embedded broker: each cause is brought about
by a fault the broker injects (or the application's own behaviour), the signal turns, says since
when and why, and recovers once the fault is gone. The waits are on the signal itself (a bounded
condition poll); the bounds are for failure, never asserted as durations."""

from __future__ import annotations

import time
from typing import Any

import pytest

from aiogroup.consumer import Consumer
from aiogroup.observability.health import Cause, Health, Problem
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from aiogroup.testing.fixtures import BrokerHandle

from .helpers import consumer, produce, read_until, unique, wait_for

pytestmark = pytest.mark.timeout(120)

#: Bound of each wait (for failure only).
BOUND_S = 40.0
#: Short sessions: a problem counts once it outlasts the session timeout.
QUICK: dict[str, Any] = {"session_timeout_ms": 2000, "heartbeat_interval_ms": 200}


def handle(broker: EmbeddedBroker) -> BrokerHandle:
    return BrokerHandle("embedded", broker.bootstrap)


def problems(c: Consumer, cause: Cause) -> list[Problem]:
    return [p for p in c.health().problems if p.cause is cause]


async def turns(c: Consumer, cause: Cause) -> tuple[Health, list[Problem]]:
    """Wait until ``c``'s health reports ``cause``; the health then and those problems."""

    def seen() -> tuple[Health, list[Problem]] | None:
        health = c.health()
        found = [p for p in health.problems if p.cause is cause]
        return (health, found) if found else None

    result: tuple[Health, list[Problem]] = await wait_for(seen, BOUND_S, f"{cause.value}")
    return result


async def recovers(c: Consumer, *, polling: bool = True) -> None:
    """Wait until ``c`` is healthy, asking for records meanwhile as an application does."""

    async def healthy() -> bool:
        if polling:
            await c.getmany(timeout_ms=50)
        return c.health().ok

    loop_bound = time.monotonic() + BOUND_S
    while not await healthy():
        assert time.monotonic() < loop_bound, f"not healthy again: {c.health().describe()}"


def started_before(problem: Problem, seconds: float) -> None:
    """``problem`` began at least ``seconds`` before it was checked, on the wall clock."""
    assert problem.duration_s > seconds
    assert problem.since <= time.time() - seconds


async def test_a_coordinator_that_never_answers_syncgroup(embedded_broker: EmbeddedBroker) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 2)
    embedded_broker.faults.drop("SyncGroup", count=10_000)
    options = {**QUICK, "rebalance_timeout_ms": 2000, "request_timeout_ms": 1500}
    async with consumer(handle(embedded_broker), unique("g"), [topic], **options) as c:
        health, (p,) = await turns(c, Cause.REBALANCING)
        assert not health.live and not health.ready  # a stuck rebalance: a restart may cure it
        started_before(p, 2.0)
        assert "longer than the rebalance timeout (2 s)" in p.reason
        assert "never having joined" in p.reason
        embedded_broker.faults.clear()
        await recovers(c)
        assert c.assignment() == {TopicPartition(topic, 0), TopicPartition(topic, 1)}
        assert c.member.health().ok


async def test_a_partition_leader_that_does_not_answer(embedded_broker: EmbeddedBroker) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 2)
    await produce(embedded_broker.bootstrap, topic, {0: 5, 1: 5})
    options = {**QUICK, "request_timeout_ms": 2500, "client_id": "stalls"}
    async with consumer(handle(embedded_broker), unique("g"), [topic], **options) as c:
        await read_until(c, lambda rs: len(rs) >= 10)
        await recovers(c)  # caught up: fetches answer at the end of the log
        embedded_broker.faults.drop("Fetch", count=10_000, client_id="stalls")
        health, stalled = await turns(c, Cause.PARTITION_STALLED)
        assert health.live and not health.ready  # a restart would not bring the leader back
        assert {tp for p in stalled for tp in p.partitions} == {
            TopicPartition(topic, 0),
            TopicPartition(topic, 1),
        }
        for p in stalled:
            started_before(p, 2.0)
            assert "longer than the session timeout, 2 s" in p.reason
            assert "a Fetch to node" in p.reason  # unanswered, or failed once timed out
        assert Cause.DISCONNECTED not in health.causes  # the coordinator still answers
        embedded_broker.faults.clear()
        await recovers(c)


async def test_an_application_that_stops_asking_for_records(
    embedded_broker: EmbeddedBroker,
) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 1)
    await produce(embedded_broker.bootstrap, topic, {0: 5})
    options = {**QUICK, "max_poll_interval_ms": 1500}
    async with consumer(handle(embedded_broker), unique("g"), [topic], **options) as c:
        await read_until(c, lambda rs: len(rs) >= 5)
        asked = time.time()
        # The application stops calling getmany; the test only looks at the signal.
        health, (p,) = await turns(c, Cause.NOT_POLLING)
        assert not health.live  # a stuck application: what liveness probes are for
        started_before(p, 1.5)
        assert p.since >= asked - 0.5  # when it last asked, give or take the call's end
        assert "longer than max_poll_interval_ms (1.5 s)" in p.reason
        assert "left the group" in p.reason
        await recovers(c)  # asking again rejoins
        assert c.assignment() == {TopicPartition(topic, 0)}


async def test_no_coordinator(embedded_broker: EmbeddedBroker) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 1)
    async with consumer(handle(embedded_broker), unique("g"), [topic], **QUICK) as c:
        await recovers(c)
        embedded_broker.faults.fail("FindCoordinator", 15, count=10_000)  # NOT_AVAILABLE
        embedded_broker.faults.fail("Heartbeat", 16, count=1)  # NOT_COORDINATOR: look again
        health, (p,) = await turns(c, Cause.NO_COORDINATOR)
        assert health.live  # the cluster's trouble, not the process's
        started_before(p, 2.0)
        assert "no group coordinator" in p.reason
        embedded_broker.faults.clear()
        await recovers(c)


async def test_disconnected_from_the_broker(embedded_broker: EmbeddedBroker) -> None:
    topic = unique("t")
    embedded_broker.create_topic(topic, 1)
    async with consumer(handle(embedded_broker), unique("g"), [topic], **QUICK) as c:
        await recovers(c)
        await embedded_broker.stop()
        health, down = await turns(c, Cause.DISCONNECTED)
        assert health.live and not health.ready
        started_before(down[0], 2.0)
        assert f"127.0.0.1:{embedded_broker.port}" in down[0].reason
        assert "unreachable for" in down[0].reason
        await embedded_broker.start()  # the same port; groups and offsets kept
        await recovers(c)
    stopped = c.health()
    assert stopped.causes == {Cause.STOPPED} and not stopped.live
