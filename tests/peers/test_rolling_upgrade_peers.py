"""KIP-429's rolling upgrade (eager ``range`` to ``cooperative-sticky`` in two bounces,
docs/rolling-upgrade.md and examples/rolling_upgrade.py) with a Java ``KafkaConsumer`` taking
part beside aiogroup ``Consumer`` members.

Bounce 1 gives the aiogroup members ``[cooperative-sticky, range]`` and the Java member
``[range, cooperative-sticky]`` (the other order: the vote still moves, by majority); bounce 2
gives everyone ``[cooperative-sticky]``. After every step the group must have converged with
the protocol Kafka's vote picks, each member running the rebalance protocol its assignors allow;
at the end no partition ever had two owners, every record was processed at least once, and the
members that ran cooperatively revoked only what moved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from aiogroup.testing.fixtures import BrokerHandle
from examples.rolling_upgrade import DescribeGroupsProbe, expected_group_protocols

from .harness import MemberGroup, moved_without_need, protocols

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(400)]

BROKERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
    pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23),
]
RANGE = ("range",)
COOP = ("cooperative-sticky",)
#: member -> (kind, assignors at the start, after bounce 1, after bounce 2)
PLAN: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "a1": ("aiogroup-consumer", RANGE, ("cooperative-sticky", "range"), COOP),
    "j1": ("java", RANGE, ("range", "cooperative-sticky"), COOP),
    "a2": ("aiogroup-consumer", RANGE, ("cooperative-sticky", "range"), COOP),
}


def _rebalance_protocol(assignors: Sequence[str]) -> str:
    return "cooperative" if set(assignors) == {"cooperative-sticky"} else "eager"


class _Upgrade:
    def __init__(self, g: MemberGroup) -> None:
        self.g = g
        self.configs: dict[str, tuple[str, ...]] = {}  # member -> its assignors now
        self.incarnation: dict[str, str] = {}  # member -> the running process's name
        self.expected: dict[str, str] = {}  # process name -> its rebalance protocol
        self.probe = DescribeGroupsProbe(g.handle.bootstrap)

    def start(self, member: str, step: int) -> None:
        kind, *steps = PLAN[member]
        name = f"{member}-{step}"
        self.g.start(name, kind, steps[step])
        self.configs[member] = steps[step]
        self.incarnation[member] = name
        self.expected[name] = _rebalance_protocol(steps[step])

    def settled(self, label: str) -> None:
        self.g.wait(self.g.converged, f"the group converged ({label})")
        snapshot = asyncio.run(self.probe.snapshot(self.g.group))
        want = expected_group_protocols(list(self.configs.values()))
        assert snapshot.state == "Stable", f"{label}: {snapshot}"
        assert snapshot.protocol in want, f"{label}: {snapshot.protocol} not in {set(want)}"

    def bounce(self, step: int) -> None:
        for member in PLAN:
            assert self.g.stop(self.incarnation.pop(member)) == 0
            del self.configs[member]
            self.settled(f"bounce {step}: {member} left")
            self.start(member, step)
            self.settled(f"bounce {step}: {member} rejoined with {self.configs[member]}")
            self.g.produce(5)


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
def test_a_rolling_upgrade_to_cooperative_with_a_java_member(
    kafka_broker: BrokerHandle, java_peer: list[str], tmp_path: Path
) -> None:
    g = MemberGroup(kafka_broker, tmp_path)
    up = _Upgrade(g)
    try:
        g.produce(20)
        for member in PLAN:
            up.start(member, 0)
        up.settled("start: every member on range")
        up.bounce(1)
        assert asyncio.run(up.probe.snapshot(g.group)).protocol == "cooperative-sticky"
        up.bounce(2)
        g.wait(lambda: not g.unprocessed(), "every record processed")
        codes = g.close()
    finally:
        g.kill_all()
    assert all(code == 0 for code in codes.values()), codes
    verdict = g.verdict()
    detail = "\n".join(f"{v.kind} {v.partition}: {v.detail}" for v in verdict.violations)
    assert not verdict.violations, f"{verdict.summary()}\n{detail}"
    assert set(verdict.members) == {"aiogroup", "java"}
    events = g.events()
    # Each process ran the rebalance protocol its own assignors allow (KIP-429: all of them).
    assert protocols(events) == {name: {want} for name, want in up.expected.items()}
    cooperative = {n for n in events if up.expected[n] == "cooperative"}
    assert moved_without_need(events, g.stops, cooperative) == []
    # The eager members did revoke everything they held at a rebalance: the test can tell.
    eager = {n for n in events if up.expected[n] == "eager"}
    assert moved_without_need(events, g.stops, eager), "no eager member revoked and got back"
