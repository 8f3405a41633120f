"""The embedded broker's data APIs: Produce, Fetch, ListOffsets and Metadata, on its log.

:class:`DataApis` appends produced batches to the in-memory log
(:mod:`~aiogroup.testing.embedded.log`, CRC checked unless the broker's ``verify_crc`` is off),
reads them back for Fetch, with Kafka's long poll (a Fetch waits, parked, for ``min_bytes`` or
``max_wait_ms``; the next append wakes it), answers ListOffsets by timestamp, and describes
the broker and its topics in Metadata, creating a topic asked for when the broker's
``auto_create_topics`` and the request allow it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from aiogroup.errors import TruncatedError
from aiogroup.testing import wire
from aiogroup.testing.embedded.connection import (
    BrokerNode,
    Connection,
    Handler,
    Values,
    advertised_port,
)
from aiogroup.testing.embedded.log import CorruptBatchError, valid_topic_name
from aiogroup.testing.embedded.messages import ErrorCode

__all__ = ["DataApis"]


def _requested_ids(requested: Any) -> list[uuid.UUID]:
    """The topic ids a Metadata request names (none but zero: it names topics by name). As
    Kafka, a request naming any id is answered for its ids alone."""
    ids = [getattr(t, "topic_id", None) for t in requested or ()]
    return [i for i in ids if isinstance(i, uuid.UUID) and i.int != 0]


class DataApis:
    """The data APIs of ``node``; ``on_change`` is called when records arrive or a Fetch
    parks (the broker wakes the tests waiting on its state)."""

    def __init__(self, node: BrokerNode, on_change: Callable[[], None]) -> None:
        self._node = node
        self._on_change = on_change
        #: Fetch requests waiting for data (long poll).
        self.parked = 0
        self._data_event = asyncio.Event()

    def reset(self) -> None:
        """A fresh wake-up event for a (re)started broker."""
        self._data_event = asyncio.Event()

    def handlers(self) -> dict[int, Handler]:
        """API key -> handler."""
        return {0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata}

    def _topic_metadata(self, name: str, error_code: int = ErrorCode.NONE) -> Values:
        topic = self._node.log.topics.get(name)
        if topic is None:
            return {
                "error_code": error_code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                "name": name,
                "topic_id": None,
                "is_internal": False,
                "partitions": [],
            }
        return {
            "error_code": ErrorCode.NONE,
            "name": name,
            "topic_id": topic.topic_id,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": ErrorCode.NONE,
                    "partition_index": i,
                    "leader_id": self._node.node_id,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": [self._node.node_id],
                    "isr_nodes": [self._node.node_id],
                    "offline_replicas": [],
                }
                for i, p in enumerate(topic.partitions)
            ],
        }

    async def metadata(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        v = req.api_version
        requested = b.topics
        by_id = _requested_ids(requested) if v >= 12 else []
        if by_id:  # v12+ (KIP-516): topics named by id, as a KIP-848 member resolves its own
            return self._metadata_answer(conn, [self._topic_by_id(i) for i in by_id])
        if requested is None or (v == 0 and not requested):
            names = sorted(self._node.log.topics)
        else:
            names = [t.name for t in requested]
        allow_auto = bool(b.allow_auto_topic_creation) if v >= 4 else True
        topics = []
        for name in names:
            if name not in self._node.log.topics:
                if not valid_topic_name(name):
                    topics.append(
                        self._topic_metadata(name or "", ErrorCode.INVALID_TOPIC_EXCEPTION)
                    )
                    continue
                if self._node.auto_create_topics and allow_auto:
                    self._node.log.create_topic(name, self._node.num_partitions)
            topics.append(self._topic_metadata(name))
        return self._metadata_answer(conn, topics)

    def _topic_by_id(self, topic_id: uuid.UUID) -> Values:
        """A topic asked for by id: its metadata, or UNKNOWN_TOPIC_ID with no name (Kafka's
        ``KafkaApis.handleTopicMetadataRequest``; an id never creates a topic)."""
        for name, topic in self._node.log.topics.items():
            if topic.topic_id == topic_id:
                return self._topic_metadata(name)
        return {
            "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
            "name": None,
            "topic_id": topic_id,
            "is_internal": False,
            "partitions": [],
        }

    def _metadata_answer(self, conn: Connection, topics: list[Values]) -> Values:
        return {
            "brokers": [
                {
                    "node_id": self._node.node_id,
                    "host": self._node.host,
                    "port": advertised_port(self._node, conn),
                    "rack": None,
                }
            ],
            "cluster_id": self._node.cluster_id,
            "controller_id": self._node.node_id,
            "topics": topics,
            "error_code": ErrorCode.NONE,
        }

    async def produce(self, conn: Connection, req: wire.Request) -> Values | None:
        b = req.body
        appended = False
        responses = []
        for t in b.topic_data or []:
            parts = []
            for p in t.partition_data or []:
                log = self._node.log.partition(t.name, p.index)
                base, error_code, message = -1, ErrorCode.NONE, None
                if log is None:
                    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif p.records is None:
                    error_code, message = ErrorCode.CORRUPT_MESSAGE, "null records"
                else:
                    try:
                        base = log.append(bytes(p.records), verify_crc=self._node.verify_crc)
                        appended = True
                    except (CorruptBatchError, TruncatedError) as exc:
                        error_code, message = ErrorCode.CORRUPT_MESSAGE, str(exc)[:200]
                parts.append(
                    {
                        "index": p.index,
                        "error_code": error_code,
                        "base_offset": base,
                        "log_append_time_ms": -1,
                        "log_start_offset": log.log_start_offset if log is not None else -1,
                        "record_errors": [],
                        "error_message": message,
                    }
                )
            responses.append({"name": t.name, "partition_responses": parts})
        if appended:
            event, self._data_event = self._data_event, asyncio.Event()
            event.set()
            self._on_change()
        if b.acks == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _fetch_once(self, b: Any) -> tuple[list[Values], int, bool]:
        remaining = b.max_bytes if b.max_bytes and b.max_bytes > 0 else 2**31 - 1
        total = 0
        error = False
        topics = []
        for t in b.topics or []:
            parts = []
            for p in t.partitions or []:
                log = self._node.log.partition(t.topic, p.partition)
                entry: Values = {
                    "partition_index": p.partition,
                    "error_code": ErrorCode.NONE,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": b"",
                }
                if log is None:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    error = True
                else:
                    entry.update(
                        high_watermark=log.high_watermark,
                        last_stable_offset=log.high_watermark,
                        log_start_offset=log.log_start_offset,
                    )
                    if not log.log_start_offset <= p.fetch_offset <= log.high_watermark:
                        entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                        error = True
                    elif remaining > 0:
                        limit = min(p.partition_max_bytes, remaining)
                        data = log.read(p.fetch_offset, max(limit, 1))
                        entry["records"] = data
                        total += len(data)
                        remaining -= len(data)
                parts.append(entry)
            topics.append({"topic": t.topic, "partitions": parts})
        return topics, total, error

    async def fetch(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, b.max_wait_ms) / 1000
        while True:
            event = self._data_event
            topics, total, error = self._fetch_once(b)
            wait = deadline - loop.time()
            if error or total >= max(1, b.min_bytes) or wait <= 0:
                break
            # Long poll (Kafka's fetch purgatory): woken by the next append, or the deadline.
            self.parked += 1
            self._on_change()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(event.wait(), wait)
            finally:
                self.parked -= 1
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.NONE,
            "session_id": 0,
            "responses": topics,
        }

    async def list_offsets(self, conn: Connection, req: wire.Request) -> Values:
        topics = []
        for t in req.body.topics or []:
            parts = []
            for p in t.partitions or []:
                log = self._node.log.partition(t.name, p.partition_index)
                if log is None:
                    parts.append(
                        {
                            "partition_index": p.partition_index,
                            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                        }
                    )
                    continue
                offset, timestamp = log.offset_for_timestamp(p.timestamp)
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.NONE,
                        "timestamp": timestamp,
                        "offset": offset,
                        "leader_epoch": log.leader_epoch,
                    }
                )
            topics.append({"name": t.name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}
