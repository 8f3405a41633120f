"""Proofs with consumer processes on every broker: churn (joins, graceful leaves, SIGKILL, a
member paused past its session), graceful churn with no record processed twice, cooperative
vs eager delivery during rebalances, and a mixed group with librdkafka and kafka-python.

Everything is judged from the members' logs (record stamps and callbacks), never from
wall-clock thresholds; waits poll a condition with a bound.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)

from . import proof
from .helpers import Pacer, make_topic, unique, wait_for

pytestmark = [pytest.mark.timeout(600), pytest.mark.peers]

PARTITIONS = 6
SESSION_MS = 6000
#: Bound for a group to settle (Tansu holds every JoinGroup for half a session).
SETTLE_S = 90.0


class Group:
    def __init__(self, broker: BrokerHandle, folder: Path, *, assignor: str = "cooperative-sticky"):
        self.broker = broker
        self.folder = folder
        self.topic = unique("t")
        self.group = unique("g")
        self.assignor = assignor
        self.members: dict[str, proof.Member] = {}
        make_topic(broker, self.topic, PARTITIONS)

    def start(self, name: str, kind: str = "aiogroup", **options: Any) -> proof.Member:
        member = proof.start(
            kind,
            name,
            self.broker.bootstrap,
            self.group,
            self.topic,
            self.folder,
            assignor=self.assignor,
            session_ms=SESSION_MS,
            **options,
        )
        self.members[name] = member
        return member

    def events(self) -> list[proof.Event]:
        return proof.events(self.members.values())

    async def settle(self, *names: str, ignore: tuple[str, ...] = ()) -> None:
        """Wait until ``names`` share the partitions and each read after the last change
        (``ignore``: a stopped member whose own view is stale by design)."""

        def done() -> bool:
            evs = [e for e in self.events() if e["who"] not in ignore]
            errors = [e for e in evs if e["event"] == "error"]
            assert not errors, errors
            return proof.converged(evs, names, PARTITIONS) and all(
                any(
                    e["event"] == "records" and e["t"] > last_change(evs)
                    for e in evs
                    if e["who"] == n
                )
                for n in names
            )

        await wait_for(done, SETTLE_S, f"{names} to share the topic and read")

    def stop_all(self) -> None:
        for member in self.members.values():
            member.terminate()


def last_change(evs: list[proof.Event]) -> float:
    """When ownership last changed (the last callback)."""
    times = [e["t"] for e in evs if e["event"] in ("assigned", "revoked", "lost", "closed")]
    return max(times, default=0.0)


async def finish(group: Group, pacer: Pacer, readers: Callable[[], list[str]]) -> dict[int, int]:
    sent = await pacer.stop()
    await wait_for(
        lambda: not proof.missing(group.events(), sent), SETTLE_S, "every record processed"
    )
    return sent


async def test_churn_processes_every_record(
    kafka_broker: BrokerHandle,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Joins, a graceful leave, SIGKILL, and a member paused past its session: every record
    is processed at least once, and no partition by two members at once."""
    g = Group(kafka_broker, tmp_path)
    try:
        async with Pacer(kafka_broker.bootstrap, g.topic, PARTITIONS, every_s=0.005) as pacer:
            g.start("m1")
            g.start("m2")
            await g.settle("m1", "m2")
            g.start("m3")
            await g.settle("m1", "m2", "m3")
            g.members["m2"].terminate()  # graceful leave
            await g.settle("m1", "m3")
            g.start("m4")
            await g.settle("m1", "m3", "m4")
            g.members["m3"].kill()  # SIGKILL: its partitions move after its session
            await g.settle("m1", "m4")
            g.members["m1"].pause()  # SIGSTOP past its session (KAFKA-7026)
            await g.settle("m4", ignore=("m1",))
            g.members["m1"].resume()
            await g.settle("m1", "m4")
            await finish(g, pacer, lambda: ["m1", "m4"])
    finally:
        g.stop_all()
    evs = g.events()
    problems = proof.concurrency_problems(evs)
    assert not problems, problems[:10]
    lost = [e for e in evs if e["event"] == "lost" and e["who"] == "m1"]
    assert lost, "the paused member never learnt that it lost its partitions"


@pytest.mark.parametrize("assignor", ["cooperative-sticky", "range"], ids=["cooperative", "eager"])
async def test_graceful_churn_processes_every_record_once(
    kafka_broker: BrokerHandle,  # noqa: F811
    tmp_path: Path,
    assignor: str,
) -> None:
    """Joins and graceful leaves with auto-commit: every record exactly once. Cooperative:
    members keep processing the partitions they keep during each rebalance; eager: nothing is
    processed between JoinGroup and the end of the rebalance."""
    g = Group(kafka_broker, tmp_path, assignor=assignor)
    try:
        async with Pacer(kafka_broker.bootstrap, g.topic, PARTITIONS, every_s=0.005) as pacer:
            g.start("m1")
            await g.settle("m1")
            g.start("m2")
            await g.settle("m1", "m2")
            g.start("m3")
            await g.settle("m1", "m2", "m3")
            g.members["m2"].terminate()
            await g.settle("m1", "m3")
            await finish(g, pacer, lambda: ["m1", "m3"])
    finally:
        g.stop_all()
    evs = g.events()
    assert proof.duplicates(evs) == []
    assert not proof.concurrency_problems(evs)
    kept = [proof.records_during_rebalances(evs, who) for who in ("m1", "m2", "m3")]
    windows = sum(w for w, _ in kept)
    during = sum(c for _, c in kept)
    if assignor == "range":
        assert during == 0, kept
    else:
        assert windows > 0 and during > 0, kept


async def test_mixed_group_with_librdkafka_and_kafka_python(
    kafka_broker: BrokerHandle,  # noqa: F811
    tmp_path: Path,
) -> None:
    """aiogroup, librdkafka and kafka-python consumers in one cooperative-sticky group: the
    union of what they processed is every record, and no partition was read by two at once."""
    g = Group(kafka_broker, tmp_path)
    try:
        async with Pacer(kafka_broker.bootstrap, g.topic, PARTITIONS, every_s=0.005) as pacer:
            g.start("aio")
            await g.settle("aio")
            g.start("rdkafka", kind="confluent")
            await g.settle("aio", "rdkafka")
            g.start("kpy", kind="kafka-python")
            await g.settle("aio", "rdkafka", "kpy")
            g.members["rdkafka"].terminate()
            await g.settle("aio", "kpy")
            await finish(g, pacer, lambda: ["aio", "kpy"])
    finally:
        g.stop_all()
    evs = g.events()
    problems = proof.concurrency_problems(evs)
    assert not problems, problems[:10]


def test_a_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    """A member writes a long line in pieces; the proof reads whole lines only, and reads the
    line once it is whole (CI once failed here, with a JSONDecodeError mid-run)."""
    log = tmp_path / "m1.jsonl"
    whole = '{"t": 1.0, "who": "m1", "event": "assigned", "partitions": []}\n'
    log.write_text(whole + '{"t": 2.0, "who": "m1", "event": "records", "recor', encoding="utf-8")
    member = proof.Member.__new__(proof.Member)
    member.log = log
    assert [e["event"] for e in proof.events([member])] == ["assigned"]
    with log.open("a", encoding="utf-8") as f:
        f.write('ds": []}\n')
    assert [e["event"] for e in proof.events([member])] == ["assigned", "records"]
