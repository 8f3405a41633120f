"""Every scenario on every broker; the embedded broker held to Apache Kafka 2.3.

* ``test_scenario[broker-name]``: the scenario ran there (its own assertions held), unless it is
  not applicable (with the reason) or the broker cannot run here (skipped with the reason).
* ``test_kafka2_flavour_matches_kafka23[name]``: the embedded broker in the ``kafka2`` flavour
  gives exactly Kafka 2.3's outcome.
* ``test_newer_flavours_differ_only_by_their_rules[flavour-name]``: ``kafka3`` / ``kafka4``
  outcomes differ from Kafka 2.3's only where a rule of theirs that changed since 2.3 was at work
  (``coordinator.RULES``, recorded by the coordinator per group).
* ``test_docker_kafka_matches_its_flavour[name]``: Apache Kafka 3.9 in Docker gives the
  ``kafka3`` flavour's outcome (where a Docker engine runs).
"""

from __future__ import annotations

import pytest

from .engine import KINDS, REFERENCE, Conformance, Result, compare, diff_keys
from .scenarios import SCENARIOS

pytestmark = [pytest.mark.timeout(900), pytest.mark.every_broker]

_MARKS = {
    "kafka23": [pytest.mark.kafka23],
    "tansu": [pytest.mark.tansu],
    "kafka": [pytest.mark.docker],
}


def _params() -> list[object]:
    out: list[object] = []
    for kind in KINDS:
        for name, spec in SCENARIOS.items():
            marks = list(_MARKS.get(kind, []))
            if spec.kind == "peers":
                marks.append(pytest.mark.peers)
            out.append(pytest.param(kind, name, marks=marks, id=f"{kind}-{name}"))
    return out


def _ran(result: Result) -> None:
    if result.not_applicable:
        pytest.skip(f"not applicable: {result.not_applicable}")
    if result.not_run:
        pytest.skip(result.not_run)
    if result.error:
        pytest.fail(f"{result.error}\n{result.detail}", pytrace=False)


@pytest.mark.parametrize(("kind", "name"), _params())
def test_scenario(conformance: Conformance, kind: str, name: str) -> None:
    _ran(conformance.result(kind, name))


def _reference(conformance: Conformance, name: str) -> Result:
    ref = conformance.result(REFERENCE, name)
    if ref.not_applicable or ref.not_run or ref.error:
        pytest.skip(f"no Kafka 2.3 outcome: {ref.not_applicable or ref.not_run or ref.error}")
    return ref


def _names() -> list[object]:
    return [
        pytest.param(n, marks=[pytest.mark.peers] if s.kind == "peers" else [], id=n)
        for n, s in SCENARIOS.items()
    ]


@pytest.mark.kafka23
@pytest.mark.parametrize("name", _names())
def test_kafka2_flavour_matches_kafka23(conformance: Conformance, name: str) -> None:
    ref = _reference(conformance, name)
    got = conformance.result("embedded-kafka2", name)
    _ran(got)
    keys = diff_keys(got.outcome or {}, ref.outcome or {})
    assert got.outcome == ref.outcome, (
        f"embedded kafka2 differs from Kafka 2.3 on {keys}"
        f"\nembedded: {got.outcome}\nKafka 2.3: {ref.outcome}"
    )


@pytest.mark.kafka23
@pytest.mark.parametrize("flavour", ["kafka3", "kafka4"])
@pytest.mark.parametrize("name", _names())
def test_newer_flavours_differ_only_by_their_rules(
    conformance: Conformance, flavour: str, name: str
) -> None:
    ref = _reference(conformance, name)
    kind = f"embedded-{flavour}"
    got = conformance.result(kind, name)
    _ran(got)
    cell = compare(SCENARIOS[name], kind, got, ref)
    assert "unexplained" not in cell.why, (
        f"{kind} differs from Kafka 2.3 with no rule of its own at work: {cell.why}"
        f"\nembedded: {got.outcome}\nKafka 2.3: {ref.outcome}"
    )


@pytest.mark.docker
@pytest.mark.parametrize("name", _names())
def test_docker_kafka_matches_its_flavour(conformance: Conformance, name: str) -> None:
    got = conformance.result("kafka", name)
    _ran(got)
    ref = conformance.result("embedded-kafka3", name)
    _ran(ref)
    keys = diff_keys(got.outcome or {}, ref.outcome or {})
    assert got.outcome == ref.outcome, f"Kafka in Docker differs from embedded kafka3 on {keys}"
