"""Pure codecs for the classic consumer group protocol (no I/O, no clocks).

- :func:`encode_subscription` / :func:`decode_subscription`: Subscription V0..V3
- :func:`encode_assignment` / :func:`decode_assignment`: Assignment V0..V3
- :func:`encode_sticky_user_data` / :func:`decode_sticky_user_data`: sticky user data (KIP-341)
- :func:`encode_cooperative_user_data` / :func:`generation_from_user_data`: cooperative-sticky
  generation in user data, as Java, librdkafka and franz-go write it

Names are imported lazily (PEP 562), so importing one module of the package loads only that module.
"""

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
    from aiogroup.protocol.consumer import (
        ASSIGNMENT_VERSION,
        SUBSCRIPTION_VERSION,
        decode_assignment,
        decode_subscription,
        encode_assignment,
        encode_subscription,
    )
    from aiogroup.protocol.sticky import (
        StickyUserData,
        decode_sticky_user_data,
        encode_cooperative_user_data,
        encode_sticky_user_data,
        generation_from_user_data,
    )
    from aiogroup.protocol.types import (
        NO_GENERATION,
        Assignment,
        PartitionsByTopic,
        Subscription,
        TopicPartition,
        group_by_topic,
        to_topic_partitions,
    )


__all__ = [
    "ASSIGNMENT_VERSION",
    "NO_GENERATION",
    "SUBSCRIPTION_VERSION",
    "Assignment",
    "PartitionsByTopic",
    "StickyUserData",
    "Subscription",
    "TopicPartition",
    "decode_assignment",
    "decode_sticky_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_cooperative_user_data",
    "encode_sticky_user_data",
    "encode_subscription",
    "generation_from_user_data",
    "group_by_topic",
    "to_topic_partitions",
]

_WHERE = {
    "ASSIGNMENT_VERSION": "aiogroup.protocol.consumer",
    "SUBSCRIPTION_VERSION": "aiogroup.protocol.consumer",
    "decode_assignment": "aiogroup.protocol.consumer",
    "decode_subscription": "aiogroup.protocol.consumer",
    "encode_assignment": "aiogroup.protocol.consumer",
    "encode_subscription": "aiogroup.protocol.consumer",
    "StickyUserData": "aiogroup.protocol.sticky",
    "decode_sticky_user_data": "aiogroup.protocol.sticky",
    "encode_cooperative_user_data": "aiogroup.protocol.sticky",
    "encode_sticky_user_data": "aiogroup.protocol.sticky",
    "generation_from_user_data": "aiogroup.protocol.sticky",
    "NO_GENERATION": "aiogroup.protocol.types",
    "Assignment": "aiogroup.protocol.types",
    "PartitionsByTopic": "aiogroup.protocol.types",
    "Subscription": "aiogroup.protocol.types",
    "TopicPartition": "aiogroup.protocol.types",
    "group_by_topic": "aiogroup.protocol.types",
    "to_topic_partitions": "aiogroup.protocol.types",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
