"""``python -m aiogroup demo``: watch a cooperative group rebalance on a real broker.

Starts a broker (Tansu from the ``broker`` extra on a free loopback port, or with ``--broker
embedded`` aiogroup's own), creates a topic and runs a small group of aiogroup members with the
cooperative-sticky assignor (KIP-429):

1. ``member-1`` joins and gets every partition;
2. ``member-2`` and ``member-3`` join one at a time: the members already in the group give up
   only the partitions that move to the newcomer, and keep working on the rest;
3. ``member-2`` leaves: its partitions go to the others, and nobody else gives anything up;
4. the demo shuts the group down, and sums up: what moved from whom to whom, how long partitions
   were without an owner, what an eager group would have revoked, and whether any partition
   ever had two owners.

Records flow all along: a producer keeps writing to the topic and every member is an
:class:`aiogroup.Consumer` reading it (auto-commit). After each rebalance the demo says how many
records of the partitions it kept each member read *while the group was rebalancing* (none
would under the eager protocol), and the summary counts the records produced, processed, and
processed twice (none: a partition's position is committed before it moves).

The demo ends by itself (about 30 s on Tansu, which holds each JoinGroup for half a session; a
few seconds on the embedded broker) and stops the broker it started.

How the output is made: the rebalance listeners and the steps of the script turn what happens
into *events* (the dataclasses below); :class:`Narrator` is the one place that words them. To
show something new, add an event and a ``case`` in :meth:`Narrator.describe`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal, TextIO

from aiogroup.client import GroupMember
from aiogroup.consumer import Consumer
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = [
    "BrokerStarted",
    "DemoEvent",
    "GaveUp",
    "Joining",
    "Left",
    "Move",
    "Narrator",
    "Problem",
    "ReadDuringRebalance",
    "Received",
    "Settled",
    "StepStarted",
    "Summary",
    "describe_partitions",
    "main",
]

Partitions = frozenset[TopicPartition]

# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class BrokerStarted:
    """The demo started a broker for itself."""

    at: float
    kind: str
    bootstrap: str
    pid: int | None


@dataclass(frozen=True)
class StepStarted:
    """A step of the script begins: a member joins or leaves, or the group shuts down."""

    at: float
    number: int
    total: int
    title: str


@dataclass(frozen=True)
class Joining:
    """A member starts and asks the coordinator to join the group."""

    at: float
    member: str
    group: str
    topic: str
    partitions: int


@dataclass(frozen=True)
class Move:
    """One partition a member received: from whom, and how long it had no owner before."""

    partition: TopicPartition
    source: str | None  # the previous owner; None if nobody ever owned it
    unowned_s: float | None  # None if nobody ever owned it


@dataclass(frozen=True)
class Received:
    """An ``on_partitions_assigned`` callback with partitions in it."""

    at: float
    member: str
    moves: tuple[Move, ...]
    owns: Partitions


Why = Literal["make-room", "after-leave", "leaving", "closing"]


@dataclass(frozen=True)
class GaveUp:
    """An ``on_partitions_revoked`` or ``on_partitions_lost`` callback, and why it happened."""

    at: float
    member: str
    partitions: Partitions
    kept: Partitions
    why: Why
    other: str | None = None  # the newcomer, or the member that left
    lost: bool = False


@dataclass(frozen=True)
class Left:
    """A member closed: it revoked its partitions and left the group."""

    at: float
    member: str
    closing: bool = False


@dataclass(frozen=True)
class Settled:
    """Every member is Stable and the partitions are balanced again."""

    at: float
    took_s: float
    rebalances: int
    holdings: Mapping[str, Partitions]
    stayers_gave_up: int
    joined: str | None = None
    left: str | None = None


@dataclass(frozen=True)
class ReadDuringRebalance:
    """A member read records of partitions it kept while its group rebalanced."""

    at: float
    member: str
    records: int
    partitions: Partitions


@dataclass(frozen=True)
class Problem:
    """Something the demo expected did not happen."""

    at: float
    text: str


@dataclass(frozen=True)
class Summary:
    """The end of the demo."""

    at: float
    joined: int
    left: int
    rebalances: int
    moves: Mapping[tuple[str, str], int]
    handoffs: tuple[tuple[TopicPartition, float], ...]  # per move: how long it had no owner
    unowned_total_s: float
    stayers_gave_up: int
    eager_would_revoke: int
    kept_throughout: Mapping[str, Partitions]
    double_owned: tuple[str, ...]
    problems: tuple[str, ...]
    produced: int = 0
    processed: int = 0
    processed_twice: int = 0
    read_during_rebalances: int = 0


DemoEvent = (
    BrokerStarted
    | StepStarted
    | Joining
    | Received
    | GaveUp
    | Left
    | Settled
    | ReadDuringRebalance
    | Problem
    | Summary
)

# --------------------------------------------------------------------------- wording

_COLOURS = ["\033[36m", "\033[35m", "\033[33m", "\033[34m", "\033[32m", "\033[31m"]
_RESET, _BOLD, _DIM, _GREEN, _RED = "\033[0m", "\033[1m", "\033[2m", "\033[32m", "\033[31m"


def describe_partitions(partitions: Iterable[TopicPartition]) -> str:
    """``orders 0-2, 5``; topics in order; ``no partitions`` when empty."""
    described = []
    for topic, numbers in group_by_topic(partitions).items():
        runs: list[list[int]] = []
        for n in numbers:
            if runs and n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        words: list[str] = []
        for first, last in runs:
            if last - first >= 2:
                words.append(f"{first}-{last}")
            else:  # one, or two in a row ("3, 4")
                words.extend(str(n) for n in range(first, last + 1))
        described.append(f"{topic} {', '.join(words)}")
    return "; ".join(described) if described else "no partitions"


def _seconds(values: Iterable[float]) -> str:
    """``1.0 s``, or ``3.0-8.0 s`` for values a tenth of a second or more apart."""
    ordered = sorted(values)
    low, high = ordered[0], ordered[-1]
    return f"{high:.1f} s" if f"{low:.1f}" == f"{high:.1f}" else f"{low:.1f}-{high:.1f} s"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


class Narrator:
    """Prints each event as one line (the summary as a few) that a person can read."""

    def __init__(self, out: TextIO, colour: bool) -> None:
        self.out = out
        self.colour = colour
        self._names: list[str] = []

    def show(self, event: DemoEvent) -> None:
        print(self.describe(event), file=self.out, flush=True)

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.colour else text

    def who(self, name: str) -> str:
        if name not in self._names:
            self._names.append(name)
        return self.paint(name, _COLOURS[self._names.index(name) % len(_COLOURS)])

    def _line(self, at: float, text: str) -> str:
        return f"{self.paint(f'{at:6.1f}s', _DIM)}  {text}"

    def describe(self, event: DemoEvent) -> str:
        match event:
            case BrokerStarted(kind=kind, bootstrap=bootstrap, pid=pid):
                where = f"{bootstrap} (pid {pid})" if pid is not None else bootstrap
                return self._line(event.at, f"started the {kind} broker at {where} for this demo")
            case StepStarted(number=n, total=total, title=title):
                return "\n" + self.paint(f"Step {n}/{total}: {title}", _BOLD)
            case Joining(member=m, group=group, topic=topic, partitions=count):
                return self._line(
                    event.at,
                    f"{self.who(m)} starts and asks to join group {group} "
                    f"(topic {topic}, {_count(count, 'partition')})",
                )
            case Received(member=m, moves=moves, owns=owns):
                return self._line(event.at, self._received(m, moves, owns))
            case GaveUp():
                return self._line(event.at, self._gave_up(event))
            case Left(member=m, closing=closing):
                done = "has stopped" if closing else "has left the group"
                return self._line(event.at, f"{self.who(m)} {done}")
            case Settled():
                return self._line(event.at, self._settled(event))
            case ReadDuringRebalance(member=m, records=n, partitions=kept):
                return self._line(
                    event.at,
                    f"{self.who(m)} read {_count(n, 'record')} of {describe_partitions(kept)} "
                    "while the group rebalanced",
                )
            case Problem(text=text):
                return self._line(event.at, self.paint(f"✗ {text}", _RED))
            case Summary():
                return self._summary(event)
        raise AssertionError(f"no wording for {event!r}")

    def _received(self, member: str, moves: Sequence[Move], owns: Partitions) -> str:
        taken = [mv for mv in moves if mv.source not in (None, member)]
        back = [mv for mv in moves if mv.source == member]
        fresh = [mv.partition for mv in moves if mv.source is None]
        by_source: dict[str, list[Move]] = {}
        for mv in taken:
            by_source.setdefault(mv.source or "", []).append(mv)
        gaps = [mv.unowned_s or 0.0 for mv in taken]
        one_gap = bool(gaps) and f"{min(gaps):.1f}" == f"{max(gaps):.1f}"
        pieces = []
        for source, group in by_source.items():
            piece = f"{describe_partitions(mv.partition for mv in group)} from {self.who(source)}"
            if not one_gap:
                piece += f" (unowned for {_seconds(mv.unowned_s or 0.0 for mv in group)})"
            pieces.append(piece)
        clauses = []
        if pieces:
            clause = "takes over " + " and ".join(pieces)
            if one_gap:
                clause += f", unowned for {_seconds(gaps)}"
            clauses.append(clause)
        if back:
            clauses.append(
                f"gets back {describe_partitions(mv.partition for mv in back)}, unowned for "
                f"{_seconds(mv.unowned_s or 0.0 for mv in back)}"
            )
        if fresh:
            clauses.append(f"gets {describe_partitions(fresh)}, which nobody owned yet")
        text = f"{self.who(member)} " + "; it also ".join(clauses)
        if len(owns) > len(moves):
            text += f" (now has {describe_partitions(owns)})"
        return text

    def _gave_up(self, event: GaveUp) -> str:
        m, what = self.who(event.member), describe_partitions(event.partitions)
        kept = describe_partitions(event.kept)
        other = self.who(event.other) if event.other else "another member"
        if event.lost:
            return self.paint(
                f"{m} lost {what}: it is no longer in the group, so another member may own them",
                _RED,
            )
        match event.why:
            case "make-room":
                text = f"{m} gives up {what} to make room for {other}"
            case "after-leave":
                text = f"{m} gives up {what} in the rebalance after {other} left"
            case "leaving":
                return f"{m} hands back {what} as it leaves the group"
            case "closing":
                return f"{m} hands back {what} as it shuts down"
        if event.kept:
            return f"{text}, and keeps working on {kept}"
        return f"{text}, and has no partitions left"

    def _settled(self, event: Settled) -> str:
        holdings = "; ".join(
            f"{self.who(m)} has {describe_partitions(ps)}"
            for m, ps in sorted(event.holdings.items())
        )
        rounds = _count(event.rebalances, "rebalance")
        text = f"settled after {event.took_s:.1f} s and {rounds}: {holdings}"
        if event.left is not None:
            nobody = (
                "nobody else gave anything up"
                if not event.stayers_gave_up
                else (f"the others gave up {_count(event.stayers_gave_up, 'partition')}")
            )
            text += f". Only {self.who(event.left)}'s partitions moved; {nobody}"
        return self.paint("✓ ", _GREEN) + text

    def _summary(self, s: Summary) -> str:
        lines = ["", self.paint("Summary", _BOLD)]
        moved = sum(s.moves.values())
        lines.append(
            f"  {_count(s.joined, 'member')} joined, {s.left} left; "
            f"the group rebalanced {_count(s.rebalances, 'time')}."
        )
        if moved:
            flows = ", ".join(
                f"{n} from {self.who(a)} to {self.who(b)}" for (a, b), n in sorted(s.moves.items())
            )
            lines.append(f"  {_count(moved, 'partition')} changed owner: {flows}.")
            worst, _ = max(s.handoffs, key=lambda handoff: handoff[1])
            lines.append(
                f"  Each move left the partition without an owner for "
                f"{_seconds(gap for _, gap in s.handoffs)} (longest: "
                f"{describe_partitions([worst])}), {s.unowned_total_s:.1f} partition-seconds in "
                "all: a cooperative move takes two rebalances, one to give the partition up and "
                "one to hand it over."
            )
        else:
            lines.append("  No partition changed owner.")
        lines.append(
            f"  The members that stayed gave up only {_count(s.stayers_gave_up, 'partition')}; "
            "under the eager protocol they would have revoked everything they owned at every "
            f"rebalance: at least {_count(s.eager_would_revoke, 'partition')}."
        )
        for member, partitions in sorted(s.kept_throughout.items()):
            if partitions:
                lines.append(
                    f"  {self.who(member)} kept {describe_partitions(partitions)} through every "
                    "rebalance, from its first assignment to the end."
                )
        if s.produced:
            twice = (
                self.paint("none", _GREEN)
                if not s.processed_twice
                else self.paint(str(s.processed_twice), _RED)
            )
            lines.append(
                f"  Records: {s.produced} produced, {s.processed} processed, processed twice: "
                f"{twice}; {s.read_during_rebalances} were read from kept partitions while the "
                "group rebalanced."
            )
        if s.double_owned:
            lines.append(
                self.paint(
                    f"  ✗ {_count(len(s.double_owned), 'partition')} had two owners at once:", _RED
                )
            )
            lines.extend(self.paint(f"    {d}", _RED) for d in s.double_owned)
        else:
            lines.append(
                "  "
                + self.paint("✓ No partition was ever owned by two members at once", _GREEN)
                + " (checked at every callback)."
            )
        lines.extend(self.paint(f"  ✗ {p}", _RED) for p in s.problems)
        lines.append(f"  Finished in {s.at:.1f} s.")
        return "\n".join(lines)


# --------------------------------------------------------------------------- the ledger


@dataclass
class _Scene:
    kind: Literal["join", "leave", "close"]
    member: str | None = None


@dataclass
class _Ledger:
    """Who owns what, from the callbacks alone; turns each callback into an event."""

    show: Callable[[DemoEvent], None]
    started: float = field(default_factory=time.monotonic)
    scene: _Scene = field(default_factory=lambda: _Scene("join"))
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    released: dict[TopicPartition, tuple[float, str]] = field(default_factory=dict)
    moves: Counter[tuple[str, str]] = field(default_factory=Counter)
    handoffs: list[tuple[TopicPartition, float]] = field(default_factory=list)
    unowned_total_s: float = 0.0
    stayers_gave_up: int = 0
    step_gave_up: int = 0
    first_owned: dict[str, set[TopicPartition]] = field(default_factory=dict)
    gave_up: dict[str, set[TopicPartition]] = field(default_factory=dict)
    double_owned: list[str] = field(default_factory=list)
    produced: int = 0
    processed: set[tuple[int, int]] = field(default_factory=set)
    processed_twice: int = 0
    read_during_rebalances: int = 0

    def now(self) -> float:
        return time.monotonic() - self.started

    def owned_by(self, member: str) -> Partitions:
        return frozenset(tp for tp, who in self.owners.items() if who == member)

    def assigned(self, member: str, partitions: Partitions) -> None:
        if not partitions:
            return  # a cooperative round that changes nothing for this member
        at, moves = self.now(), []
        for tp in sorted(partitions):
            holder = self.owners.get(tp)
            if holder is not None and holder != member:
                self.double_owned.append(f"{tp} given to {member} while {holder} held it")
            released = self.released.pop(tp, None)
            if released is None:
                moves.append(Move(tp, None, None))
            else:
                gap = at - released[0]
                moves.append(Move(tp, released[1], gap))
                self.unowned_total_s += gap
                if released[1] != member:
                    self.moves[(released[1], member)] += 1
                    self.handoffs.append((tp, gap))
            self.owners[tp] = member
        self.first_owned.setdefault(member, set(partitions))
        self.show(Received(at, member, tuple(moves), self.owned_by(member)))

    def given_up(self, member: str, partitions: Partitions, lost: bool) -> None:
        at = self.now()
        for tp in partitions:
            if self.owners.get(tp) == member:
                del self.owners[tp]
            self.released[tp] = (at, member)
        scene, other = self.scene, None
        why: Why
        if scene.kind == "close":
            why = "closing"
        elif scene.kind == "leave" and scene.member == member:
            why = "leaving"
        else:  # a member that stays gives partitions up for a newcomer, or after a leave
            why, other = ("make-room" if scene.kind == "join" else "after-leave"), scene.member
            self.stayers_gave_up += len(partitions)
            self.step_gave_up += len(partitions)
        if scene.kind != "close":
            self.gave_up.setdefault(member, set()).update(partitions)
        self.show(GaveUp(at, member, partitions, self.owned_by(member), why, other, lost))

    def kept_throughout(self) -> dict[str, Partitions]:
        """What each member kept from its first assignment until the group shut down."""
        return {
            m: frozenset(first - self.gave_up.get(m, set()))
            for m, first in self.first_owned.items()
        }


#: How long a demo member's on_partitions_revoked works on what it gives up.
_FINISH_WORK_S = 0.3


class _Listener:
    """A member's rebalance listener: reports every callback to the ledger."""

    def __init__(self, ledger: _Ledger, name: str) -> None:
        self.ledger = ledger
        self.name = name

    def on_partitions_assigned(self, partitions: Partitions) -> None:
        self.ledger.assigned(self.name, partitions)

    async def on_partitions_revoked(self, partitions: Partitions) -> None:
        # An application finishes its work on what it gives up here (a flush, a commit of its
        # own); the demo takes a moment too. Its records of the partitions it keeps go on
        # flowing meanwhile (KIP-429), which the demo shows: a rebalance is over in about a
        # tenth of a second otherwise.
        if partitions:
            await asyncio.sleep(_FINISH_WORK_S)
        self.ledger.given_up(self.name, partitions, lost=False)

    def on_partitions_lost(self, partitions: Partitions) -> None:
        self.ledger.given_up(self.name, partitions, lost=True)


# --------------------------------------------------------------------------- the script


async def _until(
    members: Sequence[GroupMember], condition: Callable[[], bool], limit: float
) -> bool:
    """Wait until ``condition()`` holds, waking on any member's change; False on timeout."""

    async def wait() -> None:
        while True:
            waiters = [asyncio.ensure_future(m.changed()) for m in members]
            try:
                if condition():
                    return
                # Also every half second: some conditions (records read) change on their own.
                await asyncio.wait(waiters, timeout=0.5, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waiters:
                    w.cancel()

    try:
        await asyncio.wait_for(wait(), limit)
    except TimeoutError:
        return False
    return True


def _balanced(members: Sequence[GroupMember], partitions: set[TopicPartition]) -> bool:
    owned = [m.assignment for m in members]
    union = sorted(tp for o in owned for tp in o)
    return (
        all(m.state is MemberState.STABLE for m in members)
        and union == sorted(partitions)
        and max(map(len, owned)) - min(map(len, owned)) <= 1
    )


def _generations(members: Iterable[GroupMember]) -> set[int]:
    return {o.generation_id for m in members for o in m.outcomes}


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


class _Reader:
    """One member's application: reads records, and counts those of the partitions it keeps
    that it read while its member was rebalancing (reported when the rebalance ends)."""

    def __init__(self, ledger: _Ledger, name: str, consumer: Consumer) -> None:
        self.ledger = ledger
        self.name = name
        self.consumer = consumer
        self.task: asyncio.Task[None] | None = None
        self._since: Partitions | None = None
        self._during = 0

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        ledger = self.ledger
        member = self.consumer.member
        while True:
            batch = await self.consumer.getmany(timeout_ms=200, max_records=100)
            rebalancing = member.state is not MemberState.STABLE
            if rebalancing and self._since is None:
                self._since, self._during = member.assignment, 0
            for tp, records in batch.items():
                for r in records:
                    key = (r.partition, r.offset)
                    if key in ledger.processed:
                        ledger.processed_twice += 1
                    ledger.processed.add(key)
                if rebalancing and self._since and tp in self._since:
                    self._during += len(records)
                    ledger.read_during_rebalances += len(records)
            if not rebalancing and self._since is not None:
                kept = self._since & member.assignment
                if kept:
                    ledger.show(ReadDuringRebalance(ledger.now(), self.name, self._during, kept))
                self._since = None

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def _produce(
    bootstrap: str, topic: str, partitions: int, ledger: _Ledger, stop: asyncio.Event
) -> None:
    """Keep records coming (about 100 a second), so there is something to read throughout,
    until ``stop`` is set. A record counts as produced once the broker acknowledged it, and
    the loop ends between two sends (never with one in flight), so the count is exact."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        i = 0
        while not stop.is_set():
            await producer.send_and_wait(topic, b"order-%d" % i, partition=i % partitions)
            ledger.produced += 1
            i += 1
            if i % 10 == 0:
                with contextlib.suppress(TimeoutError):  # the production rate, or the stop
                    await asyncio.wait_for(stop.wait(), 0.1)
    finally:
        await producer.stop()


async def _run(
    bootstrap: str, args: argparse.Namespace, narrator: Narrator, ledger: _Ledger
) -> int:
    topic, group = "orders", f"demo-{os.getpid()}"
    await _create_topic(bootstrap, topic, args.partitions)
    partitions = {TopicPartition(topic, p) for p in range(args.partitions)}
    limit = 6 * args.session_ms / 1000 + 20
    total = args.members + (1 if args.members >= 2 else 0) + 1
    step = 0

    def new_member(name: str) -> Consumer:
        return Consumer(
            bootstrap,
            group,
            topics=[topic],
            assignors=["cooperative-sticky"],
            listener=_Listener(ledger, name),
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=max(args.session_ms // 6, 100),
            rebalance_timeout_ms=args.session_ms * 2,
            request_timeout_ms=10_000,
            close_timeout_s=15,
            auto_offset_reset="earliest",
            client_id=name,
        )

    members: dict[str, Consumer] = {}
    readers: dict[str, _Reader] = {}
    everyone: list[GroupMember] = []
    problems: list[str] = []
    eager_would_revoke = 0

    def live() -> list[GroupMember]:
        return [c.member for c in members.values()]

    async def settle(
        since: float, seen: set[int], joined: str | None = None, left: str | None = None
    ) -> None:
        if await _until(live(), lambda: _balanced(live(), partitions), limit):
            narrator.show(
                Settled(
                    ledger.now(),
                    ledger.now() - since,
                    len(_generations(everyone) - seen),
                    {name: c.member.assignment for name, c in members.items()},
                    ledger.step_gave_up,
                    joined,
                    left,
                )
            )
        else:
            what = f"{joined} joined" if joined else f"{left} left"
            problems.append(f"the group did not settle within {limit:.0f} s after {what}")
            narrator.show(Problem(ledger.now(), problems[-1]))

    stop_producing = asyncio.Event()
    producer = asyncio.create_task(
        _produce(bootstrap, topic, args.partitions, ledger, stop_producing)
    )
    try:
        for i in range(1, args.members + 1):
            name = f"member-{i}"
            step += 1
            title = f"{name} joins the empty group" if i == 1 else f"{name} joins"
            narrator.show(StepStarted(ledger.now(), step, total, title))
            ledger.scene, ledger.step_gave_up = _Scene("join", name), 0
            eager_would_revoke += len(ledger.owners)
            since, seen = ledger.now(), _generations(everyone)
            members[name] = new_member(name)
            narrator.show(Joining(since, name, group, topic, args.partitions))
            await members[name].start()
            everyone.append(members[name].member)
            readers[name] = _Reader(ledger, name, members[name])
            readers[name].start()
            await settle(since, seen, joined=name)
        if args.members >= 2:
            leaver = "member-2"
            step += 1
            narrator.show(StepStarted(ledger.now(), step, total, f"{leaver} leaves"))
            ledger.scene, ledger.step_gave_up = _Scene("leave", leaver), 0
            eager_would_revoke += len(ledger.owners) - len(ledger.owned_by(leaver))
            since, seen = ledger.now(), _generations(everyone)
            await readers.pop(leaver).stop()
            await members.pop(leaver).close()
            narrator.show(Left(ledger.now(), leaver))
            await settle(since, seen, left=leaver)
        stop_producing.set()  # the record in flight is acknowledged and counted first
        await asyncio.gather(producer, return_exceptions=True)
        if not await _until(live(), lambda: len(ledger.processed) >= ledger.produced, limit):
            problems.append(
                f"only {len(ledger.processed)} of {ledger.produced} records were processed"
            )
            narrator.show(Problem(ledger.now(), problems[-1]))
    finally:
        producer.cancel()
        step += 1
        narrator.show(StepStarted(ledger.now(), step, total, "the demo shuts the group down"))
        ledger.scene = _Scene("close")
        for reader in readers.values():
            await reader.stop()
        for name, c in members.items():
            await c.close()
            narrator.show(Left(ledger.now(), name, closing=True))
    narrator.show(
        Summary(
            at=ledger.now(),
            joined=len(everyone),
            left=1 if args.members >= 2 else 0,
            rebalances=len(_generations(everyone)),
            moves=dict(ledger.moves),
            handoffs=tuple(ledger.handoffs),
            unowned_total_s=ledger.unowned_total_s,
            stayers_gave_up=ledger.stayers_gave_up,
            eager_would_revoke=eager_would_revoke,
            kept_throughout=ledger.kept_throughout(),
            double_owned=tuple(ledger.double_owned),
            problems=tuple(problems),
            produced=ledger.produced,
            processed=len(ledger.processed),
            processed_twice=ledger.processed_twice,
            read_during_rebalances=ledger.read_during_rebalances,
        )
    )
    failed = problems or ledger.double_owned or ledger.processed_twice
    return 1 if failed else 0


@asynccontextmanager
async def _embedded_broker(
    show: Callable[[DemoEvent], None], ledger: _Ledger
) -> AsyncIterator[str]:
    from aiogroup.testing.embedded.broker import EmbeddedBroker

    async with EmbeddedBroker() as broker:
        show(BrokerStarted(ledger.now(), "embedded", broker.bootstrap, None))
        yield broker.bootstrap


HELP = """Watch a cooperative group rebalance on a real broker while records flow.

Starts a broker (Tansu from the broker extra, or with --broker embedded aiogroup's own), creates
a topic and runs a small group of aiogroup consumers with the cooperative-sticky assignor
(KIP-429): member-1 joins and gets every partition; member-2 and member-3 join one at a time
(the others give up only what moves and keep reading the rest); member-2 leaves; then a summary
of what moved, how long partitions had no owner, and whether any record was processed twice.
Ends by itself (about 30 s on Tansu, a few seconds on the embedded broker)."""


def main(argv: Sequence[str] | None = None, prog: str = "python -m aiogroup demo") -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog=prog, description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=3, help="members to start (default 3)")
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions (default 6)")
    parser.add_argument("--session-ms", type=int, default=6000, help="session timeout (ms)")
    parser.add_argument(
        "--broker",
        choices=["tansu", "embedded"],
        default="tansu",
        help="tansu (default: the broker extra's binary) or embedded (aiogroup's own, in-process)",
    )
    parser.add_argument("--no-color", action="store_true", help="plain output")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.members < 1 or args.partitions < 1:
        parser.error("--members and --partitions must be at least 1")

    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    narrator = Narrator(sys.stdout, colour)
    ledger = _Ledger(narrator.show)
    print(
        f"aiogroup demo: {_count(args.members, 'member')} share the "
        f"{_count(args.partitions, 'partition')} of topic orders, rebalancing cooperatively "
        "(KIP-429)",
        flush=True,
    )
    try:
        if args.broker == "embedded":
            return asyncio.run(_run_embedded(args, narrator, ledger))
        return _run_tansu(args, narrator, ledger)
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


async def _run_embedded(args: argparse.Namespace, narrator: Narrator, ledger: _Ledger) -> int:
    async with _embedded_broker(narrator.show, ledger) as bootstrap:
        return await _run(bootstrap, args, narrator, ledger)


def _run_tansu(args: argparse.Namespace, narrator: Narrator, ledger: _Ledger) -> int:
    from aiogroup.errors import ConfigurationError
    from aiogroup.testing.launchers.tansu import TansuBroker

    try:
        broker = TansuBroker()
    except ConfigurationError as exc:
        print(
            f"aiogroup demo: {exc}\n(or run it on aiogroup's own broker: --broker embedded)",
            file=sys.stderr,
        )
        return 1
    with broker:
        pid = broker.process.pid if broker.process else None
        narrator.show(BrokerStarted(ledger.now(), "Tansu", broker.bootstrap, pid))
        try:
            return asyncio.run(_run(broker.bootstrap, args, narrator, ledger))
        finally:
            print(narrator.paint(f"Stopping the Tansu broker (pid {pid}).", _DIM), flush=True)
