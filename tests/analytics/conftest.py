"""One SparkSession for every analytics test (starting the JVM is the expensive part), with
Spark's Kafka source for the live audit; the standalone cluster of the cluster tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from aiogroup.tools.audit.session import AnalyticsError, build_session, find_java

    try:
        find_java()
    except AnalyticsError as exc:
        pytest.skip(str(exc))
    # Spark's Kafka source on the class path, for the live audit's tests: one JVM for all
    from aiogroup.tools.audit.kafka_source import ensure_kafka_source

    jars = ",".join(str(p) for p in ensure_kafka_source())
    session = build_session("local[2]", shuffle_partitions=1, log_level="ERROR",
                            extra_conf={"spark.jars": jars})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(spark: Any) -> Iterator[Any]:
    """A standalone Spark cluster (a master, two workers of one core) on 127.0.0.1, from the
    installed pyspark: :class:`aiogroup.tools.audit.cluster.StandaloneCluster`."""
    from aiogroup.tools.audit.cluster import StandaloneCluster

    # ``spark`` first: the local session's JVM is up before the cluster's three start
    with StandaloneCluster(workers=2, worker_cores=1, worker_memory="768m") as c:
        yield c
