"""Closing during a rebalance (finish it, then commit and revoke) and the KIP-62 lost leave,
in the sans-I/O machine."""

from __future__ import annotations

from aiogroup.membership import (
    CallbacksFinished,
    CloseRequested,
    CommitCompleted,
    CommitOffsets,
    CoordinatorFound,
    CoordinatorLost,
    FindCoordinator,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupFailed,
    LeaveGroupCompleted,
    MemberState,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    UnsubscribeRequested,
)

from .helpers import Script, member, state_of, tps


def rebalancing(s: Script) -> SendJoinGroup:
    """A stable member told REBALANCE_IN_PROGRESS by its heartbeat; its JoinGroup is pending."""
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatFailed(hb.token, 27))
    commit = s.take(CommitOffsets)  # auto-commit before the JoinGroup (onJoinPrepare)
    s.feed(CommitCompleted(commit.token))
    return s.take(SendJoinGroup)


def test_close_mid_join_finishes_the_rebalance_then_commits_and_revokes() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0", "t-1"))
    join = rebalancing(s)
    s.feed(CloseRequested(finish_rebalance_by=s.now + 20))
    assert s.m.state is MemberState.JOINING and not s.has(InvokeCallbacks)
    assert s.m.next_deadline() is not None
    # The rebalance completes: this member keeps t-0 and gives t-1 up (cooperative).
    cb = s.join_as_follower(tps("t-0"), generation_id=2, join=join)
    assert cb.revoked == tps("t-1")
    s.feed(CallbacksFinished(cb.token))
    assigned = s.take(InvokeCallbacks)
    s.feed(CallbacksFinished(assigned.token))
    # Back in a generation the broker accepts: the final commit, then revoke (not lost).
    commit = s.take(CommitOffsets)
    assert (commit.generation_id, commit.offsets) == (2, None)
    s.feed(CommitCompleted(commit.token))
    revoke = s.take(InvokeCallbacks)
    assert revoke.revoked == tps("t-0") and revoke.lost == frozenset()
    s.feed(CallbacksFinished(revoke.token))
    leave = s.take(SendLeaveGroup)
    s.feed(LeaveGroupCompleted(leave.token))
    assert state_of(s.m) is MemberState.CLOSED
    assert not s.has(SendJoinGroup)  # no follow-up rebalance was started


def test_without_finishing_close_mid_join_reports_lost_as_java() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0", "t-1"))
    rebalancing(s)
    s.feed(CloseRequested())
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0", "t-1") and not s.has(CommitOffsets)


def test_a_close_that_waits_too_long_falls_back_to_lost() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    rebalancing(s)
    s.feed(CloseRequested(finish_rebalance_by=s.now + 5))
    assert s.m.next_deadline() == s.now + 5
    s.timer(s.now + 5)
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0") and not s.has(CommitOffsets)


def test_a_waiting_close_rejoins_after_a_failed_join_and_gives_up_when_the_member_is_gone() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    join = rebalancing(s)
    s.feed(CloseRequested(finish_rebalance_by=s.now + 30))
    s.feed(JoinGroupFailed(join.token, 27))  # REBALANCE_IN_PROGRESS: still in the group
    assert s.take(SendJoinGroup)  # it rejoins to finish the rebalance, owning t-0
    s.clear()
    s2 = Script(member(enable_auto_commit=True))
    s2.stable(tps("t-0"))
    join = rebalancing(s2)
    s2.feed(CloseRequested(finish_rebalance_by=s2.now + 30))
    s2.feed(JoinGroupFailed(join.token, 25))  # UNKNOWN_MEMBER_ID: the membership is gone
    cb = s2.take(InvokeCallbacks)
    assert cb.lost == tps("t-0") and not s2.has(CommitOffsets)


def test_a_waiting_close_rediscovers_a_lost_coordinator_before_committing() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    s.feed(CoordinatorLost())
    find = s.take(FindCoordinator)
    s.feed(CloseRequested(finish_rebalance_by=s.now + 30))
    assert not s.has(InvokeCallbacks)
    s.feed(CoordinatorFound(find.token, 3))
    commit = s.take(CommitOffsets)
    s.feed(CommitCompleted(commit.token))
    assert s.take(InvokeCallbacks).revoked == tps("t-0")


def test_a_stable_member_closes_at_once_even_when_asked_to_finish() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    s.feed(CloseRequested(finish_rebalance_by=s.now + 30))
    assert s.take(CommitOffsets).offsets is None


def test_lost_leave_commits_nothing_reports_lost_and_gives_the_reason() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0", "t-1"))
    s.feed(UnsubscribeRequested(lost=True, reason="consumer poll timeout has expired"))
    assert not s.has(CommitOffsets)
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0", "t-1") and cb.revoked == frozenset()
    s.feed(CallbacksFinished(cb.token))
    leave = s.take(SendLeaveGroup)
    assert leave.reason == "consumer poll timeout has expired"
    s.feed(LeaveGroupCompleted(leave.token))
    assert s.m.state is MemberState.UNJOINED and not s.m.has_subscription
