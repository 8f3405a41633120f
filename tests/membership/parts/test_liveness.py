"""Liveness on its own: the KAFKA-7026 session proof and the heartbeat schedule."""

from __future__ import annotations

import pytest

from aiogroup.membership.liveness import Liveness

from ..helpers import tps

OWNED = tps("t-0", "t-1")


def live(session: float = 10.0, interval: float = 1.0, backoff: float = 0.1) -> Liveness:
    return Liveness(
        session_timeout_ms=int(session * 1000),
        heartbeat_interval_ms=int(interval * 1000),
        retry_backoff_ms=int(backoff * 1000),
    )


def sent_heartbeats(lv: Liveness, until: float) -> list[float]:
    """Send each heartbeat when due (answered at once) until ``until``; their send times."""
    times = []
    while (due := lv.heartbeat_due()) < until:
        lv.heartbeat_sent(due)
        assert lv.heartbeat_ok(due)
        times.append(round(due, 6))
    return times


def test_without_a_proof_the_member_acts_on_nothing() -> None:
    lv = live()
    assert lv.session_deadline is None
    assert lv.may_act_on(0.0, OWNED) == frozenset()
    assert lv.lapse_to_note() is None and not lv.note_lapse(1e9)


def test_a_proof_runs_from_the_send_time_and_never_moves_back() -> None:
    lv = live(session=10.0)
    lv.join_sent(100.0)
    lv.join_answered()  # answered much later: the session still runs from the send
    assert lv.session_deadline == 110.0
    assert lv.may_act_on(109.9, OWNED) == OWNED
    assert lv.may_act_on(110.0, OWNED) == frozenset()
    lv.prove(95.0)  # an older request answered late proves nothing newer
    assert lv.session_deadline == 110.0
    lv.sync_sent(104.0)
    lv.sync_answered()
    assert lv.session_deadline == 114.0
    lv.forget_proof()
    assert lv.session_deadline is None and lv.may_act_on(105.0, OWNED) == frozenset()


def test_the_lapse_is_noted_once_until_a_new_proof() -> None:
    lv = live(session=10.0)
    lv.prove(0.0)
    assert lv.lapse_to_note() == 10.0
    assert not lv.note_lapse(9.0)
    assert lv.note_lapse(10.0)
    assert not lv.note_lapse(11.0) and lv.lapse_to_note() is None
    lv.prove(5.0)  # the coordinator answered again
    assert lv.lapse_to_note() == 15.0 and lv.note_lapse(15.0)


def test_the_usual_pace_is_one_heartbeat_per_interval() -> None:
    lv = live(interval=1.0)
    lv.coordinator_found(100.0)
    assert lv.heartbeat_due() == 100.0  # a fresh coordinator: one at once
    assert lv.session_expiry() == 110.0
    assert sent_heartbeats(lv, 103.5) == [100.0, 101.0, 102.0, 103.0]


def test_the_prompt_pace_after_a_cooperative_sync() -> None:
    lv = live(interval=1.0)
    lv.synced(100.0, prompt=True, fast=False)
    times = sent_heartbeats(lv, 102.5)
    prompt = [t for t in times if t <= 101.0]
    assert prompt == pytest.approx([100.0 + i / 10 for i in range(1, 11)])
    assert [t for t in times if t > 101.0] == pytest.approx([102.0])  # then the usual pace


def test_the_fast_pace_after_a_follow_up_mark_then_the_prompt_pace() -> None:
    lv = live(interval=1.0)
    lv.synced(100.0, prompt=True, fast=True)
    times = sent_heartbeats(lv, 101.05)
    fast = [t for t in times if t <= 100.1 + 1e-9]
    assert fast == pytest.approx([100.0 + i / 100 for i in range(1, 11)])
    assert [t for t in times if t > 100.1 + 1e-9] == pytest.approx(
        [100.1 + i / 10 for i in range(1, 10)]
    )


def test_no_prompt_pace_under_eager() -> None:
    lv = live(interval=1.0)
    lv.synced(100.0, prompt=False, fast=True)  # (fast needs prompt)
    assert lv.heartbeat_due() == 101.0
    assert lv.session_expiry() == 110.0


def test_a_failed_heartbeat_retries_after_the_backoff_at_the_usual_pace() -> None:
    lv = live(interval=1.0, backoff=0.1)
    lv.synced(100.0, prompt=True, fast=True)
    lv.heartbeat_sent(100.01)
    lv.heartbeat_retry(100.02)
    assert lv.heartbeat_due() == pytest.approx(100.12)
    lv.heartbeat_sent(100.12)
    assert lv.heartbeat_ok(100.13)
    assert lv.heartbeat_due() == pytest.approx(101.12)


def test_heartbeat_answers_prove_the_session_from_their_send_time() -> None:
    lv = live(session=10.0)
    lv.heartbeat_sent(100.0)
    assert lv.heartbeat_ok(103.0)
    assert lv.session_deadline == 110.0 and lv.heartbeat_sent_at == 100.0
    assert lv.session_expiry() == 113.0  # Java's rule runs from the answer
    lv.heartbeat_sent(104.0)
    lv.heartbeat_rebalancing(105.0)  # REBALANCE_IN_PROGRESS proves it too
    assert lv.session_deadline == 114.0 and lv.session_expiry() == 115.0


def test_a_none_after_a_lapse_across_a_coordinator_change_proves_nothing() -> None:
    lv = live(session=10.0)
    lv.prove(100.0)
    lv.coordinator_lost()
    lv.coordinator_found(120.0)
    lv.heartbeat_sent(120.0)  # sent after the session lapsed (110)
    assert not lv.heartbeat_ok(120.5)  # maybe Kafka's blind answer while it loads the group
    assert lv.session_deadline == 110.0
    lv.join_sent(121.0)
    lv.join_answered()  # a JoinGroup answer proves membership
    lv.heartbeat_sent(122.0)
    assert lv.heartbeat_ok(122.5)
    assert lv.session_deadline == 132.0


def test_a_blind_none_before_the_lapse_counts_but_stays_blind() -> None:
    lv = live(session=10.0)
    lv.prove(100.0)
    lv.coordinator_lost()
    lv.heartbeat_sent(105.0)
    assert lv.heartbeat_ok(105.5)  # within the proven session: it extends it
    assert lv.session_deadline == 115.0
    lv.heartbeat_sent(116.0)  # ... but only answers other than NONE end the doubt
    assert not lv.heartbeat_ok(116.5)
    lv.heartbeat_sent(117.0)
    lv.heartbeat_rebalancing(117.5)
    lv.heartbeat_sent(118.0)
    assert lv.heartbeat_ok(118.5) and lv.session_deadline == 128.0
