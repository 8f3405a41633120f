"""Commits are refused only where the coordinator would refuse them, end to end.

Kafka (2.3 to 4.x) accepts an OffsetCommit with the current generation while the group is
PreparingRebalance, and a KIP-429 member still owns its partitions then: it commits while its
JoinGroup is held, on another connection than the JoinGroup's (the coordinator answers one
request per connection at a time). Between its JoinGroup answer and its SyncGroup answer the
group is CompletingRebalance, where the coordinator answers REBALANCE_IN_PROGRESS: the member
refuses locally, without a request.
"""

from __future__ import annotations

import asyncio

import pytest

from aiogroup.errors import RebalanceInProgressError
from aiogroup.membership import MemberState
from aiogroup.testing.fixtures import BrokerHandle

from .conftest import BOUND, SESSION_MS, ScriptedPeer, all_of, member, new_topic, unique, until

pytestmark = pytest.mark.timeout(180)


async def test_cooperative_member_commits_while_its_join_is_held(handle: BrokerHandle) -> None:
    topic = await new_topic(handle, 4, "commits")
    other = await new_topic(handle, 1, "commits-extra")
    group = unique("g-commits")
    everything = all_of(topic, 4)
    release = asyncio.Event()  # the peer rejoins only while it is set
    release.set()
    async with member(handle, group, [topic], name="m") as m:
        await m.wait_for_assignment(BOUND)
        peer = ScriptedPeer(handle.bootstrap, group, topic, name="peer", release=release)
        peer.start()
        try:
            await until(
                lambda: m.assignment and peer.owned() and m.assignment | peer.owned() == everything,
                [m],
                "m and the peer to share the topic",
            )
            generation = m.generation_id
            mine = m.assignment
            # m rejoins (a new subscription); the peer is slow to follow: m's JoinGroup is held.
            release.clear()
            await m.subscribe([topic, other])
            await until(lambda: m.state is MemberState.JOINING, [m], "m's JoinGroup in flight")
            await asyncio.wait_for(m.commit({tp: 42 for tp in mine}), BOUND)
            assert m.state is MemberState.JOINING  # answered beside the held JoinGroup
            assert m.generation_id == generation
            release.set()
            await until(
                lambda: m.state is MemberState.STABLE and m.generation_id > generation,
                [m],
                "the rebalance to complete",
            )
            assert await m.committed(mine) == {tp: 42 for tp in mine}
        finally:
            release.set()
            await peer.close()


async def test_no_commit_request_between_join_answer_and_sync_answer(
    handle: BrokerHandle,
) -> None:
    if handle.embedded is None:
        pytest.skip("needs fault injection (the embedded broker)")
    faults = handle.embedded.faults
    topic = await new_topic(handle, 2, "commits")
    group = unique("g-commits")
    async with member(handle, group, [topic], name="m") as m:
        await m.wait_for_assignment(BOUND)
        mine = m.assignment
        generation = m.generation_id
        faults.delay("SyncGroup", SESSION_MS / 2000, member_id=m.member_id)  # within a session
        faults.fail("Heartbeat", 27, member_id=m.member_id)
        trap = faults.fail("OffsetCommit", 27, member_id=m.member_id)  # sprung by any commit
        await until(lambda: m.state is MemberState.AWAITING_SYNC, [m], "m to await its sync")
        with pytest.raises(RebalanceInProgressError):
            await m.commit({tp: 1 for tp in mine})
        assert trap.remaining == 1  # refused locally: the coordinator saw no OffsetCommit
        await until(
            lambda: m.state is MemberState.STABLE and m.generation_id > generation,
            [m],
            "the rebalance to complete",
        )
        faults.clear()
        await m.commit({tp: 2 for tp in mine})
