"""The ownership checker of the chaos runs: judges one run from its event logs, without Spark.

Input (see :class:`RunLog`): the members' telemetry files (one JSON Lines schema for aiogroup,
librdkafka and kafka-python members, :mod:`aiogroup.observability.telemetry`), the runner's event
log (what
was injected, when, and how each member process ended) and, where the broker tells, the
broker's view of the group.

Definitions. They follow the Spark audit's (docs/audit.md, "Definitions") where they coincide,
and say where they differ.

* **Holding.** A member holds a partition from the *start* of the assigned callback that gave
  it (the earliest moment it may fetch) until the *end* of the revoked or lost callback that
  took it (it may still process or commit inside), as in the audit. aiogroup members also write
  what they may act on (``acting`` events): a holding opens when the partition enters that set
  if that is before the callback, and it **ends at a session lapse** (``reason: "lapse"``, at the
  session deadline): from then on the member acts on nothing (KAFKA-7026, docs/safety.md) and a
  later lost callback only tells the application. It opens again if the coordinator answers
  within the generation (``proof``). A holding also ends when the member's process ends: its
  ``closed`` event, or the moment the runner saw it die (SIGKILL, a crash).
* **Double ownership.** Two members' holdings of one partition intersect (ends before starts
  at equal times, so a hand-over at one instant is no overlap). Each episode is attributed:
  to the earlier holder's client if its holding did not end in a revocation (it was lost,
  lapsed late, or the process died or kept it: a zombie) or if the runner paused or cut that
  member shortly before; otherwise to the client of the leader that assigned the partition to
  the later holder while the earlier still held it (KIP-429 2d), or ``unknown``.
* **Acting.** What a member did with a partition: records handed to the application
  (``processed``, stamped when the poll returned) and commits (``offsets_committed``, at the time
  the commit was sent). Acting on a partition at a moment the member does not hold it is
  *acting without holding* (the actor's fault); acting on a partition another member holds at
  that moment is *acting on another's* (attributed as the double ownership it is part of, or
  to the actor if it did not hold the partition itself).
  An aiogroup member's commit of a partition inside the revoked callback that takes it is not
  acting without holding (KIP-429: commit what was processed before it moves), even if the
  partition left its acting set first (a lapse, then the answer that revokes it); it is acting
  on another's if someone else holds the partition then.
* **Unowned at the end.** Partitions nobody holds when the run's settle phase ends. **Stranded**
  if the group had been quiet (no join, callback, leader round or acting change, no broker-side
  change, no injected event) for longer than the bound in which a correct group hands every
  partition out (the withheld-partition follow-up: session + max(session, rebalance) timeouts,
  plus a margin); **waiting** otherwise. A stranded partition is attributed to the client of the
  last generation's leader.
* **Convergence time.** From the end of the last injected event to the last change of holdings,
  if at the end every partition is held by exactly one live member; otherwise the run did not
  converge.
* **Crashes.** A member process that ended on its own with a non-zero code, wrote an ``error``
  event, or did not finish a clean close within the runner's bound; a rebalance callback that
  raised.

Known broker deviations (Tansu, docs/brokers.md) are marked on the violations they explain and
never counted against a client.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Holding",
    "RunLog",
    "Verdict",
    "Violation",
    "check",
    "holdings",
]

Event = dict[str, Any]
Partition = tuple[str, int]

#: Kinds of violation, in the order the reports list them.
VIOLATION_KINDS = (
    "double_ownership",
    "acting_on_other",
    "acting_unowned",
    "stranded",
    "crash",
    "callback_order",
)
INF = math.inf


def _partitions(field_value: Any) -> list[Partition]:
    """``{"topic": [p, ...]}`` (the telemetry schema) as a sorted list of partitions."""
    out: list[Partition] = []
    if isinstance(field_value, Mapping):
        for topic, ps in field_value.items():
            out.extend((str(topic), int(p)) for p in ps)
    return sorted(out)


def _fmt(p: Partition) -> str:
    return f"{p[0]}:{p[1]}"


# -- input ------------------------------------------------------------------------------------


@dataclass
class RunLog:
    """Everything one run wrote: ``meta`` (the run's parameters), the runner's events, each
    member's telemetry events (by member name) and the broker's view of the group."""

    meta: dict[str, Any]
    runner: list[Event] = field(default_factory=list)
    members: dict[str, list[Event]] = field(default_factory=dict)
    broker: list[Event] = field(default_factory=list)

    @classmethod
    def load(cls, directory: str | Path) -> RunLog:
        """Read a run directory written by the runner (``runner.jsonl``, ``members/``,
        ``broker.jsonl``). Malformed lines (a member killed mid-write) are skipped."""
        root = Path(directory)
        runner = _read_jsonl(root / "runner.jsonl")
        meta = next((e for e in runner if e.get("type") == "run_start"), {})
        members: dict[str, list[Event]] = defaultdict(list)
        for path in sorted((root / "members").glob("*.jsonl")):
            for e in _read_jsonl(path):
                name = e.get("member")
                if isinstance(name, str):
                    members[name].append(e)
        return cls(dict(meta), runner, dict(members), _read_jsonl(root / "broker.jsonl"))


def read_complete_lines(path: Path, offset: int) -> tuple[list[str], int]:
    """The complete lines written to ``path`` after byte ``offset`` (a line still being
    written waits for the next call), and the offset to read from next time."""
    if not path.exists():
        return [], offset
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n")
    if end < 0:
        return [], offset
    return data[: end + 1].decode("utf-8", "replace").splitlines(), offset + end + 1


def _read_jsonl(path: Path) -> list[Event]:
    if not path.exists():
        return []
    events: list[Event] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue  # a line cut short by SIGKILL
        if isinstance(e, dict):
            events.append(e)
    return events


# -- holdings ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Holding:
    """One member's holding of one partition (see the module doc)."""

    member: str
    client: str
    partition: Partition
    start: float
    end: float
    start_kind: str  # assigned | acting | proof
    end_kind: str  # revoked | lost | lapse | closed | killed | exited | open
    generation: int | None

    def covers(self, t: float) -> bool:
        return self.start <= t <= self.end

    def strictly_covers(self, t: float) -> bool:
        return self.start < t < self.end


@dataclass
class _Member:
    name: str
    client: str
    kind: str | None
    events: list[Event]
    ended_at: float
    end_kind: str  # closed | killed | exited | open


def _members(run: RunLog) -> dict[str, _Member]:
    exits = {e["member"]: e for e in run.runner if e.get("type") == "member_exit"}
    starts = {e["member"]: e for e in run.runner if e.get("type") == "member_start"}
    names = set(run.members) | set(starts)
    out: dict[str, _Member] = {}
    for name in sorted(names):
        events = sorted(run.members.get(name, []), key=lambda e: (e.get("pid", 0), e["seq"]))
        client = str(
            next((e.get("client") for e in events if e.get("client")), None)
            or starts.get(name, {}).get("client")
            or "unknown"
        )
        closed = next((e for e in events if e.get("type") == "closed"), None)
        exit_event = exits.get(name)
        if closed is not None:
            ended_at, end_kind = float(closed["ts"]), "closed"
        elif exit_event is not None:
            ended_at = float(exit_event["t"])
            end_kind = "killed" if exit_event.get("signal") == "SIGKILL" else "exited"
        else:
            ended_at, end_kind = INF, "open"
        kind = starts.get(name, {}).get("kind")
        out[name] = _Member(name, client, kind, events, ended_at, end_kind)
    return out


def holdings(run: RunLog, anomalies: list[Violation] | None = None) -> dict[str, list[Holding]]:
    """Every member's holdings (see the module doc), by member name. Callback-order anomalies
    (a partition assigned twice, released without being held) go to ``anomalies``."""
    result: dict[str, list[Holding]] = {}
    for m in _members(run).values():
        result[m.name] = _member_holdings(m, anomalies)
    return result


def _member_holdings(m: _Member, anomalies: list[Violation] | None) -> list[Holding]:
    """Holdings of one member. Peers hold from their assigned callbacks; aiogroup members
    from their acting set (a partition assigned while the session lapsed is never acted on:
    KAFKA-7026), until the revoked or lost callback ends, the session lapses, or the process
    ends. The callbacks are checked for order either way."""
    out: list[Holding] = []
    open_: dict[Partition, tuple[float, str, int | None]] = {}
    by_callbacks: set[Partition] = set()
    acting_based = m.client == "aiogroup"

    def close(p: Partition, t: float, kind: str) -> None:
        start, start_kind, gen = open_.pop(p)
        out.append(Holding(m.name, m.client, p, start, max(t, start), start_kind, kind, gen))

    def anomaly(p: Partition, t: float, what: str) -> None:
        if anomalies is not None:
            anomalies.append(
                Violation("callback_order", _fmt(p), (m.name,), (m.client,), m.client, t, t, what)
            )

    for e in m.events:
        kind = e.get("type")
        gen = e.get("generation_id")
        if kind == "partitions_assigned":
            t = float(e.get("started") or e["ts"])
            for p in _partitions(e.get("partitions")):
                if p in by_callbacks:
                    anomaly(p, t, f"{m.name} was assigned {_fmt(p)} it already owned")
                by_callbacks.add(p)
                if not acting_based and p not in open_:
                    open_[p] = (t, "assigned", gen)
        elif kind in ("partitions_revoked", "partitions_lost"):
            t = float(e.get("ended") or e["ts"])
            end = "revoked" if kind == "partitions_revoked" else "lost"
            for p in _partitions(e.get("partitions")):
                if p not in by_callbacks:
                    anomaly(p, t, f"{m.name} released {_fmt(p)} it did not own ({end})")
                by_callbacks.discard(p)
                if p in open_:
                    close(p, t, end)
        elif kind == "acting" and acting_based:
            reason = e.get("reason")
            parts = set(_partitions(e.get("partitions")))
            if reason == "lapse":
                t = float(e.get("at") or e["ts"])
                for p in sorted(open_):
                    close(p, t, "lapse")
            else:
                t = float(e["ts"])
                for p in sorted(parts - set(open_)):
                    open_[p] = (t, "proof" if reason == "proof" else "acting", gen)
        elif kind == "closed":
            by_callbacks.clear()
            for p in sorted(open_):
                close(p, float(e["ts"]), "closed")
    end_kind = "open" if m.end_kind == "closed" else m.end_kind
    for p in sorted(open_):
        close(p, m.ended_at, end_kind)
    return sorted(out, key=lambda h: (h.partition, h.start))


# -- verdict ----------------------------------------------------------------------------------


@dataclass
class Violation:
    """One violation. ``blame`` is the client at fault (``aiogroup``, ``librdkafka``,
    ``kafka-python``) or ``unknown``; ``deviation`` names a known broker deviation that explains
    it (then it counts against no client)."""

    kind: str
    partition: str | None
    members: tuple[str, ...]
    clients: tuple[str, ...]
    blame: str
    start: float | None
    end: float | None
    detail: str
    deviation: str | None = None
    count: int = 1

    @property
    def against_aiogroup(self) -> bool:
        """Counted against aiogroup: blamed on it, or unattributed with an aiogroup member
        involved; never when a known broker deviation explains it."""
        if self.deviation is not None:
            return False
        return self.blame == "aiogroup" or (self.blame == "unknown" and "aiogroup" in self.clients)


@dataclass
class Verdict:
    """The checker's judgement of one run."""

    broker: str
    seed: int | None
    violations: list[Violation] = field(default_factory=list)
    #: Partitions nobody held at the end that the group was still handing out.
    waiting: list[str] = field(default_factory=list)
    converged: bool = False
    #: Seconds from the end of the last injected event to the last change of holdings.
    convergence_s: float | None = None
    events: dict[str, int] = field(default_factory=dict)
    members: dict[str, int] = field(default_factory=dict)
    processed: dict[str, int] = field(default_factory=dict)
    commits: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Wall-clock seconds the run took (set by the runner).
    wall_s: float | None = None

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Verdict:
        """The inverse of :meth:`to_dict` (a ``verdict.json`` read back)."""
        names = {f.name for f in dataclasses.fields(cls)}
        vnames = {f.name for f in dataclasses.fields(Violation)}
        fields_ = {k: v for k, v in raw.items() if k in names and k != "violations"}
        verdict = cls(**fields_)
        for v in raw.get("violations", []):
            args = {k: v[k] for k in vnames if k in v}
            args["members"] = tuple(args.get("members", ()))
            args["clients"] = tuple(args.get("clients", ()))
            verdict.violations.append(Violation(**args))
        return verdict

    def of(self, kind: str) -> list[Violation]:
        return [v for v in self.violations if v.kind == kind]

    def against(self, client: str) -> list[Violation]:
        if client == "aiogroup":
            return [v for v in self.violations if v.against_aiogroup]
        return [v for v in self.violations if v.blame == client and v.deviation is None]

    @property
    def ok(self) -> bool:
        """Nothing counted against aiogroup."""
        return not self.against("aiogroup")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ok"] = self.ok
        for v, raw in zip(self.violations, d["violations"], strict=True):
            raw["against_aiogroup"] = v.against_aiogroup
        return d

    def summary(self) -> str:
        """One line: the run, its verdict, and counts by kind (aiogroup's in brackets)."""
        parts = []
        for kind in VIOLATION_KINDS:
            found = self.of(kind)
            if found:
                ours = sum(1 for v in found if v.against_aiogroup)
                parts.append(f"{kind}={len(found)}[{ours}]")
        conv = "-" if self.convergence_s is None else f"{self.convergence_s:.1f}s"
        return (
            f"{self.broker} seed={self.seed} {'OK' if self.ok else 'FAIL'} "
            f"converged={'yes' if self.converged else 'no'} convergence={conv} "
            f"events={sum(self.events.values())} " + (" ".join(parts) or "no violations")
        )


class _Context:
    """What attribution needs: leaders by generation, pauses and cuts by member."""

    def __init__(self, run: RunLog, members: Mapping[str, _Member]) -> None:
        self.broker = str(run.meta.get("broker", "unknown"))
        self.session_s = float(run.meta.get("session_ms", 3000)) / 1000
        self.members = members
        by_member_id: dict[str, str] = {}
        for m in members.values():
            for e in m.events:
                if e.get("member_id"):
                    by_member_id[str(e["member_id"])] = m.name
        self.by_member_id = by_member_id
        leaders: dict[int, str] = {}
        for m in members.values():
            for e in m.events:
                gen = e.get("generation_id")
                if not isinstance(gen, int) or gen < 0:
                    continue
                if e.get("type") == "leader_round" or (
                    e.get("type") == "joined" and e.get("leader") is True
                ):
                    leaders[gen] = m.name
        for b in run.broker:
            gen, leader = b.get("generation"), b.get("leader")
            if isinstance(gen, int) and leader and leader in by_member_id:
                leaders.setdefault(gen, by_member_id[leader])
        self.leaders = leaders
        #: The members each recorded leader round gave an assignment to, by generation.
        self.round_members: dict[int, set[str]] = {}
        #: What each recorded leader round assigned, by generation and member name.
        self.round_assignments: dict[int, dict[str, set[Partition]]] = {}
        for m in members.values():
            for e in m.events:
                gen = e.get("generation_id")
                assigned = e.get("assignments")
                if e.get("type") == "leader_round" and isinstance(gen, int) and assigned:
                    self.round_members[gen] = {
                        by_member_id.get(str(mid), str(mid)) for mid in assigned
                    }
                    self.round_assignments[gen] = {
                        by_member_id.get(str(mid), str(mid)): set(_partitions(parts))
                        for mid, parts in assigned.items()
                    }
        #: The generations each member joined (its own word: joined events, callbacks).
        self.generations: dict[str, set[int]] = {
            m.name: {
                int(e["generation_id"])
                for e in m.events
                if e.get("type") in ("joined", "leader_round")
                and isinstance(e.get("generation_id"), int)
            }
            for m in members.values()
        }
        # Disturbances the runner caused a member: (member, start, end)
        self.disturbed: list[tuple[str, float, float]] = []
        for e in run.runner:
            if e.get("type") != "inject" or not e.get("member"):
                continue
            if e.get("kind") in ("stop", "stop_rejoining", "cut"):
                start = float(e.get("t", 0.0))
                end = float(e.get("t_end") or start)
                self.disturbed.append((str(e["member"]), start, end))
        #: When each aiogroup member's session lapsed, and when it was told its partitions
        #: were lost (a ``partitions_lost`` callback), by member name.
        self.lapses: dict[str, list[float]] = defaultdict(list)
        self.lost: dict[str, list[float]] = defaultdict(list)
        for m in members.values():
            for e in m.events:
                if e.get("type") == "acting" and e.get("reason") == "lapse":
                    self.lapses[m.name].append(float(e.get("at") or e["ts"]))
                elif e.get("type") == "partitions_lost":
                    self.lost[m.name].append(float(e["ts"]))
        self.broker_restarts = [
            (float(e["t"]), float(e.get("t_end") or e["t"]))
            for e in run.runner
            if e.get("type") == "inject" and e.get("kind") == "restart"
        ]

    def generations_without(self, x: Holding, y: Holding) -> list[int]:
        """Generations after ``x`` began and up to ``y``'s whose leader round (as recorded by
        an aiogroup or kafka-python leader) has no assignment for ``x``'s member at all."""
        if y.generation is None:
            return []
        lo = x.generation if x.generation is not None else -1
        return sorted(
            g
            for g, names in self.round_members.items()
            if lo < g <= y.generation and x.member not in names
        )

    def rejoined_after_lapse(self, h: Holding) -> bool:
        """``h`` opened after its member's session lapsed, with no lost callback in between:
        the broker took the member back under its old member id."""
        lapses = [t for t in self.lapses.get(h.member, ()) if t <= h.start]
        if not lapses:
            return False
        last = max(lapses)
        return not any(last <= t <= h.start for t in self.lost.get(h.member, ()))

    def client(self, member: str) -> str:
        m = self.members.get(member)
        return m.client if m is not None else "unknown"

    def was_disturbed(self, member: str, start: float, end: float) -> bool:
        """The runner paused or cut ``member``, or restarted the broker, between ``start``
        and ``end`` (padded by a session on the left: its effect lasts that long)."""
        lo = start - self.session_s - 1.0
        if any(m == member and s <= end and e >= lo for m, s, e in self.disturbed):
            return True
        return any(s <= end and e >= lo for s, e in self.broker_restarts)


def _blame_overlap(ctx: _Context, x: Holding, y: Holding) -> tuple[str, str]:
    """(client to blame, why) for ``x`` (earlier) still holding when ``y`` began."""
    given = ctx.round_assignments.get(y.generation) if y.generation is not None else None
    if given is not None and y.partition not in given.get(y.member, set()):
        return y.client, (
            f"{y.member} ({y.client}) acted on it in generation {y.generation}, whose leader "
            "did not give it the partition (an old claim)"
        )
    if x.end_kind != "revoked":
        return x.client, f"{x.member} ({x.client}) still held it ({x.end_kind} at end)"
    if y.generation is not None and y.generation not in ctx.generations.get(x.member, ()):
        return x.client, (
            f"{x.member} ({x.client}) held it while not a member of generation {y.generation}, "
            f"in which {y.member} got it"
        )
    if ctx.was_disturbed(x.member, y.start, x.end):
        return x.client, f"{x.member} ({x.client}) was paused or cut and revoked late"
    missed = ctx.generations_without(x, y)
    if missed:
        return x.client, (
            f"{x.member} ({x.client}) kept it although generation {missed[0]} was formed "
            "without it (it was expired and never called lost)"
        )
    leader = ctx.leaders.get(y.generation) if y.generation is not None else None
    if leader is not None:
        return (
            ctx.client(leader),
            f"leader {leader} gave it to {y.member} in generation {y.generation} while "
            f"{x.member} still owned it",
        )
    return "unknown", f"{y.member} got it in generation {y.generation} before {x.member} revoked"


def _deviation(
    ctx: _Context, blame: str, *held: Holding, by_leader: bool = False, why: str = ""
) -> str | None:
    """A known broker deviation explaining a violation blamed on ``blame``, if any. Never one
    blamed on a leader's assignment (``by_leader``): what a leader hands out is its own."""
    if ctx.broker != "tansu" or by_leader:
        return None
    if why and "formed without it" in why:
        return (
            "tansu: a JoinGroup with an expired member id is accepted (docs/brokers.md, "
            "deviation 6), so an expired member is never told its partitions are lost"
        )
    if blame not in ("aiogroup", "unknown"):
        return None
    ours = [h for h in held if h.client == "aiogroup"]
    if any(h.start_kind == "proof" for h in ours):
        return (
            "tansu: a stale heartbeat is answered REBALANCE_IN_PROGRESS, not ILLEGAL_GENERATION "
            "(docs/brokers.md, deviation 6), which aiogroup takes as proof of membership"
        )
    if len(held) == 2:
        x, y = held
        if (
            x.client == "aiogroup"
            and x.end_kind == "lapse"
            and y.generation is not None
            and y.generation not in ctx.generations.get(x.member, ())
        ):
            return (
                "tansu: a rebalance completed without the member's JoinGroup while its session "
                "still ran (docs/brokers.md, deviation 2: JoinGroups are held for half a "
                "session, the rebalance timeout is ignored), so its partitions went to "
                "another member before its session deadline"
            )
    if any(ctx.rejoined_after_lapse(h) for h in ours):
        return (
            "tansu: a JoinGroup with an expired member id is accepted (docs/brokers.md, "
            "deviation 6; Kafka answers UNKNOWN_MEMBER_ID and the member calls lost), so the "
            "member rejoins still claiming the partitions it owned before its session lapsed"
        )
    return None


def check(run: RunLog, *, margin_s: float = 2.0) -> Verdict:
    """Judge one run (see the module doc)."""
    meta = run.meta
    members = _members(run)
    ctx = _Context(run, members)
    anomalies: list[Violation] = []
    held = {name: _member_holdings(m, anomalies) for name, m in members.items()}
    verdict = Verdict(broker=ctx.broker, seed=meta.get("seed"))
    verdict.violations.extend(anomalies)
    by_partition: dict[Partition, list[Holding]] = defaultdict(list)
    for hs in held.values():
        for h in hs:
            by_partition[h.partition].append(h)

    _double_ownership(ctx, by_partition, verdict)
    _acting(ctx, members, held, by_partition, verdict)
    _crashes(run, members, verdict)
    _end_state(run, ctx, members, by_partition, verdict, margin_s)

    verdict.events = dict(
        Counter(
            str(e.get("kind"))
            for e in run.runner
            if e.get("type") == "inject" and not e.get("skipped")
        )
    )
    verdict.members = dict(Counter(m.client for m in members.values()))
    return verdict


def _double_ownership(
    ctx: _Context, by_partition: Mapping[Partition, list[Holding]], verdict: Verdict
) -> None:
    for p, hs in sorted(by_partition.items()):
        ordered = sorted(hs, key=lambda h: (h.start, h.end))
        for i, x in enumerate(ordered):
            for y in ordered[i + 1 :]:
                if y.start >= x.end:
                    break  # sorted by start: no later holding overlaps x either
                if y.member == x.member:
                    continue
                end = min(x.end, y.end)
                blame, why = _blame_overlap(ctx, x, y)
                verdict.violations.append(
                    Violation(
                        "double_ownership",
                        _fmt(p),
                        (x.member, y.member),
                        (x.client, y.client),
                        blame,
                        y.start,
                        end,
                        f"{x.member} held it {x.start:.3f}-{x.end:.3f} ({x.start_kind}/"
                        f"{x.end_kind}), {y.member} from {y.start:.3f}: {why}",
                        _deviation(ctx, blame, x, y, by_leader=why.startswith("leader "), why=why),
                    )
                )


def _actions(m: _Member) -> Iterable[tuple[str, float, Partition]]:
    for e in m.events:
        kind = e.get("type")
        if kind == "processed" and e.get("topic") is not None:
            yield "processed", float(e["ts"]), (str(e["topic"]), int(e["partition"]))
        elif kind == "offsets_committed":
            t = float(e.get("started") or e["ts"])
            for topic, offsets in (e.get("offsets") or {}).items():
                for part in offsets:
                    yield "commit", t, (str(topic), int(part))


def _revoke_windows(m: _Member) -> list[tuple[Partition, float, float]]:
    """An aiogroup member's revoked callbacks: (partition, start, end). A commit of a revoked
    partition inside its own revocation is what KIP-429 expects (commit what was processed,
    before it moves), even when the partition already left the acting set (a lapse, then the
    answer that revokes it); it is acting on another's all the same if someone else holds the
    partition by then (an answer read after a pause)."""
    if m.client != "aiogroup":
        return []
    return [
        (p, float(e["started"]), float(e.get("ended") or e["ts"]))
        for e in m.events
        if e.get("type") == "partitions_revoked" and e.get("started") is not None
        for p in _partitions(e.get("partitions"))
    ]


def _acting(
    ctx: _Context,
    members: Mapping[str, _Member],
    held: Mapping[str, list[Holding]],
    by_partition: Mapping[Partition, list[Holding]],
    verdict: Verdict,
) -> None:
    episodes: dict[tuple[str, str, str, Partition, Holding | None], Violation] = {}
    key: tuple[str, str, str, Partition, Holding | None]
    processed: Counter[str] = Counter()
    for m in members.values():
        own: dict[Partition, list[Holding]] = defaultdict(list)
        for h in held[m.name]:
            own[h.partition].append(h)
        for what, t, p in _actions(m):
            if what == "processed":
                processed[m.client] += 1
            mine = next((h for h in own.get(p, ()) if h.covers(t)), None)
            revoking = what == "commit" and any(
                q == p and lo <= t <= hi for q, lo, hi in _revoke_windows(m)
            )
            if mine is None and not revoking:
                key = ("acting_unowned", m.name, "", p, None)
                found = episodes.get(key)
                if found is not None and found.end is not None and t - found.end < 5.0:
                    found.count += 1
                    found.end = max(found.end, t)
                    continue
                episodes[key] = v = Violation(
                    "acting_unowned",
                    _fmt(p),
                    (m.name,),
                    (m.client,),
                    m.client,
                    t,
                    t,
                    f"{m.name} {what} {_fmt(p)} at {t:.3f} without holding it",
                )
                verdict.violations.append(v)
            for other in by_partition.get(p, ()):
                if other.member == m.name or not other.strictly_covers(t):
                    continue
                key = ("acting_on_other", m.name, other.member, p, other)
                found = episodes.get(key)
                if found is not None:
                    found.count += 1
                    found.end = max(found.end or t, t)
                    continue
                if mine is None:
                    blame, why = m.client, f"{m.name} did not hold it"
                    deviation = None
                else:
                    x, y = (mine, other) if mine.start <= other.start else (other, mine)
                    blame, why = _blame_overlap(ctx, x, y)
                    deviation = _deviation(
                        ctx, blame, x, y, by_leader=why.startswith("leader "), why=why
                    )
                episodes[key] = v = Violation(
                    "acting_on_other",
                    _fmt(p),
                    (m.name, other.member),
                    (m.client, other.client),
                    blame,
                    t,
                    t,
                    f"{m.name} {what} {_fmt(p)} at {t:.3f} while {other.member} held it: {why}",
                    deviation,
                )
                verdict.violations.append(v)
    verdict.processed = dict(processed)
    commits: dict[str, Counter[str]] = defaultdict(Counter)
    for m in members.values():
        for e in m.events:
            if e.get("type") == "offsets_committed":
                commits[m.client]["ok"] += 1
            elif e.get("type") == "commit_failed":
                commits[m.client]["refused_locally" if e.get("local") else "refused"] += 1
    verdict.commits = {c: dict(n) for c, n in commits.items()}


def _crashes(run: RunLog, members: Mapping[str, _Member], verdict: Verdict) -> None:
    for e in run.runner:
        if e.get("type") != "member_exit":
            continue
        name = str(e["member"])
        client = members[name].client if name in members else "unknown"
        why = None
        if e.get("forced"):
            why = f"{name} did not close within {e.get('bound', '?')} s of SIGTERM (killed)"
        elif not e.get("expected") and e.get("returncode") not in (0, None):
            why = f"{name} exited with code {e.get('returncode')}"
        if why is not None:
            t = float(e["t"])
            verdict.violations.append(
                Violation("crash", None, (name,), (client,), client, t, t, why)
            )
    for m in members.values():
        for e in m.events:
            kind = e.get("type")
            t = float(e["ts"])
            if kind in ("error", "client_error"):
                why = f"{m.name}: {kind} {e.get('error')}"
            elif kind in ("partitions_assigned", "partitions_revoked", "partitions_lost") and e.get(
                "error"
            ):
                why = f"{m.name}: {kind} callback raised {e.get('error')}"
            else:
                continue
            verdict.violations.append(
                Violation("crash", None, (m.name,), (m.client,), m.client, t, t, why)
            )


def _end_state(
    run: RunLog,
    ctx: _Context,
    members: Mapping[str, _Member],
    by_partition: Mapping[Partition, list[Holding]],
    verdict: Verdict,
    margin_s: float,
) -> None:
    meta = run.meta
    topic = meta.get("topic")
    count = int(meta.get("partitions") or 0)
    settle = next((e for e in run.runner if e.get("type") == "settle_end"), None)
    if topic is None or settle is None:
        verdict.notes.append("no settle_end in the runner log: end state not judged")
        return
    t_end = float(settle["t"])
    t_last = _last_event_end(run, t_end)
    everything = [(str(topic), p) for p in range(count)]
    owners: dict[Partition, list[str]] = {}
    last_change = -INF
    for p in everything:
        hs = by_partition.get(p, [])
        owners[p] = [h.member for h in hs if h.start <= t_end < h.end]
        for h in hs:
            for t in (h.start, h.end):
                if t <= t_end:
                    last_change = max(last_change, t)
    verdict.converged = all(len(o) == 1 for o in owners.values()) and bool(everything)
    if verdict.converged:
        verdict.convergence_s = max(0.0, last_change - t_last)
    unowned = [p for p, o in owners.items() if not o]
    if not unowned:
        return
    alive = [m for m in members.values() if m.ended_at > t_end and m.events]
    if not alive:
        verdict.notes.append("no member alive at the end: nothing to hand partitions to")
        return
    session = float(meta.get("session_ms", 3000)) / 1000
    rebalance = float(meta.get("rebalance_ms", 10000)) / 1000
    bound = session + max(session, rebalance) + margin_s
    if ctx.broker == "tansu":
        bound += 2 * session  # Tansu holds every JoinGroup for half a session (brokers.md 2)
    quiet_since = max([t_last, _last_group_change(run, members, t_end)], default=t_last)
    top = max(ctx.leaders, default=None)
    leader = ctx.leaders.get(top) if top is not None else None
    for p in unowned:
        if t_end - quiet_since <= bound:
            verdict.waiting.append(_fmt(p))
            continue
        blame = ctx.client(leader) if leader is not None else "unknown"
        verdict.violations.append(
            Violation(
                "stranded",
                _fmt(p),
                (leader,) if leader else (),
                tuple(sorted({m.client for m in alive})),
                blame,
                quiet_since,
                t_end,
                f"{_fmt(p)} held by nobody at the end; the group was quiet for "
                f"{t_end - quiet_since:.1f} s (bound {bound:.1f} s); last generation "
                f"{top} led by {leader or 'an unknown member'}",
            )
        )


#: Member events that mean the group is changing (not records or commits).
_GROUP_EVENTS = frozenset(
    {"joined", "partitions_assigned", "partitions_revoked", "partitions_lost", "leader_round"}
)


def _last_event_end(run: RunLog, t_end: float) -> float:
    """When the last injected event was over: a pause's resume, a restart's end, a leaving
    member's exit; the start of the group if nothing was injected."""
    exits = {e["member"]: float(e["t"]) for e in run.runner if e.get("type") == "member_exit"}
    last = next((float(e["t"]) for e in run.runner if e.get("type") == "group_formed"), -INF)
    for e in run.runner:
        if e.get("type") != "inject" or e.get("skipped"):
            continue
        t = float(e.get("t_end") or e["t"])
        if e.get("kind") in ("leave", "kill") and e.get("member") in exits:
            t = max(t, exits[e["member"]])
        last = max(last, t)
    return min(last, t_end) if last > -INF else t_end


def _last_group_change(run: RunLog, members: Mapping[str, _Member], t_end: float) -> float:
    last = -INF
    for m in members.values():
        for e in m.events:
            kind = e.get("type")
            if kind in _GROUP_EVENTS or (kind == "acting" and e.get("reason") != "lapse"):
                t = float(e["ts"])
                if t <= t_end:
                    last = max(last, t)
    for b in run.broker:
        t = float(b.get("ts", -INF))
        if t <= t_end and b.get("type") in ("group", "coordinator"):
            last = max(last, t)
    return last


def summarize(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    """Totals over runs of one broker (the long run's table row)."""
    events: Counter[str] = Counter()
    totals: dict[str, Counter[str]] = {k: Counter() for k in VIOLATION_KINDS}
    conv = sorted(v.convergence_s for v in verdicts if v.convergence_s is not None)
    failing = [v.seed for v in verdicts if not v.ok]
    for v in verdicts:
        events.update(v.events)
        for x in v.violations:
            who = "aiogroup" if x.against_aiogroup else ("deviation" if x.deviation else x.blame)
            totals[x.kind][who] += 1

    def pct(q: float) -> float | None:
        if not conv:
            return None
        return conv[min(len(conv) - 1, int(q * (len(conv) - 1) + 0.5))]

    members: Counter[str] = Counter()
    processed: Counter[str] = Counter()
    for v in verdicts:
        members.update(v.members)
        processed.update(v.processed)
    return {
        "runs": len(verdicts),
        "members": dict(members),
        "processed": dict(processed),
        "events": dict(events),
        "violations": {k: dict(c) for k, c in totals.items()},
        "not_converged": sum(1 for v in verdicts if not v.converged),
        "waiting": sum(len(v.waiting) for v in verdicts),
        "convergence_s": {"p50": pct(0.5), "p90": pct(0.9), "p99": pct(0.99), "max": pct(1.0)},
        "failing_seeds": failing,
    }
