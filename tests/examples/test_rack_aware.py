"""examples/rack_aware.py runs as docs/assignors.md prints it, on Apache Kafka 4.1.1 (three
KRaft nodes in racks r0-r2, started by the example).

The printed output is the proof: each member holds only partitions with a replica in its rack
(KIP-881; the layout admits exactly one such balanced plan) and reads them all from a broker in
its rack, a follower where the leader is elsewhere (KIP-392). With the leader's racks switched
off the assignment lines differ (two of the members hold a partition of another rack); without
``client_rack`` every line of both parts does.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, kafka_available

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "$ python examples/rack_aware.py\n"


def printed_output() -> str:
    page = (ROOT / "docs" / "assignors.md").read_text()
    blocks = [b for b in re.findall(r"```console\n(.*?)```", page, re.S) if b.startswith(COMMAND)]
    assert len(blocks) == 1, "docs/assignors.md prints the example's output once"
    return str(blocks[0][len(COMMAND) :])


@pytest.mark.kafka4
@pytest.mark.timeout(400)
def test_the_example_prints_what_the_docs_print() -> None:
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"Kafka {KAFKA4_VERSION}: {reason}", pytrace=False)
        pytest.skip(f"Kafka {KAFKA4_VERSION} cannot run here: {reason}")
    env = {k: v for k, v in os.environ.items() if k != "AIOGROUP_RACK_BOOTSTRAP"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "rack_aware.py")],
        capture_output=True,
        text=True,
        timeout=380,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout == printed_output()
