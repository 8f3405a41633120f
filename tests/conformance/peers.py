"""Real-client peers for the conformance scenarios: consumer processes and their events.

Each :class:`Peer` is a consumer in its own process writing JSON-line events that a reader
thread collects: librdkafka (confluent-kafka) or kafka-python (``peer.py``), or Apache Kafka's
Java client or franz-go (the programs of :mod:`aiogroup.testing.peers`, kinds ``java`` and
``franz-go``, which speak the same protocol).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.testing.peers import KINDS as PROGRAM_KINDS
from aiogroup.testing.peers import peer_command

PEER = Path(__file__).with_name("peer.py")
SESSION_MS = 6000


def settings(handle: BrokerHandle) -> dict[str, Any]:
    """Heartbeat and waits per broker (Tansu: slow rebalances, no timing assertions)."""
    if handle.kind == "tansu":
        return {"heartbeat_ms": 1000, "wait": 5 * SESSION_MS / 1000 + 30}
    return {"heartbeat_ms": 500, "wait": 60.0}


class Peer:
    """A consumer process; its JSON-line events are collected by a reader thread."""

    def __init__(
        self,
        handle: BrokerHandle,
        kind: str,
        *,
        group: str,
        topic: str,
        name: str,
        assignors: str = "range",
        instance_id: str = "",
        cond: threading.Condition | None = None,
        siblings: list[Peer] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.handle = handle
        self.group = group
        self.wait_s: float = settings(handle)["wait"]
        if kind in PROGRAM_KINDS:
            cmd = peer_command(
                kind,
                bootstrap=handle.bootstrap,
                group=group,
                topic=topic,
                name=name,
                assignors=assignors.split(","),
                instance_id=instance_id,
                session_ms=SESSION_MS,
                heartbeat_ms=settings(handle)["heartbeat_ms"],
                commit_every_ms=0,  # commits on "commit" (and on revocation) only, as peer.py
                commands=True,
            )
        else:
            cmd = [
                sys.executable,
                str(PEER),
                kind,
                "--bootstrap",
                handle.bootstrap,
                "--group",
                group,
                "--topic",
                topic,
                "--name",
                name,
                "--assignors",
                assignors,
                "--session-ms",
                str(SESSION_MS),
                "--heartbeat-ms",
                str(settings(handle)["heartbeat_ms"]),
            ]
            if instance_id:
                cmd += ["--instance-id", instance_id]
        self.events: list[dict[str, Any]] = []
        #: stdout lines that are not events (a JVM's thread dump on SIGQUIT).
        self.noise: list[str] = []
        # Shared by every peer of a scenario: predicates may look at several peers.
        self.cond = cond or threading.Condition()
        self.siblings = siblings if siblings is not None else [self]
        # Diagnostics for a wait that times out: the peer's stderr, and a dump of its threads
        # (peer.py writes one on SIGUSR1 into this folder).
        self.diag = Path(tempfile.mkdtemp(prefix=f"peer-{name}-"))
        self._stderr = (self.diag / "stderr.txt").open("w")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "PEER_TRACEBACKS": str(self.diag)},
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                self.noise.append(line)
                continue
            with self.cond:
                self.events.append(event)
                self.cond.notify_all()
        with self.cond:
            self.events.append({"event": "exited"})
            self.cond.notify_all()

    def wait_for(self, predicate: Callable[[Peer], bool], what: str, timeout: float = 0) -> None:
        deadline = time.monotonic() + (timeout or self.wait_s)
        with self.cond:
            # Woken by any peer's event; re-checked every 0.2 s too, for state that does not
            # notify (raw-request members on their own loops). Bounded by the deadline.
            while not predicate(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    view = self.handle.embedded.group(self.group) if self.handle.embedded else None
                    raise AssertionError(
                        f"{self.name}: timed out waiting for {what}: {self.events}; group {view}"
                        + "".join(p.diagnostics() for p in self.siblings)
                    )
                self.cond.wait(min(left, 0.2))

    def diagnostics(self) -> str:
        """The peer's thread dump (asked for now, waited for up to 2 s) and stderr tail."""
        if self.kind == "java":  # the JVM prints its threads on stdout on SIGQUIT
            if self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    self.proc.send_signal(signal.SIGQUIT)
                deadline = time.monotonic() + 2
                while time.monotonic() < deadline and not any("JNI" in n for n in self.noise):
                    time.sleep(0.05)  # polling for the dump's last line, bounded
            (self.diag / f"{self.name}-jvm.txt").write_text("".join(self.noise))
        elif self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and not any(
                f.stat().st_size for f in self.diag.glob(f"{self.name}-*.txt")
            ):
                time.sleep(0.05)  # polling for the dump file, bounded
        dumps = "".join(f.read_text(errors="replace") for f in self.diag.glob("*-*.txt"))
        stderr = (self.diag / "stderr.txt").read_text(errors="replace")
        return (
            f"\n--- {self.name} ({self.kind}) threads:\n{dumps[-3000:]}"
            f"\n--- {self.name} stderr:\n{stderr[-1500:]}"
        )

    def owned(self) -> list[int] | None:
        owned = [e["partitions"] for e in self.events if e["event"] == "owned"]
        return owned[-1] if owned else None

    def revoked(self) -> list[int]:
        return sorted(p for e in self.events if e["event"] == "revoked" for p in e["partitions"])

    def errors(self) -> list[int | None]:
        return [e.get("code") for e in self.events if e["event"] == "error"]

    def consumed(self) -> int:
        counts = [e["count"] for e in self.events if e["event"] == "consumed"]
        return counts[-1] if counts else 0

    def command(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """A clean close (the consumer leaves the group unless static), bounded."""
        if self.proc.poll() is None:
            with contextlib.suppress(BrokenPipeError, OSError):
                self.command("close")
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._stderr.close()
        shutil.rmtree(self.diag, ignore_errors=True)


class Peers:
    """Starts peers and guarantees they are gone at the end of a scenario."""

    def __init__(self, handle: BrokerHandle) -> None:
        self.handle = handle
        self.all: list[Peer] = []
        self.cond = threading.Condition()

    def start(self, kind: str, **kwargs: Any) -> Peer:
        peer = Peer(self.handle, kind, cond=self.cond, siblings=self.all, **kwargs)
        self.all.append(peer)
        return peer

    def __enter__(self) -> Peers:
        return self

    def __exit__(self, *exc: object) -> None:
        for peer in self.all:
            peer.kill()


def create_topic(handle: BrokerHandle, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": handle.bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(timeout=30)


def produce(handle: BrokerHandle, topic: str, count: int) -> None:
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": handle.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=b"v%d" % i, partition=0)
    assert producer.flush(30) == 0
