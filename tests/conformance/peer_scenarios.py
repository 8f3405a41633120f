"""Real-client scenarios: librdkafka and kafka-python consumers (their own processes, see
``peer.py``) in one group, and raw-request members where no real client can play the part.

Each asserts what must hold on any broker that follows Kafka (a failed assertion fails the
scenario on that broker) and returns the facts to compare between brokers.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiogroup.protocol import decode_assignment
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.fixtures import BrokerHandle

from .peers import Peers, create_topic, produce
from .scenarios import Env, Outcome, peer_scenario, unique

NO_VOTE = "no protocol vote (Tansu keeps the first member's first protocol)"
WEAK_STATIC = "weak static membership (no FENCED_INSTANCE_ID, ids given back)"
SESSION = 6000


def raw(coro: Any) -> Any:
    """Run a RawClient coroutine from a scenario thread."""
    return asyncio.run(coro)


def owns(partitions: list[int]) -> Callable[[Any], bool]:
    return lambda p: bool(p.owned() == partitions)


def partitioned(peers: Sequence[Any], total: int) -> bool:
    owned = [p.owned() for p in peers]
    if any(o is None for o in owned):
        return False
    flat = sorted(x for o in owned for x in o)
    return flat == list(range(total))


async def _protocol(handle: BrokerHandle, group: str) -> str:
    async with RawClient(handle.bootstrap) as client:
        resp = await client.request("DescribeGroups", None, {"groups": [group]})
        return str(resp.groups[0].protocol_data)


def _cooperative_join(handle: BrokerHandle, first: str, second: str) -> Outcome:
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
        return {"split": sorted([len(kept), len(moved)]), "a revoked exactly what moved": True}


@peer_scenario("Cooperative join, librdkafka leads kafka-python (KIP-429)")
def cooperative_librdkafka_leader(env: Env) -> Outcome:
    return _cooperative_join(env.handle, "confluent", "kafka-python")


@peer_scenario("Cooperative join, kafka-python leads librdkafka (KIP-429)")
def cooperative_kafka_python_leader(env: Env) -> Outcome:
    return _cooperative_join(env.handle, "kafka-python", "confluent")


def _survivor_takes_over(env: Env, first: str, second: str, *, crash: bool) -> Outcome:
    """Two members share a topic; the second leaves cleanly (or is killed, so that only its
    session's expiry tells the coordinator); the first ends up owning everything."""
    handle = env.handle
    topic, group = unique("over"), unique("g-over")
    create_topic(handle, topic, 4)
    with Peers(handle) as peers:
        a = peers.start(first, group=group, topic=topic, name="a")
        b = peers.start(second, group=group, topic=topic, name="b")
        a.wait_for(
            lambda p: partitioned([a, b], 4) and bool(a.owned()) and bool(b.owned()),
            "a and b share the topic",
        )
        if crash:
            b.kill()  # no LeaveGroup: the coordinator must expire the session
        else:
            b.close()
        a.wait_for(owns([0, 1, 2, 3]), "a takes everything after b is gone")
        if not crash:
            assert not a.errors()
    return {"survivor owns": 4}


@peer_scenario("A librdkafka member takes over from a kafka-python member that leaves")
def leave(env: Env) -> Outcome:
    return _survivor_takes_over(env, "confluent", "kafka-python", crash=False)


@peer_scenario("A killed member's session expires; the survivor takes over")
def kill(env: Env) -> Outcome:
    return _survivor_takes_over(env, "kafka-python", "confluent", crash=True)


@peer_scenario("Three members, two partitions: one member idles")
def idle_member(env: Env) -> Outcome:
    handle = env.handle
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
    return {"owners": 2, "idle": 1}


@peer_scenario("A member with a disjoint assignor is refused (INCONSISTENT_GROUP_PROTOCOL)")
def inconsistent_group_protocol(env: Env) -> Outcome:
    handle = env.handle
    topic, group = unique("incons"), unique("g-incons")
    create_topic(handle, topic, 2)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a", assignors="range")
        a.wait_for(owns([0, 1]), "a owns everything")
        b = peers.start("kafka-python", group=group, topic=topic, name="b", assignors="roundrobin")
        b.wait_for(lambda p: 23 in p.errors(), "INCONSISTENT_GROUP_PROTOCOL")
        assert a.owned() == [0, 1]
        assert not a.revoked()
    return {"newcomer's error": 23, "a keeps": [0, 1]}


@peer_scenario("Commit with librdkafka; kafka-python resumes at the committed offset")
def commit_and_fetch(env: Env) -> Outcome:
    handle = env.handle
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
                    None,
                    {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]},
                    at_most=7,  # v8 batches groups: another shape
                )
                return int(resp.topics[0].partitions[0].committed_offset)

        committed = raw(fetch())
        assert committed == 10
        a.close()
        produce(handle, topic, 5)
        b = peers.start("kafka-python", group=group, topic=topic, name="b")
        b.wait_for(lambda p: p.consumed() == 5, "b resumes at the committed offset")
    return {"committed": committed, "b consumed": 5}


@peer_scenario(
    "The protocol vote with real clients (roundrobin,range vs range,roundrobin x2)", tansu=NO_VOTE
)
def protocol_vote(env: Env) -> Outcome:
    handle = env.handle
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
        protocol = raw(_protocol(handle, group))
        assert protocol == "range"
    return {"protocol": protocol}


@peer_scenario(
    "A static librdkafka member restarts: its partitions back, no rebalance", tansu=WEAK_STATIC
)
def static_restart_without_rebalance(env: Env) -> Outcome:
    handle = env.handle
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
    return {"a2 got a's partitions": True, "b saw a rebalance": False}


@peer_scenario(
    "A second process with the same group.instance.id fences the first", tansu=WEAK_STATIC
)
def static_zombie_is_fenced(env: Env) -> Outcome:
    handle = env.handle
    topic, group = unique("fence"), unique("g-fence")
    create_topic(handle, topic, 2)
    with Peers(handle) as peers:
        a = peers.start("confluent", group=group, topic=topic, name="a", instance_id="same")
        a.wait_for(owns([0, 1]), "a owns everything")
        b = peers.start("confluent", group=group, topic=topic, name="b", instance_id="same")
        b.wait_for(owns([0, 1]), "b replaces a")
        a.wait_for(lambda p: 82 in p.errors(), "the zombie a is fenced")
    return {"zombie's error": 82, "b owns": [0, 1]}


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
        from tests.testing.raw_member import RawMember

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


@peer_scenario(
    "Rolling upgrade range -> [cooperative-sticky, range] -> [cooperative-sticky]", tansu=NO_VOTE
)
def rolling_upgrade(env: Env) -> Outcome:
    """One member at a time. librdkafka refuses a mixed eager + cooperative list, so the middle
    step uses raw-request members; the first and last steps are real librdkafka / kafka-python
    consumers."""
    handle = env.handle
    topic, group = unique("roll"), unique("g-roll")
    create_topic(handle, topic, 4)
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
            seen.append(raw(_protocol(handle, group)))

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
    return {"protocols": seen}


@peer_scenario(
    "A range-only librdkafka member joins two [cooperative-sticky, range] members", tansu=NO_VOTE
)
def range_member_joins_cooperative_group(env: Env) -> Outcome:
    """The vote falls back to range, the only protocol everyone supports; nobody is kicked."""
    handle = env.handle
    topic, group = unique("fallback"), unique("g-fallback")
    create_topic(handle, topic, 4)
    mixed = ["cooperative-sticky", "range"]
    raws = [ThreadedRawMember(handle, group, topic, mixed, f"mixed{i}", 4) for i in range(2)]
    try:
        with Peers(handle) as peers:
            deadline = time.monotonic() + 60
            while not (partitioned(raws, 4) and all(r.owned() for r in raws)):
                assert time.monotonic() < deadline, "the mixed members never converged"
                time.sleep(0.05)  # polling raw members' state with a bound
            before = raw(_protocol(handle, group))
            assert before == "cooperative-sticky"
            old = peers.start("confluent", group=group, topic=topic, name="old", assignors="range")
            members: list[Any] = [*raws, old]
            old.wait_for(
                lambda _: partitioned(members, 4) and all(m.owned() for m in members),
                "three members share the topic",
            )
            after = raw(_protocol(handle, group))
            assert after == "range"
            assert not old.errors() and not any(r.fatal() for r in raws)
    finally:
        for r in raws:
            r.close()
    return {"before": before, "after": after}
