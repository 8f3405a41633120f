"""examples/manual_assignment.py runs as docs/consumer.md prints it (the embedded broker)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMAND = "$ python examples/manual_assignment.py\n"


def printed_output() -> str:
    page = (ROOT / "docs" / "consumer.md").read_text()
    blocks = [b for b in re.findall(r"```console\n(.*?)```", page, re.S) if b.startswith(COMMAND)]
    assert len(blocks) == 1, "docs/consumer.md prints the example's output once"
    return str(blocks[0][len(COMMAND) :])


def test_the_example_prints_what_the_docs_print() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "manual_assignment.py")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == printed_output()
