"""aiogroup.TransactionalProducer on Apache Kafka: commits and aborts as read_committed and
read_uncommitted readers see them, KIP-447 fencing of a zombie consumer's offsets (and the
duplicates a zombie's transaction commits when its offsets name no generation), fencing of a
producer by a newer one, and the refusal on Kafka 2.3 (TxnOffsetCommit before v3)."""

from __future__ import annotations

from typing import Any

import pytest

from aiogroup import ConsumerGroupMetadata, TransactionalProducer
from aiogroup.errors import (
    ConsumerFencedError,
    LocalProtocolError,
    ProducerFencedError,
    TransactionFailedError,
    UnsupportedApiVersionError,
)
from aiogroup.producer import TransactionState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import (  # noqa: F401 - fixtures are found by name
    BrokerHandle,
    apache_kafka,
    apache_kafka4,
)
from aiogroup.testing.launchers.kafka import KafkaBroker
from tests.consumer.helpers import CONVERGE_S, produce, read_until, unique, until, wait_for
from tests.consumer.helpers import consumer as make_consumer

pytestmark = pytest.mark.timeout(240)

TP = TopicPartition


def _handle(kafka: KafkaBroker, kind: str) -> BrokerHandle:
    return BrokerHandle(kind, kafka.bootstrap, apache=kafka)


async def test_committed_records_are_read_once_and_aborted_ones_never(
    apache_kafka4: KafkaBroker,  # noqa: F811
) -> None:
    broker = _handle(apache_kafka4, "kafka4")
    topic = unique("txo")
    apache_kafka4.create_topic(topic, 2)
    async with TransactionalProducer(broker.bootstrap, unique("tx")) as producer:
        producer.begin_transaction()
        for i in range(5):
            await producer.send(topic, b"c1-%d" % i, partition=i % 2)
        await producer.commit_transaction()
        epoch = producer.producer_epoch
        producer.begin_transaction()
        for i in range(4):
            await producer.send(topic, b"ab-%d" % i, key=b"k%d" % i)
        await producer.flush()  # written, then aborted: read_uncommitted sees them
        await producer.abort_transaction()
        assert producer.producer_epoch == epoch + 1  # a new epoch after an abort
        producer.begin_transaction()
        await producer.send(topic, b"c2-0", partition=0)
        await producer.commit_transaction()
        assert producer.state is TransactionState.READY
        with pytest.raises(LocalProtocolError):
            await producer.send(topic, b"outside", partition=0)

    committed = make_consumer(broker, unique("g"), [topic], isolation_level="read_committed")
    everything = make_consumer(broker, unique("g"), [topic])
    async with committed, everything:
        seen = await read_until(committed, lambda rs: len(rs) >= 6)
        raw = await read_until(everything, lambda rs: len(rs) >= 10)
    assert sorted(r.value for r in seen) == sorted(
        [b"c1-%d" % i for i in range(5)] + [b"c2-0"]
    )
    assert sorted(r.value for r in raw if r.value.startswith(b"ab-")) == [
        b"ab-%d" % i for i in range(4)
    ]


async def test_a_zombie_consumers_offsets_are_fenced_and_the_owners_commit(
    apache_kafka4: KafkaBroker,  # noqa: F811
) -> None:
    broker = _handle(apache_kafka4, "kafka4")
    topic, out, group = unique("in"), unique("out"), unique("g")
    apache_kafka4.create_topic(topic, 2)
    apache_kafka4.create_topic(out, 1)
    first = make_consumer(broker, group, [topic], enable_auto_commit=False)
    second = make_consumer(broker, group, [topic], enable_auto_commit=False)
    async with first, TransactionalProducer(broker.bootstrap, unique("tx")) as producer:
        await first.member.wait_for_assignment(CONVERGE_S)
        stale = first.group_metadata()
        assert stale.group_id == group and stale.generation_id > 0 and stale.member_id
        async with second:
            # The group rebalances: the generation `stale` names is gone.
            await wait_for(
                lambda: first.group_metadata().generation_id > stale.generation_id
                and second.assignment(),
                CONVERGE_S,
                "a new generation",
            )
            mine = sorted(first.assignment())
            assert mine
            producer.begin_transaction()
            await producer.send(out, b"zombie output", partition=0)
            with pytest.raises(ConsumerFencedError) as fenced:
                await producer.send_offsets_to_transaction({mine[0]: 1}, stale)
            assert fenced.value.error_code == 22  # ILLEGAL_GENERATION
            assert producer.state is TransactionState.ABORTABLE
            with pytest.raises(TransactionFailedError):
                await producer.commit_transaction()
            await producer.abort_transaction()

            unknown = ConsumerGroupMetadata(group, stale.generation_id, "not-a-member")
            producer.begin_transaction()
            with pytest.raises(ConsumerFencedError):
                await producer.send_offsets_to_transaction({mine[0]: 1}, unknown)
            await producer.abort_transaction()

            producer.begin_transaction()
            await producer.send(out, b"owner output", partition=0)
            await producer.send_offsets_to_transaction({mine[0]: 1}, first.group_metadata())
            await producer.commit_transaction()
            assert await first.committed(mine[0]) == 1

    reader = make_consumer(broker, unique("g"), [out], isolation_level="read_committed")
    async with reader:
        seen = await read_until(reader, lambda rs: len(rs) >= 1)
    assert [r.value for r in seen] == [b"owner output"]


@pytest.mark.parametrize(
    "offsets_as", ["the-member-that-read", "no-generation", "no-generation-allowed"]
)
async def test_a_zombies_transaction_commits_duplicates_only_without_a_generation(
    apache_kafka4: KafkaBroker,  # noqa: F811
    offsets_as: str,
) -> None:
    """The zombie of ``tests/examples/test_exactly_once.py`` in one process, fenced or not.

    A member reads a batch and writes its output in an open transaction, then leaves the group
    (as a paused member is expelled); a new member reads the same batch and commits it. The
    zombie's offsets are then sent named as the member that read the batch (KIP-447: the
    coordinator refuses, the transaction aborts, the output holds each record once) or with no
    generation (``ConsumerGroupMetadata(group)``, the form before KIP-447, which is also what
    ``group_metadata()`` says once the consumer is out of the group): the producer refuses
    that itself, unless ``allow_unfenced_offsets``; then the coordinator accepts them and the
    zombie's transaction commits the batch a second time. So the fencing the process test
    asserts is what stands between it and duplicates."""
    broker = _handle(apache_kafka4, "kafka4")
    src, out, group = unique("zin"), unique("zout"), unique("zg")
    apache_kafka4.create_topic(src, 1)
    apache_kafka4.create_topic(out, 1)
    count = 10
    await produce(broker.bootstrap, src, {0: count}, value=lambda p, i: b"r%d" % i)
    end = {TP(src, 0): count}

    async def transform(producer: TransactionalProducer, records: list[Any]) -> None:
        for r in records:
            await producer.send(out, r.value.upper(), partition=0)
        await producer.flush()  # written to the output, not committed

    zombie = make_consumer(broker, group, [src], enable_auto_commit=False)
    unfenced = offsets_as == "no-generation-allowed"
    async with TransactionalProducer(
        broker.bootstrap, unique("tx"), allow_unfenced_offsets=unfenced
    ) as zombie_producer, \
            TransactionalProducer(broker.bootstrap, unique("tx")) as owner_producer:  # fmt: skip
        async with zombie:
            batch = await read_until(zombie, lambda rs: len(rs) >= count)
            read_by = zombie.group_metadata()
            zombie_producer.begin_transaction()
            await transform(zombie_producer, batch)
        assert zombie.group_metadata() == ConsumerGroupMetadata(group)  # out of the group
        metadata = read_by if offsets_as == "the-member-that-read" else ConsumerGroupMetadata(group)

        owner = make_consumer(broker, group, [src], enable_auto_commit=False)
        async with owner:
            again = await read_until(owner, lambda rs: len(rs) >= count)
            owner_producer.begin_transaction()
            await transform(owner_producer, again)
            await owner_producer.send_offsets_to_transaction(end, owner.group_metadata())
            await owner_producer.commit_transaction()

            if not unfenced:
                with pytest.raises(ConsumerFencedError) as fenced:
                    await zombie_producer.send_offsets_to_transaction(end, metadata)
                if offsets_as == "the-member-that-read":
                    assert fenced.value.error_code == 25  # UNKNOWN_MEMBER_ID, the coordinator's
                else:
                    assert "in no generation" in str(fenced.value)  # the producer's own check
                await zombie_producer.abort_transaction()
            else:
                await zombie_producer.send_offsets_to_transaction(end, metadata)  # accepted
                await zombie_producer.commit_transaction()

    reader = make_consumer(broker, unique("g"), [out], isolation_level="read_committed")
    seen: list[bytes] = []

    async def caught_up() -> bool:
        for records in (await reader.getmany(timeout_ms=200)).values():
            seen.extend(r.value for r in records)
        tp = TP(out, 0)
        if tp not in reader.assignment():
            return False
        return await reader.position(tp) >= (await reader.end_offsets([tp]))[tp]

    async with reader:
        await until(caught_up, CONVERGE_S, "the read_committed reader at the end")
    want = sorted(b"R%d" % i for i in range(count))
    if not unfenced:
        assert sorted(seen) == want  # exactly once
    else:
        assert sorted(seen) == sorted(want * 2)  # every record twice: nothing fenced it


async def test_a_newer_producer_of_the_same_id_fences_the_older(
    apache_kafka4: KafkaBroker,  # noqa: F811
) -> None:
    topic, tid = unique("f"), unique("tx")
    apache_kafka4.create_topic(topic, 1)
    async with TransactionalProducer(apache_kafka4.bootstrap, tid) as old:
        old.begin_transaction()
        await old.send(topic, b"old", partition=0)
        async with TransactionalProducer(apache_kafka4.bootstrap, tid) as new:
            assert new.producer_id == old.producer_id
            assert new.producer_epoch > old.producer_epoch
            with pytest.raises(ProducerFencedError):
                await old.commit_transaction()
            assert old.state is TransactionState.FATAL
            with pytest.raises(ProducerFencedError):
                old.begin_transaction()
            new.begin_transaction()
            await new.send(topic, b"new", partition=0)
            await new.commit_transaction()


async def test_kafka_2_3_refuses_offsets_it_cannot_fence(
    apache_kafka: KafkaBroker,  # noqa: F811
) -> None:
    topic = unique("old")
    apache_kafka.create_topic(topic, 1)
    metadata = ConsumerGroupMetadata(unique("g"), 1, "member-1")
    async with TransactionalProducer(apache_kafka.bootstrap, unique("tx")) as producer:
        assert producer.group_fencing is False
        producer.begin_transaction()
        await producer.send(topic, b"x", partition=0)
        with pytest.raises(UnsupportedApiVersionError, match="KIP-447"):
            await producer.send_offsets_to_transaction({TP(topic, 0): 1}, metadata)
        await producer.commit_transaction()  # nothing was sent for the offsets: still fine
