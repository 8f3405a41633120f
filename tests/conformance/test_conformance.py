"""Real librdkafka and kafka-python consumers behave the same on the embedded broker and Tansu.

Each scenario is a plain function run in a worker thread (all scenarios of one broker run
concurrently, see ``conftest.runs``); each test waits for its scenario's outcome. Scenarios
that depend on rules Tansu does not follow (protocol vote, static membership) skip there.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

import pytest

from aiogroup.protocol import decode_assignment
from aiogroup.testing.broker import RawClient
from aiogroup.testing.fixtures import BrokerHandle

from .conftest import Peers, create_topic, produce, raw, scenario, unique

pytestmark = [pytest.mark.peers, pytest.mark.timeout(400)]

#: How long a test waits for its scenario (they run concurrently; Tansu is slow).
RESULT_TIMEOUT = 360


def result(runs: dict[str, Future[None]], name: str) -> None:
    runs[name].result(timeout=RESULT_TIMEOUT)


def owns(partitions: list[int]) -> Callable[[Any], bool]:
    return lambda p: bool(p.owned() == partitions)


def partitioned(peers: Sequence[Any], total: int) -> bool:
    owned = [p.owned() for p in peers]
    if any(o is None for o in owned):
        return False
    flat = sorted(x for o in owned for x in o)
    return flat == list(range(total))


# --- scenarios ------------------------------------------------------------------------------


def _cooperative_join(handle: BrokerHandle, first: str, second: str) -> None:
    """KIP-429 two-phase rebalance: the first member gives up only what moves."""
    topic, group = unique("coop"), unique("g-coop")
    create_topic(handle, topic, 4)
    with Peers(handle) as peers:
        a = peers.start(first, group=group, topic=topic, name="a", assignors="cooperative-sticky")
        a.wait_for(owns([0, 1, 2, 3]), "a owns everything")
        b = peers.start(second, group=group, topic=topic, name="b", assignors="cooperative-sticky")
        b.wait_for(lambda p: bool(p.owned()), "b gets partitions")
        a.wait_for(lambda p: partitioned([a, b], 4), "a and b split the topic")
        kept = set(a.owned() or [])
        moved = set(b.owned() or [])
        assert kept and moved
        # Cooperative: a revoked exactly the partitions b now owns, never the ones it kept.
        assert set(a.revoked()) == moved
        assert not b.revoked()
        assert not a.errors() and not b.errors()


@scenario
def cooperative_librdkafka_leader(handle: BrokerHandle) -> None:
    _cooperative_join(handle, "confluent", "kafka-python")


@scenario
def cooperative_kafka_python_leader(handle: BrokerHandle) -> None:
    _cooperative_join(handle, "kafka-python", "confluent")


@scenario
def leave(handle: BrokerHandle) -> None:
    topic, group = unique("leave"), unique("g-leave")
    create_topic(handle, topic, 4)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a")
        b = peers.start("kafka-python", group=group, topic=topic, name="b")
        a.wait_for(
            lambda p: partitioned([a, b], 4) and bool(a.owned()) and bool(b.owned()),
            "a and b share the topic",
        )
        b.close()
        a.wait_for(owns([0, 1, 2, 3]), "a takes everything after b leaves")
        assert not a.errors()


@scenario
def kill(handle: BrokerHandle) -> None:
    topic, group = unique("kill"), unique("g-kill")
    create_topic(handle, topic, 4)
    with Peers(handle) as peers:
        a = peers.start("kafka-python", group=group, topic=topic, name="a")
        b = peers.start("confluent", group=group, topic=topic, name="b")
        a.wait_for(
            lambda p: partitioned([a, b], 4) and bool(a.owned()) and bool(b.owned()),
            "a and b share the topic",
        )
        b.kill()  # no LeaveGroup: the coordinator must expire the session
        a.wait_for(owns([0, 1, 2, 3]), "a takes everything after b's session expires")


@scenario
def idle_member(handle: BrokerHandle) -> None:
    topic, group = unique("idle"), unique("g-idle")
    create_topic(handle, topic, 2)
    with Peers(handle) as peers:
        members = [
            peers.start(kind, group=group, topic=topic, name=f"m{i}")
            for i, kind in enumerate(["confluent", "kafka-python", "confluent"])
        ]
        members[0].wait_for(
            lambda p: partitioned(members, 2) and sum(1 for m in members if m.owned()) == 2,
            "two members share two partitions",
        )
        assert sum(1 for m in members if m.owned() == []) == 1
        for m in members:
            assert not m.errors()


@scenario
def inconsistent_group_protocol(handle: BrokerHandle) -> None:
    topic, group = unique("incons"), unique("g-incons")
    create_topic(handle, topic, 2)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a", assignors="range")
        a.wait_for(owns([0, 1]), "a owns everything")
        b = peers.start("kafka-python", group=group, topic=topic, name="b", assignors="roundrobin")
        b.wait_for(lambda p: 23 in p.errors(), "INCONSISTENT_GROUP_PROTOCOL")
        assert a.owned() == [0, 1]
        assert not a.revoked()


@scenario
def member_id_required(handle: BrokerHandle) -> None:
    async def run() -> tuple[int, str, int]:
        async with RawClient(handle.bootstrap, client_id="kip394") as client:
            base = {
                "group_id": unique("g-kip394"),
                "session_timeout_ms": SESSION,
                "rebalance_timeout_ms": SESSION,
                "member_id": "",
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b"\x00\x03\x00\x00\x00\x00"}],
            }
            first = await client.request("JoinGroup", 4, base)
            second = await client.request(
                "JoinGroup", 4, {**base, "member_id": first.member_id}, timeout=60
            )
            return first.error_code, first.member_id, second.error_code

    code, member_id, then = raw(run())
    assert code == 79 and member_id
    assert then == 0


SESSION = 6000


@scenario
def commit_and_fetch(handle: BrokerHandle) -> None:
    topic, group = unique("commit"), unique("g-commit")
    create_topic(handle, topic, 1)
    produce(handle, topic, 10)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a")
        a.wait_for(lambda p: p.consumed() == 10, "a consumes 10 records")
        a.command("commit")
        a.wait_for(lambda p: any(e["event"] == "committed" for e in p.events), "the commit")

        async def fetch() -> int:
            async with RawClient(handle.bootstrap) as client:
                resp = await client.request(
                    "OffsetFetch",
                    7,
                    {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
                )
                return int(resp.topics[0].partitions[0].committed_offset)

        assert raw(fetch()) == 10
        a.close()
        produce(handle, topic, 5)
        b = peers.start("kafka-python", group=group, topic=topic, name="b")
        b.wait_for(lambda p: p.consumed() == 5, "b resumes at the committed offset")


@scenario
def protocol_vote(handle: BrokerHandle) -> None:
    handle.require_kafka_semantics("no protocol vote")
    topic, group = unique("vote"), unique("g-vote")
    create_topic(handle, topic, 3)
    with Peers(handle) as peers:
        members = [
            peers.start(
                "confluent", group=group, topic=topic, name="rr", assignors="roundrobin,range"
            ),
            peers.start(
                "kafka-python", group=group, topic=topic, name="r1", assignors="range,roundrobin"
            ),
            peers.start(
                "confluent", group=group, topic=topic, name="r2", assignors="range,roundrobin"
            ),
        ]
        members[0].wait_for(
            lambda p: partitioned(members, 3) and all(m.owned() for m in members),
            "three members share three partitions",
        )

        async def describe() -> str:
            async with RawClient(handle.bootstrap) as client:
                resp = await client.request("DescribeGroups", 5, {"groups": [group]})
                return str(resp.groups[0].protocol_data)

        assert raw(describe()) == "range"


@scenario
def static_restart_without_rebalance(handle: BrokerHandle) -> None:
    handle.require_kafka_semantics("weak static membership")
    topic, group = unique("static"), unique("g-static")
    create_topic(handle, topic, 4)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a", instance_id="ia")
        b = peers.start("confluent", group=group, topic=topic, name="b", instance_id="ib")
        a.wait_for(
            lambda p: partitioned([a, b], 4) and bool(a.owned()) and bool(b.owned()),
            "a and b share the topic",
        )
        before, b_revoked = a.owned(), b.revoked()
        a.kill()
        a2 = peers.start("confluent", group=group, topic=topic, name="a2", instance_id="ia")
        a2.wait_for(lambda p: p.owned() == before, "a2 gets a's partitions back")
        assert b.revoked() == b_revoked  # b saw no rebalance


@scenario
def static_zombie_is_fenced(handle: BrokerHandle) -> None:
    handle.require_kafka_semantics("no FENCED_INSTANCE_ID")
    topic, group = unique("fence"), unique("g-fence")
    create_topic(handle, topic, 2)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a", instance_id="same")
        a.wait_for(owns([0, 1]), "a owns everything")
        b = peers.start("confluent", group=group, topic=topic, name="b", instance_id="same")
        b.wait_for(owns([0, 1]), "b replaces a")
        a.wait_for(lambda p: 82 in p.errors(), "the zombie a is fenced")


class ThreadedRawMember:
    """A raw-request member (any protocol list) on its own event loop thread."""

    def __init__(
        self,
        handle: BrokerHandle,
        group: str,
        topic: str,
        protocols: list[str],
        name: str,
        partitions: int,
    ) -> None:
        from tests.testing.test_broker_groups import RawMember

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

        async def make() -> RawMember:
            return RawMember(
                handle.bootstrap, group, protocols, name=name, topic=topic, partitions=partitions
            ).start()

        self.member = self.call(make())
        self.topic = topic

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def owned(self) -> list[int] | None:
        m = self.member
        if m.synced_generation < 0 or m.synced_generation != m.generation:
            return None
        return sorted(decode_assignment(m.assignment).partitions.get(self.topic, ()))

    def fatal(self) -> list[int]:
        return [e for e in self.member.errors if e in (22, 23, 25, 82)]

    def close(self) -> None:
        try:
            self.call(self.member.leave())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)


@scenario
def rolling_upgrade(handle: BrokerHandle) -> None:
    """range -> [cooperative-sticky, range] -> [cooperative-sticky], one member at a time.

    librdkafka refuses a mixed eager + cooperative list, so the middle step uses raw-request
    members; the first and last steps are real librdkafka / kafka-python consumers.
    """
    handle.require_kafka_semantics("no protocol vote")
    topic, group = unique("roll"), unique("g-roll")
    create_topic(handle, topic, 4)

    async def protocol() -> str:
        async with RawClient(handle.bootstrap) as client:
            resp = await client.request("DescribeGroups", 5, {"groups": [group]})
            return str(resp.groups[0].protocol_data)

    with Peers(handle) as peers:
        members: list[Any] = [
            peers.start("confluent", group=group, topic=topic, name="a", assignors="range"),
            peers.start("kafka-python", group=group, topic=topic, name="b", assignors="range"),
        ]
        raws: list[ThreadedRawMember] = []
        seen = []

        def settle(what: str) -> None:
            peers.all[0].wait_for(
                lambda _: partitioned(members, 4) and all(m.owned() for m in members),
                what,
            )
            for m in members:
                assert not (m.fatal() if isinstance(m, ThreadedRawMember) else m.errors()), what
            seen.append(raw(protocol()))

        try:
            settle("two range members")
            mixed = ["cooperative-sticky", "range"]
            for i, old in enumerate(list(members)):  # step 1: the mixed list, raw requests
                old.close()
                members.remove(old)
                new = ThreadedRawMember(handle, group, topic, mixed, f"mixed{i}", 4)
                raws.append(new)
                members.append(new)
                settle(f"mixed member {i}")
            for i, old in enumerate(list(members)):  # step 2: cooperative only, real clients
                kind = "confluent" if i == 0 else "kafka-python"
                members.remove(old)
                old.close()
                members.append(
                    peers.start(
                        kind, group=group, topic=topic, name=f"c{i}", assignors="cooperative-sticky"
                    )
                )
                settle(f"cooperative member {i}")
        finally:
            for r in raws:
                if r.thread.is_alive():
                    r.loop.call_soon_threadsafe(r.loop.stop)
        assert seen == ["range", "range", "cooperative-sticky"] + ["cooperative-sticky"] * 2


@scenario
def range_member_joins_cooperative_group(handle: BrokerHandle) -> None:
    """A real range-only consumer joins two [cooperative-sticky, range] members: the vote
    falls back to range, the only protocol everyone supports, and nobody is kicked out."""
    handle.require_kafka_semantics("no protocol vote")
    topic, group = unique("fallback"), unique("g-fallback")
    create_topic(handle, topic, 4)

    async def protocol() -> str:
        async with RawClient(handle.bootstrap) as client:
            resp = await client.request("DescribeGroups", 5, {"groups": [group]})
            return str(resp.groups[0].protocol_data)

    mixed = ["cooperative-sticky", "range"]
    raws = [ThreadedRawMember(handle, group, topic, mixed, f"mixed{i}", 4) for i in range(2)]
    try:
        with Peers(handle) as peers:
            deadline = time.monotonic() + 60
            while not (partitioned(raws, 4) and all(r.owned() for r in raws)):
                assert time.monotonic() < deadline, "the mixed members never converged"
                time.sleep(0.05)  # polling raw members' state with a bound
            assert raw(protocol()) == "cooperative-sticky"
            old = peers.start("confluent", group=group, topic=topic, name="old", assignors="range")
            members: list[Any] = [*raws, old]
            old.wait_for(
                lambda _: partitioned(members, 4) and all(m.owned() for m in members),
                "three members share the topic",
            )
            assert raw(protocol()) == "range"
            assert not old.errors() and not any(r.fatal() for r in raws)
    finally:
        for r in raws:
            r.close()


# --- tests ----------------------------------------------------------------------------------


def test_cooperative_librdkafka_leader(runs: dict[str, Future[None]]) -> None:
    result(runs, "cooperative_librdkafka_leader")


def test_cooperative_kafka_python_leader(runs: dict[str, Future[None]]) -> None:
    result(runs, "cooperative_kafka_python_leader")


def test_leave(runs: dict[str, Future[None]]) -> None:
    result(runs, "leave")


def test_kill(runs: dict[str, Future[None]]) -> None:
    result(runs, "kill")


def test_idle_member(runs: dict[str, Future[None]]) -> None:
    result(runs, "idle_member")


def test_inconsistent_group_protocol(runs: dict[str, Future[None]]) -> None:
    result(runs, "inconsistent_group_protocol")


def test_member_id_required(runs: dict[str, Future[None]]) -> None:
    result(runs, "member_id_required")


def test_commit_and_fetch(runs: dict[str, Future[None]]) -> None:
    result(runs, "commit_and_fetch")


def test_protocol_vote_with_real_clients(runs: dict[str, Future[None]]) -> None:
    result(runs, "protocol_vote")


def test_static_restart_without_rebalance(runs: dict[str, Future[None]]) -> None:
    result(runs, "static_restart_without_rebalance")


def test_rolling_upgrade_with_real_clients(runs: dict[str, Future[None]]) -> None:
    result(runs, "rolling_upgrade")


def test_range_member_joins_cooperative_group(runs: dict[str, Future[None]]) -> None:
    result(runs, "range_member_joins_cooperative_group")


def test_static_zombie_is_fenced(runs: dict[str, Future[None]]) -> None:
    result(runs, "static_zombie_is_fenced")
