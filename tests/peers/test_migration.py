"""KIP-848's online migration with aiogroup and Java members, records flowing: a classic
cooperative group moved to the consumer protocol by a rolling bounce (Kafka converts it when the
first consumer-protocol member joins and serves the classic members that remain), then back
(converted again when the last consumer-protocol member leaves). docs/migration.md.

The aiogroup members are the example's member processes (``examples/migrate_consumer_protocol.py
member``: a cooperative-sticky Consumer, SIGTERM then ``close()``); the Java member is
the ``java`` peer (``group.protocol=classic``, then ``consumer``). Between steps the test waits as
a deploy script would, with ``aiogroup group watch --until safe``, then asks the broker what the
group is: its type and how many members speak which protocol must be what Kafka's rules make of
the members running. At the end the chaos checker must find no partition ever consumed by two
members at once, every record must have been processed at least once, and no member may have
revoked a partition that came straight back to it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from aiogroup.inspector import GroupDescription, describe_group
from aiogroup.migration import Stage, Upgrade, migration_status
from aiogroup.testing.fixtures import BrokerHandle
from examples import migrate_consumer_protocol as example

from .harness import HEARTBEAT_MS, SESSION_MS, MemberGroup

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(400)]

#: What the embedded broker needs to serve this test, and lacks until it has mixed groups.
EMBEDDED_LACKS = (
    "the embedded broker has no mixed groups: it refuses a ConsumerGroupHeartbeat joining a "
    "non-empty classic group (no online upgrade) and a JoinGroup to a non-empty consumer group "
    "(no classic members in a consumer group, no downgrade when the last consumer-protocol "
    "member leaves); branch embedded848 adds them (aiogroup.testing.embedded.consumer_classic)"
)
EMBEDDED_MIXED = importlib.util.find_spec("aiogroup.testing.embedded.consumer_classic") is not None
BROKERS = [
    pytest.param("embedded", id="embedded",
                 marks=pytest.mark.skipif(not EMBEDDED_MIXED, reason=EMBEDDED_LACKS)),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]  # fmt: skip
#: member -> its kind; each is stopped and started again in this order, both ways.
PLAN = {"a1": "aiogroup-consumer", "j1": "java", "a2": "aiogroup-consumer"}
EXAMPLE = Path(example.__file__)


def _group_config(handle: BrokerHandle, group: str) -> None:
    """The group's consumer-protocol session and heartbeat: the members' 6 s, fast beats
    (group configs, KIP-848; the test brokers lower the minimums)."""
    if handle.embedded is not None:
        setter = getattr(handle.embedded, "set_group_config", None)
        assert setter is not None, "an embedded broker with mixed groups has group configs"
        setter(group, session_timeout_ms=SESSION_MS, heartbeat_interval_ms=300)
        return
    kafka = handle.apache
    assert kafka is not None
    kafka.run_tool(
        "kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter",
        "--entity-type", "groups", "--entity-name", group, "--add-config",
        f"consumer.session.timeout.ms={SESSION_MS},consumer.heartbeat.interval.ms=300",
    )  # fmt: skip


class _Migration:
    def __init__(self, g: MemberGroup) -> None:
        self.g = g
        self.protocol: dict[str, str] = {}  # member -> the protocol it speaks now
        self.process: dict[str, str] = {}  # member -> its running process's name
        self.starts = 0
        #: (what happened, the group's type, the stage, consumer and classic members).
        self.seen: list[tuple[str, str, Stage, int, int]] = []

    def start(self, member: str, protocol: str) -> None:
        self.starts += 1
        name = f"{member}-{self.starts}-{protocol}"
        g = self.g
        if PLAN[member] == "java":
            g.start(name, "java", group_protocol=protocol)
        else:
            g.start_command(name, "aiogroup-consumer", [
                sys.executable, str(EXAMPLE), "member", "--bootstrap", g.handle.bootstrap,
                "--group", g.group, "--topic", g.topic, "--name", name,
                "--group-protocol", protocol, "--session-ms", str(SESSION_MS),
                "--heartbeat-ms", str(HEARTBEAT_MS), "--telemetry", str(g.dir),
            ])  # fmt: skip
        self.protocol[member] = protocol
        self.process[member] = name

    def stop(self, member: str) -> None:
        assert self.g.stop(self.process.pop(member)) == 0
        del self.protocol[member]

    def settled(self, what: str, previous_type: str) -> GroupDescription:
        """Wait as a deploy script would, then check what the broker made of the group."""
        g = self.g
        g.wait(g.converged, f"the members' callbacks covering every partition once ({what})")
        live = len(self.protocol)
        watch = subprocess.run(
            [sys.executable, "-m", "aiogroup", "group", "watch", g.group, "--bootstrap",
             g.handle.bootstrap, "--members", str(live), "--until", "safe", "--interval", "0.2",
             "--timeout", "60"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert watch.returncode == 0, f"{what}: {watch.stdout}{watch.stderr}"
        group = asyncio.run(describe_group(g.handle.bootstrap, g.group))
        status = migration_status(group)
        protocols = list(self.protocol.values())
        want = example.expected_group_type(protocols, previous_type)
        assert group.group_type == want, f"{what}: {group}"
        consumers = protocols.count("consumer")
        if want == "consumer":
            assert (len(status.consumer_members), len(status.classic_members)) == (
                consumers, live - consumers), f"{what}: {status}"
            assert status.stage is (Stage.MIXED if consumers < live else Stage.CONSUMER)
        else:
            assert status.stage is Stage.CLASSIC and len(status.classic_members) == live
        self.seen.append((what, group.group_type, status.stage, consumers, live - consumers))
        return group

    def move(self, to: str, group_type: str) -> str:
        """Restart each member, in PLAN's order, with ``to``; the group's type at the end."""
        for member in PLAN:
            self.stop(member)
            group_type = self.settled(f"{member} stopped", group_type).group_type
            self.start(member, to)
            group_type = self.settled(f"{member} back with {to}", group_type).group_type
            self.g.produce(5)
        return group_type


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
def test_a_group_of_aiogroup_and_java_members_moves_to_the_consumer_protocol_and_back(
    kafka_broker: BrokerHandle, java_peer: list[str], tmp_path: Path
) -> None:
    g = MemberGroup(kafka_broker, tmp_path)
    _group_config(kafka_broker, g.group)
    m = _Migration(g)
    try:
        g.produce(20)
        for member in PLAN:
            m.start(member, "classic")
        start = m.settled("every member on the classic protocol", "classic")
        assert migration_status(start).upgrade is Upgrade.POSSIBLE
        assert m.move("consumer", "classic") == "consumer"
        assert m.move("classic", "consumer") == "classic"
        g.wait(lambda: not g.unprocessed(), "every record processed")
        codes = g.close()
    finally:
        g.kill_all()
    g.judge(codes, clients=("aiogroup", "java"))
    # Both conversions happened where Kafka's rules put them, and the mixed stages between.
    assert _conversions(m.seen) == [
        ("a1 back with consumer", "consumer"),  # the first consumer-protocol member joined
        ("a2 stopped", "classic"),  # the last one left
    ]
    assert {(s, c) for _, _, s, c, _ in m.seen if s is Stage.MIXED} == {
        (Stage.MIXED, 1), (Stage.MIXED, 2)}  # fmt: skip


def _conversions(seen: Sequence[tuple[str, str, Stage, int, int]]) -> list[tuple[str, str]]:
    return [(what, kind) for (what, kind, *_), (_, before, *_) in zip(seen[1:], seen, strict=False)
            if kind != before]  # fmt: skip
