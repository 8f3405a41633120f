"""The JSON logging example of docs/logging.md runs as printed, and every line a member logs
carries its identity (group, client, member id, generation, static id) as fields."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.docs.test_examples_run import python_blocks


def test_the_json_logging_example_prints_the_members_fields(tmp_path: Path) -> None:
    (block,) = [b for b in python_blocks("logging.md") if "JsonFormatter" in b]
    script = tmp_path / "json_logs.py"
    script.write_text(block)
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]  # every line is JSON
    ours = [line for line in lines if not line["logger"].startswith("aiogroup.testing")]
    first: dict[str, dict[str, object]] = {}
    for line in ours:
        first.setdefault(line["message"].split(" ")[0], line)
    joined, completed, closed = first["joined"], first["rebalance"], first["closed:"]
    member_id = joined["member_id"]
    assert isinstance(member_id, str) and member_id.startswith("billing-1-")
    for line in ours:  # every line logged for the member says whose it is
        assert line["group_id"] == "billing" and line.get("client_id") == "billing-1", line
        assert line["group_instance_id"] is None
        assert line["member_id"] in ("", member_id)
        assert isinstance(line["generation_id"], int) and "member_epoch" not in line
    assert joined["generation_id"] == completed["generation_id"] == 1
    assert completed["assigned"] == 3 and completed["owned"] == 3
    assert closed["static"] is False
    # The embedded broker's own lines belong to no member: no member fields.
    broker = [line for line in lines if line["logger"].startswith("aiogroup.testing")]
    assert all("member_id" not in line for line in broker)
