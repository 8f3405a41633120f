"""Consumer throughput: aiogroup.Consumer.getmany against aiokafka, confluent-kafka and its
AIOConsumer, same broker, same records, same run.

One Apache Kafka 2.3 broker (full JIT) gets ``--records`` records of ``--size`` bytes spread
over ``--partitions`` partitions (confluent-kafka's producer). Then each client, in its own
process (so peak RSS is its own), with a fresh group and ``auto_offset_reset=earliest``:

1. reads the first ``--warmup`` records, then **stops reading for ``--idle`` seconds** while
   its prefetching runs on, and reports the RSS then (a bounded prefetch buffer keeps it
   flat);
2. reads the rest in batches of ``--batch`` (``getmany(max_records=...)``,
   ``consume(num_messages=...)``), timed from the first call after the pause to the last
   record;
3. checks that it got every record exactly once: per partition, offsets 0..n-1, each once.

Prints records/s per client (best of ``--rounds``), ratios against aiokafka and AIOConsumer,
peak RSS and the RSS after the pause. Usage::

    python bench/bench_consumer.py [--records 1000000] [--partitions 12] [--size 100]
        [--batch 500] [--rounds 1] [--clients aiogroup,aiokafka,confluent,confluent-aio]
        [--bootstrap HOST:PORT --topic T]   # an existing broker and topic instead
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from common import peak_rss_mb, rss_mb, start_broker

CLIENTS = ("aiogroup", "aiokafka", "confluent", "confluent-aio")


class Tally:
    """Counts records per partition and checks each partition's offsets are 0..n-1 in order."""

    def __init__(self, expected: dict[int, int]) -> None:
        self.expected = expected
        self.next: dict[int, int] = {p: 0 for p in expected}
        self.count = 0
        self.bad = 0

    def add(self, partition: int, offsets: list[int]) -> None:
        start = self.next.get(partition, 0)
        n = len(offsets)
        if offsets[0] != start or offsets[-1] != start + n - 1:
            self.bad += 1
        self.next[partition] = start + n
        self.count += n

    @property
    def done(self) -> bool:
        return self.count >= sum(self.expected.values())

    def verdict(self) -> str:
        if self.bad or self.next != self.expected:
            return f"MISSED or REPEATED records (bad batches {self.bad})"
        return "all records, each once"


# --------------------------------------------------------------------------- the clients


async def run_aiogroup(args: argparse.Namespace, tally: Tally, pause: Callable[[], Any]) -> float:
    from aiogroup import Consumer

    consumer = Consumer(
        args.bootstrap,
        f"bench-{uuid.uuid4().hex[:8]}",
        topics=[args.topic],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    async with consumer:
        return await _getmany_loop(consumer, args, tally, pause)


async def run_aiokafka(args: argparse.Namespace, tally: Tally, pause: Callable[[], Any]) -> float:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=f"bench-{uuid.uuid4().hex[:8]}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        return await _getmany_loop(consumer, args, tally, pause)
    finally:
        await consumer.stop()


async def _getmany_loop(
    consumer: Any, args: argparse.Namespace, tally: Tally, pause: Callable[[], Any]
) -> float:
    batch = args.batch
    while tally.count < args.warmup:
        got = await consumer.getmany(timeout_ms=1000, max_records=batch)
        for tp, records in got.items():
            tally.add(tp.partition, [r.offset for r in records])
    await pause()
    started = time.perf_counter()
    while not tally.done:
        got = await consumer.getmany(timeout_ms=1000, max_records=batch)
        for tp, records in got.items():
            tally.add(tp.partition, [r.offset for r in records])
    return time.perf_counter() - started


def _confluent_config(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bootstrap.servers": args.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def _tally_messages(tally: Tally, messages: list[Any]) -> None:
    by_partition: dict[int, list[int]] = {}
    for m in messages:
        if m.error() is None:
            by_partition.setdefault(m.partition(), []).append(m.offset())
    for p, offsets in by_partition.items():
        tally.add(p, offsets)


async def run_confluent(args: argparse.Namespace, tally: Tally, pause: Callable[[], Any]) -> float:
    from confluent_kafka import Consumer

    consumer = Consumer(_confluent_config(args))
    consumer.subscribe([args.topic])
    try:
        while tally.count < args.warmup:
            _tally_messages(tally, consumer.consume(num_messages=args.batch, timeout=1.0))
        await pause()
        started = time.perf_counter()
        while not tally.done:
            _tally_messages(tally, consumer.consume(num_messages=args.batch, timeout=1.0))
        return time.perf_counter() - started
    finally:
        consumer.close()


async def run_confluent_aio(
    args: argparse.Namespace, tally: Tally, pause: Callable[[], Any]
) -> float:
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(_confluent_config(args))
    await consumer.subscribe([args.topic])
    try:
        while tally.count < args.warmup:
            _tally_messages(tally, await consumer.consume(num_messages=args.batch, timeout=1.0))
        await pause()
        started = time.perf_counter()
        while not tally.done:
            _tally_messages(tally, await consumer.consume(num_messages=args.batch, timeout=1.0))
        return time.perf_counter() - started
    finally:
        await consumer.close()


RUNNERS = {
    "aiogroup": run_aiogroup,
    "aiokafka": run_aiokafka,
    "confluent": run_confluent,
    "confluent-aio": run_confluent_aio,
}


def child(args: argparse.Namespace) -> None:
    """One client in this process; prints one JSON line."""
    expected = {int(p): int(n) for p, n in json.loads(args.expected).items()}
    tally = Tally(expected)
    idle: dict[str, float] = {}

    async def pause() -> None:
        await asyncio.sleep(args.idle)  # the application stops reading; prefetching goes on
        idle["rss"] = rss_mb()

    cpu: dict[str, float] = {}

    async def pause_and_mark() -> None:
        await pause()
        cpu["start"] = time.process_time()

    elapsed = asyncio.run(RUNNERS[args.run](args, tally, pause_and_mark))
    cpu_seconds = time.process_time() - cpu.get("start", 0.0)
    timed = sum(expected.values()) - args.warmup
    print(
        json.dumps(
            {
                "client": args.run,
                "seconds": elapsed,
                "records": tally.count,
                "rate": (tally.count - args.warmup) / elapsed if elapsed else 0.0,
                "cpu_seconds": cpu_seconds,
                "timed_records": timed,
                "verdict": tally.verdict(),
                "peak_rss_mb": peak_rss_mb(),
                "idle_rss_mb": idle.get("rss", 0.0),
            }
        )
    )


# --------------------------------------------------------------------------- the parent


def produce(bootstrap: str, topic: str, records: int, partitions: int, size: int) -> dict[int, int]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "queue.buffering.max.messages": 1_000_000,
            "acks": 1,
        }
    )
    value = b"x" * size
    counts = {p: 0 for p in range(partitions)}
    for i in range(records):
        p = i % partitions
        while True:
            try:
                producer.produce(topic, value, partition=p)
                break
            except BufferError:
                producer.poll(0.05)
        counts[p] += 1
    if producer.flush(120) != 0:
        raise RuntimeError("the producer could not deliver every record")
    return counts


def run_client(args: argparse.Namespace, client: str, expected: dict[int, int]) -> dict[str, Any]:
    argv = [
        sys.executable,
        __file__,
        "--run",
        client,
        "--bootstrap",
        args.bootstrap,
        "--topic",
        args.topic,
        "--expected",
        json.dumps(expected),
        "--batch",
        str(args.batch),
        "--warmup",
        str(args.warmup),
        "--idle",
        str(args.idle),
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{client} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--clients", default=",".join(CLIENTS))
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--topic", default="")
    parser.add_argument("--expected", default="", help=argparse.SUPPRESS)
    parser.add_argument("--run", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        child(args)
        return
    clients = [c for c in args.clients.split(",") if c]
    broker = None
    if not args.bootstrap:
        broker = start_broker("kafka23")
        args.bootstrap = broker.bootstrap
    try:
        if not args.topic:
            args.topic = f"bench-{uuid.uuid4().hex[:8]}"
            if broker is not None:
                broker.create_topic(args.topic, args.partitions)
        t0 = time.perf_counter()
        expected = produce(args.bootstrap, args.topic, args.records, args.partitions, args.size)
        print(
            f"produced {args.records:,} records of {args.size} B over {args.partitions} "
            f"partitions in {time.perf_counter() - t0:.1f} s; load {os.getloadavg()[0]:.1f}"
        )
        results: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        for round_ in range(args.rounds):
            order = clients if round_ % 2 == 0 else list(reversed(clients))
            for client in order:
                r = run_client(args, client, expected)
                results[client].append(r)
                print(
                    f"  round {round_ + 1} {client:14s} {r['rate'] / 1e6:6.3f} M records/s "
                    f"({r['timed_records']:,} in {r['seconds']:.2f} s, "
                    f"CPU {r['cpu_seconds']:.2f} s) peak RSS "
                    f"{r['peak_rss_mb']:6.1f} MB, after {args.idle:g} s idle "
                    f"{r['idle_rss_mb']:6.1f} MB; {r['verdict']}; load {os.getloadavg()[0]:.1f}"
                )
        best = {c: max(rs, key=lambda r: r["rate"]) for c, rs in results.items() if rs}
        print(f"\nbest of {args.rounds} (records/s, batch {args.batch}):")
        for client, r in best.items():
            print(
                f"  {client:14s} {r['rate'] / 1e6:6.3f} M/s  peak RSS {r['peak_rss_mb']:6.1f} MB"
                f"  idle RSS {r['idle_rss_mb']:6.1f} MB  {r['verdict']}"
            )
        if "aiogroup" in best:
            ours = best["aiogroup"]["rate"]
            for peer, target in (("aiokafka", 1.0), ("confluent", None), ("confluent-aio", 2.0)):
                if peer in best and best[peer]["rate"]:
                    ratio = ours / best[peer]["rate"]
                    goal = ""
                    if target is not None:
                        verdict = "PASS" if ratio >= target else "MISS"
                        goal = f" (target >= {target:g}x: {verdict})"
                    print(f"  aiogroup / {peer:14s} {ratio:5.2f}x{goal}")
    finally:
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
