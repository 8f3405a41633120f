"""The audit benchmark's event generator (``bench/bench_audit.py``): the shape its answers rest
on, and the same bytes for the same seed. No Spark needed."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections import defaultdict
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

pytest.importorskip("pandas")

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_audit.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_audit_under_test", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and the like look the module up by name
    spec.loader.exec_module(module)
    return module


def _read(directory: Path) -> dict[str, list[dict[str, Any]]]:
    return {
        p.name.split(".")[0]: [json.loads(line) for line in p.read_text().splitlines()]
        for p in sorted(directory.glob("*.jsonl"))
    }


def _digest(directory: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(directory.glob("*.jsonl")):
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    return h.hexdigest()


@pytest.mark.parametrize(("partitions", "members", "generations"), [(37, 6, 9), (5, 8, 4)])
def test_every_generation_assigns_each_partition_once_and_revokes_what_was_held(
    bench: ModuleType, tmp_path: Path, partitions: int, members: int, generations: int
) -> None:
    # (5, 8, 4): more members than partitions, so some members get an empty list
    n = bench.generate(tmp_path, partitions, members, generations)
    events = _read(tmp_path)
    assert len(events) == members
    assigned: dict[int, dict[str, list[int]]] = defaultdict(dict)
    for member, lines in events.items():
        assert [e["seq"] for e in lines] == list(range(len(lines)))
        assert all(e["member"] == member and e["group"] == "bench" for e in lines)
        assert [e["ts"] for e in lines] == sorted(e["ts"] for e in lines)
        held: list[int] = []
        for e in lines:
            if e["type"] == "partitions_assigned":
                held = e["partitions"][bench.TOPIC]
                assigned[e["generation_id"]][member] = held
                assert e["started"] <= e["ended"] == e["ts"]
            elif e["type"] == "partitions_revoked":
                # eager: the member gives back exactly what it was last given, in the old
                # generation, and is never asked to revoke nothing
                assert e["partitions"][bench.TOPIC] == held != []
                assert e["generation_id"] == max(g for g in assigned if member in assigned[g])
                held = []
        assert lines[-1]["type"] == "closed"
        assert held == []
    assert sorted(assigned) == list(range(1, generations + 1))
    sizes = []
    for g in sorted(assigned):
        owners = [p for held in assigned[g].values() for p in held]
        assert sorted(owners) == list(range(partitions)), g
        sizes.append(len(assigned[g]))
    # the group grows from half its members to all of them
    assert sizes == sorted(sizes) and sizes[0] == members // 2 and sizes[-1] == members
    assert n == partitions * generations


def test_answers_of_a_small_set(bench: ModuleType, tmp_path: Path) -> None:
    n = bench.generate(tmp_path, 60, 10, 12)
    answers = bench.pandas_answers(tmp_path)
    assert answers["intervals"] == n == 60 * 12
    assert answers["overlap_episodes"] == 0  # eager hand-offs: revoke before anyone is assigned
    assert set(answers["unowned"]) == set(range(2, 13))  # every later generation has a gap
    # every partition changes hands in generations 2..12 unless its owner stays the same
    assert 0 < sum(answers["moved"].values()) <= 60 * 11


def test_same_seed_same_bytes(bench: ModuleType, tmp_path: Path) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    bench.generate(a, 50, 7, 10)
    bench.generate(b, 50, 7, 10)
    bench.generate(c, 50, 7, 10, seed=8)
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)
