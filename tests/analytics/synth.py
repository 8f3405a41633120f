"""Hand-built event sets with known answers for the audit tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class Recorder:
    """Writes events in the telemetry schema with explicit times (one file per member)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.lines: dict[str, list[str]] = {}
        self.seq: dict[str, int] = {}

    def event(self, group: str, member: str, type_: str, ts: float, **fields: Any) -> None:
        seq = self.seq.get(member, 0)
        self.seq[member] = seq + 1
        record = {
            "v": 1,
            "type": type_,
            "ts": ts,
            "seq": seq,
            "group": group,
            "member": member,
            "member_id": f"{member}-id",
            "client": "aiogroup",
            **fields,
        }
        self.lines.setdefault(member, []).append(json.dumps(record))

    def parts(
        self,
        group: str,
        member: str,
        kind: str,
        gen: int | None,
        protocol: str,
        partitions: dict[str, list[int]],
        started: float,
        ended: float,
    ) -> None:
        self.event(
            group,
            member,
            f"partitions_{kind}",
            ended,
            generation_id=gen,
            protocol=protocol,
            rebalance_protocol="cooperative" if "cooperative" in protocol else "eager",
            partitions=partitions,
            started=started,
            ended=ended,
        )

    def write(self) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        for member, lines in self.lines.items():
            (self.directory / f"{member}.0000.jsonl").write_text("\n".join(lines) + "\n")
        return self.directory


COOP = "cooperative-sticky"
EAGER = "range"


def planted(directory: Path) -> Path:
    """Group ``g``: a clean cooperative scale-out. Group ``z``: a zombie, a tolerated overlap."""
    r = Recorder(directory)
    # --- group g: A alone, then B joins (KIP-429 two rounds), then both leave ------------
    r.event("g", "A", "joined", 9.0, generation_id=1, protocol=COOP)
    r.parts("g", "A", "assigned", 1, COOP, {"t": [0, 1, 2, 3, 4, 5]}, 10.0, 10.1)
    r.event("g", "A", "rebalance_completed", 10.1, generation_id=1, latency_s=1.0)
    r.event("g", "A", "joined", 19.0, generation_id=2, protocol=COOP)
    r.event("g", "B", "joined", 19.0, generation_id=2, protocol=COOP)
    r.parts("g", "A", "revoked", 2, COOP, {"t": [3, 4, 5]}, 20.0, 20.2)
    r.event("g", "A", "joined", 20.5, generation_id=3, protocol=COOP)
    r.event("g", "B", "joined", 20.5, generation_id=3, protocol=COOP)
    r.parts("g", "A", "assigned", 3, COOP, {}, 21.0, 21.0)
    r.parts("g", "B", "assigned", 3, COOP, {"t": [3, 4, 5]}, 21.0, 21.1)
    r.event("g", "A", "rebalance_completed", 21.0, generation_id=3, latency_s=2.0)
    r.event("g", "B", "rebalance_completed", 21.1, generation_id=3, latency_s=3.0)
    r.parts("g", "A", "revoked", 3, COOP, {"t": [0, 1, 2]}, 49.9, 50.0)
    r.parts("g", "B", "revoked", 3, COOP, {"t": [3, 4, 5]}, 49.9, 50.0)
    r.event("g", "A", "closed", 50.1, generation_id=3)
    r.event("g", "B", "closed", 50.1, generation_id=3)
    # --- group z: eager; D is a zombie after its session expired; E -> F hand-off skewed -----
    r.parts("z", "D", "assigned", 1, EAGER, {"u": [0, 1]}, 100.0, 100.1)
    r.event("z", "E", "joined", 109.9, generation_id=2, protocol=EAGER)
    r.parts("z", "E", "assigned", 2, EAGER, {"u": [0, 1]}, 110.0, 110.1)
    r.parts("z", "D", "lost", 1, EAGER, {"u": [0, 1]}, 112.0, 112.5)
    r.parts("z", "E", "revoked", 2, EAGER, {"u": [1]}, 120.0, 120.03)
    r.event("z", "E", "joined", 120.005, generation_id=3, protocol=EAGER)
    r.parts("z", "F", "assigned", 3, EAGER, {"u": [1]}, 120.01, 120.1)
    r.parts("z", "E", "assigned", 3, EAGER, {"u": [0]}, 120.06, 120.07)  # already owned
    r.event("z", "E", "closed", 130.0, generation_id=3)
    r.event("z", "F", "closed", 130.0, generation_id=3)
    return r.write()


BAD_LINES = [
    '{"v":1,"type":"partitions_assigned","ts":5.0,"group":"g","member":"X","partiti',  # truncated
    "not json at all",
    '{"v":1,"type":"heartbeat_sent","ts":5.0,"group":"g","member":"X"}',  # unknown type
    '{"v":1,"type":"partitions_assigned","ts":5.0,"group":"g","member":"X"}',  # no partitions
    '{"v":1,"type":"rebalance_completed","ts":5.0,"group":"g","member":"X"}',  # no latency
    '{"type":"closed","ts":5.0,"group":"g","member":"X"}',  # no version
    # a newer schema that would plant an overlap if it were read as v1
    '{"v":2,"type":"partitions_assigned","ts":30.0,"group":"g","member":"X","generation_id":3,'
    '"partitions":{"t":[0]},"started":30.0,"ended":30.1}',
    '{"v":1,"type":"processed","ts":"yesterday","group":"g","member":"X","topic":"t"}',
]


def bad_input(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "bad.jsonl").write_text("\n".join(BAD_LINES) + "\n")
    return directory
