"""KIP-881 through the driver, with bytes: a GroupMember that leads a group with a member in
another rack reads each partition's replica racks from the Metadata answer (``brokers[].rack``
and ``replica_nodes``) and assigns rack-matched (the scripted broker of
:mod:`aiogroup.testing.scripted`; the embedded broker is one node without a rack)."""

from __future__ import annotations

from typing import Any

import pytest

from aiogroup import GroupMember
from aiogroup.protocol import Subscription, decode_assignment
from aiogroup.protocol.consumer import encode_subscription
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.scripted import DecodedRequest, ScriptedTransport

pytestmark = pytest.mark.timeout(30)

TOPIC = "orders"
TP = TopicPartition


class RackedBroker:
    """Brokers 1 (rack a) and 2 (rack b): partitions 0 and 2 of ``orders`` have their replica
    on broker 1, 1 and 3 on broker 2. The group: us (m-1, leading) and m-2 in rack b."""

    def __init__(self) -> None:
        self.generation = 0
        self.sent: dict[str, Any] = {}

    def metadata(self, request: DecodedRequest) -> dict[str, Any]:
        return {
            "brokers": [{"node_id": 1, "host": "scripted", "port": 0, "rack": "a"},
                        {"node_id": 2, "host": "scripted", "port": 0, "rack": "b"}],
            "controller_id": 1,
            "topics": [{"error_code": 0, "name": TOPIC, "partitions": [
                {"error_code": 0, "partition_index": p, "leader_id": 1 + p % 2,
                 "replica_nodes": [1 + p % 2], "isr_nodes": [1 + p % 2]}
                for p in range(4)]}],
        }  # fmt: skip

    def join(self, request: DecodedRequest) -> dict[str, Any]:
        body = request.body
        if not body.member_id:
            return {"error_code": 79, "generation_id": -1, "protocol_name": None,
                    "leader": "", "member_id": "m-1", "members": []}  # fmt: skip
        self.generation += 1
        protocol = body.protocols[0]
        other = encode_subscription(Subscription([TOPIC], rack_id="b"), 3)
        return {
            "error_code": 0, "generation_id": self.generation, "protocol_type": "consumer",
            "protocol_name": protocol.name, "leader": "m-1", "member_id": "m-1",
            "members": [{"member_id": "m-1", "group_instance_id": None,
                         "metadata": protocol.metadata},
                        {"member_id": "m-2", "group_instance_id": None, "metadata": other}],
        }  # fmt: skip

    def sync(self, request: DecodedRequest) -> dict[str, Any] | bytes:
        self.sent = {a.member_id: a.assignment for a in request.body.assignments}
        return {"error_code": 0, "protocol_type": "consumer",
                "protocol_name": request.body.protocol_name,
                "assignment": self.sent["m-1"]}  # fmt: skip


async def test_the_leader_assigns_by_the_racks_metadata_reports() -> None:
    broker = RackedBroker()
    transport = ScriptedTransport("g", topics={TOPIC: 4})
    transport.on("Metadata", broker.metadata)
    transport.on("JoinGroup", broker.join)
    transport.on("SyncGroup", broker.sync)
    async with GroupMember(
        "127.0.0.1:9", "g", topics=[TOPIC], transport=transport, rack_id="a",
        session_timeout_ms=6_000, heartbeat_interval_ms=100, retry_backoff_ms=10,
        close_timeout_s=3,
    ) as m:  # fmt: skip
        outcome = await m.wait_for_assignment(timeout=10)
        assert outcome.assignment == {TP(TOPIC, 0), TP(TOPIC, 2)}
    other = decode_assignment(broker.sent["m-2"])
    assert other.partitions[TOPIC] == (1, 3)  # (and an aiogroup leader's hand-off mark)
