"""aiogroup: an asyncio member of Kafka's classic consumer group protocol (KIP-429 cooperative).

Names are imported lazily, so ``import aiogroup`` (which pytest does for aiogroup's plugin in
every project where aiogroup is installed) does not load the client and its dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiogroup._lazy import lazy_attributes

if TYPE_CHECKING:
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

_WHERE = {
    "GroupMember": "aiogroup.client",
    "RebalanceOutcome": "aiogroup.client",
    "Consumer": "aiogroup.consumer",
    "ConsumerRecord": "aiogroup.consumer",
    "AiogroupError": "aiogroup.errors",
    "CodecError": "aiogroup.errors",
    "ConfigurationError": "aiogroup.errors",
    "KafkaError": "aiogroup.errors",
    "Assignment": "aiogroup.protocol.types",
    "Subscription": "aiogroup.protocol.types",
    "TopicPartition": "aiogroup.protocol.types",
}


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
