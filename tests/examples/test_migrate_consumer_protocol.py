"""examples/migrate_consumer_protocol.py: the whole migration on Apache Kafka 4.1.1 (three member
processes moved to the consumer protocol and back, records flowing), its command line, and its
pieces without a broker. The tests judge the run from what it recorded, not from its own verdict
alone: the group's type per step from Kafka's rules, and KIP-429's and KIP-848's "revoke only
what moves" from the members' callbacks."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.migration import MigrationStatus, Stage, Upgrade
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import BrokerHandle
from examples import migrate_consumer_protocol as example
from examples.rolling_upgrade import CallbackRecord, Screen

pytestmark = pytest.mark.timeout(300)

SCRIPT = Path(example.__file__)
KAFKA4 = [pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4)]


def _fast_group(handle: BrokerHandle, group: str) -> None:
    kafka = handle.apache
    assert kafka is not None
    kafka.run_tool(
        "kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter",
        "--entity-type", "groups", "--entity-name", group, "--add-config",
        "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=300",
    )  # fmt: skip


@pytest.mark.parametrize("kafka_broker", KAFKA4, indirect=True)
def test_three_members_move_to_the_consumer_protocol_and_back(
    kafka_broker: BrokerHandle,
) -> None:
    group, topic = f"migrate-{uuid.uuid4().hex[:8]}", f"orders-{uuid.uuid4().hex[:8]}"
    assert kafka_broker.apache is not None
    kafka_broker.apache.create_topic(topic, 6)
    _fast_group(kafka_broker, group)
    out = io.StringIO()
    report = asyncio.run(example.migrate(
        kafka_broker.bootstrap, group_id=group, topic=topic, partitions=6, members=3,
        produce_rate=40, session_ms={"consumer": 6000}, out=out,
    ))  # fmt: skip
    text = out.getvalue()
    assert report.ok, "\n".join(report.all_problems) + "\n" + text[-3000:]
    steps = report.steps
    assert len(steps) == 1 + 2 * 2 * 3  # the start, then a stop and a start per member and way
    # The group's type after every step, from Kafka's rules and the protocols then running.
    protocols = {f"member-{i}": "classic" for i in (1, 2, 3)}
    group_type = "classic"
    for step in steps[1:]:
        assert step.member is not None
        if step.label.endswith("stopped"):
            del protocols[step.member]
        else:
            protocols[step.member] = step.label.rsplit(" ", 1)[-1]
        group_type = example.expected_group_type(list(protocols.values()), group_type)
        consumers = list(protocols.values()).count("consumer")
        assert (step.group_type, step.consumer_members, step.classic_members) == (
            group_type, consumers if group_type == "consumer" else 0,
            len(protocols) - consumers), step.label  # fmt: skip
    assert [s.stage for s in steps].count(Stage.MIXED) == 6
    # Revoke only what moves: nobody else gives anything up when a member leaves, and exactly
    # what the returning member is given when it comes back (cooperative-sticky and uniform).
    records = report.ledger.records
    for step in steps[1:]:
        assert step.member is not None
        moved = 0 if step.label.endswith("stopped") else len(step.owned[step.member])
        assert example.revoked_by_others(records, step) == moved, step.label
    assert not [r for r in records if r.kind == "lost"]
    assert sum(report.produced.values()) > 0 and not report.unprocessed()
    assert "converted: classic group -> consumer group" in text
    assert "converted: consumer group -> classic group" in text
    assert "every check held" in text


@pytest.mark.parametrize("kafka_broker", KAFKA4, indirect=True)
def test_the_command_line_moves_a_group_up(kafka_broker: BrokerHandle) -> None:
    group, topic = f"migrate-{uuid.uuid4().hex[:8]}", f"orders-{uuid.uuid4().hex[:8]}"
    _fast_group(kafka_broker, group)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--bootstrap", kafka_broker.bootstrap, "--group", group,
         "--topic", f"{topic}:4", "--members", "2", "--direction", "up", "--produce", "20",
         "--consumer-session-ms", "6000", "--no-color"],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "migration of group " + group + ": classic -> consumer" in run.stdout
    assert "consumer group, 1 of 2 members on the consumer protocol, 1 classic" in run.stdout
    assert "consumer group, every member on the consumer protocol (2 of 2)" in run.stdout
    assert "0 never processed" in run.stdout


def test_bad_arguments_exit_2() -> None:
    for args in ([], ["--bootstrap", "x:1", "--members", "1"], ["--direction", "sideways"]):
        run = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                             text=True, timeout=60)  # fmt: skip
        assert run.returncode == 2, (args, run.stderr)


def test_the_group_type_follows_kafkas_rules() -> None:
    assert example.expected_group_type(["classic", "consumer"], "classic") == "consumer"
    assert example.expected_group_type(["classic", "classic"], "consumer") == "classic"
    assert example.expected_group_type([], "consumer") == "consumer"  # empty: unchanged


def _record(at: float, member: str, kind: str, *partitions: int) -> CallbackRecord:
    return CallbackRecord(at, member, 1, 1, RebalanceProtocol.COOPERATIVE, kind,
                          frozenset(TopicPartition("t", p) for p in partitions))  # fmt: skip


def test_unowned_time_and_revocations_are_counted_within_a_step() -> None:
    records = [
        _record(0.0, "a", "assigned", 0, 1),
        _record(10.0, "a", "revoked", 1),  # t-1 unowned from 10 ...
        _record(12.5, "b", "assigned", 1),  # ... to 12.5
        _record(20.0, "a", "lost", 0),  # t-0 unowned from 20 on
    ]
    step = example.StepRecord("x", "b", "consumer", Stage.MIXED, 1, 1, 3, 9.0, 5.0)
    assert example.unowned_seconds(records, step.began, step.ended) == pytest.approx(2.5)
    assert example.unowned_seconds(records, 19.0, 25.0) == pytest.approx(5.0)
    assert example.revoked_by_others(records, step) == 1  # a's, not b's own
    assert example.revoked_by_others(records, example.StepRecord(
        "y", "a", "consumer", Stage.MIXED, 1, 1, 3, 9.0, 5.0)) == 0  # fmt: skip


def test_a_group_kafka_would_not_convert_stops_the_run_before_anyone_moves() -> None:
    blocked = MigrationStatus("classic", Stage.CLASSIC, (), ("a", "b"), (), Upgrade.BLOCKED,
                              ("2 member(s) hold an assignment carrying a custom assignor's "
                               "user data",), "s", "a")
    run = example._Run("x:1", "g", "t", 6, example.MigrationReport("g", ("up",)),
                       Screen(io.StringIO(), False, []), None, 1.0, {}, 300, None,  # type: ignore[arg-type]
                       status=blocked)  # fmt: skip
    with pytest.raises(example.MigrationAborted, match="custom assignor's user data"):
        example._check_upgrade(run, "classic")
    example._check_upgrade(run, "consumer")  # the way down has nothing to check
