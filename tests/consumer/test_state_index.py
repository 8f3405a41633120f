"""The core's bookkeeping of which partitions to look at (issue 29: 1,000 partitions).

``plan()`` looks only at the partitions a change may have made fetchable, ``collect()`` and
``has_records()`` only at those holding records or an error. These tests drive a core through
random sequences of what happens to a consumer (answers, reads, pause/resume, seek, reset,
stop/add, remove, metadata) and check after every step that it plans exactly what a walk over
every partition says is fetchable, and that it has records exactly when some partition does.
"""

from __future__ import annotations

import contextlib
import random

import pytest

from aiogroup.consumer.state import (
    ConsumerState,
    FetchConfig,
    FetchedResponse,
    FetchPlan,
    PartitionState,
)
from aiogroup.errors import AiogroupError
from aiogroup.protocol.types import TopicPartition

from .batches import batch
from .test_state import answer, ready

PARTS = [TopicPartition("t", i) for i in range(8)]
LEADERS = {tp: 1 + tp.partition % 2 for tp in PARTS}
VIEW = {tp: (node, 5) for tp, node in LEADERS.items()}


def fetchable(
    s: ConsumerState, in_flight: set[int], node_retry: dict[int, float], now: float
) -> set[TopicPartition]:
    """Every partition a plan at ``now`` must fetch, by the rules, walking all of them."""
    if s.buffered_bytes >= s.config.fetch_max_bytes:
        return set()
    out = set()
    for tp in s.assigned:
        st = s.get(tp)
        assert st is not None
        leader = s.leader(tp)
        if (
            st.reset is None
            and st.fetch_offset is not None
            and not st.paused
            and not st.stopped
            and not st.blocked
            and st.error is None
            and st.fetching is None
            and s.has_room(st)
            and (st.retry_at is None or now >= st.retry_at)
            and leader is not None
            and leader[0] not in in_flight
            and node_retry.get(leader[0], now) <= now
        ):
            out.add(tp)
    return out


def has_records(s: ConsumerState, allowed: set[TopicPartition] | None) -> bool:
    if s.has_records(set()):  # an error held back by the last collect (nothing else passes)
        return True
    for tp in s.assigned:
        st = s.get(tp)
        assert st is not None
        if st.stopped or st.paused or (allowed is not None and tp not in allowed):
            continue
        if st.buffer or st.error is not None:
            return True
    return False


def step(
    s: ConsumerState,
    rng: random.Random,
    plans: dict[int, FetchPlan],
    node_retry: dict[int, float],
    now: float,
) -> None:
    """One random thing happening to ``s``."""
    tp = rng.choice(PARTS)
    st = s.get(tp)
    kind = rng.randrange(12)
    if kind <= 2 and plans:  # a Fetch answered: records for some of its partitions
        plan = plans.pop(rng.choice(sorted(plans)))
        parts: dict[TopicPartition, bytes | int] = {}
        for p, sent in plan.session.fetching.items():
            roll = rng.random()
            if roll < 0.6:
                n = rng.randrange(1, 4)
                parts[p] = batch([b"v"] * n, sent.fetch_offset)
            elif roll < 0.65:
                parts[p] = 6  # NOT_LEADER_OR_FOLLOWER: a backoff and metadata
            elif roll < 0.68:
                parts[p] = 29  # TOPIC_AUTHORIZATION_FAILED: an error for the application
            elif roll < 0.71:
                parts[p] = 1  # OFFSET_OUT_OF_RANGE: auto_offset_reset
        answer(s, plan, parts, now)
    elif kind == 3:
        with contextlib.suppress(AiogroupError):  # a partition's error, raised
            s.collect(rng.choice([1, 2, 5, 100]), now, allowed=set(s.assigned))
    elif kind == 4 and st is not None and not st.stopped:
        s.pause([tp])
    elif kind == 5:
        s.resume([tp])
    elif kind == 6 and st is not None and not st.stopped:
        s.seek(tp, rng.randrange(0, 20))
    elif kind == 7 and st is not None:
        if st.stopped:
            s.add([tp])
            s.on_metadata(VIEW)
            lookups = s.take_committed_lookups(now)
            s.on_committed({p: rng.randrange(0, 5) for p in lookups})
        else:
            s.stop([tp])
    elif kind == 8 and st is None:
        s.add([tp])
        s.on_committed({p: 0 for p in s.take_committed_lookups(now)})
    elif kind == 8:
        s.remove([tp])
    elif kind == 9:  # leaders move, or are not known for a while
        s.on_metadata(
            {p: (rng.randrange(1, 4), 5) for p in PARTS if rng.random() < 0.9}
            if rng.random() < 0.5
            else VIEW
        )
    elif kind == 11 and st is not None and not st.stopped:
        s.request_reset(tp, rng.choice(["earliest", "latest", "committed", 1_000]))
    elif kind == 10 and plans:  # a Fetch lost
        plan = plans.pop(rng.choice(sorted(plans)))
        s.on_fetch_failed(plan, now, "lost")
        node_retry[plan.node_id] = now + s.config.retry_backoff_ms / 1000


def positions(
    s: ConsumerState, rng: random.Random, node_retry: dict[int, float], now: float
) -> None:
    """The driver's step before its plan: lookups, resets and its next deadline, each checked
    against a walk over every partition, then answered (some with errors)."""
    states = [st for tp in s.assigned if (st := s.get(tp)) is not None]

    def free(st: PartitionState) -> bool:
        waiting = st.retry_at is not None and now < st.retry_at
        return not st.lookup_in_flight and not st.stopped and not waiting

    times = [st.retry_at for st in states if st.retry_at is not None and st.retry_at > now]
    times += [t for t in node_retry.values() if t > now]
    assert s.next_deadline(now) == (min(times) if times else None)
    lookups = sorted(st.tp for st in states if st.reset == "committed" and free(st))
    assert s.take_committed_lookups(now) == lookups
    found = {tp: rng.choice([None, 0, 3]) for tp in lookups if rng.random() < 0.8}
    s.on_committed(found)
    s.lookup_failed([tp for tp in lookups if tp not in found], now)
    resets = {
        st.tp
        for st in states
        if st.reset not in (None, "committed", "none") and free(st) and s.leader(st.tp)
    }
    asked = {tp for per_node in s.take_resets(now).values() for tp in per_node}
    assert asked == resets
    answered = {tp: rng.randrange(0, 9) for tp in asked if rng.random() < 0.8}
    s.on_reset_offsets(answered, {tp: 6 for tp in asked if tp not in answered}, now)


@pytest.mark.parametrize("seed", range(40))
def test_plans_and_records_match_a_walk_over_every_partition(seed: int) -> None:
    rng = random.Random(seed)
    config = FetchConfig(
        auto_offset_reset="earliest",
        retry_backoff_ms=rng.choice([0, 5]),
        fetch_max_bytes=rng.choice([50 << 20, 300]),
        max_partition_fetch_bytes=rng.choice([1 << 20, 200]),
    )
    s = ready(PARTS, LEADERS, config)
    plans: dict[int, FetchPlan] = {}
    node_retry: dict[int, float] = {}
    now = 0.0
    for _ in range(400):
        now += rng.choice([0.0, 0.001, 0.01])
        step(s, rng, plans, node_retry, now)
        allowed = set(rng.sample(PARTS, rng.randrange(len(PARTS) + 1)))
        assert s.has_records(allowed) == has_records(s, allowed)
        assert s.has_records() == has_records(s, None)
        positions(s, rng, node_retry, now)
        expected = fetchable(s, set(plans), node_retry, now)
        for plan in s.plan(now):
            assert plan.node_id not in plans
            plans[plan.node_id] = plan
            got = set(plan.session.fetching)
            assert got <= expected, (seed, got - expected)
            expected -= got
        assert not expected, (seed, expected)  # fetchable, not fetched: starved


def refill(s: ConsumerState, plan: FetchPlan, records: int = 10) -> None:
    answer(
        s,
        plan,
        {tp: batch([b"v"] * records, f.fetch_offset) for tp, f in plan.session.fetching.items()},
    )


def test_reads_go_round_robin_over_the_partitions_with_records() -> None:
    s = ready(PARTS[:4])
    (plan,) = s.plan(0.0)
    refill(s, plan, 250)
    seen = []
    for _ in range(8):  # a partition read and not finished goes to the back of the line
        (tp,) = s.collect(100, 0.0)
        seen.append(tp)
    assert sorted(seen[:4]) == PARTS[:4]
    assert seen[4:] == seen[:4]
    # 50 left in each: one call reads two partitions, in turn.
    assert list(s.collect(100, 0.0)) == seen[:2]
    assert list(s.collect(100, 0.0)) == seen[2:4]
    assert s.collect(100, 0.0) == {}  # finds the ends of the last batches
    assert not s.has_records()


def test_a_partition_refilled_waits_its_turn_and_none_starves() -> None:
    config = FetchConfig(auto_offset_reset="earliest", max_buffered_responses=1)
    s = ready(PARTS[:3], config=config)
    (plan,) = s.plan(0.0)
    refill(s, plan, 64)
    got = s.collect(100, 0.0)  # the first in line read to its end, 36 of the second
    a, b = got
    assert [len(got[a]), len(got[b])] == [64, 36]
    (c,) = set(PARTS[:3]) - {a, b}
    (plan,) = s.plan(0.0)
    assert set(plan.session.fetching) == {a}  # only a has room for more
    refill(s, plan, 64)  # a again: behind c (not read yet) and b (read last)
    got = s.collect(100, 0.0)
    assert [(tp, len(rs)) for tp, rs in got.items()] == [(c, 64), (b, 28), (a, 8)]


def test_paused_and_stopped_partitions_keep_or_lose_their_records() -> None:
    a, b = PARTS[:2]
    s = ready([a, b])
    (plan,) = s.plan(0.0)
    refill(s, plan, 3)
    s.pause([a])
    assert s.has_records() and not s.has_records({a})
    assert list(s.collect(100, 0.0)) == [b]
    assert not s.has_records()
    s.resume([a])
    assert s.has_records({a})
    s.stop([a])  # being revoked: its records are dropped
    assert not s.has_records()
    s.add([a])
    assert not s.has_records()
    s.on_committed({tp: 0 for tp in s.take_committed_lookups(0.0)})
    (plan,) = s.plan(0.0)
    assert set(plan.session.fetching) == {a, b}  # b was read to its end, a is back
    refill(s, plan, 2)
    s.seek(b, 0)  # a seek drops b's records
    assert s.has_records({a}) and not s.has_records({b})
    s.remove([a])
    assert not s.has_records()
    assert s.collect(100, 0.0) == {}


def test_an_empty_answer_still_lets_every_partition_be_fetched_again() -> None:
    s = ready(PARTS)
    plans = s.plan(0.0)
    for plan in plans:
        s.on_fetch_response(plan, FetchedResponse(0, 0, []), 0.0)
    assert {tp for p in s.plan(0.0) for tp in p.session.fetching} == set(PARTS)


def test_an_error_outlives_a_stop_and_add_as_before() -> None:
    a, b = PARTS[:2]
    s = ready([a, b])
    (plan,) = s.plan(0.0)
    answer(s, plan, {a: 29})  # TOPIC_AUTHORIZATION_FAILED: for the application
    assert s.has_records({a}) and not s.has_records({b})
    s.stop([a])
    assert not s.has_records()
    s.add([a])
    assert s.has_records({a}) == has_records(s, {a}) is True


def test_a_partition_read_to_its_last_record_is_fetched_again_at_once() -> None:
    config = FetchConfig(auto_offset_reset="earliest", max_buffered_responses=1)
    s = ready(PARTS[:1], config=config)
    (plan,) = s.plan(0.0)
    tp = PARTS[0]
    answer(s, plan, {tp: batch([b"v"] * 60, 0) + batch([b"v"] * 40, 60)})
    assert [len(rs) for rs in s.collect(100, 0.0).values()] == [100]
    # Its answer is known read to the end by this call, not by the next one (issue 29: a
    # partition read to exactly max_records held its bytes and its room until then).
    assert not s.has_records()
    assert s.buffered_bytes == 0
    (plan,) = s.plan(0.0)
    assert plan.session.fetching[tp].fetch_offset == 100
