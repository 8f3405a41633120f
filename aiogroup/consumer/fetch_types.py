"""What the consumer's core and its driver pass each other about fetching (sans-I/O): the
settings (:class:`FetchConfig`), the request to send (:class:`FetchPlan`) and the answer
decoded (:class:`FetchedResponse`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aiogroup.config import DEFAULTS, ConsumerConfig, IsolationLevel, ResetPolicy, check_values
from aiogroup.consumer.fetch_session import SessionRequest
from aiogroup.errors import ConfigurationError
from aiogroup.protocol.types import TopicPartition

__all__ = ["FetchConfig", "FetchPlan", "FetchedPartition", "FetchedResponse"]


@dataclass(frozen=True, slots=True)
class FetchConfig:
    """Fetch settings, with Java's names and defaults (milliseconds and bytes)."""

    fetch_max_bytes: int = DEFAULTS.fetch_max_bytes
    max_partition_fetch_bytes: int = DEFAULTS.max_partition_fetch_bytes
    fetch_min_bytes: int = DEFAULTS.fetch_min_bytes
    fetch_max_wait_ms: int = DEFAULTS.fetch_max_wait_ms
    isolation_level: IsolationLevel = DEFAULTS.isolation_level
    auto_offset_reset: ResetPolicy = DEFAULTS.auto_offset_reset
    check_crcs: bool = DEFAULTS.check_crcs
    retry_backoff_ms: int = DEFAULTS.retry_backoff_ms
    #: How long a preferred read replica (KIP-392) is used before asking the leader again.
    metadata_max_age_ms: int = DEFAULTS.metadata_max_age_ms
    #: Responses a partition may have buffered and still be fetched again. A second one is
    #: fetched only while the first is small (see :meth:`ConsumerState.has_room`): a partition
    #: behind holds one full response (a second full one held as much again in memory and
    #: read no faster, issue 29), a partition that keeps up stays in the long poll.
    max_buffered_responses: int = 2

    def __post_init__(self) -> None:
        # Checked by the one table that defines these options (aiogroup.config).
        check_values(
            {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        )
        if self.max_buffered_responses < 1:
            raise ConfigurationError("max_buffered_responses must be >= 1")

    @classmethod
    def of(cls, config: ConsumerConfig) -> FetchConfig:
        """The fetch settings of a consumer's (already checked) options."""
        return cls(
            fetch_max_bytes=config.fetch_max_bytes,
            max_partition_fetch_bytes=config.max_partition_fetch_bytes,
            fetch_min_bytes=config.fetch_min_bytes,
            fetch_max_wait_ms=config.fetch_max_wait_ms,
            isolation_level=config.isolation_level,
            auto_offset_reset=config.auto_offset_reset,
            check_crcs=config.check_crcs,
            retry_backoff_ms=config.retry_backoff_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
        )

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == "read_committed"


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
