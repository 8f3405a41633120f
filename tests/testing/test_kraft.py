"""Apache Kafka 3.9 / 4.x in KRaft mode (``aiogroup.testing.launchers.kraft``), the pinned jars
(``aiogroup.testing.launchers.maven``) and the shared process start/stop
(``aiogroup.testing.launchers.processes``).

The unit tests fake the repository; the ``kafka4`` / ``kafka39`` ones run the real brokers (the
session's shared 4.1.1, and private ones for the lifecycle, SASL and other versions).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import re
import select
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from aiogroup import GroupMember, TopicPartition
from aiogroup.errors import ConfigurationError
from aiogroup.testing.fixtures import apache_kafka4  # noqa: F401 - the fixture, found by name
from aiogroup.testing.launchers import kraft, maven
from aiogroup.testing.launchers.kafka import (
    KAFKA4_VERSION,
    KAFKA39_VERSION,
    KAFKA_VERSION,
    READINESS_REQUESTS,
    KafkaBroker,
    KafkaStartError,
    kafka_available,
    kafka_versions,
    security_config,
)
from aiogroup.testing.launchers.kafka23 import ZooKeeperKafkaBroker
from aiogroup.testing.launchers.kraft import KRaftKafkaBroker
from aiogroup.testing.launchers.processes import ServerProcess, ServerStartError
from aiogroup.testing.sasl import sasl_login

# --------------------------------------------------------------------------- pinned jars


def test_each_pinned_version_lists_kafka_its_tools_and_a_logging_binding() -> None:
    assert {"3.9.1", "4.1.1", "4.4.0"} <= set(kraft.pinned_versions())
    assert kafka_versions()[0] == KAFKA_VERSION
    for version in kraft.pinned_versions():
        artifacts = {jar.artifact: jar for jar in kraft.load_pins(version)}
        assert artifacts["org.apache.kafka:kafka_2.13"].coordinates.endswith(f":{version}")
        assert "org.apache.kafka:kafka-tools" in artifacts
        assert artifacts.keys() & {
            "org.slf4j:slf4j-reload4j",
            "org.apache.logging.log4j:log4j-slf4j-impl",
            "org.apache.logging.log4j:log4j-slf4j2-impl",
        }, version
        for jar in artifacts.values():
            group, artifact, ver = jar.coordinates.split(":")[:3]
            assert jar.path.startswith(f"{group.replace('.', '/')}/{artifact}/{ver}/")


def test_an_unpinned_version_is_refused_naming_the_pinned_ones() -> None:
    with pytest.raises(ConfigurationError, match=r"4\.1\.1.*pin 9\.9\.9"):
        KafkaBroker(version="9.9.9")


def test_the_version_picks_the_launcher() -> None:
    assert type(KafkaBroker()) is ZooKeeperKafkaBroker
    assert type(KafkaBroker(version=KAFKA_VERSION)) is ZooKeeperKafkaBroker
    modern = KafkaBroker(version=KAFKA4_VERSION)
    assert type(modern) is KRaftKafkaBroker and isinstance(modern, KafkaBroker)
    assert modern.version == KAFKA4_VERSION


@pytest.mark.parametrize(
    "line",
    [
        "a:b:1 a/b/1/b-1.jar",  # no digest
        "a:b:1 a/b/1/b-1.jar md5=" + "0" * 32,
        "a:b:1 ../etc/b-1.jar sha256=" + "0" * 64,
        "a:b:1 /abs/b-1.jar sha256=" + "0" * 64,
        "a:b:1 a/b/1/b-1.jar sha256=" + "0" * 63,
    ],
)
def test_a_malformed_pin_line_is_refused(line: str) -> None:
    with pytest.raises(maven.JarDownloadError, match="line 2"):
        maven.parse_pins("# header\n" + line + "\n")


def _repository(files: dict[str, bytes]) -> tuple[list[str], maven.Opener]:
    asked: list[str] = []

    def opener(url: str) -> IO[bytes]:
        asked.append(url)
        path = url.removeprefix("https://mirror.test/m2/")
        if path not in files:
            raise OSError(f"404 {url}")
        return io.BytesIO(files[path])

    return asked, opener


def _pin(path: str, body: bytes) -> maven.PinnedJar:
    return maven.PinnedJar("g:a:1", path, "sha256", hashlib.sha256(body).hexdigest())


def test_jars_are_fetched_from_the_mirror_checked_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOGROUP_MAVEN_URL", "https://mirror.test/m2")
    assert maven.maven_url() == "https://mirror.test/m2/"
    good = _pin("g/a/1/a-1.jar", b"jar bytes")
    asked, opener = _repository({good.path: b"jar bytes"})
    [path] = maven.fetch_jars([good], tmp_path, opener=opener)
    assert path == tmp_path / good.path and path.read_bytes() == b"jar bytes"
    assert asked == ["https://mirror.test/m2/g/a/1/a-1.jar"]
    assert maven.fetch_jars([good], tmp_path, opener=opener) == [path]
    assert len(asked) == 1  # cached: not asked again
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".part")]


def test_a_damaged_cached_jar_is_downloaded_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOGROUP_MAVEN_URL", "https://mirror.test/m2/")
    pin = _pin("g/a/1/a-1.jar", b"the real jar")
    (tmp_path / "g/a/1").mkdir(parents=True)
    (tmp_path / pin.path).write_bytes(b"the real j")  # truncated
    asked, opener = _repository({pin.path: b"the real jar"})
    [path] = maven.fetch_jars([pin], tmp_path, opener=opener)
    assert path.read_bytes() == b"the real jar" and len(asked) == 1


def test_a_jar_whose_digest_differs_is_refused_and_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOGROUP_MAVEN_URL", "https://mirror.test/m2/")
    pin = _pin("g/a/1/a-1.jar", b"what was pinned")
    _, opener = _repository({pin.path: b"something else"})
    with pytest.raises(maven.JarDownloadError, match="refusing to use it"):
        maven.fetch_jars([pin], tmp_path, opener=opener)
    assert list((tmp_path / "g/a/1").iterdir()) == []


def test_an_unreachable_repository_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIOGROUP_MAVEN_URL", "https://mirror.test/m2/")
    _, opener = _repository({})
    with pytest.raises(maven.JarDownloadError, match="AIOGROUP_MAVEN_URL"):
        maven.fetch_jars([_pin("g/a/1/a-1.jar", b"x")], tmp_path, opener=opener)


def test_tools_are_found_by_script_name_in_either_package(tmp_path: Path) -> None:
    install = kraft.KRaftInstall("4.4.0", tmp_path, Path("java"), 17, log4j2=True)
    install.__dict__["classes"] = frozenset(
        {"org.apache.kafka.tools.ConfigCommand", "kafka.admin.AclCommand"}
    )
    assert install.tool_class("kafka-configs.sh") == "org.apache.kafka.tools.ConfigCommand"
    assert install.tool_class("kafka-acls") == "kafka.admin.AclCommand"
    assert install.tool_class("org.example.Tool") == "org.example.Tool"
    with pytest.raises(ConfigurationError, match="kafka-consumer-groups"):
        install.tool_class("kafka-nonsense.sh")


# --------------------------------------------------------------------------- processes


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not yet reaped by its new parent, counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_server_process_runs_in_its_own_group_and_its_whole_group_is_stopped(
    tmp_path: Path,
) -> None:
    # A shell that starts a child ignoring nothing; stop() must end both, by the group.
    script = "sleep 300 & echo child=$!; wait"
    server = ServerProcess("shell", ["/bin/sh", "-c", script], log=tmp_path / "out.log").start()
    try:
        assert os.getpgid(server.pid) == server.pid != os.getpgid(0)
        server.wait_ready(lambda: "child=" in (tmp_path / "out.log").read_text(), timeout=30)
        child = int(re.findall(r"child=(\d+)", (tmp_path / "out.log").read_text())[0])
        exited = os.pidfd_open(child)  # readable once the child (not ours to wait for) exits
        try:
            server.stop(grace=10)
            assert server.returncode is not None
            # SIGTERM reached the whole group, not just the shell: the sleep ends too
            assert select.select([exited], [], [], 30)[0] == [exited]
        finally:
            os.close(exited)
    finally:
        server.stop()


def test_a_server_that_exits_while_starting_reports_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('cannot bind 127.0.0.1:1'); raise SystemExit(3)"]
    server = ServerProcess("fails", argv, log=tmp_path / "fails.log").start()
    with pytest.raises(ServerStartError, match=r"(?s)exited with code 3.*cannot bind"):
        server.wait_ready(lambda: False, timeout=30, where="logs kept in X")
    server.stop()


def test_a_server_not_ready_in_time_is_reported_with_the_last_error(tmp_path: Path) -> None:
    server = ServerProcess("idle", ["/bin/sh", "-c", "exec sleep 60"]).start()
    try:

        def refused() -> bool:
            raise ConnectionRefusedError("port closed")

        with pytest.raises(ServerStartError, match=r"not ready within 0.3 s.*port closed"):
            server.wait_ready(refused, timeout=0.3, interval=0.05)
    finally:
        server.stop(grace=5)
    assert server.returncode == -signal.SIGTERM


# --------------------------------------------------------------------------- the real brokers


def _need(version: str) -> None:
    ok, reason = kafka_available(version)
    if not ok:
        pytest.skip(reason)


def _tps(topic: str) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(4))


async def _join_commit(bootstrap: str, topic: str, group: str) -> None:
    async with (
        GroupMember(bootstrap, group, topics=[topic], session_timeout_ms=6000,
                    heartbeat_interval_ms=500) as a,
        GroupMember(bootstrap, group, topics=[topic], session_timeout_ms=6000,
                    heartbeat_interval_ms=500) as b,
    ):  # fmt: skip
        while not (
            a.assignment and b.assignment and a.assignment | b.assignment == _tps(topic)
        ) or not (a.state is b.state and a.state.name == "STABLE"):
            waiters = [asyncio.ensure_future(m.changed()) for m in (a, b)]
            await asyncio.wait_for(asyncio.wait(waiters, return_when="FIRST_COMPLETED"), 60)
        assert not a.assignment & b.assignment
        await a.commit({tp: 7 for tp in a.assignment})
        await b.commit({tp: 8 for tp in b.assignment})


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "version",
    [
        pytest.param(KAFKA_VERSION, marks=pytest.mark.kafka23),
        pytest.param(KAFKA39_VERSION, marks=pytest.mark.kafka39),
        pytest.param(KAFKA4_VERSION, marks=pytest.mark.kafka4),
        pytest.param("4.4.0", marks=pytest.mark.kafka4),
    ],
)
def test_every_version_serves_the_launcher_requests_a_group_and_kafka_consumer_groups(
    version: str, request: pytest.FixtureRequest
) -> None:
    _need(version)
    if version == KAFKA_VERSION:
        kafka = request.getfixturevalue("apache_kafka")
    elif version == KAFKA4_VERSION:
        kafka = request.getfixturevalue("apache_kafka4")
    else:
        kafka = KafkaBroker(version=version).start()
        request.addfinalizer(kafka.stop)
    assert kafka.version == version
    served = kafka.api_versions()
    for api, used in READINESS_REQUESTS.items():
        low, high = served[api]
        assert low <= used <= high, (version, api, served[api])
    assert kafka.log_file is not None and kafka.log_file.stat().st_size > 0
    topic, group = f"cg-{version}", f"cg-g-{version}"
    kafka.create_topic(topic, 4)
    asyncio.run(_join_commit(kafka.bootstrap, topic, group))
    # Kafka's own view of the group's offsets (the tool of that version: bin/ or a class)
    out = kafka.consumer_groups("--describe", "--group", group)
    offsets = sorted(int(x) for x in re.findall(re.escape(topic) + r"\s+\d+\s+(\d+)", out))
    assert offsets == [7, 7, 8, 8], out


@pytest.fixture(
    params=[
        pytest.param(KAFKA4_VERSION, marks=pytest.mark.kafka4, id="kafka4"),
        pytest.param(KAFKA39_VERSION, marks=pytest.mark.kafka39, id="kafka39"),
    ]
)
def private_kraft(request: pytest.FixtureRequest) -> Iterator[KafkaBroker]:
    _need(request.param)
    with KafkaBroker(version=request.param) as kafka:
        yield kafka


@pytest.mark.timeout(300)
def test_restart_keeps_data_and_stop_ends_every_pid(private_kraft: KafkaBroker) -> None:
    kafka = private_kraft
    kafka.create_topic("kr-restart", 4)
    asyncio.run(_join_commit(kafka.bootstrap, "kr-restart", "kr-g2"))
    port, old = kafka.port, kafka.pids["kafka"]
    kafka.restart_broker()
    assert kafka.port == port
    assert kafka.pids["kafka"] != old

    async def committed() -> dict[TopicPartition, int | None]:
        async with GroupMember(kafka.bootstrap, "kr-g2") as m:
            return await m.committed(sorted(_tps("kr-restart")))

    assert sorted(v for v in asyncio.run(committed()).values() if v is not None) == [7, 7, 8, 8]
    pids, work = list(kafka.pids.values()), kafka.work
    assert work is not None and (work / "server.log").exists()
    kafka.stop()
    assert not [pid for pid in pids if _alive(pid)]
    assert not work.exists()


@pytest.mark.kafka4
@pytest.mark.timeout(300)
def test_a_kraft_broker_that_cannot_start_keeps_its_logs() -> None:
    _need(KAFKA4_VERSION)
    broker = KafkaBroker(version=KAFKA4_VERSION, config={"num.io.threads": "not-a-number"})
    with pytest.raises(KafkaStartError, match="logs kept in") as info:
        broker.start()
    kept = Path(str(info.value).split("logs kept in ")[1].split(":")[0])
    try:
        assert (kept / "server.properties").exists()
        assert broker.pids == {}
    finally:
        shutil.rmtree(kept, ignore_errors=True)


@pytest.mark.kafka4
@pytest.mark.timeout(300)
def test_sasl_plain_and_scram_on_kafka_4() -> None:
    _need(KAFKA4_VERSION)
    settings = security_config(plain_users={"alice": "alice-secret"})
    with KafkaBroker(version=KAFKA4_VERSION, **settings) as kafka:
        port = kafka.ports["SASL_PLAINTEXT"]
        assert sasl_login(kafka.host, port, "PLAIN", "alice", "alice-secret").ok
        assert not sasl_login(kafka.host, port, "PLAIN", "alice", "wrong").ok
        assert not sasl_login(kafka.host, port, "SCRAM-SHA-512", "bob", "bob-secret").ok
        kafka.add_scram_user("bob", "bob-secret")  # kafka-configs --bootstrap-server, waits
        assert sasl_login(kafka.host, port, "SCRAM-SHA-256", "bob", "bob-secret").ok
        assert sasl_login(kafka.host, port, "SCRAM-SHA-512", "bob", "bob-secret").ok


def test_several_brokers_need_a_kraft_version() -> None:
    with pytest.raises(ConfigurationError, match="need a KRaft version"):
        KafkaBroker(brokers=3)
    with pytest.raises(ConfigurationError, match="2 racks for 3 brokers"):
        KafkaBroker(version=KAFKA4_VERSION, brokers=3, racks=["a", "b"])


@pytest.mark.kafka4
@pytest.mark.timeout(300)
def test_three_brokers_with_racks_on_kafka_4() -> None:
    _need(KAFKA4_VERSION)
    with KafkaBroker(version=KAFKA4_VERSION, brokers=3, racks=["r1", "r2", "r3"]) as kafka:
        assert isinstance(kafka, KRaftKafkaBroker)
        assert sorted(kafka.pids) == ["kafka", "kafka-2", "kafka-3"]
        ports = {n: p["PLAINTEXT"] for n, p in kafka.broker_ports.items()}
        assert len(set(ports.values())) == 3
        meta = kafka.request("Metadata", 1, {"topics": []}, port=ports[3])
        assert {(b.node_id, b.port, b.rack) for b in meta.brokers} == {
            (1, ports[1], "r1"), (2, ports[2], "r2"), (3, ports[3], "r3"),
        }  # fmt: skip
        kafka.create_topic("three", 3, replication_factor=3)
        t = kafka.request("Metadata", 1, {"topics": [{"name": "three"}]}).topics[0]
        assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in t.partitions)
        old = kafka.pids["kafka-2"]
        kafka.restart_broker(2)
        assert kafka.pids["kafka-2"] != old and not _alive(old)
        assert kafka.broker_ports[2]["PLAINTEXT"] == ports[2]
        pids, work = list(kafka.pids.values()), kafka.work
    assert not [pid for pid in pids if _alive(pid)]
    assert work is not None and not work.exists()
