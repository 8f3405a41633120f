"""The Java and franz-go peers as conformance-suite peers (kinds ``java`` and ``franz-go`` of
``tests/conformance/peers.py``): the stdout events and stdin commands the Python peers speak,
static membership, and the build cache and pinned jars of :mod:`aiogroup.testing.peers`.
"""

from __future__ import annotations

import uuid

import pytest

from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.testing.launchers.maven import parse_pins
from aiogroup.testing.peers import JAVA_PINS, peer_command
from tests.conformance.peers import Peer, Peers, create_topic, produce

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(300)]

BROKERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
    pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23),
]


def _owns(peer: Peer, partitions: set[int]) -> bool:
    return set(peer.owned() or ()) == partitions


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
def test_java_and_franz_go_speak_the_peer_protocol(
    kafka_broker: BrokerHandle, java_peer: list[str], franz_go_peer: list[str]
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"kinds-{tag}", f"kinds-{tag}"
    create_topic(kafka_broker, topic, 4)
    produce(kafka_broker, topic, 40)  # all on partition 0
    every = {0, 1, 2, 3}
    options = {"group": group, "topic": topic, "assignors": "cooperative-sticky"}
    with Peers(kafka_broker) as peers:
        java = peers.start("java", name="java-a", instance_id=f"static-{tag}", **options)
        java.wait_for(lambda p: _owns(p, every) and p.consumed() >= 40, "java owning all, reading")
        java.command("commit")
        java.wait_for(lambda p: any(e["event"] == "committed" for e in p.events), "a commit")
        committed = next(e for e in java.events if e["event"] == "committed")
        assert committed["offsets"] == {"0": 40}

        go = peers.start("franz-go", name="go-b", **options)
        go.wait_for(
            lambda _: bool(go.owned()) and set(java.owned() or ()) | set(go.owned() or ()) == every
            and not set(java.owned() or ()) & set(go.owned() or ()),
            "java and franz-go sharing the partitions",
        )  # fmt: skip
        # Cooperative: java revoked exactly what moved to franz-go, nothing more.
        assert set(java.revoked()) == set(go.owned() or ())
        kept = set(java.owned() or ())

        # Static membership: java closes without leaving; its successor with the same instance
        # id gets the same partitions back, and franz-go gives up nothing in between.
        java.close()
        java.wait_for(lambda p: {"event": "exited"} in p.events, "java's exit")
        assert {"event": "closed"} in java.events and java.proc.returncode == 0
        again = peers.start("java", name="java-a2", instance_id=f"static-{tag}", **options)
        again.wait_for(lambda p: _owns(p, kept), "the static successor owning java's partitions")
        assert go.revoked() == [] and _owns(go, every - kept)
        assert java.errors() == [] and go.errors() == [] and again.errors() == []
        for peer in (again, go):
            peer.close()
            peer.wait_for(lambda p: {"event": "exited"} in p.events, f"{peer.name}'s exit")
            assert {"event": "closed"} in peer.events and peer.proc.returncode == 0


def test_the_pinned_list_names_kafka_clients_and_its_runtime_jars() -> None:
    names = {jar.artifact for jar in parse_pins(JAVA_PINS.read_text())}
    assert names == {
        "org.apache.kafka:kafka-clients",
        "com.github.luben:zstd-jni",
        "org.lz4:lz4-java",
        "org.xerial.snappy:snappy-java",
        "org.slf4j:slf4j-api",
    }


def test_a_peer_command_line_carries_every_option(java_peer: list[str]) -> None:
    argv = peer_command(
        "java", bootstrap="h:1", group="g", topic="t", name="n",
        assignors=("range", "cooperative-sticky"), instance_id="i", protocol="consumer",
        commands=True, telemetry_dir="/tmp/x",
    )  # fmt: skip
    assert argv[: len(java_peer)] == java_peer
    text = " ".join(argv[len(java_peer) :])
    for part in ("--assignors range,cooperative-sticky", "--instance-id i",
                 "--protocol consumer", "--commands", "--telemetry /tmp/x"):  # fmt: skip
        assert part in text
    with pytest.raises(ValueError, match="classic"):
        peer_command("java", bootstrap="h:1", group="g", topic="t", name="n", protocol="new")


def test_a_timed_out_wait_shows_the_jvm_and_go_threads(
    threaded_broker: ThreadedBroker, java_peer: list[str], franz_go_peer: list[str]
) -> None:
    """Diagnostics: the JVM's thread dump (SIGQUIT, on stdout) and franz-go's goroutines
    (SIGUSR1, into the diagnostics folder), without killing either peer."""
    handle = BrokerHandle("embedded", threaded_broker.bootstrap, threaded_broker)
    create_topic(handle, "diag", 1)
    with Peers(handle) as peers:
        java = peers.start("java", group="g-diag", topic="diag", name="j")
        go = peers.start("franz-go", group="g-diag", topic="diag", name="f")
        java.wait_for(lambda _: java.owned() is not None and go.owned() is not None, "both up")
        with pytest.raises(AssertionError) as caught:
            java.wait_for(lambda _: False, "something that never happens", timeout=1)
        text = str(caught.value)
        assert "JNI global refs" in text and "java.lang.Thread.State" in text  # the JVM's
        assert "goroutine " in text and "pkg/kgo" in text  # franz-go's
        assert java.proc.poll() is None and go.proc.poll() is None
