"""What every Apache Kafka launcher of ``aiogroup.testing`` shares, whatever the version.

:class:`KafkaBroker` is the public class: ``KafkaBroker()`` is Kafka 2.3.0 with ZooKeeper
(:mod:`aiogroup.testing.launchers.kafka23`), ``KafkaBroker(version="4.1.1")`` a KRaft broker of that
version (:mod:`aiogroup.testing.launchers.kraft`); both are instances of :class:`KafkaBroker` with
one
surface: ``bootstrap``, ``ports``, ``pids``, ``log_file``, ``request``, ``create_topic``,
``add_scram_user``, ``run_tool``, ``consumer_groups``, ``stop_broker``/``restart_broker``.
This module also holds what both need: finding Java, the cache folder, the test settings, the
JAAS file and :func:`security_config`.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from aiogroup.errors import AiogroupError, ConfigurationError
from aiogroup.testing import wire
from aiogroup.testing.launchers.processes import ServerProcess, ServerStartError, free_port
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import MECHANISMS, SCRAM_MECHANISMS, sasl_login
from aiogroup.testing.tls import Pki

__all__ = [
    "READINESS_REQUESTS",
    "TEST_CONFIG",
    "ZOOKEEPER_VERSION",
    "KafkaBroker",
    "KafkaStartError",
    "KafkaUnavailableError",
    "cache_dir",
    "find_java",
    "sasl_jaas",
    "security_config",
    "unsecured_oauthbearer_config",
]

#: The version that ``KafkaBroker()`` starts without ``version=`` (ZooKeeper mode).
ZOOKEEPER_VERSION = "2.3.0"

#: The request versions the launchers send themselves (readiness, topics): served by Kafka 2.3
#: and by 3.9 and 4.x after KIP-896 removed old versions (checked against each real broker).
READINESS_REQUESTS: Mapping[str, int] = {
    "ApiVersions": 0,
    "Metadata": 1,
    "FindCoordinator": 1,
    "DescribeGroups": 0,
    "CreateTopics": 2,
}


class KafkaUnavailableError(AiogroupError):
    """Apache Kafka cannot run here (no Java, no download, ...); the message says why."""


class KafkaStartError(ServerStartError):
    """A Kafka process did not start, or an admin step failed; the message names the logs."""


def find_java(min_version: int = 11) -> tuple[Path, int]:
    """The ``java`` to use (``$JAVA_HOME/bin/java`` or the one on PATH) and its major version."""
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate is None or not candidate.exists():
        found = shutil.which("java")
        if found is None:
            raise KafkaUnavailableError(
                f"no Java found (install Java >= {min_version} or set JAVA_HOME)"
            )
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
    if major < min_version:
        raise KafkaUnavailableError(
            f"Java {major} at {candidate}; this Kafka needs >= {min_version} (set JAVA_HOME)"
        )
    return candidate, major


def cache_dir() -> Path:
    """``$AIOGROUP_KAFKA_CACHE``, else ``~/.cache/aiogroup/kafka`` (``$XDG_CACHE_HOME``)."""
    env = os.environ.get("AIOGROUP_KAFKA_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "aiogroup" / "kafka"


#: Broker settings for tests, every version: one broker, fast group start, small footprint.
#: Users override any of them with ``KafkaBroker(config={...})``.
TEST_CONFIG: Mapping[str, str] = {
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
}


def sasl_jaas(plain_users: Mapping[str, str] | None = None) -> str:
    """A JAAS file body for the broker: PLAIN with ``plain_users`` (user -> password) and SCRAM
    (whose users are added later, see :meth:`KafkaBroker.add_scram_user`)."""
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
    reauth_ms: int | None = None,
) -> dict[str, Any]:
    """Keyword arguments for :class:`KafkaBroker` adding TLS and SASL listeners.

    With ``pki`` (:func:`aiogroup.testing.tls.make_pki`): an ``SSL`` listener with its broker
    certificate (``client_auth`` is ``ssl.client.auth``). With ``sasl``: ``SASL_PLAINTEXT``
    enabling ``mechanisms``, PLAIN users from ``plain_users``; both together add ``SASL_SSL``.
    SCRAM users are added once the broker runs (:meth:`KafkaBroker.add_scram_user`).

    ``"OAUTHBEARER"`` among ``mechanisms`` (not there by default) accepts Kafka's unsecured JWS
    tokens on every SASL listener (``OAuthBearerUnsecuredValidatorCallbackHandler``: header
    ``{"alg":"none"}``, claims ``sub`` and ``exp``, no signature; see
    :func:`aiogroup.testing.oauth.unsecured_jws`), for tests only. ``reauth_ms`` sets
    ``connections.max.reauth.ms`` (KIP-368): the broker then gives each SASL session that
    lifetime at most (less when the token expires sooner) and closes a connection that has not
    re-authenticated in time at its next request.
    """
    known = (*MECHANISMS, "OAUTHBEARER")
    unknown = [m for m in mechanisms if m not in known]
    if unknown:
        raise ConfigurationError(f"mechanisms must be some of {', '.join(known)}: {unknown}")
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
        if "OAUTHBEARER" in mechanisms:
            for listener in listeners:
                if listener.name.startswith("SASL_"):
                    config.update(unsecured_oauthbearer_config(listener.name))
    if reauth_ms is not None:
        config["connections.max.reauth.ms"] = str(int(reauth_ms))
    return {"config": config, "listeners": listeners, "jaas": jaas}


_OAUTH = "org.apache.kafka.common.security.oauthbearer"


def unsecured_oauthbearer_config(listener: str, subject: str = "broker") -> dict[str, str]:
    """Broker settings for OAUTHBEARER with unsecured JWS on ``listener`` (tests only): the
    login module that makes the broker's own token (claim ``sub`` = ``subject``) and the
    validator that accepts unsigned tokens whose ``exp`` has not passed."""
    prefix = f"listener.name.{listener.lower()}.oauthbearer."
    return {
        prefix + "sasl.jaas.config": (
            f"{_OAUTH}.OAuthBearerLoginModule required "
            f'unsecuredLoginStringClaim_sub="{_jaas_value(subject)}";'
        ),
        prefix + "sasl.server.callback.handler.class": (
            f"{_OAUTH}.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler"
        ),
    }


def jvm_options(java: Path, heap_mb: int, quick_jit: bool) -> list[str]:
    """The ``java`` command line up to the class path: heap, G1, and (``quick_jit``) C1 only,
    which starts a short-lived test broker far sooner; a benchmark wants the full JIT."""
    jit = ["-XX:TieredStopAtLevel=1"] if quick_jit else []
    return [
        str(java),
        f"-Xmx{heap_mb}m",
        f"-Xms{min(heap_mb, 128)}m",
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        *jit,
        "-Djava.awt.headless=true",
        "-Djava.net.preferIPv4Stack=true",
    ]


class KafkaBroker:
    """One Apache Kafka broker (and, for 2.3, its ZooKeeper) on free 127.0.0.1 ports.

    ``version``: ``None`` or ``"2.3.0"`` for Kafka 2.3 with ZooKeeper; a version with a pinned
    jar list (``"4.1.1"``, ``"3.9.1"``, ``"4.4.0"``) for that release in KRaft mode.
    ``config`` adds or overrides broker settings (:data:`TEST_CONFIG`). ``listeners`` adds
    listeners beside PLAINTEXT (e.g. ``[Listener("SSL"), Listener("SASL_PLAINTEXT")]``, with
    the matching ``ssl.*`` / ``sasl.*`` settings in ``config``; see :func:`security_config`);
    their ports are in :attr:`ports`. ``jaas`` is a JAAS file body for SASL. KRaft versions
    also take ``brokers=3`` (node 1 broker and controller, the others brokers) and ``racks=[...]``
    (each node's ``broker.rack``). The processes are
    stopped by pid in :meth:`stop`; the work folder (configuration, data, logs) is removed unless
    a start failed or ``keep`` (``AIOGROUP_KAFKA_KEEP=1``) is set.
    """

    #: The Kafka version this broker runs.
    version: str = ZOOKEEPER_VERSION

    def __new__(cls, *args: Any, version: str | None = None, **kwargs: Any) -> Self:
        target: type[KafkaBroker] = cls
        if cls is KafkaBroker:
            if version is None or version == ZOOKEEPER_VERSION:
                from aiogroup.testing.launchers.kafka23 import ZooKeeperKafkaBroker

                target = ZooKeeperKafkaBroker
            else:
                from aiogroup.testing.launchers.kraft import KRaftKafkaBroker

                target = KRaftKafkaBroker
        return cast(Self, object.__new__(target))

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
        keep: bool | None = None,
        brokers: int = 1,
        racks: Sequence[str] | None = None,
    ) -> None:
        if version is not None:
            self.version = version
        # Checked by each version's class (only KRaft runs more than one broker).
        self.brokers = brokers
        self.racks = list(racks) if racks is not None else None
        self.extra_config = dict(config or {})
        self.listeners = [Listener("PLAINTEXT"), *listeners]
        for listener in self.listeners:
            listener.check()
        self.jaas = jaas
        self.heap_mb = heap_mb
        self.quick_jit = quick_jit
        self.start_timeout = start_timeout
        self.keep = os.environ.get("AIOGROUP_KAFKA_KEEP") == "1" if keep is None else keep
        self.host = "127.0.0.1"
        self.work: Path | None = None
        self._failed = False

    # ------------------------------------------------------------------ for the versions

    def _processes(self) -> dict[str, ServerProcess | None]:
        """Name -> process, in start order (each version's own)."""
        raise NotImplementedError

    def _start_servers(self) -> None:
        raise NotImplementedError

    def _start_broker(self) -> None:
        raise NotImplementedError

    def _broker_process(self) -> ServerProcess | None:
        raise NotImplementedError

    def _forget_broker(self) -> None:
        raise NotImplementedError

    def _store_scram_credentials(self, user: str, entries: Sequence[str]) -> None:
        """Store ``entries`` (``MECHANISM=[iterations=N,password=P]``, one per mechanism)."""
        raise NotImplementedError

    def run_tool(self, name: str, *args: str, timeout: float = 120.0) -> str:
        """Run one of Kafka's command-line tools on this Java (``"kafka-configs.sh"``,
        ``"kafka-consumer-groups"``, ...); returns its stdout, raises :class:`KafkaStartError`
        with its stderr when it fails."""
        raise NotImplementedError

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
    def pids(self) -> dict[str, int]:
        """Process name (``"kafka"``, ``"zookeeper"``) -> pid, of those running."""
        return {name: p.pid for name, p in self._processes().items() if p is not None}

    @property
    def log_file(self) -> Path | None:
        """The broker's log4j file (in the work folder)."""
        return self.work / "server.log" if self.work is not None else None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        self.work = Path(tempfile.mkdtemp(prefix=f"aiogroup-kafka-{self.version}-"))
        try:
            for listener in self.listeners:
                listener.port = listener.port or free_port()
            self._start_servers()
        except Exception:
            self._failed = True  # keeps the work folder and its logs
            self.stop()
            raise
        except BaseException:  # interrupted (Ctrl-C, a signal): clean up as on stop
            self.stop()
            raise
        return self

    def _where(self) -> str:
        return f"logs kept in {self.work}"

    def _wait_broker(self, process: ServerProcess) -> None:
        process.wait_ready(self.broker_ready, timeout=self.start_timeout, where=self._where())

    def broker_ready(self, port: int | None = None, brokers: int = 1) -> bool:
        """Ready once the broker (on ``port``, default the PLAINTEXT listener) answers Metadata
        naming a controller and ``brokers`` brokers, and the group coordinator works.

        The first FindCoordinator creates ``__consumer_offsets``; then the coordinator loads
        that partition and answers COORDINATOR_LOAD_IN_PROGRESS (14) until it has. Waiting for
        a DescribeGroups answer without error (from the coordinator FindCoordinator named) here
        means no test pays for (or has to retry through) either, after a start or a
        :meth:`restart_broker`.
        """
        meta = self.request("Metadata", READINESS_REQUESTS["Metadata"], {"topics": []}, port=port)
        if meta.controller_id < 0 or len(meta.brokers) < brokers:
            return False
        found = self.request(
            "FindCoordinator",
            READINESS_REQUESTS["FindCoordinator"],
            {"key": "aiogroup-warmup", "key_type": 0},
            port=port,
        )
        if int(found.error_code) != 0:
            return False
        described = self.request(
            "DescribeGroups",
            READINESS_REQUESTS["DescribeGroups"],
            {"groups": ["aiogroup-warmup"]},
            host=found.host,
            port=found.port,
        )
        return int(described.groups[0].error_code) == 0

    def stop(self) -> None:
        """Stop every process (by pid: SIGTERM to its group, SIGKILL after 15 s), the broker
        first; remove the work folder unless a start failed or ``keep`` is set."""
        for process in reversed(list(self._processes().values())):
            if process is not None:
                process.stop()
        self._forget_processes()
        work, self.work = self.work, None
        if work is not None and not (self.keep or self._failed):
            shutil.rmtree(work, ignore_errors=True)

    def _forget_processes(self) -> None:
        raise NotImplementedError

    def stop_broker(self) -> None:
        """Stop only the broker (data, ports and any ZooKeeper stay) to :meth:`restart_broker`."""
        process = self._broker_process()
        if process is not None:
            process.stop()
        self._forget_broker()

    def restart_broker(self) -> None:
        """Start the broker again on the same ports with the same data (a broker restart)."""
        self.stop_broker()
        self._start_broker()

    def __enter__(self) -> Self:
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
        self,
        api: str,
        version: int,
        values: Mapping[str, Any],
        timeout: float = 10.0,
        *,
        host: str | None = None,
        port: int | None = None,
    ) -> Any:
        """One blocking request (kafka-python's decoded response), to the PLAINTEXT listener
        unless ``host``/``port`` name another broker."""
        address = (host or self.host, port or self.port)
        with socket.create_connection(address, timeout=timeout) as s:
            return wire.blocking_request(
                s,
                api,
                version,
                values,
                correlation_id=next(self._correlation),
                client_id="aiogroup-admin",
            )

    def api_versions(self) -> dict[str, tuple[int, int]]:
        """API name -> (min, max) version, as the broker's ApiVersions answer lists them."""
        answer = self.request("ApiVersions", READINESS_REQUESTS["ApiVersions"], {})
        names = {key: name for name, key in wire.API_KEYS_BY_NAME.items()}
        return {
            names.get(int(v.api_key), f"api-{v.api_key}"): (int(v.min_version), int(v.max_version))
            for v in answer.api_keys
        }

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        config: Mapping[str, str] | None = None,
        replication_factor: int = 1,
        replicas: Sequence[Sequence[int]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Create a topic and wait until every partition has a leader. ``replicas``: each
        partition's broker ids, its preferred leader first (then ``partitions`` is their count
        and ``replication_factor`` is not used)."""
        if replicas is not None:
            partitions = len(replicas)
        topic = {
            "name": name,
            "num_partitions": partitions if replicas is None else -1,
            "replication_factor": replication_factor if replicas is None else -1,
            "assignments": [
                {"partition_index": i, "broker_ids": list(ids)}
                for i, ids in enumerate(replicas or ())
            ],
            "configs": [{"name": k, "value": v} for k, v in (config or {}).items()],
        }
        # the socket waits as long as the broker may (its own 10 s default cut this short)
        r = self.request(
            "CreateTopics",
            READINESS_REQUESTS["CreateTopics"],
            {"topics": [topic], "timeout_ms": int(timeout * 1000)},
            timeout=timeout + 10,
        )
        code = int(r.topics[0].error_code)
        if code not in (0, 36):  # 36: TOPIC_ALREADY_EXISTS
            raise KafkaStartError(
                f"CreateTopics {name}: error {code} ({r.topics[0].error_message})"
            )
        deadline = time.monotonic() + timeout
        while True:
            meta = self.request(
                "Metadata", READINESS_REQUESTS["Metadata"], {"topics": [{"name": name}]}
            )
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
        """Create SCRAM credentials with ``kafka-configs`` (in ZooKeeper for 2.3, through the
        broker in KRaft), then wait until the broker accepts them on a SASL listener (it learns
        of them asynchronously)."""
        _jaas_word(user)
        if not password or any(c in password for c in ",]=\n"):
            raise ConfigurationError("kafka-configs takes no empty password, nor ',', ']', '='")
        entries = [f"{m}=[iterations={iterations},password={password}]" for m in mechanisms]
        self._store_scram_credentials(user, entries)
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

    def consumer_groups(self, *args: str, timeout: float = 120.0) -> str:
        """``kafka-consumer-groups --bootstrap-server BOOTSTRAP ARGS...`` of this version
        (e.g. ``consumer_groups("--describe", "--group", "g")``); its stdout."""
        return self.run_tool(
            "kafka-consumer-groups", "--bootstrap-server", self.bootstrap, *args, timeout=timeout
        )
