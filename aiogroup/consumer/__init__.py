"""Records for asyncio services: :class:`Consumer` on the cooperative group member.

- :class:`Consumer`: ``async with Consumer(...) as c: async for record in c`` (aiokafka's API);
- :class:`ConsumerRecord`: one record (aiokafka's field names);
- :mod:`aiogroup.consumer.state`: the sans-I/O core (positions, fetch planning, buffer);
- :mod:`aiogroup.consumer.records`: fetched bytes to records (aiokafka's C record reader);
- :mod:`aiogroup.consumer.errors`: what reading records can raise.
"""

from aiogroup.consumer.consumer import Consumer, OffsetAndTimestamp
from aiogroup.consumer.errors import (
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
from aiogroup.consumer.group_metadata import ConsumerGroupMetadata
from aiogroup.consumer.records import ConsumerRecord

__all__ = [
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "ConsumerStoppedError",
    "CorruptRecordError",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PollIntervalExceededError",
    "RecordDeserializationError",
    "RecordError",
    "TopicAuthorizationFailedError",
    "UnsupportedCodecError",
]
