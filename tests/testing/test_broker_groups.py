"""Group semantics of the embedded broker, driven by raw wire requests.

The coordinator has its own sans-I/O tests; these check the whole path (wire decode, deferred
JoinGroup/SyncGroup answers, the coordinator timer, encode) on rules only Apache Kafka follows:
the protocol vote, protocol changes during rolling upgrades, MEMBER_ID_REQUIRED (KIP-394),
static membership with fencing (KIP-345).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest

from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.messages import GroupView
from aiogroup.testing.embedded.rules import CoordinatorConfig

from .raw_member import FATAL, FENCED, INCONSISTENT, MEMBER_ID_REQUIRED, NONE, RawMember

pytestmark = pytest.mark.timeout(90)

CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with EmbeddedBroker(topics={"t": 6}, coordinator_config=CONFIG) as b:
        yield b


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
