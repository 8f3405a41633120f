"""The CLI end to end on the real Tansu recordings in tests/data (see record_tansu.py)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from aiogroup.tools.audit.cli import expand_paths, main

DATA = Path(__file__).parent.parent / "data"
COOPERATIVE = DATA / "tansu_cooperative"
EAGER = DATA / "tansu_eager"


def test_expand_paths(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.jsonl").write_text("")
    (tmp_path / "y.jsonl").write_text("")
    assert expand_paths([str(tmp_path)]) == [str(tmp_path / "a" / "x.jsonl"),
                                             str(tmp_path / "y.jsonl")]
    assert expand_paths([str(tmp_path / "*.jsonl")]) == [str(tmp_path / "y.jsonl")]
    assert expand_paths(["hdfs://nn/events"]) == ["hdfs://nn/events"]


def test_missing_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nothing-*.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert "no event files match" in capsys.readouterr().err


def test_bad_partition_range(tmp_path: Path) -> None:
    assert main([str(tmp_path), "--out", str(tmp_path), "--gantt-partitions", "5-2"]) == 2


@pytest.fixture(scope="module")
def audited(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "out"
    code = main([str(COOPERATIVE), "--compare", str(EAGER), "--out", str(out),
                 "--shuffle-partitions", "1",
                 "--label", "cooperative-sticky (librdkafka)",
                 "--compare-label", "range (kafka-python)", "--fail-on-overlap", "--quiet"])
    assert code == 0  # --fail-on-overlap: any overlap beyond the tolerance would give 3
    return out


def _read(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return pd.read_parquet(path)


@pytest.mark.spark
@pytest.mark.parametrize("subdir", ["", "compare"])
def test_real_recording_has_no_overlap_and_plausible_downtime(audited: Path, subdir: str) -> None:
    out = audited / subdir
    quality = _read(out / "input_quality")
    assert set(quality["status"]) == {"ok"}
    assert _read(out / "overlaps").empty
    intervals = _read(out / "intervals")
    assert set(intervals["partition"]) == set(range(6))
    members = _read(out / "members")
    assert len(members) == 3 and members["closed"].all()
    assert (members["open_intervals"] == 0).all()  # every member revoked on close
    per_partition = _read(out / "unowned_by_partition")
    # Tansu holds each JoinGroup for session/2 = 3 s: gaps are seconds, never minutes
    assert per_partition["max_gap_s"].max() < 30.0
    assert per_partition["unowned_s"].sum() > 0.0
    moves = _read(out / "moves_by_generation")
    # three joins and a leave of 6 partitions: a balanced assignor moves 3 + 2 + 2
    assert moves.loc[moves["epoch_start"], "min_moves"].sum() == 7
    assert moves["moved"].sum() >= 7


@pytest.mark.spark
def test_report_is_self_contained(audited: Path) -> None:
    html = (audited / "report.html").read_text()
    assert html.count("<svg") >= 8  # timeline, unowned, moves, latencies, for both sets
    assert "cooperative-sticky (librdkafka)" in html and "range (kafka-python)" in html
    assert "<script" not in html and "http://" not in html and "https://" not in html
