"""Withheld partitions are always given out in the end, end to end.

An aiogroup leader ``lead`` subscribes to its own topic, so the partitions that move are
between the other members only. A partition withheld from ``b`` (KIP-429 2d) must reach it
even when its previous owner never rejoins (a static member restarted between revoking and
rejoining) or keeps claiming it (a peer that never revokes what it lost).
"""

from __future__ import annotations

import asyncio

import pytest

from aiogroup.client import GroupMember
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import BrokerHandle

from ..conformance.conftest import Peer
from .conftest import (
    BOUND,
    REBALANCE_MS,
    SESSION_MS,
    Partitions,
    ScriptedPeer,
    all_of,
    member,
    new_topic,
    unique,
    until,
)

pytestmark = pytest.mark.timeout(240)


async def leader(handle: BrokerHandle, group: str) -> GroupMember:
    """The group's first member, hence its leader, alone on a topic of its own."""
    own = await new_topic(handle, 1, "handover-lead")
    lead = member(handle, group, [own], name="lead")
    await lead.start()
    await lead.wait_for_assignment(BOUND)
    assert lead.is_leader
    return lead


class BlockSecondAssigned:
    """A listener that lets revocations through but never returns from the ``assigned`` call
    that ends the rebalance in which it revoked: the member has revoked and will not rejoin."""

    def __init__(self) -> None:
        self.revoked: Partitions = frozenset()
        self.stuck = asyncio.Event()

    async def on_partitions_revoked(self, partitions: Partitions) -> None:
        self.revoked |= partitions

    async def on_partitions_assigned(self, partitions: Partitions) -> None:
        if self.revoked:
            self.stuck.set()
            await asyncio.Event().wait()  # until the member is torn down


async def test_static_member_restarting_between_revoking_and_rejoining(
    handle: BrokerHandle,
) -> None:
    handle.require_kafka_semantics("Tansu's static membership gives a restarted instance its id")
    group = unique("g-static")
    topic = await new_topic(handle, 2, "handover")
    everything = all_of(topic, 2)
    lead = await leader(handle, group)
    listener = BlockSecondAssigned()
    s = member(handle, group, [topic], name="s", group_instance_id="s-1", listener=listener)
    await s.start()
    b: GroupMember | None = None
    s2: GroupMember | None = None
    try:
        await until(lambda: s.assignment == everything, [s, lead], "s to own the topic")
        b = member(handle, group, [topic], name="b")
        await b.start()
        # s revokes what moves to b, then its process dies before it rejoins (no LeaveGroup:
        # it is static) and a new instance takes its place at once.
        await asyncio.wait_for(listener.stuck.wait(), BOUND)
        moving = listener.revoked
        kept = everything - moving
        assert moving and kept
        await s.close(timeout=0.5)
        s2 = member(handle, group, [topic], name="s2", group_instance_id="s-1")
        await s2.start()
        await until(lambda: s2.assignment == kept, [s2], "the new instance gets the cached one")
        # Nobody rejoins on their own now; the leader's follow-up hands the rest to b.
        await until(
            lambda: b.assignment == moving and s2.assignment == kept,
            [b, s2, lead],
            "b to receive the partitions s revoked",
            timeout=SESSION_MS / 1000 + BOUND,
        )
    finally:
        for m in (b, s2, lead):
            if m is not None:
                await m.close()


async def test_a_peer_that_keeps_claiming_what_it_was_not_assigned_stops_blocking(
    handle: BrokerHandle,
) -> None:
    """A scripted peer that never revokes and keeps claiming every partition it ever had (the
    shape of kafka-python 3.0.12's cooperative assignor after on_partitions_lost)."""
    group = unique("g-claims")
    topic = await new_topic(handle, 2, "handover")
    everything = all_of(topic, 2)
    lead = await leader(handle, group)
    peer = ScriptedPeer(handle.bootstrap, group, topic, name="peer", keep_claims=True)
    peer.start()
    b: GroupMember | None = None
    try:
        await until(lambda: peer.owned() == everything, [lead], "the peer to own the topic")
        b = member(handle, group, [topic], name="b")
        await b.start()
        await until(
            lambda: len(peer.owned()) == 1 and bool(b.outcomes), [b, lead], "b's first round"
        )
        moving = everything - peer.owned()
        assert b.assignment == frozenset()  # withheld: the peer still claims it
        # The leader rebalances a session later; the peer claims it again; once a generation
        # has been Stable for a rebalance timeout, the leader ignores that claim.
        wait = (SESSION_MS + max(SESSION_MS, REBALANCE_MS)) / 1000 + BOUND
        await until(
            lambda: b.assignment == moving, [b, lead], "b to receive the claimed partition", wait
        )
        assert set(peer.claims_sent[-1]) == {0, 1}  # it never stopped claiming it
        assert lead._machine.stale_claims == {peer.member_id: moving}
    finally:
        if b is not None:
            await b.close()
        await peer.close()
        await lead.close()


async def test_kafka_python_losing_its_partitions_while_a_member_joins(
    handle: BrokerHandle,
) -> None:
    """The real peer: kafka-python 3 (cooperative-sticky) falls out of the group and rejoins
    under a new member id while b joins. It claims the partitions it lost (its assignor keeps
    them after on_partitions_lost), is assigned one, and never revokes the other (it does not
    think it owns it), so nobody rejoins: the withheld partition waits for the leader."""
    if handle.embedded is None:
        pytest.skip("needs fault injection (the embedded broker) to expel the peer")
    faults = handle.embedded.faults
    group = unique("g-kpy")
    topic = await new_topic(handle, 2, "handover")
    everything = all_of(topic, 2)
    lead = await leader(handle, group)
    peer = Peer(
        handle, "kafka-python", group=group, topic=topic, name="kpy", assignors="cooperative-sticky"
    )
    b: GroupMember | None = None
    try:
        await until(lambda: peer.owned() == [0, 1], [lead], "kafka-python to own the topic")
        view = handle.embedded.group(group)
        assert view is not None
        expelled = [m.member_id for m in view.members if m.client_id == "kpy"]
        faults.fail("Heartbeat", 25, client_id="kpy")  # UNKNOWN_MEMBER_ID: lost, new member id
        b = member(handle, group, [topic], name="b")
        await b.start()
        await until(
            lambda: (
                b.assignment and peer.owned() and len(peer.owned() or ()) + len(b.assignment) == 2
            ),
            [b, lead],
            "kafka-python and b to share the topic",
            timeout=SESSION_MS / 1000 + 2 * BOUND,
        )
        assert peer.revoked() == [0, 1]  # its on_partitions_lost (through the revoked listener)
        view = handle.embedded.group(group)
        assert view is not None and not {m.member_id for m in view.members} & set(expelled)
        assert {TopicPartition(topic, p) for p in peer.owned() or ()} | b.assignment == everything
    finally:
        if b is not None:
            await b.close()
        peer.close()
        await lead.close()
