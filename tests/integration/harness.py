"""Helpers for integration tests: topics, peer processes, callback logs and their checks."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiogroup.testing import wire

PEER_SCRIPT = Path(__file__).with_name("peer_proc.py")
SESSION_MS = 6000
HEARTBEAT_MS = 1000
#: Generous: Tansu holds every JoinGroup for half a session; a cooperative join takes ~11 s.
CONVERGE_S = 5 * SESSION_MS / 1000 + 20

Partition = tuple[str, int]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create ``{topic: partitions}`` and wait until metadata shows them (bounded)."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(t, n, 1) for t, n in topics.items()])
    finally:
        admin.close()
    # A KRaft broker answers CreateTopics before its metadata shows the topic: a member that
    # joined now would be assigned nothing and rebalance again once it appears.
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    wanted = [{"name": t} for t in topics]

    def visible() -> bool:
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            meta = wire.blocking_request(sock, "Metadata", 1, {"topics": wanted})
        counts = {
            t.name: sum(1 for p in t.partitions if p.leader_id >= 0)
            for t in meta.topics
            if t.error_code == 0
        }
        return all(counts.get(t) == n for t, n in topics.items())

    wait_until(visible, 30, f"metadata to show {sorted(topics)}")


def wait_until(
    condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.1
) -> Any:
    """Poll ``condition`` until it is truthy (returns its value) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)  # polling a condition with a bound, not a synchronising sleep


def read_events(path: Path) -> list[dict[str, Any]]:
    """A member's JSON-lines log, by time. Only whole lines: the member may be writing as we
    read, and a long line (a batch of records) reaches the file in pieces."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8")
    whole = text[: text.rfind("\n") + 1]
    events = [json.loads(line) for line in whole.splitlines() if line.strip()]
    events.sort(key=lambda e: e["t"])
    return events


@dataclass
class Peer:
    """One member running in its own process (see peer_proc.py)."""

    kind: str
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def terminate(self, timeout: float = 30.0) -> None:
        """SIGTERM (clean close: the member leaves the group), then wait; kill if stuck."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


def start_peer(
    kind: str,
    name: str,
    bootstrap: str,
    group: str,
    topics: Iterable[str],
    log: Path,
    telemetry_dir: Path | None = None,
) -> Peer:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    errlog = open(log.with_suffix(f".{name}.stderr"), "wb")  # noqa: SIM115 (closed with the process)
    process = subprocess.Popen(
        [
            sys.executable,
            str(PEER_SCRIPT),
            kind,
            "--bootstrap",
            bootstrap,
            "--group",
            group,
            "--topics",
            ",".join(topics),
            "--out",
            str(log),
            "--name",
            name,
            "--session-ms",
            str(SESSION_MS),
            "--heartbeat-ms",
            str(HEARTBEAT_MS),
            *(["--telemetry-dir", str(telemetry_dir)] if telemetry_dir else []),
        ],
        stdout=subprocess.DEVNULL,
        stderr=errlog,
        env=env,
    )
    errlog.close()
    return Peer(kind, name, process, log)


# --------------------------------------------------------------------------- ownership


def ownership(events: Iterable[dict[str, Any]]) -> dict[str, set[Partition]]:
    """What each member owns after ``events`` (incremental callbacks, cooperative)."""
    owned: dict[str, set[Partition]] = {}
    for e in events:
        parts = {(t, p) for t, p in e["partitions"]}
        mine = owned.setdefault(e["who"], set())
        if e["event"] == "assigned":
            mine |= parts
        elif e["event"] in ("revoked", "lost"):
            mine -= parts
        elif e["event"] == "closed":
            mine.clear()
    return owned


def double_ownership(events: Iterable[dict[str, Any]]) -> list[str]:
    """Every moment a partition was handed to a member while another still held it."""
    owner: dict[Partition, str] = {}
    problems = []
    for e in events:
        parts = [(t, p) for t, p in e["partitions"]]
        who = e["who"]
        if e["event"] == "assigned":
            for tp in parts:
                if tp in owner and owner[tp] != who:
                    problems.append(f"{tp} assigned to {who} at {e['t']:.3f}, still {owner[tp]}'s")
                owner[tp] = who
        elif e["event"] in ("revoked", "lost"):
            for tp in parts:
                if owner.get(tp) == who:
                    del owner[tp]
        elif e["event"] == "closed":
            for tp in [tp for tp, w in owner.items() if w == who]:
                del owner[tp]
    return problems


def converged(
    events: list[dict[str, Any]], members: Iterable[str], partitions: set[Partition]
) -> bool:
    """Every partition owned exactly once, by the given members, all of them owning some."""
    owned = ownership(events)
    members = list(members)
    union: list[Partition] = []
    for m in members:
        union.extend(owned.get(m, ()))
    if sorted(union) != sorted(partitions):
        return False
    counts = [len(owned.get(m, ())) for m in members]
    return max(counts) - min(counts) <= 1


def start_concurrently(
    scenarios: dict[str, Callable[[], None]],
) -> tuple[dict[str, Future[None]], list[threading.Thread]]:
    """Start every scenario in its own thread; each future holds its result or its failure.

    Scenarios on one broker share nothing but the broker (distinct groups and topics), so a
    module's slow rebalances overlap instead of adding up.
    """
    futures: dict[str, Future[None]] = {}
    threads = []
    for name, fn in scenarios.items():
        future: Future[None] = Future()
        futures[name] = future

        def run(fn: Callable[[], None] = fn, future: Future[None] = future) -> None:
            try:
                fn()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(None)

        thread = threading.Thread(target=run, name=f"scenario-{name}", daemon=True)
        thread.start()
        threads.append(thread)
    return futures, threads
