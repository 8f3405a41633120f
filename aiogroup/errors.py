"""The library's exception hierarchy.

Only these types escape aiogroup's public calls (plus ``asyncio.CancelledError``,
``KeyboardInterrupt`` and ``SystemExit``, which are never swallowed).

::

    AiogroupError
    ├── CodecError                  malformed bytes (names the field and the offset)
    │   ├── TruncatedError          fewer bytes than a field needs
    │   └── InvalidFieldError       a value no writer may produce (bad length, bad UTF-8, ...)
    ├── ConfigurationError          a setup the library refuses at construction
    ├── LocalProtocolError          our own code misused a state machine (a bug, or API misuse)
    │   ├── NotSubscribedError      a call that needs a subscription, on a member with none
    │   └── IllegalStateError       a call the consumer's mode forbids (Java's
    │                               IllegalStateException): subscribe() with assign(), ...
    ├── RemoteProtocolError         a peer or broker broke the protocol
    ├── CallbackError               reserved base for listener failures (the original is the cause)
    ├── AuthenticationError         TLS or SASL refused: fix the configuration, retrying cannot help
    │   ├── SslAuthenticationError  the TLS handshake failed (certificate verify failed, ...)
    │   ├── UnsupportedSaslMechanismError (33)    also KafkaErrors, registered by code
    │   ├── IllegalSaslStateError   (34)
    │   └── SaslAuthenticationError (58)
    └── KafkaError                  a broker error code, registered by code
        ├── RetriableError
        │   ├── RebalanceInProgressError    (27)
        │   ├── CoordinatorNotAvailableError (15)
        │   ├── NotCoordinatorError          (16)
        │   └── CoordinatorLoadInProgressError (14)
        ├── UnknownMemberIdError     (25)
        ├── IllegalGenerationError   (22)
        ├── MemberIdRequiredError    (79)
        ├── FencedInstanceIdError    (82)
        ├── KIP-848 (group_protocol="consumer"): FencedMemberEpochError (110),
        │   UnreleasedInstanceIdError (111), UnsupportedAssignorError (112),
        │   StaleMemberEpochError (113, retriable), GroupMaxSizeReachedError (81),
        │   InvalidRegularExpressionError (128)
        ├── InconsistentGroupProtocolError (23)
        ├── CommitFailedError        a commit the group can no longer accept
        │   ├── PartitionNotAssignedError  offsets of a partition this member does not own
        │   ├── PollIntervalExceededError  the member left: max_poll_interval_ms passed (KIP-62)
        │   └── ConsumerFencedError  TxnOffsetCommit from a member no longer in the group (KIP-447)
        ├── transactions (aiogroup.producer, KIP-98/KIP-447):
        │   ProducerFencedError (90), its subclass InvalidProducerEpochError (47),
        │   TransactionCoordinatorFencedError (52), InvalidTxnStateError (48),
        │   TransactionalIdAuthorizationFailedError (53), TransactionAbortableError (120),
        │   ConcurrentTransactionsError (51, retriable), UnstableOffsetCommitError (88,
        │   retriable: OffsetFetch waits for a pending transaction), TransactionFailedError
        └── ...                      every other code maps to KafkaError with its code

Besides, by where a user meets them (all importable from here and from ``aiogroup``)::

    AiogroupError
    ├── ConfigurationError
    │   ├── GroupIdRequiredError        commit/committed/subscribe on a consumer without group_id
    │   ├── UnknownAssignorError        no assignor under that name
    │   └── UnsupportedApiVersionError  the broker speaks none of the versions we do
    ├── LocalProtocolError
    │   └── AssignorInputError          assign() given input no cluster produces
    ├── CallbackError
    │   ├── RebalanceCallbackError      a listener callback raised (the first one, KIP-429)
    │   └── AssignorError               the assignor raised
    ├── MemberClosedError               the group member is closed (or never started)
    ├── ConsumerStoppedError            the consumer is closed (or never started)
    ├── RecordError                     one partition's records at one offset
    │   ├── CorruptRecordError          (2) bad CRC, truncated or undecodable batch
    │   ├── RecordDeserializationError  a key/value deserializer raised
    │   ├── UnsupportedCodecError       snappy/lz4/zstd without cramjam
    │   └── OffsetOutOfRangeError       (1) outside the log with auto_offset_reset="none"
    └── KafkaError
        ├── NoOffsetForPartitionError   nothing committed and auto_offset_reset="none"
        ├── TopicAuthorizationFailedError (29)
        └── RetriableError
            └── BrokerUnreachableError  no broker answered (bootstrap, a node)
                └── CoordinatorUnreachableError  the group coordinator, once found, did not
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from aiogroup.protocol.types import TopicPartition

__all__ = [
    "AiogroupError",
    "AssignorError",
    "AssignorInputError",
    "AuthenticationError",
    "BrokerUnreachableError",
    "CallbackError",
    "CodecError",
    "CommitFailedError",
    "ConcurrentTransactionsError",
    "ConfigurationError",
    "ConsumerFencedError",
    "ConsumerStoppedError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CoordinatorUnreachableError",
    "CorruptRecordError",
    "FencedInstanceIdError",
    "FencedMemberEpochError",
    "GroupAuthorizationFailedError",
    "GroupIdRequiredError",
    "GroupMaxSizeReachedError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "InconsistentGroupProtocolError",
    "InvalidFieldError",
    "InvalidProducerEpochError",
    "InvalidRegularExpressionError",
    "InvalidTxnStateError",
    "KafkaError",
    "LocalProtocolError",
    "MemberClosedError",
    "MemberIdRequiredError",
    "NoOffsetForPartitionError",
    "NotCoordinatorError",
    "NotSubscribedError",
    "OAuthTokenError",
    "OffsetOutOfRangeError",
    "PartitionNotAssignedError",
    "PollIntervalExceededError",
    "ProducerFencedError",
    "RebalanceCallbackError",
    "RebalanceInProgressError",
    "RecordDeserializationError",
    "RecordError",
    "RemoteProtocolError",
    "RetriableError",
    "SaslAuthenticationError",
    "SslAuthenticationError",
    "StaleMemberEpochError",
    "TopicAuthorizationFailedError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionFailedError",
    "TransactionalIdAuthorizationFailedError",
    "TruncatedError",
    "UnknownAssignorError",
    "UnknownMemberIdError",
    "UnreleasedInstanceIdError",
    "UnstableOffsetCommitError",
    "UnsupportedApiVersionError",
    "UnsupportedAssignorError",
    "UnsupportedCodecError",
    "UnsupportedSaslMechanismError",
    "error_for_code",
]


class AiogroupError(Exception):
    """Base of every exception aiogroup raises on purpose."""


class CodecError(AiogroupError):
    """Bytes that cannot be decoded (or a value that cannot be encoded).

    ``field`` names the field being read and ``offset`` the byte offset where it starts.
    """

    def __init__(self, message: str, *, field: str = "", offset: int = -1) -> None:
        where = ""
        if field:
            where += f" in field {field!r}"
        if offset >= 0:
            where += f" at offset {offset}"
        super().__init__(f"{message}{where}")
        self.field = field
        self.offset = offset


class TruncatedError(CodecError):
    """The buffer ended before the field did."""


class InvalidFieldError(CodecError):
    """A field holds a value that no conforming writer produces."""


class ConfigurationError(AiogroupError):
    """A configuration the library refuses, e.g. assignors with no common rebalance protocol."""


class LocalProtocolError(AiogroupError):
    """Our side broke the rules: a state machine was driven with an event it cannot take."""


class NotSubscribedError(LocalProtocolError):
    """The call needs a subscription (topics or a pattern) and the member has none; the Java
    consumer raises "Consumer is not subscribed to any topics" in the same place."""


class IllegalStateError(LocalProtocolError):
    """The call does not fit what the consumer is doing now, where Java's consumer throws
    ``IllegalStateException``: ``subscribe()`` on a consumer with a manual assignment, or
    ``assign()`` on a subscribed one (they are mutually exclusive until ``unsubscribe()``),
    and ``enforce_rebalance()`` on a consumer that is in no group."""


class GroupIdRequiredError(ConfigurationError):
    """The call needs a consumer group and the consumer was built without one
    (``group_id=None``): commits, ``committed()`` and subscriptions; Java's
    ``InvalidGroupIdException``. Give ``Consumer(bootstrap, "my-group", ...)``."""


class RemoteProtocolError(AiogroupError):
    """The broker or a peer broke the rules (a response that makes no sense, ...)."""


class CallbackError(AiogroupError):
    """Base for failures raised around user callbacks; the user's exception is ``__cause__``."""


class KafkaError(AiogroupError):
    """A Kafka error code returned by a broker.

    Subclasses register themselves by ``code``; :func:`error_for_code` builds the right one and
    falls back to a plain :class:`KafkaError` carrying any unknown code.
    """

    code: ClassVar[int] = -1
    retriable: ClassVar[bool] = False
    _registry: ClassVar[dict[int, type[KafkaError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("code", -1) >= 0:
            KafkaError._registry[cls.code] = cls

    def __init__(self, message: str = "", *, error_code: int | None = None) -> None:
        self.error_code = self.code if error_code is None else error_code
        name = type(self).__name__
        super().__init__(message or f"{name} (error code {self.error_code})")


class RetriableError(KafkaError):
    """An error that may go away if the operation is retried."""

    retriable = True


class CoordinatorLoadInProgressError(RetriableError):
    code = 14


class CoordinatorNotAvailableError(RetriableError):
    code = 15


class NotCoordinatorError(RetriableError):
    code = 16


class IllegalGenerationError(KafkaError):
    code = 22


class InconsistentGroupProtocolError(KafkaError):
    code = 23


class UnknownMemberIdError(KafkaError):
    code = 25


class RebalanceInProgressError(RetriableError):
    """The group is rebalancing; a commit raised with this may be retried after it completes."""

    code = 27


class GroupAuthorizationFailedError(KafkaError):
    code = 30


class MemberIdRequiredError(KafkaError):
    code = 79


class FencedInstanceIdError(KafkaError):
    """Another process joined with our ``group_instance_id`` (KIP-345): fatal for this member."""

    code = 82


class GroupMaxSizeReachedError(KafkaError):
    """The group has as many members as the broker allows (``group.max.size``, or
    ``group.consumer.max.size`` for a KIP-848 group): fatal for the member that tried to join."""

    code = 81


class FencedMemberEpochError(KafkaError):
    """KIP-848: the coordinator no longer knows this member at the epoch it sent (it was
    evicted, or its epoch fell behind): the member reports its partitions lost and rejoins with
    epoch 0, on its own."""

    code = 110


class UnreleasedInstanceIdError(KafkaError):
    """KIP-848: another member still holds this ``group_instance_id`` (it has not left, or its
    session has not expired): fatal for the member that tried to join, as in Java's consumer.
    Close the other instance first, or wait for its session to expire."""

    code = 111


class UnsupportedAssignorError(KafkaError):
    """KIP-848: the broker has no server-side assignor of the name ``group_remote_assignor``
    gives (the message lists those it has): fatal for the member."""

    code = 112


class StaleMemberEpochError(RetriableError):
    """KIP-848: a commit or offset fetch carried an older member epoch than the coordinator's
    (the member's next heartbeat brings the new one): retry."""

    code = 113


class InvalidRegularExpressionError(KafkaError):
    """KIP-848: the broker could not compile the subscription's regular expression (RE2/J
    syntax): fatal for the member; subscribe with a pattern both syntaxes read alike."""

    code = 128


class AuthenticationError(AiogroupError):
    """The connection's security setup failed: TLS or SASL was refused, by the broker or by us.

    Never retriable: the same credentials, certificates and ``security_protocol`` fail the same
    way. The message says what failed and, where the cause is a mismatch (a TLS listener spoken
    to in plaintext, a SASL listener without SASL), which setting to change.
    """


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: the broker's certificate is not trusted ("certificate verify
    failed"), its name does not match, the listener does not speak TLS, or it refused ours."""


class UnsupportedSaslMechanismError(AuthenticationError, KafkaError):
    """The listener does not enable the ``sasl_mechanism`` asked for (the message lists those
    it does)."""

    code = 33


class IllegalSaslStateError(AuthenticationError, KafkaError):
    """A SASL request the broker did not expect, e.g. SASL spoken to a PLAINTEXT or SSL
    listener."""

    code = 34


class SaslAuthenticationError(AuthenticationError, KafkaError):
    """SASL authentication failed (SASL_AUTHENTICATION_FAILED): a wrong user name or password,
    or a user without credentials for the mechanism."""

    code = 58


class OAuthTokenError(AuthenticationError):
    """The OAUTHBEARER token provider (``sasl_oauth_token_provider``) failed, or returned
    something that is no usable token (not a str or :class:`aiogroup.OAuthToken`, empty,
    already expired). A refresh that fails while the current token is still valid is logged
    and retried with backoff; this error reaches you when a connection needs a token and there
    is no valid one."""


class CommitFailedError(KafkaError):
    """A commit that can never succeed for this generation (the member was kicked out)."""


class PartitionNotAssignedError(CommitFailedError):
    """Offsets given for a partition this member does not own (never assigned, or revoked
    since: its revocation callback has returned). Nothing is committed. The broker would take
    it under the member's current generation and could rewind the new owner's progress (a
    cooperative rebalance moves partitions while the member stays in the group); aiokafka
    refuses the same commit (``IllegalStateError``)."""


class PollIntervalExceededError(CommitFailedError):
    """The application did not ask for records within ``max_poll_interval_ms``, so the member
    left the group (KIP-62, as Java's consumer does); its partitions were reported lost. The
    next ``getmany``/``getone`` rejoins."""


class ConsumerFencedError(CommitFailedError):
    """A TxnOffsetCommit refused because the consumer named in it is no longer the owner:
    ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID or FENCED_INSTANCE_ID (KIP-447; ``error_code`` says
    which). The consumer lost its partitions in a rebalance (it was paused, or too slow), so
    another member may be processing them: ``abort_transaction()`` and go on with what the
    consumer is assigned now. The producer stays usable."""


# -- transactions (aiogroup.producer.TransactionalProducer) ------------------------------------


class ProducerFencedError(KafkaError):
    """PRODUCER_FENCED: another producer started with the same ``transactional_id`` (a newer
    epoch), so this one is a zombie. Fatal for this producer: ``close()`` it. Whatever its
    open transaction wrote is aborted by the coordinator."""

    code = 90


class InvalidProducerEpochError(ProducerFencedError):
    """INVALID_PRODUCER_EPOCH: what brokers before KIP-588 answer a fenced producer (and
    Produce still does): handled as :class:`ProducerFencedError`."""

    code = 47


class UnstableOffsetCommitError(RetriableError):
    """UNSTABLE_OFFSET_COMMIT: an OffsetFetch (require_stable, KIP-447) found offsets that a
    transaction still pending commits; retried until the transaction completes."""

    code = 88


class InvalidTxnStateError(KafkaError):
    """INVALID_TXN_STATE: the coordinator's transaction is not in a state that allows the
    request (the producer and the coordinator disagree): fatal for the producer."""

    code = 48


class ConcurrentTransactionsError(RetriableError):
    """CONCURRENT_TRANSACTIONS: the coordinator is still completing the previous transaction
    of this transactional id; retried with backoff by the producer."""

    code = 51


class TransactionCoordinatorFencedError(KafkaError):
    """TRANSACTION_COORDINATOR_FENCED: a newer transaction coordinator took over; fatal."""

    code = 52


class TransactionalIdAuthorizationFailedError(KafkaError):
    """The principal may not use this ``transactional_id``: grant it (fatal)."""

    code = 53


class TransactionAbortableError(KafkaError):
    """TRANSACTION_ABORTABLE (KIP-890): the transaction cannot commit; abort it and go on."""

    code = 120


class TransactionFailedError(AiogroupError):
    """The open transaction cannot be committed any more (a Produce or an offset commit in it
    failed for good, ``__cause__`` says why): ``abort_transaction()``, then go on. Raised by
    ``send``, ``send_offsets_to_transaction`` and ``commit_transaction`` of a transaction in
    that state."""


class BrokerUnreachableError(RetriableError):
    """No broker answered: the bootstrap servers (check ``bootstrap_servers`` and that the
    cluster is up), or a broker a request was sent to (connection lost, timeout). Retriable:
    the client reconnects and retries on its own where it can."""


class CoordinatorUnreachableError(BrokerUnreachableError):
    """The group's coordinator could not be reached (connection lost, timeout); it is looked
    up again."""


class TopicAuthorizationFailedError(KafkaError):
    """The principal may not read (or describe) the topic: grant it, or subscribe to less."""

    code = 29


class NoOffsetForPartitionError(KafkaError):
    """No committed offset for a partition and ``auto_offset_reset="none"``: ``seek`` to a
    position, or choose ``"earliest"``/``"latest"``."""

    def __init__(self, partition: TopicPartition) -> None:
        super().__init__(f"no committed offset for {partition} and auto_offset_reset is 'none'")
        self.partition = partition


class UnsupportedApiVersionError(ConfigurationError):
    """The broker supports none of the versions of an API that we speak (the message names the
    API and both ranges): use a broker version aiogroup supports."""


class UnknownAssignorError(ConfigurationError):
    """No assignor is known (or loadable) under the requested name (``name``); the message
    lists the names that are."""

    def __init__(self, message: str, *, name: str) -> None:
        super().__init__(message)
        self.name = name


class AssignorInputError(LocalProtocolError, ValueError):
    """``assign()`` was given input no cluster can produce (a negative partition count, a
    ``group_instance_ids`` entry that is not a string, ...)."""


class RebalanceCallbackError(CallbackError):
    """A rebalance listener callback raised; the user's exception is ``__cause__``.

    Only the first exception of a rebalance is reported (KIP-429); the assignment change
    stands whatever the callbacks did. ``callback`` names the method that raised and
    ``partitions`` the partitions it was given.
    """

    def __init__(
        self, message: str, *, callback: str = "", partitions: frozenset[object] = frozenset()
    ) -> None:
        super().__init__(message)
        self.callback = callback
        self.partitions = partitions


class AssignorError(CallbackError):
    """The assignor raised in ``assign`` (leader) or ``on_assignment``; the cause is attached."""


class MemberClosedError(AiogroupError):
    """The group member is closed (or was never started): the call cannot be served."""


class ConsumerStoppedError(AiogroupError):
    """The consumer is closed (or was never started: ``await consumer.start()`` or use
    ``async with``)."""


class RecordError(AiogroupError):
    """Base of errors about one partition's records at one offset (``partition``,
    ``offset``). The position stays at that offset; other partitions keep flowing."""

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


def error_for_code(code: int, message: str = "") -> KafkaError:
    """Return the exception for a broker error ``code`` (never raises for unknown codes)."""
    cls = KafkaError._registry.get(code, KafkaError)
    return cls(message, error_code=code)
