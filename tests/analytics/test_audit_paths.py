"""The audit's shortcuts give the answers of the general computation they skip.

* Gap counts per generation use a plain count when every gap's generation rises with time
  (``_checks``), and a distinct count otherwise: both must agree wherever the shortcut applies,
  and the messy sets must take the general path (so the oracle tests cover it).
* With nothing overlapping, the overlap dataset is built empty from ``OVERLAP_SCHEMA`` rather
  than from the sweep: the schema must be the sweep's.
* The minimum moves use sums (members above ``floor(N/M)`` give up the excess, less one per
  ceil quota they get) instead of ranking members; a hand case with tied holders pins it.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from tests.analytics.messy import messy
from tests.analytics.synth import EAGER, Recorder, planted

pytestmark = pytest.mark.spark


def _context(spark: Any, files: list[str]) -> tuple[Any, Any]:
    """The cached per-interval context and the name keys, as run_audit builds them."""
    from aiogroup.tools.audit import audit as A

    prepared = A._prepare(spark, files, None)
    return prepared.context, prepared.keys


def _rows(df: Any) -> list[tuple[Any, ...]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        pdf = df.toPandas()
    return sorted(tuple(r) for r in pdf.itertuples(index=False, name=None))


def _files(d: Path) -> list[str]:
    return sorted(str(p) for p in d.rglob("*.jsonl"))


def test_gap_counts_shortcut_matches_distinct_count(spark: Any, tmp_path: Path) -> None:
    from aiogroup.tools.audit import audit as A

    # a partition whose two gaps fall in one generation would make the plain count wrong: the
    # shortcut must only ever run where that cannot happen
    r = Recorder(tmp_path / "ordered")
    for g in range(1, 6):  # A and B take turns on two partitions, a gap before every hand-off
        member = "A" if g % 2 else "B"
        r.parts("o", member, "assigned", g, EAGER, {"t": [0, 1]}, 10.0 * g, 10.0 * g + 0.1)
        r.parts("o", member, "revoked", g, EAGER, {"t": [0, 1]}, 10.0 * g + 5, 10.0 * g + 5.1)
    context, keys = _context(spark, _files(r.write()))
    checks = A._checks(context)
    assert not checks.gaps_out_of_order
    _, fast = A._unowned(context, keys, False)
    _, exact = A._unowned(context, keys, True)
    assert _rows(fast) == _rows(exact)
    assert [row[3] for row in _rows(fast)] == [2, 2, 2, 2]  # two partitions per generation 2..5


def test_messy_sets_take_the_general_gap_path(spark: Any, tmp_path: Path) -> None:
    from aiogroup.tools.audit import audit as A

    for seed in (1, 2):
        messy(tmp_path, seed)
    context, keys = _context(spark, _files(tmp_path))
    assert A._checks(context).gaps_out_of_order
    _, fast = A._unowned(context, keys, False)
    _, exact = A._unowned(context, keys, True)
    # the shortcut would be wrong here: it counts some partition twice in a generation
    assert _rows(fast) != _rows(exact)


def test_empty_overlaps_have_the_sweeps_schema(spark: Any, tmp_path: Path) -> None:
    from aiogroup.tools.audit import audit as A

    context, keys = _context(spark, _files(planted(tmp_path)))
    assert A._checks(context).overlaps
    swept = A._overlaps(context, keys, 0.05, True)
    empty = A._overlaps(context, keys, 0.05, False)
    assert empty.count() == 0
    assert [(f.name, f.dataType) for f in empty.schema.fields] == [
        (f.name, f.dataType) for f in swept.schema.fields
    ]
    assert empty.schema.simpleString() == A.OVERLAP_SCHEMA.simpleString()


def test_minimum_with_tied_holders(spark: Any, tmp_path: Path) -> None:
    """Ten partitions held 4/3/3 by A, B, C; D joins. Quotas 3/3/2/2 (ceil quotas to the two
    holding most: A, then one of the tied B and C). A gives up 1 and whichever of B, C got the
    floor quota gives up 1: two must move, whatever the tie order."""
    from aiogroup.tools.audit.audit import run_audit

    r = Recorder(tmp_path / "tied")
    held = {"A": [0, 1, 2, 3], "B": [4, 5, 6], "C": [7, 8, 9]}
    for member, parts in held.items():
        r.parts("q", member, "assigned", 1, EAGER, {"t": parts}, 10.0, 10.1)
        r.parts("q", member, "revoked", 1, EAGER, {"t": parts}, 20.0, 20.1)
    after = {"A": [0, 1, 2], "B": [4, 5, 6], "C": [7, 8], "D": [3, 9]}
    for member, parts in after.items():
        r.parts("q", member, "assigned", 2, EAGER, {"t": parts}, 20.5, 20.6)
    moves = run_audit(spark, _files(r.write())).datasets["moves_by_generation"]
    got = {row[1]: row for row in _rows(moves)}
    # (group, generation, members, epoch_start, partitions, min_moves, moved, extra_moves)
    assert got[2] == ("q", 2, 4, True, 10, 2, 2, 0)
    assert got[1][3] and got[1][5] == 0


def test_presort_outside_its_ranges_changes_nothing(spark: Any, tmp_path: Path) -> None:
    """The per-partition window's presort packs 20 bits of partition and 32 bits of start in
    milliseconds. Partitions beyond 2**20 and starts whose milliseconds wrap past 2**32 (at
    4,294,967.296 s) order less well there; the answers must not change."""
    from aiogroup.tools.audit.audit import run_audit

    r = Recorder(tmp_path / "wide")
    parts = {"t": [5, 2**20 + 3, 2**31 - 1]}
    base = 4_294_960.0  # the wrap falls between generations 2 and 3
    for g, member in enumerate(["A", "B", "A", "B"], start=1):
        t = base + 3.0 * g
        r.parts("w", member, "assigned", g, EAGER, parts, t, t + 0.1)
        r.parts("w", member, "revoked", g, EAGER, parts, t + 2.0, t + 2.1)
    result = run_audit(spark, _files(r.write())).datasets
    per_partition = _rows(result["unowned_by_partition"].select(
        "partition", "intervals", "owners", "gaps", "unowned_s"))
    assert [row[:4] for row in per_partition] == [
        (5, 4, 2, 3), (2**20 + 3, 4, 2, 3), (2**31 - 1, 4, 2, 3)]
    for row in per_partition:  # three gaps of 0.9 s between a revoke's end and the next start
        assert row[4] == pytest.approx(2.7, abs=1e-6)
    assert _rows(result["overlaps"]) == []
