"""The embedded coordinator's KIP-848 consumer groups, driven without sockets (a fake clock).

Each rule is Kafka 4.1's (``GroupMetadataManager.consumerGroupHeartbeat`` and its helpers,
``CurrentAssignmentBuilder``, ``ConsumerGroup``, ``GroupCoordinatorService``'s request checks),
and where cheap it was compared with a live Kafka 4.1.1 (tests/testing/test_consumer_wire.py).
"""

from __future__ import annotations

import pytest

from aiogroup.errors import ConfigurationError
from aiogroup.protocol.consumer import encode_subscription
from aiogroup.protocol.types import Subscription
from aiogroup.testing import wire
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.messages import (
    ErrorCode,
    JoinGroupRequestData,
    JoinGroupResponseData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchRequestData,
)
from aiogroup.testing.embedded.rules import CoordinatorConfig

from .consumer_harness import INTERVAL_MS, REBALANCE_MS, SESSION_MS, Harness, ids, topic_id

ALL6 = {("t", p) for p in range(6)}


def owned_by(h: Harness, member_id: str) -> set[tuple[str, int]]:
    view = h.view().member(member_id)
    assert view is not None
    return set(view.assigned)


# ------------------------------------------------------------------------ joining


def test_the_first_member_gets_everything_at_epoch_one() -> None:
    h = Harness()
    a = h.member("a")
    r = a.join()
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a", 1)
    assert r.heartbeat_interval_ms == INTERVAL_MS
    assert a.partitions == ALL6
    view = h.view()
    assert (view.state, view.group_epoch, view.assignment_epoch, view.assignor) == (
        "Stable", 1, 1, "uniform",
    )  # fmt: skip
    # A heartbeat with nothing new carries no assignment (it is unchanged).
    assert a.beat().assignment is None


def test_a_v0_join_without_member_id_is_named_by_the_coordinator() -> None:
    h = Harness()
    r = h.heartbeat(member_id="", member_epoch=0, rebalance_timeout_ms=1000,
                    subscribed_topic_names=["t"], topic_partitions=[], api_version=0)  # fmt: skip
    assert r.error_code == 0 and r.member_id and len(r.member_id) == 22


@pytest.mark.parametrize(
    ("fields", "code", "message"),
    [
        ({"member_id": ""}, ErrorCode.INVALID_REQUEST, "MemberId can't be empty."),
        ({"group_id": ""}, ErrorCode.INVALID_REQUEST, "GroupId can't be empty."),
        ({"instance_id": ""}, ErrorCode.INVALID_REQUEST, "InstanceId can't be empty."),
        ({"rack_id": ""}, ErrorCode.INVALID_REQUEST, "RackId can't be empty."),
        ({"rebalance_timeout_ms": -1}, ErrorCode.INVALID_REQUEST,
         "RebalanceTimeoutMs must be provided in first request."),
        ({"topic_partitions": None}, ErrorCode.INVALID_REQUEST,
         "TopicPartitions must be empty when (re-)joining."),
        ({"topic_partitions": ids({"t": [0]})}, ErrorCode.INVALID_REQUEST,
         "TopicPartitions must be empty when (re-)joining."),
        ({"subscribed_topic_names": None}, ErrorCode.INVALID_REQUEST,
         "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
        ({"member_epoch": -2}, ErrorCode.INVALID_REQUEST, "InstanceId can't be null."),
        ({"member_epoch": -3}, ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid."),
        ({"server_assignor": "sticky"}, ErrorCode.UNSUPPORTED_ASSIGNOR,
         "ServerAssignor sticky is not supported. Supported assignors: uniform, range."),
    ],
)  # fmt: skip
def test_invalid_requests_are_refused_before_the_group_is_touched(
    fields: dict[str, object], code: ErrorCode, message: str
) -> None:
    h = Harness()
    request: dict[str, object] = {
        "member_id": "a",
        "member_epoch": 0,
        "rebalance_timeout_ms": 1000,
        "subscribed_topic_names": ["t"],
        "topic_partitions": [],
    }
    request.update(fields)
    r = h.heartbeat(**request)
    assert (r.error_code, r.error_message) == (code, message)
    assert h.coord.consumer_group_state("g") is None


def test_an_empty_subscription_joins_with_nothing() -> None:
    h = Harness()
    r = h.member("a", topics=[]).join()
    assert r.error_code == 0 and r.assignment == {} and h.view().state == "Stable"


def test_unknown_group_and_unknown_member() -> None:
    h = Harness()
    r = h.heartbeat(member_id="a", member_epoch=3, topic_partitions=[])
    assert (r.error_code, r.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Consumer group g not found.",
    )  # fmt: skip
    h.member("a").join()
    r = h.heartbeat(member_id="zz", member_epoch=1)
    assert (r.error_code, r.error_message) == (
        ErrorCode.UNKNOWN_MEMBER_ID, "Member zz is not a member of group g.",
    )  # fmt: skip


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    a = h.member("a")
    a.join()
    r = h.member("b").join()
    assert r.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert r.error_message == "The consumer group has reached its maximum capacity of 1 members."
    assert a.beat().error_code == 0  # a member already in stays


# ------------------------------------------------------------------------ reconciliation


def test_a_partition_moves_only_after_its_old_owner_acknowledged_the_revocation() -> None:
    h = Harness()
    a, b = h.member("a"), h.member("b")
    a.join()
    r = b.join()
    # b's target is three of a's partitions: not released yet, so b gets nothing, at epoch 2.
    assert r.member_epoch == 2 and r.assignment == {}
    view = h.view()
    assert view.state == "Reconciling" and view.group_epoch == view.assignment_epoch == 2
    assert view.member("b").state == "unreleased_partitions"  # type: ignore[union-attr]
    assert len(view.member("b").target) == 3  # type: ignore[union-attr]

    # a learns of it from its next heartbeat: it keeps 0-2 and must revoke 3-5, at epoch 1.
    before = dict(a.owned)
    r = a.beat()
    assert r.member_epoch == 1 and h.names(r.assignment) == {("t", 0), ("t", 1), ("t", 2)}
    ma = h.view().member("a")
    assert ma is not None and ma.state == "unrevoked_partitions"
    assert ma.pending_revocation == {("t", 3), ("t", 4), ("t", 5)}

    # b asks again: still nothing, a has not acknowledged.
    assert b.beat().assignment is None and b.partitions == set()
    # a's heartbeat that still reports 3-5 acknowledges nothing.
    r = a.beat(topic_partitions=[(t, list(ps)) for t, ps in before.items()])
    assert r.member_epoch == 1 and h.view().member("a").state == "unrevoked_partitions"  # type: ignore[union-attr]
    assert b.beat().assignment is None

    # a revoked: it moves to epoch 2; only now does b get 3-5.
    r = a.beat()
    assert r.member_epoch == 2 and r.assignment is None  # its assignment did not change
    r = b.beat()
    assert r.member_epoch == 2 and b.partitions == {("t", 3), ("t", 4), ("t", 5)}
    assert h.view().state == "Stable"


def test_a_leave_hands_the_partitions_back_at_the_next_epoch() -> None:
    h = Harness()
    a, b = h.member("a"), h.member("b")
    a.join()
    b.join()
    a.settle(b)
    r = b.leave()
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "b", -1)
    assert h.view().group_epoch == 3 and h.view().state == "Assigning"
    r = a.beat()
    assert r.member_epoch == 3 and a.partitions == ALL6
    assert h.view().state == "Stable"
    assert b.beat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_uniform_is_sticky_and_balanced_as_members_come_and_go() -> None:
    h = Harness()
    a, b, c = h.member("a"), h.member("b"), h.member("c")
    a.join()
    b.join()
    a.settle(b)
    assert a.partitions == {("t", 0), ("t", 1), ("t", 2)}
    assert b.partitions == {("t", 3), ("t", 4), ("t", 5)}
    c.join()
    a.settle(b, c)
    # Each keeps two of its own; c gets the one each gave up.
    assert a.partitions == {("t", 0), ("t", 1)} and b.partitions == {("t", 3), ("t", 4)}
    assert c.partitions == {("t", 2), ("t", 5)}
    b.leave()
    a.settle(c)
    assert {("t", 0), ("t", 1)} <= a.partitions and {("t", 2), ("t", 5)} <= c.partitions
    assert len(a.partitions) == len(c.partitions) == 3


def test_range_by_member_id_co_partitioned() -> None:
    h = Harness({"t": 3, "u": 3})
    m1 = h.member("m1", topics=["t", "u"], server_assignor="range")
    m2 = h.member("m2", topics=["t", "u"], server_assignor="range")
    m2.join()
    m1.join()
    m1.settle(m2)
    assert m1.partitions == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}
    assert m2.partitions == {("t", 2), ("u", 2)}
    assert h.view().assignor == "range"


def test_a_subscription_change_moves_the_group_epoch() -> None:
    h = Harness({"t": 2, "u": 2})
    a = h.member("a")
    a.join()
    r = a.beat(subscribed_topic_names=["t", "u"])
    assert h.view().group_epoch == 2
    # Nothing of u is owned by anyone: a gets it in the same answer.
    assert h.names(r.assignment) == {("t", 0), ("t", 1), ("u", 0), ("u", 1)}


def test_new_partitions_reach_the_group_at_its_next_heartbeat() -> None:
    h = Harness({"t": 2})
    a = h.member("a")
    a.join()
    h.set_topics({"t": 4})
    r = a.beat()
    assert r.member_epoch == 2 and a.partitions == {("t", p) for p in range(4)}
    # A topic nobody subscribes to changes nothing.
    h.set_topics({"t": 4, "x": 1})
    assert a.beat().member_epoch == 2


def test_a_deleted_topic_leaves_the_assignment() -> None:
    h = Harness({"t": 2, "u": 2})
    a = h.member("a", topics=["t", "u"])
    a.join()
    h.set_topics({"t": 2})
    r = a.beat()
    assert h.names(r.assignment) == {("t", 0), ("t", 1)}


# ------------------------------------------------------------------------ fencing


def test_an_epoch_ahead_is_fenced() -> None:
    h = Harness()
    a = h.member("a")
    a.join()
    r = a.beat(member_epoch=5)
    assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "greater member epoch (5)" in (r.error_message or "")


def test_the_previous_epoch_is_accepted_only_with_a_subset_of_the_assignment() -> None:
    h = Harness()
    a, b = h.member("a"), h.member("b")
    a.join()
    b.join()
    a.settle(b)
    view = h.view().member("a")
    assert view is not None and (view.member_epoch, view.previous_member_epoch) == (2, 1)
    # Our answer with epoch 2 may have been lost: epoch 1 with what it owns is fine.
    r = a.beat(member_epoch=1)
    assert r.error_code == 0 and r.member_epoch == 2
    # Epoch 1 claiming a partition it no longer has is not.
    r = a.beat(member_epoch=1, topic_partitions=ids({"t": [0, 5]}))
    assert r.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert "smaller member epoch (1)" in (r.error_message or "")
    # Nor is an older one, nor a rejoin (epoch 0) when 0 is not the previous epoch.
    assert a.join().error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_a_rejoin_under_the_same_id_right_after_joining_keeps_epoch_and_partitions() -> None:
    """What Kafka 4.1.1 showed: the broker still has the member (previous epoch 0), so a
    rejoin with epoch 0 is taken back at its current epoch, with its whole assignment."""
    h = Harness()
    a = h.member("a")
    a.join()
    r = a.join()
    assert r.error_code == 0 and r.member_epoch == 1 and h.names(r.assignment) == ALL6


# ------------------------------------------------------------------------ timeouts


def test_a_silent_member_is_fenced_after_its_session() -> None:
    h = Harness()
    a, b = h.member("a"), h.member("b")
    a.join()
    b.join()
    a.settle(b)
    for _ in range(4):
        h.tick(SESSION_MS / 1000 / 3)
        a.beat()  # only a keeps its session
    view = h.view()
    assert [m.member_id for m in view.members] == ["a"] and view.group_epoch == 3
    a.beat()
    assert a.partitions == ALL6
    assert b.beat().error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_the_group_session_config_applies() -> None:
    h = Harness()
    h.coord.set_group_config("g", session_timeout_ms=2000, heartbeat_interval_ms=300)
    a = h.member("a")
    assert a.join().heartbeat_interval_ms == 300
    h.tick(1.9)
    assert h.view().members
    h.tick(0.2)
    assert not h.view().members and h.view().state == "Empty"
    with pytest.raises(ConfigurationError):
        h.coord.set_group_config("g", session_timeout_ms=500)  # below the broker's minimum


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    h = Harness()
    a, b = h.member("a"), h.member("b")
    a.join()
    b.join()
    everything = ids({"t": range(6)})
    a.beat(topic_partitions=everything)  # told to revoke 3-5
    for _ in range(int(REBALANCE_MS / 1000 / 5)):
        h.tick(5)
        a.beat(topic_partitions=everything)  # heartbeats on, never revokes
        b.beat()
    h.tick(5)
    b.beat()
    assert [m.member_id for m in h.view().members] == ["b"]
    assert a.beat(topic_partitions=everything).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    b.beat()
    assert b.partitions == ALL6


# ------------------------------------------------------------------------ static members


def test_a_static_member_leaving_with_minus_two_keeps_its_partitions_for_its_return() -> None:
    h = Harness()
    a = h.member("a", instance_id="ia")
    b = h.member("b")
    a.join()
    b.join()
    a.settle(b)
    mine = a.partitions
    r = a.leave(-2)
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a", -2)
    view = h.view()
    assert view.group_epoch == 2 and view.member("a").member_epoch == -2  # type: ignore[union-attr]
    b.beat()
    assert b.partitions.isdisjoint(mine)  # nobody else gets them meanwhile
    # The instance comes back with a new member id: same partitions, no epoch bump.
    a2 = h.member("a2", instance_id="ia")
    r = a2.join()
    assert r.error_code == 0 and r.member_epoch == 2 and a2.partitions == mine
    assert {m.member_id for m in h.view().members} == {"a2", "b"}
    assert h.view().group_epoch == 2
    # The old member id is fenced now.
    r = h.heartbeat(member_id="a", member_epoch=2, instance_id="ia")
    assert r.error_code == ErrorCode.FENCED_INSTANCE_ID


def test_an_instance_id_still_in_use_is_unreleased() -> None:
    h = Harness()
    h.member("a", instance_id="ia").join()
    r = h.member("a2", instance_id="ia").join()
    assert r.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    assert r.error_message == (
        "Static member a2 with instance id ia cannot join the group because the instance id "
        "is owned by a member."
    )


def test_a_static_member_that_does_not_return_within_its_session_is_removed() -> None:
    h = Harness()
    a = h.member("a", instance_id="ia")
    b = h.member("b")
    a.join()
    b.join()
    a.settle(b)
    a.leave(-2)
    for _ in range(4):
        h.tick(SESSION_MS / 1000 / 3)
        b.beat()
    assert [m.member_id for m in h.view().members] == ["b"]
    b.beat()
    assert b.partitions == ALL6


def test_a_static_member_leaving_for_good_with_minus_one() -> None:
    h = Harness()
    a = h.member("a", instance_id="ia")
    a.join()
    assert a.leave(-1).error_code == 0
    assert h.view().state == "Empty" and h.view().group_epoch == 2
    r = h.heartbeat(member_id="x", member_epoch=-2, instance_id="nope")
    assert (r.error_code, r.error_message) == (
        ErrorCode.UNKNOWN_MEMBER_ID, "Instance id nope is unknown.",
    )  # fmt: skip


# ------------------------------------------------------------------------ regular expressions


def test_a_regex_is_resolved_after_the_join_and_assigned_at_the_next_heartbeat() -> None:
    h = Harness({"a-one": 2, "a-two": 1, "other": 1})
    m = h.member("m", topics=None, subscribed_topic_regex=r"a-(one|two)\z")
    r = m.join()
    # As on Kafka 4.1.1: the join's answer has nothing yet, the regex resolves right after.
    assert r.error_code == 0 and r.assignment == {}
    assert h.view().group_epoch == 2  # the resolution moved the group epoch
    m.beat()
    assert m.partitions == {("a-one", 0), ("a-one", 1), ("a-two", 0)}
    assert h.view().member("m").subscribed_topic_regex == r"a-(one|two)\z"  # type: ignore[union-attr]


def test_a_new_topic_matching_a_regex_is_picked_up_after_the_refresh_interval() -> None:
    h = Harness({"a-one": 1})
    m = h.member("m", topics=None, subscribed_topic_regex="a-.*")
    m.join()
    m.beat()
    h.set_topics({"a-one": 1, "a-two": 1})
    h.tick(5)
    m.beat()  # within 10 s of the last resolution: not resolved again
    m.beat()
    assert m.partitions == {("a-one", 0)}
    h.tick(6)
    m.beat()  # resolution scheduled, done right after this heartbeat
    m.beat()
    assert m.partitions == {("a-one", 0), ("a-two", 0)}


@pytest.mark.parametrize("pattern", ["(?=a)b", r"(a)\1", "a++", r"a\Z", "(unclosed"])
def test_a_regex_re2_would_not_compile_is_refused(pattern: str) -> None:
    h = Harness()
    r = h.member("m", topics=None, subscribed_topic_regex=pattern).join()
    assert r.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert (r.error_message or "").startswith(f"SubscribedTopicRegex `{pattern}` is not a valid")
    assert h.coord.consumer_group_state("g") is None


# ------------------------------------------------------------------------ offsets


def commit(h: Harness, epoch: int, member: str = "a", api_version: int = 9) -> int:
    response = h.coord.commit_offsets(
        OffsetCommitRequestData(
            group_id="g",
            partitions=[OffsetCommitPartition("t", 0, 42)],
            generation_id=epoch,
            member_id=member,
            api_version=api_version,
        ),
        h.now,
    )
    return response.partitions[0][2]


def test_commits_carry_the_member_epoch() -> None:
    h = Harness()
    a = h.member("a")
    a.join()
    assert commit(h, 1) == ErrorCode.NONE
    assert commit(h, 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(h, 1, member="zz") == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(h, 1, api_version=8) == ErrorCode.UNSUPPORTED_VERSION
    fetched = h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)], True, "a", 1))
    assert fetched.error_code == 0 and fetched.partitions[0].committed_offset == 42
    stale = h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)], True, "a", 7))
    assert stale.error_code == ErrorCode.STALE_MEMBER_EPOCH
    unknown = h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)], True, "zz", 1))
    assert unknown.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    # Nobody named (an admin): answered.
    assert h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)])).error_code == 0
    # The group emptied: a simple commit (-1) goes in.
    a.leave()
    assert commit(h, -1, member="") == ErrorCode.NONE


def test_v9_commits_to_a_missing_group_are_group_id_not_found() -> None:
    h = Harness()
    assert commit(h, 3) == ErrorCode.GROUP_ID_NOT_FOUND
    assert commit(h, 3, api_version=8) == ErrorCode.ILLEGAL_GENERATION


# ------------------------------------------------------------------------ one namespace


def join_classic(
    coord: GroupCoordinator, now: float, protocol_type: str = "consumer"
) -> JoinGroupResponseData | None:
    answers: list[JoinGroupResponseData | None] = []
    metadata = encode_subscription(Subscription(topics=["t"]))
    coord.join_group(
        JoinGroupRequestData(
            "g", "", protocol_type, [("range", metadata)], 10_000, 10_000, api_version=3
        ),
        now,
        answers.append,
    )
    return answers[0] if answers else None


def test_consumer_and_classic_groups_share_one_namespace() -> None:
    h = Harness()
    # A non-empty classic group of another protocol type cannot become a consumer group.
    join_classic(h.coord, h.now, "connect")
    r = h.member("a").join()
    assert (r.error_code, r.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND,
        "Cannot upgrade classic group g to consumer group because the group does not use the "
        "consumer embedded protocol.",
    )
    r = h.heartbeat(member_id="a", member_epoch=1)
    assert (r.error_code, r.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.",
    )  # fmt: skip
    h.tick(60)  # the classic member's session ends: the classic group is empty
    assert h.coord.group_state("g").state == "Empty"  # type: ignore[union-attr]
    assert h.member("a").join().error_code == 0  # an empty classic group becomes a consumer one
    assert h.coord.group_state("g") is None
    listed = h.coord.list_groups()
    assert [(g.group_id, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "consumer", "Stable")
    ]
    assert h.coord.delete_groups(["g"], h.now) == [("g", ErrorCode.NON_EMPTY_GROUP)]
    h.heartbeat(member_id="a", member_epoch=-1)
    # An empty consumer group becomes a classic group when a classic member joins.
    joined = join_classic(h.coord, h.now)
    assert joined is not None and joined.error_code == 0
    assert h.coord.consumer_group_state("g") is None and h.coord.group_state("g") is not None
    h.tick(60)
    assert h.member("b").join().error_code == 0
    h.heartbeat(member_id="b", member_epoch=-1)
    assert h.coord.delete_groups(["g"], h.now) == [("g", ErrorCode.NONE)]
    assert h.coord.consumer_group_state("g") is None


def test_describe() -> None:
    h = Harness()
    a = h.member("a", instance_id="ia", rack_id="r1", client_id="cid", client_host="/1.2.3.4")
    a.join()
    [found, missing] = h.coord.consumer_group_describe(["g", "nope"])
    assert (found.error_code, found.group_state, found.group_epoch, found.assignment_epoch) == (
        0, "Stable", 1, 1,
    )  # fmt: skip
    assert found.assignor_name == "uniform"
    [m] = found.members
    assert (m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.member_type) == (
        "a", "ia", "r1", 1, 1,
    )  # fmt: skip
    assert (m.client_id, m.client_host, m.subscribed_topic_names) == ("cid", "/1.2.3.4", ("t",))
    assert [(t.topic_id, t.topic_name, t.partitions) for t in m.assignment] == [
        (topic_id("t"), "t", (0, 1, 2, 3, 4, 5))
    ]
    assert m.target_assignment == m.assignment
    assert (missing.error_code, missing.error_message) == (
        ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.",
    )  # fmt: skip


def test_a_failover_keeps_consumer_groups_and_restarts_their_sessions() -> None:
    h = Harness()
    a = h.member("a")
    a.join()
    h.tick(SESSION_MS / 1000 - 1)
    h.coord.failover(h.now)
    h.tick(2)
    assert h.view().member("a") is not None  # the session restarted at the failover
    assert a.beat().member_epoch == 1


# ------------------------------------------------------------------------ flavours


def test_which_flavours_serve_kip848() -> None:
    assert CoordinatorConfig().serves_consumer_protocol
    assert not CoordinatorConfig(flavour="kafka3").serves_consumer_protocol
    assert CoordinatorConfig(flavour="kafka3", consumer_protocol=True).serves_consumer_protocol
    assert not CoordinatorConfig(consumer_protocol=False).serves_consumer_protocol
    with pytest.raises(ConfigurationError):
        CoordinatorConfig(flavour="kafka2", consumer_protocol=True)
    kafka4 = wire.versions_for("kafka4")
    assert (kafka4[68], kafka4[69], kafka4[8], kafka4[9]) == ((0, 1), (0, 1), (2, 9), (1, 9))
    kafka3 = wire.versions_for("kafka3")
    assert 68 not in kafka3 and 69 not in kafka3 and kafka3[8] == (2, 8)
    flagged = wire.versions_for("kafka3", True)
    assert flagged[68] == (0, 0) and flagged[8] == (2, 9)
    assert 68 not in wire.versions_for("kafka2")
    assert 68 not in wire.versions_for("kafka4", False)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigurationError):
        ConsumerGroupSettings(assignors=("sticky",))
    with pytest.raises(ConfigurationError):
        ConsumerGroupSettings(migration_policy="sideways")
    with pytest.raises(ConfigurationError):
        ConsumerGroupSettings(session_timeout_ms=1000, heartbeat_interval_ms=1000)
