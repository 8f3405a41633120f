"""The ownership audit: DataFrame-only computations over rebalance telemetry.

Definitions (documented for users in docs/audit.md, "Definitions"):

* **Ownership interval.** A member owns a partition from the *start* of the assigned callback that
  gave it (the earliest moment it may fetch) until the *end* of the revoked/lost callback that took
  it away (it may still be processing or committing inside the callback). Judged conservatively
  this way, an overlap is never hidden by callback duration. An assigned event for a partition the
  member already owns (eager re-assignment without a revoke) continues the interval; a revoke of a
  partition it does not own is ignored; both are counted. An interval still open when the member's
  events stop ends at the member's last event and is flagged ``open``.
* **Overlap.** Two or more members' intervals for one partition intersect (a sweep over interval
  boundaries, ends before starts at equal times, so back-to-back hand-offs do not overlap).
  Overlap episodes no longer than the clock-skew tolerance are counted but are not violations.
* **Unowned time.** Time between a partition's first acquisition and its last release during
  which nobody owned it. A gap is charged to the generation of the assignment that closes it.
  Time after the last release is not counted (shutdown looks the same as downtime).
* **Moves.** A partition moves when its next owner differs from its previous owner. The move is
  charged to the generation that decided it: the generation of a cooperative revocation
  (KIP-429: revoked after SyncGroup of the deciding generation), otherwise the generation of the
  new assignment (eager revocations happen before JoinGroup and carry the old generation; a
  leaving member's revocation decides nothing).
* **Minimum moves**, charged to the first generation g of each membership epoch (consecutive
  generations with the same members; cooperative follow-up rounds belong to the epoch that
  started them): with N partitions known to the group and M members in g, a balanced assignment
  gives each member floor(N/M) or ceil(N/M). Partitions held by members that are not in g must
  move; a member in g that holds more than its quota must give up the excess (the ceil quotas go
  to the members holding most). Holdings before g are the owners of the latest assignments before
  g; eager revocations do not release holdings (the assignor still sees the previous owner),
  cooperative revocations do (the partitions are free for the next round), except a member's
  revocation in its last generation (leaving). A member counts as present in every generation
  from its first to its last observed one (peers run no callback in rounds that change nothing
  for them). Assumes all members subscribe to the same topics.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = [
    "EVENT_SCHEMA",
    "KNOWN_TYPES",
    "WINDOW_SPILL_KEY",
    "WINDOW_SPILL_ROWS",
    "AuditResult",
    "classify",
    "parse_lines",
    "read_events",
    "run_audit",
]

SUPPORTED_VERSION = 1
CORRUPT = "_corrupt_record"
PARTITION_EVENTS = ("partitions_assigned", "partitions_revoked", "partitions_lost")
KNOWN_TYPES = (
    "joined",
    *PARTITION_EVENTS,
    "rebalance_completed",
    "rebalance_failed",
    "offsets_committed",
    "processed",
    "closed",
    # Written by aiogroup members (the audit reads them as context, never as ownership):
    "acting",
    "state",
    "leader_round",
    "commit_failed",
)

EVENT_SCHEMA = T.StructType(
    [
        T.StructField("v", T.LongType()),
        T.StructField("type", T.StringType()),
        T.StructField("ts", T.DoubleType()),
        T.StructField("seq", T.LongType()),
        T.StructField("group", T.StringType()),
        T.StructField("member", T.StringType()),
        T.StructField("member_id", T.StringType()),
        T.StructField("client", T.StringType()),
        T.StructField("pid", T.LongType()),
        T.StructField("host", T.StringType()),
        T.StructField("generation_id", T.LongType()),
        T.StructField("protocol", T.StringType()),
        T.StructField("rebalance_protocol", T.StringType()),
        T.StructField("partitions", T.MapType(T.StringType(), T.ArrayType(T.LongType()))),
        T.StructField("started", T.DoubleType()),
        T.StructField("ended", T.DoubleType()),
        T.StructField("error", T.StringType()),
        T.StructField("latency_s", T.DoubleType()),
        T.StructField("reason", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.LongType()),
        T.StructField("first", T.LongType()),
        T.StructField("last", T.LongType()),
        T.StructField(CORRUPT, T.StringType()),
    ]
)


OVERLAP_SCHEMA = T.StructType(
    [
        T.StructField("group", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("start", T.DoubleType()),
        T.StructField("end", T.DoubleType()),
        T.StructField("max_owners", T.LongType()),
        T.StructField("members", T.ArrayType(T.StringType(), containsNull=False)),
        T.StructField("generations", T.ArrayType(T.LongType(), containsNull=False)),
        T.StructField("duration_s", T.DoubleType()),
        T.StructField("violation", T.BooleanType()),
    ]
)


@dataclass
class AuditResult:
    """Every result of one audit, as Spark DataFrames (one Parquet dataset each)."""

    label: str
    datasets: dict[str, DataFrame] = field(default_factory=dict)
    tolerance_s: float = 0.0

    def __getitem__(self, name: str) -> DataFrame:
        return self.datasets[name]


def read_events(spark: SparkSession, paths: Sequence[str]) -> DataFrame:
    """Read JSONL events with the explicit schema; malformed lines land in ``_corrupt_record``."""
    df = (
        spark.read.schema(EVENT_SCHEMA)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json(list(paths))
    )
    return df.withColumn("source_file", F.input_file_name())


def parse_lines(lines: DataFrame, source: Any, keep: dict[str, Any] | None = None) -> DataFrame:
    """Events from a ``value`` column of JSON lines (the records of a telemetry topic), parsed
    exactly as :func:`read_events` reads files; ``source`` (a column) names where each came
    from, in place of the file name; ``keep``: more columns to carry along, by name."""
    parsed = F.from_json(
        "value", EVENT_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT})
    extra = keep or {}
    return lines.select(parsed.alias("e"), source.alias("source_file"),
                        *(c.alias(n) for n, c in extra.items())).select(
        "e.*", "source_file", *extra)


def classify(raw: DataFrame) -> DataFrame:
    """Add ``problem``: null for a usable event, else why it is skipped.

    ``corrupt`` (not JSON / truncated / wrong types), ``newer_version`` (v > 1: fields may mean
    something else, so we do not guess), ``unknown_type``, ``missing_fields``.
    """
    t = F.col("type")
    partition_event = t.isin(*PARTITION_EVENTS)
    missing = (
        F.col("ts").isNull()
        | F.col("member").isNull()
        | (partition_event & (F.col("partitions").isNull() | F.col("started").isNull()))
        | (partition_event & F.col("ended").isNull())
        | ((t == "rebalance_completed") & F.col("latency_s").isNull())
        | ((t == "processed") & (F.col("topic").isNull() | F.col("partition").isNull()))
    )
    problem = (
        F.when(F.col(CORRUPT).isNotNull(), F.lit("corrupt"))
        .when(F.col("v").isNull() | t.isNull(), F.lit("missing_fields"))
        .when(F.col("v") > SUPPORTED_VERSION, F.lit("newer_version"))
        .when(F.col("v") < 1, F.lit("corrupt"))
        .when(~t.isin(*KNOWN_TYPES), F.lit("unknown_type"))
        .when(missing, F.lit("missing_fields"))
    )
    return raw.withColumn("problem", problem)


def _events(classified: DataFrame) -> DataFrame:
    # Case-insensitive matches by regex, not ``lower()``: on Spark 4 the first ``lower()`` in a
    # JVM initialises ICU's collation tables, about 2.5 CPU seconds for two short strings.
    cooperative = F.col("protocol").rlike("(?i)cooperative")
    return classified.where(F.col("problem").isNull()).select(
        *(c for c in classified.columns
          if c not in (CORRUPT, "problem", "group", "client", "seq", "rebalance_protocol")),
        F.coalesce(F.col("group"), F.lit("")).alias("group"),
        F.coalesce(F.col("client"), F.lit("unknown")).alias("client"),
        F.coalesce(F.col("seq"), F.lit(0)).alias("seq"),
        F.when(F.col("rebalance_protocol").rlike("(?i)^cooperative$"), "cooperative")
        .when(cooperative, "cooperative")
        .otherwise("eager")
        .alias("rebalance_protocol"),
    )


# Partition-level work runs on numbers only: every (group, member) and (group, topic) gets a
# dense id, and a partition is one long key, ``topic id << 32 | partition``. Sorting, windowing
# and shuffling millions of rows then never compares or copies a string; names come back by
# broadcast joins on the (small) results.
_PARTITION_BITS = 32
_PARTITION_MASK = (1 << _PARTITION_BITS) - 1
_MAX_PARTITION = 2**31 - 1  # Kafka partitions are int32; others are not partitions
KIND_CODES = {"assigned": 0, "revoked": 1, "lost": 2}


@dataclass
class _Keys:
    """Dense ids for names: ``members`` (group, mid, member), ``topics`` (group, tid, topic).
    Ids follow the names' sort order, so ordering by id is ordering by name."""

    members: DataFrame
    topics: DataFrame


def _keys(spark: SparkSession, events: DataFrame) -> _Keys:
    """Collect the distinct names (one small job) and number them on the driver.

    Distinct members and topics number in the thousands even for a large fleet; numbering
    them on the driver keeps ids exact and deterministic (no hashing, no collisions).
    """
    members = events.select("group", F.lit(0).alias("k"), F.col("member").alias("name"))
    topics = events.where(F.col("type").isin(*PARTITION_EVENTS)).select(
        "group", F.lit(1).alias("k"), F.explode(F.map_keys("partitions")).alias("name"))
    names = sorted(
        (r["group"], r["k"], r["name"]) for r in members.union(topics).distinct().collect()
        if r["name"] is not None
    )
    rows: tuple[list[tuple[str, int, str]], list[tuple[str, int, str]]] = ([], [])
    for group, k, name in names:
        table = rows[k]
        table.append((group, len(table), name))

    def frame(data: list[tuple[str, int, str]], id_: str, name: str) -> DataFrame:
        schema = T.StructType([
            T.StructField("group", T.StringType(), False),
            T.StructField(id_, T.IntegerType(), False),
            T.StructField(name, T.StringType(), False),
        ])
        # From pandas, Arrow hands the table to the JVM directly; a list would go through
        # Python worker processes every time a join broadcasts it.
        table = pd.DataFrame(data, columns=schema.fieldNames()).astype({id_: "int32"})
        with warnings.catch_warnings():  # "PySpark does not yet fully support pandas >= 3"
            warnings.simplefilter("ignore", FutureWarning)
            return spark.createDataFrame(table, schema)

    return _Keys(members=frame(rows[0], "mid", "member"), topics=frame(rows[1], "tid", "topic"))


def _member_info(events: DataFrame, keys: _Keys) -> DataFrame:
    """Per member: id, end of its events, closed, first and last generation seen (small)."""
    return events.groupBy("group", "member").agg(
        F.max(F.greatest("ts", F.coalesce("ended", "ts"))).alias("member_end"),
        F.max(F.when(F.col("type") == "closed", True).otherwise(False)).alias("closed"),
        F.min("generation_id").alias("first_gen"),
        F.max("generation_id").alias("last_gen"),
    ).join(keys.members, ["group", "member"])


def _partition_rows(events: DataFrame, keys: _Keys, shuffle: int) -> DataFrame:
    """One row per (partition event, partition), keyed by numbers, with the moment it counts.

    The compact events (partitions still as arrays) are shuffled by member and exploded where
    they land: the pairing window below is per (partition, member), so it needs no other shuffle.
    """
    is_assign = F.col("type") == "partitions_assigned"
    kind = (F.when(is_assign, F.lit(KIND_CODES["assigned"]))
            .when(F.col("type") == "partitions_revoked", F.lit(KIND_CODES["revoked"]))
            .otherwise(F.lit(KIND_CODES["lost"])))
    compact = (
        events.where(F.col("type").isin(*PARTITION_EVENTS))
        .join(F.broadcast(keys.members.select("group", "member", "mid")), ["group", "member"])
        .select(
            "group",
            "mid",
            kind.cast("byte").alias("kind"),
            F.col("generation_id").alias("gen"),
            (F.col("rebalance_protocol") == "cooperative").alias("coop"),
            # ownership starts when the assigned callback starts, ends when revoked/lost ENDS
            F.when(is_assign, F.col("started")).otherwise(F.greatest("ended", "started"))
            .alias("t"),
            "ts",
            "seq",
            "partitions",
        )
        .repartition(shuffle, "mid")
    )
    by_topic = compact.select(
        "*", F.explode("partitions").alias("topic", "parts")
    ).drop("partitions").join(
        F.broadcast(keys.topics.select("group", "topic", "tid")), ["group", "topic"])
    p = F.col("partition")
    return (
        by_topic.select("*", F.explode("parts").alias("partition"))
        .where(p.isNotNull() & (p >= 0) & (p <= _MAX_PARTITION))
        .select(
            (F.shiftleft(F.col("tid").cast("long"), _PARTITION_BITS) + p).alias("pk"),
            "mid", "kind", "gen", "coop", "t", "ts", "seq",
        )
    )


def _intervals(rows: DataFrame, members: DataFrame) -> DataFrame:
    """Ownership intervals per (partition, member), numbers only.

    An assigned row that follows a release (or nothing) opens an interval, which the first later
    release closes. Other assigned rows (already owned) and releases of unowned partitions are
    redundant; the member summary counts them (partition rows minus intervals). One window pass
    over the member's rows of the partition gives all three: the previous row's kind, the next
    release (``lead ... IGNORE NULLS`` over releases only, amortised linear), and whether any
    assigned row came before (the member's first interval there, which counts owners).
    """
    # The hash leads the sort key: (partition, member) groups then differ in the sort prefix and
    # the sort compares whole rows only within a group (a handful of rows). A radix sort on the
    # hash alone first (one long key) hands the window's sort rows already grouped, which it then
    # orders in about linear time. The always-true filter on the task's partition id is not
    # deterministic, so the optimizer keeps that first sort (it would drop it as redundant).
    w = Window.partitionBy("h", "pk", "mid").orderBy("ts", "seq", "t")
    rows = (
        rows.withColumn("h", F.xxhash64("pk", "mid"))
        .sortWithinPartitions("h")
        .where(F.spark_partition_id() >= 0)
    )
    assigned = KIND_CODES["assigned"]
    is_assign = F.col("kind") == assigned
    next_release = F.expr(
        f"lead(CASE WHEN kind <> {assigned} THEN "
        "named_struct('t', t, 'kind', kind, 'gen', gen, 'coop', coop) END) IGNORE NULLS")
    opened = rows.select(
        "*",
        F.coalesce(F.lag(is_assign).over(w), F.lit(False)).alias("prev_assign"),
        next_release.over(w).alias("release"),
        F.coalesce(F.max(is_assign).over(w.rowsBetween(Window.unboundedPreceding, -1)),
                   F.lit(False)).alias("assigned_before"),
    ).where(is_assign & ~F.col("prev_assign")).withColumn("first_own", ~F.col("assigned_before"))
    return opened.join(
        F.broadcast(members.select("mid", "member_end", "last_gen")), "mid", "left"
    ).select(
        "pk",
        "mid",
        F.col("gen").alias("generation_id"),
        "coop",
        F.col("t").alias("start"),
        F.greatest(F.coalesce("release.t", "member_end"), F.col("t")).alias("end"),
        F.col("release.kind").alias("end_kind"),
        F.col("release.gen").alias("end_gen"),
        F.col("release.coop").alias("end_coop"),
        "first_own",
        # A cooperative revocation releases a partition for the next round (KIP-429) unless it
        # is the member's goodbye (revoked in its last generation, i.e. on leave/close).
        F.coalesce(
            (F.col("release.kind") == KIND_CODES["revoked"])
            & F.col("release.coop")
            & F.col("release.gen").isNotNull()
            & (F.col("release.gen") < F.col("last_gen")),
            F.lit(False),
        ).alias("released"),
    )


def _with_context(intervals: DataFrame) -> DataFrame:
    """Each interval with what every per-partition result needs, from one window (one sort).

    * ``prev_end``: the latest end of the intervals that started before it. Ordered by start, a
      partition's intervals leave a gap before an interval exactly when it starts after every
      earlier one ended, and have two owners exactly where one starts before an earlier one
      ended: one running max gives both, with no explode of interval boundaries.
    * ``pm``, ``pr``, ``pg``: the member, ``released`` and ``end_gen`` of the previous interval
      with a known generation (the moves and holdings).
    * ``prev_gen``: the highest generation of the intervals that started before it (tells
      whether the gaps' generations rise with time, see ``_unowned``).
    """
    w = Window.partitionBy("pk").orderBy("start", "end", "mid")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    known = F.col("generation_id").isNotNull()
    prev = F.last(F.when(known, F.struct("mid", "released", "end_gen")), ignorenulls=True)
    # A radix sort on one long that orders almost like (partition, start) runs first, so the
    # window's own sort (every comparison within a partition compares whole rows) finds the rows
    # nearly in order. The long is 11 bits of topic id, 20 of partition, 32 of start in
    # milliseconds: beyond those ranges (or for a history spanning 49 days) it orders less well
    # and the window's sort does more work, with the same result. As in ``_intervals``, the
    # non-deterministic filter keeps the optimizer from dropping the first sort.
    pk = F.col("pk")
    topic_partition = F.shiftleft(F.shiftright(pk, _PARTITION_BITS).bitwiseAND(0x7FF), 20) \
        .bitwiseOR(pk.bitwiseAND(0xFFFFF))
    start_ms = F.when(F.abs(F.col("start")) < 1e15, (F.col("start") * 1000).cast("long")) \
        .otherwise(F.lit(0).cast("long")).bitwiseAND(0xFFFFFFFF)
    intervals = (
        intervals.withColumn("_o", F.shiftleft(topic_partition, 32).bitwiseOR(start_ms))
        .sortWithinPartitions("_o")
        .where(F.spark_partition_id() >= 0)
        .drop("_o")
    )
    return intervals.select(
        "*",
        F.max("end").over(before).alias("prev_end"),
        F.max("generation_id").over(before).alias("prev_gen"),
        prev.over(before).alias("prev"),
    ).select(
        *intervals.columns,
        "prev_end",
        "prev_gen",
        F.col("prev.mid").alias("pm"),
        F.col("prev.released").alias("pr"),
        F.col("prev.end_gen").alias("pg"),
    )


def _protocol_name(coop: Any) -> Any:
    return F.when(coop, F.lit("cooperative")).when(coop.isNotNull(), F.lit("eager"))


def _kind_name(kind: Any) -> Any:
    name = F.lit(None).cast("string")
    for text, code in KIND_CODES.items():
        name = F.when(kind == code, F.lit(text)).otherwise(name)
    return name


def _named(frame: DataFrame, keys: _Keys) -> DataFrame:
    """Replace ``pk`` by (group, topic, partition) and add ``member`` when ``mid`` is there."""
    topics = keys.topics.select("tid", "group", "topic")
    out = frame.withColumn("tid", F.shiftright("pk", _PARTITION_BITS).cast("int")).join(
        F.broadcast(topics), "tid")
    if "mid" in frame.columns:
        out = out.join(F.broadcast(keys.members.select("mid", "member")), "mid")
    return out.withColumn(
        "partition", F.col("pk").bitwiseAND(F.lit(_PARTITION_MASK)).cast("int"))


def _intervals_out(context: DataFrame, keys: _Keys) -> DataFrame:
    return _named(context, keys).select(
        "group",
        "topic",
        "partition",
        "member",
        "generation_id",
        _protocol_name(F.col("coop")).alias("rp"),
        "start",
        "end",
        F.coalesce(_kind_name(F.col("end_kind")), F.lit("open")).alias("end_kind"),
        "end_gen",
        _protocol_name(F.col("end_coop")).alias("end_rp"),
        F.col("end_kind").isNull().alias("open"),
        (F.col("end") - F.col("start")).alias("duration_s"),
    )


def _segments(intervals: DataFrame) -> DataFrame:
    """Sweep over interval boundaries: [t, next_t) segments with their owner count."""
    bounds = F.explode(
        F.array(
            F.struct(F.col("start").alias("t"), F.lit(1).alias("delta")),
            F.struct(F.col("end").alias("t"), F.lit(-1).alias("delta")),
        )
    )
    w = Window.partitionBy("pk").orderBy("t", "delta")
    swept = intervals.select("pk", bounds.alias("b")).select(
        "pk", "b.t", "b.delta"
    ).select(
        "*",
        F.sum("delta").over(w.rowsBetween(Window.unboundedPreceding, 0)).alias("owners"),
        F.lead("t").over(w).alias("next_t"),
    )
    return swept.where(F.col("next_t").isNotNull() & (F.col("next_t") > F.col("t"))).select(
        "pk", "t", "next_t", "owners")


def _gap_s() -> Any:
    """The unowned time an interval closes (null when it starts before an earlier one ended)."""
    return F.when(F.col("start") > F.col("prev_end"), F.col("start") - F.col("prev_end"))


def _gap_gen() -> Any:
    """The generation a gap is charged to (see ``_unowned``)."""
    return F.when(F.col("end") > F.col("start"), F.col("generation_id"))


def _shares_time() -> Any:
    """The interval starts before an earlier one of its partition ended (an overlap).

    Plain comparisons: ``least`` would skip a null ``prev_end`` and flag every first interval.
    """
    return (F.col("prev_end") > F.col("start")) & (F.col("end") > F.col("start"))


def _gaps_out_of_order() -> Any:
    """A gap whose generation is unknown or not above every earlier interval's generation."""
    gen = _gap_gen()
    return _gap_s().isNotNull() & (
        gen.isNull() | (F.col("prev_gen").isNotNull() & (gen <= F.col("prev_gen"))))


@dataclass
class _Checks:
    """What one look at the cached intervals tells the planner (one small job)."""

    overlaps: bool
    gaps_out_of_order: bool


def _checks(context: DataFrame) -> _Checks:
    row = context.select(
        F.max(_shares_time()).alias("overlaps"),
        F.max(_gaps_out_of_order()).alias("gaps_out_of_order"),
    ).first()
    return _Checks(overlaps=bool(row and row["overlaps"]),
                   gaps_out_of_order=bool(row and row["gaps_out_of_order"]))


def _overlaps(context: DataFrame, keys: _Keys, tolerance_s: float, any_: bool) -> DataFrame:
    """Overlap episodes: the exact boundary sweep, run only for partitions that have any.

    Ordered by start, an interval shares time with an earlier one exactly when it starts before
    the running max of their ends (``prev_end``): that finds every partition with an overlap
    (usually none or few), and the sweep over just those partitions finds the episodes. When
    there are none (``any_`` false, from ``_checks``), the result is the empty dataset without
    building the sweep at all.
    """
    if not any_:  # an empty relation planned in the JVM (a Python list would start a worker)
        return context.sparkSession.range(0).select(
            *(F.lit(None).cast(f.dataType).alias(f.name) for f in OVERLAP_SCHEMA.fields))
    suspects = context.where(_shares_time()).select("pk").distinct()
    intervals = context.join(F.broadcast(suspects), "pk", "left_semi").select(
        "pk", "mid", "generation_id", "start", "end")
    segments = _segments(intervals)
    w = Window.partitionBy("pk").orderBy("t")
    marked = segments.select(
        "*",
        F.sum((F.col("owners") < 2).cast("long"))
        .over(w.rowsBetween(Window.unboundedPreceding, 0))
        .alias("episode"),
    ).where(F.col("owners") >= 2)
    episodes = marked.groupBy("pk", "episode").agg(
        F.min("t").alias("start"),
        F.max("next_t").alias("end"),
        F.max("owners").alias("max_owners"),
    )
    iv = intervals.select(
        "pk", "mid", "generation_id",
        F.col("start").alias("i_start"), F.col("end").alias("i_end"),
    )
    joined = episodes.join(iv, "pk").where(
        (F.col("i_start") < F.col("end")) & (F.col("i_end") > F.col("start"))
    )
    found = _named(joined, keys)
    key = ["group", "topic", "partition"]
    episodes_out = (
        found.groupBy(*key, "episode", "start", "end", "max_owners")
        .agg(
            F.array_sort(F.collect_set("member")).alias("members"),
            F.array_sort(F.collect_set("generation_id")).alias("generations"),
        )
        .select(
            *key, "start", "end", "max_owners", "members", "generations",
            (F.col("end") - F.col("start")).alias("duration_s"),
        )
        .withColumn("violation", F.col("duration_s") > F.lit(float(tolerance_s)))
    )
    return episodes_out


def _unowned(
    context: DataFrame, keys: _Keys, gaps_out_of_order: bool
) -> tuple[DataFrame, DataFrame]:
    """Gaps from the running max: an interval starting after all earlier ones ended closes one.

    The gap is charged to the interval that closes it, as a boundary sweep would (its next
    boundary is that start); when a zero-length interval starts there, the sweep's next boundary
    is that interval's end (ends sort before starts), which carries no generation.

    ``partitions`` per generation counts distinct partitions. When every gap's generation is
    above those of all earlier intervals of its partition (``gaps_out_of_order`` false, the
    normal case: generations rise with time), no partition has two gaps in one generation and a
    plain count is exact; otherwise a distinct count over (partition, generation) runs.
    """
    marked = context.select(
        "pk", "mid", "start", "end", "first_own", _gap_s().alias("gap_s"),
        _gap_gen().alias("gap_gen"),
    )
    per_pk = marked.groupBy("pk").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum(F.col("first_own").cast("long")).alias("owners"),
        F.min("start").alias("first_start"),
        F.max("end").alias("last_end"),
        F.coalesce(F.sum("gap_s"), F.lit(0.0)).alias("unowned_s"),
        F.count("gap_s").alias("gaps"),
        F.coalesce(F.max("gap_s"), F.lit(0.0)).alias("max_gap_s"),
    )
    per_partition = _named(per_pk, keys).select(
        "group", "topic", "partition", "intervals", "owners", "first_start", "last_end",
        "unowned_s", "gaps", "max_gap_s",
    )
    gaps = marked.where(F.col("gap_s").isNotNull()).withColumn(
        "tid", F.shiftright("pk", _PARTITION_BITS).cast("int"))
    # per topic first (a partition key is one topic's), then per group
    per_topic = gaps.groupBy("tid", F.col("gap_gen").alias("generation_id")).agg(
        F.sum("gap_s").alias("unowned_partition_s"),
        (F.countDistinct("pk") if gaps_out_of_order else F.count(F.lit(1))).alias("partitions"),
        F.count(F.lit(1)).alias("gaps"),
        F.max("gap_s").alias("max_gap_s"),
    )
    per_generation = per_topic.join(F.broadcast(keys.topics.select("tid", "group")), "tid").groupBy(
        "group", "generation_id"
    ).agg(
        F.sum("unowned_partition_s").alias("unowned_partition_s"),
        F.sum("partitions").alias("partitions"),
        F.sum("gaps").alias("gaps"),
        F.max("max_gap_s").alias("max_gap_s"),
    )
    return per_partition, per_generation


def _moves(
    context: DataFrame, events: DataFrame, members: DataFrame
) -> DataFrame:
    """Moves per generation against the minimum (definitions in the module docstring)."""
    # Per member and generation, from the context window's previous interval (``pm``, ``pr``,
    # ``pg``): ``delta`` changes what the member holds (+1 when it gets a partition; -1 to the
    # previous holder when the next owner's assignment takes it over, unless it had released it;
    # -1 on a release), ``moved`` counts hand-offs to another member, charged to the deciding
    # generation and keyed by the previous holder, and ``new`` counts first assignments. Every
    # id names its group, so group totals are sums over members.
    def fact(id_: Any, gen: Any, delta: Any, moved: Any, new: Any) -> Any:
        return F.struct(id_.cast("int").alias("mid"), gen.cast("long").alias("gen"),
                        delta.cast("int").alias("delta"), moved.cast("int").alias("moved"),
                        new.cast("int").alias("new"))

    pm, pr = F.col("pm"), F.col("pr")
    facts = F.explode(F.array(
        fact(F.col("mid"), F.col("generation_id"), F.lit(1), F.lit(0), pm.isNull()),
        F.when(pm.isNotNull(), fact(pm, F.when(pr, F.col("pg")).otherwise(F.col("generation_id")),
                                    F.when(pr, 0).otherwise(-1), pm != F.col("mid"), F.lit(0))),
        F.when(F.col("released"), fact(F.col("mid"), F.col("end_gen"), F.lit(-1), F.lit(0),
                                       F.lit(0))),
    ))
    per_member = (
        context.where(F.col("generation_id").isNotNull())
        .select(facts.alias("f")).where(F.col("f").isNotNull()).select("f.*")
        .groupBy("mid", "gen")
        .agg(*(F.sum(c).alias(c) for c in ("delta", "moved", "new")))
        .join(F.broadcast(members.select("mid", "group")), "mid")
        .cache()  # small (members x generations); read twice below
    )

    # Per generation of each group. A member is in every generation from its first to its last
    # observed one (peers run no callback in a round that changes nothing for them, so single
    # observations have holes); since both ends are observed generations, the member set changes
    # between consecutive observed generations exactly where a member's first generation is the
    # later one or its last generation the earlier one. Such a generation starts a membership
    # epoch (consecutive generations with the same members are one rebalance as far as the
    # minimum goes: cooperative follow-up rounds, KIP-429) and carries the epoch's minimum.
    spans = members.where(F.col("first_gen").isNotNull())
    zero = F.lit(0).cast("long")
    observed = events.where(F.col("generation_id").isNotNull()).select(
        "group", F.col("generation_id").alias("gen"), zero.alias("joins"), zero.alias("lefts"),
        zero.alias("delta"), zero.alias("moved"), zero.alias("new"))
    ends = spans.select("group", F.explode(F.array(
        F.struct(F.col("first_gen").alias("gen"), F.lit(1).cast("long").alias("joins"),
                 zero.alias("lefts")),
        F.struct(F.col("last_gen").alias("gen"), zero.alias("joins"),
                 F.lit(1).cast("long").alias("lefts")),
    )).alias("e")).select("group", "e.*", zero.alias("delta"), zero.alias("moved"),
                          zero.alias("new"))
    changes = per_member.select("group", "gen", zero.alias("joins"), zero.alias("lefts"),
                                "delta", "moved", "new")
    totals = observed.unionByName(ends).unionByName(changes).groupBy("group", "gen").agg(
        *(F.sum(c).alias(c) for c in ("joins", "lefts", "delta", "moved", "new")))
    w = Window.partitionBy("group").orderBy("gen")
    upto = w.rowsBetween(Window.unboundedPreceding, 0)
    per_gen = totals.select(
        "group",
        "gen",
        "moved",
        (F.sum("joins").over(upto) - F.sum("lefts").over(upto) + F.col("lefts"))
        .cast("int").alias("members"),
        (F.lag("gen").over(w).isNull() | (F.col("joins") > 0)
         | (F.coalesce(F.lag("lefts").over(w), F.lit(0)) > 0)).alias("epoch_start"),
        F.sum("new").over(upto).alias("partitions"),
        # holdings before g: the changes of earlier generations
        (F.sum("delta").over(upto) - F.col("delta")).alias("held_before"),
    ).cache()  # small (generations); read twice below

    # Each member's holdings just before each epoch start: query rows (order 0) sort before
    # their own generation's changes (order 1).
    starts = per_gen.where(F.col("epoch_start")).select(
        "group", "gen", F.col("members").alias("m"), "partitions", "held_before")
    at_starts = starts.join(F.broadcast(spans.select("group", "mid", "first_gen", "last_gen")),
                            "group").where(
        (F.col("gen") >= F.col("first_gen")) & (F.col("gen") <= F.col("last_gen"))
    ).select("mid", "gen", zero.alias("delta"), F.lit(0).alias("order"), "group", "m",
             "partitions", "held_before")
    wm = Window.partitionBy("mid").orderBy("gen", "order").rowsBetween(
        Window.unboundedPreceding, 0)
    none = F.lit(None)
    held = (
        per_member.select(
            "mid", "gen", F.col("delta").cast("long").alias("delta"), F.lit(1).alias("order"),
            none.cast("string").alias("group"), none.cast("int").alias("m"),
            none.cast("long").alias("partitions"), none.cast("long").alias("held_before"))
        .unionByName(at_starts)
        .withColumn("held", F.sum("delta").over(wm))
        .where(F.col("order") == 0)
    )
    # With N partitions and M members, ``base`` = floor(N/M) and the ``extra`` = N - base*M
    # members holding most get base + 1. Only members above base give anything up: each gives
    # held - base, less one for each of the (at most ``extra``) that got a ceil quota.
    base = F.floor(F.col("partitions") / F.col("m"))
    above = F.col("held") > base
    minimum = held.groupBy("group", "gen").agg(
        F.first("held_before").alias("held_before"),
        F.sum("held").alias("held"),
        F.sum(F.when(above, F.col("held") - base)).alias("over"),
        F.sum(above.cast("long")).alias("over_members"),
        F.first(F.col("partitions") - base * F.col("m")).alias("extra"),
    ).select(
        "group", "gen",
        (F.col("held_before") - F.col("held") + F.coalesce(F.col("over"), F.lit(0))
         - F.least(F.col("extra"), F.col("over_members"))).alias("min_moves"),
    )
    return per_gen.join(minimum, ["group", "gen"], "left").select(
        "group",
        F.col("gen").alias("generation_id"),
        "members",
        "epoch_start",
        F.when(F.col("epoch_start"), F.col("partitions")).alias("partitions"),
        F.coalesce("min_moves", F.lit(0)).alias("min_moves"),
        "moved",
        (F.col("moved") - F.coalesce("min_moves", F.lit(0))).alias("extra_moves"),
    )


def _latency(events: DataFrame) -> DataFrame:
    rebalance = events.where(F.col("type").isin("rebalance_completed", "rebalance_failed")).select(
        "group", "client", F.regexp_replace("type", "_", " ").alias("metric"), "latency_s")
    callbacks = events.where(F.col("type").isin(*PARTITION_EVENTS)).select(
        "group",
        "client",
        F.concat(F.regexp_replace("type", "^partitions_", ""), F.lit(" callback")).alias("metric"),
        (F.col("ended") - F.col("started")).alias("latency_s"),
    )
    values = rebalance.unionByName(callbacks).where(F.col("latency_s").isNotNull())
    return values.groupBy("group", "client", "metric").agg(
        F.count(F.lit(1)).alias("count"),
        F.percentile_approx("latency_s", [0.5, 0.9, 0.99], 10000).alias("pcts"),
        F.max("latency_s").alias("max_s"),
        F.avg("latency_s").alias("mean_s"),
    ).select(
        "group", "client", "metric", "count",
        F.col("pcts")[0].alias("p50_s"), F.col("pcts")[1].alias("p90_s"),
        F.col("pcts")[2].alias("p99_s"), "max_s", "mean_s",
    )


def _latency_histogram(events: DataFrame) -> DataFrame:
    """Counts per quarter-decade bucket of latency, 1 ms and below in one bucket."""
    values = events.where(F.col("type").isin("rebalance_completed", *PARTITION_EVENTS)).select(
        "group",
        F.when(F.col("type") == "rebalance_completed", "rebalance")
        .otherwise(F.regexp_replace("type", "^partitions_", "")).alias("metric"),
        F.coalesce(F.col("latency_s"), F.col("ended") - F.col("started")).alias("latency_s"),
    ).where(F.col("latency_s").isNotNull())
    bucket = F.floor(F.log10(F.greatest(F.col("latency_s"), F.lit(1e-3))) * 4).cast("int")
    return values.groupBy("group", "metric", bucket.alias("bucket")).agg(
        F.count(F.lit(1)).alias("count"))


def _member_summary(events: DataFrame, context: DataFrame, members: DataFrame) -> DataFrame:
    t = F.col("type")
    n_parts = F.coalesce(F.size(F.flatten(F.map_values("partitions"))), F.lit(0))

    def count_of(name: str) -> Any:
        return F.sum((t == name).cast("long"))

    base = events.groupBy("group", "member").agg(
        F.first("client", ignorenulls=True).alias("client"),
        F.countDistinct("member_id").alias("member_ids"),
        F.min("ts").alias("first_ts"),
        F.countDistinct("generation_id").alias("generations"),
        count_of("joined").alias("joins"),
        count_of("rebalance_completed").alias("rebalances"),
        count_of("rebalance_failed").alias("rebalances_failed"),
        count_of("partitions_assigned").alias("assigned_events"),
        count_of("partitions_revoked").alias("revoked_events"),
        count_of("partitions_lost").alias("lost_events"),
        count_of("offsets_committed").alias("commits"),
        F.sum(F.when(t == "processed", F.col("last") - F.col("first") + 1)).alias("processed"),
        F.sum(F.col("error").isNotNull().cast("long")).alias("callback_errors"),
        F.sum(F.when(t == "partitions_assigned", n_parts)).alias("assigned_rows"),
        F.sum(F.when(t.isin("partitions_revoked", "partitions_lost"), n_parts))
        .alias("released_rows"),
    )
    owned = context.groupBy("mid").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum(F.col("end_kind").isNull().cast("long")).alias("open_intervals"),
        F.sum(F.col("end") - F.col("start")).alias("owned_partition_s"),
    ).join(F.broadcast(members.select("mid", "group", "member")), "mid").drop("mid")
    # every assigned row that opened no interval was redundant (already owned); every release
    # row that closed none released something not owned
    return (
        base.join(F.broadcast(members.select("group", "member", "member_end", "closed")),
              ["group", "member"], "left")
        .join(owned, ["group", "member"], "left")
        .withColumnRenamed("member_end", "last_ts")
        .fillna({"intervals": 0, "open_intervals": 0, "owned_partition_s": 0.0, "processed": 0,
                 "assigned_rows": 0, "released_rows": 0})
        .withColumn("assigned_while_owned", F.col("assigned_rows") - F.col("intervals"))
        .withColumn(
            "released_while_unowned",
            F.col("released_rows") - (F.col("intervals") - F.col("open_intervals")),
        )
        .drop("assigned_rows", "released_rows")
    )


def _input_quality(classified: DataFrame) -> DataFrame:
    return classified.groupBy(
        "source_file", F.coalesce(F.col("problem"), F.lit("ok")).alias("status")
    ).agg(F.count(F.lit(1)).alias("lines"))


#: Window operators (Spark's ``WindowExec``) buffer each window partition whole: every window
#: here is per Kafka partition (or per partition and member), so a partition that changed owner
#: millions of times would sit in one task's buffer. Spark's default spills that buffer only under
#: memory pressure; past this many rows the audit has it spill, so no task holds more than this
#: much of one partition's history in memory (about 25 MB of intervals). Partitions with a
#: normal history (hundreds of intervals) never reach it.
WINDOW_SPILL_KEY = "spark.sql.windowExec.buffer.spill.threshold"
WINDOW_SPILL_ROWS = 262_144
_SPARK_DEFAULT_SPILL = str(2**31 - 1)


def _bound_window_buffers(spark: SparkSession) -> None:
    """Apply :data:`WINDOW_SPILL_ROWS` unless the session already sets its own threshold."""
    current = spark.conf.get(WINDOW_SPILL_KEY, None)
    if current is None or current == _SPARK_DEFAULT_SPILL:
        spark.conf.set(WINDOW_SPILL_KEY, str(WINDOW_SPILL_ROWS))


@dataclass
class _Prepared:
    """The cached inputs every result is built from."""

    classified: DataFrame
    events: DataFrame
    keys: _Keys
    members: DataFrame
    context: DataFrame


def _prepare(spark: SparkSession, paths: Sequence[str], raw: DataFrame | None) -> _Prepared:
    """Read and classify the events, number the names, and plan the cached interval context."""
    _bound_window_buffers(spark)
    classified = classify(read_events(spark, paths) if raw is None else raw).cache()
    events = _events(classified)
    keys = _keys(spark, events)
    members = _member_info(events, keys).cache()
    # An explicit count: adaptive execution may coalesce a repartition by columns alone into one
    # partition, and everything that reads the cached intervals would then run on one core.
    n = int(spark.conf.get("spark.sql.shuffle.partitions") or "200")
    rows = _partition_rows(events, keys, n)
    # One shuffle of the intervals by partition and one sort feed every per-partition result.
    context = _with_context(_intervals(rows, members).repartition(n, "pk")).cache()
    return _Prepared(classified, events, keys, members, context)


def run_audit(
    spark: SparkSession,
    paths: Sequence[str],
    *,
    tolerance_s: float = 0.05,
    label: str = "events",
    raw: DataFrame | None = None,
) -> AuditResult:
    """Build every result DataFrame; the caller writes or collects them.

    Jobs run here: numbering the names (one small job over the cached events) and one look at
    the cached intervals (``_checks``: any overlap, are gaps' generations in order), which
    computes the intervals every result reads and decides which plans to build. ``raw``:
    events already read (:func:`parse_lines`), in place of ``paths``.
    """
    prepared = _prepare(spark, paths, raw)
    classified, events, keys, members, context = (
        prepared.classified, prepared.events, prepared.keys, prepared.members, prepared.context)
    checks = _checks(context)
    unowned_partition, unowned_generation = _unowned(context, keys, checks.gaps_out_of_order)
    result = AuditResult(label=label, tolerance_s=tolerance_s)
    result.datasets = {
        "input_quality": _input_quality(classified),
        "intervals": _intervals_out(context, keys),
        "overlaps": _overlaps(context, keys, tolerance_s, checks.overlaps),
        "unowned_by_partition": unowned_partition,
        "unowned_by_generation": unowned_generation,
        "moves_by_generation": _moves(context, events, members),
        "latency": _latency(events),
        "latency_histogram": _latency_histogram(events),
        "members": _member_summary(events, context, members),
    }
    return result
