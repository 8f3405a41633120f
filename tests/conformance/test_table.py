"""The conformance table (engine.table / write_table) from made-up results: no brokers."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from .engine import (
    COLUMNS,
    END,
    KNOWN_DIFFERENCES,
    START,
    Conformance,
    Result,
    compare,
    differing_rules,
    write_table,
)
from .scenarios import SCENARIOS


def _fake(results: dict[str, dict[str, Result]]) -> Conformance:
    conformance = Conformance(config=None)  # type: ignore[arg-type]
    for kind, by_name in results.items():
        futures: dict[str, Future[Result]] = {}
        for name in SCENARIOS:
            fut: Future[Result] = Future()
            fut.set_result(by_name.get(name, Result(not_run="not part of the fake")))
            futures[name] = fut
        conformance.futures[kind] = futures
        conformance.started[kind] = 0.0
    return conformance


def test_cells_say_same_differs_why_and_not_applicable(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = SCENARIOS["heartbeat_states"]
    ref = Result(outcome={"CompletingRebalance": 27})
    same = Result(outcome={"CompletingRebalance": 27})
    newer = Result(outcome={"CompletingRebalance": 0}, rules={"heartbeat-completing"})
    stray = Result(outcome={"CompletingRebalance": 0}, rules={"initial-delay"})
    assert compare(spec, "embedded-kafka2", same, ref).render() == "same"
    assert compare(spec, "embedded-kafka4", newer, ref).render() == (
        "differs (heartbeat-completing)"
    )
    # A rule the flavour shares with 2.3 (3.x kept 2.3's initial delay) explains nothing.
    assert "initial-delay" not in differing_rules("kafka3")
    assert "unexplained: CompletingRebalance" in compare(spec, "embedded-kafka3", stray, ref).why
    # Against its own live version no rule explains a difference; only a known one does.
    assert "unexplained" in compare(spec, "embedded-kafka4", newer, ref, "kafka4").why
    monkeypatch.setitem(
        KNOWN_DIFFERENCES, ("kafka4", spec.name), (("CompletingRebalance",), "out of reach")
    )
    assert compare(spec, "embedded-kafka4", newer, ref, "kafka4").render() == (
        "differs (known: out of reach)"
    )
    # A live version against 2.3: the rules its flavour recorded explain it.
    live = Result(outcome={"CompletingRebalance": 0})
    assert compare(spec, "kafka4", live, ref, rules={"heartbeat-completing"}).render() == (
        "differs (heartbeat-completing)"
    )
    na = Result(not_applicable="Tansu: no protocol vote")
    assert compare(spec, "tansu", na, ref).render() == "not applicable (Tansu: no protocol vote)"
    gone = Result(not_run="Apache Kafka needs Docker: no engine (DockerException: ...)")
    assert compare(spec, "kafka", gone, ref, "kafka4").render() == (
        "not run (Apache Kafka needs Docker: no engine)"
    )
    assert compare(spec, "kafka4", live, None, rules=set()).render() == (
        "not compared (no Kafka 2.3.0 outcome)"
    )


def test_write_table_replaces_only_between_the_markers(tmp_path: Path) -> None:
    name = "heartbeat_states"
    results: dict[str, Any] = {
        "kafka23": {name: Result(outcome={"x": 27}, ended=3.0)},
        "kafka4": {name: Result(outcome={"x": 0}, ended=4.0)},
        "embedded-kafka2": {name: Result(outcome={"x": 27}, ended=1.0)},
        "embedded-kafka4": {
            name: Result(outcome={"x": 0}, rules={"heartbeat-completing"}, ended=2.0)
        },
    }
    page = tmp_path / "conformance.md"
    page.write_text(f"intro\n{START}\nold table\n{END}\noutro\n")
    write_table(_fake(results), page)
    text = page.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old table" not in text
    row = next(line for line in text.splitlines() if line.startswith(f"| `{name}`"))
    cells = dict(zip(COLUMNS, (c.strip() for c in row.split("|")[2:-1]), strict=True))
    # Each flavour against its live version; the live versions against Kafka 2.3.0, with the
    # rules their flavour recorded.
    assert cells["embedded-kafka4"] == cells["embedded-kafka2"] == "same"
    assert cells["kafka4"] == "differs (heartbeat-completing)"
    assert cells["kafka23"] == "reference"
    assert cells["embedded-kafka3"].startswith("not run")
    assert "`heartbeat-completing`" in text  # the legend
    assert "- embedded kafka4 against Kafka 4.1.1: 1 equal, " in text  # the counts
    assert "Kafka 2.3.0 3 s" in text  # the run time, from the results' end times
