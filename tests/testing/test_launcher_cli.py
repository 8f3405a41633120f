"""The launchers' command lines clean up on SIGTERM and SIGHUP as on Ctrl-C.

Each test starts ``python -m aiogroup.testing.<launcher>`` as a subprocess, waits for its
``ready`` line (which names the bootstrap, the server pids and the work folder), signals it, and
checks by pid that every server it started is gone and its work folder removed.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiogroup.testing import wire
from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KAFKA_VERSION, kafka_available
from aiogroup.testing.launchers.processes import free_port
from aiogroup.testing.launchers.tansu import find_tansu

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie still answers kill(0); it is gone once its parent reaps it
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class Cli:
    """A launcher's command line in a subprocess, its stdout read line by line."""

    def __init__(self, *args: str) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "AIOGROUP_KAFKA_KEEP": "0"}
        self.process = subprocess.Popen(
            [sys.executable, "-u", "-m", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, word: str, timeout: float) -> dict[str, str]:
        """The fields of the next line starting with ``word`` (``key=value`` pairs)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {word!r} line in {timeout:g} s: {self.seen}") from None
            if line is None:
                raise AssertionError(f"exited ({self.process.poll()}) before {word!r}: {self.seen}")
            self.seen.append(line)
            if line.startswith(word + " "):
                return dict(f.split("=", 1) for f in line.split()[1:] if "=" in f)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


@pytest.fixture
def clis() -> Iterator[list[Cli]]:
    started: list[Cli] = []
    yield started
    for cli in started:
        cli.stop()


def server_pids(fields: dict[str, str]) -> list[int]:
    return [int(v) for k, v in fields.items() if k not in ("bootstrap", "work")]


def partitions_of(bootstrap: str, topic: str) -> int:
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        meta = wire.blocking_request(s, "Metadata", 1, {"topics": [{"name": topic}]})
    return len(meta.topics[0].partitions)


def _need(version: str) -> None:
    ok, reason = kafka_available(version)
    if not ok:
        pytest.skip(reason)


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("version", "sig", "keep"),
    [
        pytest.param(KAFKA_VERSION, signal.SIGTERM, False, marks=pytest.mark.kafka23, id="23-TERM"),
        pytest.param(KAFKA4_VERSION, signal.SIGTERM, False, marks=pytest.mark.kafka4, id="4-TERM"),
        pytest.param(KAFKA4_VERSION, signal.SIGHUP, False, marks=pytest.mark.kafka4, id="4-HUP"),
        pytest.param(KAFKA4_VERSION, signal.SIGTERM, True, marks=pytest.mark.kafka4, id="4-keep"),
    ],
)
def test_kafka_cli_stops_every_process_and_removes_its_work_folder(
    clis: list[Cli], version: str, sig: signal.Signals, keep: bool
) -> None:
    _need(version)
    args = ["--version", version, "--topic", "orders:3", "--topic", "audit"]
    cli = Cli("aiogroup.testing.launchers.kafka", *args, *(["--keep"] if keep else []))
    clis.append(cli)
    ready = cli.wait_for("ready", 240)
    pids, work = server_pids(ready), Path(ready["work"])
    try:
        assert pids and all(alive(p) for p in pids)
        assert work.is_dir()
        assert partitions_of(ready["bootstrap"], "orders") == 3
        assert partitions_of(ready["bootstrap"], "audit") == 1
        cli.process.send_signal(sig)
        assert cli.process.wait(timeout=60) == 0
        assert not [p for p in pids if alive(p)]
        assert work.exists() is keep
        if keep:
            assert (work / "server.log").stat().st_size > 0
    finally:
        if keep:
            shutil.rmtree(work, ignore_errors=True)


def test_a_bad_topic_is_refused_by_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aiogroup.testing.launchers.kafka", "--topic", "orders:zero"],
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 2
    assert "want NAME[:PARTITIONS]" in done.stderr


@pytest.mark.kafka4
@pytest.mark.timeout(300)
def test_kafka_cli_restarts_the_broker_on_sigusr1(clis: list[Cli]) -> None:
    _need(KAFKA4_VERSION)
    cli = Cli("aiogroup.testing.launchers.kafka", "--version", KAFKA4_VERSION, "--topic", "moved:2")
    clis.append(cli)
    ready = cli.wait_for("ready", 240)
    cli.process.send_signal(signal.SIGUSR1)
    restarted = cli.wait_for("restarted", 240)
    assert restarted["bootstrap"] == ready["bootstrap"]
    assert restarted["kafka"] != ready["kafka"] and not alive(int(ready["kafka"]))
    assert partitions_of(restarted["bootstrap"], "moved") == 2  # data kept
    cli.process.send_signal(signal.SIGTERM)
    assert cli.process.wait(timeout=60) == 0
    assert not alive(int(restarted["kafka"]))
    assert not Path(ready["work"]).exists()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_embedded_broker_cli_exits_cleanly(clis: list[Cli], sig: signal.Signals) -> None:
    port = free_port()
    cli = Cli("aiogroup.testing.embedded", "--port", str(port), "--topic", "t:2")
    clis.append(cli)
    cli.wait_for("aiogroup", 30)
    assert partitions_of(f"127.0.0.1:{port}", "t") == 2
    cli.process.send_signal(sig)
    assert cli.process.wait(timeout=30) == 0


@pytest.mark.tansu
@pytest.mark.timeout(60)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_tansu_cli_stops_tansu(clis: list[Cli], sig: signal.Signals) -> None:
    if find_tansu() is None:
        pytest.skip("Tansu is not installed (pip install 'aiogroup[broker]')")
    cli = Cli("aiogroup.testing.launchers.tansu")
    clis.append(cli)
    ready = cli.wait_for("ready", 30)
    pid = int(ready["tansu"])
    assert alive(pid)
    cli.process.send_signal(sig)
    assert cli.process.wait(timeout=30) == 0
    assert not alive(pid)


@pytest.mark.timeout(60)
def test_embedded_broker_cli_sets_the_kip848_group_settings(clis: list[Cli]) -> None:
    """``--group-consumer NAME=VALUE`` sets Kafka's ``group.consumer.NAME``: a member joining a
    KIP-848 group is told the interval given (Kafka's default is 5000 ms, its minimum too)."""
    import asyncio

    from aiogroup.testing.embedded.client import RawClient

    port = free_port()
    settings = ("min.heartbeat.interval.ms=100", "heartbeat.interval.ms=300",
                "min.session.timeout.ms=1000", "session.timeout.ms=4000")  # fmt: skip
    args = [a for s in settings for a in ("--group-consumer", s)]
    cli = Cli("aiogroup.testing.embedded", "--port", str(port), "--topic", "t:2", *args)
    clis.append(cli)
    cli.wait_for("aiogroup", 30)

    async def join() -> tuple[int, int]:
        async with RawClient(f"127.0.0.1:{port}") as client:
            r = await client.request("ConsumerGroupHeartbeat", 1, {
                "group_id": "g", "member_id": "m" * 22, "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["t"],
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": [],
            })  # fmt: skip
            return r.error_code, r.heartbeat_interval_ms

    assert asyncio.run(join()) == (0, 300)
    cli.process.send_signal(signal.SIGTERM)
    assert cli.process.wait(timeout=30) == 0
    bad = subprocess.run(
        [sys.executable, "-m", "aiogroup.testing.embedded", "--group-consumer", "session=1"],
        capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert bad.returncode == 2 and "min.session.timeout.ms" in bad.stderr
