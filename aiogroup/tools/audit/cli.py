"""``python -m aiogroup analyze EVENTS... --out DIR``: run the audit, write Parquet, report."""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiogroup.tools.audit.session import AnalyticsError

__all__ = ["expand_paths", "main", "parse_args"]

_REMOTE = ("hdfs://", "s3a://", "s3://", "gs://", "abfs://", "abfss://", "file://", "dbfs:/")


def expand_paths(specs: Sequence[str]) -> list[str]:
    """Files, directories (every ``*.jsonl`` below) and globs -> files. Remote URIs pass through."""
    out: list[str] = []
    for spec in specs:
        if spec.startswith(_REMOTE):
            out.append(spec)
            continue
        path = Path(spec)
        if path.is_dir():
            out.extend(sorted(str(p) for p in path.rglob("*.jsonl")))
        elif path.is_file():
            out.append(str(path))
        else:
            matches = sorted(glob.glob(spec, recursive=True))
            files: list[str] = []
            for m in matches:
                mp = Path(m)
                files.extend(sorted(str(p) for p in mp.rglob("*.jsonl")) if mp.is_dir() else [m])
            if not files:
                raise AnalyticsError(f"no event files match {spec!r}")
            out.extend(files)
    if not out:
        raise AnalyticsError("no event files given")
    return out


def _partition_range(text: str) -> tuple[int, int]:
    try:
        lo, _, hi = text.partition("-")
        first, last = int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST-LAST, got {text!r}") from None
    if first < 0 or last < first:
        raise argparse.ArgumentTypeError(f"bad partition range {text!r}")
    return first, last


def parse_args(argv: Sequence[str], prog: str = "aiogroup analyze") -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Audit rebalance telemetry: ownership overlaps, unowned time, moves, latency.",
    )
    p.add_argument("events", nargs="*", help="event files, directories or globs (JSON Lines)")
    live = p.add_argument_group(
        "live (--follow TOPIC): Structured Streaming over a telemetry topic"
    )
    live.add_argument("--follow", metavar="TOPIC", default=None,
                      help="audit the telemetry topic as events arrive (docs/audit.md, 'Live')")
    live.add_argument("--bootstrap", default=None, metavar="HOST:PORT[,...]",
                      help="the Kafka cluster holding TOPIC")
    live.add_argument("--skew", type=float, default=2.0, metavar="SECONDS",
                      help="watermark delay: how far members' clocks and deliveries may lag "
                           "(default 2)")
    live.add_argument("--trigger", type=float, default=1.0, metavar="SECONDS",
                      help="micro-batch interval (default 1)")
    live.add_argument("--refresh", type=float, default=60.0, metavar="SECONDS",
                      help="rewrite the datasets and the report this often (0: only at the end)")
    live.add_argument("--until-idle", type=float, default=None, metavar="SECONDS",
                      help="stop once no event came for this long (default: run until stopped)")
    live.add_argument("--from", dest="starting", choices=("earliest", "latest"),
                      default="earliest", help="where a new run starts reading (default earliest)")
    p.add_argument("--out", required=True, help="output directory (one Parquet dataset per result)")
    p.add_argument("--compare", action="append", default=[], metavar="EVENTS",
                   help="a second event set shown side by side (e.g. eager vs cooperative)")
    p.add_argument("--label", default=None, help="name of the first event set in the report")
    p.add_argument("--compare-label", default=None, help="name of the --compare event set")
    p.add_argument("--tolerance", type=float, default=0.05,
                   help="clock-skew tolerance in seconds: shorter overlaps are counted, not "
                        "reported as violations (default 0.05)")
    p.add_argument("--master", default=None,
                   help="Spark master (default: spark-submit's, else local[*])")
    p.add_argument("--shuffle-partitions", type=int, default=None,
                   help="spark.sql.shuffle.partitions (local default: 2 x cores)")
    p.add_argument("--driver-memory", default=None,
                   help="local mode: driver JVM heap (default: a quarter of RAM, 1-4g)")
    p.add_argument("--ui", action="store_true", help="enable the Spark UI (off by default)")
    p.add_argument("--report", default=None,
                   help="HTML report path (default OUT/report.html); 'none' to skip")
    p.add_argument("--gantt-topic", default=None,
                   help="topic shown in the timeline (default: the first)")
    p.add_argument("--gantt-partitions", type=_partition_range, default=None, metavar="FIRST-LAST",
                   help="partition range in the timeline (default: the first 24)")
    p.add_argument("--fail-on-overlap", action="store_true",
                   help="exit with status 3 when an overlap beyond the tolerance is found")
    p.add_argument("--quiet", action="store_true", help="no summary on stdout")
    return p.parse_args(list(argv))


def main(argv: Sequence[str] | None = None, prog: str = "aiogroup analyze") -> int:
    """Run the audit. Returns 0, 2 on a usage/environment error, 3 for --fail-on-overlap hits."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv, prog)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return _run(args)
    except AnalyticsError as exc:
        print(f"aiogroup analyze: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.follow:
        from aiogroup.tools.audit.live_cli import run_follow

        return run_follow(args)
    if not args.events:
        raise AnalyticsError("give event files, or --follow TOPIC --bootstrap HOST:PORT")
    from aiogroup.tools.audit.audit import run_audit
    from aiogroup.tools.audit.report import collect, render_html, summary_text
    from aiogroup.tools.audit.session import build_session

    paths = expand_paths(args.events)
    compare_paths = expand_paths(args.compare) if args.compare else []
    out = args.out.rstrip("/")
    spark = build_session(args.master, ui=args.ui, shuffle_partitions=args.shuffle_partitions,
                          driver_memory=args.driver_memory)
    began = time.perf_counter()
    sets = [(args.label or _default_label(args.events), paths, out)]
    if compare_paths:
        sets.append((args.compare_label or _default_label(args.compare), compare_paths,
                     f"{out}/compare"))
    collected: list[Any] = []
    violations = 0
    for label, files, target in sets:
        result = run_audit(spark, files, tolerance_s=args.tolerance, label=label)
        for name, df in result.datasets.items():
            df.write.mode("overwrite").parquet(f"{target}/{name}")
        data = collect(spark, target, label, args.tolerance, args.gantt_topic,
                       args.gantt_partitions)
        violations += data.violations
        collected.append(data)
        if not args.quiet:
            print(summary_text(data))
    elapsed = time.perf_counter() - began
    if args.report != "none" and not _is_remote(out):
        report = Path(args.report or os.path.join(out, "report.html"))
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(render_html(collected), encoding="utf-8")
        if not args.quiet:
            print(f"report: {report}")
    if not args.quiet:
        print(f"audit finished in {elapsed:.1f} s; Parquet datasets under {out}")
    return 3 if args.fail_on_overlap and violations else 0


def _is_remote(path: str) -> bool:
    return path.startswith(_REMOTE) and not path.startswith("file://")


def _default_label(specs: Sequence[str]) -> str:
    first = specs[0].rstrip("/")
    return os.path.basename(first) or first
