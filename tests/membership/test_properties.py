"""h2-style properties: any state x any event leaves the machine valid; only LocalProtocolError
escapes, and only for user events the current state does not accept."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import event as hevent
from hypothesis import strategies as st

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.range import RangeAssignor
from aiogroup.errors import (
    CommitFailedError,
    CoordinatorNotAvailableError,
    LocalProtocolError,
    RebalanceInProgressError,
)
from aiogroup.membership import (
    Action,
    CallbacksFinished,
    CloseRequested,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    CoordinatorFound,
    CoordinatorLookupFailed,
    CoordinatorLost,
    Event,
    FindCoordinator,
    HeartbeatCompleted,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupCompleted,
    JoinGroupFailed,
    JoinGroupMember,
    LeaveGroupCompleted,
    MemberConfig,
    MembershipMachine,
    MemberState,
    MetadataUpdated,
    RequestMetadata,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SubscriptionChanged,
    SyncGroupCompleted,
    SyncGroupFailed,
    UnsubscribeRequested,
)
from aiogroup.membership.states import ACCEPTED_EVENTS, RESPONSE_EVENTS
from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription

CODES = [14, 15, 16, 22, 23, 25, 27, 30, 79, 82, -1, 999]
TOPICS = ["a", "b", "c"]

partitions = st.dictionaries(
    st.sampled_from(TOPICS), st.lists(st.integers(0, 3), max_size=3, unique=True), max_size=3
).map(lambda d: {t: tuple(sorted(ps)) for t, ps in d.items()})
metadata_bytes = st.one_of(
    st.binary(max_size=12),
    st.builds(
        lambda topics, owned, gen: encode_subscription(
            Subscription(sorted(topics), owned_partitions=owned, generation_id=gen)
        ),
        st.sets(st.sampled_from(TOPICS)),
        partitions,
        st.integers(-1, 5),
    ),
)
assignment_bytes = st.one_of(
    st.binary(max_size=12), partitions.map(lambda p: encode_assignment(Assignment(p)))
)
cluster = st.dictionaries(st.sampled_from(TOPICS), st.integers(0, 4), max_size=3)


def response_for(action: Action, data: st.DataObject) -> Event | None:
    ok = data.draw(st.integers(0, 3), label="ok") != 0
    code = data.draw(st.sampled_from(CODES), label="code")
    if isinstance(action, FindCoordinator):
        return (
            CoordinatorFound(action.token, 1) if ok else CoordinatorLookupFailed(action.token, code)
        )
    if isinstance(action, SendJoinGroup):
        if not ok:
            return JoinGroupFailed(action.token, code, member_id="given")
        leader = data.draw(st.booleans(), label="leader")
        member_id = action.member_id or "me"
        names = [n for n, _ in action.protocols] + ["bogus"]
        members: tuple[JoinGroupMember, ...] = ()
        if leader:
            others = data.draw(st.lists(metadata_bytes, max_size=3), label="others")
            members = (
                JoinGroupMember(member_id, action.protocols[0][1]),
                *(JoinGroupMember(f"o{i}", md) for i, md in enumerate(others)),
            )
        return JoinGroupCompleted(
            action.token,
            data.draw(st.integers(-1, 9), label="gen"),
            member_id,
            member_id if leader else "other",
            data.draw(st.sampled_from(names), label="proto"),
            members=members,
        )
    if isinstance(action, SendSyncGroup):
        if ok:
            return SyncGroupCompleted(action.token, data.draw(assignment_bytes, label="asg"))
        return SyncGroupFailed(action.token, code)
    if isinstance(action, SendHeartbeat):
        return HeartbeatCompleted(action.token) if ok else HeartbeatFailed(action.token, code)
    if isinstance(action, SendLeaveGroup):
        return LeaveGroupCompleted(action.token, 0 if ok else code)
    if isinstance(action, CommitOffsets):
        return CommitCompleted(action.token) if ok else CommitFailed(action.token, code)
    if isinstance(action, InvokeCallbacks):
        return CallbacksFinished(action.token, None if ok else ValueError("cb"))
    if isinstance(action, RequestMetadata):
        return MetadataUpdated(data.draw(cluster, label="cluster"))
    return None


def user_event(data: st.DataObject) -> Event:
    kind = data.draw(st.sampled_from([0, 0, 1, 2, 3, 4, 4, 5, 5]), label="user")
    if kind == 0:
        return SubscriptionChanged(topics=frozenset(data.draw(st.sets(st.sampled_from(TOPICS)))))
    if kind == 1:
        return SubscriptionChanged(
            pattern=re.compile(data.draw(st.sampled_from(["a|b", ".*", "z"])))
        )
    if kind == 2:
        return UnsubscribeRequested(lost=data.draw(st.booleans(), label="lost leave"))
    if kind == 3:
        # A close may ask to finish the rebalance first (by an absolute time; 0 is long past).
        finish_by = data.draw(st.sampled_from([None, None, 0.0, 1e9]), label="finish by")
        return CloseRequested(finish_rebalance_by=finish_by)
    if kind == 4:
        return MetadataUpdated(data.draw(cluster, label="cluster"))
    return CoordinatorLost()


def check_invariants(m: MembershipMachine) -> None:
    assert isinstance(m.state, MemberState)
    assert m.fetchable <= m.assignment
    deadline = m.next_deadline()
    assert deadline is None or isinstance(deadline, float)
    if m.state in (MemberState.CLOSED, MemberState.FATAL):
        assert deadline is None
    if m.state is MemberState.CLOSED:
        assert m.assignment == frozenset()
    if m.state is MemberState.STABLE:
        assert m.generation_id >= 0 and m.member_id


def assignor_set(which: int) -> list[PartitionAssignor]:
    if which == 0:
        return [CooperativeStickyAssignor()]
    if which == 1:
        return [RangeAssignor()]
    return [RangeAssignor(), CooperativeStickyAssignor()]


@pytest.mark.slow
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
    phases=[Phase.generate, Phase.shrink],
)
@given(data=st.data(), which=st.integers(0, 2), static=st.booleans(), auto=st.booleans())
def test_any_event_sequence_keeps_machine_valid(
    data: st.DataObject, which: int, static: bool, auto: bool
) -> None:
    cfg = MemberConfig(
        group_id="g",
        assignors=assignor_set(which),
        group_instance_id="inst" if static else None,
        enable_auto_commit=auto,
    )
    m = MembershipMachine(cfg)
    now = 0.0
    pending: list[Action] = list(m.handle(SubscriptionChanged(topics=frozenset({"a", "b"})), now))
    answered: list[Event] = []
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        move = data.draw(st.integers(0, 19), label="move")
        now += data.draw(st.sampled_from([0.0, 0.05, 1.0, 5.0, 60.0]), label="dt")
        state = m.state
        if move <= 13 and pending:
            action = pending.pop(data.draw(st.integers(0, len(pending) - 1), label="which"))
            event = response_for(action, data)
            if event is None:
                continue
            if not isinstance(event, MetadataUpdated):
                answered.append(event)
            pending.extend(m.handle(event, now))  # responses never raise
        elif move == 14 and answered:
            stale = answered[data.draw(st.integers(0, len(answered) - 1), label="stale")]
            pending.extend(m.handle(stale, now))
        elif move in (15, 16):
            pending.extend(m.handle_timer(now))
        elif move == 17:
            try:
                pending.append(m.commit(None, now))
            except (RebalanceInProgressError, CommitFailedError, CoordinatorNotAvailableError):
                pass
            except LocalProtocolError:
                assert state is MemberState.CLOSED
        else:
            event = user_event(data)
            assert type(event) not in RESPONSE_EVENTS
            try:
                pending.extend(m.handle(event, now))
            except LocalProtocolError:
                assert state not in ACCEPTED_EVENTS[type(event)]
        check_invariants(m)
        hevent(f"state {m.state.name}")
