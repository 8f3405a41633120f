"""KIP-429 rebalance metrics, with Java's names and semantics, through a tiny pluggable sink.

The membership machine and the listener runner *observe* raw facts (a rebalance took 0.42 s, a
rebalance failed, the revoked callback took 3 ms) on a :class:`MetricsSink`, passing the time
in (sans-I/O: nothing here reads a clock). :class:`KIP429Metrics` is the in-memory sink that
turns them into the metrics Java's consumer reports (``consumer-coordinator-metrics``):

==================================  =========================================================
``rebalance-latency-avg/max``       ms per successful rebalance (callbacks included)
``rebalance-latency-total``         ms spent in successful rebalances
``rebalance-total``                 successful rebalances
``rebalance-rate-per-hour``         successful rebalances per hour (sliding window)
``failed-rebalance-total``          failed rebalances (a JoinGroup or SyncGroup error)
``failed-rebalance-rate-per-hour``  failed rebalances per hour (sliding window)
``last-rebalance-seconds-ago``      seconds since the last successful rebalance, -1 if none
``partition-revoked-latency-*``     ms per on_partitions_revoked call (avg, max)
``partition-assigned-latency-*``    ms per on_partitions_assigned call (avg, max)
``partition-lost-latency-*``        ms per on_partitions_lost call (avg, max)
==================================  =========================================================

Averages and maxima with no observation are ``nan``, as in Java. A running
:class:`~aiogroup.client.GroupMember` keeps one of these itself: ``member.metrics`` is the
snapshot (plus ``assigned-partitions``), and :mod:`aiogroup.observability.exporters` publishes it to
Prometheus or OpenTelemetry. To send the raw observations elsewhere (statsd, ...), pass your
own :class:`MetricsSink` as ``GroupMember(..., metrics=sink)``: it receives every observation
too.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import Protocol, runtime_checkable

__all__ = [
    "FAILED_REBALANCE",
    "METRICS_GROUP",
    "PARTITIONS_ASSIGNED_LATENCY",
    "PARTITIONS_LOST_LATENCY",
    "PARTITIONS_REVOKED_LATENCY",
    "PARTITION_ASSIGNED_LATENCY",
    "PARTITION_LOST_LATENCY",
    "PARTITION_REVOKED_LATENCY",
    "REBALANCE_LATENCY",
    "KIP429Metrics",
    "MetricsSink",
    "MetricsSource",
    "NullMetrics",
    "TeeMetrics",
]

#: Java's metric group for these metrics (tag ``client-id``).
METRICS_GROUP = "consumer-coordinator-metrics"

#: Observation: a successful rebalance, value = its duration in seconds.
REBALANCE_LATENCY = "rebalance-latency"
#: Observation: a failed rebalance (value ignored).
FAILED_REBALANCE = "failed-rebalance"
#: Observations: one callback call, value = its duration in seconds (Java's sensor names).
PARTITION_REVOKED_LATENCY = "partition-revoked-latency"
PARTITION_ASSIGNED_LATENCY = "partition-assigned-latency"
PARTITION_LOST_LATENCY = "partition-lost-latency"
# The names these had before they followed Java's (which says "partition", singular).
PARTITIONS_REVOKED_LATENCY = PARTITION_REVOKED_LATENCY
PARTITIONS_ASSIGNED_LATENCY = PARTITION_ASSIGNED_LATENCY
PARTITIONS_LOST_LATENCY = PARTITION_LOST_LATENCY

_OBSERVATIONS = frozenset(
    {
        REBALANCE_LATENCY,
        FAILED_REBALANCE,
        PARTITION_REVOKED_LATENCY,
        PARTITION_ASSIGNED_LATENCY,
        PARTITION_LOST_LATENCY,
    }
)


@runtime_checkable
class MetricsSink(Protocol):
    """Receives raw observations; ``now`` is the caller's monotonic time in seconds."""

    def observe(self, name: str, value: float, now: float) -> None: ...


class NullMetrics:
    """A sink that drops everything."""

    def observe(self, name: str, value: float, now: float) -> None:
        return None


@runtime_checkable
class MetricsSource(Protocol):
    """What the exporters read: a :class:`~aiogroup.client.GroupMember` is one."""

    @property
    def metrics(self) -> dict[str, float]: ...

    @property
    def group_id(self) -> str | None: ...  # None: a consumer without a group (assign only)

    @property
    def client_id(self) -> str: ...


class TeeMetrics:
    """Passes every observation to each of ``sinks``, in order.

    A sink that raises is logged (with its traceback) and skipped: one faulty exporter must not
    break the member that observes, nor keep the other sinks from their observation.
    """

    def __init__(self, *sinks: MetricsSink) -> None:
        self.sinks = sinks

    def observe(self, name: str, value: float, now: float) -> None:
        for sink in self.sinks:
            try:
                sink.observe(name, value, now)
            except Exception:
                logging.getLogger("aiogroup.observability.metrics").exception(
                    "metrics sink %r failed on %s", sink, name
                )


class _Stat:
    __slots__ = ("count", "max", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.max = -math.inf

    def record(self, value: float) -> None:
        self.count += 1
        self.total += value
        self.max = max(self.max, value)

    @property
    def avg(self) -> float:
        return self.total / self.count if self.count else math.nan

    @property
    def maximum(self) -> float:
        return self.max if self.count else math.nan


class KIP429Metrics:
    """In-memory sink computing Java's KIP-429 consumer metrics.

    ``window`` is the span (seconds) of the per-hour rates. The elapsed time a rate divides by
    is at least ``min_elapsed`` seconds (Java's default sample window is 30 s), so one early
    rebalance does not read as thousands per hour.
    """

    def __init__(
        self, *, started_at: float | None = None, window: float = 3600.0, min_elapsed: float = 30.0
    ) -> None:
        if window <= 0 or min_elapsed <= 0:
            raise ValueError("window and min_elapsed must be positive")
        self._started_at = started_at
        self._window = window
        self._min_elapsed = min_elapsed
        self._stats = {name: _Stat() for name in _OBSERVATIONS}
        self._ok_times: deque[float] = deque()
        self._failed_times: deque[float] = deque()
        self._last_rebalance_end: float | None = None

    def observe(self, name: str, value: float, now: float) -> None:
        """Record one observation (unknown names are ignored, so sinks can be shared)."""
        if self._started_at is None:
            self._started_at = now
        stat = self._stats.get(name)
        if stat is None:
            return
        stat.record(value * 1000.0 if name != FAILED_REBALANCE else 1.0)
        if name == REBALANCE_LATENCY:
            self._ok_times.append(now)
            self._last_rebalance_end = now
        elif name == FAILED_REBALANCE:
            self._failed_times.append(now)

    def _rate_per_hour(self, times: deque[float], now: float) -> float:
        while times and times[0] <= now - self._window:
            times.popleft()
        started = self._started_at if self._started_at is not None else now
        elapsed = min(self._window, max(now - started, self._min_elapsed))
        return len(times) * 3600.0 / elapsed

    def snapshot(self, now: float) -> dict[str, float]:
        """Every KIP-429 metric at time ``now`` (latencies in milliseconds, as Java)."""
        ok = self._stats[REBALANCE_LATENCY]
        out: dict[str, float] = {
            "rebalance-latency-avg": ok.avg,
            "rebalance-latency-max": ok.maximum,
            "rebalance-latency-total": ok.total,
            "rebalance-total": float(ok.count),
            "rebalance-rate-per-hour": self._rate_per_hour(self._ok_times, now),
            "failed-rebalance-total": float(self._stats[FAILED_REBALANCE].count),
            "failed-rebalance-rate-per-hour": self._rate_per_hour(self._failed_times, now),
            "last-rebalance-seconds-ago": (
                -1.0 if self._last_rebalance_end is None else now - self._last_rebalance_end
            ),
        }
        for name in (
            PARTITION_REVOKED_LATENCY,
            PARTITION_ASSIGNED_LATENCY,
            PARTITION_LOST_LATENCY,
        ):
            stat = self._stats[name]
            out[f"{name}-avg"] = stat.avg
            out[f"{name}-max"] = stat.maximum
        return out
