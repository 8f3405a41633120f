"""Leaving on its own: a close that waits for the rebalance or hands off first, and the leave."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest

from aiogroup.membership.leader import FOLLOW_UP, HAND_OFF_AWARE
from aiogroup.membership.leaving import HandOff, LeavePhase, Leaving


def test_a_close_waiting_for_the_rebalance() -> None:
    lv = Leaving()
    assert not lv.waiting and not lv.expired(1e9)
    assert not lv.due(ready=True, owns=True, leader_id="x", is_leader=False)  # nothing waits
    lv.wait_for_rebalance(130.0)
    assert lv.waiting and not lv.expired(129.9) and lv.expired(130.0)
    assert not lv.due(ready=False, owns=True, leader_id="x", is_leader=False)
    assert lv.due(ready=True, owns=True, leader_id="x", is_leader=False)


def test_a_hand_off_joins_once_subscribed_to_nothing_then_leaves_after_its_round() -> None:
    lv = Leaving()
    lv.synced("L", frozenset({HAND_OFF_AWARE}))
    assert lv.leader_withholds("L", is_leader=False)
    lv.begin_hand_off(130.0)
    assert lv.handing_off and lv.waiting
    # While it owns partitions under a leader that withholds, the close waits for the round.
    assert not lv.due(ready=True, owns=True, leader_id="L", is_leader=False)
    assert lv.join_sent() and lv.hand_off == "joined"
    lv.synced("L", frozenset({HAND_OFF_AWARE, FOLLOW_UP}))
    # cast: mypy would keep the "joined" the assert above narrowed hand_off to.
    assert cast(HandOff, lv.hand_off) == "done" and not lv.handing_off
    assert lv.due(ready=True, owns=True, leader_id="L", is_leader=False)
    assert not lv.join_sent()  # no more hand-off joins


def test_a_hand_off_with_nothing_left_to_hand_over_leaves() -> None:
    lv = Leaving()
    lv.begin_hand_off(130.0)
    assert lv.due(ready=True, owns=False, leader_id="L", is_leader=False)


def test_a_hand_off_under_a_leader_that_does_not_withhold_becomes_a_plain_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="aiogroup.membership")
    lv = Leaving()
    lv.synced("L", frozenset({HAND_OFF_AWARE}))
    lv.begin_hand_off(130.0)
    assert not lv.due(ready=True, owns=True, leader_id="me", is_leader=True)  # we lead
    assert lv.due(ready=True, owns=True, leader_id="peer", is_leader=False)  # librdkafka's
    assert lv.hand_off == "" and "did not announce" in caplog.text


def test_who_announced_withholding() -> None:
    lv = Leaving()
    assert not lv.leader_withholds("L", is_leader=False)  # unknown
    lv.synced("L", frozenset({HAND_OFF_AWARE}))
    assert lv.aware_leader == "L" and not lv.leader_withholds("M", is_leader=False)
    lv.synced("M", frozenset())
    assert lv.aware_leader is None


GOOD: dict[str, Any] = {
    "cooperative": True,
    "static": False,
    "owns": True,
    "reset_pending": False,
    "member_id": "m1",
    "coordinator_known": True,
    "leader_withholds": True,
}


def test_may_hand_off_only_when_every_condition_holds() -> None:
    assert Leaving.may_hand_off(130.0, 100.0, **GOOD)
    assert not Leaving.may_hand_off(None, 100.0, **GOOD)
    assert not Leaving.may_hand_off(100.0, 100.0, **GOOD)
    for key, bad in [
        ("cooperative", False),
        ("static", True),
        ("owns", False),
        ("reset_pending", True),
        ("member_id", ""),
        ("coordinator_known", False),
        ("leader_withholds", False),
    ]:
        assert not Leaving.may_hand_off(130.0, 100.0, **{**GOOD, key: bad}), key


def test_the_leave() -> None:
    lv = Leaving()
    lv.begin_hand_off(130.0)
    lv.start(close=True, lost=False, reason="")
    assert not lv.waiting and lv.hand_off == ""  # a leave ends the waiting
    assert lv.request_reason() == "the consumer is closing"
    lv.phase = "leave"
    lv.finished()
    # cast: mypy would keep the "leave" set above.
    assert cast(LeavePhase, lv.phase) == "" and not lv.lost and lv.reason == ""
    lv.start(close=False, lost=True, reason="poll timeout")
    assert lv.request_reason() == "poll timeout" and lv.lost
    lv.start(close=False, lost=False, reason="")
    assert lv.request_reason() == "unsubscribed"
