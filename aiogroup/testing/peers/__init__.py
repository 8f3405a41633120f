"""Real Kafka clients from other languages as group members: a Java ``KafkaConsumer`` peer and a
franz-go peer, built from source kept in this package on first use and cached.

Both speak one peer protocol (docs/peers.md), the one the Python peers of the conformance suite
and the chaos members speak:

* the same options: ``--bootstrap --group --topic --name``, ``--assignors a,b``,
  ``--instance-id``, ``--session-ms``, ``--heartbeat-ms``, ``--rebalance-ms``,
  ``--protocol classic|consumer`` (KIP-848), ``--commit-every-ms``, ``--max-records``;
* stdout: one JSON object a line (``owned``, ``assigned``, ``revoked``, ``consumed``,
  ``committed``, ``error``, ``closed``); with ``--commands``, ``commit`` and ``close`` lines on
  stdin;
* with ``--telemetry DIR``: the rebalance telemetry of :mod:`aiogroup.observability.telemetry`
  (schema 1), the
  same events with the same meanings, so the chaos checker judges them unchanged;
* SIGTERM closes cleanly: the revoke callback commits what was processed, the member leaves
  (unless static), exit code 0.

:func:`peer_command` gives the command line of a peer (building it first if needed):
:func:`java_program` compiles ``java/AiogroupJavaPeer.java`` with ``javac`` against
kafka-clients and its runtime jars (fetched from Maven Central by the pinned list
``kafka-clients-4.1.1.pins``, :func:`aiogroup.testing.launchers.maven.fetch_pin_file`);
:func:`franz_go_program` runs ``go build`` on ``go/`` (``go.mod`` and ``go.sum`` pin franz-go).
:func:`java_command` and :func:`go_command` build other programs the same way, against the same
pins (the assignor cross-checks, ``bench/peer_programs``).
Builds go to ``<cache>/peers/`` (the cache of
:func:`aiogroup.testing.launchers.kafka_base.cache_dir`), keyed
on the sources' hash, under a lock (pytest-xdist workers build once). Run one by hand with
``python -m aiogroup.testing.peers java --bootstrap ... --group ... --topic ... --name ...``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from aiogroup.errors import AiogroupError
from aiogroup.testing.launchers.kafka_base import cache_dir
from aiogroup.testing.launchers.maven import JarDownloadError, fetch_pin_file

__all__ = [
    "JAVA_PINS",
    "KAFKA_CLIENTS_VERSION",
    "KINDS",
    "PeerUnavailableError",
    "franz_go_program",
    "go_command",
    "java_command",
    "java_program",
    "peer_command",
    "program",
]

#: The peers this package builds.
KINDS = ("java", "franz-go")
HERE = Path(__file__).parent
KAFKA_CLIENTS_VERSION = "4.1.1"
#: The Java peer's class path: kafka-clients and its runtime dependencies, with checksums.
JAVA_PINS = HERE / f"kafka-clients-{KAFKA_CLIENTS_VERSION}.pins"
JAVA_SOURCE = HERE / "java" / "AiogroupJavaPeer.java"
JAVA_MAIN = "AiogroupJavaPeer"
#: Class files for Java 11 and later (kafka-clients 4 needs 11).
JAVA_RELEASE = "11"
#: Small, quick-starting JVMs: several run at once on a 2-core machine.
JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
GO_SOURCES = tuple(HERE / "go" / name for name in ("main.go", "run.go", "go.mod", "go.sum"))
GO_BINARY = "aiogroup-franz-go-peer"


class PeerUnavailableError(AiogroupError):
    """A peer cannot be built or run here (no JDK, no Go, no download); says what to install."""


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _key(*parts: bytes) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:16]


def _build_once(dest: Path, build: Callable[[Path], None]) -> Path:
    """``dest`` made by ``build(tmp)`` once, atomically, under the peers' lock."""
    if (dest / ".ready").exists():
        return dest
    with _locked(dest.parent):
        if (dest / ".ready").exists():
            return dest
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".build-") as tmp:
            out = Path(tmp) / "out"
            out.mkdir()
            build(out)
            (out / ".ready").write_text("built\n")
            if dest.exists():
                shutil.rmtree(dest)
            out.replace(dest)
    return dest


def _run(cmd: Sequence[str], what: str, **kwargs: object) -> None:
    try:
        done = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=900, check=False, **kwargs
        )  # type: ignore[call-overload]
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailableError(f"{what} failed: {exc!r}") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip()[-1500:]
        raise PeerUnavailableError(f"{what} failed (exit {done.returncode}):\n{tail}")


# --------------------------------------------------------------------------- Java


def _jdk() -> tuple[Path, Path]:
    """(javac, java): from ``$JAVA_HOME/bin``, else from PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").exists():
        return Path(home) / "bin" / "javac", Path(home) / "bin" / "java"
    javac = shutil.which("javac")
    if javac is None:
        raise PeerUnavailableError(
            "the Java peer needs a JDK (javac, Java >= 11): install one (e.g. openjdk-17-jdk) "
            "or set JAVA_HOME to it"
        )
    real = Path(javac).resolve()
    java = real.with_name("java")
    return real, java if java.exists() else Path(shutil.which("java") or "java")


def java_program(cache: Path | None = None) -> list[str]:
    """The command line that runs the Java peer (compiled once, cached), without options."""
    return java_command(JAVA_SOURCE, JAVA_MAIN, cache)


def java_command(
    source: Path,
    main: str,
    cache: Path | None = None,
    *,
    jvm_options: Sequence[str] = JVM_OPTIONS,
) -> list[str]:
    """The command line that runs class ``main`` of the Java file ``source``, compiled once
    (cached, keyed on the source) against kafka-clients and its runtime jars: the Java peer,
    a harness that runs Java's own classes (the assignor cross-checks), or a benchmark's
    consumer (``bench/peer_programs``, with ``jvm_options=()``: the JVM's own defaults)."""
    javac, java = _jdk()
    try:
        jars = fetch_pin_file(JAVA_PINS, (cache or cache_dir()) / "maven")
    except JarDownloadError as exc:
        raise PeerUnavailableError(f"the Java peer's jars: {exc}") from exc
    key = _key(source.read_bytes(), JAVA_PINS.read_bytes(), JAVA_RELEASE.encode())
    classpath = os.pathsep.join(str(j) for j in jars)

    def build(out: Path) -> None:
        _run(
            [str(javac), "--release", JAVA_RELEASE, "-nowarn", "-d", str(out),
             "-cp", classpath, str(source)],
            f"javac {source.name}",
        )  # fmt: skip

    name = "java" if source == JAVA_SOURCE else source.stem.lower()
    classes = _build_once((cache or cache_dir()) / "peers" / f"{name}-{key}", build)
    return [str(java), *jvm_options, "-cp", os.pathsep.join([str(classes), classpath]), main]


# --------------------------------------------------------------------------- franz-go


def franz_go_program(cache: Path | None = None) -> list[str]:
    """The command line that runs the franz-go peer (built once, cached), without options."""
    return go_command(GO_SOURCES, GO_BINARY, cache)


def go_command(sources: Sequence[Path], binary: str, cache: Path | None = None) -> list[str]:
    """The command line of a Go program (package ``main``) built from ``sources`` with the
    franz-go peer's ``go.mod`` and ``go.sum`` (the same pinned franz-go), once, cached: the
    franz-go peer, or a benchmark's consumer (``bench/peer_programs``)."""
    go = shutil.which("go")
    if go is None:
        raise PeerUnavailableError(
            f"{binary} needs Go (>= 1.26, the go command on PATH) to build it once"
        )
    try:
        version = subprocess.run(
            [go, "env", "GOVERSION"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        raise PeerUnavailableError(f"{go} env GOVERSION failed: {exc!r}") from exc
    files = {p.name: p for p in sources}
    files.update((p.name, p) for p in GO_SOURCES if p.suffix != ".go")  # go.mod, go.sum
    key = _key(*(p.read_bytes() for p in files.values()), version.encode())

    def build(out: Path) -> None:
        src = out.parent / "src"
        src.mkdir()
        for name, path in files.items():
            shutil.copy2(path, src / name)
        env = {**os.environ, "GOFLAGS": "-mod=mod", "CGO_ENABLED": "0"}
        _run(
            [go, "build", "-trimpath", "-o", str(out / binary), "."],
            f"go build of {binary} ({version}; it needs the Go module proxy once)",
            cwd=src,
            env=env,
        )

    name = "franz-go" if binary == GO_BINARY else binary
    built = _build_once((cache or cache_dir()) / "peers" / f"{name}-{key}", build)
    return [str(built / binary)]


# --------------------------------------------------------------------------- commands


def program(kind: str, cache: Path | None = None) -> list[str]:
    """The command line of peer ``kind`` (one of :data:`KINDS`), built if needed."""
    if kind == "java":
        return java_program(cache)
    if kind == "franz-go":
        return franz_go_program(cache)
    raise ValueError(f"unknown peer kind {kind!r}; expected one of {KINDS}")


def peer_command(
    kind: str,
    *,
    bootstrap: str,
    group: str,
    topic: str,
    name: str,
    assignors: Sequence[str] = ("cooperative-sticky",),
    instance_id: str = "",
    session_ms: int = 6000,
    heartbeat_ms: int = 1000,
    rebalance_ms: int = 10000,
    protocol: str = "classic",
    commit_every_ms: int = 1000,
    max_records: int = 50,
    commands: bool = False,
    telemetry_dir: str | os.PathLike[str] | None = None,
    telemetry_kind: str | None = None,
    cache: Path | None = None,
) -> list[str]:
    """The full command line of a peer (see the module doc for what each option does).

    ``commands``: read ``commit`` / ``close`` lines on stdin (stdin's end closes the peer).
    ``telemetry_dir``: write telemetry there, as member ``name``; ``telemetry_kind`` is the
    kind its ``started`` event names (default ``kind``).
    """
    if protocol not in ("classic", "consumer"):
        raise ValueError(f"protocol must be 'classic' or 'consumer' (KIP-848), not {protocol!r}")
    argv = [
        *program(kind, cache),
        "--bootstrap", bootstrap, "--group", group, "--topic", topic, "--name", name,
        "--assignors", ",".join(assignors), "--session-ms", str(session_ms),
        "--heartbeat-ms", str(heartbeat_ms), "--rebalance-ms", str(rebalance_ms),
        "--protocol", protocol, "--commit-every-ms", str(commit_every_ms),
        "--max-records", str(max_records), "--kind", telemetry_kind or kind, "--client", kind,
    ]  # fmt: skip
    if instance_id:
        argv += ["--instance-id", instance_id]
    if commands:
        argv.append("--commands")
    if telemetry_dir is not None:
        argv += ["--telemetry", str(telemetry_dir)]
    return argv
