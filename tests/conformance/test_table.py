"""The conformance table (engine.table / write_table) from made-up results: no brokers."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Any

from .engine import END, START, Conformance, Result, compare, differing_rules, write_table
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


def test_cells_say_same_differs_why_and_not_applicable() -> None:
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
    na = Result(not_applicable="Tansu: no protocol vote")
    assert compare(spec, "tansu", na, ref).render() == "not applicable (Tansu: no protocol vote)"
    gone = Result(not_run="Apache Kafka needs Docker: no engine (DockerException: ...)")
    assert compare(spec, "kafka", gone, ref).render() == (
        "not run (Apache Kafka needs Docker: no engine)"
    )


def test_write_table_replaces_only_between_the_markers(tmp_path: Path) -> None:
    name = "heartbeat_states"
    results: dict[str, Any] = {
        "kafka23": {name: Result(outcome={"x": 27}, ended=3.0)},
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
    cells = [c.strip() for c in row.split("|")[2:-1]]
    # Columns: embedded kafka4, kafka3, kafka2, Tansu, Kafka 2.3, Docker.
    assert cells[0] == "differs (heartbeat-completing)"
    assert cells[2] == "same" and cells[4] == "reference"
    assert cells[1].startswith("not run")
    assert "`heartbeat-completing`" in text  # the legend
    assert "Kafka 2.3 3 s" in text  # the run time, from the results' end times
