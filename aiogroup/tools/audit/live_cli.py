"""``python -m aiogroup analyze --follow TOPIC --bootstrap HOST:PORT --out DIR``: the live audit.

Runs until stopped (Ctrl-C, SIGTERM), ``--until-idle`` seconds without an event, or, with
``--fail-on-overlap``, the first alert (exit status 3). The datasets and ``report.html`` are
written every ``--refresh`` seconds and when it stops.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from aiogroup.tools.audit.session import AnalyticsError, build_session, is_local_master

__all__ = ["run_follow", "session_for_follow"]


def session_for_follow(master: str | None, *, ui: bool = False,
                       shuffle_partitions: int | None = None,
                       driver_memory: str | None = None) -> Any:
    """A session with Spark's Kafka source on its class path. Locally the pinned jars are
    added; under spark-submit they must come with ``--jars`` (docs/audit-cluster.md)."""
    from aiogroup.tools.audit.kafka_source import ensure_kafka_source

    extra: dict[str, str] = {}
    submitted = bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_SUBMIT"))
    if is_local_master(master) and not submitted:
        extra["spark.jars"] = ",".join(str(p) for p in ensure_kafka_source())
    return build_session(master, ui=ui, shuffle_partitions=shuffle_partitions or 2,
                         driver_memory=driver_memory, extra_conf=extra)


def run_follow(args: argparse.Namespace) -> int:
    from aiogroup.tools.audit.live import follow, refresh
    from aiogroup.tools.audit.report import render_html, summary_text

    if not args.bootstrap:
        raise AnalyticsError("--follow needs --bootstrap HOST:PORT")
    out = Path(args.out)
    spark = session_for_follow(args.master, ui=args.ui, shuffle_partitions=args.shuffle_partitions,
                               driver_memory=args.driver_memory)
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    stdout = None if args.quiet else sys.stdout
    with warnings.catch_warnings():  # "PySpark does not yet fully support pandas >= 3"
        warnings.simplefilter("ignore", FutureWarning)
        live = follow(spark, args.bootstrap, args.follow, out, tolerance_s=args.tolerance,
                      skew_s=args.skew, trigger_s=args.trigger, starting=args.starting,
                      stdout=stdout)
    if stdout:
        print(f"following {args.follow} on {args.bootstrap}: micro-batches every "
              f"{args.trigger:g} s, watermark {args.skew:g} s behind the latest event, "
              f"tolerance {args.tolerance:g} s; results under {out}", flush=True)
    last_refresh = time.monotonic()
    failed = False
    try:
        while not stop.is_set():
            stop.wait(0.2)  # the driver's poll of its own flags; the queries run on their own
            if not all(q.isActive for q in live.queries):
                raise AnalyticsError(live.failure() or "a streaming query stopped")
            if args.fail_on_overlap and live.alerts:
                failed = True
                break
            idle = time.time() - (live.batches[-1].at if live.batches else time.time())
            if args.until_idle is not None and live.batches and idle >= args.until_idle:
                break
            if args.refresh and time.monotonic() - last_refresh >= args.refresh and live.batches:
                _refresh(spark, out, args, refresh, render_html)
                last_refresh = time.monotonic()
    finally:
        # the datasets written at the stop cover every event the alerts were judged from:
        # the events query finishes its micro-batch (bounded: it may have failed)
        if all(q.isActive for q in live.queries):
            live.wait(lambda lv: lv.caught_up(), max(30.0, 10 * args.trigger))
        live.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    data = _refresh(spark, out, args, refresh, render_html) if live.batches else None
    if stdout and data is not None:
        print(summary_text(data))
        print(f"live audit stopped after {len(live.batches)} micro-batches, "
              f"{len(live.alerts)} alert(s); Parquet datasets under {out}")
    return 3 if args.fail_on_overlap and (failed or live.alerts) else 0


def _refresh(spark: Any, out: Path, args: argparse.Namespace, refresh: Any,
             render_html: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        data = refresh(spark, out, args.follow, tolerance_s=args.tolerance,
                       label=args.label or args.follow)
    if args.report != "none":
        report = Path(args.report or out / "report.html")
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(render_html([data]), encoding="utf-8")
    return data
