"""Jars from a Maven repository, by a pinned list with checksums: no Maven needed to use them.

A *pin file* lists one jar a line: its coordinates, its path in the repository and its digest::

    # comments
    org.lz4:lz4-java:1.8.0 org/lz4/lz4-java/1.8.0/lz4-java-1.8.0.jar sha256=d74a...

:func:`fetch_jars` downloads the jars of such a list with ``urllib`` from Maven Central (or the
mirror in ``AIOGROUP_MAVEN_URL``), checks each digest before the file takes its place (a
mismatch is an error, never used), writes it atomically into a shared store laid out like a
Maven repository, and does that under a file lock, so parallel test processes download each jar
once. :func:`pin_with_maven` writes such a list for a developer, from what ``mvn
dependency:list`` resolves, and checks every jar against the repository's own ``.sha1``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from xml.sax.saxutils import escape

from aiogroup.errors import AiogroupError

__all__ = [
    "DEFAULT_MAVEN_URL",
    "JarDownloadError",
    "PinnedJar",
    "ResolvedJar",
    "fetch_jars",
    "fetch_pin_file",
    "file_digest",
    "file_lock",
    "format_pins",
    "maven_url",
    "parse_pins",
    "pin_with_maven",
    "resolve_with_maven",
]

DEFAULT_MAVEN_URL = "https://repo1.maven.org/maven2/"
_ALGORITHMS = ("sha256", "sha512")


class JarDownloadError(AiogroupError):
    """A jar could not be downloaded, or its digest was not the pinned one."""


def maven_url() -> str:
    """The repository to download from: ``$AIOGROUP_MAVEN_URL`` or Maven Central."""
    url = os.environ.get("AIOGROUP_MAVEN_URL") or DEFAULT_MAVEN_URL
    return url if url.endswith("/") else url + "/"


@dataclass(frozen=True)
class PinnedJar:
    """One jar: ``group:artifact:version`` (``[:classifier]``), its repository path, digest."""

    coordinates: str
    path: str
    algorithm: str
    digest: str

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def artifact(self) -> str:
        """``group:artifact`` without the version."""
        group, artifact = self.coordinates.split(":")[:2]
        return f"{group}:{artifact}"

    def line(self) -> str:
        return f"{self.coordinates} {self.path} {self.algorithm}={self.digest}"


def parse_pins(text: str, source: str = "pin file") -> list[PinnedJar]:
    """The jars of a pin file's text; a malformed line is a :class:`JarDownloadError`."""
    jars: list[PinnedJar] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        algorithm, _, digest = parts[-1].partition("=") if len(parts) == 3 else ("", "", "")
        if (
            len(parts) != 3
            or algorithm not in _ALGORITHMS
            or not re.fullmatch(r"[0-9a-f]{64}|[0-9a-f]{128}", digest)
            or not parts[1].endswith(".jar")
            or ".." in parts[1].split("/")
            or parts[1].startswith("/")
        ):
            raise JarDownloadError(
                f"{source} line {number} is not 'group:artifact:version path.jar sha256=HEX': "
                f"{raw!r}"
            )
        jars.append(PinnedJar(parts[0], parts[1], algorithm, digest))
    if not jars:
        raise JarDownloadError(f"{source} lists no jars")
    return jars


def format_pins(jars: Iterable[PinnedJar], header: str = "") -> str:
    """A pin file's text (sorted by coordinates), with ``header`` as comment lines."""
    lines = [f"# {h}".rstrip() for h in header.splitlines()]
    lines += [jar.line() for jar in sorted(jars, key=lambda j: j.coordinates)]
    return "\n".join(lines) + "\n"


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` (created), held across processes while inside."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


Opener = Callable[[str], IO[bytes]]


def _open_url(url: str) -> IO[bytes]:
    response: IO[bytes] = urllib.request.urlopen(url, timeout=60)
    return response


def _download(jar: PinnedJar, store: Path, base_url: str, opener: Opener) -> Path:
    target = store / jar.path
    if target.exists() and file_digest(target, jar.algorithm) == jar.digest:
        return target  # written (atomically) and checked before; a damaged copy is replaced
    target.parent.mkdir(parents=True, exist_ok=True)
    url = base_url + jar.path
    fd, part_name = tempfile.mkstemp(prefix=f".{jar.file_name}.", suffix=".part", dir=target.parent)
    part = Path(part_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with opener(url) as response:
                    shutil.copyfileobj(response, out, 1 << 20)
            except (urllib.error.URLError, OSError, TimeoutError) as exc:
                raise JarDownloadError(
                    f"cannot download {url}: {exc} (set AIOGROUP_MAVEN_URL to a reachable "
                    "Maven mirror)"
                ) from exc
        got = file_digest(part, jar.algorithm)
        if got != jar.digest:
            raise JarDownloadError(
                f"{url} has {jar.algorithm} {got[:16]}..., not the pinned {jar.digest[:16]}...: "
                "refusing to use it"
            )
        part.replace(target)
    finally:
        part.unlink(missing_ok=True)
    return target


def fetch_jars(
    jars: Sequence[PinnedJar],
    store: Path,
    *,
    base_url: str | None = None,
    opener: Opener = _open_url,
    workers: int = 4,
) -> list[Path]:
    """The local files of ``jars`` in ``store`` (a Maven-style tree), downloading and checking
    those missing under ``store/.lock``. Returns them in the order given."""
    base = base_url or maven_url()
    with file_lock(store / ".lock"), ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda jar: _download(jar, store, base, opener), jars))


def fetch_pin_file(pins: Path, store: Path, **options: Any) -> list[Path]:
    """:func:`fetch_jars` of the pin file at ``pins`` (its jars in the file's order)."""
    return fetch_jars(parse_pins(pins.read_text(), str(pins)), store, **options)


# --------------------------------------------------------------------------- pinning (mvn)


@dataclass(frozen=True)
class ResolvedJar:
    """A jar Maven resolved: ``group:artifact:version[:classifier]`` and its local file."""

    coordinates: str
    file: Path

    @property
    def path(self) -> str:
        group, artifact, version, *classifier = self.coordinates.split(":")
        suffix = f"-{classifier[0]}" if classifier else ""
        return f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}{suffix}.jar"


def _pom(coordinates: Sequence[str]) -> str:
    deps = []
    for gav in coordinates:
        group, artifact, version = (escape(x) for x in gav.split(":"))
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>aiogroup.pin</groupId><artifactId>pin</artifactId><version>0</version>"
        f"<dependencies>{''.join(deps)}</dependencies></project>\n"
    )


def resolve_with_maven(coordinates: Sequence[str], mvn: str = "mvn") -> list[ResolvedJar]:
    """The runtime class path of ``coordinates`` (``group:artifact:version`` each), as ``mvn
    dependency:list`` resolves it with the developer's Maven settings."""
    if shutil.which(mvn) is None:
        raise JarDownloadError(f"pinning needs Maven ({mvn!r} is not on PATH)")
    with tempfile.TemporaryDirectory(prefix="aiogroup-pin-") as tmp:
        (Path(tmp) / "pom.xml").write_text(_pom(coordinates))
        listing = Path(tmp) / "deps.txt"
        cmd = [
            mvn, "-q", "-B", "dependency:list", "-DincludeScope=runtime",
            f"-DoutputFile={listing}", "-DoutputAbsoluteArtifactFilename=true",
        ]  # fmt: skip
        done = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0 or not listing.exists():
            raise JarDownloadError(f"mvn dependency:list failed:\n{done.stdout[-2000:]}")
        text = listing.read_text()
    resolved: list[ResolvedJar] = []
    for line in text.splitlines():
        parts = line.strip().split(":")
        # group:artifact:type[:classifier]:version:scope:/absolute/path
        if len(parts) < 6 or parts[2] != "jar" or not parts[-1].startswith("/"):
            continue
        group, artifact = parts[0], parts[1]
        classifier = parts[3] if len(parts) == 7 else None
        version = parts[-3]
        gav = f"{group}:{artifact}:{version}" + (f":{classifier}" if classifier else "")
        resolved.append(ResolvedJar(gav, Path(parts[-1])))
    if not resolved:
        raise JarDownloadError(f"mvn resolved no jars for {', '.join(coordinates)}")
    return resolved


def pin_with_maven(
    resolved: Sequence[ResolvedJar],
    *,
    base_url: str | None = None,
    opener: Opener = _open_url,
) -> list[PinnedJar]:
    """Pins (sha256) of Maven's resolved jars, each checked first against the ``.sha1`` the
    repository publishes beside it (a corrupt local repository then fails here)."""
    base = base_url or maven_url()
    pins = []
    for jar in resolved:
        with opener(f"{base}{jar.path}.sha1") as response:
            published = response.read().decode().split()[0].strip().lower()
        local = file_digest(jar.file, "sha1")
        if local != published:
            raise JarDownloadError(
                f"{jar.file} has sha1 {local}, the repository publishes {published}"
            )
        pins.append(PinnedJar(jar.coordinates, jar.path, "sha256", file_digest(jar.file)))
    return pins
