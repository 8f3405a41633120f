"""A transactional producer for consume-transform-produce (KIP-98, KIP-447), on aiogroup's
transport: the records a transaction writes and the consumer offsets it commits become visible
to ``read_committed`` readers together, or not at all.

One transaction, as Java's ``KafkaProducer`` runs it:

1. ``start()``: FindCoordinator (key type 1, the transactional id) and InitProducerId, which
   fences every earlier producer of this transactional id and aborts its open transaction;
2. ``begin_transaction()`` (local);
3. ``send(...)``: records are buffered per partition; a flush (a full buffer, ``flush()`` or the
   commit) adds new partitions to the transaction (AddPartitionsToTxn) and writes one record
   batch per partition (Produce, acks=all) carrying the producer id, epoch and the sequence of
   its first record, flagged transactional. A Produce whose answer is lost is sent again as it
   was: the broker drops a batch whose sequence it has written;
4. ``send_offsets_to_transaction(offsets, consumer.group_metadata())``: AddOffsetsToTxn, then
   TxnOffsetCommit to the group coordinator. From v3 (KIP-447) it names the consumer's
   generation, member id and instance id, so the coordinator refuses it if the consumer is no
   longer the owner (a zombie): :class:`~aiogroup.errors.ConsumerFencedError`;
5. ``commit_transaction()`` (flush, then EndTxn commit) or ``abort_transaction()`` (EndTxn
   abort, then a new epoch so that nothing of the aborted transaction can be written later).

Errors: retriable answers (the coordinator moving or loading, CONCURRENT_TRANSACTIONS while
the previous transaction completes, leaders moving, time-outs) are retried with exponential
backoff within ``max_block_ms``. A transaction that cannot commit any more (a batch refused,
the consumer fenced) is *abortable*: ``send``, ``send_offsets_to_transaction`` and
``commit_transaction`` raise (:class:`~aiogroup.errors.TransactionFailedError`, or the
:class:`~aiogroup.errors.ConsumerFencedError` itself) until ``abort_transaction()``. A fenced
producer (:class:`~aiogroup.errors.ProducerFencedError`: another one took the transactional id)
is done: every call raises it again; ``close()``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any

from aiokafka.partitioner import murmur2

from aiogroup.client.transport import COORDINATOR_ERRORS, Transport
from aiogroup.consumer.group_metadata import ConsumerGroupMetadata
from aiogroup.consumer.wire import DataPlane
from aiogroup.errors import (
    AiogroupError,
    BrokerUnreachableError,
    ConfigurationError,
    ConsumerFencedError,
    KafkaError,
    LocalProtocolError,
    ProducerFencedError,
    TransactionFailedError,
    UnsupportedApiVersionError,
    error_for_code,
)
from aiogroup.producer.wire import (
    GROUP_KEY,
    TRANSACTION_KEY,
    TXN_OFFSET_COMMIT_FENCED,
    TXN_OFFSET_COMMIT_KEY,
    ProducerId,
    TransactionWire,
)
from aiogroup.protocol.record_batch import BatchRecord, ProducerIdentity, encode_batch
from aiogroup.protocol.types import TopicPartition

__all__ = ["TransactionState", "TransactionalProducer"]

log = logging.getLogger("aiogroup.producer")

#: Answers worth another try: the coordinator moving or loading (14, 15, 16), the previous
#: transaction still completing (51), leaders moving or not ready (3, 5, 6, 74, 75), replicas
#: (19, 20), time-outs and storage (7, 13, 56). -1: no answer (unknown outcome).
RETRIABLE = frozenset({-1, 3, 5, 6, 7, 13, 14, 15, 16, 19, 20, 51, 56, 74, 75})
#: Another producer took the transactional id: this one is a zombie (fatal).
FENCED = frozenset({47, 90})
#: The coordinator or the configuration refuses us for good (fatal): a newer transaction
#: coordinator (52), the state machine disagreeing (48), no right to the id (53), unknown
#: producer id mapping (49), a bad timeout (50), cluster authorization (31).
FATAL = frozenset({31, 48, 49, 50, 52, 53})
#: TxnOffsetCommit's answers meaning the consumer is no longer in the group as it said
#: (KIP-447): its partitions moved, so the transaction must abort.
CONSUMER_FENCED = frozenset({22, 25, 82, 110, 113})
#: Produce: a batch the broker had already written (a retry of one whose answer was lost).
DUPLICATE_SEQUENCE = 46


class TransactionState(Enum):
    NEW = "new"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    #: The open transaction cannot commit; abort_transaction() and go on.
    ABORTABLE = "abortable"
    #: Fenced or refused for good: every call raises; close().
    FATAL = "fatal"
    CLOSED = "closed"


class TransactionalProducer:
    """Writes records and consumer offsets in transactions (KIP-98, KIP-447).

    ``transactional_id`` names the producer across restarts: a new producer with the same id
    fences the old one (its open transaction is aborted). For consume-transform-produce with
    KIP-447 (Kafka 2.5+), one id per application process is enough, kept across its restarts.

    ``allow_unfenced_offsets``: on a broker whose TxnOffsetCommit predates KIP-447 (v < 3,
    Kafka before 2.5), ``send_offsets_to_transaction`` raises
    :class:`~aiogroup.errors.UnsupportedApiVersionError` unless this is True; then the
    application must fence zombies itself with one transactional id per input partition (see
    docs/exactly-once.md). It also lets group metadata without a generation (-1) through,
    which Kafka commits unchecked; otherwise that is refused as a fenced consumer. Other
    options: ``client_options`` go to aiokafka's client (TLS,
    SASL) as for the consumer.
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        transactional_id: str,
        *,
        transaction_timeout_ms: int = 60_000,
        request_timeout_ms: int = 30_000,
        max_block_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        batch_records: int = 1_000,
        allow_unfenced_offsets: bool = False,
        client_id: str = "aiogroup-producer",
        **client_options: Any,
    ) -> None:
        if not transactional_id:
            raise ConfigurationError("a transactional producer needs a transactional_id")
        if batch_records < 1:
            raise ConfigurationError("batch_records must be at least 1")
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.max_block_ms = max_block_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.batch_records = batch_records
        self.allow_unfenced_offsets = allow_unfenced_offsets
        self._transport = Transport(
            bootstrap_servers,
            transactional_id,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            **client_options,
        )
        self._wire = TransactionWire(self._transport, transactional_id)
        self._plane = DataPlane(self._transport)
        self._state = TransactionState.NEW
        self._producer = ProducerId(0)
        self._coordinator: int | None = None
        self._group_coordinators: dict[str, int] = {}
        #: Whether the brokers' TxnOffsetCommit names the consumer (KIP-447); None: unknown.
        self.group_fencing: bool | None = None
        self._error: BaseException | None = None
        self._buffer: dict[TopicPartition, list[BatchRecord]] = {}
        self._sequences: dict[TopicPartition, int] = {}
        self._added: set[TopicPartition] = set()
        self._groups: set[str] = set()
        self._partitions: dict[str, int] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._round_robin = itertools.count()
        self._lock = asyncio.Lock()

    # ------------------------------------------------------------------ queries

    @property
    def state(self) -> TransactionState:
        return self._state

    @property
    def producer_id(self) -> int:
        """The producer id InitProducerId gave (-1 before ``start()``)."""
        return self._producer.producer_id

    @property
    def producer_epoch(self) -> int:
        """The producer's epoch (each abort starts a new one)."""
        return self._producer.epoch

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> TransactionalProducer:
        """Connect, find the transaction coordinator and get a producer id and epoch
        (fencing earlier producers of this transactional id)."""
        if self._state is not TransactionState.NEW:
            raise LocalProtocolError(f"start() on a producer that is {self._state.value}")
        await self._transport.start()
        top = await self._wire.max_version(TXN_OFFSET_COMMIT_KEY)
        self.group_fencing = top is not None and top >= TXN_OFFSET_COMMIT_FENCED
        if not self.group_fencing:
            log.warning(
                "transactional id %s: the brokers' TxnOffsetCommit (v%s) predates KIP-447 "
                "(Kafka 2.5): offsets sent in a transaction cannot fence a zombie consumer; %s",
                self.transactional_id,
                top,
                "allowed by allow_unfenced_offsets=True: use one transactional id per input "
                "partition (docs/exactly-once.md)"
                if self.allow_unfenced_offsets
                else "send_offsets_to_transaction() will refuse (allow_unfenced_offsets=False)",
            )
        await self._init_producer_id(bump=False)
        self._state = TransactionState.READY
        return self

    async def close(self, timeout: float = 30.0) -> None:
        """Abort an open transaction (best effort, within ``timeout``) and disconnect."""
        if self._state is TransactionState.CLOSED:
            return
        if self._state in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE):
            try:
                await asyncio.wait_for(self.abort_transaction(), timeout)
            except (AiogroupError, TimeoutError) as exc:
                log.warning("transactional id %s: abort on close failed (%s); the coordinator "
                            "aborts it after transaction_timeout_ms", self.transactional_id, exc)
        self._state = TransactionState.CLOSED
        await self._transport.close()

    async def __aenter__(self) -> TransactionalProducer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ transactions

    def begin_transaction(self) -> None:
        """Open a transaction (nothing is sent until the first flush)."""
        self._check(TransactionState.READY)
        self._state = TransactionState.IN_TRANSACTION

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> TopicPartition:
        """Add a record to the open transaction; returns its partition. Without ``partition``,
        a keyed record goes where Java's default partitioner puts it (murmur2), others round
        robin. It is written at the next flush (at the latest, the commit)."""
        self._check(TransactionState.IN_TRANSACTION)
        if partition is None:
            count = await self._partition_count(topic)
            if key is not None:
                partition = (int(murmur2(key)) & 0x7FFFFFFF) % count
            else:
                partition = next(self._round_robin) % count
        tp = TopicPartition(topic, partition)
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        pending = self._buffer.setdefault(tp, [])
        pending.append(BatchRecord(key, value, ts, tuple(headers)))
        if len(pending) >= self.batch_records:
            await self.flush()
        return tp

    async def flush(self) -> None:
        """Write every buffered record of the open transaction (AddPartitionsToTxn for new
        partitions, then one Produce per leader)."""
        self._check(TransactionState.IN_TRANSACTION)
        async with self._lock:
            try:
                await self._flush()
            except (ProducerFencedError, ConsumerFencedError):
                raise
            except AiogroupError as exc:
                if self._state is TransactionState.IN_TRANSACTION:
                    self._abortable(exc)
                raise TransactionFailedError(
                    f"transaction of {self.transactional_id} cannot commit: {exc}"
                ) from exc

    async def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int], group_metadata: ConsumerGroupMetadata
    ) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) of the consumer
        described by ``group_metadata`` (``consumer.group_metadata()``) in the open
        transaction. Raises :class:`~aiogroup.errors.ConsumerFencedError` if the group
        coordinator says the consumer no longer owns them, or if ``group_metadata`` names no
        generation (-1: Kafka would commit it unchecked) unless ``allow_unfenced_offsets``; the
        transaction is then abortable."""
        self._check(TransactionState.IN_TRANSACTION)
        if not offsets:
            return
        if not self.group_fencing and not self.allow_unfenced_offsets:
            raise UnsupportedApiVersionError(
                "the brokers' TxnOffsetCommit predates KIP-447 (v3, Kafka 2.5): they cannot "
                "fence a zombie consumer's offsets. Use one transactional id per input "
                "partition and allow_unfenced_offsets=True (docs/exactly-once.md)"
            )
        if group_metadata.generation_id < 0 and not self.allow_unfenced_offsets:
            # Kafka takes a TxnOffsetCommit without a generation as a pre-KIP-447 one and checks
            # nothing: a zombie whose consumer was expelled (generation -1, no member id)
            # would commit offsets another member now owns. Its records must be read again.
            exc = ConsumerFencedError(
                f"the consumer of group {group_metadata.group_id!r} is in no generation "
                "(expelled, rejoining or not yet joined): its offsets would be committed "
                "unfenced; abort the transaction and read again from the committed offsets "
                "(take consumer.group_metadata() when the batch is read: docs/exactly-once.md)"
            )
            self._abortable(exc)
            raise exc
        group = group_metadata.group_id
        async with self._lock:
            try:
                if group not in self._groups:
                    await self._coordinator_call(
                        "AddOffsetsToTxn",
                        lambda node: self._wire.add_offsets(node, self._producer, group),
                    )
                    self._groups.add(group)
                await self._txn_offset_commit(offsets, group_metadata)
            except ProducerFencedError:
                raise
            except ConsumerFencedError as exc:
                self._abortable(exc)
                raise
            except AiogroupError as exc:
                if self._state is TransactionState.IN_TRANSACTION:
                    self._abortable(exc)
                raise TransactionFailedError(
                    f"transaction of {self.transactional_id} cannot commit: {exc}"
                ) from exc

    async def commit_transaction(self) -> None:
        """Write what is buffered, then commit (EndTxn). If the commit's answer is lost for
        longer than ``max_block_ms`` the error is raised and the transaction stays open:
        calling ``commit_transaction()`` again retries it."""
        await self.flush()
        async with self._lock:
            if self._added or self._groups:
                await self._end(commit=True)
            self._finish()

    async def abort_transaction(self) -> None:
        """Abort the open transaction (what is buffered is dropped; what was written is
        skipped by ``read_committed`` readers), then start a new producer epoch."""
        if self._state is not TransactionState.ABORTABLE:
            self._check(TransactionState.IN_TRANSACTION)
        async with self._lock:
            self._buffer.clear()
            if self._added or self._groups:
                await self._end(commit=False)
            self._finish()
            # A batch of the aborted transaction whose answer was lost must never land in a
            # later one: a new epoch makes the broker refuse it, and sequences restart.
            await self._init_producer_id(bump=True)

    # ------------------------------------------------------------------ internals

    def _check(self, wanted: TransactionState) -> None:
        if self._state is TransactionState.FATAL:
            assert self._error is not None
            raise self._error
        if self._state is TransactionState.ABORTABLE and wanted is TransactionState.IN_TRANSACTION:
            raise TransactionFailedError(
                f"transaction of {self.transactional_id} cannot commit ({self._error}): "
                "abort_transaction() first"
            ) from self._error
        if self._state is not wanted:
            hint = {
                TransactionState.NEW: "start() it first",
                TransactionState.READY: "begin_transaction() first",
                TransactionState.IN_TRANSACTION: "commit or abort the open transaction first",
                TransactionState.ABORTABLE: "abort_transaction() first",
                TransactionState.CLOSED: "the producer is closed",
            }.get(self._state, "")
            raise LocalProtocolError(f"the producer is {self._state.value}: {hint}")

    def _abortable(self, exc: BaseException) -> None:
        self._error = exc
        self._state = TransactionState.ABORTABLE
        log.warning("transactional id %s: the transaction must abort: %s",
                    self.transactional_id, exc)

    def _fatal(self, exc: AiogroupError) -> AiogroupError:
        self._error = exc
        self._state = TransactionState.FATAL
        log.error("transactional id %s: %s", self.transactional_id, exc)
        return exc

    def _finish(self) -> None:
        self._buffer.clear()
        self._added.clear()
        self._groups.clear()
        self._error = None
        self._state = TransactionState.READY

    def _judge(self, what: str, code: int) -> AiogroupError:
        """The exception for a final, non-retriable answer ``code`` to ``what``."""
        message = f"{what} of transactional id {self.transactional_id}: error code {code}"
        if code in FENCED:
            return self._fatal(
                ProducerFencedError(
                    f"{message}: another producer with this transactional id took over "
                    "(this one is fenced; close it)",
                    error_code=code,
                )
            )
        if code in FATAL:
            return self._fatal(error_for_code(code, message))
        return error_for_code(code, message)

    async def _retrying(
        self, what: str, attempt: Callable[[], Awaitable[int]], forget: Callable[[], None]
    ) -> None:
        """Run ``attempt`` (an error code) until it answers 0 or a final error (raised),
        backing off on retriable ones, within ``max_block_ms``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.max_block_ms / 1000
        backoff = self.retry_backoff_ms / 1000
        while True:
            reason: BaseException | None = None
            try:
                code = await attempt()
            except BrokerUnreachableError as exc:
                code, reason = -1, exc
            except KafkaError as exc:  # FindCoordinator's answer, raised
                if not exc.retriable:
                    raise
                code, reason = exc.error_code, exc
            if code == 0:
                return
            if code not in RETRIABLE:
                raise self._judge(what, code)
            if code in COORDINATOR_ERRORS or code == -1:
                forget()
            if loop.time() + backoff > deadline:
                last = error_for_code(code, f"{what}: still failing after {self.max_block_ms} ms"
                                      f" (last: {reason or f'error code {code}'})")
                raise last from reason
            log.debug("%s of %s: %s; retrying in %.2fs", what, self.transactional_id,
                      reason or f"error code {code}", backoff)
            await asyncio.sleep(backoff)  # retry backoff
            backoff = min(backoff * 2, self.retry_backoff_max_ms / 1000)

    async def _coordinator_call(self, what: str, call: Callable[[int], Awaitable[int]]) -> None:
        """``call(transaction coordinator)`` with retries; the coordinator is looked up as
        needed."""

        async def attempt() -> int:
            if self._coordinator is None:
                self._coordinator = await self._wire.find_coordinator(
                    self.transactional_id, TRANSACTION_KEY
                )
            return await call(self._coordinator)

        def forget() -> None:
            self._coordinator = None

        await self._retrying(what, attempt, forget)

    async def _init_producer_id(self, *, bump: bool) -> None:
        current = self._producer

        async def call(node: int) -> int:
            pid, epoch = (current.producer_id, current.epoch) if bump else (-1, -1)
            answer = await self._wire.init_producer_id(
                node, self.transaction_timeout_ms, pid, epoch
            )
            if answer.error_code == 0:
                self._producer = answer
            return answer.error_code

        await self._coordinator_call("InitProducerId", call)
        self._sequences.clear()
        log.debug("transactional id %s: producer id %d, epoch %d", self.transactional_id,
                  self._producer.producer_id, self._producer.epoch)

    async def _end(self, *, commit: bool) -> None:
        await self._coordinator_call(
            "EndTxn(commit)" if commit else "EndTxn(abort)",
            lambda node: self._wire.end_txn(node, self._producer, commit=commit),
        )

    async def _partition_count(self, topic: str) -> int:
        if topic not in self._partitions:
            await self._refresh_metadata([topic])
            if topic not in self._partitions:
                raise error_for_code(3, f"topic {topic!r} does not exist")
        return self._partitions[topic]

    async def _refresh_metadata(self, topics: Iterable[str]) -> None:
        view = await self._plane.metadata(topics)
        self._partitions.update(view.partitions)
        for tp, (node, _epoch) in view.leaders.items():
            self._leaders[tp] = node

    async def _flush(self) -> None:
        if not self._buffer:
            return
        new = [tp for tp in self._buffer if tp not in self._added]
        if new:
            await self._add_partitions(new)
        pending = dict(self._buffer)
        batches = {
            tp: encode_batch(
                records,
                ProducerIdentity(
                    self._producer.producer_id,
                    self._producer.epoch,
                    self._sequences.get(tp, 0),
                    transactional=True,
                ),
            )
            for tp, records in pending.items()
        }
        await self._produce(batches)
        for tp, records in pending.items():
            self._sequences[tp] = self._sequences.get(tp, 0) + len(records)
            del self._buffer[tp]

    async def _add_partitions(self, partitions: list[TopicPartition]) -> None:
        async def call(node: int) -> int:
            codes = await self._wire.add_partitions(node, self._producer, partitions)
            missing = [tp for tp in partitions if tp not in codes]
            if missing:
                return -1
            # OPERATION_NOT_ATTEMPTED (55): refused because of another partition's error.
            worst = [c for c in codes.values() if c not in (0, 55)]
            if not worst:
                self._added.update(partitions)
                return 0
            final = [c for c in worst if c not in RETRIABLE]
            return final[0] if final else worst[0]

        await self._coordinator_call("AddPartitionsToTxn", call)

    async def _produce(self, batches: dict[TopicPartition, bytes]) -> None:
        """Write ``batches`` (retried with the same sequences until every one is written)."""
        left = dict(batches)

        async def attempt() -> int:
            unknown = [tp for tp in left if tp not in self._leaders]
            if unknown:
                await self._refresh_metadata({tp.topic for tp in unknown})
            by_node: dict[int, dict[TopicPartition, bytes]] = {}
            for tp, data in left.items():
                node = self._leaders.get(tp)
                if node is None:
                    continue  # no leader yet: retried
                by_node.setdefault(node, {})[tp] = data
            answers = await asyncio.gather(
                *(self._produce_to(node, part) for node, part in by_node.items())
            )
            codes: dict[TopicPartition, int] = {}
            for answer in answers:
                codes.update(answer)
            for tp, code in codes.items():
                if code in (0, DUPLICATE_SEQUENCE):
                    del left[tp]
                elif code in RETRIABLE:
                    self._leaders.pop(tp, None)
            if not left:
                return 0
            final = [c for tp, c in codes.items() if tp in left and c not in RETRIABLE]
            return final[0] if final else -1

        await self._retrying("Produce", attempt, lambda: None)

    async def _produce_to(
        self, node: int, batches: dict[TopicPartition, bytes]
    ) -> dict[TopicPartition, int]:
        try:
            return await self._wire.produce(node, batches, self.request_timeout_ms)
        except BrokerUnreachableError:
            return dict.fromkeys(batches, -1)

    async def _txn_offset_commit(
        self, offsets: Mapping[TopicPartition, int], group: ConsumerGroupMetadata
    ) -> None:
        group_id = group.group_id

        async def attempt() -> int:
            node = self._group_coordinators.get(group_id)
            if node is None:
                node = await self._wire.find_coordinator(group_id, GROUP_KEY)
                self._group_coordinators[group_id] = node
            codes = await self._wire.txn_offset_commit(
                node, self._producer, offsets, group,
                require_fencing=not self.allow_unfenced_offsets,
            )  # fmt: skip
            worst = [c for c in codes.values() if c]
            fenced = [c for c in worst if c in CONSUMER_FENCED]
            if fenced:
                raise ConsumerFencedError(
                    f"TxnOffsetCommit for group {group_id} refused (error code {fenced[0]}): "
                    f"member {group.member_id!r} of generation {group.generation_id} no longer "
                    "owns these partitions; abort the transaction",
                    error_code=fenced[0],
                )
            final = [c for c in worst if c not in RETRIABLE]
            if final:
                return final[0]
            return worst[0] if worst else 0

        def forget() -> None:
            self._group_coordinators.pop(group_id, None)

        await self._retrying("TxnOffsetCommit", attempt, forget)
