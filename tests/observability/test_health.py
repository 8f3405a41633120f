"""The health rules without a clock: each cause turns exactly when its bound is passed, says
since when (on the wall clock) and why, and ends when its condition does."""

from __future__ import annotations

import pytest

from aiogroup.membership.states import MemberState
from aiogroup.observability.health import (
    LIVENESS,
    Cause,
    Health,
    Limits,
    MemberWatch,
    Outage,
    Problem,
    Stall,
    evaluate,
    member_problems,
    poll_problem,
    stall_problems,
)
from aiogroup.protocol.types import TopicPartition

LIMITS = Limits(rebalance_timeout_s=300.0, session_timeout_s=45.0, max_poll_interval_s=300.0)
#: The wall clock at monotonic 0 in these tests.
WALL = 1_700_000_000.0


def watch(*steps: tuple[float, MemberState, bool]) -> MemberWatch:
    """A watch that saw ``(now, state, coordinator known)`` in turn (subscribed, gen 4)."""
    w = MemberWatch()
    for now, state, known in steps:
        w.observe(state, subscribed=True, coordinator_known=known, generation_id=4, now=now)
    return w


Found = list[tuple[Cause, float, str, frozenset[TopicPartition]]]


def health(problems: Found, now: float) -> Health:
    return evaluate(problems, now, WALL + now)


def test_a_stable_member_is_healthy() -> None:
    w = watch((0.0, MemberState.JOINING, True), (1.0, MemberState.STABLE, True))
    h = health(member_problems(w, LIMITS, 10_000.0), 10_000.0)
    assert h.ok and h.live and h.ready and bool(h) and h.describe() == "OK"


def test_rebalancing_longer_than_the_rebalance_timeout() -> None:
    w = watch(
        (0.0, MemberState.STABLE, True),
        (100.0, MemberState.JOINING, True),  # the rebalance begins
        (150.0, MemberState.AWAITING_SYNC, True),
        (160.0, MemberState.DISCOVERING, True),  # still the same rebalance
        (170.0, MemberState.AWAITING_SYNC, True),
    )
    assert member_problems(w, LIMITS, 400.0) == []  # exactly the timeout: not yet
    (p,) = health(member_problems(w, LIMITS, 400.5), 400.5).problems
    assert p.cause is Cause.REBALANCING
    assert p.since == WALL + 100.0 and p.duration_s == pytest.approx(300.5)
    assert "longer than the rebalance timeout (300 s)" in p.reason
    assert "since it left generation 4" in p.reason
    assert "waiting for its assignment (SyncGroup)" in p.reason
    w.observe(MemberState.STABLE, subscribed=True, coordinator_known=True, generation_id=5,
              now=401.0)  # fmt: skip
    assert member_problems(w, LIMITS, 10_000.0) == []  # stable again: over


def test_a_member_that_never_joined_says_so() -> None:
    w = watch((0.0, MemberState.JOINING, True))
    ((cause, since, reason, _),) = member_problems(w, LIMITS, 301.0)
    assert (cause, since) == (Cause.REBALANCING, 0.0)
    assert "never having joined" in reason


def test_no_coordinator_longer_than_the_session_timeout() -> None:
    w = watch((0.0, MemberState.STABLE, True), (10.0, MemberState.DISCOVERING, False))
    assert member_problems(w, LIMITS, 55.0) == []
    ((cause, since, reason, _),) = member_problems(w, LIMITS, 55.1)
    assert (cause, since) == (Cause.NO_COORDINATOR, 10.0)
    assert "session timeout (45 s)" in reason
    w.observe(MemberState.STABLE, subscribed=True, coordinator_known=True, generation_id=4,
              now=60.0)  # fmt: skip
    assert member_problems(w, LIMITS, 1000.0) == []


def test_an_unsubscribed_member_neither_rebalances_nor_needs_a_coordinator() -> None:
    w = MemberWatch()
    w.observe(MemberState.UNJOINED, subscribed=False, coordinator_known=False, generation_id=-1,
              now=0.0)  # fmt: skip
    assert member_problems(w, LIMITS, 10_000.0) == []


def test_a_broker_unreachable_longer_than_the_session_timeout() -> None:
    w = watch((0.0, MemberState.STABLE, True))
    down = Outage(1, "kafka-1:9092", 5.0, 17, "Connection refused")
    assert member_problems(w, LIMITS, 50.0, outages=[down]) == []
    ((cause, since, reason, _),) = member_problems(w, LIMITS, 51.0, outages=[down])
    assert (cause, since) == (Cause.DISCONNECTED, 5.0)
    assert "kafka-1:9092 (node 1)" in reason and "17 failed attempts" in reason
    assert "Connection refused" in reason


def test_stopped_members() -> None:
    w = watch((0.0, MemberState.STABLE, True))
    ((cause, _, reason, _),) = member_problems(w, LIMITS, 1.0, closed=True)
    assert cause is Cause.STOPPED and "closed" in reason
    fatal = RuntimeError("FENCED_INSTANCE_ID")
    ((cause, _, reason, _),) = member_problems(w, LIMITS, 1.0, fatal=fatal)
    assert cause is Cause.STOPPED and "FENCED_INSTANCE_ID" in reason


def test_not_polling() -> None:
    assert poll_problem(10.0, False, LIMITS, 310.0) == []
    ((cause, since, reason, _),) = poll_problem(10.0, False, LIMITS, 311.0)
    assert (cause, since) == (Cause.NOT_POLLING, 10.0)
    assert "for 301 s" in reason and "max_poll_interval_ms (300 s)" in reason
    assert poll_problem(10.0, True, LIMITS, 10_000.0) == []  # waiting inside a call
    assert poll_problem(10.0, False, Limits(300.0, 45.0), 10_000.0) == []  # a bare member


def test_stalled_partitions() -> None:
    tp = TopicPartition("orders", 3)
    stalls = [Stall(tp, 100.0, "Fetch answered NotLeaderOrFollowerError (error 6)"),
              Stall(TopicPartition("orders", 4), 130.0, "x")]  # fmt: skip
    assert stall_problems(stalls, LIMITS, 145.0) == []
    (p,) = health(stall_problems(stalls, LIMITS, 146.0), 146.0).problems
    assert p.cause is Cause.PARTITION_STALLED and p.partitions == {tp}
    assert p.since == WALL + 100.0 and "orders-3" in p.reason and "error 6" in p.reason


def test_liveness_fails_only_on_what_a_restart_cures() -> None:
    def one(cause: Cause) -> Health:
        return Health((Problem(cause, WALL, 1.0, "why"),), WALL)

    assert {Cause.REBALANCING, Cause.NOT_POLLING, Cause.STOPPED} == LIVENESS
    for cause in Cause:
        h = one(cause)
        assert not h.ok and not h.ready and not h
        assert h.live is (cause not in LIVENESS)
        assert h.causes == {cause}
    d = one(Cause.PARTITION_STALLED).as_dict()
    assert d["status"] == "unhealthy" and d["live"] is True and d["ready"] is False
    assert d["problems"] == [
        {"cause": "partition_stalled", "since": WALL, "duration_s": 1.0, "reason": "why",
         "partitions": []},
    ]  # fmt: skip
    assert str(one(Cause.NOT_POLLING).problems[0]) == "not_polling for 1.0 s: why"
