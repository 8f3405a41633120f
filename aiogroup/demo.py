"""``python -m aiogroup demo``: watch a cooperative group rebalance while records flow.

Starts the Tansu broker from the ``broker`` extra on a free loopback port, creates a topic,
keeps producing records to it, and runs a small group of :class:`aiogroup.Consumer` members
with the cooperative-sticky assignor (KIP-429) and auto-commit:

1. ``member-1`` joins and gets every partition;
2. ``member-2`` and ``member-3`` join one at a time: the members already in the group revoke
   only the partitions that move, and **keep reading the rest while the group rebalances**;
3. ``member-2`` leaves: its partitions go to the others, nobody else revokes anything.

Every callback is printed as it happens, with a line per rebalance saying how many records of
the partitions it kept each member read meanwhile, and the flow of records. The summary counts
records produced, processed and **processed twice** (none: hand-overs commit first), and
partitions ever owned by two members at once (none). The demo ends by itself (about a minute:
Tansu holds each JoinGroup for half a session) and stops the broker it started.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from aiogroup.client import GroupMember
from aiogroup.consumer import Consumer
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = ["main"]

Partitions = frozenset[TopicPartition]

_COLOURS = ["\033[36m", "\033[35m", "\033[33m", "\033[34m", "\033[32m", "\033[31m"]
_RESET, _BOLD, _DIM, _GREEN, _RED = "\033[0m", "\033[1m", "\033[2m", "\033[32m", "\033[31m"


def _fmt(partitions: Partitions) -> str:
    if not partitions:
        return "-"
    return " ".join(
        f"{topic}[{','.join(map(str, ps))}]" for topic, ps in group_by_topic(partitions).items()
    )


@dataclass
class _Stats:
    assigned: int = 0
    revoked: int = 0
    lost: int = 0
    callbacks: int = 0
    records: int = 0
    during_rebalance: int = 0


@dataclass
class _Screen:
    out: TextIO
    colour: bool
    started: float = field(default_factory=time.monotonic)
    owners: dict[TopicPartition, str] = field(default_factory=dict)
    double_owned: list[str] = field(default_factory=list)
    stats: dict[str, _Stats] = field(default_factory=dict)
    processed: set[tuple[int, int]] = field(default_factory=set)
    twice: int = 0
    produced: int = 0

    def paint(self, text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if self.colour else text

    def line(self, who: str, what: str, detail: str = "", code: str = "") -> None:
        elapsed = f"{time.monotonic() - self.started:6.1f}s"
        names = sorted(self.stats) or [who]
        colour = _COLOURS[names.index(who) % len(_COLOURS)] if who in names else ""
        print(
            f"{self.paint(elapsed, _DIM)}  {self.paint(f'{who:<9}', colour)}  "
            f"{self.paint(f'{what:<10}', code)}  {detail}",
            file=self.out,
            flush=True,
        )

    def banner(self, text: str) -> None:
        print(file=self.out)
        print(self.paint(f"== {text}", _BOLD), file=self.out, flush=True)


class _Listener:
    """Prints each callback and keeps the ownership ledger (to prove nothing is owned twice)."""

    def __init__(self, screen: _Screen, name: str) -> None:
        self.screen = screen
        self.name = name
        screen.stats[name] = _Stats()

    def on_partitions_assigned(self, partitions: Partitions) -> None:
        s = self.screen
        for tp in partitions:
            holder = s.owners.get(tp)
            if holder is not None and holder != self.name:
                s.double_owned.append(f"{tp} given to {self.name} while {holder} held it")
            s.owners[tp] = self.name
        s.stats[self.name].assigned += len(partitions)
        s.stats[self.name].callbacks += 1
        mine = sorted(tp for tp, who in s.owners.items() if who == self.name)
        if partitions:
            detail = f"+{_fmt(partitions)}   owns {_fmt(frozenset(mine))}"
            s.line(self.name, "assigned", detail, _GREEN)
        else:
            s.line(
                self.name, "assigned", s.paint(f"nothing new, owns {_fmt(frozenset(mine))}", _DIM)
            )

    def on_partitions_revoked(self, partitions: Partitions) -> None:
        self._give_up(partitions, "revoked")

    def on_partitions_lost(self, partitions: Partitions) -> None:
        self._give_up(partitions, "lost")

    def _give_up(self, partitions: Partitions, kind: str) -> None:
        s = self.screen
        for tp in partitions:
            if s.owners.get(tp) == self.name:
                del s.owners[tp]
        stats = s.stats[self.name]
        stats.callbacks += 1
        if kind == "lost":
            stats.lost += len(partitions)
        else:
            stats.revoked += len(partitions)
        kept = sorted(tp for tp, who in s.owners.items() if who == self.name)
        s.line(self.name, kind, f"-{_fmt(partitions)}   keeps {_fmt(frozenset(kept))}", _RED)


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


async def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        await admin.close()


class _Reader:
    """One member's application: reads records, notes those of kept partitions read while
    its member rebalances, and reports each rebalance's count when it ends."""

    def __init__(self, screen: _Screen, name: str, consumer: Consumer) -> None:
        self.screen = screen
        self.name = name
        self.consumer = consumer
        self.task: asyncio.Task[None] | None = None
        self._rebalancing_since: Partitions | None = None
        self._during = 0

    def start(self) -> None:
        self.task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        s = self.screen
        stats = s.stats[self.name]
        member = self.consumer.member
        while True:
            batch = await self.consumer.getmany(timeout_ms=200, max_records=100)
            rebalancing = member.state is not MemberState.STABLE
            if rebalancing and self._rebalancing_since is None:
                self._rebalancing_since = member.assignment
                self._during = 0
            for tp, records in batch.items():
                stats.records += len(records)
                for r in records:
                    key = (r.partition, r.offset)
                    if key in s.processed:
                        s.twice += 1
                    s.processed.add(key)
                if rebalancing and self._rebalancing_since and tp in self._rebalancing_since:
                    self._during += len(records)
                    stats.during_rebalance += len(records)
            if not rebalancing and self._rebalancing_since is not None:
                kept = self._rebalancing_since & member.assignment
                if kept:
                    s.line(
                        self.name,
                        "kept",
                        f"read {self._during} records of {_fmt(kept)} during the rebalance",
                    )
                self._rebalancing_since = None

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


async def _produce(bootstrap: str, topic: str, partitions: int, screen: _Screen) -> None:
    """Keep records coming (about 100 a second), so there is something to read throughout."""
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        i = 0
        while True:
            await producer.send(topic, b"order-%d" % i, partition=i % partitions)
            screen.produced += 1
            i += 1
            if i % 10 == 0:
                await asyncio.sleep(0.1)  # the production rate
    finally:
        await producer.flush()
        await producer.stop()


async def _run(bootstrap: str, args: argparse.Namespace, screen: _Screen) -> int:
    topic, group = "orders", f"demo-{os.getpid()}"
    await _create_topic(bootstrap, topic, args.partitions)
    partitions = {TopicPartition(topic, p) for p in range(args.partitions)}
    limit = 6 * args.session_ms / 1000 + 20

    def new_member(name: str) -> Consumer:
        return Consumer(
            bootstrap,
            group,
            topics=[topic],
            assignors=["cooperative-sticky"],
            listener=_Listener(screen, name),
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
    failures: list[str] = []

    def group_members() -> list[GroupMember]:
        return [c.member for c in members.values()]

    producer = asyncio.create_task(_produce(bootstrap, topic, args.partitions, screen))
    try:
        for i in range(1, args.members + 1):
            name = f"member-{i}"
            screen.banner(f"{name} joins the group (records keep flowing)")
            members[name] = new_member(name)
            screen.line(
                name, "joining", f"group {group}, topic {topic} ({args.partitions} partitions)"
            )
            await members[name].start()
            readers[name] = _Reader(screen, name, members[name])
            readers[name].start()
            if not await _until(
                group_members(), lambda: _balanced(group_members(), partitions), limit
            ):
                failures.append(f"no balanced assignment after {name} joined")
        if args.members >= 2:
            leaver = "member-2"
            screen.banner(f"{leaver} leaves the group")
            await readers.pop(leaver).stop()
            await members.pop(leaver).close()
            screen.line(leaver, "left", "committed what it read, then revoked and left")
            if not await _until(
                group_members(), lambda: _balanced(group_members(), partitions), limit
            ):
                failures.append(f"no balanced assignment after {leaver} left")
        producer.cancel()
        await asyncio.gather(producer, return_exceptions=True)
        if not await _until(
            group_members(), lambda: len(screen.processed) >= screen.produced, limit
        ):
            failures.append(
                f"only {len(screen.processed)} of {screen.produced} records were processed"
            )
    finally:
        producer.cancel()
        screen.banner("closing")
        for reader in readers.values():
            await reader.stop()
        for name, m in members.items():
            await m.close()
            screen.line(name, "closed")
    _summary(screen, failures)
    return 0 if not failures and not screen.double_owned and not screen.twice else 1


def _summary(screen: _Screen, failures: list[str]) -> None:
    screen.banner("summary")
    header = (
        f"{'member':<10}{'callbacks':>10}{'assigned':>10}{'revoked':>9}{'lost':>6}"
        f"{'records':>9}{'during rebalances':>19}"
    )
    print(header, file=screen.out)
    for name, st in sorted(screen.stats.items()):
        print(
            f"{name:<10}{st.callbacks:>10}{st.assigned:>10}{st.revoked:>9}{st.lost:>6}"
            f"{st.records:>9}{st.during_rebalance:>19}",
            file=screen.out,
        )
    elapsed = time.monotonic() - screen.started
    twice = len(screen.double_owned)
    verdict = screen.paint("none", _GREEN) if not twice else screen.paint(str(twice), _RED)
    print(f"\npartitions ever owned by two members at once: {verdict}", file=screen.out)
    again = (
        screen.paint("none", _GREEN) if not screen.twice else screen.paint(str(screen.twice), _RED)
    )
    print(
        f"records produced {screen.produced}, processed {len(screen.processed)}, "
        f"processed twice: {again}",
        file=screen.out,
    )
    for problem in screen.double_owned + failures:
        print(screen.paint(f"  ! {problem}", _RED), file=screen.out)
    print(f"finished in {elapsed:.1f}s", file=screen.out, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m aiogroup demo", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--members", type=int, default=3, help="members to start (default 3)")
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions (default 6)")
    parser.add_argument("--session-ms", type=int, default=6000, help="session timeout (ms)")
    parser.add_argument("--no-color", action="store_true", help="plain output")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.members < 1 or args.partitions < 1:
        parser.error("--members and --partitions must be at least 1")

    from aiogroup.errors import ConfigurationError
    from aiogroup.testing.tansu import TansuBroker

    colour = sys.stdout.isatty() and not args.no_color and "NO_COLOR" not in os.environ
    screen = _Screen(sys.stdout, colour)
    try:
        broker = TansuBroker()
    except ConfigurationError as exc:
        print(f"aiogroup demo: {exc}", file=sys.stderr)
        return 1
    with broker:
        pid = broker.process.pid if broker.process else "?"
        screen.line(
            "broker",
            "started",
            f"Tansu at {broker.bootstrap} (pid {broker.process.pid if broker.process else '?'})",
        )
        try:
            return asyncio.run(_run(broker.bootstrap, args, screen))
        except KeyboardInterrupt:
            print("\ninterrupted", file=sys.stderr)
            return 130
        finally:
            print(screen.paint(f"stopping the broker (pid {pid})", _DIM), file=sys.stdout)
