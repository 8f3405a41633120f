"""The figures of ``bench_rolling_bounce.py``: one Spark audit over every run's telemetry, each
run's figures over the generations of its bounce, the table and the ratios it prints."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench_rolling_bounce import RunResult


def audit(runs: Sequence[RunResult], out: Path, master: str) -> Any:
    """One Spark audit over every run's events (groups stay separate); returns the session."""
    import warnings

    from aiogroup.tools.audit.audit import run_audit
    from aiogroup.tools.audit.session import build_session

    warnings.simplefilter("ignore", FutureWarning)
    spark = build_session(master, log_level="ERROR", shuffle_partitions=2)
    result = run_audit(spark, [str(r.events) for r in runs], label="rolling bounce")
    for name, df in result.datasets.items():
        df.write.mode("overwrite").parquet(str(out / name))
    return spark


def figures(spark: Any, out: Path, runs: Sequence[RunResult]) -> None:
    """Each run's figures over the generations of its bounce, computed by Spark from the
    audit's datasets (``run.figures``)."""
    from pyspark.sql import functions as F

    rows = [(r.group, r.formed_generation, r.final_generation) for r in runs
            if r.formed_generation is not None and r.final_generation is not None]
    if not rows:
        return
    windows = spark.createDataFrame(rows, "group string, g0 long, g1 long")
    in_bounce = (F.col("generation_id") > F.col("g0")) & (F.col("generation_id") <= F.col("g1"))
    read = spark.read.parquet
    unowned = read(str(out / "unowned_by_generation")).join(windows, "group").where(in_bounce) \
        .groupBy("group").agg(F.sum("unowned_partition_s").alias("unowned_s"),
                              F.max("max_gap_s").alias("max_gap_s"),
                              F.sum("gaps").alias("stops"))
    moves = read(str(out / "moves_by_generation")).join(windows, "group").where(in_bounce) \
        .groupBy("group").agg(F.count(F.lit(1)).alias("rebalances"),
                              F.sum("moved").alias("moved"), F.sum("min_moves").alias("min_moves"))
    overlaps = read(str(out / "overlaps")).groupBy("group").agg(
        F.count(F.lit(1)).alias("overlaps"),
        F.sum(F.col("violation").cast("long")).alias("violations"))
    intervals = read(str(out / "intervals")).join(windows, "group")
    first_release = intervals.where(
        (F.col("end_gen") >= F.col("g0")) & F.col("end_kind").isin("revoked", "lost")
    ).groupBy("group").agg(F.min("end").alias("bounce_start"))
    last_assign = intervals.where(in_bounce).groupBy("group").agg(
        F.max("start").alias("bounce_end"))
    stalls = _stalls(spark, runs)
    table = (windows.select("group").join(unowned, "group", "left").join(moves, "group", "left")
             .join(overlaps, "group", "left").join(first_release, "group", "left")
             .join(last_assign, "group", "left").toPandas())
    by_group = {row["group"]: {k: _num(v) for k, v in row.items() if k != "group"}
                for row in table.to_dict("records")}
    for r in runs:
        row = by_group.get(r.group)
        if row is None:
            continue
        r.figures = {
            "unowned_s": row["unowned_s"],
            "max_gap_s": row["max_gap_s"],
            "stops": int(row["stops"]),
            "rebalances": int(row["rebalances"]),
            "moved": int(row["moved"]),
            "min_moves": int(row["min_moves"]),
            "overlaps": int(row["overlaps"]),
            "violations": int(row["violations"]),
            "bounce_s": row["bounce_end"] - row["bounce_start"],
            "bounce_start": row["bounce_start"],
        }
        if r.group in stalls:
            r.figures["stall_s"], r.figures["processed"] = stalls[r.group]


def _stalls(spark: Any, runs: Sequence[RunResult]) -> dict[str, tuple[float, int]]:
    """Per run: the longest time between consecutive ``processed`` events of one partition
    that overlaps the bounce (first SIGTERM to last "safe"), and the records processed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = [(r.group, *r.window) for r in runs if r.window is not None]
    if not rows:
        return {}
    windows = spark.createDataFrame(rows, "group string, t0 double, t1 double")
    schema = ("type string, ts double, `group` string, topic string, `partition` long, "
              "first long, last long")
    events = spark.read.schema(schema).json([str(r.events) for r in runs]) \
        .where(F.col("type") == "processed")
    by_partition = Window.partitionBy("group", "topic", "partition").orderBy("ts")
    gaps = events.withColumn("prev", F.lag("ts").over(by_partition)).join(windows, "group") \
        .where(F.col("prev").isNotNull() & (F.col("ts") > F.col("t0"))
               & (F.col("prev") < F.col("t1")))
    stall = gaps.groupBy("group").agg(F.max(F.col("ts") - F.col("prev")).alias("stall_s"))
    processed = events.groupBy("group").agg(
        F.sum(F.col("last") - F.col("first") + 1).alias("processed"))
    out: dict[str, tuple[float, int]] = {}
    for row in stall.join(processed, "group").collect():
        out[row["group"]] = (float(row["stall_s"]), int(row["processed"]))
    return out


def _num(value: Any) -> float:
    """A figure from a left join: missing (None, NaN) is 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number


def convergence(r: RunResult) -> dict[str, float]:
    """The run's convergence figures over its bounces (the bench's module doc defines them):
    ``join`` (median) and ``join_max``, from the replacement's start to the group safe;
    ``seen`` (median), from the broker first listing it; ``leave`` (median), from the SIGTERM
    to the group safe without the member, over the leaves that settled within the restart
    delay (``leaves``: how many did)."""
    joins = [float(j[1]) for j in r.joins if j[1] is not None]
    seen = [float(j[2]) for j in r.joins if j[2] is not None]
    leaves = [float(j[0]) for j in r.joins if j[0] is not None]
    out: dict[str, float] = {"leaves": len(leaves)}
    if joins:
        out["join"], out["join_max"] = statistics.median(joins), max(joins)
    if seen:
        out["seen"] = statistics.median(seen)
    if leaves:
        out["leave"] = statistics.median(leaves)
    return out


def _s(figures: Mapping[str, float], key: str, width: int) -> str:
    return f"{figures[key]:>{width}.2f}" if key in figures else f"{'-':>{width}}"


def print_table(runs: Sequence[RunResult]) -> None:
    head = (f"{'run':<34}{'unowned p-s':>12}{'stops':>6}{'max gap':>9}{'stall s':>8}"
            f"{'rebal.':>7}{'moved':>6}{'overlaps':>9}{'bounce s':>9}{'clock s':>8}"
            f"{'join s':>8}{'max':>6}{'seen':>6}{'leave s':>8}")
    print(head)
    for r in runs:
        f = r.figures
        if not f:
            print(f"{r.label:<34}  no figures: {'; '.join(r.problems) or 'no data'}")
            continue
        stall = f"{f['stall_s']:.2f}" if "stall_s" in f else "-"
        c = convergence(r)
        print(f"{r.label:<34}{f['unowned_s']:>12.1f}{f['stops']:>6}{f['max_gap_s']:>9.2f}"
              f"{stall:>8}{f['rebalances']:>7}"
              f"{f['moved']:>6}{f['overlaps']:>9}{f['bounce_s']:>9.1f}"
              f"{r.clock_s:>8.1f}{_s(c, 'join', 8)}{_s(c, 'join_max', 6)}{_s(c, 'seen', 6)}"
              f"{_s(c, 'leave', 8)}")
        for problem in r.problems:
            print(f"    ! {problem}")


def verdicts(runs: Sequence[RunResult]) -> list[str]:
    """The targets, per broker: cooperative aiogroup >= 10x less unowned partition-seconds than
    eager aiogroup, and no more than librdkafka cooperative (same broker, same bench run)."""
    out: list[str] = []
    for broker in sorted({r.broker for r in runs}):
        by = {r.spec.name: r.figures for r in runs if r.broker == broker and r.figures}
        out += _consumer_protocol(broker, {r.spec.name: r for r in runs if r.broker == broker})
        bad = [r.label for r in runs if r.broker == broker and r.figures.get("violations")]
        out.append(f"{broker}: double ownership: "
                   + ("none (PASS)" if not bad else f"in {', '.join(bad)} (FAIL)"))
        coop = by.get("aiogroup-coop")
        if coop is None:
            continue
        eager = by.get("aiogroup-eager")
        if eager is not None:
            ratio = eager["unowned_s"] / max(coop["unowned_s"], 1e-9)
            out.append(f"{broker}: aiogroup eager / cooperative unowned partition-seconds = "
                       f"{eager['unowned_s']:.1f} / {coop['unowned_s']:.1f} = {ratio:.1f}x "
                       f"({'PASS' if ratio >= 10 else 'MISS'}: target >= 10x)")
        if eager is not None and "stall_s" in eager and "stall_s" in coop:
            out.append(f"{broker}: longest stall of a partition, aiogroup eager / cooperative = "
                       f"{eager['stall_s']:.2f} s / {coop['stall_s']:.2f} s = "
                       f"{eager['stall_s'] / max(coop['stall_s'], 1e-9):.1f}x")
        close = by.get("aiogroup-coop-close")
        if eager is not None and close is not None:
            ratio = eager["unowned_s"] / max(close["unowned_s"], 1e-9)
            out.append(f"{broker}: aiogroup eager / cooperative closing without hand-off = "
                       f"{eager['unowned_s']:.1f} / {close['unowned_s']:.1f} = {ratio:.1f}x")
        aiokafka = by.get("aiokafka-eager")
        for name, ours in (("default close()", coop), ("stop, then close()", close)):
            if aiokafka is None or ours is None:
                continue
            line = (f"{broker}: aiokafka / aiogroup {name}: unowned partition-seconds "
                    f"{aiokafka['unowned_s']:.1f} / {ours['unowned_s']:.1f} = "
                    f"{aiokafka['unowned_s'] / max(ours['unowned_s'], 1e-9):.1f}x")
            if "stall_s" in aiokafka and "stall_s" in ours:
                line += (f"; longest stall {aiokafka['stall_s']:.2f} s / {ours['stall_s']:.2f} s"
                         f" = {aiokafka['stall_s'] / max(ours['stall_s'], 1e-9):.1f}x")
            out.append(line)
        rdk = by.get("librdkafka-coop")
        if rdk is not None:
            ratio = rdk["unowned_s"] / max(coop["unowned_s"], 1e-9)
            out.append(f"{broker}: librdkafka cooperative / aiogroup cooperative = "
                       f"{rdk['unowned_s']:.1f} / {coop['unowned_s']:.1f} = {ratio:.2f}x "
                       f"({'PASS' if ratio >= 1 else 'MISS'}: target >= 1, no worse)")
    return out


def _consumer_protocol(broker: str, by: Mapping[str, RunResult]) -> list[str]:
    """KIP-848 beside the classic protocol: aiogroup's consumer-protocol run against the
    peers' and against aiogroup cooperative, same broker, same bench run."""
    ours = by.get("aiogroup-consumer")
    if ours is None or not ours.figures:
        return []
    out = []
    mine, c = ours.figures, convergence(ours)
    for name in ("librdkafka-consumer", "java-consumer", "aiogroup-coop", "java-coop",
                 "librdkafka-coop"):
        theirs = by.get(name)
        if theirs is None or not theirs.figures:
            continue
        f, t = theirs.figures, convergence(theirs)
        line = (f"{broker}: {name} / aiogroup-consumer: unowned partition-seconds "
                f"{f['unowned_s']:.1f} / {mine['unowned_s']:.1f} = "
                f"{f['unowned_s'] / max(mine['unowned_s'], 1e-9):.2f}x")
        if "stall_s" in f and "stall_s" in mine:
            line += (f"; longest stall {f['stall_s']:.2f} / {mine['stall_s']:.2f} s = "
                     f"{f['stall_s'] / max(mine['stall_s'], 1e-9):.2f}x")
        if "join" in t and "join" in c:
            line += (f"; join to safe (median) {t['join']:.2f} / {c['join']:.2f} s = "
                     f"{t['join'] / max(c['join'], 1e-9):.2f}x")
        out.append(line)
    return out
