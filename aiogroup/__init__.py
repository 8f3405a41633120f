"""aiogroup: an asyncio member of Kafka's classic consumer group protocol (KIP-429 cooperative).

Names are imported lazily, so ``import aiogroup`` (which pytest does for aiogroup's plugin in
every project where aiogroup is installed) does not load the client and its dependencies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiogroup import _moved
from aiogroup.lazy import defer_package_init, lazy_attributes

_moved.install()  # modules that moved stay importable under their old names for one release

# aiogroup imports modules of kafka-python and aiokafka, not their clients: their packages'
# __init__ (which loads those clients) runs only when someone asks them for a name it defines.
defer_package_init("kafka")
defer_package_init("aiokafka")

if TYPE_CHECKING:
    from aiogroup.client import GroupMember, RebalanceOutcome
    from aiogroup.client.oauth_token import OAuthToken
    from aiogroup.config import ConsumerConfig, GroupConfig
    from aiogroup.consumer import Consumer, ConsumerGroupMetadata, ConsumerRecord
    from aiogroup.errors import *  # noqa: F403 - every error is importable from here
    from aiogroup.producer import TransactionalProducer
    from aiogroup.protocol.types import Assignment, Subscription, TopicPartition

__version__ = "0.1.0"

# Every exception of aiogroup.errors, by name (kept in step with it by a test).
_ERRORS = (
    "AiogroupError", "AssignorError", "AssignorInputError", "AuthenticationError",
    "BrokerUnreachableError", "CallbackError", "CodecError", "CommitFailedError",
    "ConcurrentTransactionsError", "ConfigurationError", "ConsumerFencedError",
    "ConsumerStoppedError", "CoordinatorLoadInProgressError", "CoordinatorNotAvailableError",
    "CoordinatorUnreachableError", "CorruptRecordError", "FencedInstanceIdError",
    "FencedMemberEpochError", "GroupAuthorizationFailedError", "GroupIdRequiredError",
    "GroupMaxSizeReachedError", "IllegalGenerationError", "IllegalSaslStateError",
    "IllegalStateError", "InconsistentGroupProtocolError", "InvalidFieldError",
    "InvalidProducerEpochError", "InvalidRegularExpressionError", "InvalidTxnStateError",
    "KafkaError", "LocalProtocolError", "MemberClosedError", "MemberIdRequiredError",
    "NoOffsetForPartitionError", "NotCoordinatorError", "NotSubscribedError", "OAuthTokenError",
    "OffsetOutOfRangeError", "PartitionNotAssignedError", "PollIntervalExceededError",
    "ProducerFencedError", "RebalanceCallbackError", "RebalanceInProgressError",
    "RecordDeserializationError", "RecordError", "RemoteProtocolError", "RetriableError",
    "SaslAuthenticationError", "SslAuthenticationError", "StaleMemberEpochError",
    "TopicAuthorizationFailedError", "TransactionAbortableError",
    "TransactionCoordinatorFencedError", "TransactionFailedError",
    "TransactionalIdAuthorizationFailedError", "TruncatedError", "UnknownAssignorError",
    "UnknownMemberIdError", "UnreleasedInstanceIdError", "UnstableOffsetCommitError",
    "UnsupportedApiVersionError", "UnsupportedAssignorError", "UnsupportedCodecError",
    "UnsupportedSaslMechanismError",
)  # fmt: skip

__all__ = [
    "Assignment",
    "Consumer",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "GroupConfig",
    "GroupMember",
    "OAuthToken",
    "RebalanceOutcome",
    "Subscription",
    "TopicPartition",
    "TransactionalProducer",
    "__version__",
    *_ERRORS,
]

_WHERE = {
    "GroupMember": "aiogroup.client",
    "RebalanceOutcome": "aiogroup.client",
    "OAuthToken": "aiogroup.client.oauth_token",
    "ConsumerConfig": "aiogroup.config",
    "GroupConfig": "aiogroup.config",
    "Consumer": "aiogroup.consumer",
    "ConsumerRecord": "aiogroup.consumer",
    "ConsumerGroupMetadata": "aiogroup.consumer",
    "TransactionalProducer": "aiogroup.producer",
    "Assignment": "aiogroup.protocol.types",
    "Subscription": "aiogroup.protocol.types",
    "TopicPartition": "aiogroup.protocol.types",
    **dict.fromkeys(_ERRORS, "aiogroup.errors"),
}


__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
