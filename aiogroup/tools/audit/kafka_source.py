"""Spark's own Kafka source (``spark-sql-kafka-0-10``) for the live audit, from Maven Central.

PySpark ships no Kafka source. The live audit (``python -m aiogroup analyze --follow``) puts
``org.apache.spark:spark-sql-kafka-0-10_<scala>`` of **the installed PySpark's version** (and
Scala's) on Spark's class path, with its runtime dependencies, from a pinned list with SHA-256
digests (``jars/spark-sql-kafka-VERSION.txt``, package data) downloaded and checked by the same
code that fetches Apache Kafka's jars for the test brokers
(:mod:`aiogroup.testing.launchers.maven`): no Maven and no Ivy on a user's machine, each jar
checked before use, downloads shared across processes under a file lock.

The list leaves out what PySpark already ships (Spark itself, the compression codecs, SLF4J):
one copy of each class on the class path, PySpark's. What is left for 4.2.0 is the source,
its token provider, ``kafka-clients`` and ``commons-pool2``.

A new PySpark release needs a new list: ``python -m aiogroup.tools.audit.kafka_source pin``
(with that PySpark installed and Maven on the PATH) writes it, every jar checked against the
``.sha1`` the repository publishes.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from aiogroup.tools.audit.session import AnalyticsError

__all__ = [
    "PINS",
    "ensure_kafka_source",
    "pin_kafka_source",
    "pinned_versions",
    "spark_versions",
]

#: The pinned lists, one per Spark version.
PINS = Path(__file__).with_name("jars")
_ARTIFACT = "spark-sql-kafka-0-10"


def spark_versions() -> tuple[str, str]:
    """The installed PySpark's version and Scala binary version (``("4.2.0", "2.13")``)."""
    import pyspark

    from aiogroup.tools.audit.cluster import spark_home

    jars = spark_home() / "jars"
    scala = next((m.group(1) for p in sorted(jars.glob("scala-library-*.jar"))
                  if (m := re.match(r"scala-library-(\d+\.\d+)\.", p.name))), None)
    if scala is None:
        raise AnalyticsError(f"no scala-library jar in {jars}: cannot tell Spark's Scala")
    return str(pyspark.__version__), scala


def pinned_versions() -> list[str]:
    """Spark versions with a pinned Kafka source."""
    pins = PINS.glob("spark-sql-kafka-*.txt")
    return sorted(p.stem.removeprefix("spark-sql-kafka-") for p in pins)


def _cache() -> Path:
    env = os.environ.get("AIOGROUP_SPARK_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aiogroup" / "spark"


def ensure_kafka_source(version: str | None = None, cache: Path | None = None) -> list[Path]:
    """The jars of Spark's Kafka source for ``version`` (default: the installed PySpark's),
    downloaded and checked once into ``cache`` (``$AIOGROUP_SPARK_CACHE``, else
    ``~/.cache/aiogroup/spark``)."""
    from aiogroup.errors import AiogroupError
    from aiogroup.testing.launchers.maven import fetch_pin_file

    version = version or spark_versions()[0]
    pins = PINS / f"spark-sql-kafka-{version}.txt"
    if not pins.exists():
        known = ", ".join(pinned_versions()) or "none"
        raise AnalyticsError(
            f"Spark's Kafka source is pinned for Spark {known}, not for the installed PySpark "
            f"{version}: install a pinned one (pip install 'aiogroup[analytics]' does) or pin "
            f"this one (python -m aiogroup.tools.audit.kafka_source pin, needs Maven)")
    try:
        return fetch_pin_file(pins, (cache or _cache()) / "maven")
    except AiogroupError as exc:
        raise AnalyticsError(f"Spark's Kafka source: {exc}") from exc


def _shipped(jars: Path) -> set[str]:
    """Artifact names of the jars PySpark ships (``scala-library-2.13.16.jar`` ->
    ``scala-library``)."""
    names = set()
    for p in jars.glob("*.jar"):
        m = re.match(r"(.+?)-\d[\w.\-]*\.jar$", p.name)
        if m:
            names.add(m.group(1))
    return names


def pin_kafka_source(mvn: str = "mvn") -> Path:
    """Write the pinned list of the installed PySpark's Kafka source (needs Maven)."""
    from aiogroup.testing.launchers.maven import format_pins, pin_with_maven, resolve_with_maven
    from aiogroup.tools.audit.cluster import spark_home

    version, scala = spark_versions()
    root = f"org.apache.spark:{_ARTIFACT}_{scala}:{version}"
    shipped = _shipped(spark_home() / "jars")
    resolved = [jar for jar in resolve_with_maven([root], mvn)
                if jar.coordinates.split(":")[1] not in shipped]
    pins = pin_with_maven(resolved)
    path = PINS / f"spark-sql-kafka-{version}.txt"
    PINS.mkdir(exist_ok=True)
    path.write_text(format_pins(pins, header=(
        f"Spark's Kafka source for PySpark {version} (aiogroup.tools.audit.kafka_source): the\n"
        f"runtime class path of {root} as Maven resolves it, less the\n"
        "jars PySpark ships, with SHA-256 digests.\n"
        "Regenerate: python -m aiogroup.tools.audit.kafka_source pin  (needs Maven)")))
    return path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m aiogroup.tools.audit.kafka_source",
        description="'fetch' downloads (and checks) the pinned Kafka source of the installed "
                    "PySpark; 'pin' writes the pinned list for it (needs Maven).")
    p.add_argument("command", choices=("fetch", "pin"))
    p.add_argument("--mvn", default="mvn", help="the Maven command (default: mvn)")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "pin":
            print(pin_kafka_source(args.mvn))
        else:
            for jar in ensure_kafka_source():
                print(jar)
    except Exception as exc:
        print(f"{p.prog}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
