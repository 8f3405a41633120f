"""The Python clients of ``bench_consumer.py``, one per process, and how to start every client.

Run by ``bench_consumer.py`` as ``python bench/consumer_clients.py --client NAME --bootstrap B
--topic T --group G --expected JSON --warmup N --timed M --idle S --batch B``; prints one JSON line
(the keys of :data:`RESULT_KEYS`). The Java ``KafkaConsumer`` and franz-go clients are the
programs of ``bench/peer_programs`` (their ``--mode throughput`` prints the same line);
:func:`client_command` gives the command line of any client.

Each client, with a fresh group and ``earliest``:

1. reads ``--warmup`` records (its calls asking for no more);
2. reads ``--timed`` more, timed (wall clock and process CPU of every thread): ``rate`` and
   ``cpu_seconds`` cover the ``timed_records`` read then;
3. **stops reading for ``--idle`` seconds** while its prefetching runs on, and takes the RSS
   then (``idle_rss_mb``; the rest of the records are still to be read: a bounded prefetch
   buffer keeps it flat). The pause comes after the timed part so that nothing prefetched
   during it counts in the rate;
4. reads the rest, and checks that it got every record exactly once: per partition, offsets
   0..n-1 in order.

The confluent-kafka clients come twice: with librdkafka's defaults, and tuned for throughput
(:data:`LIBRDKAFKA_TUNED`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from common import peak_rss_mb, rss_mb

#: Every client, in the order of the tables.
CLIENTS = (
    "aiogroup",
    "aiogroup-pure",
    "aiokafka",
    "confluent",
    "confluent-tuned",
    "confluent-aio",
    "confluent-aio-tuned",
    "java",
    "franz-go",
)
#: What every client prints (one JSON line).
RESULT_KEYS = (
    "client", "seconds", "records", "timed_records", "rate", "cpu_seconds", "verdict",
    "peak_rss_mb", "idle_rss_mb",
)  # fmt: skip
#: Where the Java and Go programs are.
PROGRAMS = Path(__file__).parent / "peer_programs"

#: librdkafka's consumer settings for throughput, from its CONFIGURATION.md (defaults in
#: brackets). The defaults keep at most ``queued.max.messages.kbytes`` (64 MiB) or
#: ``queued.min.messages`` (100,000) records a partition prefetched; past either threshold a
#: partition's next fetch is postponed by ``fetch.queue.backoff.ms`` [1000], a whole second,
#: although the queue drains in a fraction of one: the consumer idles (12 partitions of
#: 100 B records fill 64 MiB quickly). CONFIGURATION.md: "This property may need to be
#: decreased if the queue thresholds are set low and the application is experiencing long
#: (~1s) delays between messages." ``fetch.message.max.bytes`` [1 MiB] is the first size asked
#: per partition: larger means fewer round trips per record. ``fetch.min.bytes`` [1] and
#: ``fetch.wait.max.ms`` [500] stay: with a backlog every answer is full anyway, and a larger
#: minimum only delays the last answers. The queue bound stays at 64 MiB (aiogroup's buffer is
#: bounded by ``fetch_max_bytes``, 50 MiB), so memory stays comparable.
LIBRDKAFKA_TUNED: dict[str, Any] = {
    "fetch.queue.backoff.ms": 10,
    "queued.min.messages": 1_000_000,
    "fetch.message.max.bytes": 4 * 1024 * 1024,
}


class Tally:
    """Counts records per partition and checks each partition's offsets are 0..n-1 in order."""

    def __init__(self, expected: dict[int, int]) -> None:
        self.expected = expected
        self.total = sum(expected.values())
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
        return self.count >= self.total

    def verdict(self) -> str:
        if self.bad or self.next != self.expected:
            return f"MISSED or REPEATED records (bad batches {self.bad})"
        return "all records, each once"


#: Reads at most ``limit`` records into the tally (fewer if fewer are there within a second).
Read = Callable[[int], Awaitable[None]]


# --------------------------------------------------------------------------- the clients


@contextlib.asynccontextmanager
async def open_aiogroup(args: argparse.Namespace, tally: Tally) -> AsyncIterator[Read]:
    from aiogroup import Consumer

    consumer = Consumer(
        args.bootstrap,
        args.group,
        topics=[args.topic],
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    async with consumer:
        yield _getmany(consumer, tally)


@contextlib.asynccontextmanager
async def open_aiokafka(args: argparse.Namespace, tally: Tally) -> AsyncIterator[Read]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        args.topic,
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        yield _getmany(consumer, tally)
    finally:
        await consumer.stop()


def _getmany(consumer: Any, tally: Tally) -> Read:
    async def read(limit: int) -> None:
        got = await consumer.getmany(timeout_ms=1000, max_records=limit)
        for tp, records in got.items():
            tally.add(tp.partition, [r.offset for r in records])

    return read


def confluent_config(args: argparse.Namespace, tuned: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if tuned:
        config.update(LIBRDKAFKA_TUNED)
    return config


def _tally_messages(tally: Tally, messages: list[Any]) -> None:
    by_partition: dict[int, list[int]] = {}
    for m in messages:
        if m.error() is None:
            by_partition.setdefault(m.partition(), []).append(m.offset())
    for p, offsets in by_partition.items():
        tally.add(p, offsets)


@contextlib.asynccontextmanager
async def open_confluent(args: argparse.Namespace, tally: Tally) -> AsyncIterator[Read]:
    from confluent_kafka import Consumer

    consumer = Consumer(confluent_config(args, args.client.endswith("-tuned")))
    consumer.subscribe([args.topic])

    async def read(limit: int) -> None:
        _tally_messages(tally, consumer.consume(num_messages=limit, timeout=1.0))

    try:
        yield read
    finally:
        consumer.close()


@contextlib.asynccontextmanager
async def open_confluent_aio(args: argparse.Namespace, tally: Tally) -> AsyncIterator[Read]:
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(confluent_config(args, args.client.endswith("-tuned")))
    await consumer.subscribe([args.topic])

    async def read(limit: int) -> None:
        _tally_messages(tally, await consumer.consume(num_messages=limit, timeout=1.0))

    try:
        yield read
    finally:
        await consumer.close()


RUNNERS: dict[
    str, Callable[[argparse.Namespace, Tally], contextlib.AbstractAsyncContextManager[Read]]
] = {
    "aiogroup": open_aiogroup,
    "aiogroup-pure": open_aiogroup,  # AIOGROUP_PURE_PYTHON=1: aiokafka's reader, not the C one
    "aiokafka": open_aiokafka,
    "confluent": open_confluent,
    "confluent-tuned": open_confluent,
    "confluent-aio": open_confluent_aio,
    "confluent-aio-tuned": open_confluent_aio,
}


async def drive(args: argparse.Namespace, tally: Tally) -> dict[str, float]:
    """The phases: warm-up, timed, pause, the rest (see the module doc)."""
    mark: dict[str, float] = {}
    async with RUNNERS[args.client](args, tally) as read:
        while tally.count < args.warmup:
            await read(max(1, min(args.batch, args.warmup - tally.count)))
        mark["counted"] = tally.count
        mark["cpu"] = time.process_time()
        mark["wall"] = time.perf_counter()
        while tally.count < args.warmup + args.timed and not tally.done:
            await read(args.batch)
        mark["seconds"] = time.perf_counter() - mark["wall"]
        mark["cpu_seconds"] = time.process_time() - mark["cpu"]
        mark["timed"] = tally.count - mark["counted"]
        await asyncio.sleep(args.idle)  # the application stops reading; prefetching goes on
        mark["idle_rss"] = rss_mb()
        while not tally.done:
            await read(args.batch)
    return mark


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One Python client in this process: its result line."""
    expected = {int(p): int(n) for p, n in json.loads(args.expected).items()}
    tally = Tally(expected)
    mark = asyncio.run(drive(args, tally))
    seconds = mark["seconds"]
    return {
        "client": args.client,
        "seconds": seconds,
        "records": tally.count,
        "timed_records": int(mark["timed"]),
        "rate": mark["timed"] / seconds if seconds else 0.0,
        "cpu_seconds": mark["cpu_seconds"],
        "verdict": tally.verdict(),
        "peak_rss_mb": peak_rss_mb(),
        "idle_rss_mb": mark["idle_rss"],
    }


# --------------------------------------------------------------------------- command lines


def client_command(
    client: str,
    *,
    bootstrap: str,
    topic: str,
    group: str,
    expected: dict[int, int],
    warmup: int,
    timed: int,
    idle: float,
    batch: int,
) -> list[str]:
    """The command line of one throughput run of ``client`` (Java and Go built if needed)."""
    common = [
        "--bootstrap", bootstrap, "--topic", topic, "--group", group,
        "--expected", json.dumps(expected), "--warmup", str(warmup), "--timed", str(timed),
        "--idle", str(idle),
    ]  # fmt: skip
    if client in RUNNERS:
        command = [sys.executable, __file__, "--client", client, "--batch", str(batch), *common]
        return ["env", "AIOGROUP_PURE_PYTHON=1", *command] if client == "aiogroup-pure" else command
    return [*peer_program(client), "--mode", "throughput", "--client", client, *common]


def peer_program(client: str) -> list[str]:
    """The Java or franz-go benchmark program (``bench/peer_programs``), built once, cached."""
    from aiogroup.testing.peers import go_command, java_command

    if client == "java":
        # The JVM's own defaults (no -Xmx, full JIT): the reference as deployed.
        return java_command(PROGRAMS / "BenchConsumer.java", "BenchConsumer", jvm_options=())
    if client == "franz-go":
        return go_command([PROGRAMS / "bench_consumer.go"], "aiogroup-bench-franz-go")
    raise ValueError(f"unknown client {client!r}; expected one of {CLIENTS}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", required=True, choices=sorted(RUNNERS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--expected", required=True, help='{"partition": records, ...}')
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--timed", type=int, required=True)
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument("--batch", type=int, default=500)
    print(json.dumps(child(parser.parse_args())), flush=True)


if __name__ == "__main__":
    main()
