"""The hash-map order models (aiogroup.testing.embedded.hashorder) against the real implementations.

``data/hashorder_vectors.json`` holds orders printed by the real ``java.util.HashMap`` and the
Scala 2.12.8 (Kafka 2.3's) and 2.13 ``mutable.HashMap`` / ``List.groupBy``, through
``data/HashOrder.java``. Regenerate with ``python -m tests.testing.test_hashorder`` (needs
``javac``, Kafka 2.3's scala-library from ``aiogroup.testing.launchers.kafka`` and pyspark's 2.13
one).
Where those exist the last test also checks fresh random cases live.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from aiogroup.testing.embedded.hashorder import JavaMap, Scala212Map, Scala213Map, vote_order

DATA = Path(__file__).with_name("data")
VECTORS = DATA / "hashorder_vectors.json"
PROTOCOLS = ["range", "roundrobin", "sticky", "cooperative-sticky", "a", "b", "c", "p1", "p2"]


def make_cases(seed: int, count: int = 60) -> list[list[str]]:
    """Member-id-like keys put and removed (through resizes), and protocol votes."""
    rng = random.Random(seed)
    cases: list[list[str]] = []
    for i in range(count):
        live: list[str] = []
        ops: list[str] = []
        for _ in range(rng.choice([3, 8, 13, 20, 40])):
            if live and rng.random() < 0.25:
                key = live.pop(rng.randrange(len(live)))
                ops.append("-" + key)
            else:
                prefix = rng.choice(["consumer", "rdkafka", "kafka-python-2.0", f"inst{i}"])
                key = f"{prefix}-{uuid.UUID(int=rng.getrandbits(128), version=4)}"
                live.append(key)
                ops.append("+" + key)
        cases.append(["map", *ops])
    for _ in range(count):
        names = rng.sample(PROTOCOLS, rng.choice([2, 2, 3, 4, 5, 6]))
        cases.append(["vote", *(rng.choice(names) for _ in range(rng.randint(2, 9)))])
    return cases


def _scala_jars() -> tuple[Path, Path] | None:
    """Kafka 2.3's scala-library (2.12.8) and pyspark's (2.13), or None."""
    try:
        from aiogroup.testing.launchers.kafka import KafkaUnavailableError, ensure_kafka

        s212 = sorted(ensure_kafka().libs.glob("scala-library-2.12*.jar"))
    except (ImportError, KafkaUnavailableError):
        return None
    import pyspark

    s213 = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("scala-library-2.13*.jar"))
    return (s212[0], s213[0]) if s212 and s213 else None


def run_java(cases: list[list[str]]) -> list[dict[str, Any]]:
    """Each case with the orders the real implementations give."""
    jars = _scala_jars()
    if shutil.which("javac") is None or jars is None:
        pytest.skip("needs javac, Kafka 2.3's scala-library and pyspark's")
    text = "".join(" ".join(c) + "\n" for c in cases)
    outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, jar in zip(("scala212", "scala213"), jars, strict=True):
            classes = Path(tmp) / name
            classes.mkdir()
            subprocess.run(
                ["javac", "-nowarn", "-cp", str(jar), "-d", str(classes),
                 str(DATA / "HashOrder.java")],
                check=True, capture_output=True,
            )  # fmt: skip
            done = subprocess.run(
                ["java", "-cp", f"{classes}:{jar}", "HashOrder"],
                input=text, capture_output=True, text=True, check=True,
            )  # fmt: skip
            outputs[name] = done.stdout.splitlines()
    out = []
    for case, line212, line213 in zip(cases, outputs["scala212"], outputs["scala213"], strict=True):
        java212, scala212 = (part.split(":", 1)[1].split() for part in line212.split("\t"))
        java213, scala213 = (part.split(":", 1)[1].split() for part in line213.split("\t"))
        assert java212 == java213
        out.append({"case": case, "java": java212, "scala212": scala212, "scala213": scala213})
    return out


def check(vector: dict[str, Any]) -> None:
    kind, *items = vector["case"]
    if kind == "map":
        got = {}
        for name, cls in (("java", JavaMap), ("scala212", Scala212Map), ("scala213", Scala213Map)):
            keys = cls()
            for op in items:
                (keys.put if op[0] == "+" else keys.remove)(op[1:])
            got[name] = list(keys)
        assert got == {k: vector[k] for k in got}, items
    else:
        assert vote_order("kafka2", items) == vector["scala212"], items
        assert vote_order("kafka3", items) == vector["scala213"], items
        assert vote_order("kafka4", items) == vector["java"], items


def _vectors() -> list[dict[str, Any]]:
    return list(json.loads(VECTORS.read_text())) if VECTORS.exists() else []


@pytest.mark.parametrize("vector", _vectors(), ids=lambda v: f"{v['case'][0]}-{len(v['case'])}")
def test_models_match_the_recorded_orders(vector: dict[str, Any]) -> None:
    check(vector)


def test_the_vectors_exercise_resizes_removals_and_big_votes() -> None:
    vectors = _vectors()
    maps = [v["case"][1:] for v in vectors if v["case"][0] == "map"]
    assert any(sum(1 for op in ops if op[0] == "+") > 24 for ops in maps)  # two doublings
    assert any(any(op[0] == "-" for op in ops) for ops in maps)
    votes = [v["case"][1:] for v in vectors if v["case"][0] == "vote"]
    assert any(len(set(names)) >= 5 for names in votes)  # past Map4: a hash trie / CHAMP
    # The models disagree with each other often enough for the vectors to tell them apart.
    assert sum(1 for v in vectors if v["java"] != v["scala212"]) > len(vectors) // 3


def test_range_and_sticky_tie_as_the_issue_saw_it() -> None:
    # Kafka 2.3 picks range, 4.x sticky, on a 1-1 tie between the two.
    assert vote_order("kafka2", ["range", "sticky"])[0] == "range"
    assert vote_order("kafka4", ["range", "sticky"])[0] == "sticky"


def test_models_match_the_real_maps_on_fresh_cases() -> None:
    for vector in run_java(make_cases(random.randrange(1 << 30), count=25)):
        check(vector)


if __name__ == "__main__":  # regenerate the recorded vectors
    rows = [json.dumps(v, separators=(",", ":")) for v in run_java(make_cases(20261124))]
    VECTORS.write_text("[\n" + ",\n".join(rows) + "\n]\n")
    print(f"wrote {VECTORS}", file=sys.stderr)
