"""The KIP-848 machine without sockets: join, reconcile (revoke before assign, then
acknowledge), fencing and the session lapse, stale answers, leaving (dynamic and static), the
errors a coordinator may answer, and commits with the member epoch."""

from __future__ import annotations

import re

import pytest

from aiogroup.errors import (
    CommitFailedError,
    ConfigurationError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    GroupMaxSizeReachedError,
    InvalidRegularExpressionError,
    KafkaError,
    LocalProtocolError,
    PartitionNotAssignedError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnreleasedInstanceIdError,
    UnsupportedApiVersionError,
    UnsupportedAssignorError,
)
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.consumer_events import (
    ConsumerGroupHeartbeatCompleted,
    SendConsumerGroupHeartbeat,
)
from aiogroup.membership.states import MemberState
from tests.membership.helpers import state_of

from .consumer_helpers import BILLING, COUNTS, IDS, ORDERS, Script, of, one, parts

S = MemberState


def test_join_assign_then_acknowledge() -> None:
    s = Script(rebalance_timeout_ms=60_000, remote_assignor="range", rack_id="r1")
    s.subscribe("orders")
    join = s.heartbeat
    assert join is not None and s.m.state is S.JOINING
    # Joining is a full heartbeat with epoch 0 and the client's member id (KIP-1082).
    assert (join.member_id, join.member_epoch, join.owned) == ("m-1", 0, {})
    assert join.subscribed_topic_names == ("orders",) and join.subscribed_topic_regex == ""
    assert join.rebalance_timeout_ms == 60_000
    assert (join.server_assignor, join.rack_id) == ("range", "r1")
    out = s.answer(3, {ORDERS: (0, 1)}, interval_ms=2500)
    assert s.m.generation_id == 3 and s.m.heartbeat_interval == 2.5
    cb = one(out, act.InvokeCallbacks)
    assert cb.assigned == parts("orders", 0, 1) and not cb.revoked and cb.generation_id == 3
    s.finish_callbacks()
    assert state_of(s.m) is S.STABLE and s.m.may_act_on(s.now) == parts("orders", 0, 1)
    ack = s.heartbeat
    assert ack is not None and ack.owned == {ORDERS: (0, 1)} and ack.member_epoch == 3
    # The acknowledgement leaves out what did not change.
    assert ack.subscribed_topic_names is None and ack.rebalance_timeout_ms == -1
    s.answer(3, interval_ms=2500)
    assert s.m.next_deadline() == pytest.approx(s.now + 2.5)
    plain = one(s.tick(2.5), SendConsumerGroupHeartbeat)
    assert plain.owned is None and plain.subscribed_topic_names is None


def test_an_empty_first_assignment_still_calls_assigned() -> None:
    s = Script()
    s.subscribe("orders")
    cb = one(s.answer(1, {}), act.InvokeCallbacks)
    assert cb.assigned == frozenset()


def test_revoke_first_then_assign_then_acknowledge() -> None:
    s = Script()
    s.joined(0, 1, 2)
    out = s.tick(5)
    one(out, SendConsumerGroupHeartbeat)
    out = s.answer(1, {ORDERS: (0, 3)})  # 1, 2 go; 3 comes
    cb = one(out, act.InvokeCallbacks)
    assert cb.revoked == parts("orders", 1, 2) and cb.assigned is None
    assert s.m.may_act_on(s.now) == parts("orders", 0)  # no longer fetched (KAFKA-14196)
    assert s.m.assignment == parts("orders", 0, 1, 2)  # still owned: the callback commits
    # Heartbeats go on while the callback runs, without an acknowledgement yet.
    hb = one(s.tick(5), SendConsumerGroupHeartbeat)
    assert hb.owned is None
    s.answer(1)
    out = s.finish_callbacks()
    cb = one(out, act.InvokeCallbacks)
    assert cb.assigned == parts("orders", 3) and not cb.revoked
    # The revocation is acknowledged at once.
    assert one(out, SendConsumerGroupHeartbeat).owned == {ORDERS: (0, 3)}
    s.answer(2)
    assert s.finish_callbacks() == []
    assert s.m.state is S.STABLE and s.m.may_act_on(s.now) == parts("orders", 0, 3)


def test_a_target_that_changes_while_reconciling_is_reconciled_next() -> None:
    s = Script()
    s.joined(0, 1)
    s.tick(5)
    s.answer(1, {ORDERS: (0,)})
    s.tick(5)
    s.answer(1, {ORDERS: ()})  # meanwhile the coordinator wants 0 too
    s.finish_callbacks()  # revoked 1
    out = s.finish_callbacks()  # assigned nothing new
    assert one(out, act.InvokeCallbacks).revoked == parts("orders", 0)


def test_stale_answers_change_nothing() -> None:
    s = Script()
    s.joined(0)
    s.tick(5)
    old = s.heartbeat
    assert old is not None
    s.feed(ev.CoordinatorLost())  # the heartbeat in flight is abandoned
    assert s.feed(ConsumerGroupHeartbeatCompleted(old.token, "m-1", 7, 5000, {ORDERS: (4,)})) == []
    assert s.m.generation_id == 1 and s.m.assignment == parts("orders", 0)


@pytest.mark.parametrize("code", [110, 25])
def test_fenced_reports_lost_and_rejoins_with_epoch_zero(code: int) -> None:
    s = Script()
    s.joined(0, 1)
    s.tick(5)
    out = s.fail(code, "fenced")
    assert s.m.may_act_on(s.now) == frozenset()  # nothing acted on once fenced
    cb = one(out, act.InvokeCallbacks)
    assert cb.lost == parts("orders", 0, 1) and not cb.revoked and cb.assigned is None
    assert s.m.state is S.PREPARING and not of(out, SendConsumerGroupHeartbeat)
    out = s.finish_callbacks()
    rejoin = one(out, SendConsumerGroupHeartbeat)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.owned) == ("m-1", 0, {})
    assert rejoin.subscribed_topic_names == ("orders",)  # a full one
    out = s.answer(4, {ORDERS: (0,)})
    assert one(out, act.InvokeCallbacks).assigned == parts("orders", 0)


def test_fenced_during_a_revocation_loses_the_rest_after_it() -> None:
    """What the revoked callback gave up is not reported lost after it (the chaos checker's
    "released a partition it did not own": a Consumer paused past its session inside it)."""
    s = Script()
    s.joined(0, 1)
    s.tick(5)
    s.answer(1, {ORDERS: (0,)})  # revoke 1: the callback runs
    s.tick(5)
    assert s.fail(110) == []  # the callback finishes first
    assert s.m.may_act_on(s.now) == frozenset()
    out = s.finish_callbacks()
    assert one(out, act.InvokeCallbacks).lost == parts("orders", 0)
    assert s.m.assignment == parts("orders", 0)
    out = s.finish_callbacks()
    assert one(out, SendConsumerGroupHeartbeat).member_epoch == 0


def test_fenced_during_a_revocation_of_everything_rejoins_after_it() -> None:
    """The revoked callback gave up all it owned: nothing is left to report lost; it rejoins."""
    s = Script()
    s.joined(0)
    s.tick(5)
    s.answer(1, {ORDERS: ()})  # revoke 0, the last: the callback runs
    s.tick(5)
    assert s.fail(110) == []
    out = s.finish_callbacks()
    assert not of(out, act.InvokeCallbacks) and s.m.assignment == frozenset()
    assert one(out, SendConsumerGroupHeartbeat).member_epoch == 0


def test_a_lapsed_session_acts_on_nothing_then_loses_and_rejoins() -> None:
    s = Script(session_timeout_ms=10_000)
    s.joined(0)
    sent = s.now
    s.tick(5)  # a heartbeat goes out and never comes back
    find = one(s.feed(ev.CoordinatorLost()), act.FindCoordinator)
    assert s.m.session_deadline == pytest.approx(sent + 10)
    s.now = sent + 9.9
    assert s.m.may_act_on(s.now) == parts("orders", 0)
    deadline = s.m.next_deadline()
    assert deadline is not None and deadline <= sent + 10
    out = s.tick(sent + 10 - s.now)
    assert s.m.may_act_on(s.now) == frozenset()
    assert one(out, act.InvokeCallbacks).lost == parts("orders", 0)
    assert s.finish_callbacks() == []  # the lookup is still under way
    assert s.m.state is S.DISCOVERING
    out = s.feed(ev.CoordinatorFound(find.token, 2))
    assert one(out, SendConsumerGroupHeartbeat).member_epoch == 0


def test_leave_with_epoch_minus_one_after_commit_and_revoke() -> None:
    s = Script()
    s.joined(0)
    out = s.feed(ev.CloseRequested())
    commit = one(out, act.CommitOffsets)
    assert commit.offsets is None and commit.generation_id == 1
    out = s.feed(ev.CommitCompleted(commit.token))
    assert one(out, act.InvokeCallbacks).revoked == parts("orders", 0)
    out = s.finish_callbacks()
    leave = one(out, SendConsumerGroupHeartbeat)
    assert leave.member_epoch == -1 and leave.leaving
    s.answer(-1)
    assert s.m.state is S.CLOSED


def test_a_static_member_leaves_with_epoch_minus_two() -> None:
    s = Script(group_instance_id="i-1", enable_auto_commit=False)
    s.joined(0)
    assert s.heartbeat is not None and s.heartbeat.group_instance_id == "i-1"
    s.feed(ev.CloseRequested())
    out = s.finish_callbacks()
    leave = one(out, SendConsumerGroupHeartbeat)
    assert (leave.member_epoch, leave.group_instance_id) == (-2, "i-1")
    s.fail(25)  # best effort: any answer ends it
    assert s.m.state is S.CLOSED


def test_unsubscribe_leaves_and_a_new_subscription_rejoins() -> None:
    s = Script(enable_auto_commit=False)
    s.joined(0)
    s.feed(ev.UnsubscribeRequested())
    s.finish_callbacks()
    s.answer(-1)
    assert s.m.state is S.UNJOINED and not s.m.has_subscription
    out = s.feed(ev.SubscriptionChanged(topics=frozenset({"billing"})))
    hb = one(out, SendConsumerGroupHeartbeat)
    assert hb.member_epoch == 0 and hb.subscribed_topic_names == ("billing",)


def test_a_close_during_a_reconciliation_waits_for_it() -> None:
    s = Script(enable_auto_commit=False)
    s.joined(0, 1)
    s.tick(5)
    s.answer(1, {ORDERS: (0,)})
    assert s.feed(ev.CloseRequested(finish_rebalance_by=s.now + 10)) == []
    s.finish_callbacks()  # revoked
    out = s.finish_callbacks()  # assigned: the close goes on
    assert one(out, act.InvokeCallbacks).revoked == parts("orders", 0)
    assert s.m.state is S.LEAVING


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (111, UnreleasedInstanceIdError),
        (82, FencedInstanceIdError),
        (112, UnsupportedAssignorError),
        (81, GroupMaxSizeReachedError),
        (128, InvalidRegularExpressionError),
        (35, UnsupportedApiVersionError),
        (42, KafkaError),
        (9999, KafkaError),
    ],
)
def test_fatal_answers(code: int, error: type[Exception]) -> None:
    s = Script()
    s.joined(0)
    s.tick(5)
    out = s.fail(code, "the broker says why")
    raised = one(out, act.RaiseToUser)
    assert raised.fatal and isinstance(raised.error, error)
    assert "the broker says why" in str(raised.error)
    assert one(out, act.InvokeCallbacks).lost == parts("orders", 0)
    assert s.m.state is S.FATAL and s.m.may_act_on(s.now) == frozenset()
    assert getattr(raised.error, "error_code", code) == code or code == 35


def test_a_classic_group_kafka_will_not_convert_is_fatal_and_says_why() -> None:
    """GROUP_ID_NOT_FOUND to a joining member: the group is a classic group the broker would
    not convert (KIP-848's online upgrade); the error names what to check. A member already in
    the group is told nothing more than the broker says."""
    s = Script()
    s.subscribe("orders")
    message = ("Cannot upgrade classic group g to consumer group because an unsupported custom "
               "assignor is in use.")  # Kafka 4.1.1's words  # fmt: skip
    raised = one(s.fail(69, message), act.RaiseToUser)
    assert raised.fatal and isinstance(raised.error, KafkaError)
    said = str(raised.error)
    assert message in said and "custom assignor's user data" in said
    assert "group_protocol='consumer'" in said and "built-in assignor" in said
    assert s.m.state is S.FATAL
    member = Script()
    member.joined(0)
    member.tick(5)
    raised = one(member.fail(69, "Group g not found."), act.RaiseToUser)
    assert str(raised.error).endswith("Group g not found.")
    assert "custom assignor's user data" not in str(raised.error)


def test_retriable_answers_retry_after_the_backoff() -> None:
    s = Script(retry_backoff_ms=200)
    s.joined(0)
    s.tick(5)
    assert s.fail(14) == []  # COORDINATOR_LOAD_IN_PROGRESS
    assert s.m.next_deadline() == pytest.approx(s.now + 0.2)
    again = one(s.tick(0.2), SendConsumerGroupHeartbeat)
    assert again.subscribed_topic_names == ("orders",)  # full after a failure
    assert again.owned == {ORDERS: (0,)}


@pytest.mark.parametrize("code", [15, 16])
def test_a_coordinator_that_moved_is_looked_up_again(code: int) -> None:
    s = Script()
    s.joined(0)
    s.tick(5)
    out = s.fail(code)
    find = one(out, act.FindCoordinator)
    assert s.m.state is S.STABLE and s.m.assignment == parts("orders", 0)  # still a member
    out = s.feed(ev.CoordinatorFound(find.token, 3))
    hb = one(out, SendConsumerGroupHeartbeat)
    assert hb.member_epoch == 1 and hb.owned == {ORDERS: (0,)}  # full, at once


def test_a_topic_not_in_metadata_waits_for_it() -> None:
    s = Script()
    s.subscribe("orders")
    new = {"orders": ORDERS}
    s.feed(ev.MetadataUpdated({"orders": 6}, new))  # billing not known yet
    s.m._interest.topic_ids.pop(BILLING, None)
    out = s.answer(1, {ORDERS: (0,), BILLING: (1,)})
    meta = one(out, act.RequestMetadata)
    assert meta.topics is None and meta.topic_ids  # all topics: whose id is it?
    assert one(out, act.InvokeCallbacks).assigned == parts("orders", 0)
    s.finish_callbacks()
    out = s.feed(ev.MetadataUpdated(COUNTS, IDS))
    assert one(out, act.InvokeCallbacks).assigned == parts("billing", 1)


def test_a_regex_goes_to_the_broker_in_its_syntax() -> None:
    s = Script()
    out = s.feed(ev.SubscriptionChanged(pattern=re.compile(r"ord\w+\Z")))
    meta = one(out, act.RequestMetadata)
    assert meta.topics is None and meta.topic_ids
    find = one(out, act.FindCoordinator)
    s.feed(ev.CoordinatorFound(find.token, 1))
    assert s.heartbeat is not None
    assert s.heartbeat.subscribed_topic_regex == r"ord[\w]+\z"
    assert s.heartbeat.subscribed_topic_names == ()
    with pytest.raises(ConfigurationError, match="lookahead"):
        s.feed(ev.SubscriptionChanged(pattern=re.compile(r"(?!x)ord")))


def test_a_subscription_change_goes_out_at_once() -> None:
    s = Script()
    s.joined(0)
    out = s.feed(ev.SubscriptionChanged(topics=frozenset({"orders", "billing"})))
    hb = one(out, SendConsumerGroupHeartbeat)
    assert hb.subscribed_topic_names == ("billing", "orders")
    assert s.m.assignment == parts("orders", 0)  # KIP-70: the coordinator decides


def test_commits_carry_the_member_epoch() -> None:
    s = Script()
    with pytest.raises(CommitFailedError):
        s.m.commit({}, s.now)
    s.subscribe("orders")
    with pytest.raises(RebalanceInProgressError):  # joining
        s.m.commit({}, s.now)
    s.answer(5, {ORDERS: (0,)})
    s.finish_callbacks()
    commit = s.m.commit({parts("orders", 0).__iter__().__next__(): 10}, s.now)
    assert (commit.member_id, commit.generation_id) == ("m-1", 5)
    with pytest.raises(PartitionNotAssignedError):
        s.m.commit({next(iter(parts("orders", 3))): 1}, s.now)
    assert one(s.feed(ev.CommitCompleted(commit.token)), act.ResolveCommit).error is None


def test_a_commit_refused_stale_goes_again_with_the_new_epoch() -> None:
    s = Script()
    s.joined(0)
    commit = s.m.commit({next(iter(parts("orders", 0))): 10}, s.now)
    s.tick(5)
    s.answer(2)  # the epoch moved on while the commit was in flight
    out = s.feed(ev.CommitFailed(commit.token, 113))
    again = one(out, act.CommitOffsets)
    assert (again.token, again.generation_id, again.offsets) == (commit.token, 2, commit.offsets)
    # Stale again at the epoch we have: the caller hears it (retriable), the heartbeat goes.
    out = s.feed(ev.CommitFailed(again.token, 113))
    assert isinstance(one(out, act.ResolveCommit).error, StaleMemberEpochError)
    assert one(out, SendConsumerGroupHeartbeat).member_epoch == 2


def test_commits_in_flight_fail_retriably_when_the_coordinator_is_lost() -> None:
    s = Script()
    s.joined(0)
    commit = s.m.commit(None, s.now)
    out = s.feed(ev.CoordinatorLost())
    resolved = one(out, act.ResolveCommit)
    assert resolved.token == commit.token
    assert isinstance(resolved.error, CoordinatorNotAvailableError)


def test_events_of_the_classic_protocol_are_refused() -> None:
    s = Script()
    with pytest.raises(LocalProtocolError):
        s.feed(ev.JoinGroupCompleted(1, 1, "m", "m", "range"))


def test_a_callback_error_is_raised_and_the_assignment_stands() -> None:
    s = Script()
    s.subscribe("orders")
    s.answer(1, {ORDERS: (0,)})
    out = s.finish_callbacks(ValueError("boom"))
    raised = one(out, act.RaiseToUser)
    assert not raised.fatal and isinstance(raised.error.__cause__, ValueError)
    assert s.m.assignment == parts("orders", 0)
