"""Building a SparkSession that behaves on a laptop and leaves a cluster's settings alone."""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

from aiogroup.errors import ConfigurationError

__all__ = [
    "CODEGEN_CACHE_ENTRIES",
    "LOCAL_JVM_OPTIONS",
    "AnalyticsError",
    "build_session",
    "find_java",
    "is_local_master",
]

_LOG4J2 = Path(__file__).with_name("log4j2.properties")
LOCAL_JVM_OPTIONS = (
    "-XX:+UseParallelGC",
    "-XX:FreqInlineSize=100",
    "-XX:InlineSmallCode=1000",
    "-XX:MetaspaceSize=256m",
)


CODEGEN_CACHE_ENTRIES = 1000


class AnalyticsError(ConfigurationError):
    """The audit cannot run here (no Java, no PySpark, unreadable input)."""


def find_java() -> str:
    """The java binary Spark will use (``$JAVA_HOME/bin/java`` or ``java`` on PATH)."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if candidate.exists():
            return str(candidate)
        raise AnalyticsError(f"JAVA_HOME={home} has no bin/java; install Java 17+ or fix JAVA_HOME")
    found = shutil.which("java")
    if found is None:
        raise AnalyticsError(
            "Spark needs Java 17+: set JAVA_HOME or put `java` on PATH "
            "(e.g. apt-get install openjdk-17-jre-headless)"
        )
    return found


def is_local_master(master: str | None) -> bool:
    return master is None or master.startswith("local")


def build_session(
    master: str | None = None,
    *,
    app_name: str = "aiogroup-audit",
    ui: bool = False,
    shuffle_partitions: int | None = None,
    log_level: str = "WARN",
    driver_memory: str | None = None,
    extra_conf: dict[str, str] | None = None,
) -> Any:
    """A SparkSession for the audit.

    ``master=None`` means: whatever spark-submit configured, else ``local[*]``. In local mode the
    driver binds to 127.0.0.1, shuffles use ``2 x cores`` partitions and the UI is off unless
    asked for; on a cluster only the app name is set, everything else is the cluster's.
    """
    find_java()
    try:
        with warnings.catch_warnings():  # "PySpark does not yet fully support pandas >= 3"
            warnings.simplefilter("ignore", FutureWarning)
            from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - the analytics extra is missing
        raise AnalyticsError("the audit needs PySpark: pip install 'aiogroup[analytics]'") from exc

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    submitted = _under_spark_submit()
    if master is None and not submitted:
        master = "local[*]"
    builder = SparkSession.builder.appName(app_name)
    local = is_local_master(master) and not (submitted and master is None)
    if master is not None:
        builder = builder.master(master)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no guessing of a LAN address
        cores = os.cpu_count() or 2
        conf = {
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
            "spark.sql.shuffle.partitions": str(shuffle_partitions or 2 * cores),
            "spark.ui.enabled": "true" if ui else "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.sql.adaptive.enabled": "true",
            # local mode runs everything in the driver JVM; Spark's 1g default spills early
            "spark.driver.memory": driver_memory or _default_driver_memory(),
            # Sort and aggregation pages off the heap: the collector then never copies them
            # (on heap they are promoted, copied and compacted: half the job's GC time).
            "spark.memory.offHeap.enabled": "true",
            "spark.memory.offHeap.size": _default_off_heap(),
        }
        # A local audit is a short batch job in one JVM, most of whose CPU would otherwise go
        # to the JIT and to plan descriptions nobody reads (the UI is off): the throughput
        # collector, smaller C2 inlining, and short plan strings cut its CPU by a quarter
        # (bench/bench_audit.py). Measured choices, documented in docs/audit.md ("Spark").
        conf["spark.sql.ui.explainMode"] = "simple"
        conf["spark.sql.maxPlanStringLength"] = "4096"
        # One audit compiles about 240 generated classes; Spark keeps the last 100, so a second
        # audit in the same JVM (``--compare``, the tests) compiled and JIT-compiled them all
        # again. Measured on the benchmark's second run: 482 -> 249 compilations, 60 -> 48 CPU s.
        conf["spark.sql.codegen.cache.maxEntries"] = str(CODEGEN_CACHE_ENTRIES)
        opts = list(LOCAL_JVM_OPTIONS)
        if _LOG4J2.exists():
            opts.insert(0, f"-Dlog4j2.configurationFile=file:{_LOG4J2}")
            conf["spark.executor.extraJavaOptions"] = opts[0]
        conf["spark.driver.extraJavaOptions"] = " ".join(opts)
        for key, value in conf.items():
            builder = builder.config(key, value)
    elif shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark


def _default_driver_memory() -> str:
    """A quarter of physical memory, between 1 and 4 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "1g"
    gib = max(1, min(4, total // 4 // (1 << 30)))
    return f"{gib}g"


def _default_off_heap() -> str:
    """Off-heap execution memory for local mode: half the default heap, at least 512 MiB."""
    heap_gib = int(_default_driver_memory().rstrip("g"))
    return f"{max(512, heap_gib * 512)}m"


def _under_spark_submit() -> bool:
    """True when spark-submit launched this driver (it then owns the master and the conf)."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_SUBMIT"))
