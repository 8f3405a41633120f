"""Record batches (magic v2) to produce, built with aiokafka's C-accelerated builder (sans-I/O).

The one encoder of the library: the Kafka telemetry sink
(:mod:`aiogroup.observability.telemetry_kafka`) and the transactional producer
(:mod:`aiogroup.producer`) both build their batches here. It is the counterpart of the
``MemoryRecords`` reader the consumer decodes with (:mod:`aiogroup.consumer.records`).

A batch carries, besides its records, the producer's identity (KIP-98): the producer id and
epoch, the sequence number of its first record (the broker drops a batch whose sequence it has
already written, so a retried Produce is not written twice), and the transactional flag (a
``read_committed`` consumer skips it if its transaction is aborted). The caller gives the
timestamps: this module reads no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aiokafka.record.default_records import DefaultRecordBatchBuilder

__all__ = ["NO_PRODUCER", "BatchRecord", "ProducerIdentity", "encode_batch"]


@dataclass(frozen=True, slots=True)
class BatchRecord:
    """One record to write: key and value (None: null), CreateTime in ms, headers."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: tuple[tuple[str, bytes | None], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class ProducerIdentity:
    """Who writes a batch: producer id, epoch and the first record's sequence (-1: none)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool = False


#: A plain producer's batch: not idempotent, not transactional.
NO_PRODUCER = ProducerIdentity(-1, -1, -1)


def encode_batch(
    records: Sequence[BatchRecord], identity: ProducerIdentity = NO_PRODUCER
) -> bytes:
    """One uncompressed v2 record batch of ``records`` (offset deltas from 0; the broker sets
    the base offset)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=int(identity.transactional),
        producer_id=identity.producer_id,
        producer_epoch=identity.producer_epoch,
        base_sequence=identity.base_sequence,
        batch_size=1 << 30,
    )
    for offset, r in enumerate(records):
        builder.append(
            offset, timestamp=r.timestamp_ms, key=r.key, value=r.value, headers=list(r.headers)
        )
    return bytes(builder.build())
