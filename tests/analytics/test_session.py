"""Environment checks that run before any JVM starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from aiogroup.errors import ConfigurationError
from aiogroup.tools.audit.cli import main
from aiogroup.tools.audit.session import AnalyticsError, find_java, is_local_master


def test_missing_java_home_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    with pytest.raises(AnalyticsError, match="has no bin/java"):
        find_java()


def test_no_java_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="Spark needs Java"):
        find_java()


def test_cli_reports_missing_java(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = tmp_path / "e.jsonl"
    events.write_text("{}\n")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert main([str(events), "--out", str(tmp_path / "out")]) == 2
    assert "JAVA_HOME" in capsys.readouterr().err


def test_local_master_detection() -> None:
    assert is_local_master(None) and is_local_master("local[2]")
    assert not is_local_master("spark://host:7077") and not is_local_master("yarn")


@pytest.mark.spark
def test_local_session_is_loopback_quiet_and_tuned(spark: Any) -> None:
    """The local settings reach the running JVM, not only the builder's configuration."""
    from aiogroup.tools.audit.session import CODEGEN_CACHE_ENTRIES, LOCAL_JVM_OPTIONS

    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.bindAddress") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.ui.explainMode") == "simple"
    # a static SQL setting: only a value given before the JVM's SQL context exists counts
    assert spark.conf.get("spark.sql.codegen.cache.maxEntries") == str(CODEGEN_CACHE_ENTRIES)
    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    arguments = set(management.getRuntimeMXBean().getInputArguments())
    assert set(LOCAL_JVM_OPTIONS) <= arguments
    collectors = {b.getName() for b in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}  # -XX:+UseParallelGC took effect
    # sort and aggregation pages off the heap, in the running context's configuration
    assert conf.get("spark.memory.offHeap.enabled") == "true"
    assert int(conf.get("spark.memory.offHeap.size").rstrip("m")) >= 512
