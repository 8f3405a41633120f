"""The transactional producer's requests over the member's transport (KIP-98, KIP-447).

Each call sends one request and returns what the broker answered as data (error codes, per
partition where the API answers per partition); the producer
(:class:`aiogroup.producer.TransactionalProducer`) judges them, retries and raises. Failures to
reach a broker raise :class:`~aiogroup.errors.BrokerUnreachableError` (the transport's rule).

Versions are capped where Kafka's "transaction version 2" (KIP-890 part 2) begins: a producer
that sends Produce v12, EndTxn v5 or TxnOffsetCommit v5 promises the new protocol (partitions
added implicitly, an epoch bump per transaction), which this producer does not speak. Brokers
keep serving the older versions with the KIP-98 protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

from aiogroup.client.produce import produce
from aiogroup.client.transport import Request, Transport
from aiogroup.consumer.group_metadata import ConsumerGroupMetadata
from aiogroup.errors import RemoteProtocolError, UnsupportedApiVersionError, error_for_code
from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = [
    "GROUP_KEY",
    "TRANSACTION_KEY",
    "TXN_OFFSET_COMMIT_FENCED",
    "TXN_OFFSET_COMMIT_KEY",
    "VERSIONS",
    "ProducerId",
    "TransactionWire",
]

#: Versions per API: Produce from v3 (record batches v2, transactional id); the rest from v0;
#: every one capped below transaction version 2 (see the module's docstring).
VERSIONS: dict[str, tuple[int, int]] = {
    "Produce": (3, 11),
    "InitProducerId": (0, 5),
    "AddPartitionsToTxn": (0, 3),
    "AddOffsetsToTxn": (0, 4),
    "TxnOffsetCommit": (0, 4),
    "EndTxn": (0, 4),
    "FindCoordinator": (1, 6),  # key types arrive with v1
}

#: TxnOffsetCommit's API key, and its first version carrying the consumer's generation, member
#: id and instance id (KIP-447), which lets the group coordinator fence a zombie's commit.
TXN_OFFSET_COMMIT_KEY = 28
TXN_OFFSET_COMMIT_FENCED = 3

#: FindCoordinator key types.
GROUP_KEY = 0
TRANSACTION_KEY = 1


@dataclass(frozen=True, slots=True)
class ProducerId:
    """An InitProducerId answer (``error_code`` 0: ``producer_id`` and ``epoch`` are ours)."""

    error_code: int
    producer_id: int = -1
    epoch: int = -1


class TransactionWire:
    """The transaction APIs of one ``transactional_id``, over ``transport``."""

    def __init__(self, transport: Transport, transactional_id: str) -> None:
        self.transport = transport
        self.transactional_id = transactional_id

    async def max_version(self, api_key: int) -> int | None:
        """The highest version of API ``api_key`` a broker serves (None: not at all)."""
        request = Request(
            "ApiVersions", ApiVersionsRequest, ApiVersionsResponse,
            lambda version: ApiVersionsRequest(), versions=(0, 2),
        )  # fmt: skip
        r = await self.transport.send(None, request)
        for entry in r.api_keys or ():
            if int(entry.api_key) == api_key:
                return int(entry.max_version)
        return None

    async def find_coordinator(self, key: str, key_type: int) -> int:
        """The node id of the coordinator of ``key`` (a group, or a transactional id);
        raises the broker's error (retriable ones as :class:`~aiogroup.errors.RetriableError`)."""

        def build(version: int) -> Any:
            if version >= 4:
                return FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
            return FindCoordinatorRequest(key=key, key_type=key_type)

        request = Request(
            "FindCoordinator", FindCoordinatorRequest, FindCoordinatorResponse, build,
            versions=VERSIONS["FindCoordinator"],
        )  # fmt: skip
        r = await self.transport.send(None, request)
        if request.version >= 4:
            if not r.coordinators:
                raise RemoteProtocolError("FindCoordinator answered no coordinator")
            entry = r.coordinators[0]
        else:
            entry = r
        if entry.error_code:
            raise error_for_code(
                int(entry.error_code), f"FindCoordinator({key!r}) failed: {entry.error_code}"
            )
        node_id = int(entry.node_id)
        if self.transport.address(node_id) is None:
            await self.transport.refresh_metadata()
        return node_id

    async def init_producer_id(
        self, node: int, timeout_ms: int, producer_id: int = -1, epoch: int = -1
    ) -> ProducerId:
        """InitProducerId; with the current id and epoch (v3+, KIP-360) it bumps the epoch."""
        tid = self.transactional_id

        def build(version: int) -> Any:
            return InitProducerIdRequest(
                transactional_id=tid,
                transaction_timeout_ms=timeout_ms,
                producer_id=producer_id if version >= 3 else -1,
                producer_epoch=epoch if version >= 3 else -1,
            )

        request = Request(
            "InitProducerId", InitProducerIdRequest, InitProducerIdResponse, build,
            versions=VERSIONS["InitProducerId"],
        )  # fmt: skip
        r = await self.transport.send(node, request)
        return ProducerId(int(r.error_code), int(r.producer_id), int(r.producer_epoch))

    async def add_partitions(
        self, node: int, producer: ProducerId, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn (the client's v0-v3 form); error codes per partition."""
        tid = self.transactional_id
        by_topic = group_by_topic(list(partitions))

        def build(version: int) -> Any:
            T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
            return AddPartitionsToTxnRequest(
                v3_and_below_transactional_id=tid,
                v3_and_below_producer_id=producer.producer_id,
                v3_and_below_producer_epoch=producer.epoch,
                v3_and_below_topics=[T(name=t, partitions=list(ps)) for t, ps in by_topic.items()],
            )

        request = Request(
            "AddPartitionsToTxn", AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, build,
            versions=VERSIONS["AddPartitionsToTxn"],
        )  # fmt: skip
        r = await self.transport.send(node, request)
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.partition_error_code)
            for t in r.results_by_topic_v3_and_below or ()
            for p in t.results_by_partition or ()
        }

    async def add_offsets(self, node: int, producer: ProducerId, group_id: str) -> int:
        """AddOffsetsToTxn: the group's offsets join the transaction; the error code."""
        tid = self.transactional_id

        def build(version: int) -> Any:
            return AddOffsetsToTxnRequest(
                transactional_id=tid,
                producer_id=producer.producer_id,
                producer_epoch=producer.epoch,
                group_id=group_id,
            )

        request = Request(
            "AddOffsetsToTxn", AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, build,
            versions=VERSIONS["AddOffsetsToTxn"],
        )  # fmt: skip
        r = await self.transport.send(node, request)
        return int(r.error_code)

    async def txn_offset_commit(
        self,
        node: int,
        producer: ProducerId,
        offsets: Mapping[TopicPartition, int],
        group: ConsumerGroupMetadata,
        *,
        require_fencing: bool,
    ) -> dict[TopicPartition, int]:
        """TxnOffsetCommit to the group coordinator ``node``: v3+ names the consumer
        (generation, member id, instance id, KIP-447). Below v3 it raises
        :class:`~aiogroup.errors.UnsupportedApiVersionError` if ``require_fencing``."""
        tid = self.transactional_id
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def build(version: int) -> Any:
            if version < TXN_OFFSET_COMMIT_FENCED and require_fencing:
                raise UnsupportedApiVersionError(
                    f"TxnOffsetCommit v{version} cannot name the consumer's generation "
                    "(KIP-447 needs v3, Kafka 2.5+): a zombie's offsets would not be fenced"
                )
            T = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
            P = T.TxnOffsetCommitRequestPartition
            return TxnOffsetCommitRequest(
                transactional_id=tid,
                group_id=group.group_id,
                producer_id=producer.producer_id,
                producer_epoch=producer.epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[
                    T(
                        name=topic,
                        partitions=[
                            P(
                                partition_index=p,
                                committed_offset=o,
                                committed_leader_epoch=-1,
                                committed_metadata="",
                            )
                            for p, o in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
            )

        request = Request(
            "TxnOffsetCommit", TxnOffsetCommitRequest, TxnOffsetCommitResponse, build,
            versions=VERSIONS["TxnOffsetCommit"],
        )  # fmt: skip
        r = await self.transport.send(node, request)
        return {
            TopicPartition(t.name, int(p.partition_index)): int(p.error_code)
            for t in r.topics or ()
            for p in t.partitions or ()
        }

    async def end_txn(self, node: int, producer: ProducerId, *, commit: bool) -> int:
        """EndTxn (commit or abort); the error code."""
        tid = self.transactional_id

        def build(version: int) -> Any:
            return EndTxnRequest(
                transactional_id=tid,
                producer_id=producer.producer_id,
                producer_epoch=producer.epoch,
                committed=commit,
            )

        request = Request(
            "EndTxn", EndTxnRequest, EndTxnResponse, build, versions=VERSIONS["EndTxn"]
        )
        r = await self.transport.send(node, request)
        return int(r.error_code)

    async def produce(
        self, node: int, batches: Mapping[TopicPartition, bytes], timeout_ms: int
    ) -> dict[TopicPartition, int]:
        """One Produce (acks=all) of one batch per partition to leader ``node``; error codes
        per partition (a partition the answer leaves out is -1: unknown outcome)."""
        codes = await produce(
            self.transport, node, batches, acks=-1, timeout_ms=timeout_ms,
            transactional_id=self.transactional_id,
        )  # fmt: skip
        return {tp: -1 if code is None else code for tp, code in codes.items()}
