"""The conformance run: every scenario on every broker, each embedded flavour held to the live
Apache Kafka of its generation.

Brokers (``KINDS``): live Apache Kafka 4.1.1 and 3.9.1 (KRaft) and 2.3.0 (ZooKeeper), run by
``aiogroup.testing.launchers.kafka`` (the session's broker of each version); the embedded
broker in each coordinator flavour (``FLAVOUR_OF``: ``embedded-kafka4`` is held to Kafka 4.1.1,
``embedded-kafka3`` to 3.9.1, ``embedded-kafka2`` to 2.3.0, outcome for outcome, save the
differences listed with their reason in ``KNOWN_DIFFERENCES``); Tansu; Apache Kafka in Docker.

A broker kind's run starts at its first test and runs all its scenarios concurrently (raw ones
and real-client ones in separate pools); a scenario needing the ``limits`` profile gets a
second broker of that kind with those settings (for a live Kafka a private one of the same
version, started beside the first and stopped after the run). :func:`write_table` turns the
results into docs/conformance.md's table.
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
from aiogroup.testing.fixtures import APACHE_KINDS, BrokerHandle, session_kafka, start_broker
from aiogroup.testing.launchers.kafka import KafkaBroker

from .scenarios import SCENARIOS, Env, Outcome, Spec

#: Every broker kind, in the order their runs start (the live versions, then the flavours).
KINDS = (
    "kafka23",
    "kafka39",
    "kafka4",
    "embedded-kafka2",
    "embedded-kafka3",
    "embedded-kafka4",
    "tansu",
    "kafka",
)
#: Kafka 2.3.0: what the newer versions, and Tansu, are compared with.
REFERENCE = "kafka23"
#: The live Apache Kafka kinds and their versions (``aiogroup.testing.fixtures.APACHE_KINDS``).
LIVE: dict[str, str] = dict(APACHE_KINDS)
LABELS = {
    "kafka23": f"Kafka {LIVE['kafka23']}",
    "kafka39": f"Kafka {LIVE['kafka39']}",
    "kafka4": f"Kafka {LIVE['kafka4']}",
    "embedded-kafka2": "embedded kafka2",
    "embedded-kafka3": "embedded kafka3",
    "embedded-kafka4": "embedded kafka4",
    "tansu": "Tansu",
    "kafka": "Kafka via Docker",
}
#: The coordinator flavour of each broker kind: an embedded flavour, or the flavour that
#: models a live version (Docker runs apache/kafka:4.1.1, see fixtures.KAFKA_IMAGE).
FLAVOUR_OF = {
    "embedded-kafka2": "kafka2",
    "embedded-kafka3": "kafka3",
    "embedded-kafka4": "kafka4",
    "kafka23": "kafka2",
    "kafka39": "kafka3",
    "kafka4": "kafka4",
    "kafka": "kafka4",
}
#: The live kind each flavour is held to.
LIVE_OF = {"kafka2": "kafka23", "kafka3": "kafka39", "kafka4": "kafka4"}

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
    if flavour is None:
        return None
    served = wire.versions_for(flavour)
    for api, version in spec.min_versions.items():
        lo, hi = served.get(wire.API_KEYS_BY_NAME[api], (0, -1))
        if not lo <= version <= hi:
            return f"{api} v{version} is newer than {LABELS[LIVE_OF[flavour]]}"
    return None


def _rule_hits(coordinator: GroupCoordinator) -> dict[str, set[str]]:
    """A copy of ``coordinator``'s rule hits, taken on the broker's thread."""
    return {g: set(h) for g, h in coordinator.rule_hits.items()}


class _Brokers:
    """The brokers of one kind's run, by profile, started on demand (each profile once, the
    profiles side by side) and stopped at the end."""

    def __init__(self, kind: str, config: pytest.Config) -> None:
        self.kind = kind
        self.config = config
        self.handles: dict[str, BrokerHandle] = {}
        self._starting: dict[str, Future[BrokerHandle]] = {}
        self._stack = contextlib.ExitStack()
        self._lock = threading.Lock()  # guards _starting and handles
        self._stack_lock = threading.Lock()

    def get(self, profile: str) -> BrokerHandle:
        """The broker of ``profile``, started by the first caller; the others wait for it."""
        with self._lock:
            starting = self._starting.get(profile)
            first = starting is None
            if starting is None:
                starting = self._starting[profile] = Future()
        if first:
            try:
                handle = self._start(profile)
            except BaseException as exc:  # pytest.skip / fail too: every caller sees it
                starting.set_exception(exc)
                raise
            with self._lock:
                self.handles[profile] = handle
            starting.set_result(handle)
        return starting.result()

    def prestart(self, profile: str) -> None:
        """Start ``profile``'s broker in the background (its first scenario waits for it)."""

        def start() -> None:
            with contextlib.suppress(BaseException):  # the scenarios report it
                self.get(profile)

        threading.Thread(target=start, name=f"start-{self.kind}-{profile}", daemon=True).start()

    def _enter(self, cm: contextlib.AbstractContextManager[Any]) -> Any:
        with self._stack_lock:
            return self._stack.enter_context(cm)

    def _start(self, profile: str) -> BrokerHandle:
        kind = self.kind
        if kind.startswith("embedded-"):
            threaded = self._enter(ThreadedBroker(**embedded_config(FLAVOUR_OF[kind], profile)))
            return BrokerHandle(kind, threaded.bootstrap, threaded)
        if kind in LIVE:
            if profile == "default":
                # The session's broker of that version, shared with every other test.
                kafka = session_kafka(self.config, LIVE[kind])
            else:
                # Private to this run. Ready means its coordinator has loaded its offsets
                # (KafkaBroker's own wait); started outside the lock, beside the default one.
                kafka = KafkaBroker(version=LIVE[kind], config=LIMITS_KAFKA).start()
                with self._stack_lock:
                    self._stack.callback(kafka.stop)
            return BrokerHandle(kind, kafka.bootstrap, apache=kafka)
        if profile != "default":
            raise _NotRun(f"{LABELS[kind]} is not started with the limits settings here")
        return self._enter(start_broker(kind))  # type: ignore[no-any-return]

    def rule_hits(self, groups: list[str]) -> set[str]:
        hits: set[str] = set()
        with self._lock:
            handles = list(self.handles.values())
        for handle in handles:
            if handle.embedded is None:
                continue
            snapshot = handle.embedded.call(
                functools.partial(_rule_hits, handle.embedded.broker.coordinator)
            )
            for g in groups:
                hits |= snapshot.get(g, set())
        return hits

    def close(self) -> None:
        """Stop every broker of the run, once those still starting are up (or failed)."""
        with self._lock:
            starting = list(self._starting.values())
        for future in starting:
            with contextlib.suppress(BaseException):
                future.result(timeout=300)
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
        # Scenarios of another profile mostly wait on the broker's timers: a pool of their own,
        # so that they start at once, on a broker started beside the default one.
        profile_pool = ThreadPoolExecutor(6, thread_name_prefix=f"profiles-{kind}")
        try:
            wanted = None if self.selected is None else self.selected.get(kind, set())
            try:
                if wanted == set():
                    raise _NotRun("not selected in this run")
                for profile in sorted(
                    {
                        spec.profile
                        for name, spec in SCENARIOS.items()
                        if (wanted is None or name in wanted) and not not_applicable(spec, kind)
                    }
                    - {"default"}
                ):
                    brokers.prestart(profile)
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
                pool = (
                    peer_pool
                    if spec.kind == "peers"
                    else raw_pool
                    if spec.profile == "default"
                    else profile_pool
                )
                pending.append(pool.submit(self._one, brokers, spec, futures[name], slow))
            for p in pending:
                p.result()
            for spec in exclusive:  # alone, once everything else is done
                self._one(brokers, spec, futures[spec.name], slow)
        finally:
            for pool in (raw_pool, peer_pool, profile_pool):
                pool.shutdown(wait=True)
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


#: The kinds each comparing test of test_conformance.py needs beside its scenario's name.
COMPARED_BY_TEST: dict[str, tuple[str, ...]] = {
    "test_kafka2_flavour_matches_kafka23": ("kafka23", "embedded-kafka2"),
    "test_kafka3_flavour_matches_kafka39": ("kafka39", "embedded-kafka3"),
    "test_kafka4_flavour_matches_kafka4": ("kafka4", "embedded-kafka4"),
    "test_docker_kafka_matches_its_flavour": ("kafka", f"embedded-{FLAVOUR_OF['kafka']}"),
}


def kinds_compared(test: str, params: dict[str, Any]) -> set[str]:
    """The broker kinds whose run the test ``test`` (its function's name) with ``params``
    needs: its own kind, or the two kinds it compares."""
    if "kind" in params:
        return {params["kind"]}
    if "flavour" in params:  # test_newer_flavours_differ_only_by_their_rules
        return {REFERENCE, f"embedded-{params['flavour']}"}
    return set(COMPARED_BY_TEST.get(test, ()))


def _reason(exc: BaseException) -> str:
    msg = getattr(exc, "msg", None) or str(exc)
    return str(msg).splitlines()[0][:300] if msg else type(exc).__name__


# --- comparing -------------------------------------------------------------------------------

#: Where an embedded flavour's outcome differs from its live Kafka's for a reason out of reach:
#: (flavour, scenario) -> (the outcome keys allowed to differ, why). Every other key of that
#: outcome must still be equal; an entry whose difference is gone fails, so the list stays
#: true. ``kafka2`` has none (Kafka 2.3.0 is matched exactly).
KNOWN_DIFFERENCES: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}


def differing_rules(flavour: str, reference: str = "kafka2") -> set[str]:
    """The rules on which ``flavour`` and ``reference`` differ."""
    return {
        rid for rid, rule in RULES.items() if rule.by_flavour[flavour] != rule.by_flavour[reference]
    }


def diff_keys(a: Outcome, b: Outcome) -> list[str]:
    keys = sorted(set(a) | set(b))
    return [k for k in keys if a.get(k) != b.get(k)]


def known_difference(flavour: str, name: str, keys: list[str]) -> str | None:
    """Why ``flavour`` may differ from its live Kafka on ``name`` in ``keys`` (None: it may
    not: no entry, or a key the entry does not allow)."""
    known = KNOWN_DIFFERENCES.get((flavour, name))
    if known is None or not set(keys) <= set(known[0]):
        return None
    return known[1]


@dataclass(frozen=True)
class Cell:
    """One table cell: ``status`` is same / differs / reference / not applicable / not run /
    not compared / failed."""

    status: str
    why: str = ""

    def render(self) -> str:
        if self.status in ("same", "reference"):
            return self.status
        return f"{self.status} ({self.why})" if self.why else self.status


def compare(
    spec: Spec,
    kind: str,
    result: Result,
    reference: Result | None,
    against: str = REFERENCE,
    rules: set[str] | None = None,
) -> Cell:
    """``kind``'s result on ``spec`` against ``reference``, the result of kind ``against``.

    A difference is explained by the rules at work (``rules``, default the result's own
    records) that differ between the two kinds' flavours; between a flavour and its own live
    version only by :data:`KNOWN_DIFFERENCES`; for Tansu by the scenario's ``tansu_differs``.
    Anything else is "unexplained"."""
    if result.not_applicable:
        return Cell("not applicable", result.not_applicable)
    if result.not_run:
        return Cell("not run", result.not_run.split(" (")[0])
    if result.error:
        return Cell("failed", result.error.splitlines()[0][:120])
    if kind == against:
        return Cell("reference")
    if reference is None or reference.outcome is None:
        return Cell("not compared", f"no {LABELS[against]} outcome")
    if result.outcome == reference.outcome:
        return Cell("same")
    keys = diff_keys(result.outcome or {}, reference.outcome)
    flavour, theirs = FLAVOUR_OF.get(kind), FLAVOUR_OF.get(against)
    if flavour is not None and theirs is not None and flavour != theirs:
        at_work = sorted(
            (result.rules if rules is None else rules) & differing_rules(flavour, theirs)
        )
        if at_work:
            return Cell("differs", ", ".join(at_work))
    elif flavour is not None and flavour == theirs:
        why = known_difference(flavour, spec.name, keys)
        if why is not None:
            return Cell("differs", f"known: {why}")
    if kind == "tansu" and spec.tansu_differs:
        return Cell("differs", f"Tansu: {spec.tansu_differs}")
    return Cell("differs", f"unexplained: {', '.join(keys)}")


def reference_for(conformance: Conformance, name: str, kind: str) -> tuple[str, Result | None]:
    """Whose outcome on ``name`` the table compares ``kind``'s with, and that result:

    * an embedded flavour: its live version (``LIVE_OF``);
    * a live version (3.9.1, 4.1.1) and Tansu: Kafka 2.3.0; for a scenario 2.3 cannot run,
      Tansu is compared with Kafka 4.1.1 (else embedded kafka4);
    * Kafka via Docker (apache/kafka:4.1.1): Kafka 4.1.1 (else embedded kafka4)."""
    flavour = FLAVOUR_OF.get(kind)
    if kind.startswith("embedded-") and flavour is not None:
        against = LIVE_OF[flavour]
        return against, conformance.done(against).get(name)
    candidates = [REFERENCE] if kind != "kafka" else []
    if kind in ("tansu", "kafka"):
        candidates += ["kafka4", "embedded-kafka4"]
    for against in candidates:
        ref = conformance.done(against).get(name)
        if ref is not None and ref.outcome is not None:
            return against, ref
    return candidates[0], conformance.done(candidates[0]).get(name)


def rules_at_work(conformance: Conformance, name: str, kind: str) -> set[str] | None:
    """The rules recorded on ``name`` for a live kind by the embedded flavour that models it
    (a live broker records none itself); None for other kinds."""
    if kind not in LIVE:
        return None
    flavour_run = conformance.done(f"embedded-{FLAVOUR_OF[kind]}").get(name)
    return set() if flavour_run is None else set(flavour_run.rules)


# --- the table ----------------------------------------------------------------------------------

START = "<!-- conformance-table:start -->"
END = "<!-- conformance-table:end -->"

#: The table's columns, in order.
COLUMNS = (
    "embedded-kafka4",
    "embedded-kafka3",
    "embedded-kafka2",
    "tansu",
    "kafka4",
    "kafka39",
    "kafka23",
    "kafka",
)


def cell(conformance: Conformance, name: str, kind: str) -> Cell:
    """The table's cell for ``name`` on ``kind`` (see :func:`reference_for`)."""
    result = conformance.done(kind).get(name)
    if result is None:
        return Cell("not run", "not part of this run")
    against, ref = reference_for(conformance, name, kind)
    return compare(
        SCENARIOS[name], kind, result, ref, against, rules_at_work(conformance, name, kind)
    )


def fidelity_counts(conformance: Conformance) -> dict[str, dict[str, int]]:
    """Per flavour, how its scenarios compare with its live version: equal, different (known),
    different (unexplained), not applicable; or not run, not compared, failed."""
    names = {"same": "equal", "differs": "different"}
    out: dict[str, dict[str, int]] = {}
    for flavour in ("kafka4", "kafka3", "kafka2"):
        counts: dict[str, int] = {}
        for name in SCENARIOS:
            c = cell(conformance, name, f"embedded-{flavour}")
            key = names.get(c.status, c.status)
            if c.why.startswith("known:"):
                key = "different (known)"
            counts[key] = counts.get(key, 0) + 1
        out[flavour] = counts
    return out


def table(conformance: Conformance) -> str:
    """The Markdown table (scenario x broker), the counts, and the rules legend."""
    columns = list(COLUMNS)
    lines = [
        "| scenario | " + " | ".join(LABELS[c] for c in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    counts: dict[str, dict[str, int]] = {c: {} for c in columns}
    for name, spec in SCENARIOS.items():
        cells = []
        for kind in columns:
            c = cell(conformance, name, kind)
            counts[kind][c.status] = counts[kind].get(c.status, 0) + 1
            cells.append(c.render().replace("|", "\\|"))
        lines.append(f"| `{name}`: {spec.title} | " + " | ".join(cells) + " |")
    fidelity = ["", "Each flavour against its live version:", ""]
    for flavour, by in fidelity_counts(conformance).items():
        live = LABELS[LIVE_OF[flavour]]
        parts = ", ".join(f"{n} {s}" for s, n in sorted(by.items()))
        fidelity.append(f"- embedded {flavour} against {live}: {parts}")
    summary = ["", "Totals per column:", ""]
    for kind in columns:
        parts = ", ".join(f"{n} {s}" for s, n in sorted(counts[kind].items()))
        summary.append(f"- {LABELS[kind]}: {parts}")
    legend = ["", "Rules (what each flavour does where Kafka versions differ):", ""]
    legend.append("| rule | kafka2 (2.3) | kafka3 (3.x) | kafka4 (4.x) | source |")
    legend.append("|---|---|---|---|---|")
    for rid, rule in RULES.items():
        row = [rule.by_flavour[f] for f in ("kafka2", "kafka3", "kafka4")]
        legend.append(f"| `{rid}`: {rule.title} | " + " | ".join(row) + f" | {rule.source} |")
    known = ["", "Known differences (`KNOWN_DIFFERENCES`: a flavour and its live version):", ""]
    for (flavour, name), (keys, why) in KNOWN_DIFFERENCES.items():
        known.append(f"- embedded {flavour}, `{name}` ({', '.join(keys)}): {why}")
    if not KNOWN_DIFFERENCES:
        known.append("- none")
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
    return "\n".join(lines + fidelity + summary + known + legend + stamp)


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
