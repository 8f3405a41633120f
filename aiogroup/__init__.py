"""aiogroup: an asyncio member of Kafka's classic consumer group protocol (KIP-429 cooperative)."""

from aiogroup.client import GroupMember, RebalanceOutcome
from aiogroup.consumer import Consumer, ConsumerRecord
from aiogroup.errors import AiogroupError, CodecError, ConfigurationError, KafkaError
from aiogroup.protocol.types import Assignment, Subscription, TopicPartition

__version__ = "0.1.0"

__all__ = [
    "AiogroupError",
    "Assignment",
    "CodecError",
    "ConfigurationError",
    "Consumer",
    "ConsumerRecord",
    "GroupMember",
    "KafkaError",
    "RebalanceOutcome",
    "Subscription",
    "TopicPartition",
    "__version__",
]
