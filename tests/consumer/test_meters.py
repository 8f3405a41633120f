"""The consumer's metering over its sans-I/O core: current lag from the last Fetch answer, and
lag, lead and counts handed to the registry when the records are handed out."""

from __future__ import annotations

from aiogroup.config import IsolationLevel
from aiogroup.consumer.meters import ConsumerMeters
from aiogroup.consumer.state import FetchConfig, FetchedPartition, FetchedResponse
from aiogroup.observability.registry import MetricsRegistry

from .batches import batch
from .test_state import A, B, ready


def test_current_lag_is_unknown_until_a_fetch_answers_then_end_minus_position() -> None:
    levels: list[tuple[IsolationLevel, int]] = [("read_uncommitted", 100), ("read_committed", 90)]
    for isolation, end in levels:
        s = ready([A], config=FetchConfig(auto_offset_reset="earliest", isolation_level=isolation))
        meters = ConsumerMeters(s, MetricsRegistry())
        assert meters.current_lag(A) is None  # no high watermark yet
        assert meters.current_lag(B) is None  # not ours
        (plan,) = s.plan(0.0)
        part = FetchedPartition(
            A, 0, high_watermark=100, last_stable_offset=90, log_start_offset=0,
            records=batch([b"a", b"b", b"c"], 0),
        )  # fmt: skip
        s.on_fetch_response(plan, FetchedResponse(0, 0, [part]), 0.0)
        assert meters.current_lag(A) == end  # position 0
        s.collect(2, 0.0)
        assert meters.current_lag(A) == end - 2


def test_flush_records_what_was_handed_out_since_the_last() -> None:
    s = ready([A, B], committed=10)
    registry = MetricsRegistry()
    meters = ConsumerMeters(s, registry)
    (plan,) = s.plan(0.0)
    parts = [
        FetchedPartition(A, 0, high_watermark=50, log_start_offset=4,
                         records=batch([b"a"] * 5, 10)),
        FetchedPartition(B, 0, high_watermark=12, records=batch([b"b"] * 2, 10)),
    ]  # fmt: skip
    s.on_fetch_response(plan, FetchedResponse(0, 0, parts), 0.0)
    got = s.collect(3, 1.0, partitions=[A])
    assert len(got[A]) == 3
    meters.flush(3, 1.0)
    per = registry.partition_metrics(1.0)
    assert list(per) == [A]  # B was not read
    assert per[A]["records-lag"] == 50 - 13 and per[A]["records-lead"] == 13 - 4
    assert registry.fetch_manager_metrics(1.0)["records-consumed-total"] == 3
    meters.flush(0, 2.0)  # nothing read since: nothing recorded
    assert registry.partitions[A].lag.count == 1
    s.collect(10, 3.0)
    meters.flush(4, 3.0)
    per = registry.partition_metrics(3.0)
    assert per[A]["records-lag"] == 35 and per[A]["records-lag-max"] == 37
    assert per[B]["records-lag"] == 0 and per[B]["records-lead"] != per[B]["records-lead"]  # nan
    assert registry.fetch_manager_metrics(3.0)["records-consumed-total"] == 7
    meters.forget([A])
    assert list(registry.partition_metrics(3.0)) == [B]
