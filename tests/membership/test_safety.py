"""Safety rules of the membership machine, as scripted event sequences (no sockets, no clock).

* KAFKA-7026, in every state: once a session timeout passes without an answer from the
  coordinator, ``may_act_on(now)`` is empty until the coordinator answers again; an answer
  counts from the time its request was *sent*.
* Commits are refused only where the coordinator would refuse them (KIP-429 members commit
  while they rejoin).

See ``docs/safety.md``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import CommitFailedError, RebalanceInProgressError
from aiogroup.membership import (
    CallbacksFinished,
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
    JoinGroupMember,
    MemberState,
    RequestMetadata,
    ResolveCommit,
    SendHeartbeat,
    SendJoinGroup,
    SendSyncGroup,
    SubscriptionChanged,
    SyncGroupCompleted,
    SyncGroupFailed,
)
from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.protocol.types import TopicPartition, group_by_topic

from .helpers import Script, member, state_of, tps

COOP = RebalanceProtocol.COOPERATIVE
EAGER = RebalanceProtocol.EAGER
SESSION = 10.0  # seconds (session_timeout_ms=10_000)
OWNED = tps("t-0", "t-1")


def stable(
    protocol: RebalanceProtocol = COOP,
    owned: frozenset[TopicPartition] = OWNED,
    topics: frozenset[str] = frozenset({"t"}),
    *,
    auto_commit: bool = False,
) -> Script:
    """A member STABLE in generation 1 owning ``owned``, whose last heartbeat was answered at
    once: its session is proven until ``s.now + SESSION``."""
    s = Script(
        member(
            protocol,
            heartbeat_interval_ms=1_000,
            session_timeout_ms=10_000,
            enable_auto_commit=auto_commit,
        )
    )
    s.stable(owned, topics=topics)
    s.now += 1
    s.timer(s.now)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatCompleted(hb.token))
    assert s.m.session_deadline == pytest.approx(s.now + SESSION)
    assert s.m.may_act_on(s.now) == owned
    s.clear()
    return s


def revoking_unsubscribed(s: Script) -> InvokeCallbacks:
    """A cooperative member drops topic ``u``: PREPARING, its revocation callback running."""
    s.feed(SubscriptionChanged(topics=frozenset({"t"})))
    cb = s.take(InvokeCallbacks)
    assert s.m.state is MemberState.PREPARING and cb.revoked == tps("u-0")
    return cb


def start_rebalance(s: Script) -> SendJoinGroup:
    """STABLE -> a heartbeat answered REBALANCE_IN_PROGRESS at once -> the JoinGroup sent."""
    s.now += 1
    s.timer(s.now)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatFailed(hb.token, 27))
    return s.take(SendJoinGroup)


def sync_bytes(assigned: frozenset[TopicPartition]) -> bytes:
    return encode_assignment(Assignment(group_by_topic(assigned)))


# -- KAFKA-7026: no zombie window in any state ------------------------------------------------


def _preparing(s: Script) -> None:
    revoking_unsubscribed(s)  # the callback runs long; heartbeats go unanswered
    s.now += 1
    s.timer(s.now)


def _joining(s: Script) -> None:
    start_rebalance(s)


def _awaiting_sync(s: Script) -> None:
    join = start_rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    assert s.has(SendSyncGroup)


def _awaiting_metadata(s: Script) -> None:
    join = start_rebalance(s)
    other = encode_subscription(Subscription(["t", "u"]), 3)
    s.feed(
        JoinGroupCompleted(
            join.token,
            2,
            "m1",
            "m1",
            join.protocols[0][0],
            members=(JoinGroupMember("m1", join.protocols[0][1]), JoinGroupMember("m2", other)),
        )
    )
    assert s.has(RequestMetadata)


def _reconciling(s: Script) -> None:
    join = start_rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    sync = s.take(SendSyncGroup)
    s.feed(SyncGroupCompleted(sync.token, sync_bytes(tps("t-0"))))  # the rest is revoked
    assert tps("t-1") <= s.take(InvokeCallbacks).revoked


def _stable(s: Script) -> None:
    s.now += 1
    s.timer(s.now)  # a heartbeat that is never answered


def _discovering(s: Script) -> None:
    s.feed(CoordinatorLost())
    assert s.has(FindCoordinator)


def _unjoined(s: Script) -> None:
    join = start_rebalance(s)
    s.feed(JoinGroupFailed(join.token, 1000))  # unknown error: back off before rejoining


STATES: dict[MemberState, Callable[[Script], None]] = {
    MemberState.PREPARING: _preparing,
    MemberState.JOINING: _joining,
    MemberState.AWAITING_METADATA: _awaiting_metadata,
    MemberState.AWAITING_SYNC: _awaiting_sync,
    MemberState.RECONCILING: _reconciling,
    MemberState.STABLE: _stable,
    MemberState.DISCOVERING: _discovering,
    MemberState.UNJOINED: _unjoined,
}


@pytest.mark.parametrize("state", list(STATES), ids=lambda s: s.name)
def test_a_session_without_an_answer_means_acting_on_nothing_in_every_state(
    state: MemberState,
) -> None:
    s = stable(owned=OWNED | tps("u-0"), topics=frozenset({"t", "u"}))
    STATES[state](s)
    assert s.m.state is state
    proven_until = s.m.session_deadline  # the last answer's send time + the session timeout
    assert proven_until is not None
    owned = s.m.assignment
    assert owned  # it still owns partitions (nothing told it otherwise) ...
    assert s.m.may_act_on(proven_until - 0.001) == s.m.fetchable != frozenset()
    # ... but once a session has passed without an answer it may act on none of them.
    s.timer(proven_until)
    assert s.m.may_act_on(proven_until) == frozenset()
    assert s.m.may_act_on(proven_until + 100) == frozenset()
    assert s.m.assignment == owned  # ownership itself is unchanged: only acting stops


def test_a_held_join_is_no_answer_and_its_late_answer_counts_from_when_it_was_sent() -> None:
    s = stable()
    join = start_rebalance(s)
    hb_sent = s.now  # the REBALANCE_IN_PROGRESS heartbeat was sent (and answered) now
    assert s.m.session_deadline == pytest.approx(hb_sent + SESSION)
    # The JoinGroup is held (or its answer waits in the socket while we are paused).
    s.now = hb_sent + SESSION
    s.timer(s.now)
    assert s.m.state is MemberState.JOINING and s.m.may_act_on(s.now) == frozenset()
    # Its answer arrives two sessions later: the coordinator restarted our session when it
    # answered, some time after the JoinGroup was sent; we cannot know when.
    s.now = hb_sent + 2 * SESSION
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    assert s.m.session_deadline == pytest.approx(hb_sent + SESSION)  # join sent at hb_sent
    assert s.m.may_act_on(s.now) == frozenset()
    # The SyncGroup sent now is answered at once: acting resumes, on the new assignment.
    sync = s.take(SendSyncGroup)
    s.feed(SyncGroupCompleted(sync.token, sync_bytes(OWNED)))
    assert s.m.session_deadline == pytest.approx(s.now + SESSION)
    assert s.m.may_act_on(s.now) == OWNED


def test_a_sync_answer_read_after_a_pause_is_no_proof_of_now() -> None:
    # The coordinator answered our SyncGroup, then expired us while we were paused; the
    # answer is read after the pause. The member must not act on that assignment.
    s = stable()
    join = start_rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    sync = s.take(SendSyncGroup)
    sent = s.now
    s.now = sent + SESSION + 5
    s.feed(SyncGroupCompleted(sync.token, sync_bytes(tps("t-0", "t-1", "t-2"))))
    s.finish_callbacks()
    assert s.m.state is MemberState.STABLE
    assert s.m.assignment == tps("t-0", "t-1", "t-2")
    assert s.m.may_act_on(s.now) == frozenset()
    # The next heartbeat says we are gone: everything is lost, nothing was acted on.
    s.timer(s.now + 1)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatFailed(hb.token, 25))
    assert s.take(InvokeCallbacks).lost == tps("t-0", "t-1", "t-2")
    assert s.m.may_act_on(s.now) == frozenset()


def test_a_heartbeat_answer_counts_from_when_it_was_sent() -> None:
    s = stable()
    s.now += 1
    s.timer(s.now)
    hb = s.take(SendHeartbeat)
    sent = s.now
    s.now = sent + SESSION + 1  # read after a pause: the session may be over
    s.feed(HeartbeatCompleted(hb.token))
    assert s.m.session_deadline == pytest.approx(sent + SESSION)
    assert s.m.may_act_on(s.now) == frozenset()
    # A heartbeat sent now and answered proves the session again (the coordinator kept us).
    s.timer(s.now)
    hb = s.take(SendHeartbeat)
    s.now += 0.1
    s.feed(HeartbeatCompleted(hb.token))
    assert s.m.may_act_on(s.now) == OWNED


def test_finding_the_coordinator_again_is_no_answer_about_membership() -> None:
    s = stable()
    deadline = s.m.session_deadline
    assert deadline is not None
    s.now = deadline + 1
    s.timer(s.now)  # no heartbeat answer for a session: the coordinator is looked up again
    find = s.take(FindCoordinator)
    s.feed(CoordinatorFound(find.token, 1))
    assert s.m.state is MemberState.STABLE and s.m.assignment == OWNED
    assert s.m.may_act_on(s.now) == frozenset()
    # Its heartbeat answered NONE proves nothing here (it may be Kafka's blind answer while
    # the group loads, see below): the member rejoins, and the JoinGroup answer proves.
    s.timer(s.now)
    hb = s.take(SendHeartbeat)
    s.feed(HeartbeatCompleted(hb.token))
    assert s.m.may_act_on(s.now) == frozenset()
    join = s.take(SendJoinGroup)
    assert s.m.assignment == OWNED  # KIP-429: it rejoins still claiming them
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    assert s.m.may_act_on(s.now) == OWNED


def test_a_blind_heartbeat_answer_after_a_coordinator_restart_revives_nothing() -> None:
    """Kafka's coordinator answers Heartbeat NONE without checking anything while it loads the
    group after a restart (GroupCoordinator.handleHeartbeat). A member whose session lapsed
    while the broker was down, and which the old coordinator had expired, must not take that
    for proof: it rejoins, and UNKNOWN_MEMBER_ID tells it its partitions are lost. Found by
    the chaos suite (Kafka 2.3, seed 1000: two owners of a partition for 1.4 s)."""
    s = stable()
    s.now += 1
    s.timer(s.now)
    s.take(SendHeartbeat)
    s.feed(CoordinatorLost())  # the broker goes down
    find = s.take(FindCoordinator)
    s.now += SESSION + 20  # it restarts 30 s later
    s.feed(CoordinatorFound(find.token, 1))
    assert s.m.may_act_on(s.now) == frozenset()
    s.timer(s.now)
    s.feed(HeartbeatCompleted(s.take(SendHeartbeat).token))  # blind: the group is loading
    assert s.m.may_act_on(s.now) == frozenset()
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupFailed(join.token, 25))  # loaded: the old coordinator had expired us
    assert s.take(InvokeCallbacks).lost == OWNED
    assert s.m.may_act_on(s.now) == frozenset()


def test_no_auto_commit_before_rejoining_after_a_lapse() -> None:
    """Java's onJoinPrepare commits the consumed offsets before rejoining; after a lapsed
    session the member acts on nothing, commits included (KAFKA-7026): it rejoins without.
    Found by the chaos suite (Kafka 2.3, seeds 1001 and 1002: Consumers committed on rejoin
    right after a broker restart)."""
    s = stable(auto_commit=True)
    s.feed(CoordinatorLost())
    find = s.take(FindCoordinator)
    s.now += SESSION + 20
    s.feed(CoordinatorFound(find.token, 1))
    s.timer(s.now)
    acts = s.feed(HeartbeatCompleted(s.take(SendHeartbeat).token))
    assert not any(isinstance(a, CommitOffsets) for a in acts), acts
    assert any(isinstance(a, SendJoinGroup) for a in acts), acts


def test_an_unlapsed_member_still_commits_before_rejoining() -> None:
    s = stable(auto_commit=True)
    s.now += 1
    s.timer(s.now)
    acts = s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    assert any(isinstance(a, CommitOffsets) for a in acts), acts


def test_blind_heartbeat_answers_keep_an_unexpired_session_going() -> None:
    """Before its deadline the member is still in the group the coordinator loads (nobody
    could expire it sooner), so heartbeats answered NONE keep it acting, no rejoin."""
    s = stable()
    s.now += 1
    s.timer(s.now)
    s.take(SendHeartbeat)
    s.feed(CoordinatorLost())
    find = s.take(FindCoordinator)
    s.now += 1
    s.feed(CoordinatorFound(find.token, 1))
    for _ in range(3 * int(SESSION)):
        s.now += 1
        for action in s.timer(s.now):
            if isinstance(action, SendHeartbeat):
                s.feed(HeartbeatCompleted(action.token))
            assert not isinstance(action, SendJoinGroup)
    assert s.m.may_act_on(s.now) == OWNED


def test_rebalance_in_progress_heartbeats_keep_the_session_proven() -> None:
    # A cooperative member revoking partitions of a topic it unsubscribed keeps heartbeating;
    # REBALANCE_IN_PROGRESS answers show the coordinator still has it in its generation.
    s = stable(owned=OWNED | tps("u-0"), topics=frozenset({"t", "u"}))
    revoking_unsubscribed(s)
    start = s.now
    for _ in range(3 * int(SESSION)):
        s.now += 1
        for action in s.timer(s.now):
            if isinstance(action, SendHeartbeat):
                s.feed(HeartbeatFailed(action.token, 27))
    assert s.now > start + 2 * SESSION
    assert s.m.may_act_on(s.now) == OWNED


def test_the_lapse_wakes_the_driver_once() -> None:
    s = stable()
    join = start_rebalance(s)
    assert s.m.state is MemberState.JOINING
    deadline = s.m.session_deadline
    assert s.m.next_deadline() == deadline  # nothing else to wake for while joining
    assert s.timer(deadline) == []  # type: ignore[arg-type]
    assert s.m.next_deadline() is None  # no busy loop on a deadline already passed
    s.now = deadline + 1  # type: ignore[operator]
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    assert state_of(s.m) is MemberState.AWAITING_SYNC


def test_falling_out_of_the_group_forgets_the_proof() -> None:
    s = stable()
    s.now += 1
    s.timer(s.now)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 22))
    assert s.m.session_deadline is None and s.m.may_act_on(s.now) == frozenset()


# -- commits: refused only where the coordinator would ----------------------------------------


def test_cooperative_member_commits_with_its_generation_while_its_join_is_held() -> None:
    s = stable()
    start_rebalance(s)
    assert s.m.state is MemberState.JOINING
    action = s.m.commit({next(iter(OWNED)): 5}, s.now)
    assert (action.member_id, action.generation_id, action.during_join) == ("m1", 1, True)
    s.feed(CommitCompleted(action.token))
    assert s.take(ResolveCommit).error is None


def test_cooperative_member_commits_while_it_prepares_and_between_joins() -> None:
    s = stable()
    join = start_rebalance(s)
    s.feed(JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0]))
    s.feed(SyncGroupFailed(s.take(SendSyncGroup).token, 27))  # the group rebalances again
    # Rejoining at once: a JoinGroup of generation 2's member, owning generation 1's t-0, t-1.
    assert s.m.state is MemberState.JOINING and s.m.assignment == OWNED
    action = s.m.commit(None, s.now)
    assert (action.generation_id, action.during_join) == (2, True)
    s2 = stable()
    s2.now += 1
    s2.timer(s2.now)
    s2.feed(HeartbeatFailed(s2.take(SendHeartbeat).token, 1000))  # retried later
    action = s2.m.commit(None, s2.now)
    assert (action.generation_id, action.during_join) == (1, False)


@pytest.mark.parametrize("setup", [_awaiting_sync, _awaiting_metadata], ids=["sync", "metadata"])
def test_between_join_answer_and_sync_answer_commits_are_refused(
    setup: Callable[[Script], None],
) -> None:
    # The coordinator answers REBALANCE_IN_PROGRESS there (CompletingRebalance).
    s = stable()
    setup(s)
    with pytest.raises(RebalanceInProgressError):
        s.m.commit(None, s.now)


def test_eager_member_refuses_commits_once_it_revoked_everything_to_rejoin() -> None:
    s = stable(EAGER)
    s.now += 1
    s.timer(s.now)
    s.feed(HeartbeatFailed(s.take(SendHeartbeat).token, 27))
    cb = s.take(InvokeCallbacks)
    assert cb.revoked == OWNED
    action = s.m.commit(None, s.now)  # inside the revoked callback: allowed (KIP-70)
    assert action.generation_id == 1 and not action.during_join
    s.feed(CallbacksFinished(cb.token))
    assert s.m.state is MemberState.JOINING and s.m.assignment == frozenset()
    with pytest.raises(RebalanceInProgressError):
        s.m.commit(None, s.now)


@pytest.mark.parametrize("answer_first", ["commit", "join"])
def test_join_completing_before_the_commit_arrives_is_retriable_not_a_reset(
    answer_first: str,
) -> None:
    s = stable()
    join = start_rebalance(s)
    action = s.m.commit(None, s.now)
    completed = JoinGroupCompleted(join.token, 2, "m1", "leader-x", join.protocols[0][0])
    if answer_first == "join":
        s.feed(completed)
    s.feed(CommitFailed(action.token, 22))  # ILLEGAL_GENERATION: our join moved it on
    assert isinstance(s.take(ResolveCommit).error, RebalanceInProgressError)
    assert not any(isinstance(a, InvokeCallbacks) and a.lost for a in s.pending)
    assert s.m.member_id == "m1" and s.m.assignment == OWNED
    if answer_first == "commit":
        assert s.m.state is MemberState.JOINING
        s.feed(completed)
    assert s.m.state is MemberState.AWAITING_SYNC and s.m.generation_id == 2


def test_unknown_member_for_a_commit_during_a_join_leaves_the_verdict_to_the_join() -> None:
    s = stable()
    join = start_rebalance(s)
    action = s.m.commit(None, s.now)
    s.feed(CommitFailed(action.token, 25))
    assert isinstance(s.take(ResolveCommit).error, CommitFailedError)
    assert s.m.state is MemberState.JOINING and s.m.generation_id == 1
    s.feed(JoinGroupFailed(join.token, 25))  # the join's own answer: now we are out
    assert s.take(InvokeCallbacks).lost == OWNED
