"""Leadership on its own: a leader's round (KIP-429 2a-2f), what it withholds, its follow-up,
stale claims, and the marks it puts in its assignments."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import pytest

from aiogroup.membership.events import JoinGroupMember
from aiogroup.membership.leader import (
    FOLLOW_UP,
    FOLLOW_UP_MAX_MEMBERS,
    HAND_OFF_AWARE,
    Leadership,
    announce_hand_off_aware,
    leader_marks,
    without_marks,
)
from aiogroup.protocol import (
    Assignment,
    Subscription,
    TopicPartition,
    decode_assignment,
    encode_assignment,
    encode_subscription,
    to_topic_partitions,
)

from ..helpers import FixedAssignor, tps

HANDOVER, RECEIPT = 10.0, 20.0
META = {"t": 3}


def members(claims: Mapping[str, tuple[Sequence[int], int]]) -> tuple[JoinGroupMember, ...]:
    """JoinGroup members subscribed to t, each claiming ``(owned partitions, generation)``."""
    return tuple(
        JoinGroupMember(
            m,
            encode_subscription(
                Subscription(["t"], owned_partitions={"t": tuple(p)} if p else {}, generation_id=g),
                3,
            ),
        )
        for m, (p, g) in claims.items()
    )


def decoded(encoded: tuple[tuple[str, bytes], ...]) -> dict[str, Assignment]:
    return {m: decode_assignment(b) for m, b in encoded}


def owned(assignment: Assignment) -> frozenset[TopicPartition]:
    return frozenset(to_topic_partitions(assignment.partitions))


def leadership() -> Leadership:
    return Leadership(handover_wait=HANDOVER, receipt_wait=RECEIPT)


def test_joined_decodes_what_it_can_and_names_the_group_topics() -> None:
    ld = leadership()
    good = members({"a": ((0,), 1)})
    topics = ld.joined((*good, JoinGroupMember("bad", b"\x00\x09garbage")))
    assert topics == {"t"} and ld.group_topics == {"t"}
    assert set(ld.subscriptions) == {"a"} and ld.undecodable_members == {"bad"}


def test_a_plain_round_is_planned_and_remembered() -> None:
    ld = leadership()
    ld.joined(members({"b": ((), -1), "a": ((), -1)}))
    assignor = FixedAssignor({"a": tps("t-0", "t-1"), "b": tps("t-2")})
    encoded = ld.plan(assignor, 1, META, cooperative=True)
    assert [m for m, _ in encoded] == ["a", "b"]  # sorted by member id
    got = decoded(encoded)
    assert owned(got["a"]) == tps("t-0", "t-1") and owned(got["b"]) == tps("t-2")
    assert {leader_marks(a) for a in got.values()} == {frozenset({HAND_OFF_AWARE})}  # none withheld
    assert ld.last_plan is not None and ld.snapshot == META
    assert ld.round is None and not ld.follow_up_coming(1)
    assert not ld.partitions_changed({"t": 3, "other": 1})
    assert ld.partitions_changed({"t": 4})


def test_an_eager_round_carries_no_marks() -> None:
    ld = leadership()
    ld.joined(members({"a": ((), -1)}))
    got = decoded(ld.plan(FixedAssignor({"a": tps("t-0")}), 1, META, cooperative=False))
    assert got["a"].user_data is None


def test_a_failing_assignor_leaves_the_last_round_as_it_was() -> None:
    ld = leadership()
    ld.joined(members({"a": ((), -1)}))
    ld.plan(FixedAssignor({"a": tps("t-0")}), 1, META, cooperative=True)
    plan = ld.last_plan

    class Broken(FixedAssignor):
        def assign(self, *args: object, **kw: object) -> dict[str, Assignment]:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        ld.plan(Broken(), 2, {"t": 4}, cooperative=True)
    assert ld.last_plan is plan and ld.snapshot == META


def withholding_round(ld: Leadership, generation: int = 1, now: float = 100.0) -> None:
    """a owns t-0 and the assignor moves it to b: withheld this round (2d), then Stable."""
    ld.joined(members({"a": ((0,), generation - 1), "b": ((), -1)}))
    encoded = ld.plan(FixedAssignor({"b": tps("t-0")}), generation, META, cooperative=True)
    got = decoded(encoded)
    assert owned(got["b"]) == frozenset() and owned(got["a"]) == frozenset()
    assert leader_marks(got["a"]) == {HAND_OFF_AWARE, FOLLOW_UP}
    ld.synced(generation, now)


def test_withheld_partitions_are_remembered_with_their_claimants() -> None:
    ld = leadership()
    withholding_round(ld)
    assert ld.round is not None
    assert ld.round.claimants == {TopicPartition("t", 0): frozenset({"a"})}
    assert not ld.round.persisting and ld.follow_up_coming(1)
    assert ld.round.stable_at == 100.0


def test_a_follow_up_when_nobody_frees_them_within_the_handover_wait() -> None:
    ld = leadership()
    withholding_round(ld)
    assert ld.follow_up_deadline(1) == 100.0 + HANDOVER
    assert not ld.follow_up_due(1, 100.0 + HANDOVER - 0.1)
    assert not ld.follow_up_due(2, 100.0 + HANDOVER)  # not our generation any more
    assert ld.follow_up_due(1, 100.0 + HANDOVER)
    assert not ld.follow_up_due(1, 100.0 + 2 * HANDOVER)  # once
    assert ld.follow_up_deadline(1) is None


def test_no_follow_up_mark_in_large_groups() -> None:
    ld = leadership()
    claims: dict[str, tuple[Sequence[int], int]] = {
        f"m{i:03}": ((), -1) for i in range(FOLLOW_UP_MAX_MEMBERS)
    }
    claims["a"] = ((0,), 0)
    ld.joined(members(claims))
    got = decoded(ld.plan(FixedAssignor({"b": tps("t-0")}), 1, META, cooperative=True))
    assert ld.follow_up_coming(1)
    assert {leader_marks(a) for a in got.values()} == {frozenset({HAND_OFF_AWARE})}


def test_a_persisting_claim_waits_for_proof_then_is_ignored() -> None:
    ld = leadership()
    withholding_round(ld, generation=1, now=100.0)
    # Generation 2: a still claims t-0 (it never revoked), before round 1 was proven long enough.
    ld.joined(members({"a": ((0,), 1), "b": ((), -1)}))
    ld.plan(FixedAssignor({"b": tps("t-0")}), 2, META, cooperative=True)
    assert ld.stale_claims == {}
    assert ld.round is not None and ld.round.persisting and not ld.follow_up_coming(2)
    ld.synced(2, 200.0)
    assert ld.follow_up_deadline(2) is None  # decided by heartbeat answers, not by time
    assert ld.heartbeat_ok(2, 200.0 + RECEIPT - 1)
    assert not ld.follow_up_due(2, 1e9)
    assert ld.heartbeat_ok(2, 200.0 + RECEIPT)
    assert ld.follow_up_due(2, 200.0 + RECEIPT)
    # Generation 3: the same claim again, after the proof: ignored, t-0 goes to b.
    ld.joined(members({"a": ((0,), 2), "b": ((), -1)}))
    got = decoded(ld.plan(FixedAssignor({"b": tps("t-0")}), 3, META, cooperative=True))
    assert ld.stale_claims == {"a": tps("t-0")}
    assert owned(got["b"]) == tps("t-0")
    assert ld.round is None


def test_heartbeats_of_other_generations_or_before_stable_prove_nothing() -> None:
    ld = leadership()
    assert not ld.heartbeat_ok(1, 5.0)
    ld.joined(members({"a": ((0,), 0), "b": ((), -1)}))
    ld.plan(FixedAssignor({"b": tps("t-0")}), 1, META, cooperative=True)
    assert not ld.heartbeat_ok(1, 5.0)  # not Stable yet
    ld.synced(1, 10.0)
    assert not ld.heartbeat_ok(2, 11.0)
    assert ld.heartbeat_ok(1, 11.0)
    ld.forget()
    assert ld.round is None and not ld.heartbeat_ok(1, 12.0)
    assert ld.snapshot is None and not ld.partitions_changed({"t": 9})


def test_a_follower_remembers_no_round() -> None:
    ld = leadership()
    withholding_round(ld)
    ld.follower()
    assert ld.round is None and ld.snapshot is None and ld.group_topics == frozenset()


def test_marks_are_entries_without_partitions_and_leave_the_user_data_alone() -> None:
    assignments = {"a": Assignment({"t": (0,)}), "b": Assignment({}, user_data=b"theirs")}
    marked = announce_hand_off_aware(assignments, follow_up=True)
    assert marked["a"].user_data is None  # Kafka 4's online upgrade refuses user data
    assert marked["b"].user_data == b"theirs"  # the assignor's own user data stays
    wire = decode_assignment(encode_assignment(marked["a"]))
    assert leader_marks(wire) == {HAND_OFF_AWARE, FOLLOW_UP}
    assert to_topic_partitions(wire.partitions) == [TopicPartition("t", 0)]  # nothing more
    assert without_marks(wire).partitions.keys() == {"t"}
    assert without_marks(marked["b"]) == assignments["b"]
    assert leader_marks(announce_hand_off_aware(assignments)["b"]) == {HAND_OFF_AWARE}
    # No topic can be named like a mark (Kafka's names are [a-zA-Z0-9._-]).
    assert not any(
        re.fullmatch(r"[a-zA-Z0-9._-]+", m.decode()) for m in (HAND_OFF_AWARE, FOLLOW_UP)
    )


def test_an_older_aiogroup_leaders_marks_in_the_user_data_are_read_and_taken_out() -> None:
    legacy = Assignment({"t": (0,)}, user_data=b"aiogroup:hand-off/1 aiogroup:later/9")
    assert leader_marks(legacy) >= {HAND_OFF_AWARE}
    assert without_marks(legacy) == Assignment({"t": (0,)})
    theirs = Assignment({"t": (0,)}, user_data=b"theirs")
    assert leader_marks(theirs) == frozenset() and without_marks(theirs) is theirs
    assert leader_marks(Assignment()) == frozenset()
