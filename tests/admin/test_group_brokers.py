"""``aiogroup group describe|watch`` against real brokers, with a group in the middle of an
upgrade built from real aiogroup members offering different assignor lists.

On the embedded broker and Apache Kafka 2.3 the group is bounced exactly as the rolling-upgrade
guide says ([range] -> [cooperative-sticky, range] -> [cooperative-sticky]), and after every
bounce the snapshot is checked against what the members themselves know (their generation,
assignment and rebalance protocol). On Tansu, which returns no member metadata, the command
must say so.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.client import GroupMember
from aiogroup.inspector import GroupDescription, GroupWatch, MemberMode, Step, describe_group
from aiogroup.membership import MemberState
from aiogroup.testing.fixtures import BrokerHandle, kafka_broker  # noqa: F401 - fixture by name

pytestmark = pytest.mark.timeout(240)

PARTITIONS = 6
RANGE = ["range"]
BOTH = ["cooperative-sticky", "range"]
COOP = ["cooperative-sticky"]


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


class _Group:
    """Three aiogroup members, bounced one at a time."""

    def __init__(self, handle: BrokerHandle, topic: str, *, session_ms: int, heartbeat_ms: int):
        self.handle = handle
        self.bootstrap = handle.bootstrap
        self.topic = topic
        self.group_id = f"describe-{uuid.uuid4().hex[:8]}"
        self.session_ms = session_ms
        self.heartbeat_ms = heartbeat_ms
        self.members: dict[str, GroupMember] = {}
        self.assignors: dict[str, list[str]] = {}

    def _new(self, name: str, assignors: list[str]) -> GroupMember:
        self.assignors[name] = assignors
        return GroupMember(
            self.bootstrap, self.group_id, topics=[self.topic], assignors=assignors,
            session_timeout_ms=self.session_ms, heartbeat_interval_ms=self.heartbeat_ms,
            rebalance_timeout_ms=20_000, request_timeout_ms=15_000, client_id=name,
        )

    async def start(self, name: str, assignors: list[str]) -> None:
        member = self.members[name] = self._new(name, assignors)
        await member.start()

    async def bounce(self, name: str, assignors: list[str]) -> None:
        await self.members.pop(name).close()
        await self.start(name, assignors)

    async def close(self) -> None:
        await asyncio.gather(*(m.close() for m in self.members.values()))

    async def converged(self, timeout: float = 60.0) -> GroupDescription:
        """Wait (polling with a bound) until the members agree on a complete assignment and the
        broker shows that generation Stable; return that snapshot."""
        deadline = time.monotonic() + timeout
        last: GroupDescription | None = None
        while True:
            ms = list(self.members.values())
            gens = {m.generation_id for m in ms}
            owned = sorted(tp for m in ms for tp in m.assignment)
            if (
                all(m.state is MemberState.STABLE for m in ms)
                and len(gens) == 1
                and len(owned) == PARTITIONS == len(set(owned))
            ):
                last = await describe_group(self.bootstrap, self.group_id)
                mine = {m.member_id: m.assignment for m in ms}
                if (
                    last.stable
                    and len(last.members) == len(ms)
                    and last.generation in (None, gens.pop())
                    and {m.member_id: m.assignment for m in last.members} == mine
                ):
                    return last
            if time.monotonic() > deadline:
                raise AssertionError(f"no convergence in {timeout} s; last snapshot {last}")
            await asyncio.sleep(0.05)  # polling a condition with a bound


def _check_snapshot(g: _Group, d: GroupDescription, *, version: int | None) -> None:
    """The snapshot against what the members know of themselves."""
    by_client = {m.client_id: m for m in d.members}
    assert sorted(by_client) == sorted(g.members)
    # Apache Kafka 2.3.0 sends the assignment in place of the metadata (KAFKA-9150)
    assert d.metadata_is_assignment == (g.handle.kind == "kafka23")
    for name, member in g.members.items():
        described = by_client[name]
        assert described.member_id == member.member_id
        assert described.assignment == member.assignment
        assert described.client_host  # "/127.0.0.1" on Kafka
        assert described.problem is None
        if d.metadata_is_assignment:
            assert described.subscription is None
        else:
            assert described.subscription is not None
            assert list(described.subscription.topics) == [g.topic]
    if not d.metadata_is_assignment:
        # Inferred from what members report holding at their last join: when every member of
        # this generation joined in its first round, none holds an earlier one, and there is
        # nothing to infer from (no "gen ?" either: the CLI leaves the column out).
        reported = [m.reported_generation(d.protocol) for m in d.members]
        if any(r is not None and r >= 0 for r in reported):
            assert d.generation == next(iter(g.members.values())).generation_id
        else:
            assert d.generation is None
    assert d.partitions == {g.topic: PARTITIONS}
    if version is not None:
        assert d.api_version == version


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup", "group", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def _expected_modes(g: _Group, d: GroupDescription) -> dict[str, RebalanceProtocol]:
    return {m.client_id: g.members[m.client_id].protocol for m in d.members}


@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_describe_and_watch_follow_a_rolling_upgrade(kafka_broker: BrokerHandle) -> None:  # noqa: F811
    if kafka_broker.kind == "tansu":
        pytest.skip("Tansu holds no protocol vote and returns no member metadata (next test)")
    version = {"embedded": 5, "kafka23": 3}.get(kafka_broker.kind)
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    await _create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
    g = _Group(kafka_broker, topic, session_ms=10_000, heartbeat_ms=200)
    names = ["m1", "m2", "m3"]
    watch = GroupWatch()
    try:
        await asyncio.gather(*(g.start(n, RANGE) for n in names))
        d = await g.converged()
        _check_snapshot(g, d, version=version)
        a = watch.observe(d)
        assert d.protocol == "range" and a.step is Step.EAGER and a.safe

        # Bounce 1, first member: a group in the middle of the upgrade ([range] and
        # [cooperative-sticky, range] side by side). The vote stays range.
        await g.bounce("m1", BOTH)
        d = await g.converged()
        _check_snapshot(g, d, version=version)
        a = watch.observe(d)
        assert d.protocol == "range" and a.step is Step.EAGER and a.safe
        assert set(a.modes.values()) == {MemberMode.EAGER}
        code, out, err = await _cli("describe", g.group_id, "--bootstrap", g.bootstrap, "--json")
        assert code == 0, err
        snap = json.loads(out)
        assert snap["describe_groups_version"] == d.api_version
        assert (snap["state"], snap["protocol"], snap["step"], snap["next_bounce"]) == (
            "Stable", "range", "eager", "safe")
        if not d.metadata_is_assignment:
            assert snap["generation"] == g.members["m2"].generation_id
        assert {m["client_id"]: m["assigned"] for m in snap["members"]} == {
            n: [[tp.topic, tp.partition] for tp in sorted(m.assignment)]
            for n, m in g.members.items()}
        code, text, err = await _cli("describe", g.group_id, "--bootstrap", g.bootstrap,
                                     "--members", "3")
        assert code == 0, err
        assert "protocol     consumer / range (EAGER)" in text
        assert "next bounce  safe" in text and "do not remove range" in text

        for name in names[1:]:
            await g.bounce(name, BOTH)
            d = await g.converged()
            _check_snapshot(g, d, version=version)
            a = watch.observe(d)
        # Every member offers cooperative-sticky first: the vote has moved, yet every member
        # still runs EAGER (range is in each list).
        assert d.protocol == "cooperative-sticky"
        assert set(_expected_modes(g, d).values()) == {RebalanceProtocol.EAGER}
        assert a.step is Step.VOTE_MOVED and a.safe
        eager_clients = {m.client_id for m in d.members if a.modes[m.member_id] is MemberMode.EAGER}
        # m1 and m2 ran under the range protocol and have not restarted since, so range is still
        # in their lists; with metadata, they also rejoined reporting no owned partitions.
        # m3 joined as the vote moved: its protocol shows at its next rebalance.
        assert eager_clients == {"m1", "m2"}

        # Bounce 2 with `aiogroup group watch --until cooperative` following it.
        watcher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiogroup", "group", "watch", g.group_id,
            "--bootstrap", g.bootstrap, "--interval", "0.1", "--until", "cooperative",
            "--timeout", "150", "--json",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        last_bounce_began = 0.0
        try:
            assert watcher.stdout is not None
            first = await asyncio.wait_for(watcher.stdout.readline(), 60)  # it has looked once
            for name in names:
                last_bounce_began = time.time()
                await g.bounce(name, COOP)
                d = await g.converged()
                _check_snapshot(g, d, version=version)
                a = watch.observe(d)
                truth = _expected_modes(g, d)
                for m in d.members:
                    mode = a.modes[m.member_id]
                    if d.metadata_is_assignment:  # only restarts tell (no owned partitions)
                        assert mode in (
                            (MemberMode.EAGER, MemberMode.UNKNOWN)
                            if truth[m.client_id] is RebalanceProtocol.EAGER
                            else (MemberMode.UNKNOWN,)), (m.client_id, mode)
                    elif truth[m.client_id] is RebalanceProtocol.EAGER:
                        assert mode is MemberMode.EAGER, (m.client_id, mode)
                    else:
                        assert mode in (MemberMode.COOPERATIVE, MemberMode.NEW), (m.client_id, mode)
                expected_step = Step.COOPERATIVE if name == names[-1] else Step.VOTE_MOVED
                assert a.step is expected_step and a.safe
            out_b, err_b = await asyncio.wait_for(watcher.communicate(), 150)
        finally:
            if watcher.returncode is None:
                watcher.kill()
                await watcher.wait()
        assert watcher.returncode == 0, err_b.decode()
        lines = [json.loads(line) for line in [first, *out_b.splitlines()]]
        assert lines[0]["step"] == "vote-moved"
        assert lines[-1]["step"] == "cooperative" and lines[-1]["next_bounce"] == "safe"
        steps = [(line["time"], line["step"]) for line in lines if line["state"] == "Stable"]
        assert {s for _, s in steps} >= {"vote-moved", "cooperative"}
        # nothing called the group cooperative before its last EAGER member was bounced
        assert all(t >= last_bounce_began for t, s in steps if s == "cooperative"), steps
        assert watch.restarted == 6
    finally:
        await g.close()


async def test_on_tansu_describe_says_there_is_no_member_metadata(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    if kafka_broker.kind != "tansu":
        pytest.skip("Tansu's DescribeGroups deviation")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    await _create_topic(kafka_broker.bootstrap, topic, 2)
    group_id = f"describe-{uuid.uuid4().hex[:8]}"
    async with GroupMember(kafka_broker.bootstrap, group_id, topics=[topic],
                           session_timeout_ms=6000, heartbeat_interval_ms=1000,
                           client_id="t1") as member:
        await member.wait_for_assignment(timeout=60)
        deadline = time.monotonic() + 30
        while True:
            d = await describe_group(kafka_broker.bootstrap, group_id)
            if d.stable or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)  # polling with a bound
        assert d.stable and [m.member_id for m in d.members] == [member.member_id]
        assert not d.has_metadata
        code, text, err = await _cli("describe", group_id, "--bootstrap", kafka_broker.bootstrap)
    assert code == 0, err
    assert "no member metadata" in text and "next bounce  cannot tell" in text


async def test_a_group_that_does_not_exist_is_never_safe(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A misspelt group id: Kafka describes it as Dead with no members. A restart script that
    waits for ``--until safe`` must stop at once with a non-zero status and the reason."""
    kafka_broker.require_kafka_semantics("Tansu describes unknown groups its own way")
    missing = f"no-such-group-{uuid.uuid4().hex[:8]}"
    code, text, err = await _cli(
        "watch", missing, "--bootstrap", kafka_broker.bootstrap, "--members", "3",
        "--until", "safe", "--interval", "0.2", "--timeout", "60",
    )  # fmt: skip
    assert code == 3, (text, err)
    assert "does not exist" in text and "check the group id" in text
    assert "safe" not in text.replace("not safe", "")
    code, text, err = await _cli("describe", missing, "--bootstrap", kafka_broker.bootstrap)
    assert code == 3, (text, err)
    assert "does not exist" in text


async def test_an_empty_group_is_not_safe_while_members_are_missing(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """The group exists (a member joined and left) but nobody is in it: never 'safe'."""
    kafka_broker.require_kafka_semantics("Tansu's group states")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    await _create_topic(kafka_broker.bootstrap, topic, 2)
    group_id = f"empty-{uuid.uuid4().hex[:8]}"
    async with GroupMember(kafka_broker.bootstrap, group_id, topics=[topic],
                           session_timeout_ms=6000, heartbeat_interval_ms=500,
                           client_id="t1") as member:
        await member.wait_for_assignment(timeout=60)
    code, text, err = await _cli(
        "watch", group_id, "--bootstrap", kafka_broker.bootstrap, "--members", "3",
        "--until", "safe", "--interval", "0.2", "--timeout", "2",
    )  # fmt: skip
    assert code == 1, (text, err)  # timed out: never safe
    assert "0/3 members" in text and "nobody is consuming" in text


async def test_watching_a_group_cooperative_throughout_tells_no_upgrade_steps(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """A group that was never eager: no "step vote-moved (0 EAGER)", no KAFKA-9150 upgrade
    advice, and no "gen ?" where the members do not tell the generation (issue 23.8)."""
    kafka_broker.require_kafka_semantics("Tansu holds no protocol vote")
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    await _create_topic(kafka_broker.bootstrap, topic, PARTITIONS)
    g = _Group(kafka_broker, topic, session_ms=6000, heartbeat_ms=500)
    try:
        await g.start("m1", COOP)
        await g.start("m2", COOP)
        await g.converged()
        code, text, err = await _cli(
            "watch", g.group_id, "--bootstrap", kafka_broker.bootstrap, "--members", "2",
            "--until", "safe", "--interval", "0.2", "--timeout", "60",
        )  # fmt: skip
    finally:
        await g.close()
    assert code == 0, (text, err)
    assert "reached: next bounce safe" in text
    for noise in ("step ", "EAGER", "KAFKA-9150", "gen ?", "vote"):
        assert noise not in text, (noise, text)
    if kafka_broker.kind == "embedded":  # members report their generation (Subscription V2+)
        assert " gen " in text
