"""The audit finds exactly the planted overlaps, gaps and moves (see synth.planted)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tests.analytics.synth import bad_input, planted

pytestmark = pytest.mark.spark


def _collect(result: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return {name: df.toPandas() for name, df in result.datasets.items()}


@pytest.fixture(scope="module")
def audited(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The planted events plus a file of bad lines: every answer below must be unaffected."""
    from aiogroup.tools.audit.audit import run_audit

    d = planted(tmp_path_factory.mktemp("planted"))
    bad_input(d / "bad")
    files = sorted(str(p) for p in d.rglob("*.jsonl"))
    return _collect(run_audit(spark, files, tolerance_s=0.05))


def _rows(df: Any, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df[columns].itertuples(index=False, name=None))


def test_intervals(audited: dict[str, Any]) -> None:
    iv = audited["intervals"]
    got = _rows(iv, ["group", "partition", "member", "start", "end", "end_kind", "open"])
    expected = [("g", p, "A", 10.0, 50.0, "revoked", False) for p in (0, 1, 2)]
    expected += [("g", p, "A", 10.0, 20.2, "revoked", False) for p in (3, 4, 5)]
    expected += [("g", p, "B", 21.0, 50.0, "revoked", False) for p in (3, 4, 5)]
    expected += [
        ("z", 0, "D", 100.0, 112.5, "lost", False),
        ("z", 0, "E", 110.0, 130.0, "open", True),  # ends at E's last event, flagged open
        ("z", 1, "D", 100.0, 112.5, "lost", False),
        ("z", 1, "E", 110.0, 120.03, "revoked", False),
        ("z", 1, "F", 120.01, 130.0, "open", True),
    ]
    assert got == sorted(expected)


def test_overlaps_and_tolerance(audited: dict[str, Any]) -> None:
    o = audited["overlaps"]
    got = [
        (r.group, r.partition, round(r.start, 3), round(r.end, 3), list(r.members), r.violation)
        for r in o.sort_values(["partition", "start"]).itertuples()
    ]
    assert got == [
        ("z", 0, 110.0, 112.5, ["D", "E"], True),
        ("z", 1, 110.0, 112.5, ["D", "E"], True),
        ("z", 1, 120.01, 120.03, ["E", "F"], False),  # 20 ms skew: counted, not a violation
    ]


def test_unowned_time(audited: dict[str, Any]) -> None:
    by_partition = audited["unowned_by_partition"].set_index(["group", "partition"])
    assert by_partition["owners"].to_dict() == {
        ("g", 0): 1, ("g", 1): 1, ("g", 2): 1, ("g", 3): 2, ("g", 4): 2, ("g", 5): 2,
        ("z", 0): 2, ("z", 1): 3,
    }  # fmt: skip
    assert by_partition.loc[("z", 0), "intervals"] == 2  # E's redundant assignment opened none
    per_partition = by_partition["unowned_s"]
    assert per_partition.round(6).to_dict() == {
        ("g", 0): 0.0, ("g", 1): 0.0, ("g", 2): 0.0,
        ("g", 3): 0.8, ("g", 4): 0.8, ("g", 5): 0.8,
        ("z", 0): 0.0, ("z", 1): 0.0,
    }  # fmt: skip
    per_gen = audited["unowned_by_generation"]
    assert _rows(per_gen, ["group", "generation_id", "partitions", "gaps"]) == [("g", 3, 3, 3)]
    assert per_gen["unowned_partition_s"].iloc[0] == pytest.approx(2.4)


def test_moves_against_minimum(audited: dict[str, Any]) -> None:
    m = audited["moves_by_generation"]
    assert _rows(m, ["group", "generation_id", "members", "moved", "min_moves"]) == [
        ("g", 1, 1, 0, 0),
        ("g", 2, 2, 3, 3),  # KIP-429: the move is decided when A revokes in generation 2
        ("g", 3, 2, 0, 0),
        ("z", 1, 1, 0, 0),
        ("z", 2, 1, 2, 2),  # D left: both partitions are orphans
        ("z", 3, 2, 1, 1),  # E holds 2 of 2 with F joining: one must move
    ]


def test_latency_percentiles(audited: dict[str, Any]) -> None:
    lat = audited["latency"].set_index(["group", "metric"])
    reb = lat.loc[("g", "rebalance completed")]
    assert (reb["count"], reb["p50_s"], reb["max_s"]) == (3, 2.0, 3.0)
    assert lat.loc[("z", "lost callback")]["p50_s"] == pytest.approx(0.5)


def test_member_summary(audited: dict[str, Any]) -> None:
    m = audited["members"].set_index(["group", "member"])
    assert m.loc[("z", "E"), "assigned_while_owned"] == 1  # eager re-assignment of u-0
    assert m.loc[("z", "E"), "open_intervals"] == 1
    assert not m.loc[("z", "D"), "closed"]
    assert m.loc[("g", "A"), "intervals"] == 6
    assert m.loc[("g", "A"), "owned_partition_s"] == pytest.approx(3 * 40.0 + 3 * 10.2)
    assert m.loc[("g", "B"), "rebalances"] == 1


def test_bad_input_counted_and_left_out(audited: dict[str, Any]) -> None:
    q = audited["input_quality"]
    bad = q[q["source_file"].str.endswith("bad.jsonl")].set_index("status")["lines"].to_dict()
    assert bad == {"corrupt": 3, "unknown_type": 1, "missing_fields": 3, "newer_version": 1}
    assert "X" not in set(audited["members"]["member"])  # the bad lines' member never appears
    assert "X" not in set(audited["intervals"]["member"])
