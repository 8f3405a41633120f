"""examples/service.py, run for real: its demo mode on the embedded broker, and its pieces."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiogroup.protocol.types import TopicPartition
from examples import service

pytestmark = pytest.mark.timeout(180)

SCRIPT = Path(service.__file__)


def test_demo_processes_every_order_and_sets_the_bad_one_aside() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--demo"], capture_output=True, text=True, timeout=170
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "processed 2000 orders" in out.stdout
    assert "dead letters: [(TopicPartition(topic='orders'" in out.stdout
    assert "JSONDecodeError" in out.stdout


async def test_state_follows_the_assignment() -> None:
    billing = service.Billing()
    a, b = TopicPartition("orders", 0), TopicPartition("orders", 1)
    billing.on_partitions_assigned(frozenset({a, b}))

    class R:
        def __init__(self, customer: str, amount: float) -> None:
            self.value = {"customer": customer, "amount": amount}

    await billing.process(a, [R("x", 2.0), R("y", 1.0)])  # type: ignore[list-item]
    await billing.process(b, [R("x", 5.0)])  # type: ignore[list-item]
    billing.on_partitions_revoked(frozenset({a}))  # handed over: flushed
    billing.on_partitions_lost(frozenset({b}))  # lost: dropped (redone by its new owner)
    assert billing.all_totals() == {"x": 2.0, "y": 1.0}
    assert json.dumps(billing.all_totals())
