"""The chaos suite's short variant: a few seeded runs, real member processes of every client,
judged by the checker; nothing may be counted against aiogroup.

The seeds are fixed so a failure replays: ``python -m aiogroup.tools.chaos --broker embedded
--seed 12 --members 3 --duration 6 --keep``. On the session's shared Kafka 2.3 the runner
neither restarts the broker nor cuts connections (there is no proxy in front of it); the long
run (docs/chaos.md) does both on a broker of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aiogroup.testing.fixtures import (  # noqa: F401 - the session fixtures, by name
    apache_kafka,
    apache_kafka4,
)
from aiogroup.tools.chaos.brokers import ApacheKafkaChaosBroker, start_broker
from aiogroup.tools.chaos.member import CONSUMER_PROTOCOL_DEFAULT_KINDS
from aiogroup.tools.chaos.runner import ChaosConfig, make_plan, run_once

if TYPE_CHECKING:
    from aiogroup.testing.launchers.kafka import KafkaBroker
    from aiogroup.tools.chaos.brokers import ChaosBroker

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

#: Seeds whose plans mix the three clients and the events that matter most here.
EMBEDDED_SEEDS = (
    12,  # librdkafka x2 + Consumer: a broker restart, a pause while the Consumer rejoins
    7,  # Consumer, kafka-python, GroupMember: a pause, SIGKILL, a pause while rejoining
)
KAFKA23_SEED = 4  # librdkafka, GroupMember, kafka-python: join, SIGKILL, pause while rejoining
#: KIP-848 (``--group-protocol consumer``): a Consumer, librdkafka and Java. On Kafka 4.1.1 the
#: Consumer paused past the session (fenced, lost, rejoined), then joins (a SIGKILL with too few
#: members left); on the embedded broker (restarts and cuts drawn too: another plan) a
#: Consumer paused past the session while it reconciles a joiner's arrival, the joiner paused
#: past the session, a join.
CONSUMER_SEED = 359


def _config(broker: str, seed: int, out: Path, group_protocol: str = "classic") -> ChaosConfig:
    config = ChaosConfig(broker, seed, out, members=3, duration=6.0, group_protocol=group_protocol)
    if group_protocol == "consumer":
        config.kinds = CONSUMER_PROTOCOL_DEFAULT_KINDS
    return config


def _run(broker: ChaosBroker, seed: int, out: Path, group_protocol: str = "classic") -> None:
    config = _config(broker.kind, seed, out, group_protocol)
    verdict = run_once(config, broker)
    against = [f"{v.kind} {v.partition or ''}: {v.detail}" for v in verdict.against("aiogroup")]
    assert not against, f"seed {seed} on {broker.kind}: {verdict.summary()}\n" + "\n".join(against)
    assert verdict.members.get("aiogroup", 0) >= 1
    assert sum(verdict.events.values()) >= 1, verdict.summary()
    assert verdict.converged or verdict.waiting, verdict.summary()
    if group_protocol == "consumer":  # every client given partitions by the broker used them
        assert set(verdict.processed) == set(verdict.members), verdict.summary()


@pytest.mark.parametrize("seed", EMBEDDED_SEEDS)
def test_short_run_on_the_embedded_broker(seed: int, tmp_path: Path) -> None:
    broker = start_broker("embedded")
    try:
        _run(broker, seed, tmp_path)
    finally:
        broker.stop()


@pytest.mark.kafka23
def test_short_run_on_kafka23(apache_kafka: KafkaBroker, tmp_path: Path) -> None:  # noqa: F811
    _run(ApacheKafkaChaosBroker(shared=apache_kafka), KAFKA23_SEED, tmp_path)


@pytest.mark.kafka4
def test_short_run_on_kafka4(apache_kafka4: KafkaBroker, tmp_path: Path) -> None:  # noqa: F811
    _run(ApacheKafkaChaosBroker(shared=apache_kafka4), KAFKA23_SEED, tmp_path)


@pytest.mark.kafka4
@pytest.mark.peers
def test_short_consumer_protocol_run_on_kafka4(
    apache_kafka4: KafkaBroker,  # noqa: F811
    java_peer: list[str],
    tmp_path: Path,
) -> None:
    """The KIP-848 run (``--group-protocol consumer``): the same judgement."""
    _run(ApacheKafkaChaosBroker(shared=apache_kafka4), CONSUMER_SEED, tmp_path, "consumer")


@pytest.mark.peers
def test_short_consumer_protocol_run_on_the_embedded_broker(
    java_peer: list[str], tmp_path: Path
) -> None:
    """The KIP-848 run on the embedded broker's ``kafka4`` flavour: the same judgement."""
    broker = start_broker("embedded")
    try:
        _run(broker, CONSUMER_SEED, tmp_path, "consumer")
    finally:
        broker.stop()


def test_the_plans_are_what_the_seeds_promise() -> None:
    """The seeds above keep their meaning (a plan follows from its seed alone)."""
    out = Path("unused")
    kinds = [
        [s.kind for s in make_plan(ChaosConfig("embedded", seed, out, 3, 6.0)).steps]
        for seed in EMBEDDED_SEEDS
    ]
    assert kinds == [["restart", "stop_rejoining"], ["stop", "kill", "stop_rejoining"]]
    plan = make_plan(
        ChaosConfig("kafka23", KAFKA23_SEED, out, 3, 6.0), can_restart=False, can_cut=False
    )
    assert [s.kind for s in plan.steps] == ["join", "kill", "stop_rejoining"]
    assert set(plan.initial) == {"librdkafka", "aiogroup", "kafka-python"}
    consumer = make_plan(
        _config("kafka4", CONSUMER_SEED, out, "consumer"), can_restart=False, can_cut=False
    )
    assert consumer.initial == ("aiogroup-consumer", "java", "librdkafka")
    assert [s.kind for s in consumer.steps] == ["stop", "kill", "stop_rejoining", "join"]
    assert consumer.steps[0].pick < 1 / 3  # the first member: the Consumer is paused
    embedded = make_plan(_config("embedded", CONSUMER_SEED, out, "consumer"))
    assert embedded.initial == ("aiogroup-consumer", "java", "librdkafka")
    assert [s.kind for s in embedded.steps] == ["stop_rejoining", "stop", "stop_rejoining", "join"]
