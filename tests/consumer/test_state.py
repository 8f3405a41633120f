"""The consumer's sans-I/O core: positions, fetch planning, the buffer, records out."""

from __future__ import annotations

import pytest

from aiogroup.consumer.errors import (
    CorruptRecordError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
    TopicAuthorizationFailedError,
)
from aiogroup.consumer.state import (
    ConsumerState,
    FetchConfig,
    FetchedPartition,
    FetchedResponse,
    FetchPlan,
)
from aiogroup.errors import ConfigurationError, LocalProtocolError
from aiogroup.protocol.types import TopicPartition

from .batches import batch, corrupt

A, B, C = (TopicPartition("t", i) for i in range(3))
X = TopicPartition("u", 0)
#: A partition fetched again while its answer is still buffered (a request in flight then).
PIPELINED = FetchConfig(auto_offset_reset="earliest", max_buffered_responses=2)


def ready(
    partitions: list[TopicPartition],
    leaders: dict[TopicPartition, int] | None = None,
    config: FetchConfig | None = None,
    committed: int | None = 0,
) -> ConsumerState:
    s = ConsumerState(config or FetchConfig(auto_offset_reset="earliest"))
    s.add(partitions)
    assert s.metadata_needed
    s.on_metadata({tp: ((leaders or {}).get(tp, 1), 5) for tp in partitions})
    assert not s.metadata_needed
    lookups = s.take_committed_lookups(0.0)
    assert lookups == sorted(partitions)
    s.on_committed({tp: committed for tp in partitions})
    return s


def answer(
    s: ConsumerState,
    plan: FetchPlan,
    parts: dict[TopicPartition, bytes | int],
    now: float = 0.0,
    session_id: int = 0,
) -> int:
    """Answer ``plan``: bytes are records, an int is an error code."""
    out = []
    for tp, value in parts.items():
        if isinstance(value, int):
            out.append(FetchedPartition(tp, value))
        else:
            out.append(
                FetchedPartition(tp, 0, high_watermark=100, last_stable_offset=100, records=value)
            )
    return s.on_fetch_response(plan, FetchedResponse(0, session_id, out), now)


def values(result: dict[TopicPartition, list]) -> dict[TopicPartition, list[bytes]]:  # type: ignore[type-arg]
    return {tp: [r.value for r in rs] for tp, rs in result.items()}


def test_one_request_per_leader_with_the_positions() -> None:
    s = ready([A, B, C], {A: 1, B: 2, C: 1}, committed=7)
    plans = {p.node_id: p for p in s.plan(0.0)}
    assert set(plans) == {1, 2}
    assert {tp: f.fetch_offset for tp, f in plans[1].session.to_send.items()} == {A: 7, C: 7}
    assert all(f.current_leader_epoch == 5 for f in plans[1].session.to_send.values())
    assert s.plan(0.0) == []  # one request per leader in flight


def test_records_flow_and_positions_move() -> None:
    s = ready([A, B])
    (plan,) = s.plan(0.0)
    assert answer(s, plan, {A: batch([b"a0", b"a1"], 0), B: batch([b"b0"], 0)}) == 2
    assert s.get(A).fetch_offset == 2 and s.position(A) == 0  # type: ignore[union-attr]
    got = values(s.collect(10, 0.0))
    assert got == {A: [b"a0", b"a1"], B: [b"b0"]}
    assert s.position(A) == 2 and s.position(B) == 1 and s.buffered_bytes == 0
    assert s.get(A).high_watermark == 100  # type: ignore[union-attr]
    assert s.offsets_to_commit() == {A: 2, B: 1}
    s.mark_committed({A: 2})
    assert s.offsets_to_commit() == {B: 1}


def test_prefetch_keeps_one_response_ahead_and_the_buffer_bound_holds() -> None:
    s = ready([A], config=FetchConfig(max_buffered_responses=2, fetch_max_bytes=10**6))
    (p1,) = s.plan(0.0)
    answer(s, p1, {A: batch([b"1"], 0)})
    (p2,) = s.plan(0.0)  # pipelined: fetched again before the first answer is read
    assert p2.session.to_send[A].fetch_offset == 1
    answer(s, p2, {A: batch([b"2"], 1)})
    assert s.plan(0.0) == []  # two responses buffered: wait for the application
    s.collect(1, 0.0)
    s.collect(1, 0.0)
    assert [p.session.to_send[A].fetch_offset for p in s.plan(0.0)] == [2]


def test_nothing_is_fetched_while_the_buffer_is_full() -> None:
    big = batch([b"x" * 2000], 0)
    s = ready([A, B], config=FetchConfig(fetch_max_bytes=len(big)))
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: big})
    assert s.buffered_bytes == len(big)
    assert s.plan(0.0) == []
    s.collect(10, 0.0)
    assert s.plan(0.0) != []


def test_paused_partitions_are_neither_fetched_nor_returned_but_keep_their_buffer() -> None:
    s = ready([A, B])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"a"], 0), B: batch([b"b"], 0)})
    s.pause([A])
    assert values(s.collect(10, 0.0)) == {B: [b"b"]}
    assert [set(p.session.to_send) for p in s.plan(0.0)] == [{B}]
    assert s.paused() == {A}
    s.resume([A])
    assert values(s.collect(10, 0.0)) == {A: [b"a"]}


def test_stop_drops_the_buffer_and_ignores_the_answer_in_flight() -> None:
    s = ready([A, B], config=PIPELINED)
    (p1,) = s.plan(0.0)
    answer(s, p1, {A: batch([b"a"], 0), B: batch([b"b"], 0)})
    (p2,) = s.plan(0.0)
    s.stop([A])  # KAFKA-14196: revocation under way
    assert values(s.collect(10, 0.0)) == {B: [b"b"]}
    answer(s, p2, {A: batch([b"a1"], 1), B: batch([b"b1"], 1)})
    assert values(s.collect(10, 0.0)) == {B: [b"b1"]}
    assert s.position(A) == 0  # kept for a commit in the revoke callback
    s.remove([A])
    assert s.position(A) is None and A not in s.assigned


def test_only_allowed_and_wanted_partitions_are_returned() -> None:
    s = ready([A, B, C])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"a"], 0), B: batch([b"b"], 0), C: batch([b"c"], 0)})
    assert values(s.collect(10, 0.0, allowed={A, B}, partitions={B, C})) == {B: [b"b"]}
    assert not s.has_records(allowed=set())
    assert values(s.collect(10, 0.0)) == {A: [b"a"], C: [b"c"]}


def test_max_records_across_partitions_and_fairness() -> None:
    s = ready([A, B])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"a%d" % i for i in range(4)], 0), B: batch([b"b0", b"b1"], 0)})
    seen: list[bytes] = []
    for _ in range(6):
        got = s.collect(1, 0.0)
        assert sum(map(len, got.values())) == 1
        seen.extend(r.value for rs in got.values() for r in rs)
    assert sorted(seen) == sorted([b"a0", b"a1", b"a2", b"a3", b"b0", b"b1"])
    assert s.collect(1, 0.0) == {}


def test_seek_drops_the_buffer_and_stale_answers() -> None:
    s = ready([A])
    (p1,) = s.plan(0.0)
    s.seek(A, 50)
    answer(s, p1, {A: batch([b"old"], 0)})
    assert s.collect(10, 0.0) == {}
    (p2,) = s.plan(0.0)
    assert p2.session.to_send[A].fetch_offset == 50
    answer(s, p2, {A: batch([b"new"], 50)})
    assert values(s.collect(10, 0.0)) == {A: [b"new"]} and s.position(A) == 51
    with pytest.raises(LocalProtocolError):
        s.seek(X, 0)
    with pytest.raises(ConfigurationError):
        s.seek(A, -1)


def test_committed_lookup_then_policy() -> None:
    s = ConsumerState(FetchConfig(auto_offset_reset="latest"))
    s.add([A, B])
    s.on_metadata({A: (1, 0), B: (2, 0)})
    assert s.take_committed_lookups(0.0) == [A, B]
    assert s.take_committed_lookups(0.0) == []  # in flight
    s.on_committed({A: 12, B: None})
    assert s.position(A) == 12 and s.position(B) is None
    assert s.take_resets(0.0) == {2: {B: -1}}
    assert s.take_resets(0.0) == {}
    s.on_reset_offsets({B: 40}, {}, 0.0)
    assert s.position(B) == 40 and s.offsets_to_commit() == {B: 40}  # A is committed at 12


def test_failed_lookups_are_retried_after_the_backoff() -> None:
    s = ConsumerState(FetchConfig(retry_backoff_ms=100))
    s.add([A])
    s.on_metadata({A: (1, 0)})
    s.take_committed_lookups(0.0)
    s.lookup_failed([A], 10.0)
    assert s.next_deadline() == pytest.approx(10.1)
    assert s.take_committed_lookups(10.05) == []
    assert s.take_committed_lookups(10.1) == [A]
    s.on_committed({A: None})
    assert s.take_resets(10.1) == {1: {A: -1}}
    s.on_reset_offsets({}, {A: 6}, 11.0)  # NOT_LEADER: ask metadata, retry later
    assert s.metadata_needed and s.next_deadline() == pytest.approx(11.1)
    s.on_metadata({A: (2, 1)})
    assert s.take_resets(11.05) == {}
    assert s.take_resets(11.2) == {2: {A: -1}}


def test_no_committed_offset_with_policy_none_raises_for_that_partition() -> None:
    s = ConsumerState(FetchConfig(auto_offset_reset="none"))
    s.add([A])
    s.on_metadata({A: (1, 0)})
    s.take_committed_lookups(0.0)
    s.on_committed({A: None})
    assert s.take_resets(0.0) == {}
    with pytest.raises(NoOffsetForPartitionError):
        s.collect(10, 0.0)
    s.seek(A, 3)  # the application decides
    assert s.collect(10, 0.0) == {} and s.plan(0.0) != []


def test_out_of_range_resets_by_policy_or_raises_with_none() -> None:
    s = ready([A], committed=500)
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: 1})
    assert s.position(A) is None and s.take_resets(0.0) == {1: {A: -2}}
    s = ready([A], config=FetchConfig(auto_offset_reset="none"), committed=500)
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: 1})
    with pytest.raises(OffsetOutOfRangeError) as info:
        s.collect(10, 0.0)
    assert info.value.offset == 500 and info.value.partition == A


@pytest.mark.parametrize("code", [3, 6, 74, 75])
def test_leader_errors_refresh_metadata_and_back_off(code: int) -> None:
    s = ready([A, B], {A: 1, B: 1}, config=PIPELINED)
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: code, B: batch([b"b"], 0)}, now=1.0)
    assert s.metadata_needed and s.leader(A) is None
    s.on_metadata({A: (2, 6), B: (1, 5)})
    (plan,) = s.plan(1.05)
    assert set(plan.session.to_send) == {B}
    plans = {p.node_id: p for p in s.plan(1.2)}
    assert set(plans) == {2} and plans[2].session.to_send[A].current_leader_epoch == 6


def test_transport_failure_backs_the_node_off() -> None:
    s = ready([A])
    (plan,) = s.plan(0.0)
    s.on_fetch_failed(plan, 5.0)
    assert s.plan(5.01) == [] and s.metadata_needed
    assert s.next_deadline() == pytest.approx(5.1)
    assert len(s.plan(5.2)) == 1


def test_topic_authorization_failure_is_raised() -> None:
    s = ready([A])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: 29})
    with pytest.raises(TopicAuthorizationFailedError):
        s.collect(10, 0.0)


def test_corrupt_batch_returns_records_before_it_raises_next_and_refetches() -> None:
    s = ready([A, B], config=FetchConfig(retry_backoff_ms=100))
    (plan,) = s.plan(0.0)
    bad = batch([b"a0"], 0) + corrupt(batch([b"a1", b"a2"], 1))
    answer(s, plan, {A: bad, B: batch([b"b0"], 0)})
    got: dict[TopicPartition, list[bytes]] = {}
    error = None
    for _ in range(3):
        try:
            for tp, rs in values(s.collect(10, 1.0)).items():
                got.setdefault(tp, []).extend(rs)
        except CorruptRecordError as exc:
            error = exc
    assert got == {A: [b"a0"], B: [b"b0"]}  # the others kept flowing
    assert error is not None and (error.partition, error.offset) == (A, 1)
    assert s.position(A) == 1
    # Refetched from the bad offset after the backoff; a good answer then flows.
    (plan,) = s.plan(1.05)
    assert set(plan.session.to_send) == {B}
    answer(s, plan, {B: b""})
    (plan,) = s.plan(1.2)
    assert plan.session.to_send[A].fetch_offset == 1
    answer(s, plan, {A: batch([b"a1", b"a2"], 1)})
    assert values(s.collect(10, 1.2)) == {A: [b"a1", b"a2"]}


def test_truncated_answer_blocks_fetching_until_it_is_read() -> None:
    s = ready([A])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"x" * 50], 0)[:40]})
    assert s.plan(0.0) == []
    with pytest.raises(CorruptRecordError, match="truncated"):
        s.collect(10, 0.0)
    assert len(s.plan(1.0)) == 1


def test_deserializer_error_keeps_the_position_and_raises_again() -> None:
    s = ready([A])
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"1", b"bad", b"3"], 0)})

    def value(raw: bytes | None) -> int:
        return int(raw or b"")

    got = s.collect(10, 0.0, value_deserializer=value)
    assert [r.value for r in got[A]] == [1]
    with pytest.raises(RecordDeserializationError) as info:
        s.collect(10, 0.0, value_deserializer=value)
    assert info.value.offset == 1 and s.position(A) == 1
    with pytest.raises(RecordDeserializationError):
        s.collect(10, 0.0, value_deserializer=value)
    s.seek(A, 2)  # skip it
    (plan,) = s.plan(0.0)
    answer(s, plan, {A: batch([b"3"], 2)})
    assert [r.value for r in s.collect(10, 0.0, value_deserializer=value)[A]] == [3]


def test_sessions_carry_over_requests() -> None:
    s = ready([A, B], config=PIPELINED)
    (p1,) = s.plan(0.0)
    assert p1.session.full
    answer(s, p1, {A: batch([b"a"], 0), B: b""}, session_id=9)
    (p2,) = s.plan(0.0)
    assert not p2.session.full and p2.session.session_id == 9
    assert set(p2.session.to_send) == {A}  # B unchanged: the session fetches it anyway
    assert set(p2.session.fetching) == {A, B}
    # An incremental answer omits B; B's data may come in any later answer.
    answer(s, p2, {A: batch([b"a1"], 1)}, session_id=9)
    assert values(s.collect(10, 0.0)) == {A: [b"a", b"a1"]}
    s.pause([B])
    (p3,) = s.plan(0.0)
    assert p3.session.forgotten == (B,)


def test_fetch_config_is_checked() -> None:
    with pytest.raises(ConfigurationError):
        FetchConfig(isolation_level="serializable")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        FetchConfig(auto_offset_reset="smallest")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        FetchConfig(fetch_max_bytes=0)
