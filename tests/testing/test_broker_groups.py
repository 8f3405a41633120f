"""Group semantics of the embedded broker, driven by raw wire requests.

The coordinator has its own sans-I/O tests; these check the whole path (wire decode, deferred
JoinGroup/SyncGroup answers, the coordinator timer, encode) on rules only Apache Kafka follows:
the protocol vote, protocol changes during rolling upgrades, MEMBER_ID_REQUIRED (KIP-394),
static membership with fencing (KIP-345).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.testing.broker import EmbeddedBroker, RawClient
from aiogroup.testing.coordinator import CoordinatorConfig, GroupView

pytestmark = pytest.mark.timeout(90)

CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)
NONE, ILLEGAL_GENERATION, INCONSISTENT = 0, 22, 23
UNKNOWN_MEMBER, REBALANCING, MEMBER_ID_REQUIRED, FENCED = 25, 27, 79, 82
FATAL = {ILLEGAL_GENERATION, INCONSISTENT, UNKNOWN_MEMBER, FENCED}


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with EmbeddedBroker(topics={"t": 6}, coordinator_config=CONFIG) as b:
        yield b


class RawMember:
    """A minimal group member: join (with the KIP-394 retry), sync, heartbeat, rejoin."""

    def __init__(
        self,
        broker: EmbeddedBroker | str,
        group: str,
        protocols: Sequence[str],
        *,
        name: str,
        instance: str | None = None,
        join_version: int = 5,
        topic: str = "t",
        partitions: int = 6,
    ) -> None:
        bootstrap = broker if isinstance(broker, str) else broker.bootstrap
        self.client = RawClient(bootstrap, client_id=name)
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.protocols = list(protocols)
        self.instance = instance
        self.join_version = join_version
        self.member_id = ""
        self.generation = -1
        self.synced_generation = -1
        self.protocol_name: str | None = None
        self.assignment = b""
        self.errors: list[int] = []
        self.rejoin = asyncio.Event()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def metadata(self) -> list[dict[str, Any]]:
        sub = encode_subscription(Subscription(topics=[self.topic]))
        return [{"name": p, "metadata": sub} for p in self.protocols]

    async def join(self) -> Any:
        while True:
            resp = await self.client.request(
                "JoinGroup",
                self.join_version,
                {
                    "group_id": self.group,
                    "session_timeout_ms": 6000,
                    "rebalance_timeout_ms": 6000,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance,
                    "protocol_type": "consumer",
                    "protocols": self.metadata(),
                },
            )
            if resp.error_code == MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code == NONE:
                self.member_id = resp.member_id
                self.generation = resp.generation_id
                self.protocol_name = resp.protocol_name
            return resp

    async def sync(self, join: Any) -> int:
        assignments = []
        if join.leader == self.member_id:
            # Round-robin the 6 partitions over the members, encoded as real clients do.
            ids = sorted(m.member_id for m in join.members)
            for i, mid in enumerate(ids):
                parts = tuple(p for p in range(self.partitions) if p % len(ids) == i)
                data = encode_assignment(Assignment(partitions={self.topic: parts}))
                assignments.append({"member_id": mid, "assignment": data})
        resp = await self.client.request(
            "SyncGroup",
            3,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance,
                "assignments": assignments,
            },
        )
        if resp.error_code == NONE:
            self.assignment = bytes(resp.assignment)
            self.synced_generation = self.generation
        return int(resp.error_code)

    async def heartbeat(self) -> int:
        resp = await self.client.request(
            "Heartbeat",
            3,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance,
            },
        )
        return int(resp.error_code)

    async def run(self) -> None:
        await self.client.connect()
        while not self.stop.is_set():
            join = await self.join()
            if join.error_code != NONE:
                self.errors.append(join.error_code)
                if join.error_code in FATAL:
                    return
                continue
            code = await self.sync(join)
            if code != NONE:
                if code in FATAL:
                    self.errors.append(code)
                    return
                continue
            self.rejoin.clear()
            while not self.stop.is_set() and not self.rejoin.is_set():
                # The heartbeat timer: wake after 100 ms, or at once to stop or rejoin.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake(), 0.1)
                if self.stop.is_set() or self.rejoin.is_set():
                    break
                code = await self.heartbeat()
                if code == REBALANCING:
                    break
                if code != NONE:
                    self.errors.append(code)
                    return

    async def _wake(self) -> None:
        waits = [asyncio.ensure_future(self.stop.wait()), asyncio.ensure_future(self.rejoin.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def start(self) -> RawMember:
        self.task = asyncio.create_task(self.run())
        return self

    async def leave(self) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task
        # The batch form (v3+) where the broker has it; Kafka 2.3 speaks v0-2 only.
        version = await self.client.version("LeaveGroup")
        member = {"member_id": self.member_id, "group_instance_id": self.instance}
        values: dict[str, Any] = (
            {"group_id": self.group, "members": [member]}
            if version >= 3
            else {"group_id": self.group, "member_id": self.member_id}
        )
        await self.client.request("LeaveGroup", version, values)
        await self.client.close()

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        await self.client.close()


def stable_with(n: int) -> Any:
    def check(view: GroupView | None) -> bool:
        return (
            view is not None
            and view.state == "Stable"
            and len(view.members) == n
            and all(m.assignment for m in view.members)
        )

    return check


def newer_than(generation: int) -> Callable[[GroupView | None], bool]:
    return lambda view: view is not None and view.generation_id > generation


async def converge(broker: EmbeddedBroker, group: str, members: Sequence[RawMember]) -> GroupView:
    def done(view: GroupView | None) -> bool:
        kicked = any(set(m.errors) & FATAL for m in members)
        return kicked or (
            stable_with(len(members))(view)
            and view is not None
            and all(m.synced_generation == view.generation_id for m in members)
        )

    # Every member has synced in the final generation, and nobody was kicked out.
    view = await broker.wait_for_group(group, done, timeout=30)
    for m in members:
        assert not set(m.errors) & FATAL, (m.client.client_id, m.errors)
    assert view is not None
    return view


@pytest.mark.parametrize(
    ("lists", "expected"),
    [
        ([["roundrobin", "range"], ["range", "roundrobin"], ["range", "roundrobin"]], "range"),
        ([["roundrobin", "range"], ["roundrobin", "range"], ["range", "roundrobin"]], "roundrobin"),
        (
            [
                ["range", "cooperative-sticky"],
                ["cooperative-sticky"],
                ["sticky", "cooperative-sticky"],
            ],
            "cooperative-sticky",
        ),
    ],
)
async def test_protocol_vote(broker: EmbeddedBroker, lists: list[list[str]], expected: str) -> None:
    members = [RawMember(broker, "vote", p, name=f"m{i}").start() for i, p in enumerate(lists)]
    try:
        view = await converge(broker, "vote", members)
        assert view.protocol_name == expected
        assert {m.protocol_name for m in members} == {expected}
    finally:
        for m in members:
            await m.close()


async def test_range_only_member_joins_cooperative_group(broker: EmbeddedBroker) -> None:
    members = [
        RawMember(broker, "g", ["cooperative-sticky", "range"], name=f"coop{i}").start()
        for i in range(2)
    ]
    try:
        view = await converge(broker, "g", members)
        assert view.protocol_name == "cooperative-sticky"
        members.append(RawMember(broker, "g", ["range"], name="old").start())
        view = await converge(broker, "g", members)
        assert view.protocol_name == "range"  # the only protocol every member supports
    finally:
        for m in members:
            await m.close()


async def test_rolling_upgrade_to_cooperative_one_member_at_a_time(
    broker: EmbeddedBroker,
) -> None:
    members = [RawMember(broker, "roll", ["range"], name=f"m{i}").start() for i in range(3)]
    seen: list[str | None] = []
    try:
        seen.append((await converge(broker, "roll", members)).protocol_name)
        for phase in (["cooperative-sticky", "range"], ["cooperative-sticky"]):
            for m in members:
                m.protocols = phase  # the rolled member rejoins with its new list (KIP-429)
                m.rejoin.set()
                before = broker.faults.generation("roll")
                await broker.wait_for_group("roll", newer_than(before), timeout=30)
                seen.append((await converge(broker, "roll", members)).protocol_name)
    finally:
        for m in members:
            await m.close()
    # range until every member offers cooperative-sticky first, then cooperative-sticky.
    assert seen == ["range", "range", "range", "cooperative-sticky"] + ["cooperative-sticky"] * 3


async def test_inconsistent_group_protocol(broker: EmbeddedBroker) -> None:
    first = RawMember(broker, "g", ["range"], name="a").start()
    try:
        await converge(broker, "g", [first])
        async with RawClient(broker.bootstrap) as client:
            odd = RawMember(broker, "g", ["roundrobin"], name="b")
            odd.client = client
            resp = await odd.join()
            assert resp.error_code == INCONSISTENT
        view = broker.group("g")
        assert view is not None and len(view.members) == 1 and view.state == "Stable"
    finally:
        await first.close()


async def test_member_id_required_from_join_group_v4(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap, client_id="kip394") as client:
        base = {
            "group_id": "g",
            "session_timeout_ms": 6000,
            "rebalance_timeout_ms": 6000,
            "member_id": "",
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}],
        }
        first = await client.request("JoinGroup", 4, base)
        assert first.error_code == MEMBER_ID_REQUIRED
        assert first.member_id.startswith("kip394-")
        second = await client.request("JoinGroup", 4, {**base, "member_id": first.member_id})
        assert (second.error_code, second.member_id) == (NONE, first.member_id)
        # v3 has no KIP-394 round trip: a fresh member is admitted at once.
        old = await client.request("JoinGroup", 3, {**base, "group_id": "g3"})
        assert old.error_code == NONE and old.member_id


async def test_static_member_restart_without_rebalance_and_zombie_fencing(
    broker: EmbeddedBroker,
) -> None:
    a = RawMember(broker, "s", ["range"], name="a", instance="inst-a").start()
    b = RawMember(broker, "s", ["range"], name="b", instance="inst-b").start()
    try:
        view = await converge(broker, "s", [a, b])
        generation, old_id, old_assignment = view.generation_id, a.member_id, a.assignment
        # inst-a restarts: a new process, same group.instance.id, no member id (KIP-345).
        restarted = RawMember(broker, "s", ["range"], name="a2", instance="inst-a")
        await restarted.client.connect()
        join = await restarted.join()
        assert join.error_code == NONE
        assert restarted.member_id != old_id
        assert join.generation_id == generation  # no rebalance
        assert await restarted.sync(join) == NONE
        assert restarted.assignment == old_assignment
        assert await b.heartbeat() == NONE  # the other member saw no rebalance
        assert broker.faults.generation("s") == generation
        # The old process (a zombie now) is fenced.
        await broker.wait_for_group("s", lambda v: FENCED in a.errors, timeout=10)
        assert a.errors == [FENCED]
        await restarted.client.close()
    finally:
        await a.close()
        await b.close()


async def test_delete_groups(broker: EmbeddedBroker) -> None:
    member = RawMember(broker, "del", ["range"], name="a").start()
    try:
        await converge(broker, "del", [member])
        async with RawClient(broker.bootstrap) as client:
            busy = await client.request("DeleteGroups", 2, {"groups_names": ["del"]})
            assert [(r.group_id, r.error_code) for r in busy.results] == [("del", 68)]
            await member.leave()
            done = await client.request("DeleteGroups", 2, {"groups_names": ["del", "nope"]})
            assert [(r.group_id, r.error_code) for r in done.results] == [("del", 0), ("nope", 69)]
    finally:
        await member.close()
