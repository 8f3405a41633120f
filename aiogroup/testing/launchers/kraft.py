"""Apache Kafka 3.9 and 4.x in KRaft mode, from Maven Central's jars: no Docker, no Maven.

Where it comes from
    ``org.apache.kafka:kafka_2.13`` and ``kafka-tools`` of the version, their runtime
    dependencies and an SLF4J binding, listed with their SHA-256 in a pin file shipped in this
    package (``aiogroup/testing/launchers/kafka_jars/kafka-VERSION.txt``). :func:`ensure_kraft`
    downloads
    them once (``urllib``, Maven Central or ``$AIOGROUP_MAVEN_URL``) into the cache
    (``~/.cache/aiogroup/kafka/maven``), checks every digest, and lays out
    ``kafka-VERSION/libs/`` with links to them: ``java -cp 'libs/*' CLASS`` runs the broker and
    every tool. :func:`pin_kafka` (``python -m aiogroup.testing.launchers.kafka pin VERSION``)
    writes a new
    pin file with Maven, on a developer's machine.

How it runs
    One combined broker and controller (``process.roles=broker,controller``, static voter
    ``1@127.0.0.1:CONTROLLER_PORT``), its storage formatted by Kafka's own
    ``kafka.tools.StorageTool``, then ``kafka.Kafka server.properties``; log4j output in
    ``server.log`` in the run's work folder.

Use it as ``KafkaBroker(version="4.1.1")`` from :mod:`aiogroup.testing.launchers.kafka`.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import tempfile
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
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
from aiogroup.testing.launchers.maven import (
    JarDownloadError,
    PinnedJar,
    ResolvedJar,
    fetch_jars,
    file_digest,
    file_lock,
    format_pins,
    parse_pins,
    pin_with_maven,
    resolve_with_maven,
)
from aiogroup.testing.launchers.processes import ServerProcess, free_port
from aiogroup.testing.listeners import Listener

__all__ = [
    "KRAFT_CONFIG",
    "PIN_FOLDER",
    "TOOL_CLASSES",
    "KRaftInstall",
    "KRaftKafkaBroker",
    "ensure_kraft",
    "load_pins",
    "pin_kafka",
    "pinned_versions",
]

#: Where the pin files live (package data): ``kafka-VERSION.txt``.
PIN_FOLDER = Path(__file__).parent / "kafka_jars"

#: Settings only KRaft mode has (beside :data:`~aiogroup.testing.launchers.kafka_base.TEST_CONFIG`).
KRAFT_CONFIG: Mapping[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # KIP-848 groups: the floors of the per-group session and heartbeat interval, so a test can
    # give its group a short session (kafka-configs --entity-type groups ... --add-config
    # consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=500); the defaults stay.
    "group.consumer.min.session.timeout.ms": "1000",
    "group.consumer.min.heartbeat.interval.ms": "100",
}

#: Kafka's shell script names -> the classes they run, newest location first (3.9 and 4.x
#: moved several tools from ``kafka.admin`` to ``org.apache.kafka.tools``).
TOOL_CLASSES: Mapping[str, tuple[str, ...]] = {
    "kafka-consumer-groups": (
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
        "kafka.admin.ConsumerGroupCommand",
    ),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"),
    "kafka-storage": ("kafka.tools.StorageTool",),
    "kafka-broker-api-versions": (
        "org.apache.kafka.tools.BrokerApiVersionsCommand",
        "kafka.admin.BrokerApiVersionsCommand",
    ),
    "kafka-metadata-quorum": ("org.apache.kafka.tools.MetadataQuorumCommand",),
    "kafka-get-offsets": ("org.apache.kafka.tools.GetOffsetShell", "kafka.tools.GetOffsetShell"),
    "kafka-acls": ("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"),
    "kafka-delete-records": (
        "org.apache.kafka.tools.DeleteRecordsCommand",
        "kafka.admin.DeleteRecordsCommand",
    ),
    "kafka-console-producer": (
        "org.apache.kafka.tools.ConsoleProducer",
        "kafka.tools.ConsoleProducer",
    ),
    "kafka-console-consumer": (
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "kafka.tools.ConsoleConsumer",
    ),
}

_LOG4J2 = """\
status = error
appender.out.type = {appender}
appender.out.name = OUT
{target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""

_LOG4J1 = """\
log4j.rootLogger={level}, out
log4j.appender.out={appender}
{target}
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.kafka.log.LogCleaner=WARN
log4j.logger.state.change.logger=WARN
"""

_BINDINGS = (
    "org.slf4j:slf4j-reload4j",
    "org.slf4j:slf4j-log4j12",
    "org.apache.logging.log4j:log4j-slf4j-impl",
    "org.apache.logging.log4j:log4j-slf4j2-impl",
)


def pinned_versions() -> list[str]:
    """The Kafka versions with a pin file in this package, oldest first."""
    found = [p.stem.removeprefix("kafka-") for p in PIN_FOLDER.glob("kafka-*.txt")]
    return sorted(found, key=lambda v: [int(x) if x.isdigit() else 0 for x in v.split(".")])


def load_pins(version: str) -> list[PinnedJar]:
    """The pinned jars of Kafka ``version``; :class:`ConfigurationError` if there is no list."""
    path = PIN_FOLDER / f"kafka-{version}.txt"
    if not re.fullmatch(r"\d+\.\d+\.\d+", version) or not path.exists():
        raise ConfigurationError(
            f"no pinned jar list for Apache Kafka {version!r}: pinned are "
            f"{', '.join(pinned_versions())} and 2.3.0 (add one with "
            f"'python -m aiogroup.testing.launchers.kafka pin {version}')"
        )
    return parse_pins(path.read_text(), source=str(path))


def _major(version: str) -> int:
    return int(version.split(".")[0])


@dataclass(frozen=True)
class KRaftInstall:
    """Kafka ``version``'s jars in ``libs`` (links into the cache's Maven-style store)."""

    version: str
    libs: Path
    java: Path
    java_version: int
    log4j2: bool

    @property
    def classpath(self) -> str:
        return str(self.libs / "*")

    @cached_property
    def classes(self) -> frozenset[str]:
        """The Kafka classes in the jars (``kafka.*`` and ``org.apache.kafka.*``)."""
        names: set[str] = set()
        for jar in self.libs.glob("kafka*.jar"):
            with zipfile.ZipFile(jar) as z:
                names.update(
                    n[:-6].replace("/", ".") for n in z.namelist()
                    if n.endswith(".class") and "$" not in n
                )  # fmt: skip
        return frozenset(names)

    def tool_class(self, name: str) -> str:
        """The class behind a tool name (``kafka-consumer-groups[.sh]`` or a class name)."""
        script = name.removesuffix(".sh")
        if script not in TOOL_CLASSES:
            if "." in name and not name.endswith(".sh"):
                return name
            raise ConfigurationError(
                f"unknown Kafka tool {name!r}: give a class name or one of "
                f"{', '.join(sorted(TOOL_CLASSES))}"
            )
        for candidate in TOOL_CLASSES[script]:
            if candidate in self.classes:
                return candidate
        raise KafkaUnavailableError(f"Kafka {self.version}'s jars have no {script} class")

    def log_config(self, path: Path | None, level: str = "INFO") -> str:
        """A log4j (2 for Kafka 4.x, 1 for 3.9's reload4j) configuration: to ``path``, or to
        stderr when ``path`` is None."""
        if self.log4j2:
            appender = "Console" if path is None else "File"
            target = (
                "appender.out.target = SYSTEM_ERR"
                if path is None
                else (f"appender.out.fileName = {path}")
            )
            return _LOG4J2.format(appender=appender, target=target, level=level)
        appender = (
            "org.apache.log4j.ConsoleAppender"
            if path is None
            else ("org.apache.log4j.FileAppender")
        )
        target = (
            "log4j.appender.out.Target=System.err"
            if path is None
            else (f"log4j.appender.out.File={path}")
        )
        return _LOG4J1.format(appender=appender, target=target, level=level)

    def log_option(self, config_file: Path) -> str:
        if self.log4j2:
            return f"-Dlog4j2.configurationFile={config_file}"
        return f"-Dlog4j.configuration=file:{config_file}"


def ensure_kraft(version: str, cache: Path | None = None) -> KRaftInstall:
    """Download (once), verify and lay out Kafka ``version``'s pinned jars.

    Raises :class:`KafkaUnavailableError` with the reason when that is impossible here (no
    Java >= 17 for 4.x or >= 11 for 3.9, no repository reachable, a digest that differs).
    """
    pins = load_pins(version)
    java, java_version = find_java(17 if _major(version) >= 4 else 11)
    cache = cache or cache_dir()
    home = cache / f"kafka-{version}"
    stamp = file_digest(PIN_FOLDER / f"kafka-{version}.txt")
    log4j2 = not any(p.artifact == "ch.qos.reload4j:reload4j" for p in pins)
    install = KRaftInstall(version, home / "libs", java, java_version, log4j2)
    ready = home / ".ready"
    if ready.exists() and ready.read_text().strip() == stamp:
        return install
    with file_lock(cache / f"kafka-{version}.lock"):
        if ready.exists() and ready.read_text().strip() == stamp:
            return install
        try:
            files = fetch_jars(pins, cache / "maven")
        except JarDownloadError as exc:
            raise KafkaUnavailableError(f"Apache Kafka {version}'s jars: {exc}") from exc
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=home) as tmp:
            libs = Path(tmp) / "libs"
            libs.mkdir()
            for jar in files:
                (libs / jar.name).symlink_to(jar)
            if install.libs.exists():
                shutil.rmtree(install.libs)
            libs.replace(install.libs)
        ready.write_text(stamp + "\n")
    return install


def _binding_for(resolved: Sequence[ResolvedJar]) -> str | None:
    """The SLF4J binding to add so the broker logs (None when one is resolved already)."""
    versions = {
        ":".join(j.coordinates.split(":")[:2]): j.coordinates.split(":")[2] for j in resolved
    }
    if any(b in versions for b in _BINDINGS):
        return None
    core = versions.get("org.apache.logging.log4j:log4j-core")
    if core is None:
        raise JarDownloadError("neither reload4j nor log4j-core is resolved: no logging backend")
    slf4j = versions.get("org.slf4j:slf4j-api", "1")
    artifact = "log4j-slf4j2-impl" if slf4j.startswith("2.") else "log4j-slf4j-impl"
    return f"org.apache.logging.log4j:{artifact}:{core}"


def pin_kafka(version: str, folder: Path = PIN_FOLDER, mvn: str = "mvn") -> Path:
    """Write ``folder/kafka-VERSION.txt``: Kafka ``version``'s runtime jars as Maven resolves
    ``kafka_2.13`` and ``kafka-tools`` (plus an SLF4J binding for its log4j), with SHA-256s.

    Needs Maven (``mvn``) and the repository; each jar is checked against the ``.sha1`` the
    repository publishes. A developer runs it for a new release and commits the file.
    """
    if not re.fullmatch(r"\d+\.\d+\.\d+", version):
        raise ConfigurationError(f"a Kafka version is like 4.1.1, not {version!r}")
    roots = [f"org.apache.kafka:kafka_2.13:{version}", f"org.apache.kafka:kafka-tools:{version}"]
    resolved = resolve_with_maven(roots, mvn)
    binding = _binding_for(resolved)
    if binding is not None:
        roots.append(binding)
        resolved = resolve_with_maven(roots, mvn)
    pins = pin_with_maven(resolved)
    header = (
        f"Apache Kafka {version} in KRaft mode for aiogroup.testing.launchers.kraft: "
        "the runtime class path\n"
        f"of {', '.join(roots)}\nas Maven resolves it, with SHA-256 digests.\n"
        f"Regenerate: python -m aiogroup.testing.launchers.kafka pin {version}  (needs Maven)"
    )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"kafka-{version}.txt"
    part = target.with_suffix(".part")
    part.write_text(format_pins(pins, header))
    part.replace(target)
    return target


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, base64url without padding (not starting '-')."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


class KRaftKafkaBroker(KafkaBroker):
    """Apache Kafka 3.9 / 4.x in KRaft mode; create it as ``KafkaBroker(version=...)``.

    Node 1 is a combined broker and controller (the one voter). ``brokers=3`` adds broker-only
    nodes 2 and 3 with their own ports (:attr:`broker_ports`) and data; ``racks`` gives each
    node's ``broker.rack``. ``bootstrap`` and ``ports`` are node 1's.
    """

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
        install: KRaftInstall | None = None,
        keep: bool | None = None,
        brokers: int = 1,
        racks: Sequence[str] | None = None,
    ) -> None:
        if version is None:
            raise ConfigurationError("KRaftKafkaBroker needs a version, e.g. version='4.1.1'")
        load_pins(version)  # an unknown version fails here, with the versions there are
        if brokers < 1:
            raise ConfigurationError(f"brokers must be at least 1, not {brokers}")
        if racks is not None and len(racks) != brokers:
            raise ConfigurationError(f"racks names {len(racks)} racks for {brokers} brokers")
        super().__init__(
            version=version, config=config, listeners=listeners, jaas=jaas, heap_mb=heap_mb,
            quick_jit=quick_jit, start_timeout=start_timeout, keep=keep, brokers=brokers,
            racks=racks,
        )  # fmt: skip
        self.install = install
        self.controller_port = 0
        self.cluster_id = _cluster_id()
        #: Node id -> its listeners; node 1's are :attr:`listeners`.
        self.node_listeners: dict[int, list[Listener]] = {1: self.listeners}
        for node in range(2, brokers + 1):
            self.node_listeners[node] = [Listener(x.name, 0, x.protocol) for x in self.listeners]
        self._nodes: dict[int, ServerProcess | None] = dict.fromkeys(self.node_listeners)

    @property
    def broker_ports(self) -> dict[int, dict[str, int]]:
        """Node id -> listener name -> port."""
        return {n: {x.name: x.port for x in xs} for n, xs in self.node_listeners.items()}

    @property
    def bootstraps(self) -> list[str]:
        """Every node's PLAINTEXT listener, ``127.0.0.1:PORT``, node 1 first."""
        return [f"{self.host}:{xs[0].port}" for xs in self.node_listeners.values()]

    def _file(self, node: int, stem: str, suffix: str) -> Path:
        assert self.work is not None
        return self.work / (f"{stem}{suffix}" if node == 1 else f"{stem}-{node}{suffix}")

    def _processes(self) -> dict[str, ServerProcess | None]:
        return {("kafka" if n == 1 else f"kafka-{n}"): p for n, p in self._nodes.items()}

    def _broker_process(self) -> ServerProcess | None:
        return self._nodes[1]

    def _forget_broker(self) -> None:
        self._nodes[1] = None

    def _forget_processes(self) -> None:
        self._nodes = dict.fromkeys(self._nodes)

    def _installed(self) -> KRaftInstall:
        if self.install is None:
            self.install = ensure_kraft(self.version)
        return self.install

    def broker_properties(self, node: int = 1) -> dict[str, str]:
        """Node ``node``'s ``server.properties`` for this run."""
        own = self.node_listeners[node]
        advertised = ",".join(f"{x.name}://{self.host}:{x.port}" for x in own)
        protocols = [f"{x.name}:{x.security_protocol}" for x in own]
        props = {
            **TEST_CONFIG,
            **KRAFT_CONFIG,
            "node.id": str(node),
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": advertised,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": ",".join([*protocols, "CONTROLLER:PLAINTEXT"]),
            "log.dirs": str(self._file(node, "data", "")),
        }
        if node == 1:
            props["listeners"] += f",CONTROLLER://{self.host}:{self.controller_port}"
        else:
            props["process.roles"] = "broker"
        if self.racks is not None:
            props["broker.rack"] = self.racks[node - 1]
        props.update(self.extra_config)
        return props

    def _start_servers(self) -> None:
        install = self._installed()
        self.controller_port = free_port()
        for xs in self.node_listeners.values():
            for listener in xs:
                listener.port = listener.port or free_port()
        for node in self._nodes:
            props = self._file(node, "server", ".properties")
            props.write_text("".join(f"{k}={v}\n" for k, v in self.broker_properties(node).items()))
            try:
                self._java_tool(
                    install, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                    "-c", str(props), timeout=self.start_timeout,
                )  # fmt: skip
            except KafkaStartError as exc:
                raise KafkaStartError(
                    f"formatting node {node}'s storage failed; {self._where()}: {exc}"
                ) from exc
        for node in self._nodes:
            self._spawn(node)
        for node, process in self._nodes.items():
            assert process is not None
            self._wait_node(node, process)

    def _spawn(self, node: int) -> ServerProcess:
        install = self._installed()
        assert self.work is not None
        log = self._file(node, "server", ".log")
        name = "log4j2" if install.log4j2 else "log4j"
        config = self._file(node, name, ".properties")
        config.write_text(install.log_config(log))
        java = [
            *jvm_options(install.java, self.heap_mb, self.quick_jit),
            install.log_option(config),
            f"-Dkafka.logs.dir={self.work}",
        ]
        if self.jaas is not None:
            jaas = self.work / "kafka_server_jaas.conf"
            jaas.write_text(self.jaas)
            java.append(f"-Djava.security.auth.login.config={jaas}")
        props = self._file(node, "server", ".properties")
        cmd = [*java, "-cp", install.classpath, "kafka.Kafka", str(props)]
        process = ServerProcess(
            "kafka" if node == 1 else f"kafka-{node}", cmd, log=self._file(node, "server", ".out"),
            logs=[log], cwd=self.work, error=KafkaStartError,
        ).start()  # fmt: skip
        self._nodes[node] = process
        return process

    def _wait_node(self, node: int, process: ServerProcess) -> None:
        port = self.node_listeners[node][0].port
        process.wait_ready(
            lambda: self.broker_ready(port, brokers=self.brokers),
            timeout=self.start_timeout,
            where=self._where(),
        )

    def _start_broker(self) -> None:
        self._wait_node(1, self._spawn(1))

    def stop_broker(self, node: int = 1) -> None:
        """Stop node ``node`` (data and ports stay) to :meth:`restart_broker` it later. Node 1
        is also the controller: the others wait for it to come back."""
        process = self._nodes[node]
        if process is not None:
            process.stop()
        self._nodes[node] = None

    def restart_broker(self, node: int = 1) -> None:
        """Start node ``node`` again on the same ports with the same data."""
        self.stop_broker(node)
        self._wait_node(node, self._spawn(node))

    def _java_tool(self, install: KRaftInstall, cls: str, *args: str, timeout: float) -> str:
        folder = self.work or Path(tempfile.gettempdir())
        config = folder / (
            "tools-log4j2.properties" if install.log4j2 else "tools-log4j.properties"
        )
        if not config.exists():
            config.write_text(install.log_config(None, level="WARN"))
        cmd = [
            *jvm_options(install.java, 256, True), install.log_option(config),
            "-cp", install.classpath, cls, *args,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                env={**os.environ, "JAVA_HOME": str(install.java.parent.parent)},
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise KafkaStartError(f"{cls} {' '.join(args)} took over {timeout:g} s") from exc
        if done.returncode != 0:
            raise KafkaStartError(
                f"{cls} {' '.join(args)} failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout)[-800:]}"
            )
        return done.stdout

    def run_tool(self, name: str, *args: str, timeout: float = 120.0) -> str:
        """Run one of Kafka's tools by its script name (``kafka-consumer-groups.sh`` or
        ``kafka-consumer-groups``, see :data:`TOOL_CLASSES`) or class name, as
        ``java -cp 'libs/*' CLASS ARGS...``; its stdout."""
        install = self._installed()
        return self._java_tool(install, install.tool_class(name), *args, timeout=timeout)

    def _store_scram_credentials(self, user: str, entries: Sequence[str]) -> None:
        # Through the broker (AlterUserScramCredentials), one mechanism per request: KRaft
        # refuses two changes of one user's credentials in one request.
        for entry in entries:
            self.run_tool(
                "kafka-configs", "--bootstrap-server", self.bootstrap, "--alter",
                "--add-config", entry, "--entity-type", "users", "--entity-name", user,
            )  # fmt: skip
