"""Server processes the tests, benchmarks and command lines start, and stop again by pid.

:class:`ServerProcess` is the one way aiogroup's launchers (Apache Kafka in KRaft mode, Kafka
2.3 and its ZooKeeper, Tansu) run a server: it starts in its own session (so its own process
group, and a signal to our terminal or group does not reach it), writes its output to a log
file, is waited for with a deadline whose error shows the end of that log, and is stopped by
its pid: SIGTERM to its process group, then SIGKILL after a grace period. It never signals a
process it did not start.

:func:`stop_on_signals` makes a command line clean up on SIGTERM and SIGHUP as on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO

from aiogroup.errors import AiogroupError

__all__ = [
    "ServerProcess",
    "ServerStartError",
    "StopSignal",
    "free_port",
    "stop_on_signals",
    "terminate",
]


class ServerStartError(AiogroupError):
    """A server process exited or was not ready in time; the message shows its log's end."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def terminate(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL; nothing if it has exited."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        process.wait(timeout=10)


class ServerProcess:
    """One server process: ``argv`` run in its own session, its output appended to ``log``.

    ``log=None`` discards the output. ``logs`` names more files the server writes itself (a
    log4j file, say) whose end :meth:`tail` shows too. ``error`` is the exception type raised
    by :meth:`wait_ready` (a launcher's own subclass of :class:`ServerStartError`).
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        log: Path | None = None,
        logs: Sequence[Path] = (),
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        error: type[ServerStartError] = ServerStartError,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log = log
        self.logs = [*logs, *([log] if log is not None else [])]
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.error = error
        self.process: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise ServerStartError(f"{self.name} was never started")
        return self.process.pid

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> ServerProcess:
        """Spawn it (once) in its own session; returns at once, see :meth:`wait_ready`."""
        if self.process is not None:
            raise ServerStartError(f"{self.name} was already started (pid {self.process.pid})")
        if self.log is not None:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            self._out = self.log.open("ab")
        try:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._out if self._out is not None else subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        except OSError as exc:
            self._close_log()
            raise self.error(f"cannot start {self.name} ({self.argv[0]}): {exc}") from exc
        return self

    def wait_ready(
        self,
        ready: Callable[[], bool],
        *,
        timeout: float,
        interval: float = 0.1,
        where: str = "",
    ) -> None:
        """Poll ``ready()`` until it is true; raise :attr:`error` with the log's end if the
        process exits or ``timeout`` seconds pass. ``ready`` may raise OSError, TimeoutError or
        an :class:`AiogroupError` while the server is coming up: those count as "not yet".
        ``where`` is added to the error (e.g. "logs kept in /tmp/...")."""
        deadline = time.monotonic() + timeout
        last: BaseException | None = None
        suffix = f"; {where}" if where else ""
        while True:
            code = self.returncode
            if code is not None:
                raise self.error(
                    f"{self.name} exited with code {code} while starting{suffix}:\n{self.tail()}"
                )
            try:
                if ready():
                    return
            except (OSError, TimeoutError, AiogroupError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise self.error(
                    f"{self.name} was not ready within {timeout:g} s ({last!r}){suffix}:\n"
                    f"{self.tail()}"
                )
            time.sleep(interval)  # polling a server for readiness, not synchronising tests

    def tail(self, lines: int = 25) -> str:
        """The last ``lines`` lines of each of its log files (those that exist)."""
        parts: list[str] = []
        for path in self.logs:
            with contextlib.suppress(OSError):
                text = path.read_text(errors="replace").splitlines()[-lines:]
                if text:
                    parts.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(parts) or "(no output)"

    def stop(self, grace: float = 15.0) -> None:
        """SIGTERM to its process group, SIGKILL to it after ``grace`` s; waits for the exit.

        Signals go only while the process is ours and not yet reaped (its pid, which is also
        its process group's id, cannot have been reused then).
        """
        process = self.process
        if process is not None and process.poll() is None:
            self._signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self._signal_group(process, signal.SIGKILL)
                process.wait(timeout=10)
        self._close_log()

    @staticmethod
    def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)

    def _close_log(self) -> None:
        out, self._out = self._out, None
        if out is not None:
            out.close()


class StopSignal(BaseException):
    """Raised in the main thread by :func:`stop_on_signals` (like KeyboardInterrupt)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


@contextlib.contextmanager
def stop_on_signals(
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT),
) -> Iterator[None]:
    """While inside, the first of ``signals`` raises :class:`StopSignal` in the main thread, so
    ``with`` blocks and ``finally`` clauses clean up as on Ctrl-C; later ones are ignored while
    that clean-up runs. The previous handlers come back on exit. Main thread only."""
    stopping = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise StopSignal(signum)

    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
