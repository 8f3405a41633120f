"""The live audit end to end: ``aiogroup analyze --follow`` (its command line, in a process of
its own) audits a rolling bounce of six aiogroup members while it happens.

Each member is a chaos-run member process (:mod:`aiogroup.tools.chaos.member`) writing its
telemetry to its JSON Lines file and, with ``--telemetry-topic``, to the telemetry topic
(:class:`~aiogroup.observability.telemetry_kafka.KafkaTelemetry`). The six are bounced one by one
(SIGTERM, a successor joins, the group converges again), then closed. Runs: the embedded broker
and Kafka 4.1.1 with the live job on local Spark, and the embedded broker with the live job
``spark-submit``-ted to the standalone cluster (one run: the cluster's JVMs are the slow part).

What must hold:

* the live job reads every event (the topic's records are the members' lines, one for one) and
  judges them all (a later event of another group moves the watermark past the bounce, as a
  live stream always does);
* its alerts are the batch audit's violations on the members' JSON Lines (none), its datasets
  (written from the events it stored) the batch audit's, and both agree with the chaos
  checker's verdict on the same files (no double ownership);
* with ``--fail-on-overlap``: a double ownership injected afterwards (two members told they
  own one partition, as tests/analytics/test_live.py injects it) ends the job with status 3,
  alerted in the micro-batch that read it or the next; without an injection, SIGTERM ends it
  with status 0.

Nothing sleeps: each wait polls a condition (a process's exit, the members' telemetry, the live
job's status file and checkpoint) under a deadline, and fails naming what it waited for.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pandas as pd
import pytest

from aiogroup.observability.telemetry_kafka import KafkaTelemetry
from aiogroup.testing.fixtures import apache_kafka4  # noqa: F401 - the session fixture, by name
from aiogroup.testing.launchers.kafka import KafkaBroker
from aiogroup.tools.chaos.checker import RunLog, check, holdings
from tests.analytics.test_cluster import DATASETS, _read

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

MEMBERS = 6
PARTITIONS = 12
SKEW_S = 2.0
TRIGGER_S = 0.5
TOLERANCE_S = 0.05
#: A bound for one wait on a loaded 2-core machine (a JVM starting, a group converging).
DEADLINE_S = 180.0
SENTINEL = "zz-sentinel"


def _poll(what: str, done: Callable[[], bool], timeout: float = DEADLINE_S,
          every: float = 0.1) -> None:
    """Wait until ``done()`` holds; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    event = threading.Event()
    while not done():
        assert time.monotonic() < deadline, f"no {what} after {timeout:g} s"
        event.wait(every)  # the pace of a poll, not a synchronisation


def _events(path: Path) -> list[dict[str, Any]]:
    out = []
    if path.exists():
        for line in path.read_bytes().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # a line being written
    return out


@dataclass
class Analyze:
    """``analyze --follow`` in its own process: locally (``python -m aiogroup``) or under
    ``spark-submit`` to the standalone cluster; stdout collected line by line."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    lines: list[str] = field(default_factory=list)
    process: subprocess.Popen[str] | None = None

    def start(self) -> Analyze:
        err = self.log.open("w")
        self.process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                        env=self.env, stdin=subprocess.DEVNULL)
        err.close()
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        return self

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def exited(self) -> bool:
        assert self.process is not None
        return self.process.poll() is not None

    def wait(self, timeout: float = DEADLINE_S) -> int:
        _poll("exit of analyze --follow", self.exited, timeout)
        assert self.process is not None
        return int(self.process.returncode)

    def alive(self) -> None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"analyze --follow exited with {self.process.returncode}:\n"
                                 + "\n".join(self.lines[-20:]) + "\n"
                                 + self.log.read_text(errors="replace")[-3000:])

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # our own child, by its pid
            self.process.wait(30)


@dataclass
class Group:
    """Six aiogroup member processes of one group, each sending its telemetry to the topic."""

    bootstrap: str
    topic: str
    telemetry_topic: str
    directory: Path
    group: str = field(default_factory=lambda: f"bounce-{uuid.uuid4().hex[:6]}")
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str) -> None:
        argv = [sys.executable, "-m", "aiogroup.tools.chaos.member", "aiogroup",
                "--bootstrap", self.bootstrap, "--group", self.group, "--topic", self.topic,
                "--name", name, "--dir", str(self.directory),
                "--telemetry-topic", self.telemetry_topic]
        with (self.directory / f"{name}.stderr").open("wb") as err:
            self.procs[name] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err,
                                                stdin=subprocess.DEVNULL)

    def members(self) -> dict[str, list[dict[str, Any]]]:
        return {name: _events(self.directory / f"{name}.0000.jsonl") for name in self.procs}

    def converged(self) -> bool:
        """Every running member joined, every partition held by exactly one of them."""
        events = self.members()
        running = [n for n, p in self.procs.items() if p.poll() is None]
        if not all(any(e.get("type") == "joined" for e in events[n]) for n in running):
            return False
        owners: dict[int, int] = {}
        for name, hs in holdings(RunLog({}, [], events)).items():
            if name in running:
                for h in hs:
                    if h.end_kind == "open":
                        owners[h.partition[1]] = owners.get(h.partition[1], 0) + 1
        return all(owners.get(i) == 1 for i in range(PARTITIONS))

    def stop(self, name: str) -> None:
        p = self.procs[name]
        p.send_signal(signal.SIGTERM)
        _poll(f"exit of member {name} after SIGTERM", lambda: p.poll() is not None, 60)
        assert p.returncode == 0, (name, p.returncode,
                                   (self.directory / f"{name}.stderr").read_text()[-2000:])

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()  # our own children, by pid
                p.wait(30)

    def rolling_bounce(self) -> float:
        """Start six members, bounce each in turn, close all; the bounce's duration."""
        for i in range(MEMBERS):
            self.start(f"m{i}")
        _poll("the group of six formed", self.converged, DEADLINE_S)
        began = time.monotonic()
        for i in range(MEMBERS):
            self.stop(f"m{i}")
            self.start(f"m{i}-r")
            _poll(f"the group converged after bouncing m{i}", self.converged, DEADLINE_S)
        took = time.monotonic() - began
        for name in list(self.procs):
            if self.procs[name].poll() is None:
                self.stop(name)
        return took


class Probe:
    """The test's own events on the telemetry topic (and in a file, for the batch audit)."""

    def __init__(self, bootstrap: str, topic: str, path: Path) -> None:
        self.sink = KafkaTelemetry(bootstrap, topic, "probe", retry_backoff_s=0.05)
        self.path = path
        self.sent = 0

    def send(self, events: list[dict[str, Any]]) -> None:
        with self.path.open("ab") as f:
            for e in events:
                line = json.dumps({"v": 1, "client": "librdkafka", **e}).encode()
                f.write(line + b"\n")
                self.sink.forward(line)
        self.sent += len(events)
        sink = self.sink
        _poll("delivery of the probe's events", lambda: sink.written + sink.dropped >= self.sent)
        assert (sink.written, sink.dropped) == (self.sent, 0)


def _parts(group: str, member: str, t: float, seq: int, gen: int) -> dict[str, Any]:
    return {"type": "partitions_assigned", "ts": t + 0.01, "seq": seq, "group": group,
            "member": member, "generation_id": gen, "protocol": "cooperative-sticky",
            "rebalance_protocol": "cooperative", "partitions": {"orders": [0]},
            "started": t, "ended": t + 0.01}


def _commit(group: str, member: str, t: float, seq: int, gen: int) -> dict[str, Any]:
    return {"type": "offsets_committed", "ts": t, "seq": seq, "group": group, "member": member,
            "generation_id": gen, "offsets": {"orders": {"0": 5}}}


def _status(out: Path) -> dict[str, Any]:
    try:
        status: dict[str, Any] = json.loads((out / "live" / "status.json").read_text())
        return status
    except (OSError, ValueError):
        return {}


def _offsets(out: Path) -> dict[int, int]:
    """{micro-batch id: records read up to it} from the ownership query's checkpoint (each
    file: a version line, the batch's metadata, then the source's end offsets)."""
    found = {}
    for path in (out / "_checkpoints" / "ownership" / "offsets").glob("[0-9]*"):
        lines = path.read_text().splitlines()
        if len(lines) >= 3:
            ends = json.loads(lines[2])
            found[int(path.name)] = sum(o for t in ends.values() for o in t.values())
    return found


def _finished(out: Path) -> int:
    """Records read up to the ownership query's last finished micro-batch (its checkpoint's
    ``commits/N``): every one of them judged."""
    done = {int(p.name) for p in (out / "_checkpoints" / "ownership" / "commits").glob("[0-9]*")}
    return max((n for b, n in _offsets(out).items() if b in done), default=0)


def _lost(members_dir: Path) -> list[str]:
    """The members' warnings of telemetry events they could not deliver to the topic."""
    return [line for p in sorted(members_dir.glob("*.stderr"))
            for line in p.read_text(errors="replace").splitlines() if "dropped" in line]


def _judge_everything(probe: Probe, analyze: Analyze, out: Path, after: float) -> None:
    """Events of another group, each later, until the live job reports a watermark past
    ``after``: every event before it has been judged (alerted if it had to be)."""
    k = 0

    def judged() -> bool:
        nonlocal k
        analyze.alive()
        if (_status(out).get(SENTINEL) or {}).get("watermark", 0.0) >= after:
            return True
        k += 1  # one more, later: the batch that reads it reports the watermark of the last
        probe.send([{"type": "closed", "ts": after + SKEW_S + k, "seq": k, "group": SENTINEL,
                     "member": "sentinel"}])
        return False

    _poll(f"a watermark past {after:.3f} in the live job's status", judged, DEADLINE_S, 1.0)


@dataclass
class Scenario:
    broker: str
    spark: str  # local | cluster
    inject: bool


# The embedded broker with local Spark and an injection is what test_live.py replays (with the
# same injection); here the bounce runs live on Kafka 4.1.1 with local Spark, and on the
# embedded broker with the standalone cluster and an injection, which keeps CI's time down.
SCENARIOS = [
    pytest.param(Scenario("kafka4", "local", False), id="kafka4-local", marks=pytest.mark.kafka4),
    pytest.param(Scenario("embedded", "cluster", True), id="embedded-cluster"),
]


@pytest.fixture
def broker(request: pytest.FixtureRequest) -> Iterator[Any]:
    from aiogroup.tools.chaos.brokers import ApacheKafkaChaosBroker, EmbeddedChaosBroker

    scenario: Scenario = request.node.callspec.params["scenario"]
    if scenario.broker == "kafka4":
        kafka: KafkaBroker = request.getfixturevalue("apache_kafka4")
        yield ApacheKafkaChaosBroker(kafka)
        return
    embedded = EmbeddedChaosBroker()
    try:
        yield embedded
    finally:
        embedded.stop()


def _analyze(request: pytest.FixtureRequest, scenario: Scenario, bootstrap: str, topic: str,
             out: Path, log: Path) -> Analyze:
    args = ["--follow", topic, "--bootstrap", bootstrap, "--out", str(out), "--skew",
            str(SKEW_S), "--trigger", str(TRIGGER_S), "--tolerance", str(TOLERANCE_S),
            "--report", "none", "--refresh", "0"]
    if scenario.inject:
        args.append("--fail-on-overlap")
    if scenario.spark == "local":
        return Analyze([sys.executable, "-m", "aiogroup", "analyze", *args],
                       {**os.environ, "PYTHONUNBUFFERED": "1"}, log)
    from aiogroup.tools.audit.kafka_source import ensure_kafka_source

    cluster = request.getfixturevalue("cluster")
    jars = ",".join(str(p) for p in ensure_kafka_source())
    argv = cluster.submit_command(args, conf={"spark.jars": jars,
                                              "spark.sql.shuffle.partitions": "2"})
    return Analyze(argv, {**cluster.env(), "PYTHONUNBUFFERED": "1"}, log)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_rolling_bounce_audited_live(request: pytest.FixtureRequest, scenario: Scenario,
                                       broker: Any, tmp_path: Path) -> None:
    t_start = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    telemetry_topic, topic = f"telemetry-{tag}", f"orders-{tag}"
    broker.create_topic(telemetry_topic, 3)
    broker.create_topic(topic, PARTITIONS)
    members_dir, out = tmp_path / "members", tmp_path / "live"
    members_dir.mkdir()
    analyze = _analyze(request, scenario, broker.bootstrap, telemetry_topic, out,
                       tmp_path / "analyze.stderr").start()
    group = Group(broker.bootstrap, topic, telemetry_topic, members_dir)
    probe = Probe(broker.bootstrap, telemetry_topic, tmp_path / "probe.jsonl")
    try:
        bounce_s = group.rolling_bounce()
        members = group.members()
        lines = sum(len(v) for v in members.values())
        last = max(float(e["ts"]) for v in members.values() for e in v)
        _judge_everything(probe, analyze, out, last)
        judged_at = time.monotonic()
        # the live job reads every record on the topic: the members' lines and the probe's. A
        # sentinel sent while the watermark's batch was finishing may be in no batch yet: wait
        # for it (a member's event lost on the way fails at once, with the member's warning)
        every = lines + probe.sent

        def read_all() -> bool:
            assert not (lost := _lost(members_dir)), lost
            return max(_offsets(out).values(), default=0) >= every

        _poll("the live job reading every record on the topic", read_all)
        read = max(_offsets(out).values())
        assert read == every, (read, lines, probe.sent)
        assert not list((out / "live").glob("alerts/*.parquet"))  # the bounce: no alert
        assert not [x for x in analyze.lines if x.startswith("ALERT")]
        if scenario.inject:
            t0 = last + SKEW_S + 100
            on = t0 + 1 + SKEW_S + 1
            probe.send([_parts("inject", "A", t0, 0, 1), _commit("inject", "A", t0 + 0.02, 1, 1)])
            _poll("the live job reading A's assignment",
                  lambda: max(_offsets(out).values()) >= lines + probe.sent)
            before = lines + probe.sent
            probe.send([_parts("inject", "B", t0 + 1, 0, 2), _commit("inject", "B", on, 1, 2),
                        _commit("inject", "A", on, 2, 1)])
            rc = analyze.wait()
            assert rc == 3, (rc, analyze.lines[-10:])
            alerts = [x for x in analyze.lines if x.startswith("ALERT")]
            assert len(alerts) == 1 and "group inject: orders-0 owned by A, B" in alerts[0], alerts
            match = re.match(r"ALERT batch (\d+):", alerts[0])
            assert match is not None
            alerted = int(match.group(1))
            offsets = _offsets(out)
            first = min(b for b, n in offsets.items() if n > before)
            complete = min(b for b, n in offsets.items() if n >= before + 3)
            # alerted in the micro-batch that read the overlap, or the next (the watermark)
            assert first <= alerted <= complete + 1, (first, complete, alerted, offsets)
        else:
            # every record judged (a micro-batch in flight when stopped is not), then SIGTERM
            _poll("the live job finishing the micro-batch of the last record",
                  lambda: _finished(out) >= lines + probe.sent)
            assert analyze.process is not None
            analyze.process.send_signal(signal.SIGTERM)
            rc = analyze.wait()
            assert rc == 0, (rc, analyze.lines[-10:])
        stopped_at = time.monotonic()
    finally:
        probe.sink.close(closed_event=False)
        group.kill_all()
        analyze.kill()

    # The batch audit of the same events (the members' files and the probe's) ...
    from aiogroup.tools.audit.audit import run_audit

    spark = request.getfixturevalue("spark")
    files = [*sorted(str(p) for p in members_dir.glob("*.jsonl")), str(probe.path)]
    batch_out = tmp_path / "batch"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        result = run_audit(spark, files, tolerance_s=TOLERANCE_S)
        for name, df in result.datasets.items():
            df.write.parquet(str(batch_out / name))
    overlaps = _read(batch_out / "overlaps")
    violations = overlaps[overlaps["violation"]]
    expected = sorted(zip(violations["group"], violations["topic"], violations["partition"],
                          violations["start"], strict=True))
    alert_files = sorted((out / "live").glob("alerts/*.parquet"))
    live_alerts = pd.concat([pd.read_parquet(p) for p in alert_files]) if alert_files else None
    got = [] if live_alerts is None else sorted(zip(
        live_alerts["group"], live_alerts["topic"], live_alerts["partition"],
        live_alerts["start"], strict=True))
    assert got == expected
    assert [g for g, *_ in expected] == (["inject"] if scenario.inject else [])

    # ... and the chaos checker's verdict: no double ownership in the bounce, the injected one
    bounce = check(RunLog({}, [], members))
    assert bounce.of("double_ownership") == [], [v.detail for v in bounce.of("double_ownership")]
    assert not [o for o in overlaps.itertuples() if o.group == group.group and o.violation]
    injected = [e for e in _events(probe.path) if e["group"] == "inject"]
    verdict = check(RunLog({}, [], {m: [e for e in injected if e["member"] == m]
                                    for m in ("A", "B")}))
    assert [v.partition for v in verdict.of("double_ownership")] == (
        ["orders:0"] if scenario.inject else [])

    # the datasets the live job wrote when it stopped (the batch audit's code on the events it
    # stored from the topic) are the batch audit's on the files
    for name in DATASETS:
        ours, theirs = _read(out / name), _read(batch_out / name)
        if name == "input_quality":  # sources: the topic's partitions vs files
            ours, theirs = (d.groupby("status")["lines"].sum().to_dict() for d in (ours, theirs))
            assert ours == theirs
            # every line counted; the members' ``started`` lines are a type the audit skips
            assert sum(ours.values()) == lines + probe.sent and ours["ok"] > lines // 2
            continue
        if name == "latency":  # a mean of doubles summed in another order: its last bit
            pd.testing.assert_series_equal(ours.pop("mean_s"), theirs.pop("mean_s"),
                                           check_exact=False, rtol=1e-12, atol=0.0)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True, obj=name)
    assert len(_read(out / "intervals")) >= 2 * MEMBERS
    print(f"\n{request.node.callspec.id}: bounce {bounce_s:.1f} s, {lines} member events, "
          f"judged {judged_at - t_start:.1f} s, stopped {stopped_at - t_start:.1f} s, "
          f"whole {time.monotonic() - t_start:.1f} s, load {os.getloadavg()}")
