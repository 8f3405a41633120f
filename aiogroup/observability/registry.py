"""One registry of a member's and its consumer's metrics, with Java's names (sans-I/O).

A :class:`~aiogroup.client.GroupMember` owns one :class:`MetricsRegistry`; its
:class:`~aiogroup.Consumer` records into the same one. Everything that reports a metric reads
it there: ``member.metrics`` (Java's group ``consumer-coordinator-metrics``), ``consumer.metrics``
(that group, ``consumer-fetch-manager-metrics`` and ``consumer-metrics``),
``consumer.partition_metrics`` (the per-partition ones), the Prometheus and OpenTelemetry
exporters (:mod:`aiogroup.observability.exporters`, which read those properties) and the
example service's log line. The drivers record observations as they happen, once per Fetch
answer, commit answer or batch of records handed out, never per record; snapshots compute the
windowed values at the time asked (:mod:`aiogroup.observability.stats`: Java's 2 samples of
30 s).

==================================  =================================================  =====
name                                meaning                                            unit
==================================  =================================================  =====
``commit-latency-avg``, ``-max``    time of an OffsetCommit request, answered          ms
``commit-rate``, ``commit-total``   OffsetCommit answers per second / in all           1/s, 1
``fetch-latency-avg``, ``-max``     time of a Fetch request, answered                  ms
``fetch-rate``, ``fetch-total``     Fetch answers per second / in all                  1/s, 1
``fetch-size-avg``, ``-max``        record bytes per Fetch answer                      bytes
``bytes-consumed-rate``, ``-total`` record bytes fetched per second / in all           B/s, B
``records-consumed-rate``, ``-total`` records handed to the application                1/s, 1
``records-lag-max``                 largest lag recorded (any partition, recently)     1
``records-lead-min``                smallest lead recorded (any partition, recently)   1
``last-poll-seconds-ago``           since the application last asked for records       s
``time-between-poll-avg``, ``-max`` between two calls of getmany/getone                ms
``poll-idle-ratio-avg``             share of time spent waiting inside getmany/getone  1
==================================  =================================================  =====

Per broker (``consumer.node_metrics``, ``{node id: {name: value}}``; Java's
``consumer-node-metrics`` are per connection): ``fetch-total`` (Fetch answers from that node),
``bytes-fetched-total`` (record bytes), ``records-fetched-total`` (records in the complete
batches, read from their headers, control records included). With ``client_rack`` and
KIP-392 they show which replica the records came from.

Per partition (``consumer.partition_metrics``): ``records-lag`` (the latest), ``records-lag-avg``,
``records-lag-max``, ``records-lead``, ``records-lead-avg``, ``records-lead-min``; lag and lead
as :mod:`aiogroup.observability.lag` defines them, recorded each time the application is given
records of the partition, as Java's ``FetchCollector`` does. A partition's metrics go when it
is revoked or lost, as Java removes its sensors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from aiogroup.observability.metrics import KIP429Metrics
from aiogroup.observability.stats import Sensor
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "CONSUMER_METRICS",
    "COORDINATOR_METRICS",
    "FETCH_MANAGER_METRICS",
    "NODE_METRICS",
    "MetricsRegistry",
    "NodeFetches",
    "PartitionMetrics",
    "PollTimes",
]

#: Java's metric groups (each with tag ``client-id``; per partition also ``topic`` and
#: ``partition``; per broker, ``consumer-node-metrics``, also ``node-id``).
COORDINATOR_METRICS = "consumer-coordinator-metrics"
FETCH_MANAGER_METRICS = "consumer-fetch-manager-metrics"
CONSUMER_METRICS = "consumer-metrics"
NODE_METRICS = "consumer-node-metrics"


@dataclass(slots=True)
class PartitionMetrics:
    """One partition's lag and lead sensors, and the position they were last recorded at."""

    lag: Sensor = field(default_factory=Sensor)
    lead: Sensor = field(default_factory=Sensor)
    position: int | None = None


@dataclass(slots=True)
class NodeFetches:
    """What the Fetch answers of one broker carried, since the start."""

    fetches: int = 0
    bytes: int = 0
    records: int = 0


@dataclass(slots=True)
class PollTimes:
    """The application's calls for records, gathered cheaply per call (a few additions) and
    handed to the registry's sensors in bulk (:meth:`MetricsRegistry.record_polls`).

    As Java's ``KafkaConsumerMetrics``: at a call's start, the time since the previous call's
    start (``time-between-poll``; 0 for the first); at its end, the share of the time since the
    previous call's start that this call spent inside (``poll-idle-ratio``)."""

    last_start: float | None = None
    gap: float = 0.0
    calls: int = 0
    gap_sum: float = 0.0
    gap_max: float = 0.0
    ends: int = 0
    idle_sum: float = 0.0
    idle_max: float = 0.0

    def begin(self, now: float) -> None:
        last = self.last_start
        gap = 0.0 if last is None else now - last
        self.last_start = now
        self.gap = gap
        self.calls += 1
        self.gap_sum += gap
        if gap > self.gap_max:
            self.gap_max = gap

    def end(self, now: float) -> None:
        start = self.last_start
        if start is None:
            return
        busy = now - start
        span = busy + self.gap
        if span <= 0:
            return  # Java would record 0/0; nothing to say of a call that took no time
        ratio = busy / span
        self.ends += 1
        self.idle_sum += ratio
        if ratio > self.idle_max:
            self.idle_max = ratio

    def clear(self) -> None:
        self.calls = self.ends = 0
        self.gap_sum = self.gap_max = self.idle_sum = self.idle_max = 0.0


class MetricsRegistry:
    """Every metric of one member and its consumer. A
    :class:`~aiogroup.observability.metrics.MetricsSink` for the KIP-429 observations of the
    membership machine (:meth:`observe`); the drivers call the other
    ``record_*`` methods. ``now`` is the drivers' monotonic clock, in seconds."""

    def __init__(self, *, started_at: float | None = None) -> None:
        self.kip429 = KIP429Metrics(started_at=started_at)
        self.commit_latency = Sensor()
        self.fetch_latency = Sensor()
        self.fetch_size = Sensor()
        self.records_consumed = Sensor()
        self.records_lag = Sensor()
        self.records_lead = Sensor()
        self.time_between_poll = Sensor()
        self.poll_idle_ratio = Sensor()
        #: When the application last began asking for records (None: never).
        self.last_poll: float | None = None
        self.partitions: dict[TopicPartition, PartitionMetrics] = {}
        self.nodes: dict[int, NodeFetches] = {}

    # -- observations -------------------------------------------------------------------------

    def observe(self, name: str, value: float, now: float) -> None:
        """The membership machine's KIP-429 observations
        (:class:`~aiogroup.observability.metrics.MetricsSink`)."""
        self.kip429.observe(name, value, now)

    def record_commit(self, latency_s: float, now: float) -> None:
        """An OffsetCommit was answered (whatever its error codes), ``latency_s`` after it was
        sent (Java records every answer, not the requests that never got one)."""
        self.commit_latency.record(latency_s * 1000.0, now)

    def record_fetch(
        self, latency_s: float, size: int, now: float, *, node: int | None = None, records: int = 0
    ) -> None:
        """A Fetch was answered after ``latency_s``, carrying ``size`` bytes of records
        (``records`` of them), by broker ``node``."""
        self.fetch_latency.record(latency_s * 1000.0, now)
        self.fetch_size.record(float(size), now)
        if node is not None:
            counts = self.nodes.get(node)
            if counts is None:
                counts = self.nodes[node] = NodeFetches()
            counts.fetches += 1
            counts.bytes += size
            counts.records += records

    def record_consumed(self, records: int, now: float) -> None:
        """``records`` were handed to the application."""
        if records:
            self.records_consumed.record(float(records), now)

    def record_position(
        self, tp: TopicPartition, position: int, lag: int | None, lead: int | None, now: float
    ) -> None:
        """The application was given records of ``tp`` up to ``position``: its lag and lead
        now (None: not known yet)."""
        part = self.partitions.get(tp)
        if part is None:
            part = self.partitions[tp] = PartitionMetrics()
        part.position = position
        if lag is not None:
            part.lag.record(float(lag), now)
            self.records_lag.record(float(lag), now)
        if lead is not None:
            part.lead.record(float(lead), now)
            self.records_lead.record(float(lead), now)

    def record_polls(self, polls: PollTimes, now: float) -> None:
        """Hand over what :class:`PollTimes` gathered since last time (then cleared)."""
        if polls.last_start is not None:
            self.last_poll = polls.last_start
        self.time_between_poll.record_many(
            polls.calls, polls.gap_sum * 1000.0, polls.gap_max * 1000.0, now
        )
        self.poll_idle_ratio.record_many(polls.ends, polls.idle_sum, polls.idle_max, now)
        polls.clear()

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` were revoked or lost: their metrics go (Java removes the sensors)."""
        for tp in partitions:
            self.partitions.pop(tp, None)

    # -- snapshots ----------------------------------------------------------------------------

    def coordinator_metrics(self, now: float) -> dict[str, float]:
        """``consumer-coordinator-metrics``: KIP-429's and the commit metrics."""
        out = self.kip429.snapshot(now)
        commit = self.commit_latency
        out["commit-latency-avg"] = commit.avg(now)
        out["commit-latency-max"] = commit.max(now)
        out["commit-rate"] = commit.count_rate(now)
        out["commit-total"] = float(commit.count)
        return out

    def fetch_manager_metrics(self, now: float) -> dict[str, float]:
        """``consumer-fetch-manager-metrics``, client level."""
        latency, size, records = self.fetch_latency, self.fetch_size, self.records_consumed
        return {
            "fetch-latency-avg": latency.avg(now),
            "fetch-latency-max": latency.max(now),
            "fetch-rate": latency.count_rate(now),
            "fetch-total": float(latency.count),
            "fetch-size-avg": size.avg(now),
            "fetch-size-max": size.max(now),
            "bytes-consumed-rate": size.rate(now),
            "bytes-consumed-total": size.total,
            "records-consumed-rate": records.rate(now),
            "records-consumed-total": records.total,
            "records-lag-max": self.records_lag.max(now),
            "records-lead-min": self.records_lead.min(now),
        }

    def consumer_metrics(self, now: float) -> dict[str, float]:
        """``consumer-metrics``: the application's calls for records."""
        last = self.last_poll
        return {
            # Java: whole seconds (TimeUnit.SECONDS.convert), -1 before the first poll
            "last-poll-seconds-ago": -1.0 if last is None else float(math.floor(now - last)),
            "time-between-poll-avg": self.time_between_poll.avg(now),
            "time-between-poll-max": self.time_between_poll.max(now),
            "poll-idle-ratio-avg": self.poll_idle_ratio.avg(now),
        }

    def node_metrics(self) -> dict[int, dict[str, float]]:
        """Per broker: its Fetch answers, and the record bytes and records they carried."""
        return {
            node: {
                "fetch-total": float(n.fetches),
                "bytes-fetched-total": float(n.bytes),
                "records-fetched-total": float(n.records),
            }
            for node, n in sorted(self.nodes.items())
        }

    def partition_metrics(self, now: float) -> dict[TopicPartition, dict[str, float]]:
        """``consumer-fetch-manager-metrics`` per partition, for the partitions read so far."""
        return {
            tp: {
                "records-lag": part.lag.last,
                "records-lag-avg": part.lag.avg(now),
                "records-lag-max": part.lag.max(now),
                "records-lead": part.lead.last,
                "records-lead-avg": part.lead.avg(now),
                "records-lead-min": part.lead.min(now),
            }
            for tp, part in sorted(self.partitions.items())
        }
