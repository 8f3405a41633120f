"""The ownership audit: DataFrame-only computations over rebalance telemetry.

Definitions (documented for users in the README, "Rebalance telemetry and the ownership audit"):

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

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

__all__ = [
    "EVENT_SCHEMA",
    "KNOWN_TYPES",
    "AuditResult",
    "classify",
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
    return (
        classified.where(F.col("problem").isNull())
        .drop(CORRUPT, "problem")
        .withColumn("group", F.coalesce(F.col("group"), F.lit("")))
        .withColumn("client", F.coalesce(F.col("client"), F.lit("unknown")))
        .withColumn("seq", F.coalesce(F.col("seq"), F.lit(0)))
        .withColumn(
            "rebalance_protocol",
            F.when(F.lower(F.col("rebalance_protocol")) == "cooperative", "cooperative")
            .when(F.lower(F.coalesce(F.col("protocol"), F.lit(""))).contains("cooperative"),
                  "cooperative")
            .otherwise("eager"),
        )
    )


def _partition_rows(events: DataFrame) -> DataFrame:
    """One row per (partition event, partition), with the moment it takes effect."""
    exploded = (
        events.where(F.col("type").isin(*PARTITION_EVENTS))
        .select(
            "group",
            "member",
            "type",
            "generation_id",
            "rebalance_protocol",
            "started",
            "ended",
            "ts",
            "seq",
            F.explode("partitions").alias("topic", "parts"),
        )
        .select("*", F.explode("parts").alias("partition"))
        .drop("parts")
        .where(F.col("partition").isNotNull() & F.col("topic").isNotNull())
    )
    kind = F.regexp_replace(F.col("type"), "^partitions_", "")
    is_assign = kind == "assigned"
    return exploded.select(
        "group",
        "member",
        "topic",
        F.col("partition").cast("int").alias("partition"),
        kind.alias("kind"),
        F.col("generation_id").alias("gen"),
        F.col("rebalance_protocol").alias("rp"),
        # ownership starts when the assigned callback starts, ends when revoked/lost ENDS
        F.when(is_assign, F.col("started")).otherwise(F.greatest("ended", "started")).alias("t"),
        "ts",
        "seq",
    )


def _member_ends(events: DataFrame) -> DataFrame:
    return events.groupBy("group", "member").agg(
        F.max(F.greatest("ts", F.coalesce("ended", "ts"))).alias("member_end"),
        F.max(F.when(F.col("type") == "closed", True).otherwise(False)).alias("closed"),
    )


def _intervals(rows: DataFrame, member_ends: DataFrame) -> DataFrame:
    """Ownership intervals, in one window pass per (member, partition).

    An assigned row that follows a release (or nothing) opens an interval, which the first later
    release closes. Other assigned rows (already owned) and releases of unowned partitions are
    redundant; the member summary counts them (partition rows minus intervals).
    """
    key = ["group", "member", "topic", "partition"]
    w = Window.partitionBy(*key).orderBy("ts", "seq", "t")
    after = w.rowsBetween(1, Window.unboundedFollowing)
    is_assign = F.col("kind") == "assigned"
    release = F.when(~is_assign, F.struct("t", "kind", "gen", "rp"))
    opened = rows.select(
        "*",
        F.coalesce(F.lag(is_assign).over(w), F.lit(False)).alias("prev_assign"),
        F.first(release, ignorenulls=True).over(after).alias("release"),
    ).where(is_assign & ~F.col("prev_assign"))
    return (
        opened.join(F.broadcast(member_ends), ["group", "member"], "left")
        .select(
            "group",
            "topic",
            "partition",
            "member",
            F.col("gen").alias("generation_id"),
            "rp",
            F.col("t").alias("start"),
            F.greatest(F.coalesce("release.t", "member_end"), F.col("t")).alias("end"),
            F.coalesce("release.kind", F.lit("open")).alias("end_kind"),
            F.col("release.gen").alias("end_gen"),
            F.col("release.rp").alias("end_rp"),
            F.col("release").isNull().alias("open"),
        )
        .withColumn("duration_s", F.col("end") - F.col("start"))
    )


def _segments(intervals: DataFrame) -> DataFrame:
    """Sweep over interval boundaries: [t, next_t) segments with their owner count."""
    bounds = F.explode(
        F.array(
            F.struct(F.col("start").alias("t"), F.lit(1).alias("delta"),
                     F.col("generation_id").alias("gen")),
            F.struct(F.col("end").alias("t"), F.lit(-1).alias("delta"),
                     F.lit(None).cast("long").alias("gen")),
        )
    )
    w = Window.partitionBy("group", "topic", "partition").orderBy("t", "delta")
    swept = intervals.select("group", "topic", "partition", bounds.alias("b")).select(
        "group", "topic", "partition", "b.t", "b.delta", "b.gen"
    ).select(
        "*",
        F.sum("delta").over(w.rowsBetween(Window.unboundedPreceding, 0)).alias("owners"),
        F.lead("t").over(w).alias("next_t"),
        F.lead("gen").over(w).alias("next_gen"),
    )
    return swept.where(F.col("next_t").isNotNull() & (F.col("next_t") > F.col("t"))).select(
        "group",
        "topic",
        "partition",
        "t",
        "next_t",
        "owners",
        "next_gen",
        (F.col("next_t") - F.col("t")).alias("length_s"),
    )


def _overlaps(segments: DataFrame, intervals: DataFrame, tolerance_s: float) -> DataFrame:
    key = ["group", "topic", "partition"]
    w = Window.partitionBy(*key).orderBy("t")
    shared = segments.where(F.col("owners") >= 2).select(*key).distinct()
    marked = segments.join(shared, key, "left_semi").select(
        "*",
        F.sum((F.col("owners") < 2).cast("long"))
        .over(w.rowsBetween(Window.unboundedPreceding, 0))
        .alias("episode"),
    ).where(F.col("owners") >= 2)
    episodes = marked.groupBy(*key, "episode").agg(
        F.min("t").alias("start"),
        F.max("next_t").alias("end"),
        F.max("owners").alias("max_owners"),
    )
    iv = intervals.select(
        *key,
        F.col("member"),
        F.col("generation_id"),
        F.col("start").alias("i_start"),
        F.col("end").alias("i_end"),
    )
    joined = episodes.join(iv, key).where(
        (F.col("i_start") < F.col("end")) & (F.col("i_end") > F.col("start"))
    )
    return (
        joined.groupBy(*key, "episode", "start", "end", "max_owners")
        .agg(
            F.array_sort(F.collect_set("member")).alias("members"),
            F.array_sort(F.collect_set("generation_id")).alias("generations"),
        )
        .withColumn("duration_s", F.col("end") - F.col("start"))
        .withColumn("violation", F.col("duration_s") > F.lit(float(tolerance_s)))
        .drop("episode")
    )


def _unowned(segments: DataFrame, intervals: DataFrame) -> tuple[DataFrame, DataFrame]:
    key = ["group", "topic", "partition"]
    gaps = segments.where(F.col("owners") == 0)
    per_partition = (
        intervals.groupBy(*key)
        .agg(
            F.count(F.lit(1)).alias("intervals"),
            F.countDistinct("member").alias("owners"),
            F.min("start").alias("first_start"),
            F.max("end").alias("last_end"),
        )
        .join(
            gaps.groupBy(*key).agg(
                F.sum("length_s").alias("unowned_s"),
                F.count(F.lit(1)).alias("gaps"),
                F.max("length_s").alias("max_gap_s"),
            ),
            key,
            "left",
        )
        .fillna({"unowned_s": 0.0, "gaps": 0, "max_gap_s": 0.0})
    )
    per_generation = gaps.groupBy("group", F.col("next_gen").alias("generation_id")).agg(
        F.sum("length_s").alias("unowned_partition_s"),
        F.countDistinct("topic", "partition").alias("partitions"),
        F.count(F.lit(1)).alias("gaps"),
        F.max("length_s").alias("max_gap_s"),
    )
    return per_partition, per_generation


def _moves(intervals: DataFrame, events: DataFrame) -> DataFrame:
    key = ["group", "topic", "partition"]
    gen_events = events.where(F.col("generation_id").isNotNull())
    last_gen = gen_events.groupBy("group", "member").agg(
        F.max("generation_id").alias("member_last_gen"))
    iv = (
        intervals.where(F.col("generation_id").isNotNull())
        .join(F.broadcast(last_gen), ["group", "member"], "left")
        # A cooperative revocation releases a partition for the next round (KIP-429) unless it
        # is the member's goodbye (revoked in its last generation, i.e. on leave/close).
        .withColumn(
            "released",
            F.coalesce(
                (F.col("end_kind") == "revoked")
                & (F.col("end_rp") == "cooperative")
                & F.col("end_gen").isNotNull()
                & (F.col("end_gen") < F.col("member_last_gen")),
                F.lit(False),
            ),
        )
    )
    # One window pass over each partition's intervals gives every fact the rest needs: moves
    # (charged to the deciding generation), holding changes (+1 to the new owner, -1 to the
    # previous holder unless it had released, -1 on a release) and the first assignment.
    w = Window.partitionBy(*key).orderBy("start", "end", "member")
    prev_member = F.lag("member").over(w)
    prev_released = F.lag("released").over(w)
    prev_end_gen = F.lag("end_gen").over(w)
    ctx = iv.select(
        "group", "member", "generation_id", "released", "end_gen",
        prev_member.alias("pm"), prev_released.alias("pr"), prev_end_gen.alias("pg"),
    )

    def fact(kind: str, member: Any, gen: Any, value: int) -> Any:
        return F.struct(F.lit(kind).alias("kind"), member.cast("string").alias("member"),
                        gen.cast("long").alias("gen"), F.lit(value).alias("value"))

    null = F.lit(None)
    facts = F.explode(F.array(
        fact("hold", F.col("member"), F.col("generation_id"), 1),
        F.when(F.col("pm").isNotNull() & ~F.col("pr"),
               fact("hold", F.col("pm"), F.col("generation_id"), -1)),
        F.when(F.col("released"), fact("hold", F.col("member"), F.col("end_gen"), -1)),
        F.when(F.col("pm").isNotNull() & (F.col("pm") != F.col("member")),
               fact("move", null, F.when(F.col("pr"), F.col("pg"))
                    .otherwise(F.col("generation_id")), 1)),
        F.when(F.col("pm").isNull(), fact("new", null, F.col("generation_id"), 1)),
    ))
    summed = (
        ctx.select("group", facts.alias("f"))
        .where(F.col("f").isNotNull())
        .groupBy("group", "f.kind", "f.member", "f.gen")
        .agg(F.sum("f.value").alias("value"))
        .cache()
    )
    moved = summed.where(F.col("kind") == "move").select(
        "group", F.col("gen").alias("generation_id"), F.col("value").alias("moved"))
    deltas = summed.where(F.col("kind") == "hold").select(
        "group", "member", "gen", F.col("value").alias("delta"))
    firsts = summed.where(F.col("kind") == "new").select(
        "group", "gen", F.col("value").alias("new"))

    # Membership epochs: consecutive generations with the same members are one rebalance as far
    # as the minimum goes (cooperative follow-up rounds, KIP-429); the minimum is charged to the
    # first generation of each epoch.
    # A member is in every generation from its first to its last observed one: peers run no
    # callback in a round that changes nothing for them, so single observations have holes.
    spans = gen_events.groupBy("group", "member").agg(
        F.min("generation_id").alias("first_gen"), F.max("generation_id").alias("last_gen"))
    all_gens = gen_events.select("group", F.col("generation_id").alias("gen")).distinct()
    gen_members = all_gens.join(spans, "group").where(
        (F.col("gen") >= F.col("first_gen")) & (F.col("gen") <= F.col("last_gen"))
    ).select("group", "member", "gen")
    sets = gen_members.groupBy("group", "gen").agg(
        F.array_sort(F.collect_set("member")).alias("member_set"))
    ws = Window.partitionBy("group").orderBy("gen")
    sets = sets.withColumn("prev_set", F.lag("member_set").over(ws)).withColumn(
        "epoch_start", F.col("prev_set").isNull() | (F.col("prev_set") != F.col("member_set")))
    starts = sets.where(F.col("epoch_start")).select("group", "gen")
    members = gen_members.distinct().join(starts, ["group", "gen"])
    # holdings of each member just before g: query rows (order 0) sort before their own
    # generation's deltas (order 1)
    wm = Window.partitionBy("group", "member").orderBy("gen", "order").rowsBetween(
        Window.unboundedPreceding, 0)
    held = (
        deltas.select("group", "member", "gen", "delta", F.lit(1).alias("order"))
        .unionByName(members.select("group", "member", "gen", F.lit(0).alias("delta"),
                                    F.lit(0).alias("order")))
        .withColumn("held", F.sum("delta").over(wm))
        .where(F.col("order") == 0)
        .select("group", "member", "gen", "held")
    )
    wg = Window.partitionBy("group").orderBy("gen", "order").rowsBetween(
        Window.unboundedPreceding, 0)
    group_deltas = deltas.groupBy("group", "gen").agg(F.sum("delta").alias("delta"))
    # query rows see the deltas of earlier generations and the partitions first assigned up to
    # and including their own (order -1)
    held_total = (
        group_deltas.select("group", "gen", "delta", F.lit(0).alias("new"), F.lit(1).alias("order"))
        .unionByName(firsts.select("group", "gen", F.lit(0).alias("delta"), "new",
                                   F.lit(-1).alias("order")))
        .unionByName(starts.select("group", "gen", F.lit(0).alias("delta"), F.lit(0).alias("new"),
                                   F.lit(0).alias("order")))
        .withColumn("held_before", F.sum("delta").over(wg))
        .withColumn("partitions", F.sum("new").over(wg))
        .where(F.col("order") == 0)
        .select("group", "gen", "held_before", "partitions")
    )
    wr = Window.partitionBy("group", "gen").orderBy(F.desc("held"), "member")
    wq = Window.partitionBy("group", "gen")
    quotas = (
        held.withColumn("rank", F.row_number().over(wr))
        .withColumn("m", F.count(F.lit(1)).over(wq))
        .join(held_total, ["group", "gen"])
        .withColumn("base", F.floor(F.col("partitions") / F.col("m")))
        .withColumn("extra", F.col("partitions") - F.col("base") * F.col("m"))
        .withColumn("quota", F.col("base") + (F.col("rank") <= F.col("extra")).cast("long"))
        .withColumn("excess", F.greatest(F.col("held") - F.col("quota"), F.lit(0)))
    )
    minimum = quotas.groupBy("group", "gen").agg(
        F.first("partitions").alias("partitions"),
        F.first("held_before").alias("held_before"),
        F.sum("held").alias("held_by_members"),
        F.sum("excess").alias("excess"),
    ).select(
        "group",
        "gen",
        "partitions",
        (F.col("held_before") - F.col("held_by_members") + F.col("excess")).alias("min_moves"),
    )
    per_gen = sets.join(minimum, ["group", "gen"], "left").select(
        "group",
        F.col("gen").alias("generation_id"),
        F.size("member_set").alias("members"),
        "epoch_start",
        "partitions",
        "min_moves",
    )
    return (
        per_gen.join(moved, ["group", "generation_id"], "full")
        .fillna({"moved": 0, "min_moves": 0, "epoch_start": False})
        .withColumn("extra_moves", F.col("moved") - F.col("min_moves"))
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


def _member_summary(events: DataFrame, intervals: DataFrame, member_ends: DataFrame) -> DataFrame:
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
    owned = intervals.groupBy("group", "member").agg(
        F.count(F.lit(1)).alias("intervals"),
        F.sum(F.col("open").cast("long")).alias("open_intervals"),
        F.sum("duration_s").alias("owned_partition_s"),
    )
    # every assigned row that opened no interval was redundant (already owned); every release
    # row that closed none released something not owned
    return (
        base.join(F.broadcast(member_ends), ["group", "member"], "left")
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


def run_audit(
    spark: SparkSession,
    paths: Sequence[str],
    *,
    tolerance_s: float = 0.05,
    label: str = "events",
) -> AuditResult:
    """Build every result DataFrame (lazily; the caller writes or collects them)."""
    classified = classify(read_events(spark, paths)).cache()
    events = _events(classified)
    # Shuffle events (compact: partitions as arrays) by member and pair them per (member,
    # partition) where they land; then shuffle the intervals once by partition, which every
    # later window and aggregation shares without further exchanges of the big tables.
    rows = _partition_rows(events.repartition("group", "member"))
    member_ends = _member_ends(events).cache()
    intervals = (
        _intervals(rows, member_ends).repartition("group", "topic", "partition").cache()
    )
    segments = _segments(intervals).cache()
    unowned_partition, unowned_generation = _unowned(segments, intervals)
    result = AuditResult(label=label, tolerance_s=tolerance_s)
    result.datasets = {
        "input_quality": _input_quality(classified),
        "intervals": intervals,
        "overlaps": _overlaps(segments, intervals, tolerance_s),
        "unowned_by_partition": unowned_partition,
        "unowned_by_generation": unowned_generation,
        "moves_by_generation": _moves(intervals, events),
        "latency": _latency(events),
        "latency_histogram": _latency_histogram(events),
        "members": _member_summary(events, intervals, member_ends),
    }
    return result
