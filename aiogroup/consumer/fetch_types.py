"""What the consumer's core and its driver pass each other about one Fetch (sans-I/O): the
request to send (:class:`FetchPlan`) and the answer decoded (:class:`FetchedResponse`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiogroup.consumer.fetch_session import SessionRequest
from aiogroup.protocol.types import TopicPartition

__all__ = ["FetchPlan", "FetchedPartition", "FetchedResponse"]


@dataclass(frozen=True, slots=True)
class FetchPlan:
    """One Fetch request to send to ``node_id`` (the driver encodes it)."""

    node_id: int
    session: SessionRequest
    versions: Mapping[TopicPartition, int]
    max_bytes: int
    min_bytes: int
    max_wait_ms: int
    isolation_level: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a Fetch response, as the driver decoded it."""

    tp: TopicPartition
    error_code: int
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    records: bytes | None = None
    #: KIP-392 (v11+): the replica to fetch this partition from next (-1: no advice).
    preferred_read_replica: int = -1


@dataclass(frozen=True, slots=True)
class FetchedResponse:
    """A Fetch response: top-level ``error_code`` and ``session_id`` (0 before v7)."""

    error_code: int
    session_id: int
    partitions: Sequence[FetchedPartition]
