"""A transactional producer for exactly-once consume-transform-produce (KIP-98, KIP-447), on
the consumer's transport: :class:`TransactionalProducer`. See docs/exactly-once.md."""

from __future__ import annotations

from aiogroup.producer.transactional import TransactionalProducer, TransactionState

__all__ = ["TransactionState", "TransactionalProducer"]
