"""Latency in the fetch plan (sans-I/O): nothing that arrives waits for a timer.

Every case plans at the same ``now`` the answer arrived: a Fetch that should leave "at once"
leaves in the very plan that follows the answer, never after ``fetch_max_wait_ms`` or a
backoff. (The live end-to-end proof, a record handed over while the application waits with a
``fetch_max_wait_ms`` of ten minutes, is in ``test_latency_brokers.py``.)
"""

from __future__ import annotations

from aiogroup.consumer.state import FetchConfig

from .batches import batch
from .test_state import A, B, C, answer, ready, values

LONG_POLL = FetchConfig(auto_offset_reset="earliest", fetch_max_wait_ms=600_000)


def test_the_next_fetch_leaves_as_soon_as_an_empty_answer_arrives() -> None:
    s = ready([A], config=LONG_POLL)
    (plan,) = s.plan(0.0)
    assert plan.max_wait_ms == 600_000 and plan.min_bytes == 1  # the broker answers on 1 byte
    assert answer(s, plan, {}, now=600.0) == 0  # the long poll ran out: nothing
    assert s.next_deadline(600.0) is None  # no backoff after an empty answer ...
    (again,) = s.plan(600.0)  # ... the next Fetch leaves in the same instant
    assert again.session.fetching[A].fetch_offset == 0


def test_a_partition_with_records_is_fetched_again_at_once_with_the_quiet_ones() -> None:
    s = ready([A, B, C], config=LONG_POLL)
    (plan,) = s.plan(0.0)
    assert answer(s, plan, {A: batch([b"a0"], 0), B: b"", C: b""}, now=1.0) == 1
    (again,) = s.plan(1.0)  # A has one response buffered: fetched again without waiting
    assert {tp: f.fetch_offset for tp, f in again.session.fetching.items()} == {A: 1, B: 0, C: 0}


def test_each_leader_is_fetched_on_its_own_answer() -> None:
    """A record on broker 2 never waits for broker 1's long poll (one Fetch per leader)."""
    s = ready([A, B], {A: 1, B: 2}, config=LONG_POLL)
    plans = {p.node_id: p for p in s.plan(0.0)}
    assert set(plans) == {1, 2}
    for t in (1.0, 2.0, 3.0):  # broker 2 answers with records, again and again
        assert answer(s, plans[2], {B: batch([b"b"], int(t) - 1)}, now=t) == 1
        s.collect(10, t)
        (plans[2],) = s.plan(t)  # broker 1 still holds its long poll: only 2 again, at once
        assert plans[2].node_id == 2
    assert answer(s, plans[1], {A: batch([b"a"], 0)}, now=4.0) == 1
    assert [p.node_id for p in s.plan(4.0)] == [1]


def test_a_partition_backing_off_delays_no_other() -> None:
    s = ready([A, B], config=LONG_POLL)
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: 6, B: batch([b"b0"], 0)}, now=1.0)  # A: NOT_LEADER_OR_FOLLOWER
    s.on_metadata({A: (1, 6), B: (1, 5)})
    (again,) = s.plan(1.0)  # B at once; A after retry_backoff_ms
    assert set(again.session.fetching) == {B}
    assert s.next_deadline(1.0) == 1.0 + LONG_POLL.retry_backoff_ms / 1000


def test_a_backoff_that_has_ended_is_no_deadline_any_more() -> None:
    """``retry_at`` stays set after the refetch; a deadline in the past made the driver wake
    every millisecond for the rest of the consumer's life."""
    s = ready([A, B], config=LONG_POLL)
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: 6, B: b""}, now=1.0)
    s.on_metadata({A: (1, 6), B: (1, 5)})
    (again,) = s.plan(1.0)
    answer(s, again, {B: b""}, now=1.05)
    (both,) = s.plan(1.2)  # A's backoff ended: fetched with B
    assert set(both.session.fetching) == {A, B}
    assert s.next_deadline(1.2) is None
    assert s.next_deadline(5.0) is None  # still nothing to wake up for


def test_reading_the_last_buffered_response_makes_the_partition_fetchable() -> None:
    """Two responses buffered hold a partition back; reading them frees it (the consumer
    wakes the fetcher on ``freed`` whether or not they held records for the application)."""
    s = ready([A], config=LONG_POLL)
    for offset in (0, 1):
        (plan,) = s.plan(float(offset))
        answer(s, plan, {A: batch([b"x"], offset)}, now=float(offset))
    assert s.plan(2.0) == []
    s.freed = False
    s.collect(10, 2.0)
    assert s.freed
    (plan,) = s.plan(2.0)
    assert plan.session.fetching[A].fetch_offset == 2


def test_a_partition_behind_waits_with_one_full_response_and_one_that_keeps_up_does_not() -> None:
    """Two responses per partition at most, the second only while the first is small (under
    half of ``max_partition_fetch_bytes``): memory holds one full response per partition behind,
    latency keeps a partition with a few records buffered in the long poll."""
    config = FetchConfig(
        auto_offset_reset="earliest", fetch_max_wait_ms=600_000, max_partition_fetch_bytes=4096
    )
    s = ready([A, B], config=config)
    (plan,) = s.plan(0.0)
    full = batch([b"x" * 2100], 0)  # over half of 4096
    assert 2 * len(full) >= 4096
    assert answer(s, plan, {A: full, B: batch([b"b0"], 0)}, now=1.0) == 2
    (again,) = s.plan(1.0)
    assert set(again.session.fetching) == {B}  # A is behind: it waits to be read
    assert answer(s, again, {B: batch([b"b1"], 1)}, now=2.0) == 1
    assert s.plan(2.0) == []  # B has two small responses buffered: the most it may have
    assert values(s.collect(10, 3.0, partitions=[A])) == {A: [b"x" * 2100]}  # A read ...
    (third,) = s.plan(3.0)  # ... and fetched again
    assert set(third.session.fetching) == {A}
