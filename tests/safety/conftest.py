"""Plumbing for the safety tests: brokers, topics, members, and watches that judge ownership.

Every module runs once per broker of the ``kafka_broker`` fixture of aiogroup's pytest plugin
(embedded, Tansu, Apache Kafka 2.3, Docker Kafka). Tests that inject faults need the embedded
broker; tests that rely on the coordinator expiring a silent member skip on Tansu, which never
does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

from aiogroup.client import GroupMember
from aiogroup.protocol import Subscription, decode_assignment, encode_subscription
from aiogroup.protocol.types import TopicPartition

from ..testing.raw_member import NONE, RawMember

if TYPE_CHECKING:  # the fixtures module itself is loaded by aiogroup's pytest plugin
    from aiogroup.testing.fixtures import BrokerHandle

SESSION_MS = 1500
HEARTBEAT_MS = 150
REBALANCE_MS = 4000
#: Upper bound of any wait in these tests (they poll conditions, never sleep to synchronise).
BOUND = 60.0

Partitions = frozenset[TopicPartition]


@pytest.fixture(scope="module")
def handle(kafka_broker: BrokerHandle) -> BrokerHandle:
    return kafka_broker


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def new_topic(handle: BrokerHandle, partitions: int, prefix: str = "safety") -> str:
    """A fresh topic with ``partitions`` partitions, ready (leaders elected) when it returns."""
    name = unique(prefix)
    if handle.embedded is not None:
        handle.embedded.create_topic(name, partitions)
    elif handle.apache is not None:
        await asyncio.to_thread(handle.apache.create_topic, name, partitions)
    else:
        from ..integration.harness import create_topics

        await asyncio.to_thread(create_topics, handle.bootstrap, {name: partitions})
    return name


def all_of(topic: str, partitions: int) -> Partitions:
    return frozenset(TopicPartition(topic, p) for p in range(partitions))


def member(
    handle: BrokerHandle, group: str, topics: Iterable[str], *, name: str, **kw: Any
) -> GroupMember:
    settings: dict[str, Any] = {
        "session_timeout_ms": SESSION_MS,
        "heartbeat_interval_ms": HEARTBEAT_MS,
        "rebalance_timeout_ms": REBALANCE_MS,
        "request_timeout_ms": 10_000,
        "close_timeout_s": 10,
        **kw,
    }
    return GroupMember(
        handle.bootstrap,
        group,
        topics=list(topics),
        assignors=["cooperative-sticky"],
        client_id=name,
        **settings,
    )


@contextlib.contextmanager
def next_changes(members: Iterable[GroupMember]) -> Iterator[list[asyncio.Future[bool]]]:
    """The next change of each of ``members``, taken now (before the caller checks anything,
    so no change is missed) and dropped on exit."""
    changes: list[asyncio.Future[bool]] = [asyncio.ensure_future(m.changed()) for m in members]
    try:
        yield changes
    finally:
        for c in changes:
            c.cancel()


async def until(
    condition: Callable[[], object],
    members: Iterable[GroupMember],
    what: str,
    timeout: float = BOUND,
) -> None:
    """Wait (bounded) until ``condition()`` holds: re-checked at every change of one of
    ``members`` and every 50 ms (for state that does not notify, e.g. the broker's)."""
    watched = list(members)
    deadline = time.monotonic() + timeout
    while True:
        with next_changes(watched) as changes:
            if condition():
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
            await asyncio.wait(changes, timeout=min(left, 0.05))


@dataclass
class OwnershipWatch:
    """Checks, at every change of any watched member, that no partition is in two members'
    ``assignment`` (what each may act on now): a zombie acting on another's partition."""

    members: dict[str, GroupMember]
    overlaps: list[str] = field(default_factory=list)
    samples: int = 0
    _task: asyncio.Task[None] | None = None

    def check(self) -> None:
        self.samples += 1
        seen: dict[TopicPartition, str] = {}
        for name, m in self.members.items():
            for tp in m.assignment:
                if tp in seen:
                    self.overlaps.append(
                        f"{tp} acted on by {seen[tp]} and {name} (states "
                        f"{self.members[seen[tp]].state.name}, {m.state.name})"
                    )
                seen[tp] = name

    async def _run(self) -> None:
        while True:
            with next_changes(self.members.values()) as changes:
                self.check()
                await asyncio.wait(changes, return_when=asyncio.FIRST_COMPLETED)

    def __enter__(self) -> OwnershipWatch:
        self._task = asyncio.ensure_future(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()


class ScriptedPeer(RawMember):
    """A cooperative-sticky follower on raw requests whose claims are scripted.

    ``keep_claims``: its JoinGroup claims every partition it was ever assigned, as
    kafka-python 3.0.12's cooperative assignor does with partitions it lost (it never revokes
    them); otherwise it claims its last assignment. It never rejoins on its own (only when a
    heartbeat answers REBALANCE_IN_PROGRESS), and ``release``, when given, holds each rejoin
    until it is set. Subscription v1 with no generation, as kafka-python writes.
    """

    def __init__(
        self,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        name: str,
        keep_claims: bool = False,
        release: asyncio.Event | None = None,
    ) -> None:
        super().__init__(bootstrap, group, ["cooperative-sticky"], name=name, topic=topic)
        self.keep_claims = keep_claims
        self.release = release
        self.current: set[int] = set()
        self.ever: set[int] = set()
        self.joins = 0
        self.claims_sent: list[tuple[int, ...]] = []

    def owned(self) -> Partitions:
        return frozenset(TopicPartition(self.topic, p) for p in self.current)

    def metadata(self) -> list[dict[str, Any]]:
        claims = tuple(sorted(self.ever if self.keep_claims else self.current))
        self.claims_sent.append(claims)
        sub = Subscription([self.topic], owned_partitions={self.topic: claims} if claims else {})
        return [{"name": "cooperative-sticky", "metadata": encode_subscription(sub, 1)}]

    async def join(self) -> Any:
        if self.joins and self.release is not None:
            await self.release.wait()
        self.joins += 1
        return await super().join()

    async def sync(self, join: Any) -> int:
        code = await super().sync(join)
        if code == NONE:
            parts = decode_assignment(self.assignment).partitions.get(self.topic, ())
            self.current = set(parts)
            self.ever |= self.current
        return code
