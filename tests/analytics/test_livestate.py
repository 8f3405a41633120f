"""The live audit's per-group state (:class:`GroupLive`) without Spark: what one call of the
streaming job does with a micro-batch's events or with an event-time timeout, which brings none.
"""

from __future__ import annotations

from typing import Any

from aiogroup.tools.audit.livestate import GroupLive

TOLERANCE_S = 0.05


def _parts(member: str, type_: str, t: float, seq: int, gen: int, *, end: float | None = None,
           partitions: dict[str, list[int]] | None = None) -> dict[str, Any]:
    end = t + 0.01 if end is None else end
    return {"member": member, "type": type_, "ts": end, "seq": seq, "generation_id": gen,
            "protocol": "cooperative-sticky", "rebalance_protocol": "cooperative",
            "started": t, "ended": end, "partitions": partitions or {"orders": [0]}}


def _call(live: GroupLive, events: list[dict[str, Any]],
          watermark: float) -> tuple[GroupLive, list[dict[str, Any]], float | None]:
    """One call, as the job makes it: the state comes from and goes back to its JSON."""
    live = GroupLive.loads(live.group, live.dumps())
    rows, pending = live.step(events, watermark, TOLERANCE_S)
    return live, [body for kind, body in rows if kind == "alert"], pending


def test_a_timeout_confirms_an_episode_whose_intervals_both_closed() -> None:
    # A zombie: A keeps orders-0 after B got it, both release it later, all in one batch the
    # watermark has not reached; nothing of the group comes after.
    live = GroupLive("g")
    live, alerts, pending = _call(live, [
        _parts("A", "partitions_assigned", 100.0, 0, 1),
        _parts("B", "partitions_assigned", 101.0, 0, 2),
        _parts("A", "partitions_lost", 102.9, 1, 1, end=103.0),
        _parts("B", "partitions_revoked", 103.9, 1, 2, end=104.0),
    ], watermark=90.0)
    assert alerts == []
    assert live.owned == {}  # no owner left: the episode is between two closed intervals
    assert pending == 101.0 + TOLERANCE_S  # the timeout the job sets
    # the timeout fires (no events) once the watermark passed it
    live, alerts, pending = _call(live, [], watermark=110.0)
    assert [(a["start"], a["members"], a["ongoing"]) for a in alerts] == [(101.0, ["A", "B"],
                                                                           False)]
    assert pending is None
    assert live.closed == {}  # pruned: nothing later can overlap them
    live, alerts, pending = _call(live, [], watermark=120.0)
    assert (alerts, pending) == ([], None)


def test_a_timeout_before_the_episode_is_confirmed_sets_it_again() -> None:
    live = GroupLive("g")
    live, alerts, pending = _call(live, [
        _parts("A", "partitions_assigned", 100.0, 0, 1),
        _parts("B", "partitions_assigned", 101.0, 0, 2),
        _parts("A", "partitions_revoked", 102.9, 1, 1, end=103.0),
        {"member": "B", "type": "offsets_committed", "ts": 103.5, "seq": 1},
    ], watermark=90.0)
    assert (alerts, pending) == ([], 101.0 + TOLERANCE_S)
    # a timeout at a watermark that reaches the episode's start but not past the tolerance
    live, alerts, pending = _call(live, [], watermark=101.0 + TOLERANCE_S / 2)
    assert (alerts, pending) == ([], 101.0 + TOLERANCE_S)
    live, alerts, _ = _call(live, [], watermark=101.0 + 2 * TOLERANCE_S)
    assert [a["start"] for a in alerts] == [101.0]


def test_a_release_within_the_watermark_removes_the_apparent_overlap() -> None:
    # B's assignment and a later event of A's come before A's release, which ended before B's
    # start: an overlap on what was seen, never confirmed, gone when the release arrives.
    live = GroupLive("g")
    live, alerts, _ = _call(live, [_parts("A", "partitions_assigned", 100.0, 0, 1)], 90.0)
    live, alerts, pending = _call(live, [
        _parts("B", "partitions_assigned", 101.0, 0, 2),
        {"member": "A", "type": "offsets_committed", "ts": 101.5, "seq": 2},
        {"member": "B", "type": "offsets_committed", "ts": 101.6, "seq": 1},
    ], watermark=91.0)
    assert (alerts, pending) == ([], 101.0 + TOLERANCE_S)
    live, alerts, pending = _call(live, [_parts("A", "partitions_revoked", 100.98, 1, 1)], 91.6)
    assert (alerts, pending) == ([], None)
    live, alerts, _ = _call(live, [{"member": "B", "type": "offsets_committed", "ts": 120.0,
                                    "seq": 2}], 91.6)
    live, alerts, _ = _call(live, [], watermark=110.0)
    assert alerts == []
    assert [o[2] for o in live.status(110.0)["open"]] == ["B"]
