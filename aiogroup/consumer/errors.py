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

They live in :mod:`aiogroup.errors` (this module names them for the consumer's readers).
Record errors name the partition and the offset where reading stopped; the position stays at
that offset (nothing past it is skipped unless you ``seek``), and other partitions keep flowing.
"""

from __future__ import annotations

from aiogroup.errors import (
    ConsumerStoppedError,
    CorruptRecordError,
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    PollIntervalExceededError,
    RecordDeserializationError,
    RecordError,
    TopicAuthorizationFailedError,
    UnsupportedCodecError,
)

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
