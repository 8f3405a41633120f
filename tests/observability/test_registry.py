"""The registry every metric is read from: Java's names and units, recorded by the drivers'
observations (no clock: ``now`` is given)."""

from __future__ import annotations

import math

import pytest

from aiogroup.observability.registry import MetricsRegistry, PollTimes
from aiogroup.protocol.types import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)


def test_commit_metrics() -> None:
    r = MetricsRegistry(started_at=0.0)
    before = r.coordinator_metrics(0.0)
    assert math.isnan(before["commit-latency-avg"]) and before["commit-total"] == 0.0
    r.record_commit(0.010, 1.0)
    r.record_commit(0.030, 2.0)
    m = r.coordinator_metrics(2.0)
    assert m["commit-latency-avg"] == pytest.approx(20.0)  # ms
    assert m["commit-latency-max"] == pytest.approx(30.0)
    assert m["commit-total"] == 2.0
    assert m["commit-rate"] == pytest.approx(2 / 32.0)  # per second, Java's window rule
    r.observe("rebalance-latency", 0.5, 3.0)  # KIP-429 observations share the registry
    assert r.coordinator_metrics(3.0)["rebalance-latency-avg"] == 500.0


def test_fetch_metrics() -> None:
    r = MetricsRegistry()
    r.record_fetch(0.004, 1000, 1.0)
    r.record_fetch(0.008, 3000, 2.0)
    r.record_consumed(500, 2.0)
    r.record_consumed(0, 2.0)  # an empty batch is no record
    m = r.fetch_manager_metrics(2.0)
    assert m["fetch-latency-avg"] == pytest.approx(6.0)
    assert m["fetch-latency-max"] == pytest.approx(8.0)
    assert m["fetch-total"] == 2.0
    assert m["fetch-rate"] == pytest.approx(2 / 31.0)  # first sample began at 1 s
    assert m["fetch-size-avg"] == 2000.0 and m["fetch-size-max"] == 3000.0
    assert m["bytes-consumed-total"] == 4000.0
    assert m["bytes-consumed-rate"] == pytest.approx(4000 / 31.0)
    assert m["records-consumed-total"] == 500.0
    assert m["records-consumed-rate"] == pytest.approx(500 / 30.0)
    assert math.isnan(m["records-lag-max"]) and math.isnan(m["records-lead-min"])


def test_lag_and_lead_per_partition_and_for_the_client() -> None:
    r = MetricsRegistry()
    r.record_position(A, 60, 40, 60, 1.0)
    r.record_position(A, 90, 10, 90, 2.0)
    r.record_position(B, 5, 95, None, 2.0)  # the log start not known yet: no lead
    m = r.fetch_manager_metrics(2.0)
    assert m["records-lag-max"] == 95.0 and m["records-lead-min"] == 60.0
    parts = r.partition_metrics(2.0)
    assert parts[A] == {
        "records-lag": 10.0,
        "records-lag-avg": 25.0,
        "records-lag-max": 40.0,
        "records-lead": 90.0,
        "records-lead-avg": 75.0,
        "records-lead-min": 60.0,
    }
    assert parts[B]["records-lag"] == 95.0 and math.isnan(parts[B]["records-lead"])
    assert r.partitions[A].position == 90
    r.forget([A])  # revoked: Java removes the partition's sensors
    assert list(r.partition_metrics(2.0)) == [B]


def test_poll_metrics() -> None:
    r = MetricsRegistry()
    assert r.consumer_metrics(0.0)["last-poll-seconds-ago"] == -1.0
    polls = PollTimes()
    polls.begin(10.0)  # the first call: 0 s since the previous one
    polls.end(10.5)  # inside the whole time since it began: ratio 1
    polls.begin(11.0)  # 1 s after the previous began
    polls.end(11.25)  # 0.25 s inside, of 1.25 s since the previous call began: 0.2
    polls.begin(14.0)  # 3 s after: still inside when measured
    r.record_polls(polls, 14.0)
    assert polls.calls == 0 and polls.ends == 0  # handed over, cleared
    m = r.consumer_metrics(16.7)
    assert m["last-poll-seconds-ago"] == 2.0  # whole seconds, as Java
    assert m["time-between-poll-avg"] == pytest.approx((0 + 1000 + 3000) / 3)
    assert m["time-between-poll-max"] == pytest.approx(3000.0)
    assert m["poll-idle-ratio-avg"] == pytest.approx((1.0 + 0.2) / 2)


def test_a_call_that_took_no_time_records_no_ratio() -> None:
    polls = PollTimes()
    polls.begin(1.0)
    polls.end(1.0)  # Java would record 0/0
    assert polls.ends == 0 and polls.calls == 1
    PollTimes().end(1.0)  # an end without a beginning is nothing
