"""Java's own assignors (kafka-clients 4.1.1) as a subprocess, for the KIP-881 cross-checks.

``tests/assignors/java/JavaAssignors.java`` is compiled once against kafka-clients and its
jars (the Java peer's pinned list, :func:`aiogroup.testing.peers.java_command`); one JVM
answers every case of a test module, one case at a time over stdin and stdout.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from aiogroup.assignors.base import PartitionRacks
from aiogroup.protocol.types import PartitionsByTopic, Subscription
from aiogroup.testing.peers import PeerUnavailableError, java_command

SOURCE = Path(__file__).with_name("java") / "JavaAssignors.java"

Plan = dict[str, dict[str, tuple[int, ...]]]


class JavaAssignors:
    """One JVM running Java's ``RangeAssignor`` and sticky balancer on the cases it is sent."""

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            java_command(SOURCE, "JavaAssignors"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)

    def assign(
        self,
        kind: str,
        partitions_per_topic: Mapping[str, int],
        partition_racks: PartitionRacks,
        subscriptions: Mapping[str, Subscription],
    ) -> Plan:
        """Java's plan for one case: ``kind`` is ``range`` or ``sticky`` (the balancer both
        sticky assignors share, before the cooperative adjustment)."""
        lines = [f"CASE {kind}"]
        # As Java's leader: only the topics some member subscribes to (its sticky assignor
        # hands out every partition it is given).
        wanted = {t for s in subscriptions.values() for t in s.topics}
        for topic, n in partitions_per_topic.items():
            if topic not in wanted or n <= 0:
                continue
            racks = partition_racks.get(topic, ())
            cells = [
                ",".join(sorted(racks[p])) if p < len(racks) and racks[p] else "-" for p in range(n)
            ]
            lines.append(f"TOPIC {topic} {' '.join(cells)}")
        for member, s in subscriptions.items():
            lines.append(
                f"MEMBER {member} {s.rack_id or '-'} {s.generation_id} "
                f"{getattr(s, 'group_instance_id', None) or '-'} "
                f"{','.join(s.topics) or '-'} {_owned(s.owned_partitions)}"
            )
        lines.append("END")
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("\n".join(lines) + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "RESULT"
        plan: Plan = {}
        while (line := proc.stdout.readline().strip()) != "END":
            member, spec = line.split(" ")
            plan[member] = {}
            if spec != "-":
                for part in spec.split(";"):
                    topic, nums = part.split(":")
                    plan[member][topic] = tuple(int(p) for p in nums.split(","))
        return plan


def _owned(owned: PartitionsByTopic) -> str:
    parts = [f"{t}:{','.join(map(str, ps))}" for t, ps in sorted(owned.items()) if ps]
    return ";".join(parts) or "-"


def java_assignors() -> Iterator[JavaAssignors]:
    """A module fixture's body: the JVM, or a skip saying what is missing."""
    try:
        java = JavaAssignors()
    except PeerUnavailableError as exc:
        pytest.skip(f"Java's assignors cannot run here: {exc}")
    try:
        yield java
    finally:
        java.close()
