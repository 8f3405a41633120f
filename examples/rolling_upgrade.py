"""Rolling upgrade of a consumer group from eager ``range`` to ``cooperative-sticky``, and back.

KIP-429 ("Compatibility and Upgrade Path") switches a group's rebalance protocol with two
rolling bounces, one member at a time, so that no partition ever has two owners:

``--direction up`` (eager range -> cooperative-sticky)
  start      every member runs ``[range]``: EAGER, the group's protocol is range
  bounce 1   each member restarts with ``[cooperative-sticky, range]``: still EAGER (a member
             runs only a protocol *all* its assignors support, and range is eager-only); the
             broker's vote moves to cooperative-sticky once every member offers it
  bounce 2   each member restarts with ``[cooperative-sticky]``: COOPERATIVE from then on;
             members not yet bounced stay EAGER and revoke everything, which is safe

``--direction down`` (the way back, also two bounces)
  start      ``[cooperative-sticky]`` everywhere: COOPERATIVE
  bounce 1   ``[cooperative-sticky, range]``: each restarted member runs EAGER again
  bounce 2   ``[range]``: the vote moves to range with the first member that drops
             cooperative-sticky

Every callback is printed as it happens. After every step (a member left, a member rejoined)
the script waits until the group has converged and checks it: the broker's group is Stable in
the members' generation with the protocol Kafka's vote must pick, each member runs the
protocol its assignors allow, every partition is owned exactly once (judged from the callbacks,
in the order they ran, and cross-checked with each member's assignment), no callback reported
lost partitions (nobody was kicked out) and no member id changed under a running member.

Usage::

    python examples/rolling_upgrade.py                       # up, 3 members, embedded broker
    python examples/rolling_upgrade.py --direction down --members 4
    python examples/rolling_upgrade.py --broker 127.0.0.1:9092   # any Kafka (topics created)

Exit status: 0 when every invariant held, 1 when one broke (each problem is printed), 2 for bad
arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TextIO

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.assignors.registry import get_assignor
from aiogroup.client import GroupMember
from aiogroup.errors import AiogroupError, ConfigurationError
from aiogroup.membership import MemberState
from aiogroup.membership.selection import select_protocol
from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = [
    "BOLD",
    "BOTH",
    "COOPERATIVE_STICKY",
    "DEFAULT_TOPICS",
    "DIM",
    "GREEN",
    "PLANS",
    "RANGE",
    "RED",
    "CallbackRecord",
    "Checkpoint",
    "DescribeGroupsProbe",
    "EmbeddedProbe",
    "GroupProbe",
    "GroupSnapshot",
    "OwnershipLedger",
    "Screen",
    "UpgradeAborted",
    "UpgradeReport",
    "expected_group_protocols",
    "main",
    "member_protocol",
    "rolling_upgrade",
    "run_on_embedded_broker",
    "topic_spec",
]

Partitions = frozenset[TopicPartition]
AssignorNames = tuple[str, ...]

RANGE: AssignorNames = ("range",)
BOTH: AssignorNames = ("cooperative-sticky", "range")
COOPERATIVE_STICKY: AssignorNames = ("cooperative-sticky",)

#: The assignors members run at the start, after bounce 1 and after bounce 2.
PLANS: Mapping[str, tuple[AssignorNames, AssignorNames, AssignorNames]] = {
    "up": (RANGE, BOTH, COOPERATIVE_STICKY),
    "down": (COOPERATIVE_STICKY, BOTH, RANGE),
}

DEFAULT_TOPICS: Mapping[str, int] = {"orders": 4, "payments": 3}

_COLOURS = ("\033[36m", "\033[35m", "\033[33m", "\033[34m", "\033[32m", "\033[31m")
RESET, BOLD, DIM, GREEN, RED = "\033[0m", "\033[1m", "\033[2m", "\033[32m", "\033[31m"


# --------------------------------------------------------------------------- what to expect


def member_protocol(assignors: Sequence[str]) -> RebalanceProtocol:
    """The rebalance protocol a member configured with ``assignors`` runs (KIP-429: the
    highest protocol *every* assignor supports)."""
    return select_protocol([get_assignor(name) for name in assignors])


def expected_group_protocols(configs: Sequence[Sequence[str]]) -> frozenset[str]:
    """The protocol(s) Kafka's classic coordinator may pick for members configured so.

    Kafka's vote (``ClassicGroup.selectProtocol``): the candidates are the protocols every
    member offers; each member votes for its first candidate in its own preference order; most
    votes wins. Several names come back only on a tie (the broker breaks it by hash order); an
    empty set means no common protocol (the broker refuses the join with
    INCONSISTENT_GROUP_PROTOCOL).
    """
    if not configs:
        return frozenset()
    candidates = set(configs[0]).intersection(*configs[1:])
    if not candidates:
        return frozenset()
    votes: dict[str, int] = {}
    for config in configs:
        choice = next(name for name in config if name in candidates)
        votes[choice] = votes.get(choice, 0) + 1
    most = max(votes.values())
    return frozenset(name for name, count in votes.items() if count == most)


# --------------------------------------------------------------------------- the broker's view


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """The broker's view of the group: ``state`` as Kafka spells it (``Stable``, ...),
    the chosen ``protocol`` (None before the first generation), ``generation_id`` when the
    broker tells it (DescribeGroups does not), and the member count."""

    state: str
    protocol: str | None
    generation_id: int | None
    members: int


class GroupProbe(Protocol):
    """Reads the group's state from the broker."""

    async def snapshot(self, group_id: str) -> GroupSnapshot: ...


class EmbeddedProbe:
    """Reads the embedded broker's coordinator directly (same event loop, no request)."""

    def __init__(self, broker: Any) -> None:
        self.broker = broker

    async def snapshot(self, group_id: str) -> GroupSnapshot:
        view = self.broker.group(group_id)
        if view is None:
            return GroupSnapshot("Dead", None, None, 0)
        return GroupSnapshot(
            str(view.state), view.protocol_name, int(view.generation_id), len(view.members)
        )


class DescribeGroupsProbe:
    """Asks any Kafka broker: FindCoordinator, then DescribeGroups on the coordinator, each at
    the highest version both sides speak (ApiVersions): a broker closes the connection on a
    version it does not know (Kafka 2.3 on DescribeGroups v4)."""

    def __init__(self, bootstrap: str, *, timeout: float = 10.0) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout

    async def snapshot(self, group_id: str) -> GroupSnapshot:
        from aiogroup.testing.embedded.client import RawClient

        async with RawClient(self.bootstrap, client_id="rolling-upgrade-probe") as client:
            version = await client.version("FindCoordinator")
            values: dict[str, Any] = {"key": group_id, "key_type": 0}
            if version >= 4:  # KIP-699: a batch of keys
                values = {"key_type": 0, "coordinator_keys": [group_id]}
            found = await client.request("FindCoordinator", version, values, timeout=self.timeout)
        if version >= 4:
            found = found.coordinators[0]
        if found.error_code:
            return GroupSnapshot(f"coordinator unknown (error {found.error_code})", None, None, 0)
        async with RawClient(f"{found.host}:{found.port}", client_id="rolling-upgrade-probe") as c:
            answer = await c.request(
                "DescribeGroups",
                None,
                {"groups": [group_id], "include_authorized_operations": False},
                timeout=self.timeout,
            )
        group = answer.groups[0]
        if group.error_code:
            return GroupSnapshot(f"error {group.error_code}", None, None, 0)
        return GroupSnapshot(
            str(group.group_state), group.protocol_data or None, None, len(group.members)
        )


# --------------------------------------------------------------------------- the ledger


@dataclass(frozen=True, slots=True)
class CallbackRecord:
    """One rebalance callback, as it ran (``at`` from ``time.monotonic()``)."""

    at: float
    member: str
    incarnation: int
    generation_id: int
    protocol: RebalanceProtocol
    kind: str  # "assigned", "revoked" or "lost"
    partitions: Partitions

    @property
    def owner(self) -> str:
        return f"{self.member}#{self.incarnation}"


@dataclass
class OwnershipLedger:
    """Who owns what, judged only from callbacks in the order (and at the time) they ran.

    A partition assigned to one member incarnation while another still holds it is owned
    twice; a member that restarts is a new incarnation, so an old one that never revoked is
    caught too. Lost callbacks are problems here: nobody is meant to be kicked out.
    """

    records: list[CallbackRecord] = field(default_factory=list)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def record(self, rec: CallbackRecord) -> None:
        self.records.append(rec)
        if rec.kind == "assigned":
            for tp in sorted(rec.partitions):
                holder = self.owners.get(tp)
                if holder is not None and holder != rec.owner:
                    self.problems.append(
                        f"{_tp(tp)} assigned to {rec.owner} (gen {rec.generation_id}) "
                        f"while {holder} still owned it"
                    )
                self.owners[tp] = rec.owner
            return
        if rec.kind == "lost":
            self.problems.append(
                f"{rec.owner} lost {_fmt(rec.partitions)} in gen {rec.generation_id}: "
                "it was kicked out of the group"
            )
        for tp in sorted(rec.partitions):
            if self.owners.get(tp) == rec.owner:
                del self.owners[tp]
            else:
                self.problems.append(f"{rec.owner} gave up {_tp(tp)}, which it did not own")

    def owned_by(self, owner: str) -> Partitions:
        return frozenset(tp for tp, who in self.owners.items() if who == owner)

    def revoked_since(self, start: int, *, excluding: str | None = None) -> int:
        """Partitions revoked in records ``start:`` (not counting member ``excluding``)."""
        return sum(
            len(r.partitions)
            for r in self.records[start:]
            if r.kind == "revoked" and r.member != excluding
        )


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """The group as it converged after one step (``event``: start, left or rejoined)."""

    bounce: int
    event: str
    member: str | None
    generation_id: int
    group_state: str
    group_protocol: str | None
    expected_group_protocols: frozenset[str]
    assignors: Mapping[str, AssignorNames]
    member_protocols: Mapping[str, RebalanceProtocol]
    expected_member_protocols: Mapping[str, RebalanceProtocol]
    assignment: Mapping[str, Partitions]
    revoked: int
    seconds: float

    @property
    def label(self) -> str:
        if self.event == "start":
            return "start"
        return f"bounce {self.bounce}: {self.member} {self.event}"


@dataclass
class UpgradeReport:
    """Everything the run saw. ``ok`` when no invariant broke."""

    direction: str
    group_id: str
    partitions: Partitions
    checkpoints: list[Checkpoint] = field(default_factory=list)
    ledger: OwnershipLedger = field(default_factory=OwnershipLedger)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def all_problems(self) -> list[str]:
        return self.ledger.problems + self.problems

    @property
    def ok(self) -> bool:
        return not self.all_problems


class UpgradeAborted(AiogroupError):
    """A step could not converge; the run stops there (the reason is in the report)."""


# --------------------------------------------------------------------------- output


def _tp(tp: TopicPartition) -> str:
    return f"{tp.topic}[{tp.partition}]"


def _fmt(partitions: Partitions) -> str:
    if not partitions:
        return "-"
    return " ".join(
        f"{topic}[{','.join(map(str, ps))}]" for topic, ps in group_by_topic(partitions).items()
    )


def _names(assignors: Sequence[str]) -> str:
    return "[" + ", ".join(assignors) + "]"


@dataclass
class Screen:
    """Timestamped, optionally coloured lines: one per member event, banners per step."""

    out: TextIO
    colour: bool
    names: Sequence[str]
    started: float = field(default_factory=time.monotonic)

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{RESET}" if self.colour and code else text

    def print(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    def line(self, who: str, what: str, detail: str = "", code: str = "") -> None:
        elapsed = self.paint(f"{time.monotonic() - self.started:6.2f}s", DIM)
        colour = _COLOURS[self.names.index(who) % len(_COLOURS)] if who in self.names else ""
        self.print(
            f"{elapsed}  {self.paint(f'{who:<9}', colour)} {self.paint(f'{what:<9}', code)}"
            f"  {detail}".rstrip()
        )

    def banner(self, text: str) -> None:
        self.print()
        self.print(self.paint(f"== {text}", BOLD))


# --------------------------------------------------------------------------- members


class _Listener:
    """Prints each callback and feeds the ledger (plain methods: they run on the loop)."""

    def __init__(self, run: _Run, name: str, incarnation: int) -> None:
        self.run = run
        self.name = name
        self.incarnation = incarnation
        self.member: GroupMember | None = None

    def _record(self, kind: str, partitions: Partitions) -> None:
        m = self.member
        rec = CallbackRecord(
            at=time.monotonic(),
            member=self.name,
            incarnation=self.incarnation,
            generation_id=m.generation_id if m is not None else -1,
            protocol=m.protocol if m is not None else RebalanceProtocol.EAGER,
            kind=kind,
            partitions=frozenset(partitions),
        )
        before = len(self.run.report.ledger.problems)
        self.run.report.ledger.record(rec)
        screen = self.run.screen
        proto = "EAGER" if rec.protocol is RebalanceProtocol.EAGER else "COOP"
        where = screen.paint(f"gen {rec.generation_id:<3} {proto:<5}", DIM)
        owns = _fmt(self.run.report.ledger.owned_by(rec.owner))
        if kind == "assigned":
            what = f"+{_fmt(rec.partitions)}" if rec.partitions else "nothing new"
            screen.line(self.name, kind, f"{where}  {what}   owns {owns}", GREEN)
        else:
            screen.line(self.name, kind, f"{where}  -{_fmt(rec.partitions)}   keeps {owns}", RED)
        for problem in self.run.report.ledger.problems[before:]:
            screen.print(screen.paint(f"          ! {problem}", RED))

    def on_partitions_assigned(self, partitions: Partitions) -> None:
        self._record("assigned", partitions)

    def on_partitions_revoked(self, partitions: Partitions) -> None:
        self._record("revoked", partitions)

    def on_partitions_lost(self, partitions: Partitions) -> None:
        self._record("lost", partitions)


@dataclass
class _Incarnation:
    name: str
    number: int
    assignors: AssignorNames
    member: GroupMember
    member_id: str = ""
    outcomes_checked: int = 0

    @property
    def owner(self) -> str:
        return f"{self.name}#{self.number}"


@dataclass
class _Run:
    bootstrap: str
    probe: GroupProbe
    report: UpgradeReport
    screen: Screen
    step_timeout: float
    session_timeout_ms: int
    heartbeat_interval_ms: int
    telemetry_dir: str | None
    live: dict[str, _Incarnation] = field(default_factory=dict)
    incarnations: dict[str, int] = field(default_factory=dict)
    telemetry: dict[str, Any] = field(default_factory=dict)
    problems_shown: tuple[int, int] = (0, 0)

    # -- lifecycle of one member

    def new_member(self, name: str, assignors: AssignorNames) -> _Incarnation:
        number = self.incarnations.get(name, 0) + 1
        self.incarnations[name] = number
        listener = _Listener(self, name, number)
        telemetry = None
        if self.telemetry_dir is not None:
            telemetry = self.telemetry.get(name)
            if telemetry is None:
                from aiogroup.observability.telemetry import JsonlTelemetry

                telemetry = JsonlTelemetry(
                    self.telemetry_dir, member_name=name, group_id=self.report.group_id
                )
                self.telemetry[name] = telemetry
        member = GroupMember(
            self.bootstrap,
            self.report.group_id,
            topics=sorted({tp.topic for tp in self.report.partitions}),
            assignors=list(assignors),
            listener=listener,
            session_timeout_ms=self.session_timeout_ms,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
            rebalance_timeout_ms=max(self.session_timeout_ms, 10_000),
            request_timeout_ms=10_000,
            close_timeout_s=10.0,
            client_id=name,
            telemetry=telemetry,
        )
        listener.member = member
        return _Incarnation(name, number, assignors, member)

    async def start(self, inc: _Incarnation) -> None:
        proto = member_protocol(inc.assignors).name
        self.screen.line(inc.name, "starting", f"with {_names(inc.assignors)} -> {proto}")
        self.live[inc.name] = inc
        await inc.member.start()

    async def stop(self, name: str) -> None:
        inc = self.live.pop(name)
        self.screen.line(name, "leaving", self.screen.paint(inc.member.member_id, DIM))
        await inc.member.close()
        left_with = self.report.ledger.owned_by(inc.owner)
        if left_with:
            self.report.problems.append(f"{inc.owner} closed without revoking {_fmt(left_with)}")
        self.screen.line(name, "left")

    # -- convergence

    def _members_converged(self) -> bool:
        incs = list(self.live.values())
        if not incs:
            return False
        generations = {inc.member.generation_id for inc in incs}
        if len(generations) != 1 or min(generations) < 0:
            return False
        owned = [inc.member.assignment for inc in incs]
        if sum(map(len, owned)) != len(self.report.partitions):
            return False
        if frozenset().union(*owned) != self.report.partitions:
            return False
        ledger = self.report.ledger
        return all(
            inc.member.state is MemberState.STABLE
            and ledger.owned_by(inc.owner) == inc.member.assignment
            for inc in incs
        )

    async def converge(self) -> GroupSnapshot:
        """Wait (woken by the members' changes) until the members and the broker agree on a
        complete, disjoint assignment; UpgradeAborted after ``step_timeout`` seconds."""
        incs = list(self.live.values())
        last: GroupSnapshot | None = None

        async def settled() -> GroupSnapshot:
            nonlocal last
            while True:
                waiters = [asyncio.ensure_future(inc.member.changed()) for inc in incs]
                try:
                    if self._members_converged():
                        last = await self.probe.snapshot(self.report.group_id)
                        generation = incs[0].member.generation_id
                        if (
                            last.state == "Stable"
                            and last.members == len(incs)
                            and last.generation_id in (None, generation)
                        ):
                            return last
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waiters:
                        w.cancel()

        try:
            return await asyncio.wait_for(settled(), self.step_timeout)
        except TimeoutError:
            detail = "; ".join(
                f"{inc.name}: {inc.member.state.name} gen {inc.member.generation_id} "
                f"owns {_fmt(inc.member.assignment)}"
                for inc in incs
            )
            raise UpgradeAborted(
                f"the group did not converge within {self.step_timeout:g}s ({detail}; "
                f"broker: {last or 'not read, the members never agreed'})"
            ) from None

    async def checkpoint(
        self, bounce: int, event: str, member: str | None, started: float, first_record: int
    ) -> Checkpoint:
        snap = await self.converge()
        incs = sorted(self.live.values(), key=lambda i: i.name)
        for inc in incs:
            # A member id that changes under a running member means it was fenced or evicted.
            if inc.member_id and inc.member.member_id != inc.member_id:
                self.report.problems.append(
                    f"{inc.owner} changed member id ({inc.member_id} -> {inc.member.member_id})"
                )
            inc.member_id = inc.member.member_id
            outcomes = inc.member.outcomes
            for outcome in outcomes[inc.outcomes_checked :]:
                if outcome.error is not None:
                    self.report.problems.append(f"{inc.owner}: callback error {outcome.error!r}")
            inc.outcomes_checked = len(outcomes)
        cp = Checkpoint(
            bounce=bounce,
            event=event,
            member=member,
            generation_id=incs[0].member.generation_id,
            group_state=snap.state,
            group_protocol=snap.protocol,
            expected_group_protocols=expected_group_protocols([i.assignors for i in incs]),
            assignors={i.name: i.assignors for i in incs},
            member_protocols={i.name: i.member.protocol for i in incs},
            expected_member_protocols={i.name: member_protocol(i.assignors) for i in incs},
            assignment={i.name: i.member.assignment for i in incs},
            revoked=self.report.ledger.revoked_since(first_record, excluding=member),
            seconds=time.monotonic() - started,
        )
        self._check(cp)
        self.report.checkpoints.append(cp)
        self._show(cp, incs)
        return cp

    def _check(self, cp: Checkpoint) -> None:
        where = cp.label
        if cp.group_protocol not in cp.expected_group_protocols:
            want = " or ".join(sorted(cp.expected_group_protocols)) or "none"
            self.report.problems.append(
                f"{where}: the broker chose {cp.group_protocol}, Kafka's vote gives {want}"
            )
        for name, proto in cp.member_protocols.items():
            if proto is not cp.expected_member_protocols[name]:
                self.report.problems.append(
                    f"{where}: {name} runs {proto.name}, "
                    f"{_names(cp.assignors[name])} allows {cp.expected_member_protocols[name].name}"
                )

    def _show(self, cp: Checkpoint, incs: Sequence[_Incarnation]) -> None:
        s = self.screen
        ledger, own = self.report.ledger.problems, self.report.problems
        problems = ledger[self.problems_shown[0] :] + own[self.problems_shown[1] :]
        self.problems_shown = (len(ledger), len(own))
        mark = s.paint("✗", RED) if problems else s.paint("✓", GREEN)
        total = len(self.report.partitions)
        previous = self.report.checkpoints[-2] if len(self.report.checkpoints) > 1 else None
        if previous is not None and previous.group_protocol != cp.group_protocol:
            s.print(
                s.paint(
                    f"  * the broker's vote moved: {previous.group_protocol} -> "
                    f"{cp.group_protocol} (the protocols every member offers: "
                    f"{_names(sorted(set.intersection(*map(set, cp.assignors.values()))))})",
                    BOLD,
                )
            )
        s.print(
            f"  {mark} converged in {cp.seconds:.2f}s: generation {cp.generation_id}, "
            f"broker {cp.group_state} with protocol {s.paint(str(cp.group_protocol), BOLD)}, "
            f"{total}/{total} partitions owned once, {cp.revoked} revoked by the others"
        )
        width = max(len(_names(i.assignors)) for i in incs)
        for inc in incs:
            m = inc.member
            leader = s.paint("  (leader)", DIM) if m.is_leader else ""
            s.print(
                f"      {inc.name:<9} {m.protocol.name:<11} {_names(inc.assignors):<{width}}  "
                f"{_fmt(m.assignment)}{leader}"
            )
        for problem in problems:
            s.print(s.paint(f"      ! {problem}", RED))


# --------------------------------------------------------------------------- the scenario


async def _partitions(bootstrap: str, topics: Mapping[str, int]) -> Partitions:
    """Create the topics (keeping any that exist) and return their actual partitions."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, n, 1) for t, n in sorted(topics.items())])
        described = await admin.describe_topics(sorted(topics))
    finally:
        await admin.close()
    result: set[TopicPartition] = set()
    for topic in described:
        if topic["error_code"]:
            raise UpgradeAborted(f"topic {topic['topic']}: error {topic['error_code']}")
        result.update(TopicPartition(topic["topic"], p["partition"]) for p in topic["partitions"])
    return frozenset(result)


async def rolling_upgrade(
    bootstrap: str,
    *,
    direction: str = "up",
    members: int = 3,
    topics: Mapping[str, int] = DEFAULT_TOPICS,
    probe: GroupProbe | None = None,
    group_id: str | None = None,
    out: TextIO | None = None,
    colour: bool = False,
    step_timeout: float = 30.0,
    session_timeout_ms: int = 6_000,
    heartbeat_interval_ms: int = 200,
    telemetry_dir: str | None = None,
) -> UpgradeReport:
    """Run the two rolling bounces of ``direction`` ("up" or "down") on a group of
    ``members`` members at ``bootstrap``, printing to ``out`` (default stdout).

    ``probe`` reads the broker's group state (default: DescribeGroups). Returns the report;
    a step that does not converge within ``step_timeout`` seconds ends the run early with
    that problem recorded. Every member is closed on return.
    """
    if direction not in PLANS:
        raise ConfigurationError(f"direction must be 'up' or 'down', not {direction!r}")
    if members < 2:
        raise ConfigurationError("a rolling upgrade needs at least 2 members")
    plan = PLANS[direction]
    names = [f"member-{i}" for i in range(1, members + 1)]
    group = group_id or f"rolling-{direction}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    screen = Screen(out or sys.stdout, colour, names)
    started = time.monotonic()
    partitions = await _partitions(bootstrap, topics)
    report = UpgradeReport(direction, group, partitions)
    run = _Run(
        bootstrap,
        probe or DescribeGroupsProbe(bootstrap),
        report,
        screen,
        step_timeout,
        session_timeout_ms,
        heartbeat_interval_ms,
        telemetry_dir,
    )
    arrow = " -> ".join(_names(p) for p in plan)
    screen.print(
        screen.paint(f"rolling {direction}grade of group {group}: {arrow}", BOLD)
        + f"\n{members} members, topics {_fmt(partitions)}, broker {bootstrap}"
    )
    try:
        screen.banner(f"start: {members} members with {_names(plan[0])}")
        step, first = time.monotonic(), len(report.ledger.records)
        incs = [run.new_member(name, plan[0]) for name in names]
        await asyncio.gather(*(run.start(inc) for inc in incs))
        await run.checkpoint(0, "start", None, step, first)
        for bounce in (1, 2):
            for name in names:
                screen.banner(f"bounce {bounce}/2: {name} restarts with {_names(plan[bounce])}")
                step, first = time.monotonic(), len(report.ledger.records)
                await run.stop(name)
                await run.checkpoint(bounce, "left", name, step, first)
                step, first = time.monotonic(), len(report.ledger.records)
                await run.start(run.new_member(name, plan[bounce]))
                await run.checkpoint(bounce, "rejoined", name, step, first)
    except UpgradeAborted as exc:
        report.problems.append(str(exc))
        screen.print(screen.paint(f"  ✗ {exc}", RED))
    finally:
        screen.banner("closing")
        await asyncio.gather(*(run.stop(name) for name in sorted(run.live)))
        for telemetry in run.telemetry.values():
            telemetry.close()
        report.seconds = time.monotonic() - started
        _summary(screen, report)
    return report


def _summary(screen: Screen, report: UpgradeReport) -> None:
    screen.banner("summary")
    screen.print(f"{'step':<28}{'gen':>5}  {'group protocol':<20}{'members':<24}{'revoked':>8}")
    for cp in report.checkpoints:
        kinds = sorted({p.name for p in cp.member_protocols.values()})
        screen.print(
            f"{cp.label:<28}{cp.generation_id:>5}  {cp.group_protocol or '-':<20}"
            f"{'+'.join(kinds):<24}{cp.revoked:>8}"
        )
    lost = sum(len(r.partitions) for r in report.ledger.records if r.kind == "lost")
    callbacks = len(report.ledger.records)
    screen.print(
        f"\n{callbacks} callbacks, {lost} partitions lost, "
        f"{len(report.checkpoints)} steps in {report.seconds:.1f}s"
    )
    if report.ok:
        screen.print(screen.paint("every invariant held: no partition ever had two owners", GREEN))
    else:
        for problem in report.all_problems:
            screen.print(screen.paint(f"  ! {problem}", RED))


async def run_on_embedded_broker(
    direction: str = "up",
    *,
    topics: Mapping[str, int] = DEFAULT_TOPICS,
    **kwargs: Any,
) -> UpgradeReport:
    """Start aiogroup's embedded broker on a free loopback port and run the upgrade on it."""
    from aiogroup.testing.embedded.broker import EmbeddedBroker

    async with EmbeddedBroker(topics=topics) as broker:
        return await rolling_upgrade(
            broker.bootstrap,
            direction=direction,
            topics=topics,
            probe=EmbeddedProbe(broker),
            **kwargs,
        )


# --------------------------------------------------------------------------- command line


def topic_spec(spec: str) -> tuple[str, int]:
    """``NAME[:PARTITIONS]`` from the command line (argparse ``type=``)."""
    name, _, count = spec.partition(":")
    try:
        partitions = int(count or "1")
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad topic {spec!r} (want NAME[:PARTITIONS])") from None
    if not name or partitions < 1:
        raise argparse.ArgumentTypeError(f"bad topic {spec!r} (want NAME[:PARTITIONS])")
    return name, partitions


def main(argv: Sequence[str] | None = None) -> int:
    """Run the example; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="rolling_upgrade.py",
        description="KIP-429 rolling upgrade: eager range <-> cooperative-sticky, two bounces.",
    )
    parser.add_argument("--direction", choices=sorted(PLANS), default="up")
    parser.add_argument("--members", type=int, default=3, help="group size (default 3)")
    parser.add_argument(
        "--broker",
        default="embedded",
        help="'embedded' (default: aiogroup's in-process broker) or HOST:PORT of a Kafka broker",
    )
    parser.add_argument(
        "--topic",
        action="append",
        type=topic_spec,
        help="NAME[:PARTITIONS], repeatable (default orders:4 payments:3)",
    )
    parser.add_argument("--step-timeout", type=float, default=30.0, help="seconds per step")
    parser.add_argument("--heartbeat-ms", type=int, default=200, help="heartbeat interval")
    parser.add_argument("--session-ms", type=int, default=6000, help="session timeout")
    parser.add_argument("--telemetry", metavar="DIR", help="record JSONL telemetry in DIR")
    parser.add_argument("--no-color", action="store_true", help="plain output")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.members < 2:
        parser.error("--members must be at least 2")
    topics = dict(args.topic) if args.topic else dict(DEFAULT_TOPICS)
    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    options: dict[str, Any] = {
        "members": args.members,
        "colour": colour,
        "step_timeout": args.step_timeout,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "session_timeout_ms": args.session_ms,
        "telemetry_dir": args.telemetry,
    }
    try:
        if args.broker == "embedded":
            report = asyncio.run(run_on_embedded_broker(args.direction, topics=topics, **options))
        else:
            report = asyncio.run(
                rolling_upgrade(args.broker, direction=args.direction, topics=topics, **options)
            )
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a broker that cannot be reached, a refused topic, ...
        print(f"rolling_upgrade: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
