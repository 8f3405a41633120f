"""The driver against a scripted fake transport: no broker, fast, deterministic."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

from aiogroup.client import GroupMember, MemberClosedError
from aiogroup.client.transport import (
    CommittedOffset,
    CoordinatorUnreachableError,
    JoinGroupMember,
    JoinGroupResult,
    OffsetCommitResult,
    OffsetFetchResult,
    SyncGroupResult,
    Transport,
)
from aiogroup.errors import FencedInstanceIdError, KafkaError
from aiogroup.membership import MemberState, RebalanceCallbackError
from aiogroup.observability.telemetry import JsonlTelemetry
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker

from .helpers import FAST, until

TP = TopicPartition
TOPIC = "orders"
ALL = frozenset(TP(TOPIC, p) for p in range(3))


class FakeTransport:
    """A one-member group: MEMBER_ID_REQUIRED, then the member leads and syncs its own plan."""

    def __init__(self) -> None:
        self.request_timeout_ms = 2_000
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.heartbeat_code = 0
        self.heartbeat_codes: list[int] = []  # consumed first, one per heartbeat
        self.unreachable = False
        self.join_gate: asyncio.Event | None = None
        self.join_started = asyncio.Event()
        self.generation = 0
        self.offset_fetch_codes: list[int] = []  # consumed first, one per OffsetFetch

    def _record(self, name: str, **kw: Any) -> None:
        self.calls.append((name, kw))
        if self.unreachable:
            raise CoordinatorUnreachableError(f"{name}: broker gone")

    def named(self, name: str) -> list[dict[str, Any]]:
        return [kw for n, kw in self.calls if n == name]

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        self.calls.append(("close", {}))

    def coordinator_dead(self) -> None:
        pass

    async def find_coordinator(self) -> int:
        self._record("find_coordinator")
        return 1

    async def partitions_per_topic(self, topics: Sequence[str] | None) -> dict[str, int]:
        self._record("metadata", topics=topics)
        return {TOPIC: len(ALL)} if topics is None or TOPIC in topics else {}

    async def join_group(self, **kw: Any) -> JoinGroupResult:
        self._record("join_group", **kw)
        self.join_started.set()
        if self.join_gate is not None:
            await self.join_gate.wait()
        if not kw["member_id"]:
            return JoinGroupResult(79, -1, None, "", "m-1")
        self.generation += 1
        (name, metadata), *_ = kw["protocols"]
        return JoinGroupResult(
            0,
            self.generation,
            name,
            kw["member_id"],
            kw["member_id"],
            (JoinGroupMember(kw["member_id"], metadata, kw["group_instance_id"]),),
        )

    async def sync_group(self, **kw: Any) -> SyncGroupResult:
        self._record("sync_group", **kw)
        return SyncGroupResult(0, dict(kw["assignments"])[kw["member_id"]])

    async def heartbeat(self, **kw: Any) -> int:
        self._record("heartbeat", **kw)
        if self.heartbeat_codes:
            return self.heartbeat_codes.pop(0)
        return self.heartbeat_code

    async def leave_group(self, **kw: Any) -> int:
        self._record("leave_group", **kw)
        return 0

    async def offset_commit(
        self, offsets: Mapping[TopicPartition, int], **kw: Any
    ) -> OffsetCommitResult:
        self._record("offset_commit", offsets=dict(offsets), **kw)
        return OffsetCommitResult({tp: 0 for tp in offsets})

    async def offset_fetch(self, partitions: Sequence[TopicPartition]) -> OffsetFetchResult:
        self._record("offset_fetch", partitions=list(partitions))
        if self.offset_fetch_codes:
            return OffsetFetchResult(self.offset_fetch_codes.pop(0), {})
        return OffsetFetchResult(0, {tp: CommittedOffset(5) for tp in partitions})


class Telemetry:
    def __init__(self) -> None:
        self.events: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **kw: self.events.append(name)


def make(
    fake: FakeTransport, *, listener: Any = None, telemetry: Any = None, **kw: Any
) -> GroupMember:
    member = GroupMember(
        "127.0.0.1:1",
        "g",
        topics=[TOPIC],
        assignors=["range"],
        listener=listener,
        session_timeout_ms=1_000,
        heartbeat_interval_ms=50,
        close_timeout_s=3,
        telemetry=telemetry,
        # A method-level fake (tests/client/test_scripted_transport.py drives the member with
        # bytes through ScriptedTransport instead).
        transport=cast(Transport, fake),
        **kw,
    )
    return member


async def test_dynamic_member_joins_with_kip394_commits_and_leaves() -> None:
    fake = FakeTransport()
    async with make(fake) as m:
        outcome = await m.wait_for_assignment(timeout=5)
        assert outcome.assignment == ALL == m.assignment
        joins = fake.named("join_group")
        assert [j["member_id"] for j in joins] == ["", "m-1"]  # KIP-394
        await m.commit({TP(TOPIC, 1): 10})
        (commit,) = fake.named("offset_commit")
        assert commit["member_id"] == "m-1"
        assert commit["generation_id"] == m.generation_id == 1
    assert [lv["member_id"] for lv in fake.named("leave_group")] == ["m-1"]
    assert m.state is MemberState.CLOSED


async def test_static_member_never_sends_leave_group() -> None:
    fake = FakeTransport()
    async with make(fake, group_instance_id="instance-a") as m:
        await m.wait_for_assignment(timeout=5)
        assert fake.named("join_group")[-1]["group_instance_id"] == "instance-a"
    assert fake.named("leave_group") == []  # KIP-345


async def test_fenced_instance_is_fatal_for_every_later_call() -> None:
    fake = FakeTransport()
    m = make(fake, group_instance_id="instance-a")
    await m.start()
    try:
        await m.wait_for_assignment(timeout=5)
        fake.heartbeat_code = FencedInstanceIdError.code
        with pytest.raises(FencedInstanceIdError):
            await asyncio.wait_for(_forever(m), 5)
        with pytest.raises(FencedInstanceIdError):
            await m.commit({TP(TOPIC, 0): 1})
    finally:
        await m.close()


async def _forever(m: GroupMember) -> None:
    async for _ in m.rebalances():
        pass
    raise AssertionError("rebalances() ended without the fatal error")


async def test_close_is_bounded_when_the_coordinator_is_unreachable() -> None:
    fake = FakeTransport()
    listener = Recording()
    m = make(fake, listener=listener)
    await m.start()
    await m.wait_for_assignment(timeout=5)
    fake.unreachable = True
    started = time.monotonic()
    await m.close(timeout=3)
    assert time.monotonic() - started < 4
    assert listener.calls[-1][0] in ("revoked", "lost")
    assert ("close", {}) in fake.calls


async def test_cancelling_the_users_wait_leaves_the_member_usable() -> None:
    fake = FakeTransport()
    fake.join_gate = asyncio.Event()
    async with make(fake) as m:
        waiter = asyncio.ensure_future(m.wait_for_assignment())
        await asyncio.wait_for(fake.join_started.wait(), 5)  # the join is held at the gate
        assert not waiter.done()
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        fake.join_gate.set()
        assert (await m.wait_for_assignment(timeout=5)).assignment == ALL


async def test_first_callback_error_reaches_the_user_with_its_cause() -> None:
    fake = FakeTransport()
    listener = Recording(fail=True)
    async with make(fake, listener=listener) as m:
        with pytest.raises(RebalanceCallbackError) as caught:
            await m.wait_for_assignment(timeout=5)
        assert isinstance(caught.value.__cause__, KeyError)
        assert m.assignment == ALL  # the assignment change stood


async def test_telemetry_sees_join_callbacks_rebalance_and_commit() -> None:
    fake = FakeTransport()
    telemetry = Telemetry()
    async with make(fake, telemetry=telemetry) as m:
        await m.wait_for_assignment(timeout=5)
        await m.commit({TP(TOPIC, 0): 3})
    events = [e for e in telemetry.events if e not in ("state", "acting")]
    assert events.index("joined") < events.index("leader_round")
    assert events.index("leader_round") < events.index("partitions_assigned")
    assert events.index("partitions_assigned") < events.index("rebalance_completed")
    assert "offsets_committed" in events and events[-1] == "partitions_revoked"


async def test_calls_on_a_member_never_started_fail_clearly() -> None:
    m = make(FakeTransport())
    with pytest.raises(MemberClosedError):
        await m.subscribe(["x"])
    with pytest.raises(MemberClosedError):
        await m.committed([TP(TOPIC, 0)])


class Recording:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, frozenset[TopicPartition]]] = []
        self.fail = fail

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("assigned", partitions))
        if self.fail:
            raise KeyError("listener bug")

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("revoked", partitions))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self.calls.append(("lost", partitions))


async def test_unsubscribe_revokes_leaves_and_reports_an_outcome() -> None:
    fake = FakeTransport()
    listener = Recording()
    async with make(fake, listener=listener) as m:
        await m.wait_for_assignment(timeout=5)
        await m.unsubscribe()
        outcomes = m.rebalances()
        first = await anext(outcomes)
        last = await asyncio.wait_for(anext(outcomes), 5)
        assert first.assigned == ALL
        assert (last.revoked, last.assignment, last.assigned) == (ALL, frozenset(), frozenset())
        assert m.state is MemberState.UNJOINED
        assert [lv["member_id"] for lv in fake.named("leave_group")] == ["m-1"]
        assert listener.calls == [("assigned", ALL), ("revoked", ALL)]
        # Subscribing again rejoins with a fresh member id (KIP-394 again).
        await m.subscribe([TOPIC])
        assert (await m.wait_for_assignment(timeout=5)).assignment == ALL


async def test_not_coordinator_makes_the_member_rediscover_and_stay() -> None:
    fake = FakeTransport()
    async with make(fake) as m:
        await m.wait_for_assignment(timeout=5)
        lookups = len(fake.named("find_coordinator"))
        generation = m.generation_id
        fake.heartbeat_codes = [16]  # NOT_COORDINATOR once

        async def rediscovered() -> None:
            while True:
                change = m.changed()
                if len(fake.named("find_coordinator")) > lookups and m.state is MemberState.STABLE:
                    return
                await change

        await asyncio.wait_for(rediscovered(), 5)
        assert m.generation_id == generation and m.assignment == ALL


async def test_a_revoked_callback_may_commit_before_the_partitions_go() -> None:
    fake = FakeTransport()

    class CommitOnRevoke:
        member: GroupMember

        def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
            pass

        async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
            await self.member.commit({tp: 100 + tp.partition for tp in partitions})

    listener = CommitOnRevoke()
    m = make(fake, listener=listener)
    listener.member = m
    async with m:
        await m.wait_for_assignment(timeout=5)
    (commit,) = fake.named("offset_commit")
    assert commit["offsets"] == {tp: 100 + tp.partition for tp in ALL}
    assert (commit["member_id"], commit["generation_id"]) == ("m-1", 1)
    assert fake.named("leave_group")  # the commit happened before the member left
    assert [n for n, _ in fake.calls].index("offset_commit") < [n for n, _ in fake.calls].index(
        "leave_group"
    )


class SlowCommits(FakeTransport):
    """OffsetCommit answers wait for ``commit_gate``; the order of events is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.commit_gate = asyncio.Event()
        self.commit_sent = asyncio.Event()

    async def offset_commit(
        self, offsets: Mapping[TopicPartition, int], **kw: Any
    ) -> OffsetCommitResult:
        self._record("offset_commit", offsets=dict(offsets), **kw)
        self.commit_sent.set()
        await self.commit_gate.wait()
        self.calls.append(("offset_commit_answered", {}))
        return OffsetCommitResult({tp: 0 for tp in offsets})


async def test_a_revocation_waits_for_the_commits_in_flight() -> None:
    """A commit the application started while it owned its partitions is answered before the
    revocation is reported done and the group learns they are given up (here: the leave):
    their next owner never starts below a commit still on its way."""
    fake = SlowCommits()
    listener = Recording()
    async with make(fake, listener=listener) as m:
        await m.wait_for_assignment(timeout=5)
        commit = asyncio.create_task(m.commit({tp: 7 for tp in ALL}))
        await asyncio.wait_for(fake.commit_sent.wait(), 5)
        leaving = asyncio.create_task(m.unsubscribe())
        outcomes = m.rebalances()
        await anext(outcomes)

        async def revoked() -> None:
            while ("revoked", ALL) not in listener.calls:
                await m.changed()

        await asyncio.wait_for(revoked(), 5)
        assert not fake.named("leave_group")  # held while the commit is in flight
        fake.commit_gate.set()
        await asyncio.wait_for(commit, 5)
        await asyncio.wait_for(leaving, 5)
        await asyncio.wait_for(anext(outcomes), 5)
    names = [n for n, _ in fake.calls]
    assert names.index("offset_commit_answered") < names.index("leave_group")


async def test_committed_retries_while_the_coordinator_loads_its_offsets() -> None:
    # After a broker restart the coordinator answers COORDINATOR_LOAD_IN_PROGRESS (14) until it
    # has read its offsets topic; committed() retries retriable answers within its bound.
    fake = FakeTransport()
    fake.offset_fetch_codes = [14, 14, 15]  # load in progress twice, then not available
    async with make(fake) as m:
        assert await m.committed([TP(TOPIC, 0)]) == {TP(TOPIC, 0): 5}
    assert len(fake.named("offset_fetch")) == 4


async def test_committed_raises_a_non_retriable_answer_at_once() -> None:
    fake = FakeTransport()
    fake.offset_fetch_codes = [30]  # GROUP_AUTHORIZATION_FAILED
    async with make(fake) as m:
        with pytest.raises(KafkaError) as info:
            await m.committed([TP(TOPIC, 0)])
        assert info.value.error_code == 30
    assert len(fake.named("offset_fetch")) == 1


class GatedHeartbeats(FakeTransport):
    """Heartbeats wait for ``gate`` while it is set (a coordinator that stopped answering),
    then are answered NOT_COORDINATOR (it moved): a late answer never proves the session."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None

    async def heartbeat(self, **kw: Any) -> int:
        gate = self.gate
        if gate is not None:
            await gate.wait()
            # Answered NONE, a heartbeat sent after the last proof would prove the session up
            # to its send time (KAFKA-7026: "proof", tested in tests/membership/test_safety.py)
            # when its answer beats the member's new coordinator lookup: CI saw that order once.
            return 16  # NOT_COORDINATOR
        return await super().heartbeat(**kw)


async def test_telemetry_records_acting_windows_states_and_leader_rounds(tmp_path: Path) -> None:
    """The acting set (``assignment``) is recorded at every change with why: ``rebalance``
    and ``lapse`` (stamped at the session deadline, KAFKA-7026); every state change, the
    leader's round, and commit outcomes with their send time. (Silent heartbeats make the
    member look the coordinator up again, so the heartbeat answered afterwards proves
    nothing and the member rejoins: the acting set comes back with that rebalance. ``proof``
    is tested in tests/membership/test_safety.py.)"""
    fake = GatedHeartbeats()
    telemetry = JsonlTelemetry(tmp_path, "m")
    async with make(fake, telemetry=telemetry) as m:
        await m.wait_for_assignment(timeout=5)
        sent = time.time()
        await m.commit({TP(TOPIC, 0): 3})
        gate = fake.gate = asyncio.Event()
        deadline = m.session_deadline
        assert deadline is not None
        await until(m, lambda: not m.assignment, timeout=10)
        lapse_wall = time.time() - (asyncio.get_running_loop().time() - deadline)
        fake.gate = None
        gate.set()
        await until(m, lambda: m.assignment == ALL, timeout=10)
    lines = [line for path in tmp_path.glob("*.jsonl") for line in path.read_text().splitlines()]
    events = [json.loads(line) for line in lines]
    acting = [(e["reason"], e["partitions"]) for e in events if e["type"] == "acting"]
    everything = {TOPIC: [0, 1, 2]}
    assert acting[:3] == [("rebalance", everything), ("lapse", {}), ("rebalance", everything)]
    assert acting[-1] == ("rebalance", {})  # closing revokes everything
    lapse = next(e for e in events if e["type"] == "acting" and e["reason"] == "lapse")
    assert abs(lapse["at"] - lapse_wall) < 0.05 and lapse["at"] < lapse["ts"]
    states = [e["state"] for e in events if e["type"] == "state"]
    assert states[0] == "discovering" and states[-1] == "closed"
    assert states.index("joining") < states.index("awaiting_sync") < states.index("stable")
    rounds = [e for e in events if e["type"] == "leader_round"]
    assert len(rounds) == 2  # the first join, and the rejoin after the lapse
    for round_ in rounds:
        assert round_["assignments"] == {"m-1": everything} and round_["withheld"] == {}
    (commit,) = [e for e in events if e["type"] == "offsets_committed" and "started" in e]
    assert sent <= commit["started"] <= commit["ts"]


async def test_a_state_change_made_by_a_timer_is_reported_by_changed(
    embedded_broker: EmbeddedBroker,
) -> None:
    # A JoinGroup failing with a retriable error is retried after the backoff by the member's
    # timer; the retry (never answered here) leaves the member JOINING with no event to come,
    # so only the timer's own report can wake a waiter.
    embedded_broker.create_topic("t", 1)
    embedded_broker.faults.fail("JoinGroup", 14)  # COORDINATOR_LOAD_IN_PROGRESS: backoff
    embedded_broker.faults.drop("JoinGroup", count=2)
    async with GroupMember(
        embedded_broker.bootstrap,
        "g",
        topics=["t"],
        retry_backoff_ms=1_000,
        request_timeout_ms=60_000,
        **FAST,
    ) as m:
        await until(m, lambda: m.state is MemberState.UNJOINED, timeout=10)  # backing off
        await until(m, lambda: m.state is MemberState.JOINING, timeout=10)  # the timer's retry


class PausedAnswer(FakeTransport):
    """The next heartbeat is answered ``code`` only after the whole process stood still for
    ``pause`` seconds (SIGSTOP, a long GC): its answer and the session deadline are both due
    when the loop runs again."""

    def __init__(self) -> None:
        super().__init__()
        self.pause: float | None = None
        self.paused_code = 25  # UNKNOWN_MEMBER_ID: the coordinator expired the member

    async def heartbeat(self, **kw: Any) -> int:
        if self.pause is None:
            return await super().heartbeat(**kw)
        self._record("heartbeat", **kw)
        time.sleep(self.pause)  # the process stands still: no other task runs
        self.pause = None
        return self.paused_code


async def test_an_answer_read_after_the_session_deadline_leaves_the_lapse_at_the_deadline(
    tmp_path: Path,
) -> None:
    """A member paused past its session wakes with the coordinator's answer (UNKNOWN_MEMBER_ID)
    and its deadline both due. It acted on nothing from the deadline (``assignment`` is empty
    then, KAFKA-7026), and its telemetry says so: the acting set ends with a ``lapse`` stamped
    at the deadline, recorded before the answer is handled, not when the answer resets the
    generation (which the ownership checker would take for a holding up to the answer)."""
    fake = PausedAnswer()
    telemetry = JsonlTelemetry(tmp_path, "m")
    async with make(fake, telemetry=telemetry) as m:
        await m.wait_for_assignment(timeout=5)
        fake.pause = 1.5  # session 1 s
        await until(m, lambda: not m.assignment, timeout=10)
        await until(m, lambda: m.assignment == ALL, timeout=10)  # rejoined
    events = [
        json.loads(line) for p in tmp_path.glob("*.jsonl") for line in p.read_text().splitlines()
    ]
    acting = [e for e in events if e["type"] == "acting"]
    assert [e["reason"] for e in acting[:3]] == ["rebalance", "lapse", "rebalance"]
    lapse = acting[1]
    # stamped at the deadline, a second after the last answer, half a second before the wake
    assert lapse["partitions"] == {} and lapse["at"] < lapse["ts"] - 0.3, lapse
