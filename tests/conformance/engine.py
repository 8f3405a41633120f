"""The conformance run: every scenario on every broker, outcomes compared with Kafka 2.3's.

Brokers (``KINDS``): the embedded broker in each coordinator flavour (``embedded-kafka2``
follows Kafka 2.3's rules and must give exactly its outcomes; ``embedded-kafka3`` and
``embedded-kafka4`` may differ only where their own rules do), Tansu, Apache Kafka 2.3 (the
reference: ``aiogroup.testing.launchers.kafka``, the session's broker) and Apache Kafka in Docker.

A broker kind's run starts at its first test and runs all its scenarios concurrently (raw ones
and real-client ones in separate pools); a scenario needing the ``limits`` profile gets a
second broker of that kind with those settings (for Kafka 2.3 a private one, stopped after the
run). :func:`write_table` turns the results into docs/conformance.md's table.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from aiogroup.testing import wire
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.rules import RULES, CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import BrokerHandle, session_kafka, start_broker
from aiogroup.testing.launchers.kafka import KafkaBroker

from .scenarios import SCENARIOS, Env, Outcome, Spec

#: Columns of the table, in order; the reference first.
KINDS = ("kafka23", "embedded-kafka2", "embedded-kafka3", "embedded-kafka4", "tansu", "kafka")
REFERENCE = "kafka23"
LABELS = {
    "kafka23": "Kafka 2.3",
    "embedded-kafka2": "embedded kafka2",
    "embedded-kafka3": "embedded kafka3",
    "embedded-kafka4": "embedded kafka4",
    "tansu": "Tansu",
    "kafka": "Kafka via Docker",
}
#: The flavour each broker kind is held to (Docker runs apache/kafka:4.1.1, see fixtures).
FLAVOUR_OF = {
    "embedded-kafka2": "kafka2",
    "embedded-kafka3": "kafka3",
    "embedded-kafka4": "kafka4",
    "kafka23": "kafka2",
    "kafka": "kafka4",
}

#: The ``limits`` profile: settings some scenarios need (see ``scenarios.Spec``).
LIMITS_KAFKA = {
    "group.max.size": "2",
    "group.initial.rebalance.delay.ms": "2000",
    "connections.max.idle.ms": "8000",
}


def embedded_config(flavour: str, profile: str) -> dict[str, Any]:
    limits = profile == "limits"
    config = CoordinatorConfig(
        flavour=flavour,
        initial_rebalance_delay_ms=2000 if limits else 0,
        group_min_session_timeout_ms=1000,
        group_max_size=2 if limits else None,
    )
    return {
        "coordinator_config": config,
        "connections_max_idle_ms": 8000 if limits else 600_000,
    }


@dataclass
class Result:
    """One scenario on one broker: an outcome, or why there is none."""

    outcome: Outcome | None = None
    error: str | None = None
    not_applicable: str | None = None
    not_run: str | None = None
    rules: set[str] = field(default_factory=set)
    seconds: float = 0.0
    ended: float = 0.0
    detail: str = ""


def not_applicable(spec: Spec, kind: str) -> str | None:
    """Why ``spec`` cannot run on ``kind`` (None: it can)."""
    if kind == "tansu" and spec.tansu:
        return f"Tansu: {spec.tansu}"
    if kind == "tansu" and spec.profile == "limits":
        return "Tansu has none of these settings"
    flavour = FLAVOUR_OF.get(kind)
    for api, version in spec.min_versions.items():
        key = wire.API_KEYS_BY_NAME[api]
        if flavour == "kafka2" and wire.KAFKA_23_VERSIONS[key][1] < version:
            return f"{api} v{version} is newer than Kafka 2.3"
    return None


def _rule_hits(coordinator: GroupCoordinator) -> dict[str, set[str]]:
    """A copy of ``coordinator``'s rule hits, taken on the broker's thread."""
    return {g: set(h) for g, h in coordinator.rule_hits.items()}


class _Brokers:
    """The brokers of one kind's run, by profile, started on demand and stopped at the end."""

    def __init__(self, kind: str, config: pytest.Config) -> None:
        self.kind = kind
        self.config = config
        self.handles: dict[str, BrokerHandle] = {}
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()

    def get(self, profile: str) -> BrokerHandle:
        with self._lock:
            if profile not in self.handles:
                self.handles[profile] = self._start(profile)
            return self.handles[profile]

    def _start(self, profile: str) -> BrokerHandle:
        kind = self.kind
        if kind.startswith("embedded-"):
            threaded = self._stack.enter_context(
                ThreadedBroker(**embedded_config(FLAVOUR_OF[kind], profile))
            )
            return BrokerHandle(kind, threaded.bootstrap, threaded)
        if kind == "kafka23":
            if profile == "default":
                kafka = session_kafka(self.config)
            else:
                # Ready means its coordinator has loaded its offsets (KafkaBroker's own wait).
                kafka = self._stack.enter_context(KafkaBroker(config=LIMITS_KAFKA))
            return BrokerHandle("kafka23", kafka.bootstrap, apache=kafka)
        if profile != "default":
            raise _NotRun(f"{LABELS[kind]} is not started with the limits settings here")
        return self._stack.enter_context(start_broker(kind))

    def rule_hits(self, groups: list[str]) -> set[str]:
        hits: set[str] = set()
        for handle in list(self.handles.values()):
            if handle.embedded is None:
                continue
            snapshot = handle.embedded.call(
                functools.partial(_rule_hits, handle.embedded.broker.coordinator)
            )
            for g in groups:
                hits |= snapshot.get(g, set())
        return hits

    def close(self) -> None:
        self._stack.close()


class _NotRun(Exception):
    """The broker cannot run here (the reason is the message)."""


class Conformance:
    """Results of every scenario on every broker kind, run lazily per kind."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        #: The scenarios each kind must run (the selected tests need them); None: all.
        self.selected: dict[str, set[str]] | None = None
        self.futures: dict[str, dict[str, Future[Result]]] = {}
        self.started: dict[str, float] = {}
        self._lock = threading.Lock()
        # One broker kind runs at a time: their real-client peers compete for the CPU, and a
        # starved kafka-python peer can stall past its waits.
        self._one_at_a_time = threading.Lock()

    def start(self, kind: str) -> dict[str, Future[Result]]:
        with self._lock:
            if kind not in self.futures:
                self.futures[kind] = {name: Future() for name in SCENARIOS}
                threading.Thread(
                    target=self._run, args=(kind,), name=f"conformance-{kind}", daemon=True
                ).start()
            return self.futures[kind]

    def result(self, kind: str, name: str, timeout: float = 900) -> Result:
        return self.start(kind)[name].result(timeout)

    def done(self, kind: str) -> dict[str, Result]:
        """Every result of a kind that ran (empty if it never started)."""
        futures = self.futures.get(kind, {})
        return {n: f.result() for n, f in futures.items() if f.done()}

    def run_seconds(self, kind: str) -> float | None:
        """Wall time of a kind's run: its start to its last scenario's end (None: no run)."""
        ends = [r.ended for r in self.done(kind).values() if r.ended]
        return max(ends) - self.started[kind] if ends and kind in self.started else None

    def _run(self, kind: str) -> None:
        with self._one_at_a_time:
            self._run_alone(kind)

    def _run_alone(self, kind: str) -> None:
        self.started[kind] = time.monotonic()
        futures = self.futures[kind]
        brokers = _Brokers(kind, self.config)
        slow = kind == "tansu"
        raw_pool = ThreadPoolExecutor(8 if slow else 6, thread_name_prefix=f"raw-{kind}")
        peer_pool = ThreadPoolExecutor(6 if slow else 3, thread_name_prefix=f"peers-{kind}")
        try:
            wanted = None if self.selected is None else self.selected.get(kind, set())
            try:
                if wanted == set():
                    raise _NotRun("not selected in this run")
                brokers.get("default")
            except BaseException as exc:  # pytest.skip / pytest.fail from the fixtures too
                reason = _reason(exc)
                for f in futures.values():
                    f.set_result(Result(not_run=reason))
                return
            pending: list[Future[Any]] = []
            exclusive: list[Spec] = []
            for name, spec in SCENARIOS.items():
                if wanted is not None and name not in wanted:
                    futures[name].set_result(Result(not_run="not selected in this run"))
                    continue
                na = not_applicable(spec, kind)
                if na is not None:
                    futures[name].set_result(Result(not_applicable=na))
                    continue
                if spec.exclusive:
                    exclusive.append(spec)
                    continue
                pool = peer_pool if spec.kind == "peers" else raw_pool
                pending.append(pool.submit(self._one, brokers, spec, futures[name], slow))
            for p in pending:
                p.result()
            for spec in exclusive:  # alone, once everything else is done
                self._one(brokers, spec, futures[spec.name], slow)
        finally:
            raw_pool.shutdown(wait=True)
            peer_pool.shutdown(wait=True)
            with contextlib.suppress(Exception):
                brokers.close()
            for f in futures.values():
                if not f.done():
                    f.set_result(Result(error="the run ended without a result"))

    def _one(self, brokers: _Brokers, spec: Spec, future: Future[Result], slow: bool) -> None:
        started = time.monotonic()
        result = Result()
        env: Env | None = None
        try:
            handle = brokers.get(spec.profile)
            env = Env(handle, spec.profile, slow=slow)
            result.outcome = spec.fn(env)
        except _NotRun as exc:
            result.not_run = str(exc)
        except BaseException as exc:  # an assertion, a timeout, a broker that fell over
            result.error = f"{type(exc).__name__}: {exc}"[:500]
            result.detail = traceback.format_exc()[-3000:]
        result.seconds = time.monotonic() - started
        result.ended = time.monotonic()
        if env is not None:
            with contextlib.suppress(Exception):
                result.rules = brokers.rule_hits(env.groups) | set(spec.rules)
        future.set_result(result)


def _reason(exc: BaseException) -> str:
    msg = getattr(exc, "msg", None) or str(exc)
    return str(msg).splitlines()[0][:300] if msg else type(exc).__name__


# --- comparing -------------------------------------------------------------------------------


def differing_rules(flavour: str, reference: str = "kafka2") -> set[str]:
    """The rules on which ``flavour`` and ``reference`` differ."""
    return {
        rid for rid, rule in RULES.items() if rule.by_flavour[flavour] != rule.by_flavour[reference]
    }


def diff_keys(a: Outcome, b: Outcome) -> list[str]:
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k) != b.get(k)]


@dataclass(frozen=True)
class Cell:
    """One table cell: ``status`` is same / differs / reference / n/a / not run / failed."""

    status: str
    why: str = ""

    def render(self) -> str:
        if self.status in ("same", "reference"):
            return self.status
        return f"{self.status} ({self.why})" if self.why else self.status


def compare(spec: Spec, kind: str, result: Result, reference: Result | None) -> Cell:
    if result.not_applicable:
        return Cell("not applicable", result.not_applicable)
    if result.not_run:
        return Cell("not run", result.not_run.split(" (")[0])
    if result.error:
        return Cell("failed", result.error.splitlines()[0][:120])
    if kind == REFERENCE:
        return Cell("reference")
    if reference is None or reference.outcome is None:
        return Cell("not compared", "no reference outcome")
    if result.outcome == reference.outcome:
        return Cell("same")
    keys = ", ".join(diff_keys(result.outcome or {}, reference.outcome))
    flavour = FLAVOUR_OF.get(kind)
    if kind.startswith("embedded-") and flavour is not None:
        rules = sorted(result.rules & differing_rules(flavour))
        if rules:
            return Cell("differs", ", ".join(rules))
        return Cell("differs", f"unexplained: {keys}")
    if kind == "tansu" and spec.tansu_differs:
        return Cell("differs", f"Tansu: {spec.tansu_differs}")
    return Cell("differs", f"unexplained: {keys}")


def reference_for(conformance: Conformance, name: str, kind: str = "") -> Result | None:
    """What ``kind``'s outcome is compared with: Kafka 2.3's; for a scenario it cannot run,
    embedded kafka4's; for Kafka in Docker (3.9), the embedded flavour of its version."""
    if kind == "kafka":
        return conformance.done(f"embedded-{FLAVOUR_OF['kafka']}").get(name)
    results = conformance.done(REFERENCE)
    ref = results.get(name)
    if ref is not None and ref.not_applicable:
        return conformance.done("embedded-kafka4").get(name)
    return ref


# --- the table ----------------------------------------------------------------------------------

START = "<!-- conformance-table:start -->"
END = "<!-- conformance-table:end -->"


def table(conformance: Conformance) -> str:
    """The Markdown table (scenario x broker) and the rules legend."""
    columns = ["embedded-kafka4", "embedded-kafka3", "embedded-kafka2", "tansu", "kafka23", "kafka"]
    lines = [
        "| scenario | " + " | ".join(LABELS[c] for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    counts: dict[str, dict[str, int]] = {c: {} for c in columns}
    for name, spec in SCENARIOS.items():
        cells = []
        for kind in columns:
            result = conformance.done(kind).get(name)
            cell = (
                Cell("not run", "not part of this run")
                if result is None
                else compare(spec, kind, result, reference_for(conformance, name, kind))
            )
            if kind == REFERENCE and result is not None and result.not_applicable:
                cell = Cell("not applicable", result.not_applicable)
            counts[kind][cell.status] = counts[kind].get(cell.status, 0) + 1
            cells.append(cell.render().replace("|", "\\|"))
        lines.append(f"| `{name}`: {spec.title} | " + " | ".join(cells) + " |")
    summary = ["", "Totals per broker:", ""]
    for kind in columns:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(counts[kind].items()))
        summary.append(f"- {LABELS[kind]}: {parts}")
    legend = ["", "Rules (what each flavour does where Kafka versions differ):", ""]
    legend.append("| rule | kafka2 (2.3) | kafka3 (3.x) | kafka4 (4.x) | source |")
    legend.append("|---|---|---|---|---|")
    for rid, rule in RULES.items():
        row = [rule.by_flavour[f] for f in ("kafka2", "kafka3", "kafka4")]
        legend.append(f"| `{rid}`: {rule.title} | " + " | ".join(row) + f" | {rule.source} |")
    seconds = ", ".join(
        f"{LABELS[k]} {conformance.run_seconds(k):.0f} s"
        for k in KINDS
        if conformance.run_seconds(k) is not None
    )
    stamp = [
        "",
        f"Generated by `pytest tests/conformance --conformance-table` ({len(SCENARIOS)} scenarios; "
        f"run times: {seconds}).",
    ]
    return "\n".join(lines + summary + legend + stamp)


def write_outcomes(conformance: Conformance, path: Path) -> None:
    """Every result as JSON: {broker: {scenario: outcome or {"error"|...: why}}}."""
    data: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        for name, r in conformance.done(kind).items():
            entry: Any = r.outcome
            if entry is None:
                entry = {"error": r.error, "not applicable": r.not_applicable, "not run": r.not_run}
            data.setdefault(kind, {})[name] = {"outcome": entry, "rules": sorted(r.rules)}
    path.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")


def write_table(conformance: Conformance, path: Path) -> None:
    """Replace the table between the markers in ``path`` (or write the file)."""
    generated = f"{START}\n{table(conformance)}\n{END}"
    if path.exists():
        text = path.read_text()
        if START in text and END in text:
            head, rest = text.split(START, 1)
            _, tail = rest.split(END, 1)
            path.write_text(head + generated + tail)
            return
    path.write_text(generated + "\n")
