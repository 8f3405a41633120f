"""Mixed groups without sockets: classic-protocol members (JoinGroup/SyncGroup) in a KIP-848
consumer group, the online upgrade of a classic group and the downgrade back, under each
``group.consumer.migration.policy`` (Kafka 4.1's ``classicGroup*ToConsumerGroup``,
``convertToConsumerGroup``, ``convertToClassicGroup``; the outcomes were checked against a live
Kafka 4.1.1 under all four policies, tests/testing/test_consumer_wire.py)."""

from __future__ import annotations

import pytest

from aiogroup.protocol.consumer import decode_assignment, encode_assignment, encode_subscription
from aiogroup.protocol.types import Assignment, Subscription
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
from aiogroup.testing.embedded.messages import (
    ErrorCode,
    HeartbeatRequestData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.rules import CoordinatorConfig

from .consumer_harness import SESSION_MS, Harness

CLASSIC_SESSION_MS = 8_000
REBALANCE_MS = 20_000
INITIAL_DELAY_MS = 1_000


def harness(policy: str = "bidirectional") -> Harness:
    settings = ConsumerGroupSettings(
        session_timeout_ms=SESSION_MS, min_session_timeout_ms=1000, heartbeat_interval_ms=1000,
        min_heartbeat_interval_ms=100, migration_policy=policy,
    )  # fmt: skip
    config = CoordinatorConfig(
        consumer_group=settings,
        initial_rebalance_delay_ms=INITIAL_DELAY_MS,
        group_min_session_timeout_ms=1000,
    )
    return Harness(config=config)


def metadata(owned: dict[str, list[int]] | None = None, topics: tuple[str, ...] = ("t",)) -> bytes:
    return encode_subscription(Subscription(topics=list(topics), owned_partitions=owned or {}), 1)


class Classic:
    """A classic-protocol member driven by hand."""

    def __init__(self, h: Harness, instance_id: str | None = None) -> None:
        self.h = h
        self.member_id = ""
        self.generation = -1
        self.instance_id = instance_id
        self.partitions: list[int] = []

    def join(self, owned: list[int] | None = None, api_version: int = 9) -> JoinGroupResponseData:
        answers: list[JoinGroupResponseData | None] = []
        request = JoinGroupRequestData(
            group_id="g", member_id=self.member_id, protocol_type="consumer",
            protocols=[("range", metadata({"t": owned} if owned else None))],
            session_timeout_ms=CLASSIC_SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
            group_instance_id=self.instance_id, api_version=api_version,
        )  # fmt: skip
        self.h.coord.join_group(request, self.h.now, answers.append)
        [answer] = answers
        assert answer is not None
        if answer.member_id:
            self.member_id = answer.member_id
        if answer.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            return self.join(owned, api_version)
        if answer.error_code == 0:
            self.generation = answer.generation_id
        return answer

    def sync(self) -> SyncGroupResponseData:
        answers: list[SyncGroupResponseData | None] = []
        request = SyncGroupRequestData(
            group_id="g", generation_id=self.generation, member_id=self.member_id,
            group_instance_id=self.instance_id, protocol_type="consumer", protocol_name="range",
        )  # fmt: skip
        self.h.coord.sync_group(request, self.h.now, answers.append)
        [answer] = answers
        assert answer is not None
        if answer.error_code == 0:
            self.partitions = sorted(decode_assignment(answer.assignment).partitions.get("t", []))
        return answer

    def heartbeat(self) -> int:
        request = HeartbeatRequestData("g", self.generation, self.member_id, self.instance_id)
        return self.h.coord.heartbeat(request, self.h.now).error_code

    def leave(self) -> int:
        request = LeaveGroupRequestData("g", [MemberIdentity(self.member_id, self.instance_id)])
        return self.h.coord.leave_group(request, self.h.now).members[0].error_code

    def follow(self) -> None:
        """What a client does: rejoin (reporting what it owns) and sync until its heartbeat
        says nothing more."""
        for _ in range(5):
            if self.heartbeat() == 0:
                return
            assert self.join(self.partitions).error_code == 0
            assert self.sync().error_code == 0
        raise AssertionError("never settled")


def classic_group(h: Harness, members: int = 1, partitions: int = 6) -> list[Classic]:
    """A Stable classic group whose leader dealt the partitions out in order (the harness
    needs an initial rebalance delay, so that every member joins the first generation)."""
    out = [Classic(h) for _ in range(members)]
    answers: list[JoinGroupResponseData | None] = []
    for _ in out:
        h.coord.join_group(
            JoinGroupRequestData(
                "g",
                "",
                "consumer",
                [("range", metadata())],
                CLASSIC_SESSION_MS,
                REBALANCE_MS,
                api_version=3,
            ),
            h.now,
            answers.append,
        )
    for _ in range(5):  # the initial delay, extended while members arrive (InitialDelayedJoin)
        if len(answers) == members:
            break
        h.tick(INITIAL_DELAY_MS / 1000)
    assert len(answers) == members
    share = partitions // members
    plan = {}
    for i, (c, answer) in enumerate(zip(out, answers, strict=True)):
        assert answer is not None and answer.error_code == 0
        c.member_id, c.generation = answer.member_id, answer.generation_id
        c.partitions = list(range(i * share, (i + 1) * share))
        plan[c.member_id] = encode_assignment(Assignment(partitions={"t": c.partitions}))
    leader = answers[0].leader if answers[0] is not None else ""
    for c in sorted(out, key=lambda c: c.member_id != leader):
        synced: list[SyncGroupResponseData | None] = []
        h.coord.sync_group(
            SyncGroupRequestData(
                "g", c.generation, c.member_id, list(plan.items()) if c.member_id == leader else ()
            ),
            h.now,
            synced.append,
        )
    assert h.coord.group_state("g").state == "Stable"  # type: ignore[union-attr]
    return out


# ------------------------------------------------------------------------ classic members


def test_a_classic_member_joins_a_consumer_group_and_is_answered_at_once() -> None:
    h = harness()
    m = h.member("m")
    m.join()
    c = Classic(h)
    answer = c.join()
    # KIP-394 first, then the answer: never the leader, no member list, the member's epoch.
    assert (answer.error_code, answer.generation_id, answer.protocol_type, answer.leader) == (
        0, 2, "consumer", "",
    )  # fmt: skip
    assert answer.protocol_name == "range" and answer.members == ()
    assert c.sync().error_code == 0 and c.partitions == []  # m still owns them
    assert c.heartbeat() == 0  # waiting on partitions another member still holds
    m.beat()  # m revokes 3-5
    m.beat()  # ... and acknowledges
    assert c.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS  # released: rejoin to get them
    c.follow()
    assert c.partitions == [3, 4, 5]
    view = h.view()
    assert view.state == "Stable" and {x.uses_classic_protocol for x in view.members} == {
        True,
        False,
    }
    # Commits carry the generation (ILLEGAL_GENERATION, not STALE_MEMBER_EPOCH) at any version.
    commit = OffsetCommitRequestData("g", [OffsetCommitPartition("t", 3, 1)], c.generation - 1,
                                     c.member_id, api_version=8)  # fmt: skip
    assert h.coord.commit_offsets(commit, h.now).partitions[0][2] == ErrorCode.ILLEGAL_GENERATION


def test_a_classic_member_must_revoke_before_the_partition_moves() -> None:
    h = harness("upgrade")  # no downgrade when m leaves
    c = Classic(h)
    m = h.member("m")
    m.join()
    c.join()
    c.sync()
    m.beat()
    m.beat()
    c.follow()
    assert c.partitions == [3, 4, 5]
    m.leave()  # c gets everything
    c.follow()
    assert c.partitions == list(range(6))
    m2 = h.member("m2")
    r = m2.join()
    assert r.assignment == {}
    assert c.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # The classic member rejoins still owning everything: it is told to revoke (sync gives it
    # what it keeps) and m2 gets nothing until its next join reports the revocation.
    c.join(list(range(6)))
    c.sync()
    assert len(c.partitions) == 3
    m2.beat()
    assert m2.partitions == set()
    c.join(c.partitions)
    c.sync()
    m2.beat()
    assert len(m2.partitions) == 3 and m2.partitions.isdisjoint(("t", p) for p in c.partitions)


def test_classic_member_errors() -> None:
    h = harness()
    h.member("m").join()
    c = Classic(h)
    c.join()
    assert c.heartbeat() == 0
    c.generation += 1
    assert c.heartbeat() == ErrorCode.ILLEGAL_GENERATION
    assert c.sync().error_code == ErrorCode.ILLEGAL_GENERATION
    c.generation -= 1
    stranger = Classic(h)
    stranger.member_id, stranger.generation = "nobody", 2
    assert stranger.heartbeat() == ErrorCode.UNKNOWN_MEMBER_ID
    # A consumer-protocol member is not a classic one.
    assert h.coord.heartbeat(HeartbeatRequestData("g", 2, "m"), h.now).error_code == (
        ErrorCode.UNKNOWN_MEMBER_ID
    )  # fmt: skip
    # Another protocol type, or a protocol the classic members lack, is inconsistent.
    answers: list[JoinGroupResponseData | None] = []
    h.coord.join_group(
        JoinGroupRequestData("g", "", "connect", [("range", b"")], CLASSIC_SESSION_MS),
        h.now, answers.append,
    )  # fmt: skip
    assert answers[0] is not None and answers[0].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    answers.clear()
    h.coord.join_group(
        JoinGroupRequestData("g", "", "consumer", [("roundrobin", metadata())], CLASSIC_SESSION_MS),
        h.now, answers.append,
    )  # fmt: skip
    assert answers[0] is not None and answers[0].error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_a_classic_member_that_does_not_rejoin_or_sync_in_time_is_fenced() -> None:
    h = harness()
    m = h.member("m")
    m.join()
    c = Classic(h)
    c.join()  # joined, heartbeats, never syncs
    for _ in range(int(REBALANCE_MS / 1000) - 1):
        h.tick(1)
        m.beat()
        c.heartbeat()
    assert len(h.view().members) == 2
    h.tick(1.5)
    assert [x.member_id for x in h.view().members] == ["m"]
    c2 = Classic(h)
    c2.join()
    c2.sync()
    h.member("m3").join()  # a new epoch: c2 is told to rejoin
    assert c2.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    for _ in range(int(REBALANCE_MS / 1000)):
        h.tick(1)
        c2.heartbeat()
        m.beat()
    h.tick(1)
    assert c2.member_id not in {x.member_id for x in h.view().members}


def test_classic_leave_fences_its_member() -> None:
    h = harness()
    m = h.member("m")
    m.join()
    c = Classic(h)
    c.join()
    assert c.leave() == 0
    assert [x.member_id for x in h.view().members] == ["m"] and h.view().group_epoch == 3


# ------------------------------------------------------------------------ conversions


def test_the_online_upgrade_keeps_the_classic_assignment() -> None:
    h = harness()
    [a, b] = classic_group(h, 2)
    generation = a.generation
    m = h.member("m")
    r = m.join()
    assert r.error_code == 0 and h.coord.group_state("g") is None
    view = h.view()
    assert view.group_epoch == generation + 1 and view.assignment_epoch == generation + 1
    olds = {x.member_id: x for x in view.members if x.uses_classic_protocol}
    assert {x.member_epoch for x in olds.values()} == {generation}
    assert olds[a.member_id].assigned == {("t", p) for p in a.partitions}
    # The classic members carry on: told to rejoin, then as members of a consumer group.
    for c in (a, b):
        assert c.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    for _ in range(4):
        for c in (a, b):
            c.follow()
        m.beat()
    assert sorted(a.partitions + b.partitions + [p for _, p in m.partitions]) == list(range(6))
    assert h.view().state == "Stable"


def test_the_upgrade_answers_parked_requests_and_refuses_custom_assignments() -> None:
    h = harness()
    [_a] = classic_group(h, 1)
    # Parked: a JoinGroup of a second classic member waits for the rebalance.
    answers: list[JoinGroupResponseData | None] = []
    h.coord.join_group(
        JoinGroupRequestData(
            "g",
            "",
            "consumer",
            [("range", metadata())],
            CLASSIC_SESSION_MS,
            REBALANCE_MS,
            api_version=3,
        ),
        h.now,
        answers.append,
    )
    assert answers == []
    assert h.member("m").join().error_code == 0
    assert answers and answers[0] is not None
    assert answers[0].error_code == ErrorCode.REBALANCE_IN_PROGRESS

    h2 = harness()
    [c] = classic_group(h2, 1)
    group = h2.coord._groups["g"]
    member = group.members[c.member_id]
    # A custom assignor's user data in an assignment: Kafka will not convert the group.
    member.assignment = encode_assignment(Assignment({"t": [0]}, user_data=b"custom-state"))
    r = h2.member("m").join()
    assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert (r.error_message or "").endswith(
        "because an unsupported custom assignor is in use. Please refer to the documentation or "
        "switch to a default assignor before re-attempting the upgrade."
    )
    assert h2.coord.group_state("g") is not None  # still the classic group


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    h = harness()
    m = h.member("m")
    m.join()
    c = Classic(h)
    c.join()
    c.sync()
    c.follow()
    epoch = h.view().group_epoch
    m.leave()
    assert h.coord.consumer_group_state("g") is None
    view = h.coord.group_state("g")
    assert view is not None and view.state == "PreparingRebalance"
    assert view.generation_id == epoch and view.protocol_name == "range"
    assert c.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # A classic rebalance follows; the member ends with every partition.
    answers: list[JoinGroupResponseData | None] = []
    h.coord.join_group(
        JoinGroupRequestData(
            "g", c.member_id, "consumer", [("range", metadata())], CLASSIC_SESSION_MS, REBALANCE_MS
        ),
        h.now,
        answers.append,
    )
    assert answers[0] is not None and answers[0].generation_id == epoch + 1


@pytest.mark.parametrize(
    ("policy", "upgrades", "downgrades"),
    [
        ("bidirectional", True, True),
        ("upgrade", True, False),
        ("downgrade", False, True),
        ("disabled", False, False),
    ],
)
def test_migration_policies(policy: str, upgrades: bool, downgrades: bool) -> None:
    h = harness(policy)
    classic_group(h, 1)
    r = h.member("m").join()
    if upgrades:
        assert r.error_code == 0
    else:
        assert (r.error_code, r.error_message) == (
            ErrorCode.GROUP_ID_NOT_FOUND,
            "Cannot upgrade classic group g to consumer group because online upgrade is disabled.",
        )
    h2 = harness(policy)
    m = h2.member("m")
    m.join()
    c = Classic(h2)
    c.join()
    m.leave()
    converted = h2.coord.consumer_group_state("g") is None
    assert converted is downgrades
    if not downgrades:
        assert h2.view().state == "Assigning" and c.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS
    # Empty groups convert whatever the policy: the classic member leaves, a consumer joins.
    h3 = harness(policy)
    [e] = classic_group(h3, 1)
    e.leave()
    assert h3.member("m").join().error_code == 0


def test_a_static_classic_member_replacing_the_last_consumer_member_downgrades() -> None:
    h = harness()
    m = h.member("m", instance_id="i1")
    m.join()
    c = Classic(h)
    c.join()
    c.sync()
    m.beat()
    m.beat()
    c.follow()
    mine = {p for _, p in m.partitions}
    assert len(mine) == 3
    # The instance comes back with the classic protocol (a rolling downgrade).
    s = Classic(h, instance_id="i1")
    answer = s.join()
    assert answer.error_code == 0
    view = h.coord.group_state("g")
    assert view is not None and view.state == "Stable"  # same subscription: no rebalance
    assert s.sync().error_code == 0 and set(s.partitions) == mine
