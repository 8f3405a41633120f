"""The self-contained examples of the docs run as they are printed (a new user copies them)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"```python\n(.*?)```", re.S)


def python_blocks(page: str) -> list[str]:
    return FENCE.findall((ROOT / "docs" / page).read_text())


def test_getting_started_embedded_example_reads_and_commits(tmp_path: Path) -> None:
    (block,) = [b for b in python_blocks("getting-started.md") if "EmbeddedBroker(" in b]
    script = tmp_path / "first.py"
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    values = sorted(line.split(" ", 2)[2] for line in lines[:-1])
    assert values == sorted(f"b'order {i}'" for i in range(9))
    assert lines[-1] == "{0: 3, 1: 3, 2: 3}"
