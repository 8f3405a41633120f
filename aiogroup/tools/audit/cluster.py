"""A Spark standalone cluster on this machine, from the installed pyspark, for the audit.

The audit is a spark-submit job (``aiogroup/tools/audit/job.py``). :class:`StandaloneCluster`
starts a master and workers with pyspark's own ``bin/spark-class``
(``org.apache.spark.deploy.master.Master`` and ``...worker.Worker``), everything bound to
127.0.0.1, and :meth:`StandaloneCluster.submit` runs the unchanged job on it with
``spark-submit --master spark://127.0.0.1:PORT``. It exists to show (and test) that the job
runs on a cluster exactly as in local mode; for a real cluster see docs/audit-cluster.md.

Usage::

    with StandaloneCluster(workers=2) as cluster:
        cluster.submit(["events/", "--out", "audit/"])

Every process is stopped by pid. ``quick_jit`` (default) runs the cluster's JVMs with the C1
compiler only and the serial collector: a short job on few cores spends most of its CPU
warming up, and three JVMs (driver and two executors) warm up side by side.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiogroup.testing.launchers.processes import terminate
from aiogroup.tools.audit.session import AnalyticsError, find_java

__all__ = ["JOB", "ClusterError", "StandaloneCluster", "spark_home"]

#: The spark-submit entry point of the audit.
JOB = Path(__file__).with_name("job.py")

#: JVM options of a short job's JVMs: C1 only (no C2 warm-up), the serial collector.
QUICK_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")


class ClusterError(AnalyticsError):
    """The cluster did not start, or a submitted job failed (the logs are kept and named)."""


def spark_home() -> Path:
    """The installed pyspark's directory, which holds ``bin/spark-class`` and ``jars/``."""
    try:
        import pyspark
    except ImportError as exc:  # pragma: no cover - the analytics extra is missing
        raise AnalyticsError("a Spark cluster needs PySpark: pip install 'aiogroup[analytics]'") \
            from exc
    home = Path(pyspark.__file__).parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise AnalyticsError(f"pyspark at {home} has no bin/spark-class or jars/")
    return home


def _free_port() -> int:
    from aiogroup.testing.launchers.tansu import free_port

    return free_port()


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log: Path


@dataclass
class StandaloneCluster:
    """A master and ``workers`` workers (``worker_cores`` cores, ``worker_memory`` each)."""

    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    daemon_memory: str = "256m"
    quick_jit: bool = True
    start_timeout: float = 240.0
    keep: bool = False
    host: str = "127.0.0.1"
    work: Path | None = None
    port: int = 0
    ui_port: int = 0
    _daemons: list[_Daemon] = field(default_factory=list)
    _failed: bool = False

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def pids(self) -> dict[str, int]:
        return {d.name: d.process.pid for d in self._daemons}

    def _env(self) -> dict[str, str]:
        java = Path(find_java()).resolve()
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "JAVA_HOME": str(java.parent.parent),
            "SPARK_LOCAL_IP": self.host,  # every listener (RPC, web UI) on loopback
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }
        opts = ["-Dspark.master.rest.enabled=false", "-Dspark.worker.cleanup.enabled=false"]
        if self.quick_jit:
            opts += QUICK_JIT_OPTIONS
        env["SPARK_DAEMON_JAVA_OPTS"] = " ".join(opts)
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _spawn(self, name: str, args: Sequence[str]) -> _Daemon:
        assert self.work is not None
        log = self.work / f"{name}.log"
        with open(log, "wb") as out:
            # spark-class execs the JVM, so the pid is the JVM's
            process = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env(), cwd=self.work,
            )
        daemon = _Daemon(name, process, log)
        self._daemons.append(daemon)
        return daemon

    def _state(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(
                f"http://{self.host}:{self.ui_port}/json/", timeout=5
            ) as answer:
                state: dict[str, Any] = json.load(answer)
                return state
        except (OSError, urllib.error.URLError, ValueError):
            return None

    def _wait(self, what: str, ready: Any) -> None:
        deadline = time.monotonic() + self.start_timeout
        while True:
            for d in self._daemons:
                if d.process.poll() is not None:
                    raise ClusterError(
                        f"{d.name} exited with {d.process.returncode} while waiting for {what}; "
                        f"log: {d.log}\n{_tail(d.log)}")
            state = self._state()
            if state is not None and ready(state):
                return
            if time.monotonic() > deadline:
                raise ClusterError(f"no {what} after {self.start_timeout:g} s; logs in {self.work}")
            time.sleep(0.25)  # polling the master's status page with a bound

    def start(self) -> StandaloneCluster:
        self.work = Path(tempfile.mkdtemp(prefix="aiogroup-spark-"))
        try:
            self.port = self.port or _free_port()
            self.ui_port = self.ui_port or _free_port()
            self._spawn("master", [
                "org.apache.spark.deploy.master.Master", "--host", self.host,
                "--port", str(self.port), "--webui-port", str(self.ui_port)])
            self._wait("master", lambda s: s.get("status") == "ALIVE")
            for i in range(1, self.workers + 1):
                work_dir = self.work / f"worker-{i}"
                work_dir.mkdir()
                self._spawn(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.master_url,
                    "--host", self.host, "--port", str(_free_port()),
                    "--webui-port", str(_free_port()), "--cores", str(self.worker_cores),
                    "--memory", self.worker_memory, "--work-dir", str(work_dir)])
            self._wait(f"{self.workers} workers",
                       lambda s: int(s.get("aliveworkers", 0)) >= self.workers)
        except BaseException:
            self._failed = True
            self.stop()
            raise
        return self

    def submit(
        self,
        job_args: Sequence[str],
        *,
        conf: Mapping[str, str] | None = None,
        executor_memory: str = "512m",
        timeout: float = 900.0,
        job: Path = JOB,
    ) -> subprocess.CompletedProcess[str]:
        """``spark-submit --master spark://...`` the job (default: the audit) with
        ``job_args``; every core of the cluster, the driver on loopback. Raises
        :class:`ClusterError` with the tail of the output when the job fails."""
        cmd = self.submit_command(job_args, conf=conf, executor_memory=executor_memory, job=job)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=self._env(), stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            self._failed = True
            raise ClusterError(f"spark-submit exited with {done.returncode}:\n"
                               f"{done.stdout[-1500:]}\n{done.stderr[-3000:]}")
        return done

    def submit_command(
        self,
        job_args: Sequence[str],
        *,
        conf: Mapping[str, str] | None = None,
        executor_memory: str = "512m",
        job: Path = JOB,
    ) -> list[str]:
        """The ``spark-submit`` command line :meth:`submit` runs (with :meth:`env`), for a
        caller that runs it itself (a live audit, stopped by its pid)."""
        settings = {
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.ui.enabled": "false",
            "spark.executor.memory": executor_memory,
            "spark.cores.max": str(self.workers * self.worker_cores),
            # One core per executor: a task that prefers a busy executor's cached block would
            # otherwise wait 3 s (the default) before running on the other one, stage by stage.
            "spark.locality.wait": "0s",
        }
        if self.quick_jit:
            quick = " ".join(QUICK_JIT_OPTIONS)
            settings["spark.executor.extraJavaOptions"] = quick
            settings["spark.driver.extraJavaOptions"] = quick
        settings.update(conf or {})
        cmd = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master_url]
        for key, value in settings.items():
            cmd += ["--conf", f"{key}={value}"]
        cmd += [str(job), *job_args]
        return cmd

    def env(self) -> dict[str, str]:
        """The environment the cluster's processes and :meth:`submit` run with."""
        return self._env()

    def stop(self) -> None:
        """Stop the workers, then the master, by pid (TERM, then KILL after 20 s)."""
        for daemon in reversed(self._daemons):
            # TERM first: a worker's shutdown hook stops its executors.
            terminate(daemon.process, grace=20.0)
        self._daemons.clear()
        if self.work is not None and not (self._failed or self.keep):
            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            self._failed = True
        self.stop()


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
