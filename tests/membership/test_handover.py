"""Withheld partitions are always given out in the end (a cooperative leader's duties).

A KIP-429 leader withholds a partition from its new owner while another member still claims
it. Scripted leader rounds check the two guarantees of ``docs/safety.md``:

* if no rebalance comes within a session timeout of the round, the leader starts one;
* a member that keeps claiming a partition it was not assigned in the previous round, after
  that round was Stable long enough for it to have received its assignment, no longer blocks
  the hand-over (kafka-python 3.0.12 keeps claiming partitions it lost).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from aiogroup.membership import (
    CallbacksFinished,
    HeartbeatCompleted,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupCompleted,
    JoinGroupMember,
    MetadataUpdated,
    SendHeartbeat,
    SendJoinGroup,
    SendSyncGroup,
    SyncGroupCompleted,
)
from aiogroup.membership.leader import (
    FOLLOW_UP,
    FOLLOW_UP_MAX_MEMBERS,
    HAND_OFF_AWARE,
    leader_marks,
)
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
    to_topic_partitions,
)
from aiogroup.protocol.types import TopicPartition

from .helpers import FixedAssignor, Script, member, tps

SESSION, REBALANCE = 10.0, 20.0
Claims = Mapping[str, tuple[Sequence[int], int]]  # member -> (owned partitions of t, generation)


def leader(plan: Mapping[str, frozenset[TopicPartition]]) -> tuple[Script, FixedAssignor]:
    assignor = FixedAssignor(plan)
    s = Script(
        member(
            assignor=assignor,
            session_timeout_ms=int(SESSION * 1000),
            rebalance_timeout_ms=int(REBALANCE * 1000),
            heartbeat_interval_ms=1_000,
        )
    )
    s.feed(MetadataUpdated({"t": 3}))
    s.start()
    return s, assignor


def lead(s: Script, claims: Claims, generation: int) -> dict[str, bytes]:
    """Answer the pending JoinGroup as leader of ``claims`` (m1 is us), complete the round
    (our SyncGroup answered, our callbacks run); return the assignment bytes sent each member."""
    join = s.take(SendJoinGroup)
    members = tuple(
        JoinGroupMember(
            m,
            encode_subscription(
                Subscription(["t"], owned_partitions={"t": tuple(p)} if p else {}, generation_id=g),
                3,
            ),
        )
        for m, (p, g) in claims.items()
    )
    s.feed(
        JoinGroupCompleted(
            join.token, generation, "m1", "m1", join.protocols[0][0], members=members
        )
    )
    sync = s.take(SendSyncGroup)
    s.feed(SyncGroupCompleted(sync.token, dict(sync.assignments)["m1"]))
    while s.has(InvokeCallbacks):
        s.finish_callbacks()
    return dict(sync.assignments)


def lead_round(s: Script, claims: Claims, generation: int) -> dict[str, frozenset[TopicPartition]]:
    """As lead: return what the leader sent each member."""
    return {
        m: frozenset(to_topic_partitions(decode_assignment(b).partitions))
        for m, b in lead(s, claims, generation).items()
    }


def run_stable(s: Script, seconds: float, answer: int = 0) -> float | None:
    """Let time pass one second at a time, answering every heartbeat with ``answer``; stop at
    the first JoinGroup the leader sends and return when that was (None: none was sent)."""
    end = s.now + seconds
    while s.now < end:
        s.now += 1
        for action in s.timer(s.now):
            if isinstance(action, SendHeartbeat):
                event = (
                    HeartbeatCompleted(action.token)
                    if answer == 0
                    else HeartbeatFailed(action.token, answer)
                )
                s.feed(event)
        if s.has(SendJoinGroup):
            return s.now
    return None


def test_withheld_partition_triggers_a_follow_up_after_a_session() -> None:
    # m2 revokes t-0 but never rejoins (a static member that restarted between revoking and
    # rejoining gets its cached assignment back; a peer that forgets): nobody would rebalance.
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    sent = lead_round(s, {"m1": ((), -1), "m2": ((0, 2), 1)}, generation=2)
    assert sent == {"m1": tps("t-1"), "m2": tps("t-2")}  # t-0 waits for m2 to revoke it
    stable_at = s.now
    assert run_stable(s, SESSION - 1) is None  # no rebalance of our own before a session
    when = run_stable(s, 5)
    assert when == pytest.approx(stable_at + SESSION)
    # The follow-up round: m2 (restarted, or done revoking) claims only t-2 now.
    sent = lead_round(s, {"m1": ((1,), 2), "m2": ((2,), 2)}, generation=3)
    assert sent == {"m1": tps("t-0", "t-1"), "m2": tps("t-2")}
    assert s.m.stale_claims == {}
    assert run_stable(s, 3 * REBALANCE) is None  # nothing withheld any more: no more rounds


def test_no_follow_up_of_our_own_when_the_owner_rejoins() -> None:
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    lead_round(s, {"m1": ((), -1), "m2": ((0, 2), 1)}, generation=2)
    # m2 revoked t-0 and rejoined: the coordinator tells us at our next heartbeat.
    assert run_stable(s, 2, answer=27) is not None
    sent = lead_round(s, {"m1": ((1,), 2), "m2": ((2,), 2)}, generation=3)
    assert sent["m1"] == tps("t-0", "t-1")
    assert run_stable(s, 3 * REBALANCE) is None


def marks_sent(s: Script, claims: Claims, generation: int) -> dict[str, frozenset[bytes]]:
    """Lead a round as lead_round does; return the leader's marks in each assignment."""
    return {m: leader_marks(decode_assignment(b)) for m, b in lead(s, claims, generation).items()}


@pytest.mark.parametrize(
    ("claims", "mark"),
    [
        ({"m1": ((), -1), "m2": ((0, 2), 1)}, frozenset({HAND_OFF_AWARE, FOLLOW_UP})),
        ({"m1": ((), -1), "m2": ((2,), 1)}, frozenset({HAND_OFF_AWARE})),
    ],
    ids=["withholds", "withholds-nothing"],
)
def test_every_assignment_of_a_round_that_withholds_says_a_follow_up_is_coming(
    claims: Claims, mark: frozenset[bytes]
) -> None:
    # m2 must revoke t-0 before m1 may have it: it rejoins once it has, and the others learn
    # of that round from a heartbeat, which FOLLOW_UP makes them send at a fast pace.
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    assert marks_sent(s, claims, generation=2) == {"m1": mark, "m2": mark}
    assert not s.has(SendJoinGroup)  # the leader does not start that round itself


def test_no_follow_up_mark_in_a_group_larger_than_the_cap() -> None:
    # Ten fast heartbeats per member would be a burst on the coordinator in a large group.
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    claims: dict[str, tuple[Sequence[int], int]] = {"m1": ((), -1), "m2": ((0, 2), 1)}
    claims.update({f"x{i:03}": ((), -1) for i in range(FOLLOW_UP_MAX_MEMBERS - 1)})
    assert set(marks_sent(s, claims, generation=2).values()) == {frozenset({HAND_OFF_AWARE})}


def test_no_follow_up_mark_while_a_claim_persists() -> None:
    # A claim that went unhonoured in the round before may never be given up (kafka-python):
    # no round is known to be coming, so no fast heartbeats.
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    first = marks_sent(s, {"m1": ((), -1), "m2": ((0, 2), -1)}, generation=2)
    assert first["m2"] == {HAND_OFF_AWARE, FOLLOW_UP}
    run_stable(s, SESSION + 1)  # the leader's follow-up after a session
    again = marks_sent(s, {"m1": ((1,), 2), "m2": ((0, 2), -1)}, generation=3)
    assert again == {"m1": {HAND_OFF_AWARE}, "m2": {HAND_OFF_AWARE}}


def test_a_claim_repeated_after_a_long_stable_generation_stops_blocking() -> None:
    s, assignor = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    # Round 2: m2 claims t-0 (it lost it long ago but its assignor remembers it).
    lead_round(s, {"m1": ((), -1), "m2": ((0, 2), -1)}, generation=2)
    run_stable(s, SESSION + 1)  # the follow-up after a session
    # Round 3: the same claim again. Generation 2 was Stable for only a session (< the
    # rebalance timeout), so m2 may not have had its assignment yet: still withheld.
    sent = lead_round(s, {"m1": ((1,), 2), "m2": ((0, 2), -1)}, generation=3)
    assert sent["m1"] == tps("t-1") and s.m.stale_claims == {}
    stable_at = s.now
    when = run_stable(s, REBALANCE + 3)
    assert when is not None and when >= stable_at + REBALANCE  # waits for proof of receipt
    # Round 4: m2 still claims t-0, which it was not assigned in generation 3, Stable for a
    # rebalance timeout: the claim is stale and t-0 goes to its new owner.
    sent = lead_round(s, {"m1": ((1,), 3), "m2": ((0, 2), -1)}, generation=4)
    assert s.m.stale_claims == {"m2": tps("t-0")}
    assert sent["m1"] == tps("t-0", "t-1")
    seen = assignor.calls[-1][1]["m2"]
    assert seen.owned_partitions == {"t": (2,)}  # the assignor never saw the stale claim
    assert run_stable(s, 3 * REBALANCE) is None


def test_a_repeated_claim_keeps_blocking_without_proof_that_the_round_was_received() -> None:
    # Generation 2 ended soon after it began: m2's SyncGroup may have failed with
    # REBALANCE_IN_PROGRESS, so m2 may still own t-0 from generation 1 (KAFKA-13419).
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    lead_round(s, {"m1": ((), -1), "m2": ((0, 2), 1)}, generation=2)
    assert run_stable(s, 2, answer=27) is not None
    sent = lead_round(s, {"m1": ((1,), 2), "m2": ((0, 2), 2)}, generation=3)
    assert sent["m1"] == tps("t-1") and s.m.stale_claims == {}


def test_only_the_same_member_id_and_consecutive_rounds_count() -> None:
    s, _ = leader({"m1": tps("t-0", "t-1"), "m3": tps("t-2")})
    lead_round(s, {"m1": ((), -1), "m2": ((0,), 1), "m3": ((2,), 1)}, generation=2)
    run_stable(s, SESSION + 1)
    lead_round(s, {"m1": ((1,), 2), "m2": ((0,), 1), "m3": ((2,), 2)}, generation=3)
    run_stable(s, REBALANCE + 3)
    # m2 is gone (it was expired); a new member id claims t-0: not the same claimant.
    sent = lead_round(s, {"m1": ((1,), 3), "m4": ((0,), -1), "m3": ((2,), 3)}, generation=4)
    assert s.m.stale_claims == {} and sent["m1"] == tps("t-1")


def test_a_round_led_by_someone_else_forgets_the_memory() -> None:
    s, _ = leader({"m1": tps("t-0", "t-1"), "m2": tps("t-2")})
    lead_round(s, {"m1": ((), -1), "m2": ((0, 2), 1)}, generation=2)
    run_stable(s, SESSION + 1)
    join = s.take(SendJoinGroup)
    s.feed(JoinGroupCompleted(join.token, 3, "m1", "m2", join.protocols[0][0]))  # m2 leads
    sync = s.take(SendSyncGroup)
    s.feed(SyncGroupCompleted(sync.token, encode_assignment(Assignment({"t": (1,)}))))
    while s.has(InvokeCallbacks):
        cb = s.take(InvokeCallbacks)
        s.feed(CallbacksFinished(cb.token))
    assert run_stable(s, 3 * REBALANCE) is None  # not our round: no follow-up from us
