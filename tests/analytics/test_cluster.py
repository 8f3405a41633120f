"""The audit on a real Spark cluster: a standalone master and two workers from the installed
pyspark, on 127.0.0.1, run the unchanged job (``spark-submit aiogroup/tools/audit/job.py``), and
every Parquet dataset must equal the local run's, row for row and type for type.

The input mixes the real Tansu recordings with a messy synthetic set (overlaps, zombies, gaps,
redundant and out-of-order events, corrupt lines), so the cluster runs every path of the job,
the overlap sweep included.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from aiogroup.tools.audit.cli import main
from aiogroup.tools.audit.cluster import StandaloneCluster
from tests.analytics.messy import messy

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]

DATA = Path(__file__).parent.parent / "data"
DATASETS = ("input_quality", "intervals", "overlaps", "unowned_by_partition",
            "unowned_by_generation", "moves_by_generation", "latency", "latency_histogram",
            "members")


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("cluster-events")
    for name in ("tansu_cooperative", "tansu_eager"):
        shutil.copytree(DATA / name, root / name)
    messy(root / "messy", 5)
    return root


def _read(path: Path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        df = pd.read_parquet(path)
    for column in df.columns:  # arrays (members, generations of an overlap) as tuples
        if df[column].map(lambda v: hasattr(v, "tolist") and not isinstance(v, str)).any():
            df[column] = df[column].map(lambda v: tuple(v.tolist()) if hasattr(v, "tolist") else v)
    return df.sort_values(list(df.columns), kind="stable", na_position="first").reset_index(
        drop=True)


def test_the_job_on_a_standalone_cluster_gives_the_local_answers(
    spark: Any, cluster: StandaloneCluster, events: Path, tmp_path: Path
) -> None:
    local, remote = tmp_path / "local", tmp_path / "cluster"
    assert main([str(events), "--out", str(local), "--quiet", "--report", "none"]) == 0
    cluster.submit([str(events), "--out", str(remote), "--quiet", "--report", "none"],
                   conf={"spark.sql.shuffle.partitions": "2"})

    # It ran on the cluster: the master lists the finished application, on both workers' cores.
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.ui_port}/json/", timeout=10) as r:
        state = json.load(r)
    apps = [a for a in state["completedapps"] if a["name"] == "aiogroup-audit"]
    assert len(apps) == 1 and apps[0]["cores"] == 2, state["completedapps"]
    assert state["aliveworkers"] == 2

    for name in DATASETS:
        ours, theirs = _read(local / name), _read(remote / name)
        assert list(ours.dtypes) == list(theirs.dtypes), name
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True, obj=name)
    # the comparison compares something: the messy set plants overlaps and corrupt lines
    assert len(_read(local / "overlaps")) > 0
    quality = _read(local / "input_quality")
    assert set(quality["status"]) > {"ok"}
    assert len(_read(local / "intervals")) > 100
