"""Java's sampled statistics (2 samples of 30 s): each value here is worked out by hand from
the rules of Kafka's SampledStat, Avg, Max, Min and Rate, so a wrong window, purge or rate
divisor changes it."""

from __future__ import annotations

import math

import pytest

from aiogroup.observability.stats import SAMPLES, WINDOW_S, Sensor


def test_java_defaults() -> None:
    assert (WINDOW_S, SAMPLES) == (30.0, 2)  # metrics.sample.window.ms, metrics.num.samples


def test_nothing_recorded() -> None:
    s = Sensor()
    assert math.isnan(s.avg(5.0)) and math.isnan(s.max(5.0)) and math.isnan(s.min(5.0))
    assert s.rate(5.0) == 0.0 and s.count_rate(5.0) == 0.0
    assert s.total == 0.0 and s.count == 0 and math.isnan(s.last)


def test_one_window() -> None:
    s = Sensor()
    s.record(10.0, 0.0)
    s.record(20.0, 1.0)
    assert s.avg(2.0) == 15.0
    assert s.max(2.0) == 20.0 and s.min(2.0) == 10.0
    # Rate.windowSize: 2 s elapsed, no whole window yet, so one window more: 32 s.
    assert s.rate(2.0) == pytest.approx(30.0 / 32.0)
    assert s.count_rate(2.0) == pytest.approx(2.0 / 32.0)
    assert (s.total, s.count, s.last) == (30.0, 2, 20.0)


def test_rate_of_the_first_window_counts_one_window_more() -> None:
    # Kafka's own example (Rate.java): windows of 1 s, 2 samples, one event, measured 20 ms on.
    s = Sensor(window_s=1.0, samples=2)
    s.record(1.0, 0.0)
    assert s.count_rate(0.02) == pytest.approx(1 / 1.02)


def test_a_value_a_window_later_starts_the_next_sample() -> None:
    s = Sensor()
    s.record(10.0, 0.0)
    s.record(20.0, 1.0)
    s.record(40.0, 31.0)
    assert s.avg(31.0) == pytest.approx(70.0 / 3)
    assert s.max(31.0) == 40.0
    # 31 s since the oldest sample began: a whole window, so no padding.
    assert s.rate(31.0) == pytest.approx(70.0 / 31.0)


def test_samples_without_a_value_for_two_windows_stop_counting() -> None:
    s = Sensor()
    s.record(10.0, 0.0)
    s.record(20.0, 1.0)
    s.record(40.0, 31.0)
    # At 61 s the first sample's last value (at 1 s) is 60 s old: it no longer counts.
    assert s.avg(61.0) == 40.0 and s.min(61.0) == 40.0
    # Reset at 61 s, it starts there; the other began at 31 s: 30 s, a whole window.
    assert s.rate(61.0) == pytest.approx(40.0 / 30.0)
    # At 91 s nothing recent is left: nan, and a rate of 0; totals stay.
    assert math.isnan(s.avg(91.0)) and math.isnan(s.max(91.0))
    assert s.rate(91.0) == 0.0 and s.total == 70.0 and s.count == 3


def test_the_ring_reuses_its_oldest_sample() -> None:
    s = Sensor()
    for t, v in ((0.0, 1.0), (30.0, 2.0), (60.0, 3.0), (90.0, 4.0)):
        s.record(v, t)
    # Three samples at most (2 + 1): the one of 0 s was reused at 90 s; the one of 30 s is
    # 60 s old at 90 s.
    assert s.avg(90.0) == pytest.approx((3.0 + 4.0) / 2)
    assert s.max(90.0) == 4.0 and s.min(90.0) == 3.0


def test_record_many_is_recording_each() -> None:
    one, many = Sensor(), Sensor()
    for v in (3.0, 9.0, 6.0):
        one.record(v, 5.0)
    many.record_many(3, 18.0, 9.0, 5.0, low=3.0)
    for now in (5.0, 40.0):
        assert many.avg(now) == one.avg(now) and many.max(now) == one.max(now)
        assert many.min(now) == one.min(now) and many.rate(now) == one.rate(now)
    assert (many.total, many.count) == (one.total, one.count)
    many.record_many(0, 0.0, 0.0, 6.0)  # nothing: no sample, no count
    assert many.count == 3


def test_bad_windows_are_refused() -> None:
    with pytest.raises(ValueError):
        Sensor(window_s=0)
    with pytest.raises(ValueError):
        Sensor(samples=0)
