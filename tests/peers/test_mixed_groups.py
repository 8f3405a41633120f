"""Mixed groups with real clients from other languages: aiogroup's ``Consumer``, Apache Kafka's
Java ``KafkaConsumer`` and franz-go (the peers of :mod:`aiogroup.testing.peers`), each a member
process writing the shared telemetry, judged by the chaos checker and the KIP-429 rules of
``harness.py``.

Brokers: the embedded one and Apache Kafka 2.3 (``kafka_broker``'s ``kafka23``, the session's
broker). Kafka 4.x joins the list below as ``pytest.param("kafka4", marks=pytest.mark.kafka4)``
once its launcher is in ``aiogroup.testing``; nothing else here depends on the broker.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from aiogroup.testing.fixtures import BrokerHandle

from .harness import MemberGroup, protocols

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(400)]

BROKERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
    pytest.param("kafka23", id="kafka23", marks=pytest.mark.kafka23),
]


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
@pytest.mark.every_broker  # the smoke subset: every live Kafka
def test_a_cooperative_group_of_aiogroup_java_franz_go_librdkafka_and_kafka_python(
    kafka_broker: BrokerHandle, java_peer: list[str], franz_go_peer: list[str], tmp_path: Path
) -> None:
    """Members of five clients join and leave one at a time, each kind in turn (issue 25.2):
    every record is processed at
    least once, no partition ever has two owners, every callback is in order (the checker),
    each member runs cooperatively and revokes only what moves (KIP-429)."""
    g = MemberGroup(kafka_broker, tmp_path)
    try:
        g.produce(20)
        g.start("j1", "java")
        g.wait(g.converged, "j1 (java) holding every partition")
        g.start("f1", "franz-go")
        g.wait(g.converged, "j1 and f1 (franz-go) sharing the partitions")
        g.start("a1", "aiogroup-consumer")
        g.wait(g.converged, "j1, f1 and a1 (aiogroup) sharing the partitions")
        g.start("r1", "librdkafka")
        g.wait(g.converged, "r1 (librdkafka) taking its share")
        g.start("p1", "kafka-python")
        g.wait(g.converged, "p1 (kafka-python) taking its share")
        g.produce(20)
        g.wait(lambda: not g.unprocessed(), "every record processed")
        assert g.stop("f1") == 0
        g.wait(g.converged, "f1's partitions handed to j1 and a1")
        g.start("f2", "franz-go")
        g.wait(g.converged, "f2 taking its share")
        assert g.stop("j1") == 0
        g.wait(g.converged, "j1's partitions handed over")
        g.start("j2", "java")
        g.wait(g.converged, "j2 taking its share")
        g.produce(20)
        g.wait(lambda: not g.unprocessed(), "every record processed after the moves")
        codes = g.close()
    finally:
        g.kill_all()
    g.judge(codes, clients=("aiogroup", "java", "franz-go", "librdkafka", "kafka-python"))
    events = g.events()
    assert {name: kinds for name, kinds in protocols(events).items()} == {
        name: {"cooperative"} for name in events
    }
