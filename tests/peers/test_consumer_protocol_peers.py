"""A KIP-848 consumer group (``group.protocol=consumer``) of aiogroup Consumers and Java
KafkaConsumers on the embedded broker and on Apache Kafka 4.1.1, members joining and leaving one
at a time, judged from
their telemetry by the chaos checker (no partition ever consumed by two members at once,
callbacks in order) and by the harness: every record processed at least once, nothing revoked
that came straight back."""

from __future__ import annotations

from pathlib import Path

import pytest

from aiogroup.testing.fixtures import BrokerHandle

from .harness import MemberGroup

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(400)]

CONSUMER = "consumer"


@pytest.mark.parametrize(
    "kafka_broker",
    [
        pytest.param("embedded", id="embedded"),
        pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
    ],
    indirect=True,
)
def test_aiogroup_and_java_members_share_a_consumer_protocol_group(
    kafka_broker: BrokerHandle, java_peer: list[str], tmp_path: Path
) -> None:
    g = MemberGroup(kafka_broker, tmp_path)
    # The group's session and pace are the broker's (KIP-848): the members' 6 s, fast beats.
    if kafka_broker.embedded is not None:
        kafka_broker.embedded.set_group_config(
            g.group, session_timeout_ms=6000, heartbeat_interval_ms=300
        )
    else:
        kafka = kafka_broker.apache
        assert kafka is not None
        kafka.run_tool(
            "kafka-configs", "--bootstrap-server", kafka.bootstrap, "--alter",
            "--entity-type", "groups", "--entity-name", g.group, "--add-config",
            "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=300",
        )  # fmt: skip
    try:
        g.produce(20)
        g.start("a1", "aiogroup-consumer", group_protocol=CONSUMER)
        g.wait(g.converged, "a1 holding every partition")
        g.start("j1", "java", group_protocol=CONSUMER)
        g.wait(g.converged, "a1 and j1 sharing the partitions")
        g.start("a2", "aiogroup-consumer", group_protocol=CONSUMER)
        g.wait(g.converged, "a1, j1 and a2 sharing the partitions")
        g.produce(20)
        g.wait(lambda: not g.unprocessed(), "every record processed")
        assert g.stop("j1") == 0
        g.wait(g.converged, "j1's partitions handed to a1 and a2")
        g.start("j2", "java", group_protocol=CONSUMER)
        g.wait(g.converged, "j2 taking its share")
        assert g.stop("a1") == 0
        g.wait(g.converged, "a1's partitions handed over")
        g.produce(20)
        g.wait(lambda: not g.unprocessed(), "every record processed after the moves")
        codes = g.close_in_turn()
    finally:
        g.kill_all()
    g.judge(codes, clients=("aiogroup", "java"))
