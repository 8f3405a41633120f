"""The Spark audit against a plain-pandas recomputation on messy random event sets.

Every expected value below is recomputed from the ``intervals`` dataset with pandas alone
(definitions in aiogroup/tools/audit/audit.py's module docstring), so these tests check the
per-partition sweeps, the overlap episodes, the moves and the member summary, not the intervals
themselves (test_audit.py pins those on hand-built events).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.analytics.messy import messy

pytestmark = pytest.mark.spark

SEEDS = range(1, 7)
TOLERANCE_S = 0.05
KEY = ["group", "topic", "partition"]


def approx(x: float) -> Any:
    return pytest.approx(x, rel=1e-9, abs=1e-12)


@pytest.fixture(scope="module")
def audited(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, pd.DataFrame]:
    """Seeds 1..6 in one directory (group names carry the seed), audited once."""
    from aiogroup.tools.audit.audit import run_audit

    d = tmp_path_factory.mktemp("messy")
    for seed in SEEDS:
        messy(d, seed)
    files = sorted(str(p) for p in Path(d).rglob("*.jsonl"))
    result = run_audit(spark, files, tolerance_s=TOLERANCE_S)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return {name: df.toPandas() for name, df in result.datasets.items()}


def _partitions(iv: pd.DataFrame) -> Any:
    return iv.groupby(KEY, sort=True)


def _segments(part: pd.DataFrame) -> list[tuple[float, float, int]]:
    """Sweep over interval boundaries: [t, next_t) segments of positive length, owner count.

    Ends sort before starts at equal times; only the count after every boundary at a time
    matters for a segment of positive length.
    """
    bounds = sorted(
        [(t, 1) for t in part["start"]] + [(t, -1) for t in part["end"]],
        key=lambda b: (b[0], b[1]),
    )
    out: list[tuple[float, float, int]] = []
    owners = 0
    for i, (t, delta) in enumerate(bounds):
        owners += delta
        if i + 1 < len(bounds) and bounds[i + 1][0] > t:
            out.append((t, bounds[i + 1][0], owners))
    return out


def _gaps(part: pd.DataFrame) -> list[float]:
    first, last = part["start"].min(), part["end"].max()
    return [b - a for a, b, n in _segments(part) if n == 0 and a >= first and b <= last]


def _episodes(part: pd.DataFrame) -> list[tuple[float, float, int]]:
    """Maximal time ranges with two or more owners (consecutive segments merge)."""
    out: list[tuple[float, float, int]] = []
    for a, b, n in _segments(part):
        if n < 2:
            continue
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b, max(out[-1][2], n))
        else:
            out.append((a, b, n))
    return out


def test_messy_sets_are_messy(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"]
    assert iv["group"].str.extract(r"^s(\d+)-")[0].astype(int).nunique() == len(SEEDS)
    assert iv["open"].sum() > 10
    assert (iv["generation_id"].isna()).sum() > 0
    episodes = sum(len(_episodes(p)) for _, p in _partitions(iv))
    gaps = sum(len(_gaps(p)) for _, p in _partitions(iv))
    assert episodes > 10
    assert gaps > 10
    o = audited["overlaps"]
    assert o["violation"].sum() > 0
    assert (~o["violation"]).sum() > 0  # tolerated skew as well as violations


def test_partition_counts(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"]
    expected = _partitions(iv).agg(
        intervals=("member", "size"),
        owners=("member", "nunique"),
        first_start=("start", "min"),
        last_end=("end", "max"),
    )
    got = audited["unowned_by_partition"].set_index(KEY).sort_index()
    assert list(got.index) == list(expected.index)
    assert got["intervals"].tolist() == expected["intervals"].tolist()
    assert got["owners"].tolist() == expected["owners"].tolist()
    assert got["first_start"].tolist() == expected["first_start"].tolist()
    assert got["last_end"].tolist() == expected["last_end"].tolist()


def test_unowned_time(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"]
    got = audited["unowned_by_partition"].set_index(KEY)
    assert len(got) == iv.groupby(KEY).ngroups
    for key, part in _partitions(iv):
        gaps = _gaps(part)
        row = got.loc[key]
        assert row["gaps"] == len(gaps), key
        assert row["unowned_s"] == approx(sum(gaps)), key
        assert row["max_gap_s"] == approx(max(gaps, default=0.0)), key


def test_overlap_episodes(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"]
    expected = {}
    for (group, topic, partition), part in _partitions(iv):
        for start, end, max_owners in _episodes(part):
            inside = part[(part["start"] < end) & (part["end"] > start)]
            expected[(group, topic, partition, round(start, 9), round(end, 9))] = (
                sorted(set(inside["member"])), end - start > TOLERANCE_S, max_owners)
    got = {
        (r.group, r.topic, r.partition, round(r.start, 9), round(r.end, 9)):
            (list(r.members), bool(r.violation), r.max_owners)
        for r in audited["overlaps"].itertuples()
    }
    assert len(got) == len(audited["overlaps"])
    assert set(got) == set(expected)
    assert got == expected


def test_moves_total_per_group(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"]
    known = iv[iv["generation_id"].notna()].sort_values([*KEY, "start", "end", "member"])
    expected: dict[str, int] = defaultdict(int)
    for (group, _, _), part in known.groupby(KEY, sort=False):
        owners = part["member"].tolist()
        expected[group] += sum(a != b for a, b in pairwise(owners))
    assert sum(expected.values()) > 10
    moves = audited["moves_by_generation"]
    got = moves.groupby("group")["moved"].sum().to_dict()
    groups = set(iv["group"])
    assert {g: got.get(g, 0) for g in groups} == {g: expected.get(g, 0) for g in groups}
    assert set(got) <= groups | set(moves["group"])


def test_member_summary(audited: dict[str, pd.DataFrame]) -> None:
    iv = audited["intervals"].assign(owned=lambda d: d["end"] - d["start"])
    expected = iv.groupby(["group", "member"]).agg(
        intervals=("member", "size"), open_intervals=("open", "sum"), owned=("owned", "sum"))
    m = audited["members"].set_index(["group", "member"])
    assert m.index.is_unique
    without = m.loc[~m.index.isin(expected.index)]
    assert (without["intervals"] == 0).all()
    assert (without["open_intervals"] == 0).all()
    assert (without["owned_partition_s"] == 0.0).all()
    assert set(expected.index) <= set(m.index)
    for key, row in expected.iterrows():
        assert m.loc[key, "intervals"] == row["intervals"], key
        assert m.loc[key, "open_intervals"] == row["open_intervals"], key
        assert m.loc[key, "owned_partition_s"] == approx(row["owned"]), key
