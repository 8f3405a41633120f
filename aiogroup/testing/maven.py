"""Jars from Maven Central by a pinned list with checksums: no Maven needed, only Python.

A pin list is a text file, one artifact a line, ``#`` starting a comment::

    # kafka-clients 4.1.1 and its runtime dependencies (its pom)
    org.apache.kafka:kafka-clients:4.1.1  sha256=00247122a572c3d3...

:func:`fetch_pinned` downloads each jar once (``urllib``, HTTPS) into the cache in Maven's own
layout (``<cache>/maven2/org/apache/kafka/kafka-clients/4.1.1/kafka-clients-4.1.1.jar``),
checks its SHA-256 before it is kept, and returns the paths in the list's order (a class
path). The cache is ``$AIOGROUP_KAFKA_CACHE`` or ``~/.cache/aiogroup/kafka``; parallel
processes (pytest-xdist workers) share it safely: one downloads under a lock, the others wait.
``AIOGROUP_MAVEN_REPOSITORY`` replaces the repository's URL (a mirror).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aiogroup.errors import AiogroupError

__all__ = ["MAVEN_CENTRAL", "MavenFetchError", "Pin", "cache_root", "fetch_pinned", "read_pins"]

MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
_LINE = re.compile(
    r"(?P<group>[\w.\-]+):(?P<artifact>[\w.\-]+):(?P<version>[\w.\-]+)\s+sha256=(?P<sha>[0-9a-f]{64})"
)


class MavenFetchError(AiogroupError):
    """A pinned jar could not be fetched or did not match its checksum; the message says which
    and what to do."""


@dataclass(frozen=True)
class Pin:
    """One pinned jar: Maven coordinates and the SHA-256 of the file."""

    group: str
    artifact: str
    version: str
    sha256: str

    @property
    def path(self) -> str:
        """The jar's path in a Maven repository."""
        name = f"{self.artifact}-{self.version}.jar"
        return "/".join([*self.group.split("."), self.artifact, self.version, name])

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def read_pins(list_path: str | os.PathLike[str]) -> list[Pin]:
    """The pins of a list file, in order."""
    pins: list[Pin] = []
    for number, raw in enumerate(Path(list_path).read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise MavenFetchError(
                f"{list_path}:{number}: expected 'group:artifact:version sha256=<64 hex>', "
                f"got {raw!r}"
            )
        pins.append(Pin(match["group"], match["artifact"], match["version"], match["sha"]))
    return pins


def cache_root() -> Path:
    """``$AIOGROUP_KAFKA_CACHE``, else ``$XDG_CACHE_HOME/aiogroup/kafka`` (``~/.cache/...``)."""
    env = os.environ.get("AIOGROUP_KAFKA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aiogroup" / "kafka"


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download(url: str, dest: Path, pin: Pin, timeout: float) -> None:
    with tempfile.NamedTemporaryFile(dir=dest.parent, delete=False, suffix=".part") as part:
        tmp = Path(part.name)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as answer:
                digest = hashlib.sha256()
                while chunk := answer.read(1 << 20):
                    digest.update(chunk)
                    part.write(chunk)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            tmp.unlink(missing_ok=True)
            raise MavenFetchError(
                f"could not download {pin} from {url}: {exc}; check the network, or set "
                "AIOGROUP_MAVEN_REPOSITORY to a reachable mirror"
            ) from exc
    got = digest.hexdigest()
    if got != pin.sha256:
        tmp.unlink(missing_ok=True)
        raise MavenFetchError(
            f"{pin} from {url} has SHA-256 {got}, not the pinned {pin.sha256}: refusing it "
            "(a changed mirror or a corrupted download; the pin list is in the package)"
        )
    tmp.replace(dest)


def fetch_pinned(
    list_path: str | os.PathLike[str],
    *,
    cache: Path | None = None,
    repository: str | None = None,
    timeout: float = 120.0,
) -> list[Path]:
    """Every jar of the pin list at ``list_path``, downloaded and verified once, as local
    paths in the list's order. Raises :class:`MavenFetchError` saying what failed."""
    pins = read_pins(list_path)
    root = (cache or cache_root()) / "maven2"
    base = repository or os.environ.get("AIOGROUP_MAVEN_REPOSITORY") or MAVEN_CENTRAL
    base = base if base.endswith("/") else base + "/"
    paths = [root / pin.path for pin in pins]
    ready = root / ".verified"  # jars verified by this process's predecessors, by checksum
    verified = set(ready.read_text().split()) if ready.exists() else set()
    if all(p.exists() and pin.sha256 in verified for p, pin in zip(paths, pins, strict=True)):
        return paths
    with _locked(root):
        for path, pin in zip(paths, pins, strict=True):
            if path.exists() and _sha256(path) == pin.sha256:
                verified.add(pin.sha256)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            _download(base + pin.path, path, pin, timeout)
            verified.add(pin.sha256)
        part = ready.with_suffix(".part")
        part.write_text("\n".join(sorted(verified)) + "\n")
        part.replace(ready)
    return paths
