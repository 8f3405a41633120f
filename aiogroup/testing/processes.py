"""Stopping a server process the tests or benchmarks started, by its pid."""

from __future__ import annotations

import contextlib
import signal
import subprocess

__all__ = ["terminate"]


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
