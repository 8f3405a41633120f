"""Rebalance semantics while records flow, on every broker: cooperative vs eager, commits
before revocation, and close() in the middle of a rebalance."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    kafka_broker,
)
from tests.integration.harness import read_events, start_peer

from .helpers import (
    CONVERGE_S,
    Callbacks,
    Pacer,
    Reader,
    consumer,
    make_topic,
    poll_until,
    produce,
    read_until,
    sharing,
    unique,
    wait_for,
)

pytestmark = pytest.mark.timeout(240)

TP = TopicPartition
_REBALANCING = (MemberState.PREPARING, MemberState.JOINING, MemberState.AWAITING_SYNC)


def _window(reader: Reader, since: float) -> tuple[float, float]:
    """From the member's first JoinGroup after ``since`` to its last return to STABLE."""
    joins = [t for t, s in reader.states if s is MemberState.JOINING and t >= since]
    stables = [t for t, s in reader.states if s is MemberState.STABLE and t >= since]
    assert joins and stables, f"no rebalance seen: {reader.states}"
    return joins[0], stables[-1]


@pytest.mark.parametrize("protocol", ["cooperative", "eager"])
@pytest.mark.every_broker  # the smoke subset: every live Kafka
async def test_records_during_a_rebalance(
    kafka_broker: BrokerHandle,  # noqa: F811
    protocol: str,
) -> None:
    """Cooperative: the partitions a member keeps deliver records while the group rebalances;
    eager: nothing is delivered between JoinGroup and the new assignment. Either way, with
    auto-commit and a graceful hand-over, no record is processed twice and none is missed."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    assignors = ["cooperative-sticky"] if protocol == "cooperative" else ["range"]
    loop = asyncio.get_running_loop()
    async with Pacer(kafka_broker.bootstrap, topic, 6) as pacer:
        a = consumer(kafka_broker, group, [topic], assignors=assignors)
        b = consumer(kafka_broker, group, [topic], assignors=assignors)
        async with a:
            ra = Reader(a, "a").start()
            await wait_for(lambda: len(a.assignment()) == 6, CONVERGE_S, "a owns everything")
            await wait_for(lambda: len(ra.records) > 20, CONVERGE_S, "a reading")
            joined_at = loop.time()
            async with b:
                rb = Reader(b, "b").start()
                await wait_for(
                    sharing(a, b, rb, 3, 10), CONVERGE_S, "the group to settle with b reading"
                )
                start, end = _window(ra, joined_at)
                kept = a.assignment()
                during = [(t, tp) for t, tp, _ in ra.records if start < t < end]
                if protocol == "cooperative":
                    assert any(tp in kept for _, tp in during), (
                        f"no record of a retained partition during the rebalance "
                        f"({start:.3f}..{end:.3f}, states {ra.states})"
                    )
                else:
                    assert during == [], f"eager delivered during the rebalance: {during[:5]}"
                sent = await pacer.stop()
                everything = {(TP(topic, p), o) for p, n in sent.items() for o in range(n)}
                await wait_for(
                    lambda: ra.offsets() | rb.offsets() >= everything,
                    CONVERGE_S,
                    "every record read",
                )
                await rb.stop()
            await ra.stop()
    both = ra.offsets() & rb.offsets()
    assert not both, f"processed twice: {sorted(both)[:10]}"
    assert len(ra.records) == len(ra.offsets()) and len(rb.records) == len(rb.offsets())


async def test_revoked_partitions_are_committed_before_they_move(
    kafka_broker: BrokerHandle,  # noqa: F811
) -> None:
    """KIP-70 / auto-commit: what a member processed from a partition it hands over is
    committed before the new owner starts, even far from the auto-commit interval."""
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 4)
    await produce(kafka_broker.bootstrap, topic, {p: 50 for p in range(4)})
    a = consumer(kafka_broker, group, [topic], auto_commit_interval_ms=3_600_000)
    b = consumer(kafka_broker, group, [topic], auto_commit_interval_ms=3_600_000)
    async with a:
        first = await read_until(a, lambda rs: len(rs) >= 200)
        ra = Reader(a, "a").start()  # the application keeps asking while b joins
        async with b:
            rb = Reader(b, "b").start()
            await wait_for(
                lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2,
                CONVERGE_S,
                "the hand-over",
            )
            await produce(kafka_broker.bootstrap, topic, {p: 1 for p in range(4)})
            await wait_for(
                lambda: len(ra.records) + len(rb.records) >= 4, CONVERGE_S, "the new records"
            )
            await rb.stop()
        await ra.stop()
    assert {r.offset for r in first} == set(range(50))
    # b started where a stopped: it saw only the one new record of each partition it took.
    assert sorted(o for _, _, o in rb.records) == [50, 50]
    assert sorted(o for _, _, o in ra.records) == [50, 50]


async def test_close_mid_rebalance_commits_what_was_read(
    kafka_broker: BrokerHandle,  # noqa: F811
    tmp_path: Path,
) -> None:
    """close() while the member's JoinGroup is in flight: the rebalance is finished first,
    then the consumed positions are committed and the partitions revoked, not lost.

    Before this, close mid-rebalance reported the partitions lost and committed nothing: the
    records read since the last commit (here: those read during the rebalance) would be
    processed again after a restart. A third member, stopped with SIGSTOP, holds the
    rebalance open (the coordinator waits for it until its session expires).
    """
    topic, group = unique("t"), unique("g")
    make_topic(kafka_broker, topic, 6)
    await produce(kafka_broker.bootstrap, topic, {p: 1000 for p in range(6)})
    callbacks = Callbacks()
    revoked, lost = callbacks.revoked, callbacks.lost

    a = consumer(
        kafka_broker,
        group,
        [topic],
        auto_commit_interval_ms=3_600_000,
        heartbeat_interval_ms=200,
        listener=callbacks,
    )
    b = consumer(kafka_broker, group, [topic])
    holder = start_peer(
        "aiogroup", "holder", kafka_broker.bootstrap, group, [topic], tmp_path / "holder.jsonl"
    )
    await a.start()
    try:
        await read_until(a, lambda rs: len(rs) >= 60, max_records=20)

        def holder_owns_three() -> bool:
            checks = [e for e in read_events(holder.log) if e["event"] == "owner_check"]
            return bool(checks) and len(checks[-1]["partitions"]) == 3

        await poll_until(  # the application keeps asking: the hand-over waits for it
            a,
            lambda: (
                len(a.assignment()) == 3
                and a.member.state is MemberState.STABLE
                and holder_owns_three()
            ),
            CONVERGE_S,
            "a and the holder to share the topic",
        )
        await read_until(a, lambda rs: len(rs) >= 30, max_records=10)
        holder.pause()  # SIGSTOP: it cannot rejoin, so the next rebalance stays open
        async with b:
            await poll_until(
                a,
                lambda: a.member.state in (MemberState.JOINING, MemberState.AWAITING_SYNC),
                CONVERGE_S,
                "a to rejoin",
            )
            # Auto-commit committed these before the JoinGroup (Java's onJoinPrepare). The
            # coordinator connection is busy with the JoinGroup, so they are not asked for.
            mine = a.member.assignment
            before = {tp: await a.position(tp) for tp in mine}
            # Cooperative: a keeps reading its partitions while the rebalance goes on.
            during = await read_until(a, lambda rs: len(rs) >= 10, max_records=10)
            positions = {tp: await a.position(tp) for tp in mine}
            assert before != positions, "nothing read during the rebalance"
            state = a.member.state
            assert state in _REBALANCING, f"a left the rebalance too early ({state})"
            assert all(TP(r.topic, r.partition) in mine for r in during)
            await a.close()
            final = {tp: await b.committed(tp) for tp in mine}
    finally:
        holder.kill()
        await a.close()
    assert final == positions
    assert not lost, f"reported lost: {lost}"
    assert set().union(*revoked) >= set(mine)
