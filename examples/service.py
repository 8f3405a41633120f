"""An asyncio service consuming Kafka with :class:`aiogroup.Consumer`: the shape to copy.

What it shows:

- one task reads batches with ``getmany`` and processes them (here: totals per customer from
  JSON orders); auto-commit commits what was processed (at least once, as Java's consumer:
  records count as processed when the service asks for more);
- per-partition state that follows the assignment: built on ``on_partitions_assigned``,
  flushed on ``on_partitions_revoked`` (the partition moves; its records stopped at once),
  dropped on ``on_partitions_lost`` (another member may own it already);
- bad input: a record whose value is not JSON is sent to a dead-letter list and skipped
  (``seek`` past it); a corrupt batch is logged and read again after the retry backoff;
- a graceful stop on SIGTERM/SIGINT: ``hand_off()``, so the partitions keep being processed
  until the rest of the group is ready to take them, then the member leaves (committed,
  revoked) and ``close()`` disconnects;
- a health line: each partition's lag (``current_lag``: the last Fetch's high watermark minus
  the position), the consumption rate from ``consumer.metrics`` and ``consumer.health()``
  (``examples/health_service.py`` serves the same health as Kubernetes probes).

Usage::

    python examples/service.py --bootstrap 127.0.0.1:9092 --group billing --topic orders
    python examples/service.py --demo          # embedded broker: 2,000 orders, then exit

Exit status: 0 after a clean stop (``--demo``: once every order was processed), 1 on error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from aiogroup import Consumer, ConsumerRecord, TopicPartition
from aiogroup.consumer import ConsumerStoppedError, CorruptRecordError, RecordDeserializationError

__all__ = ["Billing", "main", "run"]

log = logging.getLogger("service")


@dataclass
class Billing:
    """The service's state: order totals per customer, kept per partition."""

    totals: dict[TopicPartition, dict[str, float]] = field(default_factory=dict)
    flushed: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    dead_letters: list[tuple[TopicPartition, int, str]] = field(default_factory=list)
    processed: int = 0

    # -- the rebalance listener (plain methods; async ones work too) -------------------------

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:
            self.totals.setdefault(tp, defaultdict(float))
        log.info("assigned %s", sorted(map(str, partitions)))

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:  # hand the partition over cleanly: flush what it built up
            for customer, amount in self.totals.pop(tp, {}).items():
                self.flushed[customer] += amount
        log.info("revoked %s", sorted(map(str, partitions)))

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        for tp in partitions:  # someone else owns it now: its records will be redone there
            self.totals.pop(tp, None)
        log.warning("lost %s", sorted(map(str, partitions)))

    # -- processing ------------------------------------------------------------------------

    async def process(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        totals = self.totals.setdefault(tp, defaultdict(float))
        for record in records:
            order = record.value
            totals[order["customer"]] += float(order["amount"])
        self.processed += len(records)

    def all_totals(self) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float, self.flushed)
        for totals in self.totals.values():
            for customer, amount in totals.items():
                out[customer] += amount
        return dict(out)


async def run(
    consumer: Consumer,
    billing: Billing,
    stop: asyncio.Event,
    *,
    health_every: float = 10.0,
) -> None:
    """Read and process until ``stop`` is set, hand the partitions over, then close."""
    loop = asyncio.get_running_loop()
    next_health = loop.time() + health_every
    try:
        while True:
            if stop.is_set() and not consumer.handing_off:
                # Keep processing our partitions until the group has made room for them
                # elsewhere; then the member leaves and getmany raises ConsumerStoppedError.
                consumer.hand_off()
            try:
                batch = await consumer.getmany(timeout_ms=500, max_records=500)
            except ConsumerStoppedError:
                break
            except RecordDeserializationError as exc:
                # Not JSON: keep it aside and move on (the position stayed at it).
                billing.dead_letters.append((exc.partition, exc.offset, repr(exc.__cause__)))
                consumer.seek(exc.partition, exc.offset + 1)
                continue
            except CorruptRecordError as exc:
                log.error("corrupt batch, read again after the backoff: %s", exc)
                continue
            for tp, records in batch.items():
                await billing.process(tp, records)
            if loop.time() >= next_health:
                next_health = loop.time() + health_every
                lag = {str(tp): consumer.current_lag(tp) for tp in sorted(consumer.assignment())}
                metrics = consumer.metrics  # Java's names; the same numbers Prometheus scrapes
                log.info(
                    "processed %d (%.0f records/s), lag %s; %s",
                    billing.processed,
                    metrics["records-consumed-rate"],
                    lag,
                    consumer.health().describe(),
                )
    finally:
        await consumer.close()


def consumer_for(bootstrap: str, group: str, topic: str, billing: Billing) -> Consumer:
    return Consumer(
        bootstrap,
        group,
        topics=[topic],
        listener=billing,
        value_deserializer=json.loads,
        key_deserializer=lambda k: k.decode() if k is not None else None,
        auto_offset_reset="earliest",
    )


async def _demo() -> int:
    """Embedded broker, 2,000 orders (and one that is not JSON), one consumer until done."""
    from aiokafka import AIOKafkaProducer

    from aiogroup.testing import EmbeddedBroker

    async with EmbeddedBroker(topics={"orders": 4}) as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        await producer.start()
        try:
            for i in range(2000):
                order = {"customer": f"c{i % 7}", "amount": 1.5}
                await producer.send("orders", json.dumps(order).encode(), key=b"c%d" % (i % 7))
            await producer.send("orders", b"{oops", key=b"c0")
            await producer.flush()
        finally:
            await producer.stop()
        billing = Billing()
        stop = asyncio.Event()
        consumer = consumer_for(broker.bootstrap, "billing", "orders", billing)
        await consumer.start()

        async def watch() -> None:
            while billing.processed < 2000 or not billing.dead_letters:
                await asyncio.sleep(0.05)  # the demo's own finish line, polled
            stop.set()

        watcher = asyncio.create_task(watch())
        await asyncio.wait_for(run(consumer, billing, stop, health_every=1.0), 120)
        watcher.cancel()
        totals = billing.all_totals()
        print(f"processed {billing.processed} orders; totals {dict(sorted(totals.items()))}")
        print(f"dead letters: {billing.dead_letters}")
        return 0 if abs(sum(totals.values()) - 3000.0) < 1e-6 else 1


async def _serve(args: argparse.Namespace) -> int:
    billing = Billing()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer = consumer_for(args.bootstrap, args.group, args.topic, billing)
    await consumer.start()
    await run(consumer, billing, stop)
    log.info("stopped after %d orders", billing.processed)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--demo", action="store_true", help="run against an embedded broker")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    try:
        return asyncio.run(_demo() if args.demo else _serve(args))
    except Exception as exc:
        log.error("the service failed: %r", exc)
        return 1


if __name__ == "__main__":
    sys.exit(main())
