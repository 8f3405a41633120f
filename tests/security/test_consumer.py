"""aiogroup.Consumer reads records over TLS and SASL, on the embedded broker and Kafka 2.3.

Records are produced over the same listener (aiokafka's producer with the same options), then a
consumer in a fresh group reads them from the beginning, commits its positions and leaves; a
second consumer of the group starts from what was committed. Every listener and mechanism of
``WAYS_IN`` runs on both brokers (the ``secured`` fixture).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup import Consumer, TopicPartition
from aiogroup.errors import SaslAuthenticationError
from tests.consumer.helpers import produce
from tests.security.secured import PARTITIONS, TOPIC, SecuredBroker, client_options
from tests.security.test_join import BOUND_S, WAYS_IN

PER_PARTITION = 5


def consumer(broker: SecuredBroker, listener: str, group: str, **options: Any) -> Consumer:
    return Consumer(
        broker.address(listener),
        group,
        topics=[TOPIC],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10_000,
        close_timeout_s=20,
        **options,
    )


async def read_marked(c: Consumer, marker: bytes) -> dict[TopicPartition, list[int]]:
    """Read until every record carrying ``marker`` has arrived: their offsets per partition."""
    seen: dict[TopicPartition, list[int]] = {}
    while sum(len(v) for v in seen.values()) < PARTITIONS * PER_PARTITION:
        batches = await c.getmany(timeout_ms=500)
        for tp, records in batches.items():
            for r in records:
                if r.value is not None and r.value.startswith(marker):
                    seen.setdefault(tp, []).append(r.offset)
    return seen


@pytest.mark.parametrize(("listener", "mechanism"), WAYS_IN)
async def test_a_consumer_reads_commits_and_resumes(
    secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    group = secured.group(f"consume-{listener}-{mechanism}")
    options = client_options(secured, listener, mechanism)
    marker = group.encode() + b"|"
    async with asyncio.timeout(BOUND_S):
        await produce(
            secured.address(listener),
            TOPIC,
            dict.fromkeys(range(PARTITIONS), PER_PARTITION),
            value=lambda p, i: marker + b"%d-%d" % (p, i),
            **options,
        )
        async with consumer(secured, listener, group, **options) as c:
            seen = await read_marked(c, marker)
            assert set(seen) == {TopicPartition(TOPIC, p) for p in range(PARTITIONS)}
            assert all(len(offsets) == PER_PARTITION for offsets in seen.values())
            await c.commit()
            positions = {tp: await c.position(tp) for tp in seen}
            assert await c.committed(next(iter(seen))) == positions[next(iter(seen))]
        # The group's next consumer starts where the first committed, over the same listener.
        async with consumer(secured, listener, group, **options) as again:
            await again.getmany(timeout_ms=0)
            for tp, offset in positions.items():
                assert await again.committed(tp) == offset


async def test_a_wrong_password_fails_the_consumer_clearly(secured: SecuredBroker) -> None:
    options = client_options(secured, "SASL_SSL", "SCRAM-SHA-512", password="not-the-password")
    c = consumer(secured, "SASL_SSL", secured.group("consume-wrong"), **options)
    async with asyncio.timeout(BOUND_S):
        with pytest.raises(SaslAuthenticationError):
            await c.start()
        await c.stop()
