"""Errors the consumer raises about records and positions (all ``AiogroupError``).

::

    AiogroupError
    ├── KafkaError
    │   ├── CorruptRecordError         (2, CORRUPT_MESSAGE) bad CRC, truncated or undecodable batch
    │   ├── OffsetOutOfRangeError      (1) the position is outside the log, auto_offset_reset="none"
    │   ├── NoOffsetForPartitionError  nothing committed and auto_offset_reset="none"
    │   ├── TopicAuthorizationFailedError (29)
    │   └── CommitFailedError
    │       └── PollIntervalExceededError  the member left: max_poll_interval_ms passed (KIP-62)
    ├── RecordDeserializationError     a key/value deserializer raised (the cause is its exception)
    ├── UnsupportedCodecError          snappy/lz4/zstd batches without cramjam installed
    └── ConsumerStoppedError           the consumer is closed (or was never started)

Record errors name the partition and the offset where reading stopped; the position stays at
that offset (nothing past it is skipped unless you ``seek``), and other partitions keep flowing.
"""

from __future__ import annotations

from aiogroup.errors import AiogroupError, CommitFailedError, KafkaError
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "ConsumerStoppedError",
    "CorruptRecordError",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "PollIntervalExceededError",
    "RecordDeserializationError",
    "RecordError",
    "TopicAuthorizationFailedError",
    "UnsupportedCodecError",
]


class RecordError(AiogroupError):
    """Base of errors about one partition's records at one offset."""

    def __init__(self, message: str, *, partition: TopicPartition, offset: int) -> None:
        super().__init__(f"{message} ({partition} at offset {offset})")
        self.partition = partition
        self.offset = offset


class CorruptRecordError(RecordError, KafkaError):
    """A record batch that cannot be read: CRC mismatch, truncated, or undecodable.

    The position stays at ``offset``; the partition is fetched again after the retry backoff
    (a corruption in transit heals, one in the log raises again). ``seek`` past it to skip.
    """

    # Not registered by code: error_for_code() builds errors from a code alone.
    def __init__(self, message: str, *, partition: TopicPartition, offset: int) -> None:
        RecordError.__init__(self, message, partition=partition, offset=offset)
        self.error_code = 2  # CORRUPT_MESSAGE


class RecordDeserializationError(RecordError):
    """The key or value deserializer raised on the record at ``offset`` (its error is the
    ``__cause__``). The position stays at that record: the next call raises again unless you
    ``seek`` past it."""


class UnsupportedCodecError(RecordError):
    """A batch compressed with a codec this installation cannot decompress (snappy, lz4 and
    zstd need ``cramjam``: ``pip install 'aiogroup[compression]'``)."""


class OffsetOutOfRangeError(RecordError, KafkaError):
    """The fetch position is outside the partition's log and ``auto_offset_reset="none"``."""

    def __init__(self, message: str, *, partition: TopicPartition, offset: int) -> None:
        RecordError.__init__(self, message, partition=partition, offset=offset)
        self.error_code = 1  # OFFSET_OUT_OF_RANGE


class NoOffsetForPartitionError(KafkaError):
    """No committed offset for a partition and ``auto_offset_reset="none"``."""

    def __init__(self, partition: TopicPartition) -> None:
        super().__init__(f"no committed offset for {partition} and auto_offset_reset is 'none'")
        self.partition = partition


class TopicAuthorizationFailedError(KafkaError):
    code = 29


class PollIntervalExceededError(CommitFailedError):
    """The application did not ask for records within ``max_poll_interval_ms``, so the member
    left the group (KIP-62, as Java's consumer does); its partitions were reported lost. The
    next ``getmany``/``getone`` rejoins."""


class ConsumerStoppedError(AiogroupError):
    """The consumer is closed (or was never started)."""
