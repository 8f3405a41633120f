"""Import RSS: aiogroup against aiokafka, each statement in fresh interpreters.

Each statement runs in ``--runs`` fresh processes (default 5); prints the median RSS after it
(VmRSS), the spread, and how many modules it loaded. The "built" rows also construct the
consumer (inside a running event loop; nothing connects before ``start()``)::

    python bench/bench_memory.py [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

_PROBE = """
import sys
{statement}
with open("/proc/self/status", encoding="ascii") as f:
    rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
print(rss / 1024, len(sys.modules))
"""

_BUILD_AIOGROUP = """
import asyncio
from aiogroup import Consumer
async def build():
    Consumer("127.0.0.1:9092", "g", topics=["t"])
asyncio.run(build())
"""

_BUILD_AIOKAFKA = """
import asyncio
from aiokafka import AIOKafkaConsumer
async def build():
    AIOKafkaConsumer("t", bootstrap_servers="127.0.0.1:9092", group_id="g")
asyncio.run(build())
"""

ROWS: list[tuple[str, str]] = [
    ("python (nothing imported)", "pass"),
    ("import asyncio", "import asyncio"),
    ("import aiogroup", "import aiogroup"),
    ("from aiogroup import Consumer", "from aiogroup import Consumer"),
    ("import aiokafka", "import aiokafka"),
    ("from aiokafka import AIOKafkaConsumer", "from aiokafka import AIOKafkaConsumer"),
    ("aiogroup Consumer built", _BUILD_AIOGROUP),
    ("aiokafka AIOKafkaConsumer built", _BUILD_AIOKAFKA),
]


def measure(statement: str) -> tuple[float, int]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE.format(statement=statement)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    rss, modules = out.stdout.split()
    return float(rss), int(modules)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{sys.version.split()[0]}, median of {args.runs} fresh processes; "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    results: dict[str, float] = {}
    for label, statement in ROWS:
        samples = [measure(statement) for _ in range(args.runs)]
        rss = [s[0] for s in samples]
        results[label] = median = statistics.median(rss)
        print(
            f"  {label:40s} {median:6.1f} MB  ({min(rss):.1f}-{max(rss):.1f})  "
            f"{samples[0][1]:4d} modules"
        )
    ours, theirs = "from aiogroup import Consumer", "from aiokafka import AIOKafkaConsumer"
    diff = results[ours] - results[theirs]
    verdict = "PASS" if diff <= 0 else "MISS"
    print(f"  {ours} - {theirs}: {diff:+.1f} MB (target <= 0: {verdict})")
    built = results["aiogroup Consumer built"] - results["aiokafka AIOKafkaConsumer built"]
    print(f"  built, aiogroup - aiokafka: {built:+.1f} MB (aiogroup's client and schemas load "
          "when a Consumer is built; aiokafka's at import)")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
