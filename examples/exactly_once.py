"""Exactly-once consume-transform-produce with :class:`aiogroup.Consumer` and
:class:`aiogroup.TransactionalProducer` (KIP-98, KIP-447; needs Kafka 2.5+).

Each batch of input records is transformed and written to the output topic in one
transaction, together with the consumer's offsets for it (``send_offsets_to_transaction``
with ``consumer.group_metadata()``). A ``read_committed`` reader of the output sees every
input record exactly once, whatever happens to the processes:

- a process killed mid-transaction: its transaction is aborted when it restarts with the same
  transactional id (or after ``transaction_timeout_ms``); the input is read again from the
  offsets committed with the last committed transaction;
- a process paused past its session (a zombie) while the group moved its partitions: the group
  coordinator refuses its offset commit (``ConsumerFencedError``: its generation or member id
  is stale), so it aborts, rewinds and goes on with what it still owns;
- a rebalance: a partition revoked from a running member is released only after the
  transaction in hand commits (the consumer waits for the next ``getmany``).

Usage::

    python examples/exactly_once.py --bootstrap 127.0.0.1:9092 --group uppercase \\
        --input words --output WORDS --name worker-1

``--name`` makes the transactional id (``<group>-<name>``): give each process its own name
and keep it across restarts. SIGTERM/SIGINT stop it after the transaction in hand.
``--events FILE`` appends one JSON line per assignment change, commit and abort.
``--pause-file FILE`` is for tests only (``tests/examples/test_exactly_once.py``): once FILE
exists, the worker deletes it and, in its next transaction, after writing the records and
before sending the offsets, stops itself with SIGSTOP (a ``paused`` event first), as a GC
pause or a stalled VM would stop it; the test sends SIGCONT when the group has moved on.
Exit status: 0 after a clean stop, 1 on error, 2 when fenced by a newer process of the name.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aiogroup import (
    Consumer,
    ConsumerGroupMetadata,
    ConsumerRecord,
    TopicPartition,
    TransactionalProducer,
)
from aiogroup.errors import ConsumerFencedError, ProducerFencedError, TransactionFailedError

log = logging.getLogger("exactly_once")


def transform(value: bytes | None) -> bytes:
    """The application's work: here, upper case."""
    return (value or b"").upper()


class Events:
    """JSON lines of what the worker did (for tests and for a look at a run)."""

    def __init__(self, path: Path | None, name: str) -> None:
        self.path = path
        self.name = name

    def __call__(self, kind: str, **fields: Any) -> None:
        if self.path is None:
            return
        line = json.dumps({"t": time.time(), "member": self.name, "type": kind, **fields})
        with self.path.open("a") as out:
            out.write(line + "\n")


class Listener:
    def __init__(self, events: Events) -> None:
        self.events = events

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events("assigned", partitions=sorted(tp.partition for tp in assigned))

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events("revoked", partitions=sorted(tp.partition for tp in revoked))

    def on_partitions_lost(self, lost: set[TopicPartition]) -> None:
        self.events("lost", partitions=sorted(tp.partition for tp in lost))


async def pause_if_asked(
    pause_file: Path | None, producer: TransactionalProducer, events: Events,
    offsets: Mapping[TopicPartition, int],
) -> None:
    """Testing only (``--pause-file``): stop this process in the middle of the transaction,
    its records written and its offsets not sent yet: a zombie once its session passes."""
    if pause_file is None or not pause_file.exists():
        return
    pause_file.unlink()
    await producer.flush()  # the records are in the output topic, uncommitted
    events("paused", offsets={tp.partition: o for tp, o in offsets.items()})
    os.kill(os.getpid(), signal.SIGSTOP)  # until SIGCONT


async def process_batch(
    consumer: Consumer,
    producer: TransactionalProducer,
    output: str,
    batches: Mapping[TopicPartition, Sequence[ConsumerRecord]],
    metadata: ConsumerGroupMetadata,
    events: Events,
    pause_file: Path | None = None,
) -> bool:
    """One transaction: the transformed records and the offsets after them, committed as
    the group member ``metadata`` names (the one that got the records). False when it was
    aborted (the consumer is rewound to the committed offsets)."""
    producer.begin_transaction()
    try:
        for records in batches.values():
            for r in records:
                await producer.send(output, transform(r.value), key=r.key)
        offsets = {tp: records[-1].offset + 1 for tp, records in batches.items() if records}
        await pause_if_asked(pause_file, producer, events, offsets)
        await producer.send_offsets_to_transaction(offsets, metadata)
        await producer.commit_transaction()
    except (ConsumerFencedError, TransactionFailedError) as exc:
        log.warning("transaction aborted: %s", exc)
        events("aborted", reason=type(exc).__name__)
        await producer.abort_transaction()
        # What this batch read is not committed: read it again (partitions still ours).
        mine = [tp for tp in batches if tp in consumer.assignment()]
        if mine:
            await consumer.seek_to_committed(*mine)
        return False
    events("committed", records=sum(len(rs) for rs in batches.values()),
           offsets={tp.partition: o for tp, o in offsets.items()})  # fmt: skip
    return True


async def run(args: argparse.Namespace, stop: asyncio.Event) -> int:
    events = Events(args.events, args.name)
    # Under the KIP-848 consumer protocol the session and the heartbeat interval are the
    # group's, set on the broker (the group configs consumer.session.timeout.ms and
    # consumer.heartbeat.interval.ms); the member epoch stands for the generation.
    session: dict[str, Any] = (
        {"session_timeout_ms": args.session_ms, "heartbeat_interval_ms": args.heartbeat_ms}
        if args.group_protocol == "classic" else {}
    )  # fmt: skip
    consumer = Consumer(
        args.bootstrap,
        args.group,
        topics=[args.input],
        listener=Listener(events),
        isolation_level="read_committed",  # the input may be transactional too
        enable_auto_commit=False,  # offsets are committed in the transactions
        auto_offset_reset="earliest",
        group_protocol=args.group_protocol,
        fetch_max_wait_ms=100,
        **session,
    )
    producer = TransactionalProducer(
        args.bootstrap,
        f"{args.group}-{args.name}",
        transaction_timeout_ms=args.transaction_timeout_ms,
        batch_records=args.batch_records,
    )
    log.info("starting the transactional producer %s", producer.transactional_id)
    await producer.start()
    log.info("producer id %d, epoch %d; starting the consumer", producer.producer_id,
             producer.producer_epoch)  # fmt: skip
    await consumer.start()
    events("started", producer_id=producer.producer_id, epoch=producer.producer_epoch)
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=args.max_records)
            # Who got these records: the offsets are committed in this member's name. Taken
            # now, not at the commit: a consumer paused past its session forgets its
            # generation when it hears it was expelled (generation -1, member ""), and the
            # coordinator accepts transactional offsets that name no generation (the form
            # before KIP-447) without fencing them.
            metadata = consumer.group_metadata()
            if batches:
                await process_batch(consumer, producer, args.output, batches, metadata,
                                    events, args.pause_file)  # fmt: skip
    except ProducerFencedError as exc:
        log.error("fenced: %s", exc)
        events("fenced")
        return 2
    finally:
        await consumer.close()
        await producer.close()
    return 0


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--input", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--name", required=True, help="this process's name (its transactional id)")
    p.add_argument("--events", type=Path, default=None)
    p.add_argument("--max-records", type=int, default=200)
    p.add_argument("--batch-records", type=int, default=1_000,
                   help="records per partition buffered before a Produce within a transaction")
    p.add_argument("--group-protocol", choices=("classic", "consumer"), default="classic",
                   help="'consumer': the KIP-848 protocol (Kafka 4.0+), where --session-ms "
                        "and --heartbeat-ms do not apply: they are the group's broker configs")
    p.add_argument("--session-ms", type=int, default=10_000, help="classic protocol only")
    p.add_argument("--heartbeat-ms", type=int, default=1_000, help="classic protocol only")
    p.add_argument("--transaction-timeout-ms", type=int, default=60_000)
    p.add_argument("--pause-file", type=Path, default=None,
                   help="testing: once this file exists, SIGSTOP this process in the middle "
                        "of its next transaction (see the module's docstring)")
    return p.parse_args(argv)


async def amain(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return await run(args, stop)


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse(argv)
    if args.pause_file is not None:  # testing: SIGUSR1 prints every thread's stack to stderr
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    return asyncio.run(amain(args))


if __name__ == "__main__":
    sys.exit(main())
