"""No zombie window in any state (KAFKA-7026), end to end.

A member that misses a session timeout while it rejoins (its JoinGroup or SyncGroup held, or
their answers waiting in the socket while it is paused) is expired by the coordinator, whose
group gives its partitions to others. Until the member hears of it, ``assignment`` (what it may
act on) must be empty: it counts a session from the *send* time of the last request the
coordinator answered, never from the moment a late answer is read.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from aiogroup.client import GroupMember
from aiogroup.membership import MemberState
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.fixtures import BrokerHandle

from .conftest import (
    BOUND,
    SESSION_MS,
    OwnershipWatch,
    all_of,
    member,
    new_topic,
    unique,
    until,
)

pytestmark = pytest.mark.timeout(180)

REBALANCING = (MemberState.JOINING, MemberState.AWAITING_METADATA, MemberState.AWAITING_SYNC)


def require_embedded(handle: BrokerHandle) -> Any:
    if handle.embedded is None:
        pytest.skip("needs fault injection (the embedded broker)")
    return handle.embedded.faults


async def pair(handle: BrokerHandle, partitions: int = 4) -> tuple[str, str]:
    return await new_topic(handle, partitions, "zombie"), unique("g-zombie")


@pytest.mark.parametrize("api", ["JoinGroup", "SyncGroup"])
async def test_an_answer_read_after_the_session_is_no_licence_to_act(
    handle: BrokerHandle, api: str
) -> None:
    """m's JoinGroup (or SyncGroup) answer reaches it only after a long delay, as if m had
    been paused while it waited in the socket. The coordinator expired m meanwhile and n owns
    everything; m must act on nothing from a session after its last proven contact until it
    has rejoined, whatever state it is in."""
    faults = require_embedded(handle)
    topic, group = await pair(handle)
    everything = all_of(topic, 4)
    async with (
        member(handle, group, [topic], name="m") as m,
        member(handle, group, [topic], name="n") as n,
    ):
        await until(
            lambda: m.assignment | n.assignment == everything and m.assignment and n.assignment,
            [m, n],
            "m and n share the topic",
        )
        held = m.assignment
        with OwnershipWatch({"m": m, "n": n}) as watch:
            faults.delay(api, 4 * SESSION_MS / 1000, member_id=m.member_id)
            faults.fail("Heartbeat", 27, member_id=m.member_id)  # m rejoins
            took_over: dict[str, Any] = {}

            def n_took_over() -> bool:
                if n.assignment == everything and m.state is not MemberState.STABLE:
                    took_over.setdefault("m", (m.state, m.assignment))
                    return True
                return False

            await until(n_took_over, [m, n], "n to own everything while m waits for its answer")
            state, acting = took_over["m"]
            assert state in (*REBALANCING, MemberState.RECONCILING), state
            assert acting == frozenset(), f"m ({state.name}) acts on {sorted(acting)} n owns"
            # m hears of it (its SyncGroup or Heartbeat fails), reports them lost and rejoins.
            await until(
                lambda: m.assignment and n.assignment and m.assignment | n.assignment == everything,
                [m, n],
                "m back in the group",
            )
        assert any(o.lost and o.lost <= held for o in m.outcomes), m.outcomes
        assert watch.samples > 0 and watch.overlaps == [], watch.overlaps


class PausableMember:
    """A GroupMember on its own thread and event loop, which the test can pause: blocking that
    loop is what SIGSTOP does to a process (no heartbeat, no socket read)."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.member: GroupMember = self.call(self._start())

    async def _start(self) -> GroupMember:
        m: GroupMember = self._make()
        await m.start()
        return m

    def call(self, coro: Any, timeout: float = BOUND) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        try:
            self.call(self.member.close(timeout=10))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


async def test_paused_while_its_join_is_held_acts_on_nothing_when_it_resumes(
    handle: BrokerHandle,
) -> None:
    """m is paused (its loop blocked) right after the coordinator took its JoinGroup. The join
    completes, m neither reads the answer nor sends SyncGroup, the coordinator expires it and n
    takes everything. The first thing m's loop runs when it resumes: what may m act on?"""
    handle.require_kafka_semantics("Tansu never expires a silent member")
    topic, group = await pair(handle)
    other = await new_topic(handle, 1, "zombie-extra")
    everything = all_of(topic, 4)
    # n notices rebalances late (a long heartbeat interval): m's JoinGroup is held a while.
    n = member(
        handle, group, [topic], name="n", heartbeat_interval_ms=1000, session_timeout_ms=6000
    )
    await n.start()
    paused = PausableMember(lambda: member(handle, group, [topic], name="m"))
    m = paused.member
    try:
        await until(
            lambda: m.assignment and n.assignment and m.assignment | n.assignment == everything,
            [n],
            "m and n share the topic",
        )
        held = m.assignment
        resume = threading.Event()
        seen: Future[tuple[MemberState, frozenset[Any], float]] = Future()

        async def pause_once_held() -> None:
            # Runs on m's loop: once m's JoinGroup has reached the coordinator (the group is
            # PreparingRebalance), block m's loop until n owns everything; then look at m first.
            async with RawClient(handle.bootstrap, client_id="observer") as client:
                deadline = time.monotonic() + BOUND
                while time.monotonic() < deadline:
                    resp = await client.request("DescribeGroups", 1, {"groups": [group]})
                    if resp.groups[0].group_state == "PreparingRebalance":
                        break
                    await asyncio.sleep(0.01)  # polling the broker with a bound
            assert m.state is MemberState.JOINING, m.state
            resume.wait(BOUND)  # the pause: m's loop is blocked, like SIGSTOP
            seen.set_result((m.state, m.assignment, time.time()))

        probe = asyncio.run_coroutine_threadsafe(pause_once_held(), paused.loop)
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(m.subscribe([topic, other]), paused.loop)
        )
        await until(lambda: n.assignment == everything, [n], "n to take everything over")
        took_over = time.time()
        resume.set()
        state, acting, at = await asyncio.wrap_future(seen)
        await asyncio.wrap_future(probe)
        assert at > took_over
        assert state in REBALANCING, state
        assert acting == frozenset(), f"m ({state.name}) acts on {sorted(acting)} owned by n"
        await until(
            lambda: any(o.lost == held for o in m.outcomes), [n], "m to report its partitions lost"
        )
    finally:
        paused.close()
        await n.close()
