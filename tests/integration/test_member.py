"""aiogroup's GroupMember in-process on a real broker: the user-facing API end to end."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Future

import pytest

from aiogroup.client import GroupMember, MemberClosedError
from aiogroup.errors import CommitFailedError, FencedInstanceIdError, RebalanceInProgressError
from aiogroup.membership import MemberState, RebalanceCallbackError
from aiogroup.protocol.types import TopicPartition
from tests.integration.conftest import Cluster
from tests.integration.harness import (
    CONVERGE_S,
    HEARTBEAT_MS,
    SESSION_MS,
    create_topics,
    start_concurrently,
    unique,
)

TP = TopicPartition
Scenario = Callable[[Cluster], Awaitable[None]]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    """Register an in-process scenario; the module runs them all concurrently, one event loop
    per thread, on one broker (each with its own group and topic)."""
    SCENARIOS[fn.__name__] = fn
    return fn


class Recorder:
    """A listener that records every callback and can be told to fail."""

    def __init__(self, fail_on: str = "") -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.fail_on = fail_on

    def _record(self, kind: str, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append((kind, partitions))
        if kind == self.fail_on:
            self.fail_on = ""
            raise ValueError(f"boom in {kind}")

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("assigned", partitions)

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._record("lost", partitions)


def member(cluster: Cluster, group: str, topics: Iterable[str], **kw: object) -> GroupMember:
    return GroupMember(
        cluster.bootstrap,
        group,
        topics=list(topics),
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        rebalance_timeout_ms=SESSION_MS * 2,
        request_timeout_ms=10_000,
        close_timeout_s=20,
        **kw,  # type: ignore[arg-type]
    )


def topic(cluster: Cluster, partitions: int = 4) -> tuple[str, frozenset[TopicPartition]]:
    name = unique("mt")
    create_topics(cluster.bootstrap, {name: partitions})
    return name, frozenset(TP(name, p) for p in range(partitions))


async def until(members: list[GroupMember], condition: object, what: str) -> None:
    """Wait (bounded) until ``condition()`` holds, waking whenever any member changes."""
    assert callable(condition)

    async def wait() -> None:
        while True:
            waiters = [asyncio.ensure_future(m.changed()) for m in members]
            if condition():
                for w in waiters:
                    w.cancel()
                return
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()

    try:
        await asyncio.wait_for(wait(), CONVERGE_S)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def stable_split(members: list[GroupMember], partitions: frozenset[TopicPartition]) -> bool:
    owned = [m.assignment for m in members]
    union = [tp for o in owned for tp in o]
    return (
        all(m.state is MemberState.STABLE for m in members)
        and sorted(union) == sorted(partitions)
        and max(map(len, owned)) - min(map(len, owned)) <= 1
    )


@scenario
async def one_member_joins_commits_fetches_and_leaves(cluster: Cluster) -> None:
    name, partitions = topic(cluster)
    listener = Recorder()
    async with member(cluster, unique("g"), [name], listener=listener) as m:
        outcome = await m.wait_for_assignment(timeout=CONVERGE_S)
        assert outcome.assigned == outcome.assignment == m.assignment == partitions
        assert m.member_id and m.generation_id >= 0 and m.is_leader
        offsets = {TP(name, 0): 42, TP(name, 3): 7}
        await m.commit(offsets)
        committed = await m.committed(sorted(partitions))
        assert committed == {tp: offsets.get(tp) for tp in partitions}
    assert m.state is MemberState.CLOSED
    assert listener.calls == [("assigned", partitions), ("revoked", partitions)]
    with pytest.raises(MemberClosedError):
        await m.commit(offsets)


@scenario
async def members_share_and_a_leaver_hands_back(cluster: Cluster) -> None:
    name, partitions = topic(cluster)
    group = unique("g")
    a_listener, b_listener = Recorder(), Recorder()
    async with member(cluster, group, [name], listener=a_listener) as a:
        await a.wait_for_assignment(timeout=CONVERGE_S)
        async with member(cluster, group, [name], listener=b_listener) as b:
            await until([a, b], lambda: stable_split([a, b], partitions), "a and b to share")
            b_owned = b.assignment
            # Cooperative: a revoked exactly what b received, never anything it kept.
            a_revoked = frozenset().union(*(p for k, p in a_listener.calls if k == "revoked"))
            assert a_revoked == b_owned
        assert b_listener.calls[-1] == ("revoked", b_owned)
        await until([a], lambda: stable_split([a], partitions), "a to own everything again")
        assert [o.assignment for o in a.outcomes][-1] == partitions


@scenario
async def callback_error_is_raised_to_the_user_and_the_assignment_stands(cluster: Cluster) -> None:
    name, partitions = topic(cluster)
    async with member(cluster, unique("g"), [name], listener=Recorder("assigned")) as m:
        with pytest.raises(RebalanceCallbackError) as caught:
            await m.wait_for_assignment(timeout=CONVERGE_S)
        assert isinstance(caught.value.__cause__, ValueError)
        # Raised once; the assignment change stood (KIP-429).
        outcome = await m.wait_for_assignment(timeout=CONVERGE_S)
        assert outcome.assignment == partitions and outcome.error is not None


@scenario
async def callback_error_raised_from_exit_when_nothing_else_drove_the_member(
    cluster: Cluster,
) -> None:
    name, partitions = topic(cluster)
    with pytest.raises(RebalanceCallbackError) as caught:
        async with member(cluster, unique("g"), [name], listener=Recorder("revoked")) as m:
            await until([m], lambda: m.assignment == partitions, "the assignment")
    assert isinstance(caught.value.__cause__, ValueError)


@scenario
async def subscription_change_revokes_the_old_topic(cluster: Cluster) -> None:
    old, old_partitions = topic(cluster, 2)
    new, new_partitions = topic(cluster, 3)
    listener = Recorder()
    async with member(cluster, unique("g"), [old], listener=listener) as m:
        await m.wait_for_assignment(timeout=CONVERGE_S)
        await m.subscribe([new])
        await until([m], lambda: m.assignment == new_partitions, "the new topic's partitions")
        assert m.subscription == {new}
    kinds = [(k, p) for k, p in listener.calls if p]
    assert kinds[:3] == [
        ("assigned", old_partitions),
        ("revoked", old_partitions),
        ("assigned", new_partitions),
    ]


@scenario
async def commit_while_rejoining_is_accepted_and_after_leaving_is_fatal(cluster: Cluster) -> None:
    name, partitions = topic(cluster)
    group = unique("g")
    async with member(cluster, group, [name]) as a:
        await a.wait_for_assignment(timeout=CONVERGE_S)
        async with member(cluster, group, [name]) as b:
            await until([a, b], lambda: a.state is MemberState.JOINING, "a to rejoin for b")
            # KIP-429: a still owns its partitions and commits beside its held JoinGroup; only
            # between its JoinGroup and SyncGroup answers is the commit refused (retriable).
            generation = a.generation_id
            try:
                await a.commit({TP(name, 0): 1})
            except RebalanceInProgressError:
                # Refused only once the JoinGroup was answered: the join completed meanwhile,
                # and a may already be JOINING again for the cooperative second round.
                assert a.state is not MemberState.JOINING or a.generation_id > generation
            await until([a, b], lambda: stable_split([a, b], partitions), "a and b to share")
            await a.commit({tp: 5 for tp in a.assignment})
        await a.unsubscribe()
        await until([a], lambda: a.state is MemberState.UNJOINED, "a to leave")
        with pytest.raises(CommitFailedError):
            await a.commit({TP(name, 0): 9})


@scenario
async def rebalances_iterator_and_cancellation(cluster: Cluster) -> None:
    name, partitions = topic(cluster)
    async with member(cluster, unique("g"), [name]) as m:
        waiter = asyncio.ensure_future(m.wait_for_assignment())
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        async for outcome in m.rebalances():
            assert outcome.assignment == partitions
            break
        # The member survived the cancelled waiter.
        assert (await m.wait_for_assignment(timeout=CONVERGE_S)).assignment == partitions


@pytest.mark.tansu
async def test_close_is_bounded_when_the_broker_is_gone() -> None:
    from aiogroup.testing.launchers.tansu import TansuBroker

    with TansuBroker() as broker:
        cluster = Cluster("tansu", broker.bootstrap)
        name, partitions = topic(cluster)
        listener = Recorder()
        m = member(cluster, unique("g"), [name], listener=listener)
        await m.start()
        await m.wait_for_assignment(timeout=CONVERGE_S)
        broker.stop()
        started = time.monotonic()
        await m.close(timeout=5)
        # The close timeout, then at most 10 s to cancel tasks and drop connections.
        assert time.monotonic() - started < 5 + 10
    # The partitions were given up (revoked, or lost if the coordinator was already gone).
    assert listener.calls[-1] in [("revoked", partitions), ("lost", partitions)]


async def test_static_member_is_fenced_by_a_duplicate_instance_id(cluster: Cluster) -> None:
    """KIP-345: a second process with our group_instance_id fences us; that is fatal."""
    if cluster.kind == "tansu":
        pytest.skip("Tansu has no FENCED_INSTANCE_ID (its static membership is weak)")
    name, partitions = topic(cluster)
    group = unique("g")
    first = member(cluster, group, [name], group_instance_id="instance-1")
    await first.start()
    try:
        await first.wait_for_assignment(timeout=CONVERGE_S)
        async with member(cluster, group, [name], group_instance_id="instance-1") as second:
            await second.wait_for_assignment(timeout=CONVERGE_S)
            with pytest.raises(FencedInstanceIdError):
                await asyncio.wait_for(_drive(first), CONVERGE_S)
            assert second.assignment == partitions
    finally:
        await first.close()


async def _drive(m: GroupMember) -> None:
    async for _ in m.rebalances():
        pass


@pytest.fixture(scope="module")
def running(cluster: Cluster) -> Iterator[dict[str, Future[None]]]:
    def runner(fn: Scenario) -> Callable[[], None]:
        async def scenario_main() -> None:
            await fn(cluster)

        return functools.partial(asyncio.run, scenario_main())

    futures, threads = start_concurrently({n: runner(fn) for n, fn in SCENARIOS.items()})
    yield futures
    for thread in threads:
        thread.join(timeout=60)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(running: dict[str, Future[None]], name: str) -> None:
    running[name].result(timeout=240)
