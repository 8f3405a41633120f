"""One SparkSession for every analytics test: starting the JVM is the expensive part."""

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
    session = build_session("local[2]", shuffle_partitions=1, log_level="ERROR")
    yield session
    session.stop()
