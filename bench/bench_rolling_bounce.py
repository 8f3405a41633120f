"""KIP-429's headline figure, measured: a rolling bounce of a consumer group, eager vs cooperative.

    .venv/bin/python bench/bench_rolling_bounce.py                   # both brokers, every run
    .venv/bin/python bench/bench_rolling_bounce.py --broker embedded \
        --runs aiogroup-eager,aiogroup-coop
    .venv/bin/python bench/bench_rolling_bounce.py --out bounce/ --report bounce/report.html

A group of ``--members`` member processes (default 6) over ``--partitions`` partitions (default
48, one topic) forms, then is rolled one member at a time, as a deploy does: SIGTERM the member
(it revokes, leaves the group and exits), start its replacement under the same name, and wait
until the group is safe to bounce again, judged from the broker exactly as ``aiogroup group
watch`` judges it (Stable, every member back, every partition assigned once). Then the next.

Runs (``--runs``), on the embedded broker and on Apache Kafka 2.3 (``--broker``):

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

It prints each run's figures and the ratios the targets are about (cooperative aiogroup against
eager aiogroup, and against librdkafka cooperative, on the same broker in the same run), and
writes an HTML report with the runs side by side (``--report``).

Records flow throughout (``--rate`` per partition per second, from a producer in the bench
process; ``--rate 0`` measures ownership only): every member consumes them (aiogroup through
``aiogroup.Consumer``, the peers through their poll loops), reports ``processed`` telemetry, and
commits what it consumed before it gives a partition up. The longest stall of a partition (the
longest time between consecutive processed records of one partition during the bounce) comes
from those events.

Member processes are this file with ``member`` as the first argument.
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

HERE = Path(__file__).resolve()
ALL_RUNS = ("aiogroup-eager", "aiogroup-coop", "aiogroup-coop-close", "aiokafka-eager",
            "librdkafka-coop", "librdkafka-eager", "kafka-python-coop", "kafka-python-eager",
            "mixed-coop")
KINDS = ("aiogroup", "librdkafka", "kafka-python", "aiokafka")
#: The kinds a mixed group cycles over (aiokafka cannot join a cooperative group).
MIXED = ("aiogroup", "librdkafka", "kafka-python")
COOP, RANGE = "cooperative-sticky", "range"


@dataclass(frozen=True)
class RunSpec:
    """One run: which client each member slot runs, with which assignor."""

    name: str
    kinds: tuple[str, ...]  # cycled over the member slots
    assignor: str
    hand_off: bool = True  # aiogroup members hand off on SIGTERM (eager: the same as close)

    def kind_of(self, slot: int) -> str:
        return self.kinds[slot % len(self.kinds)]


def run_spec(name: str) -> RunSpec:
    if name == "mixed-coop":
        return RunSpec(name, MIXED, COOP)
    if name == "aiogroup-coop-close":
        return RunSpec(name, ("aiogroup",), COOP, hand_off=False)
    kind, _, protocol = name.rpartition("-")
    if kind not in KINDS or protocol not in ("coop", "eager"):
        raise SystemExit(f"unknown run {name!r}; expected one of {', '.join(ALL_RUNS)}")
    return RunSpec(name, (kind,), COOP if protocol == "coop" else RANGE)


# =========================================================================== member process


class Status:
    """What the member tells the bench: one JSON line per change (generation, partitions)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.last: tuple[Any, ...] | None = None

    def write(self, generation: int | None, owned: int, state: str = "") -> None:
        key = (generation, owned, state)
        with self.lock:
            if key == self.last:
                return
            self.last = key
            line = json.dumps({"t": time.time(), "pid": os.getpid(), "gen": generation,
                               "owned": owned, "state": state}) + "\n"
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)


@dataclass
class MemberLoop:
    """The member's main loop: poll the client, report status, and ``on_tick`` between polls
    (the place where a record-consuming member processes records)."""

    stop: threading.Event
    status: Status
    tick_s: float = 0.1
    on_tick: Callable[[], None] | None = None


def _member_confluent(args: argparse.Namespace, loop: MemberLoop) -> None:
    from confluent_kafka import Consumer

    from aiogroup.observability.telemetry import (
        ConfluentRecorder,
        JsonlTelemetry,
        confluent_generation,
    )

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "partition.assignment.strategy": args.assignor,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": args.heartbeat_ms,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    def revoke(consumer: Any, partitions: list[Any]) -> None:
        _commit_quietly(lambda: consumer.commit(asynchronous=False))  # what was consumed
        time.sleep(args.revoke_ms / 1000)  # the application's further revocation work

    recorder = ConfluentRecorder(telemetry, protocol=args.assignor, group_id=args.group,
                                 on_revoke=revoke)
    consumer.subscribe([args.topic], **recorder.callbacks())
    while not loop.stop.is_set():
        offsets: list[tuple[tuple[str, int], int]] = []
        for m in consumer.consume(500, loop.tick_s):
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is not None or topic is None or partition is None or offset is None:
                continue  # a record (no error) has all three; librdkafka's types allow None
            offsets.append(((topic, partition), offset))
        _processed(telemetry, offsets)
        recorder.observe(consumer)
        generation = confluent_generation(consumer)
        loop.status.write(generation if generation is not None and generation >= 0 else None,
                          len(consumer.assignment()))
        if loop.on_tick is not None:
            loop.on_tick()
    consumer.close()  # revokes (recorded, commits) and leaves the group
    telemetry.close()


def _kafka_python_generation(consumer: Any) -> int | None:
    """kafka-python keeps the generation in its coordinator (no public API)."""
    try:
        generation = int(consumer._coordinator._generation.generation_id)
    except (AttributeError, TypeError, ValueError):
        return None
    return generation if generation >= 0 else None


def _member_kafka_python(args: argparse.Namespace, loop: MemberLoop) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    from aiogroup.observability.telemetry import JsonlTelemetry, KafkaPythonListener

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
    assignor = CooperativeStickyAssignor if args.assignor == COOP else RangePartitionAssignor
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        partition_assignment_strategy=[assignor],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    class Work:
        def on_partitions_revoked(self, revoked: Any) -> None:
            _commit_quietly(consumer.commit)  # what was consumed
            time.sleep(args.revoke_ms / 1000)  # the application's further revocation work

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    listener = KafkaPythonListener(telemetry, Work(),
                                   consumer=consumer, protocol=args.assignor,
                                   group_id=args.group)
    # Know the topic before the first JoinGroup (kafka-python 3.0.12 may otherwise join with no
    # metadata and rejoin; see tests/integration/peer_proc.py).
    for _ in range(100):
        if consumer.partitions_for_topic(args.topic):
            break
    consumer.subscribe([args.topic], listener=listener)
    while not loop.stop.is_set():
        batch = consumer.poll(timeout_ms=int(loop.tick_s * 1000), max_records=500)
        _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                               for tp, records in batch.items() for r in records])
        listener.observe(consumer)
        loop.status.write(_kafka_python_generation(consumer), len(consumer.assignment()))
        if loop.on_tick is not None:
            loop.on_tick()
    consumer.close()
    telemetry.close()


def _commit_quietly(commit: Callable[[], Any]) -> None:
    """A peer's synchronous commit in its revocation callback; nothing to commit is no error."""
    try:
        commit()
    except Exception as exc:  # the peers raise their own types
        print(f"commit in revocation: {exc!r}", file=sys.stderr)


def _processed(telemetry: Any, offsets: Sequence[tuple[tuple[str, int], int]]) -> None:
    """One ``processed`` event per partition of a poll's records (first and last offset)."""
    spans: dict[tuple[str, int], list[int]] = {}
    for tp, offset in offsets:
        span = spans.setdefault(tp, [offset, offset])
        span[0], span[1] = min(span[0], offset), max(span[1], offset)
    for tp, (first, last) in spans.items():
        telemetry.processed(tp, first, last)


def _member_aiogroup(args: argparse.Namespace, loop: MemberLoop) -> None:
    from aiogroup import Consumer
    from aiogroup.client import GroupMember
    from aiogroup.consumer.errors import ConsumerStoppedError
    from aiogroup.observability.telemetry import JsonlTelemetry

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)

    class Work:
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await asyncio.sleep(args.revoke_ms / 1000)  # the application's revocation work

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    async def consume() -> None:
        # aiogroup.Consumer commits what was consumed before a partition is revoked (and on
        # close), then calls the listener.
        consumer = Consumer(
            args.bootstrap, args.group, topics=[args.topic], assignors=[args.assignor],
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            client_id=args.name, telemetry=telemetry, auto_offset_reset="earliest",
            listener=Work() if args.revoke_ms else None,
        )
        closing: asyncio.Future[None] | None = None
        async with consumer:
            member = consumer.member
            while True:
                if loop.stop.is_set() and closing is None:
                    if args.close:
                        break  # close() at the end of the block: revoke, then leave
                    # What a SIGTERM handler does: close() from another task while this
                    # loop reads on (the default shutdown hands off; the loop ends by
                    # itself once the partitions have moved).
                    closing = asyncio.ensure_future(consumer.close())
                generation = member.generation_id
                loop.status.write(generation if generation >= 0 else None,
                                  len(member.assignment), member.state.name)
                try:
                    batch = await consumer.getmany(timeout_ms=int(loop.tick_s * 1000),
                                                   max_records=500)
                except ConsumerStoppedError:
                    break  # handed off and left
                _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                                       for tp, records in batch.items() for r in records])
            if closing is not None:
                await closing
        telemetry.close()

    async def main() -> None:
        member = GroupMember(
            args.bootstrap, args.group, topics=[args.topic], assignors=[args.assignor],
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            client_id=args.name, telemetry=telemetry,
            listener=Work() if args.revoke_ms else None,
        )
        async with member:
            while not loop.stop.is_set():
                generation = member.generation_id
                loop.status.write(generation if generation >= 0 else None, len(member.assignment),
                                  member.state.name)
                if loop.on_tick is not None:
                    loop.on_tick()
                with contextlib.suppress(TimeoutError):  # a status tick, not synchronisation
                    await asyncio.wait_for(member.changed(), loop.tick_s)
            await member.close(hand_off=not args.close)
        telemetry.close()

    asyncio.run(consume() if args.records else main())


def _member_aiokafka(args: argparse.Namespace, loop: MemberLoop) -> None:
    from aiokafka import AIOKafkaConsumer

    from aiogroup.observability.telemetry import AiokafkaListener, JsonlTelemetry

    if args.assignor != RANGE:
        raise SystemExit("aiokafka speaks only the eager protocol: use range")
    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)

    async def main() -> None:
        # Commits by hand in the revocation (aiokafka's auto-commit commits there too, but
        # only what was committed on the interval before), as the peers above do.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name,
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            enable_auto_commit=False, auto_offset_reset="earliest",
        )  # fmt: skip

        class Work:
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    try:
                        await consumer.commit()  # what was consumed
                    except Exception as exc:  # aiokafka raises its own types
                        print(f"commit in revocation: {exc!r}", file=sys.stderr)
                await asyncio.sleep(args.revoke_ms / 1000)  # further revocation work

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        listener = AiokafkaListener(telemetry, Work(), consumer=consumer,
                                    protocol=args.assignor, group_id=args.group)
        consumer.subscribe([args.topic], listener=listener)
        await consumer.start()
        try:
            while not loop.stop.is_set():
                batch = await consumer.getmany(timeout_ms=int(loop.tick_s * 1000),
                                               max_records=500)
                _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                                       for tp, records in batch.items() for r in records])
                generation = listener._generation()
                loop.status.write(generation, len(consumer.assignment()))
                if loop.on_tick is not None:
                    loop.on_tick()
        finally:
            # commits nothing more (manual commits) and leaves; aiokafka runs no revocation
            # callback on stop, so the listener records the release itself
            await listener.stop()
        telemetry.close()

    asyncio.run(main())


def member_main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="bench_rolling_bounce.py member")
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--assignor", choices=[COOP, RANGE], required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--session-ms", type=int, required=True)
    p.add_argument("--heartbeat-ms", type=int, required=True)
    p.add_argument("--telemetry-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--revoke-ms", type=int, default=0)
    p.add_argument("--records", action="store_true", help="consume records")
    p.add_argument("--close", action="store_true",
                   help="aiogroup: SIGTERM closes at once instead of handing off first")
    args = p.parse_args(list(argv))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    loop = MemberLoop(stop, Status(args.status))
    runner = {"aiogroup": _member_aiogroup, "librdkafka": _member_confluent,
              "kafka-python": _member_kafka_python, "aiokafka": _member_aiokafka}[args.kind]
    runner(args, loop)
    return 0


# =========================================================================== the bench


@dataclass
class Member:
    name: str
    kind: str
    process: subprocess.Popen[bytes]
    status: Path

    def last_status(self) -> dict[str, Any] | None:
        try:
            lines = self.status.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        mine = [json.loads(x) for x in lines if x.strip()]
        mine = [x for x in mine if x["pid"] == self.process.pid]
        return mine[-1] if mine else None


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

    @property
    def label(self) -> str:
        return f"{self.spec.name} ({self.broker})"


@contextlib.contextmanager
def embedded_broker_process(partitions: int) -> Iterator[str]:
    """``python -m aiogroup.testing.embedded`` on a free loopback port, stopped by pid;
    topics
    are created on first use with ``partitions`` partitions."""
    from aiogroup.testing.launchers.processes import terminate
    from aiogroup.testing.launchers.tansu import free_port

    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "aiogroup.testing.embedded", "--host", "127.0.0.1",
         "--port", str(port), "--group-min-session-timeout-ms", "1000",
         "--initial-rebalance-delay-ms", "0", "--num-partitions", str(partitions)],
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
            with embedded_broker_process(self.args.partitions) as bootstrap:
                yield bootstrap, lambda name, n: create_by_metadata(bootstrap, name, n)
        elif kind in ("kafka23", "kafka4"):
            from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker

            version = KAFKA4_VERSION if kind == "kafka4" else None
            with KafkaBroker(version=version, quick_jit=False) as kafka:
                yield kafka.bootstrap, lambda name, n: kafka.create_topic(name, n, timeout=120)
        else:
            raise SystemExit(f"unknown broker {kind!r}")

    # -- members

    def start_member(self, run: RunResult, bootstrap: str, topic: str, slot: int) -> Member:
        name = f"m{slot + 1}"
        kind = run.spec.kind_of(slot)
        status = run.events.parent / "status" / f"{name}.jsonl"
        status.parent.mkdir(parents=True, exist_ok=True)
        log = open(run.events.parent / "status" / f"{name}.stderr", "ab")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, str(HERE), "member", "--kind", kind, "--assignor", run.spec.assignor,
             "--bootstrap", bootstrap, "--group", run.group, "--topic", topic, "--name", name,
             "--session-ms", str(self.args.session_ms),
             "--heartbeat-ms", str(self.args.heartbeat_ms),
             "--telemetry-dir", str(run.events), "--status", str(status),
             "--revoke-ms", str(self.args.revoke_ms)]
            + (["--records"] if self.args.rate else [])
            + ([] if run.spec.hand_off else ["--close"]),
            stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()
        return Member(name, kind, process, status)

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
                   timeout: float) -> int | None:
        """Wait until the group is safe to bounce again (as ``aiogroup group watch`` judges)
        and every live member reports the same generation; return that generation."""
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
                self.stop_member(members[slot], run)
                if self.args.restart_delay:
                    time.sleep(self.args.restart_delay)  # the deploy's time to start a process
                members[slot] = self.start_member(run, bootstrap, topic, slot)
                run.final_generation = asyncio.run(self.safe(bootstrap, run.group, members, step))
            run.clock_s = time.monotonic() - began
            run.window = (wall, wall + run.clock_s)
        except (TimeoutError, RuntimeError) as exc:
            run.problems.append(str(exc))
        finally:
            for m in members:
                self.stop_member(m, run)


# =========================================================================== figures


def audit(runs: Sequence[RunResult], out: Path, master: str) -> Any:
    """One Spark audit over every run's events (groups stay separate); returns the session."""
    import warnings

    from aiogroup.tools.audit.audit import run_audit
    from aiogroup.tools.audit.session import build_session

    warnings.simplefilter("ignore", FutureWarning)
    spark = build_session(master, log_level="ERROR", shuffle_partitions=2)
    result = run_audit(spark, [str(r.events) for r in runs], label="rolling bounce")
    for name, df in result.datasets.items():
        df.write.mode("overwrite").parquet(str(out / name))
    return spark


def figures(spark: Any, out: Path, runs: Sequence[RunResult]) -> None:
    """Each run's figures over the generations of its bounce, computed by Spark from the
    audit's datasets (``run.figures``)."""
    from pyspark.sql import functions as F

    rows = [(r.group, r.formed_generation, r.final_generation) for r in runs
            if r.formed_generation is not None and r.final_generation is not None]
    if not rows:
        return
    windows = spark.createDataFrame(rows, "group string, g0 long, g1 long")
    in_bounce = (F.col("generation_id") > F.col("g0")) & (F.col("generation_id") <= F.col("g1"))
    read = spark.read.parquet
    unowned = read(str(out / "unowned_by_generation")).join(windows, "group").where(in_bounce) \
        .groupBy("group").agg(F.sum("unowned_partition_s").alias("unowned_s"),
                              F.max("max_gap_s").alias("max_gap_s"),
                              F.sum("gaps").alias("stops"))
    moves = read(str(out / "moves_by_generation")).join(windows, "group").where(in_bounce) \
        .groupBy("group").agg(F.count(F.lit(1)).alias("rebalances"),
                              F.sum("moved").alias("moved"), F.sum("min_moves").alias("min_moves"))
    overlaps = read(str(out / "overlaps")).groupBy("group").agg(
        F.count(F.lit(1)).alias("overlaps"),
        F.sum(F.col("violation").cast("long")).alias("violations"))
    intervals = read(str(out / "intervals")).join(windows, "group")
    first_release = intervals.where(
        (F.col("end_gen") >= F.col("g0")) & F.col("end_kind").isin("revoked", "lost")
    ).groupBy("group").agg(F.min("end").alias("bounce_start"))
    last_assign = intervals.where(in_bounce).groupBy("group").agg(
        F.max("start").alias("bounce_end"))
    stalls = _stalls(spark, runs)
    table = (windows.select("group").join(unowned, "group", "left").join(moves, "group", "left")
             .join(overlaps, "group", "left").join(first_release, "group", "left")
             .join(last_assign, "group", "left").toPandas())
    by_group = {row["group"]: {k: _num(v) for k, v in row.items() if k != "group"}
                for row in table.to_dict("records")}
    for r in runs:
        row = by_group.get(r.group)
        if row is None:
            continue
        r.figures = {
            "unowned_s": row["unowned_s"],
            "max_gap_s": row["max_gap_s"],
            "stops": int(row["stops"]),
            "rebalances": int(row["rebalances"]),
            "moved": int(row["moved"]),
            "min_moves": int(row["min_moves"]),
            "overlaps": int(row["overlaps"]),
            "violations": int(row["violations"]),
            "bounce_s": row["bounce_end"] - row["bounce_start"],
            "bounce_start": row["bounce_start"],
        }
        if r.group in stalls:
            r.figures["stall_s"], r.figures["processed"] = stalls[r.group]


def _stalls(spark: Any, runs: Sequence[RunResult]) -> dict[str, tuple[float, int]]:
    """Per run: the longest time between consecutive ``processed`` events of one partition
    that overlaps the bounce (first SIGTERM to last "safe"), and the records processed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = [(r.group, *r.window) for r in runs if r.window is not None]
    if not rows:
        return {}
    windows = spark.createDataFrame(rows, "group string, t0 double, t1 double")
    schema = ("type string, ts double, `group` string, topic string, `partition` long, "
              "first long, last long")
    events = spark.read.schema(schema).json([str(r.events) for r in runs]) \
        .where(F.col("type") == "processed")
    by_partition = Window.partitionBy("group", "topic", "partition").orderBy("ts")
    gaps = events.withColumn("prev", F.lag("ts").over(by_partition)).join(windows, "group") \
        .where(F.col("prev").isNotNull() & (F.col("ts") > F.col("t0"))
               & (F.col("prev") < F.col("t1")))
    stall = gaps.groupBy("group").agg(F.max(F.col("ts") - F.col("prev")).alias("stall_s"))
    processed = events.groupBy("group").agg(
        F.sum(F.col("last") - F.col("first") + 1).alias("processed"))
    out: dict[str, tuple[float, int]] = {}
    for row in stall.join(processed, "group").collect():
        out[row["group"]] = (float(row["stall_s"]), int(row["processed"]))
    return out


def _num(value: Any) -> float:
    """A figure from a left join: missing (None, NaN) is 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number


def print_table(runs: Sequence[RunResult]) -> None:
    head = (f"{'run':<34}{'unowned p-s':>12}{'stops':>6}{'max gap':>9}{'stall s':>8}"
            f"{'rebal.':>7}{'moved':>6}{'overlaps':>9}{'bounce s':>9}{'clock s':>8}")
    print(head)
    for r in runs:
        f = r.figures
        if not f:
            print(f"{r.label:<34}  no figures: {'; '.join(r.problems) or 'no data'}")
            continue
        stall = f"{f['stall_s']:.2f}" if "stall_s" in f else "-"
        print(f"{r.label:<34}{f['unowned_s']:>12.1f}{f['stops']:>6}{f['max_gap_s']:>9.2f}"
              f"{stall:>8}{f['rebalances']:>7}"
              f"{f['moved']:>6}{f['overlaps']:>9}{f['bounce_s']:>9.1f}"
              f"{r.clock_s:>8.1f}")
        for problem in r.problems:
            print(f"    ! {problem}")


def verdicts(runs: Sequence[RunResult]) -> list[str]:
    """The targets, per broker: cooperative aiogroup >= 10x less unowned partition-seconds than
    eager aiogroup, and no more than librdkafka cooperative (same broker, same bench run)."""
    out: list[str] = []
    for broker in sorted({r.broker for r in runs}):
        by = {r.spec.name: r.figures for r in runs if r.broker == broker and r.figures}
        coop = by.get("aiogroup-coop")
        if coop is None:
            continue
        eager = by.get("aiogroup-eager")
        if eager is not None:
            ratio = eager["unowned_s"] / max(coop["unowned_s"], 1e-9)
            out.append(f"{broker}: aiogroup eager / cooperative unowned partition-seconds = "
                       f"{eager['unowned_s']:.1f} / {coop['unowned_s']:.1f} = {ratio:.1f}x "
                       f"({'PASS' if ratio >= 10 else 'MISS'}: target >= 10x)")
        if eager is not None and "stall_s" in eager and "stall_s" in coop:
            out.append(f"{broker}: longest stall of a partition, aiogroup eager / cooperative = "
                       f"{eager['stall_s']:.2f} s / {coop['stall_s']:.2f} s = "
                       f"{eager['stall_s'] / max(coop['stall_s'], 1e-9):.1f}x")
        close = by.get("aiogroup-coop-close")
        if eager is not None and close is not None:
            ratio = eager["unowned_s"] / max(close["unowned_s"], 1e-9)
            out.append(f"{broker}: aiogroup eager / cooperative closing without hand-off = "
                       f"{eager['unowned_s']:.1f} / {close['unowned_s']:.1f} = {ratio:.1f}x")
        aiokafka = by.get("aiokafka-eager")
        for name, ours in (("default close()", coop), ("stop, then close()", close)):
            if aiokafka is None or ours is None:
                continue
            line = (f"{broker}: aiokafka / aiogroup {name}: unowned partition-seconds "
                    f"{aiokafka['unowned_s']:.1f} / {ours['unowned_s']:.1f} = "
                    f"{aiokafka['unowned_s'] / max(ours['unowned_s'], 1e-9):.1f}x")
            if "stall_s" in aiokafka and "stall_s" in ours:
                line += (f"; longest stall {aiokafka['stall_s']:.2f} s / {ours['stall_s']:.2f} s"
                         f" = {aiokafka['stall_s'] / max(ours['stall_s'], 1e-9):.1f}x")
            out.append(line)
        rdk = by.get("librdkafka-coop")
        if rdk is not None:
            ratio = rdk["unowned_s"] / max(coop["unowned_s"], 1e-9)
            out.append(f"{broker}: librdkafka cooperative / aiogroup cooperative = "
                       f"{rdk['unowned_s']:.1f} / {coop['unowned_s']:.1f} = {ratio:.2f}x "
                       f"({'PASS' if ratio >= 1 else 'MISS'}: target >= 1, no worse)")
        bad = [r.label for r in runs if r.broker == broker and r.figures.get("violations")]
        out.append(f"{broker}: double ownership: "
                   + ("none (PASS)" if not bad else f"in {', '.join(bad)} (FAIL)"))
    return out


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
        with bench.broker(broker) as (bootstrap, create_topic):
            for spec in specs:
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
         "problems": r.problems} for r in runs], indent=1))


def load_runs(work: Path) -> list[RunResult]:
    return [RunResult(x["broker"], run_spec(x["run"]), x["group"], Path(x["events"]),
                      x["formed_generation"], x["final_generation"], x["clock_s"],
                      tuple(x["window"]) if x.get("window") else None, x.get("produced", 0),
                      list(x["problems"]))
            for x in json.loads((work / "runs.json").read_text())]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "member":
        return member_main(argv[1:])
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
