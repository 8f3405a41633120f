"""KIP-429's headline figure, measured: a rolling bounce of a consumer group, eager vs
cooperative, and KIP-848's consumer group protocol beside them.

    .venv/bin/python bench/bench_rolling_bounce.py                   # both brokers, every run
    .venv/bin/python bench/bench_rolling_bounce.py --broker embedded \
        --runs aiogroup-eager,aiogroup-coop
    .venv/bin/python bench/bench_rolling_bounce.py --broker kafka4 --runs aiogroup-coop,\
aiogroup-consumer,librdkafka-consumer,java-consumer             # KIP-848 beside classic
    .venv/bin/python bench/bench_rolling_bounce.py --out bounce/ --report bounce/report.html

A group of ``--members`` member processes (default 6) over ``--partitions`` partitions (default
48, one topic) forms, then is rolled one member at a time, as a deploy does: SIGTERM the member
(it revokes, leaves the group and exits), start its replacement under the same name, and wait
until the group is safe to bounce again, judged from the broker exactly as ``aiogroup group
watch`` judges it (Stable, every member back, every partition assigned once). Then the next.

Runs (``--runs``), on the embedded broker, Apache Kafka 2.3 and 4.1.1 (``--broker``; the
``-consumer`` runs only where the broker serves KIP-848 consumer groups: the embedded broker's
default ``kafka4`` flavour and Kafka 4.1.1):

    aiogroup-eager        aiogroup members, [range]
    aiogroup-coop         aiogroup members, [cooperative-sticky]; SIGTERM calls ``close()``
                          from another task while the loop reads on: the default shutdown,
                          which hands off (the partitions keep flowing until the round that
                          moves them, then the member leaves at once)
    aiogroup-coop-close   the same, but SIGTERM stops the loop first, then ``close()``
                          (nobody reads: revoke, then leave)
    aiokafka-eager        aiokafka 0.x consumers, range (aiokafka speaks only eager);
                          SIGTERM stops the loop, then ``stop()``
    librdkafka-coop       confluent-kafka consumers, cooperative-sticky
    librdkafka-eager      confluent-kafka consumers, range
    kafka-python-coop     kafka-python 3 consumers, cooperative-sticky
    kafka-python-eager    kafka-python 3 consumers, range
    mixed-coop            aiogroup, librdkafka and kafka-python members in turn, cooperative-sticky
    java-coop             Apache Kafka's Java KafkaConsumer (kafka-clients 4.1.1, our peer
                          program), cooperative-sticky; SIGTERM ends its poll loop, close()
    aiogroup-consumer     aiogroup members, group_protocol="consumer" (KIP-848: the broker
                          assigns, with its default assignor, uniform); SIGTERM as aiogroup-coop
                          (under KIP-848 a hand-off closes as close() does)
    librdkafka-consumer   confluent-kafka consumers, group.protocol=consumer
    java-consumer         the Java KafkaConsumer, group.protocol=consumer

Every client gets the same pace: classic members are configured with ``--heartbeat-ms`` and
``--session-ms``; under KIP-848 both are the broker's (``group.consumer.heartbeat.interval.ms``
and ``group.consumer.session.timeout.ms``, set to the same values when the bench starts Kafka
4.1.1 or the embedded broker, whose minimums are lowered as the test brokers' are), and each
client is configured as its own documentation advises: librdkafka and Java set neither (both
refuse them with ``group.protocol=consumer``), aiogroup is told the broker's session (its
KAFKA-7026 rule).

Every member records rebalance telemetry (``aiogroup.observability.telemetry``: ``JsonlTelemetry``
for
aiogroup, ``ConfluentRecorder`` and ``KafkaPythonListener`` for the peers). The Spark audit
(``aiogroup.tools.audit``) then computes, per run, over the generations of the bounce (after the
formed group's generation, up to the generation the last bounce converged in):

* unowned partition-seconds, and the longest time one partition had no owner;
* rebalances (generations the group went through);
* partitions moved, against the minimum a perfect assignor needs;
* double ownership: overlap episodes over the whole recording (must be zero);
* time to complete the bounce: from the first release of the bounce to its last assignment
  (the bench's own clock, from the first SIGTERM to the last "safe", is printed beside it).

Under KIP-848 a member's generation is its member epoch (the broker bumps every member to the
group's epoch as it reconciles), and the group is "safe" when ConsumerGroupDescribe shows it
Stable with every member at the group's epoch and every partition assigned once.

Convergence, by the bench's clock (``time.monotonic()``), per bounce; the table shows the
median over the bounces of a run and the longest:

* **join** (time to converge after a join): from the moment the bench starts the replacement's
  process to the first moment the group is safe again with every member (the gate below: the
  broker's verdict, then every member process reporting that generation and together owning
  every partition). It includes the client's own start (an interpreter's or a JVM's, its first
  connection); **seen** is the part after the broker first lists the new member (its first
  JoinGroup or ConsumerGroupHeartbeat answered), the protocol's own share;
* **leave**: from the SIGTERM to the group safe without the member, watched during the restart
  delay. A leave that has not settled by then (``-``) leaves the rest of it in the join's figure.

It prints each run's figures and the ratios the targets are about (cooperative aiogroup against
eager aiogroup, and against librdkafka cooperative, on the same broker in the same run), and
writes an HTML report with the runs side by side (``--report``).

Records flow throughout (``--rate`` per partition per second, from a producer in the bench
process; ``--rate 0`` measures ownership only): every member consumes them (aiogroup through
``aiogroup.Consumer``, the peers through their poll loops), reports ``processed`` telemetry, and
commits what it consumed before it gives a partition up. The longest stall of a partition (the
longest time between consecutive processed records of one partition during the bounce) comes
from those events.

Member processes are ``bounce_members.py`` beside this file; the figures are computed by
``bounce_figures.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bounce_figures import audit, figures, print_table, verdicts
from bounce_members import COOP, KINDS, RANGE

MEMBER_PROGRAM = Path(__file__).resolve().with_name("bounce_members.py")
ALL_RUNS = ("aiogroup-eager", "aiogroup-coop", "aiogroup-coop-close", "aiokafka-eager",
            "librdkafka-coop", "librdkafka-eager", "kafka-python-coop", "kafka-python-eager",
            "mixed-coop", "java-coop", "aiogroup-consumer", "librdkafka-consumer",
            "java-consumer")
#: The member kinds: the programs of bounce_members.py, and Apache Kafka's Java consumer (our
#: peer program of aiogroup.testing.peers, built on first use; it writes its own telemetry).
RUN_KINDS = (*KINDS, "java")
#: The kinds that speak KIP-848's consumer group protocol (``<kind>-consumer`` runs).
CONSUMER_KINDS = ("aiogroup", "librdkafka", "java")
#: The brokers whose coordinator serves KIP-848 consumer groups.
CONSUMER_BROKERS = ("embedded", "kafka4")
#: The kinds a mixed group cycles over (aiokafka cannot join a cooperative group).
MIXED = ("aiogroup", "librdkafka", "kafka-python")


@dataclass(frozen=True)
class RunSpec:
    """One run: which client each member slot runs, with which assignor."""

    name: str
    kinds: tuple[str, ...]  # cycled over the member slots
    assignor: str  # classic: the members' assignor (unused under KIP-848: the broker's default)
    hand_off: bool = True  # aiogroup members hand off on SIGTERM (eager: the same as close)
    group_protocol: str = "classic"  # "consumer": KIP-848

    def kind_of(self, slot: int) -> str:
        return self.kinds[slot % len(self.kinds)]


def run_spec(name: str) -> RunSpec:
    if name == "mixed-coop":
        return RunSpec(name, MIXED, COOP)
    if name == "aiogroup-coop-close":
        return RunSpec(name, ("aiogroup",), COOP, hand_off=False)
    kind, _, protocol = name.rpartition("-")
    if protocol == "consumer" and kind in CONSUMER_KINDS:
        return RunSpec(name, (kind,), COOP, group_protocol="consumer")
    if kind not in RUN_KINDS or protocol not in ("coop", "eager"):
        raise SystemExit(f"unknown run {name!r}; expected one of {', '.join(ALL_RUNS)}")
    return RunSpec(name, (kind,), COOP if protocol == "coop" else RANGE)


# =========================================================================== the bench


@dataclass
class Member:
    name: str
    kind: str
    process: subprocess.Popen[bytes]
    status: Path
    #: A member that writes no status lines (the Java peer): its telemetry tells the same.
    telemetry: Path | None = None
    _read: int = 0
    _generation: int | None = None
    _owned: set[tuple[str, int]] = field(default_factory=set)

    def last_status(self) -> dict[str, Any] | None:
        """The member's generation and how many partitions it owns (``gen``, ``owned``)."""
        if self.telemetry is not None:
            return self._status_from_telemetry(self.telemetry)
        try:
            lines = self.status.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        mine = [json.loads(x) for x in lines if x.strip()]
        mine = [x for x in mine if x["pid"] == self.process.pid]
        return mine[-1] if mine else None

    def _status_from_telemetry(self, path: Path) -> dict[str, Any] | None:
        """From this process's ``joined`` events (one per generation or, under KIP-848, member
        epoch it enters) and rebalance callbacks, read on from where the last call stopped."""
        from aiogroup.tools.chaos.checker import read_complete_lines

        lines, self._read = read_complete_lines(path, self._read)
        for line in lines:
            e = json.loads(line)
            if e.get("pid") != self.process.pid:
                continue  # the member this one replaced, under the same name
            kind = e.get("type")
            parts = {(t, int(p)) for t, ps in (e.get("partitions") or {}).items() for p in ps}
            if kind == "joined":
                self._generation = int(e["generation_id"])
            elif kind == "partitions_assigned":
                self._owned |= parts
            elif kind in ("partitions_revoked", "partitions_lost"):
                self._owned -= parts
        if self._generation is None:
            return None
        return {"gen": self._generation, "owned": len(self._owned)}


@dataclass
class RunResult:
    broker: str
    spec: RunSpec
    group: str
    events: Path
    formed_generation: int | None = None
    final_generation: int | None = None
    clock_s: float = 0.0  # first SIGTERM -> last "safe", by the bench's clock
    window: tuple[float, float] | None = None  # the same, in wall-clock time (stall figure)
    produced: int = 0
    problems: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    #: Per bounce (see the module doc): [leave s or None, join s, seen-to-safe s or None].
    joins: list[list[float | None]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.spec.name} ({self.broker})"


@contextlib.contextmanager
def embedded_broker_process(partitions: int, *, session_ms: int, heartbeat_ms: int
                            ) -> Iterator[str]:
    """``python -m aiogroup.testing.embedded`` on a free loopback port, stopped by pid; topics
    are created on first use with ``partitions`` partitions. KIP-848 groups get the session and
    heartbeat interval given (``group.consumer.*``, the minimums lowered as Kafka 4.1.1's are
    by the KRaft launcher)."""
    from aiogroup.testing.launchers.processes import terminate
    from aiogroup.testing.launchers.tansu import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "aiogroup.testing.embedded", "--host", "127.0.0.1",
         "--port", str(port), "--group-min-session-timeout-ms", "1000",
         "--initial-rebalance-delay-ms", "0", "--num-partitions", str(partitions),
         "--group-consumer", "min.session.timeout.ms=1000",
         "--group-consumer", "min.heartbeat.interval.ms=100",
         "--group-consumer", f"session.timeout.ms={session_ms}",
         "--group-consumer", f"heartbeat.interval.ms={heartbeat_ms}"],
        stdout=subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().decode()
        if "listening on" not in line:
            raise SystemExit(f"the embedded broker did not start: {line!r}")
        yield f"127.0.0.1:{port}"
    finally:
        terminate(process)


def create_by_metadata(bootstrap: str, name: str, partitions: int) -> None:
    """Create a topic on the embedded broker process as a producer's first Metadata request
    does (auto-creation), and check it got ``partitions`` partitions."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:
        topic = producer.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and topic.partitions:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"topic {name} was not created")
        time.sleep(0.1)
    if len(topic.partitions) != partitions:
        raise SystemExit(f"topic {name} has {len(topic.partitions)} partitions, not {partitions}")


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work

    # -- brokers

    @contextlib.contextmanager
    def broker(self, kind: str) -> Iterator[tuple[str, Callable[[str, int], None]]]:
        if kind == "embedded":
            # In a process of its own, as any broker runs: in the bench process it would share
            # one interpreter with the producer thread and the status polling, and answer late
            # whenever they run.
            with embedded_broker_process(self.args.partitions, session_ms=self.args.session_ms,
                                         heartbeat_ms=self.args.heartbeat_ms) as bootstrap:
                yield bootstrap, lambda name, n: create_by_metadata(bootstrap, name, n)
        elif kind in ("kafka23", "kafka4"):
            from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker

            version = KAFKA4_VERSION if kind == "kafka4" else None
            # KIP-848 groups take their session and heartbeat interval from the broker: the
            # same as every classic member is configured with (Kafka 2.3 has no such group).
            config = {} if version is None else {
                "group.consumer.session.timeout.ms": str(self.args.session_ms),
                "group.consumer.heartbeat.interval.ms": str(self.args.heartbeat_ms),
            }
            with KafkaBroker(version=version, quick_jit=False, config=config) as kafka:
                yield kafka.bootstrap, lambda name, n: kafka.create_topic(name, n, timeout=120)
        else:
            raise SystemExit(f"unknown broker {kind!r}")

    # -- members

    def start_member(self, run: RunResult, bootstrap: str, topic: str, slot: int) -> Member:
        name = f"m{slot + 1}"
        kind = run.spec.kind_of(slot)
        status = run.events.parent / "status" / f"{name}.jsonl"
        status.parent.mkdir(parents=True, exist_ok=True)
        if kind == "java":
            return self._start_java(run, bootstrap, topic, name, status)
        log = open(run.events.parent / "status" / f"{name}.stderr", "ab")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, str(MEMBER_PROGRAM), "--kind", kind, "--assignor", run.spec.assignor,
             "--bootstrap", bootstrap, "--group", run.group, "--topic", topic, "--name", name,
             "--session-ms", str(self.args.session_ms),
             "--heartbeat-ms", str(self.args.heartbeat_ms),
             "--telemetry-dir", str(run.events), "--status", str(status),
             "--revoke-ms", str(self.args.revoke_ms),
             "--group-protocol", run.spec.group_protocol]
            + (["--records"] if self.args.rate else [])
            + ([] if run.spec.hand_off else ["--close"]),
            stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        return Member(name, kind, process, status)

    def _start_java(self, run: RunResult, bootstrap: str, topic: str, name: str,
                    status: Path) -> Member:
        """Apache Kafka's Java consumer (kafka-clients 4.1.1), our peer program: it commits
        what it processed in its revocation callback, as the other members do, and writes its
        own telemetry; SIGTERM ends its poll loop and closes it."""
        from aiogroup.testing.peers import peer_command

        if self.args.revoke_ms:
            raise SystemExit("--revoke-ms: the Java member has no revocation work to add")
        argv = peer_command(
            "java", bootstrap=bootstrap, group=run.group, topic=topic, name=name,
            assignors=[run.spec.assignor], session_ms=self.args.session_ms,
            heartbeat_ms=self.args.heartbeat_ms, rebalance_ms=300_000,  # Java's default
            protocol=run.spec.group_protocol, commit_every_ms=0, max_records=500,
            telemetry_dir=run.events,
        )  # fmt: skip
        log = open(status.with_suffix(".stderr"), "ab")  # noqa: SIM115
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=log)  # fmt: skip
        log.close()
        return Member(name, "java", process, status, telemetry=run.events / f"{name}.0000.jsonl")

    @staticmethod
    def stop_member(member: Member, run: RunResult, timeout: float = 60.0) -> None:
        if member.process.poll() is None:
            member.process.send_signal(signal.SIGTERM)
            try:
                member.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                run.problems.append(f"{member.name} did not close within {timeout:g} s: killed")
                member.process.kill()
                member.process.wait(timeout=10)
        if member.process.returncode not in (0, -signal.SIGTERM):
            run.problems.append(f"{member.name} exited with {member.process.returncode}")

    # -- the gate

    async def safe(self, bootstrap: str, group: str, members: Sequence[Member],
                   timeout: float, seen: list[float] | None = None) -> int | None:
        """Wait until the group is safe to bounce again (as ``aiogroup group watch`` judges:
        for a KIP-848 group from ConsumerGroupDescribe) and every live member reports the same
        generation (member epoch); return that generation. ``seen`` gets the time
        (``time.monotonic()``) the broker first listed ``len(members)`` members."""
        from aiogroup.errors import AiogroupError
        from aiogroup.inspector import GroupInspector, assess

        deadline = time.monotonic() + timeout
        inspector = GroupInspector(bootstrap, group, request_timeout_ms=30_000)
        while True:  # a loaded machine may take a while to answer the bootstrap
            try:
                await inspector.start()
                break
            except AiogroupError:
                if time.monotonic() > deadline:
                    raise
                await inspector.close()
                inspector = GroupInspector(bootstrap, group, request_timeout_ms=30_000)
        try:
            while True:
                for m in members:
                    if m.process.poll() is not None:
                        raise RuntimeError(f"{m.name} exited with {m.process.returncode}")
                try:
                    described = await inspector.describe()
                except AiogroupError:
                    described = None
                if (seen is not None and not seen and described is not None
                        and len(described.members) >= len(members)):
                    seen.append(time.monotonic())
                if described is not None and assess(
                        described, expected_members=len(members)).safe:
                    statuses = [m.last_status() for m in members]
                    gens = {s["gen"] for s in statuses if s is not None}
                    owned = sum(s["owned"] for s in statuses if s is not None)
                    if (len(gens) == 1 and None not in gens and owned == self.args.partitions
                            and None not in statuses):
                        return int(gens.pop())
                if time.monotonic() > deadline:
                    raise TimeoutError(f"group {group} not safe within {timeout:g} s "
                                       f"(last: {described})")
                await asyncio.sleep(0.05)  # polling the broker and the members, bounded
        finally:
            await inspector.close()

    def _settle_without(self, run: RunResult, bootstrap: str, members: Sequence[Member],
                        slot: int, signalled: float) -> float | None:
        """The deploy's restart delay after the stopped member exited, spent watching the
        group without it: seconds from its SIGTERM to the group safe again without it, or
        None if not within the delay (the join's figure then includes the rest of the leave)."""
        others = [m for i, m in enumerate(members) if i != slot]
        until = time.monotonic() + self.args.restart_delay
        leave: float | None = None
        if self.args.restart_delay:
            with contextlib.suppress(TimeoutError):
                asyncio.run(self.safe(bootstrap, run.group, others, self.args.restart_delay))
                leave = time.monotonic() - signalled
        rest = until - time.monotonic()
        if rest > 0:
            time.sleep(rest)  # the deploy's time to start a process
        return leave

    # -- records

    @contextlib.contextmanager
    def producing(self, bootstrap: str, topic: str, run: RunResult) -> Iterator[None]:
        """Records into every partition at ``--rate`` per second each, until the block ends."""
        rate = self.args.rate
        if not rate:
            yield
            return
        from confluent_kafka import Producer

        stop = threading.Event()
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})

        def produce() -> None:
            began = time.monotonic()
            sent = 0
            while not stop.is_set():
                due = int((time.monotonic() - began) * rate)  # records per partition so far
                for _ in range(sent, due):
                    for partition in range(self.args.partitions):
                        producer.produce(topic, b"x" * 100, partition=partition)
                        run.produced += 1
                sent = max(sent, due)
                producer.poll(0)
                stop.wait(0.05)  # the production tick
            producer.flush(30)

        thread = threading.Thread(target=produce, name="producer", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(60)

    # -- one run

    def run(self, broker: str, bootstrap: str, create_topic: Callable[[str, int], None],
            spec: RunSpec) -> RunResult:
        tag = f"{spec.name}-{broker}-{uuid.uuid4().hex[:6]}"
        events = self.work / broker / spec.name / "events"
        events.mkdir(parents=True)
        run = RunResult(broker, spec, f"bounce-{tag}", events)
        topic = f"bounce-{tag}"
        create_topic(topic, self.args.partitions)
        with self.producing(bootstrap, topic, run):
            self._bounce(run, bootstrap, topic)
        return run

    def _bounce(self, run: RunResult, bootstrap: str, topic: str) -> None:
        n = self.args.members
        members = [self.start_member(run, bootstrap, topic, slot) for slot in range(n)]
        step = self.args.step_timeout
        try:
            run.formed_generation = asyncio.run(self.safe(bootstrap, run.group, members, 120))
            # A deploy does not restart the next member the instant the group settles (readiness
            # checks, its own pacing): a pause drawn from the same seeded sequence in every run
            # keeps bounces from lining up with the members' heartbeats, which start together.
            pauses = random.Random(self.args.seed)
            began, wall = time.monotonic(), time.time()
            for slot in range(n):
                if slot:
                    time.sleep(pauses.uniform(0.0, self.args.pause_max))  # deploy pacing
                signalled = time.monotonic()
                self.stop_member(members[slot], run)
                leave = self._settle_without(run, bootstrap, members, slot, signalled)
                started = time.monotonic()
                members[slot] = self.start_member(run, bootstrap, topic, slot)
                seen: list[float] = []
                run.final_generation = asyncio.run(
                    self.safe(bootstrap, run.group, members, step, seen))
                done = time.monotonic()
                run.joins.append([leave, done - started, done - seen[0] if seen else None])
            run.clock_s = time.monotonic() - began
            run.window = (wall, wall + run.clock_s)
        except (TimeoutError, RuntimeError) as exc:
            run.problems.append(str(exc))
        finally:
            for m in members:
                self.stop_member(m, run)


# =========================================================================== entry point


def bounce_all(bench: Bench, brokers: Sequence[str], specs: Sequence[RunSpec]) -> list[RunResult]:
    args = bench.args
    print(f"rolling bounce: {args.members} members x {args.partitions} partitions, heartbeat "
          f"{args.heartbeat_ms} ms, session {args.session_ms} ms, restart delay "
          f"{args.restart_delay:g} s, pause < {args.pause_max:g} s, revocation work "
          f"{args.revoke_ms} ms, {args.rate} records/s per partition; "
          f"load average {os.getloadavg()[0]:.1f}; work dir {bench.work}",
          flush=True)
    runs: list[RunResult] = []
    for broker in brokers:
        runnable = [spec for spec in specs
                    if spec.group_protocol == "classic" or broker in CONSUMER_BROKERS]
        skipped = [spec.name for spec in specs if spec not in runnable]
        if skipped:
            print(f"  {broker}: no KIP-848 consumer groups, skipped {', '.join(skipped)}")
        if not runnable:
            continue
        with bench.broker(broker) as (bootstrap, create_topic):
            for spec in runnable:
                began = time.monotonic()
                run = bench.run(broker, bootstrap, create_topic, spec)
                runs.append(run)
                save_runs(bench.work, runs)  # so far: an interrupted bench can be audited
                print(f"  {run.label}: bounced in {run.clock_s:.1f} s "
                      f"(run {time.monotonic() - began:.0f} s, load {os.getloadavg()[0]:.1f})"
                      + (f"; problems: {'; '.join(run.problems)}" if run.problems else ""),
                      flush=True)
    return runs


def save_runs(work: Path, runs: Sequence[RunResult]) -> None:
    (work / "runs.json").write_text(json.dumps([
        {"broker": r.broker, "run": r.spec.name, "group": r.group, "events": str(r.events),
         "formed_generation": r.formed_generation, "final_generation": r.final_generation,
         "clock_s": r.clock_s, "window": r.window, "produced": r.produced,
         "problems": r.problems, "joins": r.joins} for r in runs], indent=1))


def load_runs(work: Path) -> list[RunResult]:
    return [RunResult(x["broker"], run_spec(x["run"]), x["group"], Path(x["events"]),
                      x["formed_generation"], x["final_generation"], x["clock_s"],
                      tuple(x["window"]) if x.get("window") else None, x.get("produced", 0),
                      list(x["problems"]), joins=list(x.get("joins", [])))
            for x in json.loads((work / "runs.json").read_text())]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--broker", choices=["embedded", "kafka23", "kafka4", "both", "all"],
                   default="both", help="both: embedded and kafka23; all: and kafka4")
    p.add_argument("--runs", default=",".join(ALL_RUNS),
                   help=f"comma-separated, of {', '.join(ALL_RUNS)}")
    p.add_argument("--members", type=int, default=6)
    p.add_argument("--partitions", type=int, default=48)
    p.add_argument("--heartbeat-ms", type=int, default=1000)
    p.add_argument("--session-ms", type=int, default=10_000)
    p.add_argument("--restart-delay", type=float, default=2.0,
                   help="seconds between a member's exit and its replacement's start, as a "
                        "deploy takes to start a process (default 2)")
    p.add_argument("--pause-max", type=float, default=None,
                   help="pause before each next bounce, uniform in [0, this) seconds from a "
                        "seeded sequence (default: one heartbeat interval)")
    p.add_argument("--seed", type=int, default=14)
    p.add_argument("--revoke-ms", type=int, default=0,
                   help="time every member spends in each revocation callback (the "
                        "application's commit and flush), the same for every client")
    p.add_argument("--rate", type=int, default=20,
                   help="records per second into each partition while the group is rolled "
                        "(0: no records, ownership only; default 20)")
    p.add_argument("--step-timeout", type=float, default=120.0,
                   help="seconds one bounce may take to become safe")
    p.add_argument("--master", default="local[2]", help="Spark master for the audit")
    p.add_argument("--out", default=None, help="keep events, Parquet and the report here")
    p.add_argument("--report", default=None, help="HTML report path (default OUT/report.html)")
    p.add_argument("--from", dest="again", default=None, metavar="DIR",
                   help="no new runs: audit and report the runs kept in DIR (an earlier --out)")
    args = p.parse_args(argv)
    if args.pause_max is None:
        args.pause_max = args.heartbeat_ms / 1000
    specs = [run_spec(name.strip()) for name in args.runs.split(",") if name.strip()]
    brokers = {"both": ["embedded", "kafka23"], "all": ["embedded", "kafka23", "kafka4"]}.get(
        args.broker, [args.broker]
    )
    if args.again:
        work = Path(args.again)
        runs = load_runs(work)
        brokers = sorted({r.broker for r in runs})
    else:
        work = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="bench_bounce_"))
        work.mkdir(parents=True, exist_ok=True)
        runs = bounce_all(Bench(args, work), brokers, specs)
        save_runs(work, runs)
    began = time.monotonic()
    spark = audit(runs, work / "audit", args.master)
    figures(spark, work / "audit", runs)
    print(f"spark audit of {len(runs)} runs: {time.monotonic() - began:.0f} s\n")
    print_table(runs)
    print(f"moved: partitions handed to another member. A bounce must move at least the bounced "
          f"member's share twice (away, then back): about 2 x partitions = "
          f"{2 * args.partitions} in all. (The audit's own minimum counts a restarted member, "
          "which keeps its name, as present throughout, so it charges a bounce nothing.)")
    print("stops: partition gaps (a partition losing its owner and getting the next one).")
    print()
    for line in verdicts(runs):
        print(line)
    report = Path(args.report) if args.report else work / "report.html"
    from aiogroup.tools.audit.report import render_runs_html, runs_data

    data = runs_data(spark, str(work / "audit"), [
        (r.label, r.group, r.figures.get("bounce_start"), r.figures) for r in runs if r.figures])
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(render_runs_html(
        data, title=f"Rolling bounce: {args.members} members, {args.partitions} partitions",
        note=f"heartbeat {args.heartbeat_ms} ms, session {args.session_ms} ms; "
             f"{', '.join(brokers)}"), encoding="utf-8")
    print(f"\nreport: {report}")
    spark.stop()
    return 0 if all(not r.problems for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
