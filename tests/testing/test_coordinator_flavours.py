"""The coordinator's flavours: kafka4 (4.x, the default), kafka3 (3.x) and kafka2 (Kafka 2.3).

One test per rule that changed between versions (``coordinator.RULES``), each on every flavour,
with the Kafka source of the rule; and the fixes that hold for every version. The conformance
suite (tests/conformance) checks the kafka2 flavour against a live Kafka 2.3 broker.
"""

from __future__ import annotations

import pytest

from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.hashorder import FLAVOUR_MAPS, vote_order
from aiogroup.testing.embedded.messages import (
    ErrorCode,
    JoinGroupRequestData,
    JoinGroupResponseData,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchRequestData,
    SyncGroupRequestData,
)
from aiogroup.testing.embedded.rules import FLAVOURS, RULES, CoordinatorConfig
from tests.testing.test_coordinator import RANGE, Harness, Reply, form_static_group

ALL = pytest.mark.parametrize("flavour", list(FLAVOURS))
STICKY = ("sticky", b"sticky-meta")
MIN_INT32 = -(2**31)


def test_every_flavour_names_every_rule() -> None:
    for rule in RULES.values():
        assert set(rule.by_flavour) == set(FLAVOURS), rule
    # Flavours that behave alike say so in the same words (the conformance table compares them).
    for rid in ("initial-delay", "max-size-refusal", "deleted-topic-group", "group-operations"):
        assert RULES[rid].by_flavour["kafka3"] == RULES[rid].by_flavour["kafka2"], rid
    for rid in ("group-max-size", "heartbeat-completing", "pending-sync-timeout"):
        assert RULES[rid].by_flavour["kafka3"] == RULES[rid].by_flavour["kafka4"], rid
    with pytest.raises(Exception, match="flavour"):
        CoordinatorConfig(flavour="kafka1")


def members_join(h: Harness, count: int) -> list[Reply[JoinGroupResponseData]]:
    """``count`` v3 members join inside one initial delay, in a known order."""
    replies = [h.join(client=f"m{i}", version=3) for i in range(count)]
    h.advance(1.0)  # the initial delay is extended once (members arrived during it)
    h.advance(1.0)
    return replies


@ALL
def test_member_order_and_next_leaders_follow_the_versions_hash_map(flavour: str) -> None:
    # Kafka never sorts members: the leader's member list and the member that becomes leader
    # when the leader leaves follow the member map's iteration order (12 of 12 trials on 2.3).
    h = Harness(initial_rebalance_delay_ms=1000, flavour=flavour)
    replies = members_join(h, 8)
    ids = [r.value.member_id for r in replies]
    model = FLAVOUR_MAPS[flavour](ids)
    assert replies[0].value.leader == ids[0]  # the first member added leads
    assert [m.member_id for m in replies[0].value.members] == list(model)
    assert all(not r.value.members for r in replies[1:])
    leaders = []
    for _ in range(4):
        h.sync_all()
        leader = h.view().leader or ""
        assert h.leave(MemberIdentity(leader)) == [ErrorCode.NONE]
        model.remove(leader)
        leaders.append(h.view().leader)
        assert h.view().leader == next(iter(model))
        h.rejoin_all()
    assert "member-order" in h.coord.rule_hits["g"]


def test_the_maps_order_the_same_ids_differently() -> None:
    # Scala 2.12 buckets by the top bits of a byte-swapped hash and iterates downwards: nothing
    # like Java's order. (Java and Scala 2.13 share the bucket function and part only within a
    # bucket and at resizes: tests/testing/test_hashorder.py tells them apart.)
    h = Harness(initial_rebalance_delay_ms=1000)
    ids = [r.value.member_id for r in members_join(h, 8)]
    orders = {f: list(FLAVOUR_MAPS[f](ids)) for f in FLAVOURS}
    assert orders["kafka2"] != orders["kafka4"]
    assert ids not in orders.values()


@ALL
def test_vote_tie_goes_to_the_versions_first_key(flavour: str) -> None:
    # 1-1 between range and sticky: 2.3 (Scala 2.12 groupBy) picks range, 4.x (HashMap) sticky.
    h = Harness(flavour=flavour)
    h.join_new("x", protocols=[RANGE, STICKY])
    h.join_new("y", protocols=[STICKY, RANGE])
    (r,) = h.rejoin_all().values()
    assert r.value.protocol_name == vote_order(flavour, ["range", "sticky"])[0]
    assert r.value.protocol_name == {"kafka2": "range", "kafka4": "sticky"}.get(
        flavour, r.value.protocol_name
    )


@ALL
def test_four_way_vote_tie(flavour: str) -> None:
    names = ["range", "roundrobin", "sticky", "cooperative-sticky"]
    h = Harness(flavour=flavour)
    for i in range(4):
        mine = names[i:] + names[:i]
        h.join_new(f"c{i}", protocols=[(n, n.encode()) for n in mine])
    replies = h.rejoin_all()
    v = h.view()
    votes = [m.protocols[0][0] for m in v.members]  # every member's first choice is common
    assert v.protocol_name == vote_order(flavour, votes)[0]
    assert all(r.value.protocol_name == v.protocol_name for r in replies.values())


@ALL
def test_heartbeat_while_completing_rebalance(flavour: str) -> None:
    # KAFKA-10134 (2.7): NONE and a fresh session; Kafka 2.3 answered REBALANCE_IN_PROGRESS.
    h = Harness(flavour=flavour)
    h.join_new("a")
    h.join_new("b")
    h.rejoin_all()
    v = h.view()
    assert v.state == "CompletingRebalance"
    member = v.members[0].member_id
    group = h.coord._groups["g"]
    before = group.members[member].heartbeat_deadline
    h.advance(1.0)
    code = h.heartbeat(member, v.generation_id)
    after = group.members[member].heartbeat_deadline
    if flavour == "kafka2":
        assert code == ErrorCode.REBALANCE_IN_PROGRESS and after == before
    else:
        assert code == ErrorCode.NONE and after == h.now + 10.0
    assert "heartbeat-completing" in h.coord.rule_hits["g"]


@ALL
def test_static_restart_while_completing_rebalance(flavour: str) -> None:
    # KAFKA-9801 (2.6) rebalances; Kafka 2.3 answered with the current generation and the old
    # leader id, and the leader's assignment (made for the old id) gave the member nothing.
    h = Harness(flavour=flavour)
    _ids, _gen = form_static_group(h, ["i1", "i2"])
    h.rejoin_all()  # a new rebalance: both rejoin; the group is CompletingRebalance
    v = h.view()
    assert v.state == "CompletingRebalance"
    leader = v.leader or ""
    follower_inst = next(m.group_instance_id for m in v.members if m.member_id != leader)
    r = h.join(instance=follower_inst, client="restarted")
    if flavour == "kafka2":
        answer = r.value
        assert answer.error_code == ErrorCode.NONE
        assert answer.generation_id == v.generation_id and answer.leader == leader
        assert not answer.members and h.view().state == "CompletingRebalance"
        synced = h.sync(answer.member_id, answer.generation_id, instance=follower_inst)
        old_id = next(m.member_id for m in v.members if m.member_id != leader)
        h.sync(leader, v.generation_id, [(leader, b"L"), (old_id, b"F")])
        assert synced.value.error_code == ErrorCode.NONE and synced.value.assignment == b""
    else:
        assert not r.done and h.view().state == "PreparingRebalance"
    assert "static-restart-completing" in h.coord.rule_hits["g"]


@ALL
def test_static_restart_that_changes_the_vote(flavour: str) -> None:
    # KAFKA-10284 (2.8): a static member back in a Stable group with a protocol list that
    # changes the group's protocol triggers a rebalance; Kafka 2.3 never rebalanced here.
    h = Harness(flavour=flavour)
    form_static_group(h, ["i1"])
    r = h.join(instance="i1", client="i1", protocols=[STICKY, RANGE], version=5)
    if flavour == "kafka2":
        assert r.value.error_code == ErrorCode.NONE and h.view().state == "Stable"
    else:
        assert h.view().state in ("PreparingRebalance", "CompletingRebalance")
    assert "static-restart-protocol" in h.coord.rule_hits["g"]


@ALL
def test_member_that_never_syncs(flavour: str) -> None:
    # KAFKA-12890 (3.0): removed after the rebalance timeout; Kafka 2.3 waits forever.
    h = Harness(flavour=flavour)
    h.join_new("a", rebalance_ms=5000)
    h.join_new("b", rebalance_ms=5000)
    h.rejoin_all()
    v = h.view()
    leader = v.leader or ""
    h.sync(leader, v.generation_id, [])
    h.advance(6.0)
    members = {m.member_id for m in h.view().members}
    if flavour == "kafka2":
        assert len(members) == 2 and h.view().state == "Stable"
    else:
        assert members == {leader} and h.view().state != "Stable"
        assert "pending-sync-timeout" in h.coord.rule_hits["g"]


@ALL
def test_group_max_size_admission(flavour: str) -> None:
    # KAFKA-9885 (2.6) counts the members awaiting join while rebalancing; Kafka 2.3 refused a
    # member without id as soon as the group had max members.
    h = Harness(flavour=flavour, group_max_size=2)
    a, _ = h.join_new("a")
    b, _ = h.join_new("b")
    h.rejoin_all()
    h.sync_all()
    h.join(a)  # the leader rejoins: PreparingRebalance, one member awaiting
    c = h.join(client="c", version=3)
    if flavour == "kafka2":
        assert c.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    else:
        assert not c.done
        assert h.join(b).value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "group-max-size" in h.coord.rule_hits["g"]


@ALL
def test_a_refusal_completes_the_join_up_to_3x(flavour: str) -> None:
    # The Scala coordinator tries to complete the join after every JoinGroup (doJoinGroup's
    # checkAndComplete), a refusal included; 4.x's classicGroupJoinToClassicGroup does not:
    # the join waits for the rebalance timeout (live 4.1.1 and 3.9.1 agree).
    h = Harness(flavour=flavour, group_max_size=2)
    a, _ = h.join_new("a", rebalance_ms=6000)
    b, _ = h.join_new("b", rebalance_ms=6000)
    h.rejoin_all()
    h.sync_all()
    lead = h.join(a, rebalance_ms=6000)
    c = h.join(client="c", version=3, rebalance_ms=6000)
    if flavour == "kafka2":  # c refused, b rejoins: everyone joined
        assert c.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
        h.join(b, rebalance_ms=6000)
        assert lead.value.error_code == ErrorCode.NONE
        return
    assert h.join(b, rebalance_ms=6000).value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED
    assert "max-size-refusal" in h.coord.rule_hits["g"]
    if flavour == "kafka4":
        assert not lead.done and not c.done
        h.advance(6.0)
    assert lead.value.error_code == ErrorCode.NONE and c.value.error_code == ErrorCode.NONE


@ALL
def test_pending_member_leaving_during_the_initial_delay(flavour: str) -> None:
    # A LeaveGroup never ends the initial delay: InitialDelayedJoin (2.x, 3.x) only completes
    # on its timer, and 4.x's LeaveGroup goes through maybeCompleteJoinPhase, which refuses an
    # initial rebalance (live 4.1.1 waits the delay too).
    h = Harness(flavour=flavour, initial_rebalance_delay_ms=3000)
    a = h.join(client="a", version=3)
    pending = h.join(client="p")
    assert pending.value.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert h.leave(MemberIdentity(pending.value.member_id)) == [ErrorCode.NONE]
    assert not a.done
    h.advance(3.0)
    assert a.value.error_code == ErrorCode.NONE


@ALL
def test_pending_member_expiring_during_the_initial_delay(flavour: str) -> None:
    # 4.x's expiry paths (removePendingMemberAndUpdateClassicGroup) complete the join once
    # everyone left has joined, even during the initial delay; 2.x and 3.x wait for it.
    h = Harness(flavour=flavour, initial_rebalance_delay_ms=3000, group_min_session_timeout_ms=1000)
    a = h.join(client="a", version=3)
    pending = h.join(client="p", session_ms=1000)
    assert pending.value.error_code == ErrorCode.MEMBER_ID_REQUIRED
    h.advance(1.0)
    if flavour == "kafka4":
        assert a.value.error_code == ErrorCode.NONE
    else:
        assert not a.done
        h.advance(2.0)
        assert a.value.error_code == ErrorCode.NONE
    assert "initial-delay" in h.coord.rule_hits["g"]


@ALL
def test_newcomer_extends_the_initial_delay_of_an_emptied_group(flavour: str) -> None:
    # 4.x extends the delay whenever the rebalance started from Empty; before, only while the
    # group never formed (generation 0).
    h = Harness(flavour=flavour, initial_rebalance_delay_ms=3000)
    first = h.join(client="a", version=3)
    h.advance(3.0)
    assert first.value.generation_id == 1
    h.leave(MemberIdentity(first.value.member_id))
    assert h.view().state == "Empty"
    a = h.join(client="a", version=3)
    h.advance(1.0)
    b = h.join(client="b", version=3)
    h.advance(2.0)  # 3 s after a: the first delay is over
    if flavour == "kafka4":
        assert not a.done and not b.done
        h.advance(3.0)
    assert a.value.error_code == ErrorCode.NONE and b.value.error_code == ErrorCode.NONE
    assert "initial-delay" in h.coord.rule_hits["g"]


@ALL
def test_commit_from_a_stale_generation_while_completing_rebalance(flavour: str) -> None:
    h = Harness(flavour=flavour)
    (a, _b), gen = h.form_group(2)
    h.rejoin_all()
    assert h.view().state == "CompletingRebalance"
    code = h.commit(a, gen)  # the generation before the rebalance
    expected = (
        ErrorCode.REBALANCE_IN_PROGRESS if flavour == "kafka2" else ErrorCode.ILLEGAL_GENERATION
    )
    assert code == expected
    assert h.commit(a, gen + 1) == ErrorCode.REBALANCE_IN_PROGRESS
    assert "commit-completing" in h.coord.rule_hits["g"]


@ALL
def test_unknown_group_instance_id_on_heartbeat(flavour: str) -> None:
    h = Harness(flavour=flavour)
    (a,), gen = h.form_group(1)
    code = h.heartbeat(a, gen, instance="never-seen")
    assert code == (ErrorCode.NONE if flavour == "kafka2" else ErrorCode.UNKNOWN_MEMBER_ID)
    assert h.join(a, instance="never-seen").value.error_code == ErrorCode.UNKNOWN_MEMBER_ID


@ALL
def test_static_member_ids(flavour: str) -> None:
    # Kafka 2.3: instance id and the time of the group's last state change (KAFKA-8715), so two
    # restarts in a Stable group get the same id and the zombie is not fenced.
    coord = GroupCoordinator(CoordinatorConfig(flavour=flavour))
    now = 50.0
    got: list[JoinGroupResponseData] = []

    def join() -> JoinGroupResponseData:
        reply: Reply[JoinGroupResponseData] = Reply()
        req = JoinGroupRequestData("g", "", "consumer", [RANGE], 10_000, group_instance_id="i")
        coord.join_group(req, now, reply)
        got.append(reply.value)
        return reply.value

    first = join()
    coord.sync_group(SyncGroupRequestData("g", 1, first.member_id, ()), now + 1, lambda _: None)
    now = 60.0
    second = join()
    now = 65.0  # within the session
    third = join()
    if flavour == "kafka2":
        assert first.member_id == "i-50000000"
        assert second.member_id == third.member_id == "i-51000000"
    else:
        assert len({first.member_id, second.member_id, third.member_id}) == 3
        assert all(m.member_id.startswith("i-") for m in got)


@ALL
def test_describe_groups_metadata_and_authorized_operations(flavour: str) -> None:
    h = Harness(flavour=flavour)
    (a,), _ = h.form_group(1)
    (plain,) = h.coord.describe_groups(["g"], api_version=3)
    (asked,) = h.coord.describe_groups(["g"], api_version=3, include_authorized_operations=True)
    (member,) = plain.members
    # KAFKA-9150: Kafka 2.3 sent the assignment as the member's metadata.
    assert member.member_metadata == (a.encode() if flavour == "kafka2" else b"range-meta")
    assert member.member_assignment == a.encode()
    assert plain.authorized_operations == (0 if flavour == "kafka2" else MIN_INT32)
    # READ, DELETE, DESCRIBE; 4.0 added DESCRIBE_CONFIGS and ALTER_CONFIGS (KAFKA-14510).
    extra = (1 << 10) | (1 << 11) if flavour == "kafka4" else 0
    assert asked.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | extra
    assert {"authorized-operations", "group-operations"} <= h.coord.rule_hits["g"]


# ------------------------------------------------------------------------ every version


@ALL
def test_commit_metadata_is_measured_in_utf16_code_units(flavour: str) -> None:
    # GroupMetadataManager.validateOffsetMetadataLength: String.length() <= max.
    h = Harness(flavour=flavour)
    assert h.commit(metadata="é" * 4096) == ErrorCode.NONE  # 8192 UTF-8 bytes
    assert h.commit(metadata="😀" * 2048) == ErrorCode.NONE  # 4096 UTF-16 units
    assert h.commit(metadata="😀" * 2048 + "a") == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert h.commit(metadata="a" * 4097) == ErrorCode.OFFSET_METADATA_TOO_LARGE


@ALL
def test_deleted_partitions_take_their_offsets_and_offsetless_empty_groups(flavour: str) -> None:
    # Up to 3.x the deletion runs cleanupGroupMetadata: an Empty group left without offsets is
    # gone at once; 4.x (onPartitionsDeleted) only deletes offsets, the group stays Empty.
    h = Harness(flavour=flavour)
    h.commit(group="only-t")
    h.coord.commit_offsets(
        OffsetCommitRequestData(
            "t-and-u", [OffsetCommitPartition("t", 0, 1), OffsetCommitPartition("u", 0, 2)]
        ),
        h.now,
    )
    (live,), _ = h.form_group(1)  # a Stable group without offsets stays
    h.join(client="lonely", group="emptied", version=3)
    v = h.view("emptied")
    h.leave(MemberIdentity(v.members[0].member_id), group="emptied")
    assert h.view("emptied").state == "Empty"
    assert h.coord.delete_partitions([("t", 0)], h.now) == 2
    for gid in ("only-t", "emptied"):  # Empty without offsets
        view = h.coord.group_state(gid)
        assert (view.state if view else None) == ("Empty" if flavour == "kafka4" else None)
    assert "deleted-topic-group" in h.coord.rule_hits["emptied"]
    assert h.view("t-and-u").state == "Empty"
    fetched = h.coord.fetch_offsets(OffsetFetchRequestData("t-and-u", [("t", 0), ("u", 0)]))
    assert [p.committed_offset for p in fetched.partitions] == [-1, 2]
    assert h.view("g").state == "Stable" and live


@ALL
def test_rebalance_timeout_minus_one_is_taken_as_sent(flavour: str) -> None:
    # From v1 Kafka uses the value as sent: -1 ends what it bounds at once (the join, and from
    # 3.0 the wait for SyncGroup). v0 has no field: the session timeout is used.
    h = Harness(flavour=flavour)
    a = h.join(client="a", version=1, rebalance_ms=-1)
    if flavour == "kafka2":
        (m,) = h.view().members
        assert m.rebalance_timeout_ms == -1
    else:
        assert h.view().members == ()  # the wait for its SyncGroup is already over
    synced = h.sync(a.value.member_id, 1, [(a.value.member_id, b"A")])
    b = h.join(client="b", version=1, rebalance_ms=-1)
    assert b.value.error_code == ErrorCode.NONE
    if flavour == "kafka2":
        # a synced, then did not rejoin within the -1 ms the rebalance allowed: dropped.
        assert synced.value.error_code == ErrorCode.NONE and b.value.generation_id == 2
        assert [m.member_id for m in h.view().members] == [b.value.member_id]
    else:
        # The wait for SyncGroup ended before a (then b) could send it: dropped at once.
        assert synced.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert b.value.generation_id == 3 and h.view().members == ()
    h0 = Harness(flavour=flavour)
    h0.join(client="a", version=0, rebalance_ms=-1, session_ms=12_000)
    (m0,) = h0.view().members
    assert m0.rebalance_timeout_ms == 12_000
