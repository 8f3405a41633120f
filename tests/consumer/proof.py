"""Judging a group's run from its members' logs (consumer_proc.py): coverage, duplicates,
concurrent consumption, and records delivered during rebalances. Only stamps and callbacks
are used, never wall-clock thresholds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.integration.harness import Peer, ownership, read_events

PROC = Path(__file__).with_name("consumer_proc.py")

Event = dict[str, Any]


class Member(Peer):
    """One consumer process and its log (SIGTERM closes it cleanly; SIGKILL, SIGSTOP)."""

    def kill(self) -> None:
        """SIGKILL; the log gets a synthetic ``closed`` (it can no longer write one)."""
        running = self.process.poll() is None
        super().kill()
        if running:
            with open(self.log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"t": time.time(), "who": self.name, "event": "closed"}) + "\n")


def start(
    kind: str, name: str, bootstrap: str, group: str, topic: str, folder: Path, **options: Any
) -> Member:
    log = folder / f"{name}.jsonl"
    argv = [
        sys.executable,
        str(PROC),
        kind,
        "--bootstrap",
        bootstrap,
        "--group",
        group,
        "--topic",
        topic,
        "--out",
        str(log),
        "--name",
        name,
    ]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    errors = open(folder / f"{name}.stderr", "wb")  # noqa: SIM115 - closed below
    try:
        process = subprocess.Popen(
            argv,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    finally:
        errors.close()
    return Member(kind, name, process, log)


def events(members: Iterable[Member]) -> list[Event]:
    """Every member's events so far, by time (whole lines only: see ``read_events``)."""
    out: list[Event] = []
    for m in members:
        out.extend(read_events(m.log))
    out.sort(key=lambda e: e["t"])
    return out


def owned(evs: Iterable[Event]) -> dict[str, set[int]]:
    """What each member owns after ``evs`` (partition numbers; one topic per run)."""
    callbacks = [e for e in evs if e["event"] in ("assigned", "revoked", "lost", "closed")]
    for e in callbacks:
        e.setdefault("partitions", [])
    return {who: {p for _, p in parts} for who, parts in ownership(callbacks).items()}


def converged(evs: list[Event], members: Iterable[str], partitions: int) -> bool:
    """Every partition owned once, by ``members`` only, balanced within one."""
    own = owned(evs)
    names = list(members)
    union = [p for n in names for p in own.get(n, ())]
    others = [p for n, ps in own.items() if n not in names for p in ps]
    if sorted(union) != list(range(partitions)) or others:
        return False
    counts = [len(own.get(n, ())) for n in names]
    return max(counts) - min(counts) <= 1


def processed(evs: Iterable[Event]) -> list[tuple[float, str, int, int]]:
    """Every record handed to an application: (stamp, member, partition, offset)."""
    return [
        (e["t"], e["who"], p, o) for e in evs if e["event"] == "records" for p, o in e["records"]
    ]


def missing(evs: Iterable[Event], sent: dict[int, int]) -> set[tuple[int, int]]:
    seen = {(p, o) for _, _, p, o in processed(evs)}
    return {(p, o) for p, n in sent.items() for o in range(n)} - seen


def duplicates(evs: Iterable[Event]) -> list[tuple[int, int]]:
    seen: set[tuple[int, int]] = set()
    twice = []
    for _, _, p, o in processed(evs):
        if (p, o) in seen:
            twice.append((p, o))
        seen.add((p, o))
    return twice


def concurrency_problems(evs: list[Event]) -> list[str]:
    """Records processed outside the member's own ownership (by its callbacks), and any
    moment two members were processing one partition (their spans of records, between their
    callbacks, overlap)."""
    problems: list[str] = []
    owner_since: dict[tuple[str, int], float] = {}
    spans: dict[int, list[tuple[float, float, str]]] = {}
    current: dict[tuple[str, int], list[float]] = {}

    def close_span(who: str, p: int) -> None:
        stamps = current.pop((who, p), None)
        if stamps:
            spans.setdefault(p, []).append((min(stamps), max(stamps), who))

    for e in evs:
        who = e["who"]
        kind = e["event"]
        parts = [p for _, p in e.get("partitions", ())]
        if kind == "assigned":
            for p in parts:
                owner_since[(who, p)] = e["t"]
        elif kind in ("revoked", "lost"):
            for p in parts:
                owner_since.pop((who, p), None)
                close_span(who, p)
        elif kind == "closed":
            for key in [k for k in owner_since if k[0] == who]:
                del owner_since[key]
            for key in [k for k in current if k[0] == who]:
                close_span(*key)
        elif kind == "records":
            for p, o in e["records"]:
                if (who, p) not in owner_since:
                    problems.append(f"{who} processed {p}@{o} at {e['t']:.3f} without owning it")
                current.setdefault((who, p), []).append(e["t"])
    for key in list(current):
        close_span(*key)
    for p, ranges in spans.items():
        for i, (s1, e1, w1) in enumerate(ranges):
            for s2, e2, w2 in ranges[i + 1 :]:
                if w1 != w2 and s1 < e2 and s2 < e1:
                    problems.append(
                        f"partition {p}: {w1} {s1:.3f}-{e1:.3f} overlaps {w2} {s2:.3f}-{e2:.3f}"
                    )
    return problems


def records_during_rebalances(evs: list[Event], who: str) -> tuple[int, int]:
    """For ``who``: (rebalances it kept partitions through, records of those kept partitions
    it processed between its JoinGroup and the end of that rebalance)."""
    mine = [e for e in evs if e["who"] == who]
    windows: list[tuple[float, float, set[int]]] = []
    start: float | None = None
    own_at_start: set[int] = set()
    own: set[int] = set()
    for e in mine:
        parts = {p for _, p in e.get("partitions", ())}
        if e["event"] == "assigned":
            own |= parts
        elif e["event"] in ("revoked", "lost"):
            own -= parts
        elif e["event"] == "state":
            if e["state"] == "joining" and start is None:
                start, own_at_start = e["t"], set(own)
            elif e["state"] == "stable" and start is not None:
                kept = own_at_start & own
                if kept:
                    windows.append((start, e["t"], kept))
                start = None
    count = 0
    for t, _who, p, _ in processed(mine):
        if any(s < t < end and p in kept for s, end, kept in windows):
            count += 1
    return len(windows), count
