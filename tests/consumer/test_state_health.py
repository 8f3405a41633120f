"""The consumer core's side of health: since when each partition has wanted records without
getting any, and why (a stalled partition), with ``now`` given."""

from __future__ import annotations

from aiogroup.consumer.state import ConsumerState, FetchConfig, FetchedPartition, FetchedResponse
from aiogroup.observability.health import Stall
from aiogroup.protocol.types import TopicPartition

from .batches import batch
from .test_state import PIPELINED, A, B, answer, ready


def empty(s: ConsumerState, now: float, hw: int, lso: int = -1, *, sent: float = -1.0) -> None:
    """A Fetch of A sent at ``sent`` (default ``now``) answered at ``now`` without records."""
    (plan,) = s.plan(now if sent < 0 else sent)
    part = FetchedPartition(A, 0, high_watermark=hw, last_stable_offset=lso, records=None)
    s.on_fetch_response(plan, FetchedResponse(0, 0, [part]), now)


def stalled(s: ConsumerState, now: float) -> dict[TopicPartition, tuple[float, str]]:
    return {st.partition: (st.since, st.reason) for st in s.stalls(now)}


def test_a_partition_answered_empty_while_the_log_has_records_waits_on() -> None:
    s = ready([A], config=PIPELINED)
    empty(s, 1.0, hw=50)  # nothing at 0 although the log reaches 50
    empty(s, 2.0, hw=50)
    assert stalled(s, 9.0) == {
        A: (1.0, "Fetch answered no records at offset 0 although the log has records up to 50")
    }
    (plan,) = s.plan(10.0)
    answer(s, plan, {A: batch([b"a"], 0)}, now=10.0)  # records: progress
    assert stalled(s, 11.0)[A][0] == 10.0


def test_a_caught_up_partition_is_not_waiting_for_anything_it_lacks() -> None:
    s = ready([A])
    empty(s, 1.0, hw=0)  # the end: nothing to get
    empty(s, 2.0, hw=0)
    ((since, _),) = stalled(s, 2.0).values()
    assert since == 2.0  # each answer at the end starts the wait over


def test_read_committed_measures_to_the_last_stable_offset() -> None:
    committed = FetchConfig(auto_offset_reset="earliest", isolation_level="read_committed")
    s = ready([A], config=committed)
    empty(s, 3.0, hw=10, lso=0, sent=1.0)  # an open transaction: nothing readable past 0
    assert stalled(s, 5.0)[A] == (3.0, "waiting for its next Fetch")
    s = ready([A])
    empty(s, 3.0, hw=10, lso=0, sent=1.0)  # read_uncommitted: 10 records it did not get
    assert stalled(s, 5.0)[A][0] == 1.0


def test_failing_fetches_say_why() -> None:
    s = ready([A, B])
    (plan,) = s.plan(1.0)
    s.on_fetch_failed(plan, 1.5, "Connection refused")
    assert {tp: why for tp, (_, why) in stalled(s, 2.0).items()} == {
        A: "a Fetch to node 1 failed: Connection refused",
        B: "a Fetch to node 1 failed: Connection refused",
    }
    assert {since for since, _ in stalled(s, 2.0).values()} == {1.0}  # since the wait began


def test_partition_errors_and_unknown_leaders_say_why() -> None:
    s = ready([A])
    (plan,) = s.plan(1.0)
    answer(s, plan, {A: 6}, now=1.0)  # NOT_LEADER_OR_FOLLOWER: ask metadata, back off
    assert stalled(s, 2.0)[A][1] == "Fetch answered NOT_LEADER_OR_FOLLOWER (error 6)"
    assert s.plan(2.0) == []  # its leader is not known now
    assert stalled(s, 2.0)[A][1] == "its leader is not known (waiting for metadata)"


def test_an_unanswered_fetch() -> None:
    s = ready([A])
    s.plan(1.0)
    assert stalled(s, 40.0) == {A: (1.0, "a Fetch to node 1 has not been answered")}


def test_paused_and_full_partitions_are_not_waiting() -> None:
    s = ready([A, B], config=FetchConfig(auto_offset_reset="earliest", max_buffered_responses=1))
    (plan,) = s.plan(1.0)
    answer(s, plan, {A: batch([b"a"], 0)}, now=1.0)
    s.pause([B])
    assert s.stalls(100.0) == []  # A holds a response unread, B is paused
    assert s.collect(10, 100.0)  # the application reads A
    assert [st.tp for st in s.take_moved(100.0)] == [A]  # records out: its wait starts over
    assert s.take_moved(100.0) == []
    assert stalled(s, 101.0)[A][0] == 100.0
    s.resume([B])
    assert stalled(s, 102.0)[B][0] == 102.0  # waiting from when it wanted records again


def test_an_incremental_session_leaves_out_partitions_with_no_news() -> None:
    s = ready([A, B])
    (p1,) = s.plan(1.0)
    parts = [FetchedPartition(tp, 0, high_watermark=0, records=None) for tp in (A, B)]
    s.on_fetch_response(p1, FetchedResponse(0, 7, parts), 1.0)  # a session is opened
    (p2,) = s.plan(5.0)
    assert not p2.session.full
    # Only B has news; A (caught up, the same watermarks) is left out of the answer.
    part_b = FetchedPartition(B, 0, high_watermark=3, records=None)
    s.on_fetch_response(p2, FetchedResponse(0, 7, [part_b]), 6.0)
    got = stalled(s, 6.0)
    assert got[A][0] == 6.0  # answered with nothing, at its end: progress
    assert got[B][0] == 1.0 and "up to 3" in got[B][1]


def test_stall_is_a_stall_type() -> None:
    s = ready([A])
    s.plan(0.0)
    assert all(isinstance(x, Stall) for x in s.stalls(1.0))
