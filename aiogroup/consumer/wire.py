"""The consumer's data-plane requests: Fetch, ListOffsets and Metadata (leaders).

They go over the group member's connections (:class:`~aiogroup.client.transport.Transport`,
aiokafka's client underneath) to partition leaders, with kafka-python 3's schema-driven
messages; every version is negotiated per connection (Apache Kafka 2.3 stops at Fetch v11,
ListOffsets v5 and Metadata v8, and speaks no flexible versions); Fetch answers are read by
:mod:`aiogroup.consumer.fetch_response`. Answers are turned into the plain values the sans-I/O
core takes (:class:`~aiogroup.consumer.state.FetchedResponse`, ...).
Transport failures raise :class:`~aiogroup.errors.BrokerUnreachableError` (a
retriable error); an answer the decoder cannot read raises
:class:`~aiogroup.errors.RemoteProtocolError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import (
    FetchRequest,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse

from aiogroup.client.transport import Request, Transport
from aiogroup.consumer.fetch_response import FetchResponseDecoder
from aiogroup.consumer.state import FetchedResponse, FetchPlan
from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = ["ClusterView", "DataPlane", "ListedOffset"]

log = logging.getLogger("aiogroup.consumer")


@dataclass(frozen=True, slots=True)
class ClusterView:
    """Metadata for some topics: leaders ``{tp: (node_id, leader_epoch)}``, partition
    counts of the topics that exist, and the ids of the brokers listed (None: not read)."""

    leaders: dict[TopicPartition, tuple[int, int]]
    partitions: dict[str, int]
    brokers: frozenset[int] | None = None


@dataclass(frozen=True, slots=True)
class ListedOffset:
    offset: int
    timestamp: int


class DataPlane:
    """Fetch, ListOffsets and Metadata over a member's transport."""

    def __init__(self, transport: Transport, *, client_rack: str | None = None) -> None:
        self._transport = transport
        self._rack = client_rack or ""

    @property
    def request_timeout(self) -> float:
        return self._transport.request_timeout_ms / 1000

    async def fetch(self, plan: FetchPlan) -> FetchedResponse:
        """Send one Fetch request; the answer in the core's terms."""
        session = plan.session
        to_send = group_by_topic(session.to_send)
        forgotten = group_by_topic(session.forgotten)
        rack = self._rack
        T = FetchRequest.FetchTopic
        P = T.FetchPartition
        F = FetchRequest.ForgottenTopic

        def build(version: int) -> Any:
            topics = []
            for topic, parts in to_send.items():
                entries = []
                for p in parts:
                    f = session.to_send[TopicPartition(topic, p)]
                    entries.append(
                        P(
                            partition=p,
                            current_leader_epoch=f.current_leader_epoch,
                            fetch_offset=f.fetch_offset,
                            last_fetched_epoch=-1,
                            log_start_offset=f.log_start_offset,
                            partition_max_bytes=f.max_bytes,
                        )
                    )
                topics.append(T(topic=topic, partitions=entries))
            return FetchRequest(
                cluster_id=None,
                replica_id=-1,
                max_wait_ms=plan.max_wait_ms,
                min_bytes=plan.min_bytes,
                max_bytes=plan.max_bytes,
                isolation_level=plan.isolation_level,
                session_id=session.session_id,
                session_epoch=session.epoch,
                topics=topics,
                forgotten_topics_data=[
                    F(topic=t, partitions=list(ps)) for t, ps in forgotten.items()
                ],
                rack_id=rack,
            )

        # The answer is read straight into the core's values (consumer/fetch_response.py).
        request = Request("Fetch", FetchRequest, FetchResponseDecoder, build)
        timeout = self.request_timeout + plan.max_wait_ms / 1000
        response: FetchedResponse = await self._transport.send(
            plan.node_id, request, timeout=timeout
        )
        return response

    async def list_offsets(
        self,
        node_id: int,
        timestamps: Mapping[TopicPartition, int],
        *,
        isolation_level: int = 0,
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> tuple[dict[TopicPartition, ListedOffset], dict[TopicPartition, int]]:
        """ListOffsets to one leader: ``({tp: offset and timestamp}, {tp: error code})``."""
        by_topic = group_by_topic(timestamps)
        epochs = leader_epochs or {}
        T = ListOffsetsRequest.ListOffsetsTopic
        P = T.ListOffsetsPartition

        def build(version: int) -> Any:
            return ListOffsetsRequest(
                replica_id=-1,
                isolation_level=isolation_level,
                topics=[
                    T(
                        name=topic,
                        partitions=[
                            P(
                                partition_index=p,
                                current_leader_epoch=epochs.get(TopicPartition(topic, p), -1),
                                timestamp=timestamps[TopicPartition(topic, p)],
                            )
                            for p in parts
                        ],
                    )
                    for topic, parts in by_topic.items()
                ],
                timeout_ms=self._transport.request_timeout_ms,
            )

        request = Request("ListOffsets", ListOffsetsRequest, ListOffsetsResponse, build)
        r = await self._transport.send(node_id, request)
        offsets: dict[TopicPartition, ListedOffset] = {}
        errors: dict[TopicPartition, int] = {}
        for t in r.topics or ():
            for p in t.partitions or ():
                tp = TopicPartition(t.name, p.partition_index)
                if tp not in timestamps:
                    continue
                if p.error_code:
                    errors[tp] = int(p.error_code)
                else:
                    offsets[tp] = ListedOffset(int(p.offset), int(p.timestamp))
        for tp in timestamps:
            if tp not in offsets and tp not in errors:
                errors[tp] = 3  # not answered: UNKNOWN_TOPIC_OR_PARTITION, ask metadata
        return offsets, errors

    async def metadata(self, topics: Iterable[str]) -> ClusterView:
        """Leaders of the partitions of ``topics``; makes sure aiokafka can reach them."""
        wanted = sorted(set(topics))
        if not wanted:
            return ClusterView({}, {})

        def build(version: int) -> Any:
            T = MetadataRequest.MetadataRequestTopic
            return MetadataRequest(
                topics=[T(name=t) for t in wanted],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            )

        request = Request("Metadata", MetadataRequest, MetadataResponse, build)
        transport = self._transport
        r = await transport.send(None, request)
        leaders: dict[TopicPartition, tuple[int, int]] = {}
        counts: dict[str, int] = {}
        for t in r.topics or ():
            if t.error_code or t.name not in wanted:
                continue
            counts[t.name] = len(t.partitions or ())
            for p in t.partitions or ():
                if p.leader_id is not None and p.leader_id >= 0:
                    epoch = getattr(p, "leader_epoch", -1)
                    leaders[TopicPartition(t.name, p.partition_index)] = (
                        int(p.leader_id),
                        int(-1 if epoch is None else epoch),
                    )
        if any(transport.address(node) is None for node, _ in set(leaders.values())):
            # A leader the client has not heard of: refresh its view so it can connect.
            await transport.refresh_metadata()
        brokers = frozenset(int(b.node_id) for b in r.brokers or ())
        return ClusterView(leaders, counts, brokers)
