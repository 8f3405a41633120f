"""A close that hands its partitions over first (CloseRequested(hand_off=True)), in the
sans-I/O machine: rejoin subscribed to nothing while still claiming what it owns, keep the
partitions until that round's assignment takes them away, revoke, then leave at once."""

from __future__ import annotations

import logging

import pytest

from aiogroup.assignors import CooperativeStickyAssignor
from aiogroup.membership import (
    CallbacksFinished,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupFailed,
    LeaveGroupCompleted,
    MemberState,
    MetadataUpdated,
    RequestMetadata,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SyncGroupCompleted,
)
from aiogroup.membership.leader import FOLLOW_UP, HAND_OFF_AWARE, leader_marks
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
)
from aiogroup.protocol.types import group_by_topic

from .helpers import EagerFixed, Script, leader_join, member, tps
from .test_machine import (
    EAGER,
    _md,
    _sync_assignments,
    join_subscription,
    owned_in,
    rebalance,
)


def _hand_off(s: Script, within: float = 20.0) -> None:
    s.feed(CloseRequested(finish_rebalance_by=s.now + within, hand_off=True))


def _hand_off_round(s: Script, join: SendJoinGroup, owned: frozenset[object], gen: int) -> None:
    """The hand-off JoinGroup (nothing subscribed, ``owned`` claimed) gets nothing: revoke all,
    assigned(empty), then the leave."""
    assert list(join_subscription(join).topics) == [] and owned_in(join) == owned
    cb = s.join_as_follower(frozenset(), generation_id=gen, join=join)
    assert cb.revoked == owned
    s.feed(CallbacksFinished(cb.token))
    s.finish_callbacks()
    _finish_leave(s)


def _finish_leave(s: Script) -> None:
    leave = s.take(SendLeaveGroup)
    s.feed(LeaveGroupCompleted(leave.token))
    assert s.m.state is MemberState.CLOSED


def test_hand_off_keeps_the_partitions_through_the_round_then_leaves_at_once() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0", "t-1"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)
    # Auto-commit with the JoinGroup, as before any cooperative JoinGroup (the partitions stay
    # ours meanwhile).
    commit = s.take(CommitOffsets)
    assert commit.offsets is None and commit.generation_id == 1
    assert s.m.assignment == tps("t-0", "t-1") and not s.has(InvokeCallbacks)
    s.feed(CommitCompleted(commit.token))
    join = s.take(SendJoinGroup)
    sub = join_subscription(join)
    # Subscribed to nothing, still claiming both partitions: nothing revoked before joining
    # (KIP-429 1a does not apply to a hand-off), so the records keep coming.
    assert list(sub.topics) == [] and owned_in(join) == tps("t-0", "t-1")
    assert not s.has(InvokeCallbacks)
    assert s.m.assignment == tps("t-0", "t-1") and s.m.fetchable == tps("t-0", "t-1")
    assert join.reason == "handing partitions over before leaving"
    # The round gives us nothing: revoke both, on_assigned(empty), then LeaveGroup at once
    # with no second JoinGroup and no empty commit.
    cb = s.join_as_follower(frozenset(), generation_id=2, join=join)
    assert cb.revoked == tps("t-0", "t-1") and cb.assigned is None
    s.feed(CallbacksFinished(cb.token))
    assigned = s.take(InvokeCallbacks)
    assert assigned.assigned == frozenset()
    s.feed(CallbacksFinished(assigned.token))
    assert not s.has(SendJoinGroup) and not s.has(CommitOffsets) and not s.has(InvokeCallbacks)
    leave = s.take(SendLeaveGroup)
    assert (leave.member_id, leave.generation_id) == ("m1", 2)
    s.feed(LeaveGroupCompleted(leave.token))
    assert s.m.state is MemberState.CLOSED
    assert s.m.assignment == frozenset()


def test_what_the_round_still_gives_is_revoked_by_the_leave() -> None:
    s = Script(member())
    s.stable(tps("t-0", "t-1"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)
    join = s.take(SendJoinGroup)
    # A leader that gave us something anyway (t-1 kept, t-2 new): the hand-off round is over,
    # so we leave, revoking what we hold, rather than hand off again.
    cb = s.join_as_follower(tps("t-1", "t-2"), generation_id=2, join=join)
    assert cb.revoked == tps("t-0")
    s.feed(CallbacksFinished(cb.token))
    assigned = s.take(InvokeCallbacks)
    assert assigned.assigned == tps("t-2")
    s.feed(CallbacksFinished(assigned.token))
    revoke = s.take(InvokeCallbacks)
    assert revoke.revoked == tps("t-1", "t-2") and revoke.lost == frozenset()
    s.feed(CallbacksFinished(revoke.token))
    assert not s.has(SendJoinGroup)
    _finish_leave(s)


def test_a_failed_hand_off_join_is_retried_still_subscribed_to_nothing() -> None:
    s = Script(member())
    s.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupFailed(join.token, 27))  # REBALANCE_IN_PROGRESS: join again at once
    _hand_off_round(s, s.take(SendJoinGroup), tps("t-0"), 2)


def test_hand_off_asked_mid_rebalance_waits_for_that_round_first() -> None:
    s = Script(member())
    s.stable(tps("t-0", "t-1"), marks=(HAND_OFF_AWARE,))
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    join = s.take(SendJoinGroup)
    assert list(join_subscription(join).topics) == ["t"]  # sent before the hand-off
    _hand_off(s)
    assert not s.has(SendJoinGroup) and not s.has(InvokeCallbacks)
    # That round (not a hand-off round) takes t-1; afterwards the member hands t-0 over.
    cb = s.join_as_follower(tps("t-0"), generation_id=2, join=join, marks=(HAND_OFF_AWARE,))
    assert cb.revoked == tps("t-1")
    s.feed(CallbacksFinished(cb.token))
    s.finish_callbacks()
    assert not s.has(SendLeaveGroup)
    _hand_off_round(s, s.take(SendJoinGroup), tps("t-0"), 3)


def test_a_hand_off_that_takes_too_long_leaves_as_a_close_does() -> None:
    s = Script(member())
    s.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(s, within=5.0)
    s.take(SendJoinGroup)
    assert s.m.next_deadline() == s.now + 5.0
    s.timer(s.now + 5.0)
    # Mid-rebalance at the deadline: as a close that could not finish the rebalance.
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0")
    s.feed(CallbacksFinished(cb.token))
    _finish_leave(s)


def test_a_plain_close_ends_a_hand_off_not_yet_sent() -> None:
    s = Script(member(enable_auto_commit=True))
    s.start()
    assigned = s.join_as_follower(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)  # waits for the rebalance under way (our on_assigned runs)
    assert not s.has(SendJoinGroup)
    s.feed(CloseRequested(finish_rebalance_by=s.now + 20))
    s.feed(CallbacksFinished(assigned.token))
    # A stable member closing: the usual commit, revoke, leave; no hand-off JoinGroup.
    assert not s.has(SendJoinGroup)
    s.feed(CommitCompleted(s.take(CommitOffsets).token))
    assert s.finish_callbacks().revoked == tps("t-0")
    _finish_leave(s)


def test_a_second_hand_off_request_changes_nothing() -> None:
    s = Script(member())
    s.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)
    join = s.take(SendJoinGroup)
    _hand_off(s)
    assert s.pending == []
    cb = s.join_as_follower(frozenset(), generation_id=2, join=join)
    assert cb.revoked == tps("t-0")


def test_eager_members_and_static_members_and_empty_hands_leave_as_usual() -> None:
    eager = Script(member(EAGER, assignor=EagerFixed()))
    eager.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(eager)
    assert not eager.has(SendJoinGroup)
    assert eager.finish_callbacks().revoked == tps("t-0")
    _finish_leave(eager)

    static = Script(member(group_instance_id="i-1"))
    static.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(static)
    assert not static.has(SendJoinGroup)
    assert static.finish_callbacks().revoked == tps("t-0")
    assert not static.has(SendLeaveGroup)  # KIP-345: a static member does not leave
    assert static.m.state is MemberState.CLOSED

    empty = Script(member())
    empty.stable(frozenset(), marks=(HAND_OFF_AWARE,))
    _hand_off(empty)
    assert not empty.has(SendJoinGroup) and not empty.has(InvokeCallbacks)
    _finish_leave(empty)


def test_fenced_during_the_hand_off_reports_lost_and_closes() -> None:
    s = Script(member())
    s.stable(tps("t-0"), marks=(HAND_OFF_AWARE,))
    _hand_off(s)
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupFailed(join.token, 25))  # UNKNOWN_MEMBER_ID: the membership is gone
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0") and cb.revoked == frozenset()
    s.feed(CallbacksFinished(cb.token))
    assert not s.has(SendJoinGroup)
    assert s.m.state is MemberState.CLOSED  # nothing to leave: the member id is gone


def test_a_cooperative_leader_withholds_the_hand_off_partitions_for_one_round() -> None:
    """The leader side, with the real cooperative-sticky assignor: the member handing off
    gets nothing and nobody else gets its partitions in that round (KIP-429 2c-2d); the
    next round, without it, gives them out."""
    s = Script(member(assignor=CooperativeStickyAssignor()))  # type: ignore[arg-type]
    s.start()
    leader_join(s, {"m1": _md(["t"], {"t": (2, 3)}), "m9": _md([], {"t": (0, 1)})}, generation_id=2)
    s.take(RequestMetadata)
    s.feed(MetadataUpdated({"t": 4}))
    sync = s.take(SendSyncGroup)
    got = _sync_assignments(sync)
    assert got == {"m1": tps("t-2", "t-3"), "m9": frozenset()}
    # A follow-up round is certain (m9 leaves once it has revoked): the leader says so.
    marks = {leader_marks(decode_assignment(b)) for _, b in sync.assignments}
    assert marks == {frozenset({HAND_OFF_AWARE, FOLLOW_UP})}
    s.feed(SyncGroupCompleted(sync.token, encode_assignment(Assignment(group_by_topic(got["m1"])))))
    s.finish_callbacks()
    assert s.m.state is MemberState.STABLE
    assert not s.has(SendJoinGroup)  # the leader revoked nothing: no rejoin of its own
    # m9 revoked and left: the next round, without it, gives its partitions out.
    rejoin = rebalance(s)
    s.pending.append(rejoin)
    leader_join(s, {"m1": _md(["t"], {"t": (2, 3)}, gen=2)}, generation_id=3)
    assert _sync_assignments(s.take(SendSyncGroup)) == {"m1": tps("t-0", "t-1", "t-2", "t-3")}
    assert owned_in(rejoin) == tps("t-2", "t-3")


def test_the_leader_does_not_warn_about_a_hand_off_claim(caplog: pytest.LogCaptureFixture) -> None:
    """Claiming partitions of topics no longer subscribed is legal KIP-429 (1a is the member's
    own choice), and every hand-off does it: no warning for it."""
    caplog.set_level(logging.DEBUG)
    assignor = CooperativeStickyAssignor()
    subs = {
        "m1": Subscription(["t"], owned_partitions={"t": [2, 3]}, generation_id=1),
        "m9": Subscription([], owned_partitions={"t": [0, 1]}, generation_id=1),
    }
    result = assignor.assign({"t": 4}, subs)
    assert sorted(p for ps in result["m1"].partitions.values() for p in ps) == [2, 3]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("does not subscribe to" in r.getMessage() for r in caplog.records)


def test_under_a_leader_that_did_not_announce_itself_a_hand_off_is_a_plain_close() -> None:
    """librdkafka's leader gives a hand-off member's partitions to others in the same round
    (it trusts KIP-429 1a): without HAND_OFF_AWARE in our last assignment, no hand-off."""
    s = Script(member())
    s.stable(tps("t-0"))  # no marker: e.g. librdkafka's leader
    _hand_off(s)
    assert not s.has(SendJoinGroup)
    assert s.finish_callbacks().revoked == tps("t-0")
    _finish_leave(s)

    # An aiogroup leader's round, then a peer took over the leadership: no hand-off either.
    s = Script(member())
    s.stable(tps("t-0", "t-1"), marks=(HAND_OFF_AWARE,))
    join = rebalance(s)  # nothing changes hands in this round, led by a peer
    cb = s.join_as_follower(tps("t-0", "t-1"), generation_id=2, join=join, leader="peer-y")
    s.feed(CallbacksFinished(cb.token))
    assert s.m.state is MemberState.STABLE and s.m.leader_id == "peer-y"
    s.clear()
    _hand_off(s)
    assert not s.has(SendJoinGroup)
    assert s.finish_callbacks().revoked == tps("t-0", "t-1")
    _finish_leave(s)


def test_a_leader_change_before_the_hand_off_join_turns_it_into_a_plain_leave() -> None:
    """Found by the rolling-bounce bench's mixed group on Kafka 2.3 (all members stopped at
    once): the hand-off was asked under an aiogroup leader, which then left; the next round
    was led by a peer, and the hand-off JoinGroup sent after it let that peer give the
    partitions away while this member still held them. The gate is checked again before
    every hand-off JoinGroup."""
    s = Script(member())
    s.stable(tps("t-0", "t-1"), marks=(HAND_OFF_AWARE,))
    join = rebalance(s)  # a rebalance under way when the hand-off is asked
    _hand_off(s)
    assert not s.has(SendJoinGroup)
    # That round is led by a peer (the aiogroup leader left): nothing moves, no marker.
    cb = s.join_as_follower(tps("t-0", "t-1"), generation_id=2, join=join, leader="peer-y")
    s.feed(CallbacksFinished(cb.token))
    # No hand-off JoinGroup: the usual leave instead, revoking both.
    assert not s.has(SendJoinGroup)
    assert s.finish_callbacks().revoked == tps("t-0", "t-1")
    _finish_leave(s)
