"""The ownership audit, live: Spark Structured Streaming over a telemetry topic.

``python -m aiogroup analyze --follow TOPIC --bootstrap HOST:PORT --out DIR`` reads the records
:class:`~aiogroup.observability.telemetry_kafka.KafkaTelemetry` writes, with Spark's own Kafka
source (:mod:`aiogroup.tools.audit.kafka_source`), and runs two streaming queries:

* **ownership**: the events, parsed and classified as the batch audit does (:func:`parse_lines`,
  :func:`classify`), with an event-time watermark (``--skew``: how far members' clocks and
  deliveries may lag), grouped by consumer group into ``applyInPandasWithState``: each group's
  intervals live in Spark's state store (:class:`~aiogroup.tools.audit.livestate.GroupLive`).
  Per micro-batch it emits closed intervals, **alerts** (an overlap the watermark confirms is
  longer than the tolerance), and each group's status: partitions **unowned now** and since
  when, members with a **rebalance in flight**. An event-time timeout wakes a group when the
  watermark will confirm a pending overlap (Spark runs a micro-batch without data when the
  watermark moves), so an owner that never releases is reported without waiting for its next
  event. The watermark moves with event time only: the overlaps of the last ``--skew``
  seconds on the topic wait for later events of any group, which a live stream always brings
  (docs/audit.md, "Live").
* **events**: the records themselves, appended to ``OUT/events`` (Parquet), from which the batch
  audit's datasets are computed by the batch audit's own code (:func:`refresh`): the same nine
  Parquet datasets, the same answers, and ``report.html``, at the end and every
  ``--refresh`` seconds.

``applyInPandasWithState`` because an ownership interval spans many micro-batches and a group's
partitions must be judged together: PySpark has no ``flatMapGroupsWithState``, and
``transformWithStateInPandas`` needs the RocksDB state store and is still marked evolving; the
state here is one JSON value per group (its current assignment and what could still overlap
it), small, and any state store keeps it. It runs Python on the executors (pandas and pyarrow,
with aiogroup importable): unlike the batch audit, whose executors need only Java.
"""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from aiogroup.tools.audit.audit import PARTITION_EVENTS, _events, classify, parse_lines, run_audit
from aiogroup.tools.audit.livestate import GroupLive
from aiogroup.tools.audit.session import AnalyticsError

__all__ = ["OUTPUT_SCHEMA", "Follow", "LiveBatch", "follow", "refresh"]

#: What the stateful step emits: a kind (``interval``, ``alert``, ``status``), the group, and
#: the row as JSON (turned into typed datasets by the driver).
OUTPUT_SCHEMA = T.StructType([
    T.StructField("kind", T.StringType()),
    T.StructField("group", T.StringType()),
    T.StructField("body", T.StringType()),
])
_STATE_SCHEMA = T.StructType([T.StructField("live", T.StringType())])
_COLUMNS = ("group", "member", "type", "ts", "seq", "generation_id", "protocol",
            "rebalance_protocol", "started", "ended", "partitions", "state")


def kafka_lines(spark: SparkSession, bootstrap: str, topic: str, *, starting: str = "earliest",
                options: dict[str, str] | None = None) -> DataFrame:
    """The telemetry topic as a stream of ``value`` strings (Spark's Kafka source)."""
    reader = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", starting)
              .option("failOnDataLoss", "false"))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load().select(F.col("value").cast("string").alias("value"), "partition",
                                "offset")


def _source(topic: str) -> Any:
    """Where an event came from, for ``input_quality``: the topic and its partition."""
    return F.concat(F.lit(f"kafka:{topic}/"), F.col("partition").cast("string"))


def _event_time() -> Any:
    """The moment an event counts (as the audit's intervals): an assignment at the start of
    its callback, a release at its end, anything else when written."""
    t = F.col("type")
    seconds = (F.when(t == "partitions_assigned", F.col("started"))
               .when(t.isin(*PARTITION_EVENTS), F.greatest("ended", "started"))
               .otherwise(F.col("ts")))
    return F.timestamp_micros((seconds * 1_000_000).cast("long"))


def _update(tolerance: float, key: tuple[Any, ...], frames: Iterator[pd.DataFrame],
            state: Any) -> Iterator[pd.DataFrame]:
    """One group's micro-batch (or its event-time timeout): apply, judge, prune, report."""
    group = str(key[0])
    live = GroupLive.loads(group, state.get[0] if state.exists else None)
    watermark = state.getCurrentWatermarkMs() / 1000.0
    events: list[dict[str, Any]] = []
    for frame in frames:
        events.extend(frame.to_dict("records"))
    for e in events:  # pandas gives NaN for a missing number
        for name in ("seq", "generation_id", "started", "ended"):
            value = e.get(name)
            if isinstance(value, float) and math.isnan(value):
                e[name] = None
        if e.get("generation_id") is not None:
            e["generation_id"] = int(e["generation_id"])
    rows, pending = live.step(events, watermark, tolerance)
    state.update((live.dumps(),))
    if pending is not None:
        state.setTimeoutTimestamp(max(int(pending * 1000) + 1, state.getCurrentWatermarkMs() + 1))
    yield pd.DataFrame([(kind, group, json.dumps(body)) for kind, body in rows],
                       columns=["kind", "group", "body"])


def ownership_stream(lines: DataFrame, topic: str, *, tolerance_s: float,
                     skew_s: float) -> DataFrame:
    """The stateful step: events of the stream, keyed by group, through :class:`GroupLive`."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    # an aiogroup member's ``state`` events name the state (not a field of the audit's schema)
    state = F.get_json_object("value", "$.state")
    events = _events(classify(parse_lines(lines, _source(topic), {"state": state})))
    usable = events.select(
        *(c for c in _COLUMNS if c != "partitions"),
        F.to_json("partitions").alias("partitions"),
        _event_time().alias("event_time"),
    )
    return (usable.withWatermark("event_time", f"{int(skew_s * 1000)} milliseconds")
            .groupBy("group")
            .applyInPandasWithState(functools.partial(_update, tolerance_s), OUTPUT_SCHEMA,
                                    _STATE_SCHEMA, "append", GroupStateTimeout.EventTimeTimeout))


@dataclass
class LiveBatch:
    """What one micro-batch of the ownership query found."""

    batch_id: int
    alerts: list[dict[str, Any]]
    intervals: list[dict[str, Any]]
    status: dict[str, dict[str, Any]]
    at: float


@dataclass
class Follow:
    """A running live audit: its batches so far, every group's latest status."""

    spark: SparkSession
    out: Path
    tolerance_s: float
    batches: list[LiveBatch] = field(default_factory=list)
    status: dict[str, dict[str, Any]] = field(default_factory=dict)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    intervals: list[dict[str, Any]] = field(default_factory=list)
    queries: list[Any] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)
    stdout: TextIO | None = None

    def on_batch(self, frame: DataFrame, batch_id: int) -> None:
        rows = frame.collect()
        batch = LiveBatch(batch_id, [], [], {}, time.time())
        for row in rows:
            body = json.loads(row["body"])
            body["group"] = row["group"]
            if row["kind"] == "alert":
                body["batch_id"] = batch_id
                batch.alerts.append(body)
            elif row["kind"] == "interval":
                batch.intervals.append(body)
            else:
                batch.status[row["group"]] = body
        with self.changed:
            if any(b.batch_id == batch_id for b in self.batches):
                return  # a replayed batch (restart): already counted
            self.batches.append(batch)
            self.alerts += batch.alerts
            self.intervals += batch.intervals
            self.status.update(batch.status)
            self.changed.notify_all()
        self._write(batch)
        self._say(batch)

    def _write(self, batch: LiveBatch) -> None:
        live = self.out / "live"
        live.mkdir(parents=True, exist_ok=True)
        for name, rows in (("alerts", batch.alerts), ("closed_intervals", batch.intervals)):
            if rows:  # one file per batch: a replayed batch rewrites its own
                (live / name).mkdir(exist_ok=True)
                pd.DataFrame(rows).to_parquet(live / name / f"batch-{batch.batch_id:08d}.parquet")
        tmp = live / "status.json.tmp"
        tmp.write_text(json.dumps(self.status, indent=1, sort_keys=True))
        tmp.replace(live / "status.json")

    def _say(self, batch: LiveBatch) -> None:
        out = self.stdout
        if out is None:
            return
        for a in batch.alerts:
            print(f"ALERT batch {batch.batch_id}: group {a['group']}: {a['topic']}-"
                  f"{a['partition']} owned by {', '.join(a['members'])} at once since "
                  f"{_clock(a['start'])} (generations {a['generations'] or '?'})"
                  f"{', still' if a['ongoing'] else ''}", file=out, flush=True)
        for group, s in sorted(batch.status.items()):
            now = s["watermark"]
            parts = [f"batch {batch.batch_id}: group {group}"]
            if s["unowned"]:
                shown = ", ".join(f"{t}-{p} for {max(0.0, now - since):.1f} s"
                                  for t, p, since in s["unowned"][:8])
                more = len(s["unowned"]) - 8
                parts.append(f"unowned now: {shown}" + (f" (+{more})" if more > 0 else ""))
            if s["rebalancing"]:
                since = min(s["rebalancing"].values())
                parts.append(f"rebalance in flight since {_clock(since)} "
                             f"({len(s['rebalancing'])} member(s))")
            if len(parts) > 1:
                print("; ".join(parts), file=out, flush=True)

    def wait(self, done: Callable[[Follow], bool], timeout: float) -> bool:
        """Wait until ``done(self)`` holds (True) or ``timeout`` seconds pass (False). It is
        checked after every micro-batch and at least once a second (what it reads may change
        between batches: progress, the sink's counters). A query that stopped with an error
        raises it (:class:`AnalyticsError` naming the query, from Spark's exception); one that
        was stopped ends the wait with ``done(self)``."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not done(self):
                left = deadline - time.monotonic()
                if not all(q.isActive for q in self.queries):
                    self.raise_failure()
                    return done(self)
                if left <= 0:
                    return False
                self.changed.wait(min(left, 1.0))
            return True

    def failure(self) -> str | None:
        """The error of a query that stopped with one (its name and Spark's message), else
        None."""
        for q in self.queries:
            if not q.isActive and (exc := q.exception()) is not None:
                return f"streaming query {q.name} stopped: {exc}"
        return None

    def raise_failure(self) -> None:
        """Raise :class:`AnalyticsError` if a query stopped with an error."""
        if (why := self.failure()) is not None:
            raise AnalyticsError(why)

    def watermark(self) -> float | None:
        """The event-time watermark (seconds) the ownership query has judged with: every
        micro-batch it has finished ran at most at this watermark, and once it reports a
        watermark, every group's timeouts before it have fired (Spark runs a batch without
        data when the watermark moves, ``spark.sql.streaming.noDataMicroBatches.enabled``).
        None before its first batch."""
        progress = self.queries[1].lastProgress if len(self.queries) > 1 else None
        mark = ((progress or {}).get("eventTime") or {}).get("watermark")
        if not mark:
            return None
        return datetime.fromisoformat(mark.replace("Z", "+00:00")).timestamp()

    def offsets(self, query: int = 1) -> dict[int, int]:
        """How far a query has read, as of its last finished micro-batch: {kafka partition:
        next offset}; ``query`` 0 is the events query, 1 the ownership query."""
        progress = self.queries[query].lastProgress if len(self.queries) > query else None
        if not progress:
            return {}
        ends = progress["sources"][0].get("endOffset") or {}
        if isinstance(ends, str):
            ends = json.loads(ends)
        return {int(p): int(o) for topic in ends.values() for p, o in topic.items()}

    def caught_up(self) -> bool:
        """Whether the events query has stored everything the ownership query has judged: the
        ownership query has finished every micro-batch it handed to :meth:`on_batch` (an
        alert is seen while its batch still runs), and the events query's offsets are at least
        its own, partition by partition. The datasets written from the stored events then
        cover every alert."""
        progress = self.queries[1].lastProgress if len(self.queries) > 1 else None
        seen = max((b.batch_id for b in self.batches), default=-1)
        if int((progress or {}).get("batchId", -1)) < seen:
            return False
        judged, stored = self.offsets(1), self.offsets(0)
        return all(stored.get(p, -1) >= o for p, o in judged.items())

    def events_offsets(self) -> dict[int, int]:
        """How far the events query has read: {kafka partition: next offset}."""
        return self.offsets(0)

    def stop(self) -> None:
        for q in self.queries:
            q.stop()


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(t)) + f".{int((t % 1) * 1000):03d}"


def follow(spark: SparkSession, bootstrap: str, topic: str, out: str | Path, *,
           tolerance_s: float = 0.05, skew_s: float = 2.0, trigger_s: float = 1.0,
           starting: str = "earliest", kafka_options: dict[str, str] | None = None,
           stdout: TextIO | None = None) -> Follow:
    """Start both queries (checkpoints under ``out/_checkpoints``); returns at once."""
    out = Path(out)
    live = Follow(spark, out, tolerance_s, stdout=stdout)
    lines = kafka_lines(spark, bootstrap, topic, starting=starting, options=kafka_options)
    trigger = {"processingTime": f"{int(trigger_s * 1000)} milliseconds"}
    live.queries.append(
        lines.writeStream.format("parquet").option("path", str(out / "events"))
        .option("checkpointLocation", str(out / "_checkpoints" / "events"))
        .trigger(**trigger).queryName("aiogroup-live-events").start())
    live.queries.append(
        ownership_stream(lines, topic, tolerance_s=tolerance_s, skew_s=skew_s)
        .writeStream.foreachBatch(live.on_batch)
        .option("checkpointLocation", str(out / "_checkpoints" / "ownership"))
        .trigger(**trigger).queryName("aiogroup-live-ownership").start())
    return live


def refresh(spark: SparkSession, out: str | Path, topic: str, *, tolerance_s: float,
            label: str | None = None) -> Any:
    """The batch audit's nine datasets (and what the report reads) from the events the live
    job stored, by the batch audit's own code, written under ``out``. Returns the report's
    data (:func:`aiogroup.tools.audit.report.collect`)."""
    from aiogroup.tools.audit.report import collect

    out = Path(out)
    lines = spark.read.parquet(str(out / "events"))
    raw = parse_lines(lines, _source(topic))
    result = run_audit(spark, [], tolerance_s=tolerance_s, label=label or topic, raw=raw)
    for name, df in result.datasets.items():
        df.write.mode("overwrite").parquet(str(out / name))
    return collect(spark, str(out), label or topic, tolerance_s, None, None)
