"""Scripted event sequences through the membership machine (no sockets, no clock)."""

from __future__ import annotations

import re

import pytest

from aiogroup.assignors.base import GroupMetadata, RebalanceProtocol
from aiogroup.errors import (
    CommitFailedError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    InconsistentGroupProtocolError,
    LocalProtocolError,
    PartitionNotAssignedError,
    RebalanceInProgressError,
    RemoteProtocolError,
)
from aiogroup.membership import (
    CallbacksFinished,
    CloseRequested,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    CoordinatorFound,
    CoordinatorLost,
    FindCoordinator,
    HeartbeatCompleted,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupCompleted,
    JoinGroupFailed,
    LeaveGroupCompleted,
    MemberConfig,
    MembershipMachine,
    MemberState,
    MetadataUpdated,
    RaiseToUser,
    RebalanceCallbackError,
    RequestMetadata,
    ResolveCommit,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SubscriptionChanged,
    SyncGroupCompleted,
    SyncGroupFailed,
    UnsubscribeRequested,
)
from aiogroup.membership.leader import FOLLOW_UP, HAND_OFF_AWARE, leader_marks
from aiogroup.observability.metrics import KIP429Metrics
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    to_topic_partitions,
)
from aiogroup.protocol.types import TopicPartition

from .helpers import EagerFixed, FixedAssignor, Script, leader_join, member, state_of, tps

COOP = RebalanceProtocol.COOPERATIVE
EAGER = RebalanceProtocol.EAGER


def join_subscription(join: SendJoinGroup) -> Subscription:
    return decode_subscription(join.protocols[0][1])


def owned_in(join: SendJoinGroup) -> frozenset[object]:
    return frozenset(to_topic_partitions(join_subscription(join).owned_partitions))


def rebalance(s: Script) -> SendJoinGroup:
    """STABLE -> a heartbeat answered REBALANCE_IN_PROGRESS -> the JoinGroup it leads to."""
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatFailed(hb.token, 27))
    return s.take(SendJoinGroup)


# -- joining ----------------------------------------------------------------------------------


def test_fresh_follower_joins_and_gets_assigned_callback() -> None:
    assignor = FixedAssignor()
    s = Script(member(assignor=assignor))
    s.start(frozenset({"t"}))
    join = s.pending[-1]
    assert isinstance(join, SendJoinGroup)
    assert (join.member_id, join.generation_id, join.protocol_type) == ("", -1, "consumer")
    sub = join_subscription(join)
    assert list(sub.topics) == ["t"] and dict(sub.owned_partitions) == {}
    assert sub.generation_id == -1
    cb = s.join_as_follower(tps("t-0", "t-1"), member_id="m1", generation_id=5)
    assert cb.protocol is COOP and cb.assigned == tps("t-0", "t-1")
    assert cb.revoked == frozenset() and cb.lost == frozenset()
    # 3d: on_assignment before the assigned callback, with the member's group metadata.
    assert assignor.on_assignment_calls[-1][1] == GroupMetadata(5, "m1", "g", None)
    assert s.m.state is MemberState.RECONCILING
    s.feed(CallbacksFinished(cb.token))
    assert state_of(s.m) is MemberState.STABLE
    assert s.m.assignment == tps("t-0", "t-1")
    assert (s.m.member_id, s.m.generation_id) == ("m1", 5)


def test_join_lists_every_assignor_in_one_request() -> None:
    # aiokafka #1168 sent one JoinGroup per assignor; we send one with all, in order.
    cfg = MemberConfig(group_id="g", assignors=[EagerFixed(), FixedAssignor()])
    s = Script(MembershipMachine(cfg))
    assert s.m.protocol is EAGER
    s.start()
    joins = [a for a in s.pending if isinstance(a, SendJoinGroup)]
    assert len(joins) == 1
    assert [name for name, _ in joins[0].protocols] == ["eager-fixed", "fixed"]
    # KAFKA-12898: the metadata bytes are deterministic.
    s2 = Script(MembershipMachine(cfg))
    s2.start()
    assert s2.take(SendJoinGroup).protocols == joins[0].protocols


def test_member_id_required_rejoins_with_the_given_id() -> None:
    s = Script(member())
    s.start()
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupFailed(join.token, 79, member_id="m-given"))
    assert not s.has(InvokeCallbacks)
    again = s.take(SendJoinGroup)
    assert again.member_id == "m-given" and again.token != join.token


# -- KIP-429 3a-3d: the seed's {1,2} -> {2,3} example -------------------------------------------


@pytest.mark.parametrize("fail_revoked", [False, True])
def test_seed_example_12_to_23(fail_revoked: bool) -> None:
    s = Script(member())
    s.stable(tps("t-1", "t-2"))
    join = rebalance(s)
    assert owned_in(join) == tps("t-1", "t-2")  # 1c: rejoin with what we own
    assert join_subscription(join).generation_id == 1
    cb = s.join_as_follower(tps("t-2", "t-3"), generation_id=2, join=join)
    # 3c: revoked first, alone (on_assignment and assigned come after).
    assert cb.revoked == tps("t-1") and cb.assigned is None
    assert s.m.assignment == tps("t-1", "t-2")  # the revoked callback may still commit t-1
    assert s.m.fetchable == tps("t-2")  # KAFKA-14196: no fetching while pending revocation
    boom = ValueError("revoked failed")
    s.feed(CallbacksFinished(cb.token, boom if fail_revoked else None))
    cb2 = s.take(InvokeCallbacks)
    assert cb2.assigned == tps("t-3") and cb2.revoked == frozenset()
    assert not s.has(SendJoinGroup)  # KAFKA-14382: not before this rebalance completes
    s.feed(CallbacksFinished(cb2.token))
    # The assignment change stands even though a callback raised.
    assert s.m.assignment == tps("t-2", "t-3")
    raised = [a for a in s.pending if isinstance(a, RaiseToUser)]
    if fail_revoked:
        assert len(raised) == 1 and isinstance(raised[0].error, RebalanceCallbackError)
        assert raised[0].error.__cause__ is boom and not raised[0].fatal
    else:
        assert raised == []
    # 3c: revoked non-empty -> rejoin, owning {2, 3}.
    rejoin = s.take(SendJoinGroup)
    assert owned_in(rejoin) == tps("t-2", "t-3")


def test_cooperative_assigned_is_delivered_even_when_empty() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    s.pending.append(rebalance(s))
    cb = s.join_as_follower(tps("t-0"), generation_id=2)
    assert cb.assigned == frozenset() and cb.revoked == frozenset()  # 3d: even if empty
    s.feed(CallbacksFinished(cb.token))
    assert not s.has(SendJoinGroup) and s.m.state is MemberState.STABLE


def test_eager_timeline_revokes_everything_before_joining() -> None:
    s = Script(member(EAGER))
    s.stable(tps("t-0", "t-1"))
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    cb = s.take(InvokeCallbacks)
    assert cb.protocol is EAGER and cb.revoked == tps("t-0", "t-1") and cb.assigned is None
    assert not s.has(SendJoinGroup)
    s.feed(CallbacksFinished(cb.token))
    assert s.m.assignment == frozenset()
    join = s.pending[-1]
    assert isinstance(join, SendJoinGroup) and owned_in(join) == frozenset()
    cb = s.join_as_follower(tps("t-1"), generation_id=2)
    assert cb.assigned == tps("t-1") and cb.revoked == frozenset()  # full set, after sync


# -- the per-error matrix (Java ConsumerCoordinatorTest) -----------------------------------------


def _stable_then(s: Script, api: str) -> object:
    """Bring ``s`` to the point where ``api``'s request is in flight; return that request."""
    s.stable(tps("t-0", "t-1"))
    if api == "heartbeat":
        deadline = s.m.next_deadline()
        assert deadline is not None
        s.timer(deadline)
        return s.take(SendHeartbeat)
    if api == "commit":
        return s.m.commit({tps("t-0").__iter__().__next__(): 5}, s.now)
    join = rebalance(s)
    if api == "join":
        return join
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    return s.take(SendSyncGroup)


def _fail(s: Script, api: str, req: object, code: int) -> None:
    token = req.token  # type: ignore[attr-defined]
    event = {
        "heartbeat": HeartbeatFailed,
        "join": JoinGroupFailed,
        "sync": SyncGroupFailed,
        "commit": CommitFailed,
    }[api](token, code)
    s.feed(event)


APIS = ["heartbeat", "join", "sync", "commit"]


@pytest.mark.parametrize("api", APIS)
def test_rebalance_in_progress_rejoins_keeping_owned(api: str) -> None:
    s = Script(member())
    req = _stable_then(s, api)
    _fail(s, api, req, 27)
    assert not any(isinstance(a, InvokeCallbacks) and a.lost for a in s.pending)
    join = s.take(SendJoinGroup)
    assert owned_in(join) == tps("t-0", "t-1")  # 1c
    assert join.member_id == "m1"
    if api == "commit":
        resolved = s.take(ResolveCommit)
        assert isinstance(resolved.error, RebalanceInProgressError)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("code", [25, 22])
def test_unknown_member_or_illegal_generation_loses_everything(api: str, code: int) -> None:
    s = Script(member())
    req = _stable_then(s, api)
    _fail(s, api, req, code)
    # 1d: lost for all owned (KAFKA-12983 when this happens during JoinGroup) ...
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("t-0", "t-1") and cb.revoked == frozenset() and cb.assigned is None
    assert not s.has(SendJoinGroup)
    assert s.m.fetchable == frozenset()
    s.feed(CallbacksFinished(cb.token))
    # ... then rejoin owning nothing (KAFKA-12984), generation reset, member id per error.
    join = s.take(SendJoinGroup)
    assert owned_in(join) == frozenset()
    assert join.generation_id == -1 and join_subscription(join).generation_id == -1
    assert join.member_id == ("" if code == 25 else "m1")
    if api == "commit":
        assert isinstance(s.take(ResolveCommit).error, CommitFailedError)


@pytest.mark.parametrize("api", APIS)
def test_fenced_instance_id_is_fatal(api: str) -> None:
    s = Script(member(group_instance_id="static-1"))
    req = _stable_then(s, api)
    _fail(s, api, req, 82)
    raised = [a for a in s.pending if isinstance(a, RaiseToUser)]
    assert len(raised) == 1 and raised[0].fatal
    assert isinstance(raised[0].error, FencedInstanceIdError)
    assert s.m.state is MemberState.FATAL and s.m.next_deadline() is None
    assert s.take(InvokeCallbacks).lost == tps("t-0", "t-1")  # someone else owns them now
    assert s.m.assignment == frozenset()
    with pytest.raises(LocalProtocolError):
        s.feed(SubscriptionChanged(topics=frozenset({"t"})))
    with pytest.raises(CommitFailedError):
        s.m.commit(None, s.now)
    s.feed(CloseRequested())
    assert state_of(s.m) is MemberState.CLOSED


@pytest.mark.parametrize("api", ["heartbeat", "join", "sync"])
@pytest.mark.parametrize("code", [15, 16])
def test_coordinator_errors_rediscover(api: str, code: int) -> None:
    s = Script(member())
    req = _stable_then(s, api)
    _fail(s, api, req, code)
    find = s.take(FindCoordinator)
    assert s.m.state is MemberState.DISCOVERING
    assert s.m.assignment == tps("t-0", "t-1")  # ownership is kept
    s.clear()
    s.feed(CoordinatorFound(find.token, 2))
    if api == "heartbeat":
        assert state_of(s.m) is MemberState.STABLE and not s.has(SendJoinGroup)
    else:
        assert owned_in(s.take(SendJoinGroup)) == tps("t-0", "t-1")


def test_commit_coordinator_error_is_retriable_and_rediscovers() -> None:
    s = Script(member())
    req = _stable_then(s, "commit")
    _fail(s, "commit", req, 16)
    resolved = s.take(ResolveCommit)
    assert resolved.error is not None and resolved.error.retriable  # type: ignore[attr-defined]
    assert s.has(FindCoordinator)


def test_unknown_heartbeat_error_is_raised_not_fatal_and_retried() -> None:
    s = Script(member())
    hb = _stable_then(s, "heartbeat")
    _fail(s, "heartbeat", hb, 30)
    raised = s.take(RaiseToUser)
    assert isinstance(raised.error, GroupAuthorizationFailedError) and not raised.fatal
    assert s.m.state is MemberState.STABLE
    deadline = s.m.next_deadline()
    assert deadline is not None and deadline <= s.now + 0.1 + 1e-9
    s.timer(deadline)
    assert s.has(SendHeartbeat)


def test_unknown_join_error_is_raised_and_join_retried_after_backoff() -> None:
    s = Script(member())
    s.start()
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupFailed(join.token, 23))
    assert isinstance(s.take(RaiseToUser).error, InconsistentGroupProtocolError)
    assert not s.has(SendJoinGroup)
    deadline = s.m.next_deadline()
    assert deadline is not None and deadline == pytest.approx(s.now + 0.1)
    s.timer(deadline)
    assert s.has(SendJoinGroup)


def test_retriable_join_error_retries_silently() -> None:
    s = Script(member())
    s.start()
    s.feed(JoinGroupFailed(s.take(SendJoinGroup).token, 14))
    assert not s.has(RaiseToUser) and not s.has(SendJoinGroup)
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    assert s.has(SendJoinGroup)


def test_join_response_with_protocol_we_do_not_run_is_remote_error() -> None:
    s = Script(member())
    s.start()
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupCompleted(join.token, 1, "m1", "x", "roundrobin"))
    assert isinstance(s.take(RaiseToUser).error, RemoteProtocolError)
    assert s.m.state is MemberState.UNJOINED


def test_undecodable_assignment_is_remote_error_and_rejoins() -> None:
    s = Script(member())
    s.start()
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupCompleted(join.token, 1, "m1", "x", "fixed"))
    s.feed(SyncGroupCompleted(s.take(SendSyncGroup).token, b"\x00"))
    assert isinstance(s.take(RaiseToUser).error, RemoteProtocolError)
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    assert s.has(SendJoinGroup)


def test_empty_assignment_bytes_mean_nothing_assigned() -> None:
    """The coordinator gives a member the leader left out an empty array; librdkafka's leader
    leaves out members it gives nothing. Found with librdkafka leading a group where our
    member handed off: before, this raised 'undecodable assignment' and rejoined forever."""
    s = Script(member())
    s.stable(tps("t-0"))
    join = rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "x", "fixed"))
    s.feed(SyncGroupCompleted(s.take(SendSyncGroup).token, b""))
    assert not s.has(RaiseToUser)
    cb = s.take(InvokeCallbacks)
    assert cb.revoked == tps("t-0")


# -- stale responses ---------------------------------------------------------------------------


def test_stale_heartbeat_response_from_older_generation_is_ignored() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    old_hb = s.take(SendHeartbeat)
    s.feed(HeartbeatFailed(old_hb.token, 27))
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "x", "fixed"))
    state = s.m.state
    # A late answer to the old heartbeat: UNKNOWN_MEMBER_ID must not reset generation 2.
    assert s.feed(HeartbeatFailed(old_hb.token, 25)) == []
    assert s.feed(HeartbeatCompleted(old_hb.token)) == []
    assert s.m.state is state and s.m.generation_id == 2 and s.m.member_id == "m1"


def test_join_response_after_coordinator_moved_is_ignored() -> None:
    s = Script(member())
    s.start()
    join = s.take(SendJoinGroup)
    s.feed(CoordinatorLost())
    find = s.take(FindCoordinator)
    assert s.feed(JoinGroupCompleted(join.token, 1, "m1", "x", "fixed")) == []
    assert s.m.state is MemberState.DISCOVERING
    s.feed(CoordinatorFound(find.token, 3))
    assert s.take(SendJoinGroup).token != join.token


def test_stale_commit_failure_resolves_but_does_not_reset() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    commit = s.m.commit(None, s.now)
    join = rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "x", "fixed"))
    s.feed(SyncGroupCompleted(s.take(SendSyncGroup).token, encode_assignment(Assignment())))
    s.finish_callbacks()
    s.clear()
    s.feed(CommitFailed(commit.token, 22))  # answers the generation-1 commit
    assert isinstance(s.take(ResolveCommit).error, CommitFailedError)
    assert s.m.generation_id == 2 and not s.has(InvokeCallbacks)


def test_duplicate_and_unknown_tokens_are_ignored() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    for event in (
        CallbacksFinished(999),
        SyncGroupCompleted(999, b""),
        JoinGroupFailed(999, 25),
        LeaveGroupCompleted(999),
        CommitCompleted(999),
        CoordinatorFound(999, 1),
    ):
        assert s.feed(event) == []
    assert s.m.state is MemberState.STABLE


# -- commits -----------------------------------------------------------------------------------


def test_commit_gating() -> None:
    s = Script(member())
    with pytest.raises(CommitFailedError):
        s.m.commit(None, s.now)  # never joined
    s.start()
    with pytest.raises(RebalanceInProgressError):
        s.m.commit(None, s.now)  # JoinGroup in flight
    cb = s.join_as_follower(tps("t-0"), generation_id=4)
    action = s.m.commit({next(iter(tps("t-0"))): 10}, s.now)  # inside the assigned callback
    assert (action.member_id, action.generation_id) == ("m1", 4)
    s.feed(CallbacksFinished(cb.token))
    s.feed(CommitCompleted(action.token))
    assert s.take(ResolveCommit).error is None
    s.feed(CoordinatorLost())
    with pytest.raises(CoordinatorNotAvailableError):
        s.m.commit(None, s.now)


@pytest.mark.parametrize("protocol", [COOP, EAGER])
def test_commit_of_a_partition_not_owned_is_refused(protocol: RebalanceProtocol) -> None:
    """Chaos runs found commits of partitions revoked a moment before (a loop that read
    ``assignment``, then committed): the broker takes them under the member's generation, and
    under COOPERATIVE the new owner shares that generation. Refused, as aiokafka does; inside
    the revocation callback the partition is still ours and its commit goes out."""
    s = Script(member(protocol))
    s.stable(tps("t-0", "t-1"))
    t0, t1 = sorted(tps("t-0", "t-1"))
    with pytest.raises(PartitionNotAssignedError, match="t-7"):
        s.m.commit({TopicPartition("t", 7): 1, t0: 5}, s.now)
    assert s.pending == []  # nothing sent, not even the owned part
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    if protocol is COOP:
        cb = s.join_as_follower(tps("t-0"), generation_id=2)
        assert cb.revoked == tps("t-1")
        # Inside on_partitions_revoked t-1 is still ours: its final commit goes out.
        assert s.m.commit({t1: 9}, s.now).offsets == {t1: 9}
        s.feed(CallbacksFinished(cb.token))
        s.finish_callbacks()
        with pytest.raises(PartitionNotAssignedError, match="revoked since"):
            s.m.commit({t1: 10}, s.now)  # after the callback returned
        assert s.m.commit({t0: 11}, s.now).offsets == {t0: 11}
    else:
        cb = s.take(InvokeCallbacks)
        assert s.m.commit({t1: 9}, s.now).offsets == {t1: 9}  # inside the eager revocation
        s.feed(CallbacksFinished(cb.token))
        with pytest.raises(RebalanceInProgressError):
            s.m.commit({t1: 10}, s.now)  # eager, mid-rebalance: retriable, as before


def test_commit_in_flight_when_coordinator_lost_fails_retriably() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    action = s.m.commit(None, s.now)
    s.feed(CoordinatorLost())
    resolved = s.take(ResolveCommit)
    assert resolved.token == action.token
    assert isinstance(resolved.error, CoordinatorNotAvailableError)
    assert s.feed(CommitCompleted(action.token)) == []


def test_auto_commit_before_rebalance_waits_for_result() -> None:
    s = Script(member(EAGER, enable_auto_commit=True))
    s.stable(tps("t-0"))
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    commit = s.take(CommitOffsets)
    assert commit.offsets is None and commit.generation_id == 1
    assert not s.has(InvokeCallbacks) and not s.has(SendJoinGroup)
    s.feed(CommitCompleted(commit.token))
    assert s.take(InvokeCallbacks).revoked == tps("t-0")


def test_cooperative_auto_commit_goes_with_the_join_not_before_it() -> None:
    # KIP-429: the member keeps what it owns through the join, so the rejoin is not held back
    # by a commit round trip (round two waits for the revokers' JoinGroups, while the
    # partitions that move have no owner).
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    s.timer(s.m.next_deadline() or 0.0)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    assert s.kinds() == ["CommitOffsets", "SendJoinGroup"]
    commit, join = s.take(CommitOffsets), s.take(SendJoinGroup)
    assert commit.offsets is None and commit.generation_id == 1 and commit.during_join
    assert owned_in(join) == tps("t-0") and s.m.assignment == tps("t-0")
    # The commit's answer changes nothing; the join goes on.
    s.feed(CommitCompleted(commit.token))
    assert s.take(ResolveCommit).error is None and s.pending == []
    assert s.m.state is MemberState.JOINING


def test_a_cooperative_revocation_rejoins_with_one_commit_sent_beside_the_join() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0", "t-1"), generation_id=1)
    s.timer(s.m.next_deadline() or 0.0)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    s.take(CommitOffsets)
    cb = s.join_as_follower(tps("t-0"), generation_id=2, join=s.take(SendJoinGroup))
    assert cb.revoked == tps("t-1")
    s.feed(CallbacksFinished(cb.token))
    s.finish_callbacks()  # assigned (nothing new)
    assert s.kinds() == ["CommitOffsets", "SendJoinGroup"]  # at once, no answer awaited
    assert owned_in(s.take(SendJoinGroup)) == tps("t-0")


# -- KIP-429 1a/1b and KIP-70 -----------------------------------------------------------------


def test_subscription_change_revokes_unsubscribed_before_join_cooperative() -> None:
    s = Script(member())
    s.stable(tps("t-0", "u-0"), topics=frozenset({"t", "u"}))
    s.feed(SubscriptionChanged(topics=frozenset({"t"})))
    meta = s.take(RequestMetadata)
    assert meta.topics == frozenset({"t", "u"})  # owned topics too: u is revoked, not lost
    cb = s.take(InvokeCallbacks)
    assert cb.revoked == tps("u-0") and cb.lost == frozenset()  # 1a
    assert s.m.assignment == tps("t-0", "u-0")  # KIP-70: unchanged until the rebalance acts
    s.feed(CallbacksFinished(cb.token))
    join = s.take(SendJoinGroup)
    assert list(join_subscription(join).topics) == ["t"]
    assert owned_in(join) == tps("t-0")


def test_metadata_change_marks_vanished_partitions_lost() -> None:
    s = Script(member())
    s.stable(tps("t-0", "u-0"), topics=frozenset({"t", "u"}))
    s.feed(MetadataUpdated({"t": 1, "u": 1}))
    assert s.pending == []
    s.feed(MetadataUpdated({"t": 1}))  # u was deleted
    cb = s.take(InvokeCallbacks)
    assert cb.lost == tps("u-0") and cb.revoked == frozenset()  # 1b
    s.feed(CallbacksFinished(cb.token))
    assert owned_in(s.take(SendJoinGroup)) == tps("t-0")


@pytest.mark.parametrize("regex", [False, True])
def test_kip70_foo_bar_example(regex: bool) -> None:
    """The seed's example: subscribe(foo, bar), then subscribe(foo) / pattern f.. (eager)."""
    s = Script(member(EAGER))
    first = (
        SubscriptionChanged(pattern=re.compile("..."))
        if regex
        else SubscriptionChanged(topics=frozenset({"foo", "bar"}))
    )
    s.feed(first)
    assert s.m.assignment == frozenset()
    s.take(RequestMetadata)
    s.feed(MetadataUpdated({"foo": 1, "bar": 1}))
    s.feed(CoordinatorFound(s.take(FindCoordinator).token, 1))
    assert list(join_subscription(s.pending[-1]).topics) == ["bar", "foo"]  # type: ignore[arg-type]
    cb = s.join_as_follower(tps("foo-0", "bar-0"))
    assert cb.revoked == frozenset()  # onPartitionsRevoked([]) is not delivered (KIP-429)
    assert cb.assigned == tps("foo-0", "bar-0")
    s.feed(CallbacksFinished(cb.token))
    s.clear()
    second = (
        SubscriptionChanged(pattern=re.compile("f.."))
        if regex
        else SubscriptionChanged(topics=frozenset({"foo"}))
    )
    s.feed(second)
    assert s.m.assignment == tps("foo-0", "bar-0")  # notice the change: not filtered at once
    if regex:
        s.feed(MetadataUpdated({"foo": 1, "bar": 1}))
    cb = s.take(InvokeCallbacks)
    assert cb.revoked == tps("foo-0", "bar-0")  # notice the change
    s.feed(CallbacksFinished(cb.token))
    join = s.take(SendJoinGroup)
    assert list(join_subscription(join).topics) == ["foo"]
    s.pending.append(join)
    cb = s.join_as_follower(tps("foo-0"), generation_id=2)
    assert cb.assigned == tps("foo-0")
    s.feed(CallbacksFinished(cb.token))
    assert s.m.assignment == tps("foo-0")


def test_unsubscribe_commits_then_revokes_then_leaves() -> None:
    s = Script(member(enable_auto_commit=True))
    s.stable(tps("t-0"))
    s.feed(UnsubscribeRequested())
    commit = s.take(CommitOffsets)
    assert s.pending == []  # nothing else until the commit is answered (KIP-70)
    assert s.m.assignment == tps("t-0")
    s.feed(CommitCompleted(commit.token))
    assert s.take(ResolveCommit).error is None
    cb = s.take(InvokeCallbacks)
    assert cb.revoked == tps("t-0")
    s.feed(CallbacksFinished(cb.token))
    assert s.m.assignment == frozenset()
    leave = s.take(SendLeaveGroup)
    assert leave.member_id == "m1"
    s.feed(LeaveGroupCompleted(leave.token))
    assert s.m.state is MemberState.UNJOINED and not s.m.has_subscription
    assert s.m.member_id == "" and s.m.generation_id == -1
    # and the member can subscribe again
    s.feed(SubscriptionChanged(topics=frozenset({"t"})))
    assert s.has(SendJoinGroup)


def test_static_member_close_sends_no_leave_group() -> None:
    s = Script(member(group_instance_id="i-1"))
    s.stable(tps("t-0"))
    s.feed(CloseRequested())
    s.finish_callbacks()
    assert not s.has(SendLeaveGroup)
    assert s.m.state is MemberState.CLOSED


def test_dynamic_member_close_leaves() -> None:
    s = Script(member())
    s.stable(tps("t-0"))
    s.feed(CloseRequested())
    s.finish_callbacks()
    leave = s.take(SendLeaveGroup)
    s.feed(LeaveGroupCompleted(leave.token, 25))  # best effort, any code
    assert s.m.state is MemberState.CLOSED
    with pytest.raises(LocalProtocolError):
        s.m.commit(None, s.now)


# -- leader ------------------------------------------------------------------------------------


def _md(topics: list[str], owned: dict[str, tuple[int, ...]] | None = None, gen: int = 1) -> bytes:
    return encode_subscription(
        Subscription(topics, owned_partitions=owned or {}, generation_id=gen)
    )


def _sync_assignments(sync: SendSyncGroup) -> dict[str, frozenset[TopicPartition]]:
    return {
        m: frozenset(to_topic_partitions(decode_assignment(b).partitions))
        for m, b in sync.assignments
    }


def test_leader_waits_for_metadata_then_withholds_moving_partitions() -> None:
    assignor = FixedAssignor({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    s = Script(member(assignor=assignor))
    s.start()
    leader_join(
        s,
        {
            "m1": _md(["t"]),
            "m2": _md(["t"], {"t": (0, 2)}),  # m2 owns t-0 and t-2
            "m3": b"\xff\xff garbage",
        },
        generation_id=2,
    )
    assert s.m.state is MemberState.AWAITING_METADATA
    meta = s.take(RequestMetadata)
    assert meta.topics is not None and "t" in meta.topics
    s.feed(MetadataUpdated({"t": 3}))
    sync = s.take(SendSyncGroup)
    got = _sync_assignments(sync)
    # 2d: t-0 changes owner (m2 -> m1): withheld from m1 until m2 revoked it.
    assert got == {"m1": tps("t-1"), "m2": tps("t-2"), "m3": frozenset()}
    assert [m for m, _ in sync.assignments] == ["m1", "m2", "m3"]
    plan = s.m.last_leader_plan
    assert plan is not None
    assert plan.owned == tps("t-0", "t-2")
    assert plan.maybe_revoking == tps("t-0", "t-2")
    assert plan.ready_to_migrate == tps("t-1")
    assert plan.unknown_but_owned == frozenset()
    assert plan.withheld == tps("t-0")
    assert s.m.undecodable_members == frozenset({"m3"})
    assert set(assignor.calls[-1][1]) == {"m1", "m2"}  # garbage never reaches the assignor


def test_eager_leader_does_not_withhold() -> None:
    assignor = EagerFixed({"m1": tps("t-0"), "m2": tps("t-1")})
    s = Script(member(EAGER, assignor=assignor))
    s.feed(MetadataUpdated({"t": 2}))
    s.start()
    leader_join(s, {"m1": _md(["t"]), "m2": _md(["t"], {"t": (0,)})})
    assert _sync_assignments(s.take(SendSyncGroup)) == {"m1": tps("t-0"), "m2": tps("t-1")}


def test_leader_conflicting_claims_higher_generation_wins_kafka_13406() -> None:
    # m2 rejoins claiming t-0 from generation 1; m3 claims it at generation 2.
    assignor = FixedAssignor({"m1": frozenset(), "m2": tps("t-0"), "m3": tps("t-0", "t-1")})
    s = Script(member(assignor=assignor))
    s.feed(MetadataUpdated({"t": 2}))
    s.start()
    leader_join(
        s,
        {"m1": _md(["t"]), "m2": _md(["t"], {"t": (0,)}, 1), "m3": _md(["t"], {"t": (0,)}, 2)},
        generation_id=3,
    )
    got = _sync_assignments(s.take(SendSyncGroup))
    assert got["m2"] == frozenset()  # the stale claim loses and cannot receive it
    assert got["m3"] == tps("t-0", "t-1")


def test_leader_equal_generation_conflict_nobody_gets_it() -> None:
    assignor = FixedAssignor({"m1": tps("t-0"), "m2": frozenset()})
    s = Script(member(assignor=assignor))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t"], {"t": (0,)}, 1), "m2": _md(["t"], {"t": (0,)}, 1)})
    assert _sync_assignments(s.take(SendSyncGroup)) == {"m1": frozenset(), "m2": frozenset()}


def test_leader_gives_unknown_but_owned_back_kip429_2f() -> None:
    assignor = FixedAssignor({"m1": tps("t-0")})
    s = Script(member(assignor=assignor))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t"]), "m2": _md(["t", "new"], {"new": (0,)})})
    s.take(RequestMetadata)
    s.feed(MetadataUpdated({"t": 1}))  # the leader's metadata has no "new" yet
    got = _sync_assignments(s.take(SendSyncGroup))
    assert got == {"m1": tps("t-0"), "m2": tps("new-0")}
    plan = s.m.last_leader_plan
    assert plan is not None and plan.unknown_but_owned == tps("new-0")
    assert plan.given_back == tps("new-0")


def test_leader_rejoins_when_partition_count_changes() -> None:
    assignor = FixedAssignor({"m1": tps("t-0")})
    s = Script(member(assignor=assignor))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t"])})
    sync = s.take(SendSyncGroup)
    s.feed(SyncGroupCompleted(sync.token, sync.assignments[0][1]))
    s.finish_callbacks()
    s.clear()
    s.feed(MetadataUpdated({"t": 1}))
    assert not s.has(SendJoinGroup)
    s.feed(MetadataUpdated({"t": 4}))  # 1b, leader: partitions added
    assert s.has(SendJoinGroup)


def test_assignor_failure_is_raised_and_join_retried() -> None:
    class Broken(FixedAssignor):
        def assign(self, partitions_per_topic, subscriptions):  # type: ignore[no-untyped-def]
            raise RuntimeError("bug")

    s = Script(member(assignor=Broken()))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t"])})
    raised = s.take(RaiseToUser)
    assert isinstance(raised.error.__cause__, RuntimeError)
    deadline = s.m.next_deadline()
    assert deadline is not None
    s.timer(deadline)
    assert s.has(SendJoinGroup)


# -- timers ------------------------------------------------------------------------------------


def test_heartbeat_schedule_and_session_timeout() -> None:
    s = Script(
        member(RebalanceProtocol.EAGER, heartbeat_interval_ms=1000, session_timeout_ms=10_000)
    )
    s.stable(tps("t-0"))
    t0 = s.now
    assert s.m.next_deadline() == pytest.approx(t0 + 1)
    assert s.timer(t0 + 0.5) == []  # early wake-ups are harmless
    s.timer(t0 + 1)
    hb = s.take(SendHeartbeat)
    assert (hb.member_id, hb.generation_id) == ("m1", 1)
    assert s.m.next_deadline() == pytest.approx(t0 + 10)  # only the session, while in flight
    s.feed(HeartbeatCompleted(hb.token))
    assert s.m.next_deadline() == pytest.approx(t0 + 2)
    s.timer(t0 + 2)
    s.take(SendHeartbeat)  # never answered
    s.timer(t0 + 11.5)
    assert s.has(FindCoordinator) and s.m.state is MemberState.DISCOVERING


def _prompt_heartbeats(s: Script, t0: float, until: float) -> list[float]:
    """Answer every heartbeat due before ``until``; return when each was sent."""
    sent: list[float] = []
    while True:
        due = s.m.next_deadline()
        assert due is not None
        if due >= until:
            return sent
        s.timer(due)
        hb = s.take(SendHeartbeat)
        sent.append(round(due - t0, 6))
        s.feed(HeartbeatCompleted(hb.token))


def test_cooperative_sync_is_followed_by_prompt_heartbeats_for_one_interval() -> None:
    # KIP-429: round two of a rebalance starts when the members that did not revoke learn of
    # it from a heartbeat; for one interval after a cooperative SyncGroup they ask every tenth.
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000))
    s.stable(tps("t-0"))
    t0 = s.now
    sent = _prompt_heartbeats(s, t0, t0 + 3.5)
    assert len(sent) == 12  # ten within the interval after the sync, then one per interval
    gaps = [b - a for a, b in zip([0.0, *sent[:-1]], sent, strict=True)]
    assert gaps == pytest.approx([0.1] * 10 + [1.0] * 2)


def test_an_assignment_marked_follow_up_makes_heartbeats_fast_for_a_tenth_of_the_interval() -> None:
    # The aiogroup leader withheld partitions in this round, so round two comes as soon as
    # their owner has revoked them: a member heartbeats every hundredth of the interval for a
    # tenth of it, then at the prompt pace.
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000))
    s.stable(tps("t-0"), marks=(HAND_OFF_AWARE, FOLLOW_UP))
    t0 = s.now
    sent = _prompt_heartbeats(s, t0, t0 + 2.5)
    gaps = [round(b - a, 6) for a, b in zip([0.0, *sent[:-1]], sent, strict=True)]
    assert gaps == pytest.approx([0.01] * 10 + [0.1] * 9 + [1.0])
    assert not s.has(SendJoinGroup)  # a follower does not rejoin by itself


@pytest.mark.parametrize(
    ("marks", "user_data"),
    [
        ((HAND_OFF_AWARE,), None),
        ((b"kafka:follow-up/1",), None),
        ((b"x " + FOLLOW_UP,), None),
        ((), b"kafka:follow-up/1"),
        ((), b"x " + FOLLOW_UP),
        ((), FOLLOW_UP[:-2]),
        ((), None),
    ],
    ids=[
        "hand-off-only",
        "not-ours",
        "not-ours-prefix",
        "user-data-not-ours",
        "user-data-not-ours-prefix",
        "user-data-no-version",
        "none",
    ],
)
def test_only_our_follow_up_mark_makes_heartbeats_fast(
    marks: tuple[bytes, ...], user_data: bytes | None
) -> None:
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000))
    s.stable(tps("t-0"), marks=marks, user_data=user_data)
    t0 = s.now
    assert _prompt_heartbeats(s, t0, t0 + 0.35) == pytest.approx([0.1, 0.2, 0.3])


@pytest.mark.parametrize("where", ["entries", "user-data"])
def test_marks_a_later_version_adds_are_ignored_and_ours_still_read(where: str) -> None:
    # "user-data": where aiogroup 0.x leaders put them (a rolling upgrade of aiogroup itself).
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000))
    marks = (b"aiogroup:future/9", FOLLOW_UP, HAND_OFF_AWARE)
    if where == "entries":
        s.stable(tps("t-0"), marks=marks)
    else:
        s.stable(tps("t-0"), user_data=b" ".join(marks))
    t0 = s.now
    assert _prompt_heartbeats(s, t0, t0 + 0.025) == pytest.approx([0.01, 0.02])


def test_eager_sync_keeps_the_usual_heartbeat_pace() -> None:
    s = Script(
        member(RebalanceProtocol.EAGER, heartbeat_interval_ms=1000, session_timeout_ms=10_000)
    )
    s.stable(tps("t-0"))
    t0 = s.now
    assert _prompt_heartbeats(s, t0, t0 + 3.5) == pytest.approx([1.0, 2.0, 3.0])


def test_prompt_heartbeat_learns_of_round_two_within_a_tenth_of_the_interval() -> None:
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000))
    s.stable(tps("t-0"))
    t0 = s.now
    # a member that gave a partition up rejoined at t0 + 0.05: the group is rebalancing
    s.timer(t0 + 0.1)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))  # REBALANCE_IN_PROGRESS
    join = s.take(SendJoinGroup)
    assert join.generation_id == 1 and s.m.state is MemberState.JOINING


def test_a_failed_prompt_heartbeat_retries_after_the_backoff_not_at_once() -> None:
    s = Script(member(heartbeat_interval_ms=1000, session_timeout_ms=10_000, retry_backoff_ms=250))
    s.stable(tps("t-0"))
    t0 = s.now
    s.timer(t0 + 0.1)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 7))  # REQUEST_TIMED_OUT, retriable
    assert s.m.next_deadline() == pytest.approx(t0 + 0.35)
    assert s.timer(t0 + 0.2) == []


def test_metrics_observed() -> None:
    sink = KIP429Metrics(started_at=0.0)
    cfg = MemberConfig(group_id="g", assignors=[FixedAssignor()], enable_auto_commit=False)
    s = Script(MembershipMachine(cfg, metrics=sink), now=10.0)
    s.start()
    s.now = 10.5
    s.feed(JoinGroupFailed(s.take(SendJoinGroup).token, 27))
    s.now = 11.0
    cb = s.join_as_follower(tps("t-0"))
    s.now = 12.0
    s.feed(CallbacksFinished(cb.token))
    snap = sink.snapshot(14.0)
    assert snap["rebalance-total"] == 1 and snap["failed-rebalance-total"] == 1
    assert snap["rebalance-latency-max"] == pytest.approx(2000.0)  # ms, from 10.0 to 12.0
    assert snap["last-rebalance-seconds-ago"] == pytest.approx(2.0)


# -- misuse ------------------------------------------------------------------------------------


def test_misuse_raises_local_protocol_error() -> None:
    s = Script(member())
    with pytest.raises(LocalProtocolError):
        s.feed(object())  # type: ignore[arg-type]
    with pytest.raises(LocalProtocolError):
        s.feed(SubscriptionChanged())
    with pytest.raises(LocalProtocolError):
        s.feed(SubscriptionChanged(topics=frozenset({"a"}), pattern=re.compile("a")))
    s.feed(CloseRequested())
    assert s.m.state is MemberState.CLOSED
    with pytest.raises(LocalProtocolError):
        s.feed(SubscriptionChanged(topics=frozenset({"a"})))


def test_assignment_bytes_are_encoded_even_when_empty() -> None:
    s = Script(member(assignor=FixedAssignor({})))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t"])})
    sync = s.take(SendSyncGroup)
    # A cooperative leader announces that it withholds for a hand-off (HAND_OFF_AWARE), in
    # an entry without partitions: no user data (Kafka 4's upgrade to KIP-848 refuses it).
    wire = decode_assignment(sync.assignments[0][1])
    assert wire.user_data is None and leader_marks(wire) == {HAND_OFF_AWARE}
    assert to_topic_partitions(wire.partitions) == []


def test_leader_stops_waiting_for_metadata_after_a_heartbeat_interval() -> None:
    assignor = FixedAssignor({"m1": tps("t-0")})
    s = Script(member(assignor=assignor, heartbeat_interval_ms=2000))
    s.feed(MetadataUpdated({"t": 1}))
    s.start()
    leader_join(s, {"m1": _md(["t", "missing"])})
    assert s.m.state is MemberState.AWAITING_METADATA
    s.take(RequestMetadata)
    assert s.m.next_deadline() == pytest.approx(s.now + 2)
    s.timer(s.now + 2)
    sync = s.take(SendSyncGroup)
    assert _sync_assignments(sync) == {"m1": tps("t-0")}
    assert assignor.calls[-1][0] == {"t": 1}  # the missing topic counts as absent
