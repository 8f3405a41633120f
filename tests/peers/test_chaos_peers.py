"""Short chaos runs with the Java and franz-go peers in the mix (member kinds ``java`` and
``franz-go`` of :mod:`aiogroup.tools.chaos.member`), judged by the chaos checker unchanged.

Replay one: ``python -m aiogroup.tools.chaos --broker kafka23 --seed 49 --members 3 --duration 6
--kinds aiogroup,aiogroup-consumer,java,franz-go --keep``.
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
from aiogroup.tools.chaos.runner import ChaosConfig, make_plan, run_once

if TYPE_CHECKING:
    from aiogroup.testing.launchers.kafka import KafkaBroker
    from aiogroup.tools.chaos.brokers import ChaosBroker

pytest.importorskip("confluent_kafka")
pytest.importorskip("kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(300)]

KINDS = ("aiogroup", "aiogroup-consumer", "java", "franz-go")
#: java, franz-go, aiogroup at the start; a SIGKILL, then a java and a franz-go member join.
KAFKA23_SEED = 49
#: java, aiogroup, franz-go; a java member joins, a pause past the session, a connection cut.
EMBEDDED_SEED = 4


def _run(broker: ChaosBroker, seed: int, out: Path, *, clean: bool) -> None:
    config = ChaosConfig(
        broker=broker.kind, seed=seed, out=out, members=3, duration=6.0, kinds=KINDS
    )
    verdict = run_once(config, broker)
    lines = "\n".join(
        f"{v.kind} {v.partition or ''} [{v.blame}]: {v.detail}" for v in verdict.violations
    )
    report = f"seed {seed} on {broker.kind}: {verdict.summary()}\n{lines}"
    assert not verdict.against("aiogroup"), report
    # Our peer programs never crash and always report their callbacks coherently.
    assert not verdict.of("crash"), report
    assert not verdict.of("callback_order"), report
    if clean:  # no pause and no cut: nobody has an excuse
        assert not verdict.violations, report
    assert {"java", "franz-go", "aiogroup"} <= set(verdict.members), verdict.members
    assert verdict.processed.get("java", 0) > 0 and verdict.processed.get("franz-go", 0) > 0, (
        verdict.processed
    )
    assert verdict.converged or verdict.waiting, report


@pytest.mark.kafka4
def test_short_run_with_java_and_franz_go_on_kafka4(
    apache_kafka4: KafkaBroker,  # noqa: F811
    java_peer: list[str],
    franz_go_peer: list[str],
    tmp_path: Path,
) -> None:
    _run(ApacheKafkaChaosBroker(shared=apache_kafka4), KAFKA23_SEED, tmp_path, clean=True)


@pytest.mark.kafka23
def test_short_run_with_java_and_franz_go_on_kafka23(
    apache_kafka: KafkaBroker,  # noqa: F811
    java_peer: list[str],
    franz_go_peer: list[str],
    tmp_path: Path,
) -> None:
    _run(ApacheKafkaChaosBroker(shared=apache_kafka), KAFKA23_SEED, tmp_path, clean=True)


def test_short_run_with_java_and_franz_go_on_the_embedded_broker(
    java_peer: list[str], franz_go_peer: list[str], tmp_path: Path
) -> None:
    broker = start_broker("embedded")
    try:
        _run(broker, EMBEDDED_SEED, tmp_path, clean=False)
    finally:
        broker.stop()


def test_the_peer_plans_are_what_the_seeds_promise() -> None:
    out = Path("unused")
    plan = make_plan(
        ChaosConfig("kafka23", KAFKA23_SEED, out, 3, 6.0, kinds=KINDS),
        can_restart=False,
        can_cut=False,
    )
    assert set(plan.initial) == {"java", "franz-go", "aiogroup"}
    assert [(s.kind, s.new_kind) for s in plan.steps][1:] == [
        ("join", "java"),
        ("join", "franz-go"),
    ]
    assert plan.steps[0].kind == "kill"
    plan = make_plan(ChaosConfig("embedded", EMBEDDED_SEED, out, 3, 6.0, kinds=KINDS))
    assert set(plan.initial) == {"java", "franz-go", "aiogroup"}
    assert [s.kind for s in plan.steps] == ["join", "stop", "cut"]
    assert plan.steps[0].new_kind == "java"
