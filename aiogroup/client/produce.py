"""One Produce request of record batches, for the two writers on aiogroup's transport: the
transactional producer (:mod:`aiogroup.producer`) and the Kafka telemetry sink
(:mod:`aiogroup.observability.telemetry_kafka`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse

from aiogroup.client.transport import Request, Transport
from aiogroup.protocol.types import TopicPartition

__all__ = ["PRODUCE_VERSIONS", "produce"]

#: Produce versions spoken: v3 (record batches, magic v2) to v11 (v12 and later commit a
#: transactional producer to KIP-890's protocol, v13 names topics by id). Kafka 2.3 answers up
#: to v7, 4.x from v3.
PRODUCE_VERSIONS = (3, 11)


async def produce(
    transport: Transport,
    node: int,
    batches: Mapping[TopicPartition, bytes],
    *,
    acks: int,
    timeout_ms: int,
    transactional_id: str | None = None,
) -> dict[TopicPartition, int | None]:
    """Send one batch per partition to leader ``node``; the error code per partition (None
    where the answer leaves a partition out: its outcome is unknown). Transport errors
    raise."""
    by_topic: dict[str, list[tuple[int, bytes]]] = {}
    for tp, data in sorted(batches.items()):
        by_topic.setdefault(tp.topic, []).append((tp.partition, data))

    def build(version: int) -> Any:
        T = ProduceRequest.TopicProduceData
        P = T.PartitionProduceData
        return ProduceRequest(
            transactional_id=transactional_id,
            acks=acks,
            timeout_ms=timeout_ms,
            topic_data=[
                T(name=t, partition_data=[P(index=p, records=b) for p, b in parts])
                for t, parts in by_topic.items()
            ],
        )

    request = Request("Produce", ProduceRequest, ProduceResponse, build, versions=PRODUCE_VERSIONS)
    answer = await transport.send(node, request)
    codes: dict[TopicPartition, int | None] = dict.fromkeys(batches)
    for t in answer.responses or ():
        for p in t.partition_responses or ():
            tp = TopicPartition(t.name, int(p.index))
            if tp in codes:
                codes[tp] = int(p.error_code)
    return codes
