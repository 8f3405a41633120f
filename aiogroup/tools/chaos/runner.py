"""The chaos scenario runner: a seeded plan of members and faults, carried out on a broker.

One run:

1. a fresh topic (6-16 partitions) and group; a producer writes a trickle of records;
2. the initial members start, each in its own process (:mod:`aiogroup.tools.chaos.member`), of
   mixed kinds (aiogroup ``GroupMember``, ``aiogroup.Consumer``, librdkafka, kafka-python;
   on request the Java and franz-go peers);
3. the plan's events, one every 1-4 s for ``duration`` seconds: joins, graceful leaves
   (SIGTERM), SIGKILL, SIGSTOP past the session, SIGSTOP timed to land while an aiogroup
   member is rejoining (the member's own ``state`` lines tell when), connection cuts and broker
   restarts;
4. the settle phase: until every partition is held by exactly one live member (or a bound
   passes, long enough for a correct group to hand out withheld partitions);
5. every member is closed (SIGTERM), and the checker (:mod:`aiogroup.tools.chaos.checker`) judges
   the run from the logs.

With ``group_protocol="consumer"`` (``--group-protocol consumer``) the group is a KIP-848
consumer group: the members speak ConsumerGroupHeartbeat (the kinds that can), the broker
assigns, and the runner sets the group's ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms`` before anyone joins; a pause "while rejoining" lands while
an aiogroup member reconciles (revokes, then acknowledges) or rejoins after being fenced.

Everything about a run follows from its seed (the plan: partitions, members and their kinds,
events, their times, targets and lengths); the timing of the machine does not. Each run
writes ``<out>/<broker>-<seed>/``: ``runner.jsonl`` (the event log: parameters, every
injected event with its wall-clock start and end, member starts and exits, phase ends),
``broker.jsonl`` (the broker's view of the group), ``members/`` (each member's telemetry and
stderr) and ``verdict.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from aiogroup.tools.chaos.brokers import ChaosBroker
from aiogroup.tools.chaos.checker import RunLog, Verdict, check, holdings, read_complete_lines
from aiogroup.tools.chaos.member import CLIENT_OF, DEFAULT_KINDS

__all__ = ["EVENT_KINDS", "ChaosConfig", "Plan", "Step", "make_plan", "run_once"]

#: Event kinds and their weights in a plan.
EVENT_WEIGHTS = {
    "join": 4,
    "leave": 2,
    "kill": 2,
    "stop": 2,
    "stop_rejoining": 3,
    "cut": 2,
    "restart": 1,
}
EVENT_KINDS = tuple(EVENT_WEIGHTS)
#: States of an aiogroup member that count as rejoining (``MemberState`` values).
REJOINING = ("preparing", "joining", "awaiting_metadata", "awaiting_sync")
#: The same under KIP-848's consumer protocol, where a member moves on its own: it rejoins
#: (epoch 0) only after being fenced, and "a rebalance" is its reconciliation (revoking,
#: then acknowledging). A plan's ``joining`` and ``awaiting_sync`` pauses land there.
REJOINING_CONSUMER = ("preparing", "joining", "reconciling")
#: How long a member may take to close after SIGTERM before it is killed (and counted).
CLOSE_BOUND_S = 20.0


@dataclass
class ChaosConfig:
    broker: str
    seed: int
    out: Path
    members: int = 4
    duration: float = 15.0
    partitions: int | None = None
    session_ms: int = 3000
    heartbeat_ms: int = 500
    rebalance_ms: int = 10000
    kinds: tuple[str, ...] = DEFAULT_KINDS
    events: tuple[str, ...] = EVENT_KINDS
    #: ``"consumer"``: KIP-848 (the kinds must speak it, and the broker: Kafka 4.x or the
    #: embedded broker); the group's session and heartbeat interval are then set broker side.
    group_protocol: str = "classic"
    #: Records per second written while the run lasts.
    produce_rate: float = 20.0
    #: Keep the members' telemetry of runs the checker passes.
    keep: bool = False


@dataclass(frozen=True)
class Step:
    """One planned event: ``at`` seconds into the event phase; ``pick`` chooses the target
    among the candidates then (deterministic given the plan); ``length`` is a pause's length;
    ``new_kind`` the kind of a member started; ``state`` the rejoining state a timed pause
    waits for."""

    at: float
    kind: str
    pick: float
    length: float = 0.0
    new_kind: str = ""
    state: str = ""


@dataclass(frozen=True)
class Plan:
    partitions: int
    initial: tuple[str, ...]
    steps: tuple[Step, ...]


def make_plan(config: ChaosConfig, *, can_restart: bool = True, can_cut: bool = True) -> Plan:
    """The seeded plan of a run (see the module doc)."""
    rng = random.Random(config.seed)
    partitions = config.partitions or rng.randint(6, 16)
    kinds = list(config.kinds)
    initial = [rng.choice(kinds) for _ in range(max(1, config.members))]
    aiogroup_kinds = [k for k in kinds if CLIENT_OF[k] == "aiogroup"]
    if aiogroup_kinds and not any(CLIENT_OF[k] == "aiogroup" for k in initial):
        initial[rng.randrange(len(initial))] = rng.choice(aiogroup_kinds)
    weights = {
        k: w
        for k, w in EVENT_WEIGHTS.items()
        if k in config.events and (k != "restart" or can_restart) and (k != "cut" or can_cut)
    }
    session = config.session_ms / 1000
    steps: list[Step] = []
    t = rng.uniform(0.5, 2.0)
    while t < config.duration and weights:
        kind = rng.choices(list(weights), weights=list(weights.values()))[0]
        steps.append(
            Step(
                at=round(t, 3),
                kind=kind,
                pick=rng.random(),
                length=round(session * rng.uniform(1.3, 2.5), 3),
                new_kind=rng.choice(kinds),
                state=rng.choice(["joining", "joining", "awaiting_sync", "rejoining"]),
            )
        )
        t += rng.uniform(1.0, 4.0)
    return Plan(partitions, tuple(initial), tuple(steps))


# -- members ----------------------------------------------------------------------------------


@dataclass
class _Proc:
    name: str
    kind: str
    process: subprocess.Popen[bytes]
    telemetry: Path
    stopped: bool = False
    leaving: bool = False
    exited: bool = False
    #: Where reading its telemetry file got to, and what was read.
    offset: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def client(self) -> str:
        return CLIENT_OF[self.kind]

    def alive(self) -> bool:
        return not self.exited and self.process.poll() is None

    def tail(self) -> list[dict[str, Any]]:
        """New telemetry events (complete lines only)."""
        lines, self.offset = read_complete_lines(self.telemetry, self.offset)
        new = []
        for line in lines:
            try:
                new.append(json.loads(line))
            except ValueError:
                continue
        self.events.extend(new)
        return new


class _Run:
    """One run in progress (see the module doc)."""

    def __init__(self, config: ChaosConfig, broker: ChaosBroker, plan: Plan) -> None:
        self.config = config
        self.broker = broker
        self.plan = plan
        self.dir = config.out / f"{config.broker}-{config.seed}"
        self.members_dir = self.dir / "members"
        self.members_dir.mkdir(parents=True, exist_ok=True)
        self.tag = uuid.uuid4().hex[:6]
        self.topic = f"chaos-topic-{config.seed}-{self.tag}"
        self.group = f"chaos-group-{config.seed}-{self.tag}"
        self.procs: dict[str, _Proc] = {}
        self.runner_events: list[dict[str, Any]] = []
        self._log = (self.dir / "runner.jsonl").open("w", encoding="utf-8")
        self._broker_log = (self.dir / "broker.jsonl").open("w", encoding="utf-8")
        self._timers: list[tuple[float, Callable[[], None]]] = []
        self._watchers: list[Callable[[], bool]] = []
        self._threads: list[threading.Thread] = []
        self._seq = 0
        self._restarting = False
        self._last_truth = 0.0
        self._producer_stop = threading.Event()
        self._producer: threading.Thread | None = None
        self.produced = 0

    # -- logs -------------------------------------------------------------------------------

    def log(self, type_: str, t: float | None = None, **fields: Any) -> dict[str, Any]:
        event = {"type": type_, "t": time.time() if t is None else t, **fields}
        self.runner_events.append(event)
        self._log.write(json.dumps(event, default=str) + "\n")
        self._log.flush()
        return event

    def poll_truth(self, force: bool = False) -> None:
        now = time.monotonic()
        interval = 0.25 if self.broker.kind == "embedded" else 0.5
        if not force and now - self._last_truth < interval:
            return
        self._last_truth = now
        for e in self.broker.truth(self.group):
            self._broker_log.write(json.dumps({"ts": time.time(), **e}, default=str) + "\n")
        self._broker_log.flush()

    # -- members ----------------------------------------------------------------------------

    def start_member(self, kind: str) -> _Proc:
        self._seq += 1
        name = f"m{self._seq:02d}-{kind}"
        cfg = self.config
        argv = [
            sys.executable,
            "-m",
            "aiogroup.tools.chaos.member",
            kind,
            "--bootstrap",
            self.broker.bootstrap,
            "--group",
            self.group,
            "--topic",
            self.topic,
            "--name",
            name,
            "--dir",
            str(self.members_dir),
            "--session-ms",
            str(cfg.session_ms),
            "--heartbeat-ms",
            str(cfg.heartbeat_ms),
            "--rebalance-ms",
            str(cfg.rebalance_ms),
            "--group-protocol",
            cfg.group_protocol,
        ]
        with (self.members_dir / f"{name}.stderr").open("wb") as err:
            process = subprocess.Popen(
                argv,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # a terminal's Ctrl-C reaches the runner only
            )
        proc = _Proc(name, kind, process, self.members_dir / f"{name}.0000.jsonl")
        self.procs[name] = proc
        self.log("member_start", member=name, kind=kind, client=proc.client, pid=process.pid)
        return proc

    def live(self, *, aiogroup_only: bool = False) -> list[_Proc]:
        """Members running, not paused, not leaving (sorted by name: deterministic picks)."""
        return [
            p
            for p in sorted(self.procs.values(), key=lambda p: p.name)
            if p.alive()
            and not p.stopped
            and not p.leaving
            and (not aiogroup_only or p.client == "aiogroup")
        ]

    def reap(self) -> None:
        """Notice members that ended on their own (or after a SIGTERM / SIGKILL)."""
        for p in self.procs.values():
            if p.exited:
                continue
            code = p.process.poll()
            if code is None:
                continue
            p.exited = True
            self.log(
                "member_exit",
                member=p.name,
                returncode=code,
                expected=p.leaving,
                signal="SIGKILL" if code == -signal.SIGKILL else None,
            )

    def kill(self, p: _Proc, *, forced: bool = False) -> None:
        if p.process.poll() is None:
            p.process.kill()
        p.process.wait(10)
        p.exited = True
        t = time.time()  # after it died: nothing it wrote is later
        self.log(
            "member_exit",
            t=t,
            member=p.name,
            returncode=p.process.returncode,
            expected=True,
            signal="SIGKILL",
            forced=forced,
            bound=CLOSE_BOUND_S if forced else None,
        )

    def pause(self, p: _Proc, length: float, kind: str, **detail: Any) -> None:
        os.kill(p.process.pid, signal.SIGSTOP)
        p.stopped = True
        started = time.time()

        def resume() -> None:
            if p.process.poll() is None:
                os.kill(p.process.pid, signal.SIGCONT)
            p.stopped = False
            self.log("inject", t=started, t_end=time.time(), kind=kind, member=p.name, **detail)

        self.at(time.monotonic() + length, resume)

    def at(self, when: float, fn: Callable[[], None]) -> None:
        self._timers.append((when, fn))

    # -- records ----------------------------------------------------------------------------

    def start_producer(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(
            bootstrap_servers=self.broker.bootstrap,
            client_id="chaos-producer",
            linger_ms=20,
            acks=1,
            retries=5,
            request_timeout_ms=10_000,
        )
        partitions = self.plan.partitions
        rate = max(1.0, self.config.produce_rate)
        for i in range(10 * partitions):  # something to process from the start
            producer.send(self.topic, b"chaos", partition=i % partitions)
        producer.flush(timeout=30)

        def produce() -> None:
            i = 0
            try:
                while not self._producer_stop.wait(1 / rate):  # the producer's pace
                    try:
                        producer.send(self.topic, b"chaos", partition=i % partitions)
                        self.produced += 1
                    except Exception:
                        pass  # the broker restarting: records are not what is judged
                    i += 1
            finally:
                producer.close(timeout=5)

        self._producer = threading.Thread(target=produce, name="chaos-producer", daemon=True)
        self._producer.start()

    def stop_producer(self) -> None:
        self._producer_stop.set()
        if self._producer is not None:
            self._producer.join(15)

    # -- the loop ---------------------------------------------------------------------------

    def tick(self) -> None:
        """One pass: due timers, watchers, exits, new telemetry, the broker's view."""
        now = time.monotonic()
        due = [fn for when, fn in self._timers if when <= now]
        self._timers = [(w, fn) for w, fn in self._timers if w > now]
        for fn in due:
            fn()
        for p in self.procs.values():
            p.tail()
        self._watchers = [w for w in self._watchers if not w()]
        self.reap()
        self.poll_truth()

    def busy(self) -> bool:
        """Events still under way (a pause to end, a watch, a restart)."""
        return bool(self._timers or self._watchers or self._restarting)

    def run_loop(self, until: Callable[[], bool], bound: float) -> bool:
        deadline = time.monotonic() + bound
        while time.monotonic() < deadline:
            self.tick()
            if until():
                return True
            time.sleep(0.02)  # the runner's polling pace
        return False

    def formed(self) -> bool:
        """Every live member joined, and every partition is held by exactly one of them."""
        live = [p for p in self.procs.values() if p.alive()]
        joined = all(any(e.get("type") == "joined" for e in p.events) for p in live)
        return joined and self.converged()

    def converged(self) -> bool:
        """Every partition held by exactly one live member, from the telemetry so far."""
        run = RunLog(
            {"topic": self.topic, "partitions": self.plan.partitions},
            list(self.runner_events),
            {p.name: list(p.events) for p in self.procs.values()},
        )
        owners: dict[tuple[str, int], int] = {}
        for name, hs in holdings(run).items():
            p = self.procs.get(name)
            if p is None or not p.alive():
                continue
            for h in hs:
                if h.end == float("inf") or h.end_kind == "open":
                    owners[h.partition] = owners.get(h.partition, 0) + 1
        return all(owners.get((self.topic, i), 0) == 1 for i in range(self.plan.partitions))

    # -- events -----------------------------------------------------------------------------

    def inject(self, step: Step) -> None:
        if step.kind in ("leave", "kill", "stop") and len(self.live()) < 3:
            # Too few members to take one away: a join keeps the chaos going instead.
            step = dataclasses.replace(step, kind="join")
        handler = getattr(self, f"_do_{step.kind}")
        handler(step)

    def _skip(self, step: Step, why: str) -> None:
        self.log("inject", kind=step.kind, skipped=True, reason=why)

    def _pick(self, candidates: Sequence[_Proc], step: Step) -> _Proc:
        return candidates[min(len(candidates) - 1, int(step.pick * len(candidates)))]

    def _max_members(self) -> int:
        return len(self.plan.initial) + 3

    def _do_join(self, step: Step) -> None:
        if len([p for p in self.procs.values() if p.alive()]) >= self._max_members():
            self._skip(step, "at the member limit")
            return
        p = self.start_member(step.new_kind)
        self.log("inject", kind="join", member=p.name)

    def _take_one(self, step: Step) -> _Proc | None:
        """The running member a leave or kill takes away (marked leaving), or None."""
        live = self.live()
        if len(live) < 2:
            self._skip(step, "would leave no member")
            return None
        p = self._pick(live, step)
        p.leaving = True
        return p

    def _do_leave(self, step: Step) -> None:
        p = self._take_one(step)
        if p is None:
            return
        t = time.time()
        p.process.send_signal(signal.SIGTERM)
        self.log("inject", t=t, kind="leave", member=p.name)
        deadline = time.monotonic() + CLOSE_BOUND_S

        def watch() -> bool:
            if p.process.poll() is not None:
                return True
            if time.monotonic() > deadline:
                self.kill(p, forced=True)
                return True
            return False

        self._watchers.append(watch)

    def _do_kill(self, step: Step) -> None:
        p = self._take_one(step)
        if p is None:
            return
        t = time.time()
        self.kill(p)
        self.log("inject", t=t, kind="kill", member=p.name)

    def _do_stop(self, step: Step) -> None:
        live = self.live()
        if len(live) < 2:
            self._skip(step, "would leave no member running")
            return
        self.pause(self._pick(live, step), step.length, "stop")

    def _do_stop_rejoining(self, step: Step) -> None:
        """Pause an aiogroup member while it is rejoining: start a member to make the group
        rebalance, watch the target's state lines, SIGSTOP it as soon as one shows the
        state the step asks for."""
        targets = self.live(aiogroup_only=True)
        if not targets or len(self.live()) < 2:
            self._skip(step, "no aiogroup member to pause, or it is the only one running")
            return
        target = self._pick(targets, step)
        wanted = self._rejoining_states(step.state)
        trigger = self.start_member(step.new_kind)
        since = time.time()
        seen = len(target.events)
        bound = 15.0 if self.broker.kind == "tansu" else 8.0
        deadline = time.monotonic() + bound

        def watch() -> bool:
            nonlocal seen
            if not target.alive() or target.stopped or target.leaving:
                self._skip(step, f"{target.name} went away before it rejoined")
                return True
            fresh, seen = target.events[seen:], len(target.events)
            for e in fresh:
                if e.get("type") == "state" and e.get("state") in wanted and e["ts"] >= since:
                    self.pause(
                        target,
                        step.length,
                        "stop_rejoining",
                        state=e["state"],
                        state_at=e["ts"],
                        trigger=trigger.name,
                    )
                    return True
            if time.monotonic() > deadline:
                self._skip(step, f"{target.name} showed no {step.state} state within {bound} s")
                return True
            return False

        self._watchers.append(watch)

    def _rejoining_states(self, state: str) -> tuple[str, ...]:
        """The states of an aiogroup member a ``stop_rejoining`` step waits for."""
        if self.config.group_protocol == "consumer":
            return REJOINING_CONSUMER if state == "rejoining" else ("reconciling",)
        return REJOINING if state == "rejoining" else (state,)

    def _do_cut(self, step: Step) -> None:
        live = self.live()
        if not live:
            self._skip(step, "no member")
            return
        p = self._pick(live, step)
        t = time.time()
        count = self.broker.cut(p.name)
        self.log("inject", t=t, t_end=time.time(), kind="cut", member=p.name, connections=count)

    def _do_restart(self, step: Step) -> None:
        if not self.broker.can_restart:
            self._skip(step, f"{self.broker.kind} cannot restart")
            return
        if self._restarting:
            self._skip(step, "a restart is under way")
            return
        self._restarting = True
        t = time.time()

        def restart() -> None:
            error = None
            try:
                self.broker.restart()
            except Exception as exc:  # recorded: the run goes on (members will not)
                error = repr(exc)
            self.log("inject", t=t, t_end=time.time(), kind="restart", error=error)
            self._restarting = False

        thread = threading.Thread(target=restart, name="chaos-restart", daemon=True)
        self._threads.append(thread)
        thread.start()

    # -- phases -----------------------------------------------------------------------------

    def execute(self) -> Verdict:
        cfg = self.config
        plan = self.plan
        session = cfg.session_ms / 1000
        rebalance = cfg.rebalance_ms / 1000
        self.log(
            "run_start",
            broker=cfg.broker,
            seed=cfg.seed,
            topic=self.topic,
            group=self.group,
            partitions=plan.partitions,
            session_ms=cfg.session_ms,
            heartbeat_ms=cfg.heartbeat_ms,
            rebalance_ms=cfg.rebalance_ms,
            duration=cfg.duration,
            group_protocol=cfg.group_protocol,
            plan=asdict(plan),
        )
        try:
            self.broker.create_topic(self.topic, plan.partitions)
            if cfg.group_protocol == "consumer":
                # KIP-848: the session and the heartbeat interval are the group's, set broker
                # side before anyone joins; the members are told the same session (the
                # KAFKA-7026 rule of aiogroup's members).
                self.broker.set_consumer_group_config(
                    self.group, session_ms=cfg.session_ms, heartbeat_ms=cfg.heartbeat_ms
                )
            self.start_producer()
            for kind in plan.initial:
                self.start_member(kind)
            formed = self.run_loop(self.formed, 30.0 + (20.0 if cfg.broker == "tansu" else 0))
            self.log("group_formed", converged=formed)
            begin = time.monotonic()
            for step in plan.steps:
                due = begin + step.at
                self.run_loop(lambda: time.monotonic() >= due, cfg.duration + 60)  # noqa: B023
                self.inject(step)
            self.run_loop(lambda: not self.busy(), 120.0)
            self.log("events_done")
            # Long enough for a correct group to hand out withheld partitions (checker bound).
            settle = session + max(session, rebalance) + 12.0
            if cfg.broker == "tansu":
                settle += 4 * session
            stable_since: list[float] = []

            def settled() -> bool:
                if not self.formed():
                    stable_since.clear()
                    return False
                stable_since.append(time.monotonic())
                return stable_since[-1] - stable_since[0] >= 1.0

            done = self.run_loop(settled, settle)
            self.poll_truth(force=True)
            self.log("settle_end", converged=done)
        finally:
            self.close_all()
            self.stop_producer()
            for thread in self._threads:
                thread.join(60)
            self._log.close()
            self._broker_log.close()
        verdict = check(RunLog.load(self.dir))
        if verdict.ok and not cfg.keep:
            for path in self.members_dir.glob("*"):
                path.unlink()
            self.members_dir.rmdir()
        return verdict

    def close_all(self) -> None:
        """SIGTERM (after SIGCONT) every member still running; kill those that hang."""
        for p in self.procs.values():
            if p.process.poll() is None:
                p.leaving = True
                os.kill(p.process.pid, signal.SIGCONT)
                p.stopped = False
                p.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + CLOSE_BOUND_S
        while time.monotonic() < deadline and any(
            p.process.poll() is None for p in self.procs.values()
        ):
            self.reap()
            time.sleep(0.05)  # polling the processes with a bound
        for p in self.procs.values():
            if p.process.poll() is None:
                self.kill(p, forced=True)
        self.reap()
        for p in self.procs.values():
            p.tail()


def run_once(config: ChaosConfig, broker: ChaosBroker) -> Verdict:
    """Carry out the run of ``config.seed`` on ``broker`` and judge it."""
    started = time.monotonic()
    plan = make_plan(config, can_restart=broker.can_restart, can_cut=broker.can_cut)
    verdict = _Run(config, broker, plan).execute()
    verdict.wall_s = round(time.monotonic() - started, 1)
    path = config.out / f"{config.broker}-{config.seed}" / "verdict.json"
    path.write_text(json.dumps(verdict.to_dict(), indent=1))
    return verdict
