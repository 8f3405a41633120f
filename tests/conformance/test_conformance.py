"""Every scenario on every broker; each embedded flavour held to the live Kafka of its generation.

* ``test_scenario[broker-name]``: the scenario ran there (its own assertions held), unless it is
  not applicable (with the reason) or the broker cannot run here (skipped with the reason).
* ``test_kafka4_flavour_matches_kafka4[name]``, ``test_kafka3_flavour_matches_kafka39[name]``,
  ``test_kafka2_flavour_matches_kafka23[name]``: the embedded broker in that flavour gives
  exactly the outcome of live Apache Kafka 4.1.1 / 3.9.1 / 2.3.0. A difference out of reach is
  listed, with its reason, in ``engine.KNOWN_DIFFERENCES`` (the other keys of that outcome must
  still be equal, and an entry whose difference is gone fails); ``kafka2`` has none.
* ``test_newer_flavours_differ_only_by_their_rules[flavour-name]``: ``kafka3`` / ``kafka4``
  outcomes differ from Kafka 2.3's only where a rule of theirs that changed since 2.3 was at work
  (``rules.RULES``, recorded by the coordinator per group).
* ``test_docker_kafka_matches_its_flavour[name]``: Apache Kafka 4.1.1 in Docker gives the
  ``kafka4`` flavour's outcome (where a Docker engine runs).
"""

from __future__ import annotations

import pytest

from .engine import (
    FLAVOUR_OF,
    KINDS,
    KNOWN_DIFFERENCES,
    LABELS,
    LIVE,
    LIVE_OF,
    REFERENCE,
    Conformance,
    Result,
    compare,
    diff_keys,
)
from .scenarios import SCENARIOS

pytestmark = [pytest.mark.timeout(900), pytest.mark.every_broker]

_MARKS = {
    "kafka23": [pytest.mark.kafka23],
    "kafka39": [pytest.mark.kafka39],
    "kafka4": [pytest.mark.kafka4],
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


def _reference(conformance: Conformance, name: str, kind: str = REFERENCE) -> Result:
    ref = conformance.result(kind, name)
    if ref.error:  # the live broker's run failed: nothing is held to it, and that must show
        pytest.fail(f"no {LABELS[kind]} outcome: {ref.error}\n{ref.detail}", pytrace=False)
    if ref.not_applicable or ref.not_run:
        pytest.skip(f"no {LABELS[kind]} outcome: {ref.not_applicable or ref.not_run}")
    return ref


def _names() -> list[object]:
    return [
        pytest.param(n, marks=[pytest.mark.peers] if s.kind == "peers" else [], id=n)
        for n, s in SCENARIOS.items()
    ]


def _flavour_matches(
    conformance: Conformance, flavour: str, name: str, live: str | None = None
) -> None:
    """The embedded ``flavour`` gives the outcome of ``live`` (default: its own live Kafka) on
    ``name``, save a known difference (``KNOWN_DIFFERENCES``: only in its keys, and only while
    it is there)."""
    live = live or LIVE_OF[flavour]
    ref = _reference(conformance, name, live)
    got = conformance.result(f"embedded-{flavour}", name)
    _ran(got)
    keys = diff_keys(got.outcome or {}, ref.outcome or {})
    known = KNOWN_DIFFERENCES.get((flavour, name))
    detail = f"\nembedded {flavour}: {got.outcome}\n{LABELS[live]}: {ref.outcome}"
    if known is None:
        assert not keys, f"embedded {flavour} differs from {LABELS[live]} on {keys}{detail}"
        return
    allowed, why = known
    assert keys, f"KNOWN_DIFFERENCES[{flavour!r}, {name!r}] is gone: remove it{detail}"
    stray = sorted(set(keys) - set(allowed))
    assert not stray, f"embedded {flavour} differs from {LABELS[live]} on {stray} too{detail}"
    pytest.xfail(f"known difference from {LABELS[live]} in {', '.join(keys)}: {why}")


@pytest.mark.kafka4
@pytest.mark.parametrize("name", _names())
def test_kafka4_flavour_matches_kafka4(conformance: Conformance, name: str) -> None:
    _flavour_matches(conformance, "kafka4", name)


@pytest.mark.kafka39
@pytest.mark.parametrize("name", _names())
def test_kafka3_flavour_matches_kafka39(conformance: Conformance, name: str) -> None:
    _flavour_matches(conformance, "kafka3", name)


@pytest.mark.kafka23
@pytest.mark.parametrize("name", _names())
def test_kafka2_flavour_matches_kafka23(conformance: Conformance, name: str) -> None:
    assert not [key for key in KNOWN_DIFFERENCES if key[0] == "kafka2"]
    _flavour_matches(conformance, "kafka2", name)


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
    _flavour_matches(conformance, FLAVOUR_OF["kafka"], name, live="kafka")


def test_the_live_kinds_are_the_launcher_versions() -> None:
    assert LIVE == {"kafka23": "2.3.0", "kafka39": "3.9.1", "kafka4": "4.1.1"}
    assert {FLAVOUR_OF[k] for k in LIVE} == set(LIVE_OF) == {"kafka2", "kafka3", "kafka4"}
