"""Move a live consumer group from the classic protocol to the consumer protocol (KIP-848), one
member at a time, and back (docs/migration.md).

The group is N member processes of this script (``member`` mode: an :class:`aiogroup.Consumer`
that processes records and, on SIGTERM, stops reading and calls ``close()``, which commits what
was processed, revokes and leaves). The run:

``up``    each member in turn is stopped (SIGTERM) and started again with
          ``group_protocol="consumer"``. Kafka 4.x converts the classic group into a consumer group
          when the first one joins, and serves the classic members that remain through
          JoinGroup/SyncGroup, the broker assigning.
``down``  the reverse: each member comes back with ``group_protocol="classic"``; the group is
          converted back into a classic group when the last consumer-protocol member leaves.

Before every restart it waits until the group is safe, as ``aiogroup group watch --until safe``
judges it: every member present, every partition assigned exactly once, nothing left to revoke
or to receive, and the members' own callbacks agreeing with the broker. It prints where the
migration stands at each step (the group's type, how many members speak which protocol) and at
the end checks, from the members' callbacks, that no partition was ever owned by two members at
once and, when it produced records itself, that every record was processed at least once.

The members use the default assignor, cooperative-sticky. Its aiogroup leader marks the
assignments with entries no topic can have, not with user data, so Kafka converts the group.
Kafka refuses to convert a group whose assignments carry a custom assignor's user data; the
script says so before it moves anyone (``aiogroup group describe`` too), and such a group must
be stopped and started again with the consumer protocol, or moved to a built-in assignor first.

Usage::

    python examples/migrate_consumer_protocol.py --kafka                  # starts Kafka 4.1.1
    python examples/migrate_consumer_protocol.py --bootstrap 127.0.0.1:9092 --group billing \\
        --topic orders:6 --members 4 --direction up
    python examples/migrate_consumer_protocol.py member --bootstrap ... --group ... --topic ... \\
        --name billing-1 --group-protocol consumer        # one member, as the run starts them

Exit status: 0 when the group moved and every check held, 1 when a check broke or a step did
not settle (each problem is printed), 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

if __name__ == "__main__" and not __package__:  # run as a script: the repository's root
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from aiogroup import Consumer
from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import AiogroupError
from aiogroup.inspector import GroupDescription, GroupInspector, GroupWatch, format_partitions
from aiogroup.migration import MigrationStatus, Stage, Upgrade, migration_status
from aiogroup.protocol.types import TopicPartition
from examples.rolling_upgrade import (
    BOLD,
    DIM,
    GREEN,
    RED,
    CallbackRecord,
    OwnershipLedger,
    Screen,
    topic_spec,
)

__all__ = [
    "DIRECTIONS",
    "MemberProcess",
    "MigrationAborted",
    "MigrationReport",
    "StepRecord",
    "expected_group_type",
    "main",
    "migrate",
    "revoked_by_others",
    "run_member",
    "unowned_seconds",
]

Partitions = frozenset[TopicPartition]
#: The protocol each direction moves the members to.
DIRECTIONS: Mapping[str, tuple[str, str]] = {"up": ("classic", "consumer"),
                                             "down": ("consumer", "classic")}  # fmt: skip


def expected_group_type(protocols: Sequence[str], previous: str) -> str:
    """The group's type once members speaking ``protocols`` are in it (Kafka 4.x): a consumer
    group as long as one member speaks the consumer protocol; back to classic when none does
    (and the group is not empty: an empty group keeps its type until its next member)."""
    if "consumer" in protocols:
        return "consumer"
    return "classic" if protocols else previous


# --------------------------------------------------------------------------- one member


class _Report:
    """The member's rebalance listener: one JSON line per callback on stdout."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.consumer: Consumer | None = None

    def _emit(self, kind: str, partitions: Partitions) -> None:
        member = self.consumer.member if self.consumer is not None else None
        _say({"event": kind, "at": time.monotonic(),
              "partitions": sorted([tp.topic, tp.partition] for tp in partitions),
              "member_id": member.member_id if member is not None else "",
              "generation": member.generation_id if member is not None else -1})  # fmt: skip

    def on_partitions_assigned(self, partitions: Partitions) -> None:
        self._emit("assigned", partitions)

    def on_partitions_revoked(self, partitions: Partitions) -> None:
        self._emit("revoked", partitions)

    def on_partitions_lost(self, partitions: Partitions) -> None:
        self._emit("lost", partitions)


def _say(event: Mapping[str, Any]) -> None:
    print(json.dumps(event), flush=True)


async def run_member(args: argparse.Namespace) -> int:
    """One member: process records until SIGTERM, then ``close()``. Prints JSON lines."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    telemetry = None
    if args.telemetry:
        from aiogroup.observability.telemetry import JsonlTelemetry

        telemetry = JsonlTelemetry(args.telemetry, member_name=args.name, group_id=args.group)
        telemetry.emit("started", kind="aiogroup-consumer")
    report = _Report(args.name)
    consumer = report.consumer = Consumer(
        args.bootstrap, args.group, topics=[args.topic], listener=report,
        group_protocol=args.group_protocol, client_id=args.name,
        session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
        auto_offset_reset="earliest", auto_commit_interval_ms=1000, fetch_max_wait_ms=100,
        max_poll_records=200, telemetry=telemetry,
    )  # fmt: skip
    _say({"event": "starting", "protocol": args.group_protocol, "pid": os.getpid()})
    code = 0
    try:
        async with consumer:
            told = ""
            while not stop.is_set():
                if consumer.member.member_id != told:  # known once joined (or generated)
                    told = consumer.member.member_id
                    _say({"event": "member", "member_id": told})
                reading = asyncio.ensure_future(consumer.getmany(timeout_ms=200))
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({reading, stopping},
                                             return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
                stopping.cancel()
                if reading not in done:
                    reading.cancel()
                    with contextlib.suppress(asyncio.CancelledError, AiogroupError):
                        await reading
                    break
                batch = {tp: (rs[0].offset, rs[-1].offset)
                         for tp, rs in reading.result().items() if rs}  # fmt: skip
                if batch:
                    if telemetry is not None:
                        for tp, (first, last) in batch.items():
                            telemetry.processed(tp, first, last)
                    _say({"event": "processed", "ranges": [[tp.topic, tp.partition, *r]
                                                           for tp, r in batch.items()]})
            # SIGTERM: leaving the block closes the consumer (commit, revoke, leave).
    except AiogroupError as exc:
        _say({"event": "error", "error": f"{type(exc).__name__}: {exc}"})
        code = 1
    finally:
        if telemetry is not None:
            telemetry.close()
    _say({"event": "closed"})
    return code


# --------------------------------------------------------------------------- the run's members


@dataclass
class MemberProcess:
    """One member process of the run, and what its JSON lines told."""

    name: str
    protocol: str
    incarnation: int
    proc: asyncio.subprocess.Process
    member_id: str = ""
    owned: Partitions = frozenset()
    errors: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @property
    def owner(self) -> str:
        return f"{self.name}#{self.incarnation}"


class MigrationAborted(AiogroupError):
    """A step did not settle in time; the run stops there (the reason is in the report)."""


@dataclass(frozen=True, slots=True)
class StepRecord:
    """The group once settled after one step (a member stopped, or started again)."""

    label: str
    #: The member that moved (None: the start).
    member: str | None
    group_type: str
    stage: Stage
    consumer_members: int
    classic_members: int
    epoch: int | None
    #: From the step's first action (a SIGTERM, a start) until the group was safe: seconds
    #: (monotonic) and how long that took.
    began: float
    seconds: float
    #: What each live member owned once safe (its callbacks agreeing with the broker).
    owned: Mapping[str, Partitions] = field(default_factory=dict)

    @property
    def ended(self) -> float:
        return self.began + self.seconds


def unowned_seconds(records: Sequence[CallbackRecord], began: float, ended: float) -> float:
    """Partition-seconds, between ``began`` and ``ended``, during which a partition had no owner
    (from its revocation, or loss, to its next assignment, as the callbacks tell)."""
    moves: dict[TopicPartition, list[tuple[float, int]]] = {}
    for r in records:
        for tp in r.partitions:
            moves.setdefault(tp, []).append((r.at, 1 if r.kind == "assigned" else -1))
    total = 0.0
    for events in moves.values():
        owners, since = 0, began
        for at, change in sorted(events):
            if owners == 0:
                total += max(0.0, min(at, ended) - max(since, began))
            owners += change
            since = at
        if owners == 0:
            total += max(0.0, ended - max(since, began))
    return total


def revoked_by_others(records: Sequence[CallbackRecord], step: StepRecord) -> int:
    """Partitions the members that stayed revoked during ``step`` (KIP-429 and KIP-848: only
    what moves to the member that came back; nothing when one leaves)."""
    return sum(len(r.partitions) for r in records
               if r.kind == "revoked" and r.member != step.member
               and step.began <= r.at <= step.ended)  # fmt: skip


@dataclass
class MigrationReport:
    group_id: str
    directions: tuple[str, ...]
    steps: list[StepRecord] = field(default_factory=list)
    ledger: OwnershipLedger = field(default_factory=OwnershipLedger)
    problems: list[str] = field(default_factory=list)
    produced: dict[TopicPartition, int] = field(default_factory=dict)
    processed: dict[TopicPartition, set[int]] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def all_problems(self) -> list[str]:
        return self.ledger.problems + self.problems

    @property
    def ok(self) -> bool:
        return not self.all_problems

    def unprocessed(self) -> dict[TopicPartition, int]:
        """Records produced by the run that no member processed (yet)."""
        missing = {tp: end - len(self.processed.get(tp, set()) & set(range(end)))
                   for tp, end in self.produced.items()}  # fmt: skip
        return {tp: n for tp, n in missing.items() if n}


@dataclass
class _Run:
    bootstrap: str
    group_id: str
    topic: str
    partitions: int
    report: MigrationReport
    screen: Screen
    inspector: GroupInspector
    step_timeout: float
    session_ms: Mapping[str, int]
    heartbeat_ms: int
    telemetry_dir: str | None
    poll: float = 0.2
    live: dict[str, MemberProcess] = field(default_factory=dict)
    incarnations: dict[str, int] = field(default_factory=dict)
    records: list[CallbackRecord] = field(default_factory=list)
    group_type: str = "classic"
    #: Where the group stood when it last settled.
    status: MigrationStatus | None = None

    async def start(self, name: str, protocol: str) -> None:
        number = self.incarnations[name] = self.incarnations.get(name, 0) + 1
        argv = [
            sys.executable, os.path.abspath(__file__), "member", "--bootstrap", self.bootstrap,
            "--group", self.group_id, "--topic", self.topic, "--name", name,
            "--group-protocol", protocol, "--session-ms", str(self.session_ms[protocol]),
            "--heartbeat-ms", str(self.heartbeat_ms),
        ]  # fmt: skip
        if self.telemetry_dir:
            argv += ["--telemetry", self.telemetry_dir]
        proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        member = MemberProcess(name, protocol, number, proc)
        member.reader = asyncio.ensure_future(self._read(member))
        self.live[name] = member
        self.screen.line(name, "started", f"pid {proc.pid}, group_protocol={protocol!r}")

    async def stop(self, name: str) -> None:
        member = self.live.pop(name)
        self.screen.line(name, "stopping", self.screen.paint(
            "SIGTERM: close() commits what was processed, revokes and leaves", DIM))
        member.proc.send_signal(signal.SIGTERM)
        code = await member.proc.wait()
        if member.reader is not None:
            await member.reader
        if code != 0:
            self.report.problems.append(f"{member.owner} exited with {code}: {member.errors}")
        if member.owned:
            self.report.problems.append(
                f"{member.owner} exited without revoking {format_partitions(member.owned)}")
        self.screen.line(name, "exited", f"status {code}")

    async def _read(self, member: MemberProcess) -> None:
        assert member.proc.stdout is not None
        async for raw in member.proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            self._event(member, event)

    def _event(self, member: MemberProcess, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        if kind == "processed":
            for t, p, first, last in event["ranges"]:
                self.report.processed.setdefault(TopicPartition(t, p), set()).update(
                    range(first, last + 1))
        elif kind == "member":
            member.member_id = str(event["member_id"])
        elif kind == "error":
            member.errors.append(str(event["error"]))
            self.screen.line(member.name, "error", str(event["error"]), RED)
        elif kind in ("assigned", "revoked", "lost"):
            parts = frozenset(TopicPartition(t, p) for t, p in event["partitions"])
            member.member_id = str(event.get("member_id") or member.member_id)
            if kind == "assigned":
                member.owned |= parts
            else:
                member.owned -= parts
            self.records.append(CallbackRecord(
                at=float(event["at"]), member=member.name, incarnation=member.incarnation,
                generation_id=int(event.get("generation", -1)),
                protocol=RebalanceProtocol.COOPERATIVE, kind=kind, partitions=parts))  # fmt: skip
            if parts or kind != "assigned":
                sign = "+" if kind == "assigned" else "-"
                self.screen.line(member.name, kind,
                                 f"{sign}{format_partitions(parts)}   owns "
                                 f"{format_partitions(member.owned)}",
                                 GREEN if kind == "assigned" else RED)  # fmt: skip

    # -- waiting until the group is safe

    def _agrees(self, group: GroupDescription) -> bool:
        """Each live member's callbacks have given it what the broker says it is assigned."""
        broker = {m.member_id: m.assignment for m in group.members}
        return all(m.member_id in broker and broker[m.member_id] == m.owned
                   for m in self.live.values())  # fmt: skip

    async def settle(self, label: str, member: str | None, began: float) -> StepRecord:
        """Poll the group (the ``aiogroup group watch`` judgement) until it is safe with the
        live members; MigrationAborted after ``step_timeout`` seconds."""
        watch = GroupWatch(expected_members=len(self.live))
        last: list[str] = ["not described yet"]
        while True:
            dead = [m.owner for m in self.live.values() if m.proc.returncode is not None]
            if dead:
                raise MigrationAborted(f"{label}: {', '.join(dead)} exited on its own")
            try:
                group = await self.inspector.describe()
            except AiogroupError as exc:  # the coordinator moved: ask again
                last = [f"cannot describe the group: {exc}"]
            else:
                a = watch.observe(group)
                last = list(a.reasons) or ["the members' callbacks lag the broker"]
                if a.safe and len(group.members) == len(self.live) and self._agrees(group):
                    return self._settled(label, member, group, began)
            if time.monotonic() - began > self.step_timeout:
                raise MigrationAborted(
                    f"{label}: the group did not settle within {self.step_timeout:g}s "
                    f"({'; '.join(last)})")
            await asyncio.sleep(self.poll)  # the pace of polling the coordinator, bounded

    def _settled(self, label: str, member: str | None, group: GroupDescription,
                 began: float) -> StepRecord:  # fmt: skip
        status = migration_status(group)
        if group.group_type != self.group_type:
            self.screen.print(self.screen.paint(
                f"  * converted: {self.group_type} group -> {group.group_type} group", BOLD))
        want = expected_group_type([m.protocol for m in self.live.values()], self.group_type)
        if group.group_type != want:
            self.report.problems.append(
                f"{label}: the broker has a {group.group_type} group; with members speaking "
                f"{sorted(m.protocol for m in self.live.values())} Kafka makes it {want}")
        self.group_type = group.group_type
        self.status = status
        epoch = group.group_epoch if group.consumer_protocol else group.generation
        record = StepRecord(label, member, group.group_type, status.stage,
                            len(status.consumer_members), len(status.classic_members), epoch,
                            began, time.monotonic() - began,
                            {m.name: m.owned for m in self.live.values()})  # fmt: skip
        self.report.steps.append(record)
        self._show(record, status, group)
        return record

    def _show(self, step: StepRecord, status: MigrationStatus, group: GroupDescription) -> None:
        s = self.screen
        where = f"epoch {step.epoch}" if group.consumer_protocol else f"generation {step.epoch}"
        n = len(group.all_partitions)
        s.print(f"  {s.paint('✓', GREEN)} safe after {step.seconds:.1f}s: {group.group_type} "
                f"group {group.state}, {where}, {n}/{n} partitions assigned once, nothing left "
                "to revoke")
        s.print(f"    {s.paint(status.summary, BOLD)}")
        by_id = {m.member_id: m for m in group.members}
        for m in sorted(self.live.values(), key=lambda m: m.name):
            d = by_id.get(m.member_id)
            speaks = d.member_type if d is not None and d.member_type else m.protocol
            s.print(f"      {m.name:<10} {speaks:<9} {format_partitions(m.owned)}")


# --------------------------------------------------------------------------- the run


async def _produce(bootstrap: str, topic: str, partitions: int, rate: float,
                   produced: dict[TopicPartition, int], stop: asyncio.Event) -> None:  # fmt: skip
    """Records into every partition, ``rate`` a second, until ``stop``; ``produced`` holds
    each partition's end offset as acknowledged."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks="all")
    await producer.start()
    try:
        n = 0
        while not stop.is_set():
            p = n % partitions
            meta = await producer.send_and_wait(topic, b"record %d" % n, partition=p)
            tp = TopicPartition(topic, p)
            produced[tp] = max(produced.get(tp, 0), meta.offset + 1)
            n += 1
            with contextlib.suppress(TimeoutError):  # the production pace, or the stop
                await asyncio.wait_for(stop.wait(), 1 / rate)
    finally:
        await producer.stop()


async def migrate(
    bootstrap: str,
    *,
    group_id: str | None = None,
    topic: str = "orders",
    partitions: int = 6,
    members: int = 3,
    directions: Sequence[str] = ("up", "down"),
    produce_rate: float = 0.0,
    step_timeout: float = 60.0,
    session_ms: Mapping[str, int] | None = None,
    heartbeat_ms: int = 300,
    telemetry_dir: str | None = None,
    out: TextIO | None = None,
    colour: bool = False,
) -> MigrationReport:
    """Start ``members`` member processes on the protocol ``directions[0]`` moves from, then
    move them one at a time in each direction, checking every step; returns the report. Every
    member process is stopped on return. ``session_ms``: each protocol's session timeout (the
    consumer protocol's must be the broker's: ``group.consumer.session.timeout.ms`` or the
    group's ``consumer.session.timeout.ms``)."""
    for d in directions:
        if d not in DIRECTIONS:
            raise MigrationAborted(f"direction must be 'up' or 'down', not {d!r}")
    group_id = group_id or f"migrate-{uuid.uuid4().hex[:8]}"
    names = [f"member-{i}" for i in range(1, members + 1)]
    screen = Screen(out or sys.stdout, colour, names)
    report = MigrationReport(group_id, tuple(directions))
    arrow = " -> ".join([DIRECTIONS[directions[0]][0], *(DIRECTIONS[d][1] for d in directions)])
    screen.print(screen.paint(f"migration of group {group_id}: {arrow}", BOLD))
    screen.print(f"{members} members, topic {topic}[{partitions}], bootstrap {bootstrap}"
                 + (f", records produced at {produce_rate:g}/s" if produce_rate else ""))
    stop_producing = asyncio.Event()
    producer: asyncio.Task[None] | None = None
    started = time.monotonic()
    async with GroupInspector(bootstrap, group_id, client_id="migrate-watch") as inspector:
        run = _Run(bootstrap, group_id, topic, partitions, report, screen, inspector,
                   step_timeout, {"classic": 6000, "consumer": 45000, **(session_ms or {})},
                   heartbeat_ms, telemetry_dir)  # fmt: skip
        run.group_type = DIRECTIONS[directions[0]][0]
        try:
            if produce_rate:
                producer = asyncio.ensure_future(_produce(
                    bootstrap, topic, partitions, produce_rate, report.produced, stop_producing))
            first = DIRECTIONS[directions[0]][0]
            screen.banner(f"start: {members} members on the {first} protocol")
            began = time.monotonic()
            for name in names:
                await run.start(name, first)
            await run.settle("start", None, began)
            _check_upgrade(run, first)
            total = len(directions) * members
            step = 0
            for direction in directions:
                target = DIRECTIONS[direction][1]
                for name in names:
                    step += 1
                    screen.banner(f"step {step}/{total} ({direction}): {name} moves to the "
                                  f"{target} protocol")  # fmt: skip
                    began = time.monotonic()
                    await run.stop(name)
                    await run.settle(f"{step}. {name} stopped", name, began)
                    began = time.monotonic()
                    await run.start(name, target)
                    await run.settle(f"{step}. {name} back, {target}", name, began)
            if producer is not None:
                stop_producing.set()
                await producer
                await _all_processed(run)
        except MigrationAborted as exc:
            report.problems.append(str(exc))
            screen.print(screen.paint(f"  ✗ {exc}", RED))
        finally:
            stop_producing.set()
            if producer is not None and not producer.done():
                await producer
            screen.banner("closing")
            for name in sorted(run.live):
                await run.stop(name)
    for record in sorted(run.records, key=lambda r: r.at):
        report.ledger.record(record)
    report.seconds = time.monotonic() - started
    _summary(screen, report)
    return report


def _check_upgrade(run: _Run, first: str) -> None:
    """Before anyone moves up: would Kafka convert this classic group at all?"""
    status = run.status
    if first != "classic" or status is None:
        return
    if status.group_type != "classic":
        raise MigrationAborted(f"the group is already a {status.group_type} group")
    if status.upgrade is Upgrade.BLOCKED:
        raise MigrationAborted("Kafka would refuse to convert the group: "
                               + "; ".join(status.blockers))
    run.screen.print(f"    {status.advice}")


async def _all_processed(run: _Run) -> None:
    """Wait (bounded) until every record the run produced was processed by some member."""
    began = time.monotonic()
    while run.report.unprocessed():
        if time.monotonic() - began > run.step_timeout:
            raise MigrationAborted(f"records never processed: {run.report.unprocessed()}")
        await asyncio.sleep(run.poll)  # the members' progress, polled with a bound
    total = sum(run.report.produced.values())
    run.screen.print(f"  {run.screen.paint('✓', GREEN)} all {total} records produced during "
                     "the run were processed")


def _summary(screen: Screen, report: MigrationReport) -> None:
    screen.banner("summary")
    records = report.ledger.records
    screen.print(f"{'step':<30}{'group':<10}{'stage':<10}{'consumer':>9}{'classic':>8}"
                 f"{'safe after':>11}{'unowned':>9}{'revoked':>8}")  # fmt: skip
    for s in report.steps:
        unowned = unowned_seconds(records, s.began, s.ended)
        screen.print(f"{s.label:<30}{s.group_type:<10}{s.stage.value:<10}{s.consumer_members:>9}"
                     f"{s.classic_members:>8}{s.seconds:>10.1f}s{unowned:>8.1f}s"
                     f"{revoked_by_others(records, s):>8}")  # fmt: skip
    screen.print("(unowned: partition-seconds without an owner; revoked: partitions the members "
                 "that stayed revoked)")  # fmt: skip
    lost = sum(len(r.partitions) for r in report.ledger.records if r.kind == "lost")
    screen.print(f"\n{len(report.ledger.records)} callbacks, {lost} partitions lost, "
                 f"{len(report.steps)} steps in {report.seconds:.1f}s")
    if report.produced:
        total = sum(report.produced.values())
        missing = sum(report.unprocessed().values())
        screen.print(f"{total} records produced, {missing} never processed")
        if missing:
            report.problems.append(f"{missing} records never processed")
    if report.ok:
        screen.print(screen.paint("every check held: no partition was ever owned by two members "
                                  "at once", GREEN))  # fmt: skip
    else:
        for problem in report.all_problems:
            screen.print(screen.paint(f"  ! {problem}", RED))


# --------------------------------------------------------------------------- command line


def _kafka(topic: str, partitions: int, group: str, heartbeat_ms: int,
           session_ms: int) -> Any:  # fmt: skip
    """Start Kafka 4.1.1 here (``aiogroup.testing``'s launcher: Java 17, jars from Maven
    Central), with the topic, and the group's consumer-protocol session and heartbeat lowered
    to the example's pace (group configs, KIP-848)."""
    from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker

    kafka = KafkaBroker(version=KAFKA4_VERSION)
    kafka.start()
    try:
        kafka.create_topic(topic, partitions)
        kafka.run_tool(
            "kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter",
            "--entity-type", "groups", "--entity-name", group, "--add-config",
            f"consumer.session.timeout.ms={session_ms},"
            f"consumer.heartbeat.interval.ms={heartbeat_ms}",
        )  # fmt: skip
    except BaseException:
        kafka.stop()
        raise
    return kafka


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="migrate_consumer_protocol.py",
        description="Move a live group between the classic and the consumer protocol (KIP-848), "
                    "one member at a time.",
    )  # fmt: skip
    where = p.add_mutually_exclusive_group()
    where.add_argument("--bootstrap", help="HOST:PORT of a Kafka 4.x broker (topic created if "
                                           "missing)")  # fmt: skip
    where.add_argument("--kafka", action="store_true",
                       help="start Kafka 4.1.1 on this machine for the run (Java 17)")
    p.add_argument("--group", help="the group id (default: a fresh one)")
    p.add_argument("--topic", type=topic_spec, default=("orders", 6), help="NAME[:PARTITIONS]")
    p.add_argument("--members", type=int, default=3, help="group size (default 3)")
    p.add_argument("--direction", choices=["up", "down", "both"], default="both",
                   help="up: classic -> consumer; down: the reverse; both (default): up, then "
                        "down")  # fmt: skip
    p.add_argument("--produce", type=float, default=None, metavar="RATE",
                   help="records a second to produce meanwhile (default: 50 with --kafka, else "
                        "none)")  # fmt: skip
    p.add_argument("--step-timeout", type=float, default=60.0, help="seconds per step")
    p.add_argument("--heartbeat-ms", type=int, default=300,
                   help="classic members' heartbeat; with --kafka also the group's "
                        "consumer.heartbeat.interval.ms")  # fmt: skip
    p.add_argument("--session-ms", type=int, default=6000, help="classic members' session")
    p.add_argument("--consumer-session-ms", type=int, default=None,
                   help="the broker's session for consumer-protocol members "
                        "(group.consumer.session.timeout.ms; default 45000, 6000 with --kafka)")
    p.add_argument("--telemetry", metavar="DIR", help="members write JSONL telemetry into DIR")
    p.add_argument("--no-color", action="store_true", help="plain output")
    return p


def _member_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="migrate_consumer_protocol.py member")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic")
    p.add_argument("--session-ms", type=int, default=45000)
    p.add_argument("--heartbeat-ms", type=int, default=3000)
    p.add_argument("--telemetry", metavar="DIR")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example (or, ``member ...``, one member); returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["member"]:
        return asyncio.run(run_member(_member_parser().parse_args(args_list[1:])))
    parser = _parser()
    args = parser.parse_args(args_list)
    if args.members < 2:
        parser.error("--members must be at least 2")
    if not (args.bootstrap or args.kafka):
        parser.error("give --bootstrap HOST:PORT, or --kafka to start Kafka 4.1.1 here")
    topic, partitions = args.topic
    group = args.group or f"migrate-{uuid.uuid4().hex[:8]}"
    consumer_session = args.consumer_session_ms or (6000 if args.kafka else 45000)
    rate = args.produce if args.produce is not None else (50.0 if args.kafka else 0.0)
    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    stop: Callable[[], None] = lambda: None  # noqa: E731 - nothing to stop without --kafka
    bootstrap = args.bootstrap
    try:
        if args.kafka:
            print("starting Kafka 4.1.1 ...", flush=True)
            kafka = _kafka(topic, partitions, group, args.heartbeat_ms, consumer_session)
            bootstrap, stop = kafka.bootstrap, kafka.stop
        else:
            asyncio.run(_ensure_topic(bootstrap, topic, partitions))
        report = asyncio.run(migrate(
            bootstrap, group_id=group, topic=topic, partitions=partitions, members=args.members,
            directions=("up", "down") if args.direction == "both" else (args.direction,),
            produce_rate=rate, step_timeout=args.step_timeout, heartbeat_ms=args.heartbeat_ms,
            session_ms={"classic": args.session_ms, "consumer": consumer_session},
            telemetry_dir=args.telemetry, colour=colour,
        ))  # fmt: skip
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a broker that cannot be reached, Kafka that cannot start, ...
        print(f"migrate_consumer_protocol: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        stop()
    return 0 if report.ok else 1


async def _ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    except Exception as exc:  # it exists already: keep it
        if "TopicAlreadyExists" not in type(exc).__name__:
            raise
    finally:
        await admin.close()


if __name__ == "__main__":
    sys.exit(main())
