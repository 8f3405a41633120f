"""Produce-to-application latency: aiogroup against aiokafka, confluent-kafka's Consumer and
AIOConsumer (defaults, and tuned for low latency as librdkafka advises), at fixed rates.

One local Apache Kafka (4.1.1 by default, ``--broker kafka23`` for 2.3.0) and, per rate and
client, a fresh topic of ``--partitions`` partitions and a fresh group. Each run:

1. the client starts in its own process, joins the group and waits for records (the
   application waits in ``getmany(timeout_ms=1000)``, in ``async for``, or in ``poll(1.0)``);
2. once the group is stable with every partition assigned, a producer process (confluent-kafka's
   ``Producer``, ``linger.ms=0``, ``acks=1``, Nagle off: librdkafka sends each record at once
   from its own thread, the least a producer adds here; aiokafka's producer spends tens of
   microseconds of Python per record and cannot pace 100k/s) writes records round-robin over
   the partitions at ``--rate`` records/s, paced by the wall clock against a schedule (record
   ``i`` is due at ``start + i / rate``; a late producer catches up, it never drifts): first
   ``--warmup`` seconds of warm-up records, then ``--seconds`` of measured ones;
3. each record's value starts with the producer's ``time.time_ns()`` at ``produce()`` as a
   big-endian int64 (0 for warm-up records), padded to ``--size`` bytes; the client records
   ``time.time_ns() - ts`` the moment the record is in the application's hands, and prints
   ``{"client": ..., "latencies_us": [...]}`` (one entry per record read, warm-up ones too);
4. the parent checks the client read every record produced (none lost) and reports p50, p99,
   p99.9 and max in ms with the load average, then p99(aiogroup) / p99(peer) (goal <= 1).

The Java KafkaConsumer 4.1.1 and franz-go (``java``, ``franz-go``, and ``-tuned`` with a fetch
wait of 10 ms) run the latency mode of ``bench/peer_programs`` (``PROGRAM --mode latency
--bootstrap B --topic T --group G --records N [--tuned]``, the same JSON line, stopped by a
line on stdin); see :func:`external_program`. Usage::

    python bench/bench_latency.py [--broker kafka4|kafka23] [--rates 1000,10000,100000]
        [--seconds 10] [--warmup 2] [--broker-warmup 20] [--partitions 12] [--size 100]
        [--clients aiogroup,aiogroup-iter,aiokafka,confluent,confluent-tuned,...]
        [--rounds 1] [--grace 30]   # rounds rotate the clients' order; grace: how long a
                                    # client may take after the last record before it is stopped
        [--bootstrap HOST:PORT]   # an existing cluster instead of a local broker
        [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

from common import BROKERS, start_broker

#: Every client this script can run, by name; ``-tuned`` selects the low-latency settings.
PYTHON_CLIENTS = (
    "aiogroup",
    "aiogroup-iter",
    "aiokafka",
    "confluent",
    "confluent-tuned",
    "confluent-aio",
    "confluent-aio-tuned",
)
EXTERNAL_CLIENTS = ("java", "java-tuned", "franz-go", "franz-go-tuned")
DEFAULT_CLIENTS = PYTHON_CLIENTS + EXTERNAL_CLIENTS

#: librdkafka's advice for low latency on the consumer side (the wiki's "How to decrease
#: message latency": fetch.wait.max.ms down to the latency allowed, e.g. 10 ms, and
#: fetch.error.backoff.ms down with it, or an empty answer waits that long before the next
#: Fetch; CONFIGURATION.md: fetch.queue.backoff.ms, 1000 ms by default, is how long fetching
#: waits once the local queue holds queued.min.messages; fetch.min.bytes 1 answers on the first
#: byte). Nagle off so a small Fetch request is not held back.
CONFLUENT_TUNED = {
    "fetch.wait.max.ms": 10,
    "fetch.error.backoff.ms": 10,
    "fetch.queue.backoff.ms": 10,
    "fetch.min.bytes": 1,
    "socket.nagle.disable": True,
}

#: Warm-up records carry timestamp 0: a "latency" above this (about 3 years) is one of them.
WARMUP_ABOVE_US = 10**14


# --------------------------------------------------------------------------- the clients


class Sink:
    """The latencies of the records read so far, and when the last one arrived. A line (or
    the end) on stdin means "stop now": the parent gave up waiting for the rest."""

    def __init__(self, records: int, idle_stop: float) -> None:
        self.records = records
        self.idle_stop = idle_stop
        self.latencies: list[int] = []
        self.last = time.monotonic()
        self.stopped = threading.Event()
        threading.Thread(target=self._watch_stdin, daemon=True).start()

    def _watch_stdin(self) -> None:
        sys.stdin.readline()
        self.stopped.set()

    def add(self, now_ns: int, value: bytes) -> None:
        self.latencies.append((now_ns - int.from_bytes(value[:8], "big")) // 1000)

    @property
    def done(self) -> bool:
        return len(self.latencies) >= self.records or self.stopped.is_set()

    def idle(self) -> bool:
        """Nothing for ``idle_stop`` seconds after something (or for 120 s from the start), or
        told to stop."""
        if self.stopped.is_set():
            return True
        limit = self.idle_stop if self.latencies else max(self.idle_stop, 120.0)
        return time.monotonic() - self.last > limit

    def touch(self) -> None:
        self.last = time.monotonic()


async def getmany_loop(consumer: Any, sink: Sink) -> None:
    """The application waiting in ``getmany`` (aiogroup's and aiokafka's, the same call)."""
    while not sink.done:
        batch = await consumer.getmany(timeout_ms=1000)
        now = time.time_ns()
        if not batch:
            if sink.idle():
                return
            continue
        for records in batch.values():
            for record in records:
                sink.add(now, record.value)
        sink.touch()


async def run_aiogroup(args: argparse.Namespace, sink: Sink) -> None:
    from aiogroup import Consumer

    consumer = Consumer(
        args.bootstrap, args.group, topics=[args.topic], auto_offset_reset="earliest",
        enable_auto_commit=False,
    )  # fmt: skip
    async with consumer:
        await getmany_loop(consumer, sink)


async def run_aiogroup_iter(args: argparse.Namespace, sink: Sink) -> None:
    from aiogroup import Consumer

    consumer = Consumer(
        args.bootstrap, args.group, topics=[args.topic], auto_offset_reset="earliest",
        enable_auto_commit=False,
    )  # fmt: skip

    async def watchdog() -> None:
        # `async for` cannot time out by itself: closing the consumer ends the loop.
        while not sink.idle():
            await asyncio.sleep(1.0)
        await consumer.close()

    async with consumer:
        guard = asyncio.ensure_future(watchdog())
        try:
            async for record in consumer:
                sink.add(time.time_ns(), record.value)
                sink.touch()
                if sink.done:
                    break
        finally:
            guard.cancel()


async def run_aiokafka(args: argparse.Namespace, sink: Sink) -> None:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        args.topic, bootstrap_servers=args.bootstrap, group_id=args.group,
        auto_offset_reset="earliest", enable_auto_commit=False,
    )  # fmt: skip
    await consumer.start()
    try:
        await getmany_loop(consumer, sink)
    finally:
        await consumer.stop()


def confluent_config(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if args.tuned:
        config.update(CONFLUENT_TUNED)
    return config


async def run_confluent(args: argparse.Namespace, sink: Sink) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(confluent_config(args))
    consumer.subscribe([args.topic])
    try:
        while not sink.done:
            message = consumer.poll(1.0)
            now = time.time_ns()
            if message is None:
                if sink.idle():
                    return
                continue
            value = message.value()
            if message.error() is None and value is not None:
                sink.add(now, value)
                sink.touch()
    finally:
        consumer.close()


async def run_confluent_aio(args: argparse.Namespace, sink: Sink) -> None:
    from confluent_kafka.aio import AIOConsumer

    consumer = AIOConsumer(confluent_config(args))
    await consumer.subscribe([args.topic])
    try:
        while not sink.done:
            message = await consumer.poll(1.0)
            now = time.time_ns()
            if message is None:
                if sink.idle():
                    return
                continue
            value = message.value()
            if message.error() is None and value is not None:
                sink.add(now, value)
                sink.touch()
    finally:
        await consumer.close()


RUNNERS: dict[str, Callable[[argparse.Namespace, Sink], Coroutine[Any, Any, None]]] = {
    "aiogroup": run_aiogroup,
    "aiogroup-iter": run_aiogroup_iter,
    "aiokafka": run_aiokafka,
    "confluent": run_confluent,
    "confluent-aio": run_confluent_aio,
}


def child(args: argparse.Namespace) -> None:
    """One client in this process; prints one JSON line."""
    sink = Sink(args.records, args.idle_stop)
    asyncio.run(RUNNERS[args.run](args, sink))
    name = args.run + ("-tuned" if args.tuned else "")
    print(json.dumps({"client": name, "latencies_us": sink.latencies}))


# --------------------------------------------------------------------------- the producer


def producer_main(args: argparse.Namespace) -> None:
    """Write ``--warmup`` then ``--seconds`` of records at ``--rate``; print what it achieved."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "linger.ms": args.linger_ms,
            "acks": 1,
            "socket.nagle.disable": True,
            "queue.buffering.max.messages": 2_000_000,
        }
    )
    rate, partitions, topic = args.rate, args.partitions, args.topic
    warm = round(rate * args.warmup)
    total = warm + round(rate * args.seconds)
    pad = b"\0" * max(0, args.size - 8)
    produce, clock, now_ns = producer.produce, time.perf_counter, time.time_ns
    start = clock()
    measured_at = start
    worst_late = 0.0
    i = 0
    while i < total:
        due = min(total, int((clock() - start) * rate) + 1)
        if due - i > 1:
            worst_late = max(worst_late, (due - 1 - i) / rate)
        while i < due:
            if i == warm:
                measured_at = clock()
            value = (0 if i < warm else now_ns()).to_bytes(8, "big") + pad
            try:
                produce(topic, value, partition=i % partitions)
            except BufferError:
                producer.poll(0.001)
                continue
            i += 1
        producer.poll(0)
        if i < total:
            delay = start + i / rate - clock()
            if delay > 0:
                time.sleep(delay)
    ended = clock()
    left = producer.flush(60)
    measured = total - warm
    print(
        json.dumps(
            {
                "produced": total - left,
                "measured": measured,
                "rate": measured / (ended - measured_at) if ended > measured_at else 0.0,
                "worst_late_ms": worst_late * 1000,
            }
        )
    )


# --------------------------------------------------------------------------- the parent


def external_program(client: str) -> list[str] | None:
    """The command line (without options) of an external client's latency program: the Java
    KafkaConsumer's and franz-go's benchmark programs (``bench/peer_programs``, built once by
    :mod:`aiogroup.testing.peers`; ``-tuned`` is passed as ``--tuned``: ``fetch.max.wait.ms`` /
    ``FetchMaxWait`` 10 ms, librdkafka's advice carried over), or None for another name."""
    if client not in ("java", "franz-go"):
        return None
    from consumer_clients import peer_program

    return peer_program(client)


def client_command(
    client: str, bootstrap: str, topic: str, group: str, records: int, idle_stop: float
) -> list[str] | None:
    tuned = client.endswith("-tuned")
    base = client.removesuffix("-tuned")
    options = ["--bootstrap", bootstrap, "--topic", topic, "--group", group]
    options += ["--records", str(records), *(["--tuned"] if tuned else [])]
    if client in PYTHON_CLIENTS:
        return [sys.executable, __file__, "--run", base, "--idle-stop", str(idle_stop), *options]
    program = external_program(base)
    if program is None:
        return None
    return [*program, "--mode", "latency", *options]


def create_topic(broker: Any, bootstrap: str, topic: str, partitions: int) -> None:
    if broker is not None:
        broker.create_topic(topic, partitions)
        return
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)


def wait_stable(bootstrap: str, group: str, partitions: int, process: Any, timeout: float) -> None:
    """Until ``group`` is stable with all ``partitions`` assigned (any client: asked of the
    broker with DescribeGroups)."""
    from confluent_kafka import ConsumerGroupState
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the client exited before joining: {process.stderr.read()[-3000:]}")
        try:
            desc = admin.describe_consumer_groups([group])[group].result(10)
        except Exception:  # the group does not exist yet
            desc = None
        if desc is not None and desc.state == ConsumerGroupState.STABLE:
            assigned = sum(len(m.assignment.topic_partitions) for m in desc.members)
            if assigned == partitions:
                return
        time.sleep(0.2)
    raise RuntimeError(f"group {group} not stable with {partitions} partitions in {timeout} s")


def percentile(values: list[float], q: float) -> float:
    """Nearest rank of sorted ``values``, in ms."""
    if not values:
        return math.nan
    rank = min(len(values) - 1, max(0, math.ceil(q / 100 * len(values)) - 1))
    return values[rank] / 1000


def run_one(args: argparse.Namespace, broker: Any, client: str, rate: int) -> dict[str, Any]:
    topic = f"lat-{uuid.uuid4().hex[:8]}"
    group = f"lat-{uuid.uuid4().hex[:8]}"
    create_topic(broker, args.bootstrap, topic, args.partitions)
    total = round(rate * args.warmup) + round(rate * args.seconds)
    command = client_command(client, args.bootstrap, topic, group, total, args.idle_stop)
    if command is None:
        return {"client": client, "rate": rate, "skipped": "no such client"}
    consumer = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_stable(args.bootstrap, group, args.partitions, consumer, 120.0)
        load_before = os.getloadavg()[0]
        produced = subprocess.run(
            [
                sys.executable, __file__, "--produce", "--bootstrap", args.bootstrap,
                "--topic", topic, "--rate", str(rate), "--seconds", str(args.seconds),
                "--warmup", str(args.warmup), "--partitions", str(args.partitions),
                "--size", str(args.size), "--linger-ms", str(args.linger_ms),
            ],
            capture_output=True, text=True, timeout=args.seconds * 20 + 120, check=True,
        )  # fmt: skip
        load_after = os.getloadavg()[0]
        try:
            out, err = consumer.communicate(timeout=args.grace)
        except subprocess.TimeoutExpired:
            # Fallen behind: stop it and count what it read (the rest shows as not read).
            out, err = consumer.communicate("stop\n", timeout=60)
    finally:
        if consumer.poll() is None:
            consumer.kill()
            consumer.wait()
    made = json.loads(produced.stdout.strip().splitlines()[-1])
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if consumer.returncode != 0 or not lines:
        raise RuntimeError(f"{client} failed:\n{err[-3000:]}")
    everything: list[int] = json.loads(lines[-1])["latencies_us"]
    # A measured record not read within the grace counts as infinitely late: a client that
    # fell behind shows "inf", never the percentiles of the part it managed to read.
    latencies: list[float] = sorted(v for v in everything if v < WARMUP_ABOVE_US)
    latencies += [math.inf] * max(0, made["measured"] - len(latencies))
    return {
        "client": client,
        "rate": rate,
        "achieved_rate": made["rate"],
        "worst_late_ms": made["worst_late_ms"],
        "produced": made["produced"],
        "read": len(everything),
        "unread": made["produced"] - len(everything),
        "measured": len(latencies),
        "p50_ms": percentile(latencies, 50),
        "p99_ms": percentile(latencies, 99),
        "p999_ms": percentile(latencies, 99.9),
        "max_ms": latencies[-1] / 1000 if latencies else math.nan,
        "load": [load_before, load_after],
    }


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median p99 (the lower middle of an even count)."""
    ordered = sorted(runs, key=lambda r: r["p99_ms"])
    return ordered[(len(ordered) - 1) // 2]


def report(results: list[dict[str, Any]], grace: float) -> None:
    """Per rate: each client's median run (by p99) and the p99 ratios against the peers."""
    for rate in sorted({r["rate"] for r in results}):
        rows = [r for r in results if r["rate"] == rate]
        print(f"\n{rate:,} records/s (the median run by p99, the better of two; ms):")
        print(
            f"  {'client':20s} {'read/produced':>17s} {'achieved/s':>10s} {'p50':>8s} "
            f"{'p99':>8s} {'p99.9':>8s} {'max':>8s}  load  p99 of every run"
        )
        chosen: dict[str, dict[str, Any]] = {}
        for client in dict.fromkeys(r["client"] for r in rows):
            runs = [r for r in rows if r["client"] == client]
            if any("skipped" in r for r in runs):
                print(f"  {client:20s} skipped: {runs[0]['skipped']}")
                continue
            r = chosen[client] = median_run(runs)
            unread = "" if r["unread"] == 0 else f"  NOT READ {r['unread']:,} in {grace:g} s"
            every = " / ".join(f"{x['p99_ms']:.1f}" for x in runs)
            print(
                f"  {client:20s} {r['read']:>8,}/{r['produced']:<8,} "
                f"{r['achieved_rate']:>10,.0f} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
                f"{r['p999_ms']:8.2f} {r['max_ms']:8.1f}  {r['load'][0]:.1f}-{r['load'][1]:.1f}"
                f"  {every}{unread}"
            )
        for ours in ("aiogroup", "aiogroup-iter"):
            if ours not in chosen:
                continue
            for peer, r in chosen.items():
                if peer.startswith("aiogroup") or not r["p99_ms"] or math.isnan(r["p99_ms"]):
                    continue
                mine, theirs = chosen[ours]["p99_ms"], r["p99_ms"]
                if math.isinf(mine) or math.isinf(theirs):
                    text = {
                        (True, True): "both fell behind",
                        (True, False): "MISSED (aiogroup fell behind)",
                        (False, True): "met (the peer fell behind)",
                    }[(math.isinf(mine), math.isinf(theirs))]
                else:
                    ratio = mine / theirs
                    text = f"{ratio:5.2f} (goal <= 1: {'met' if ratio <= 1 else 'MISSED'})"
                print(f"  p99 {ours} / {peer:20s} {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=BROKERS, default="kafka4")
    parser.add_argument("--rates", default="1000,10000,100000")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--broker-warmup", type=float, default=20.0)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--clients", default=",".join(DEFAULT_CLIENTS))
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("--linger-ms", type=float, default=0.0)
    parser.add_argument("--idle-stop", type=float, default=15.0, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", default="")
    parser.add_argument("--json", default="")
    # A child's own options.
    parser.add_argument("--run", default="", help=argparse.SUPPRESS)
    parser.add_argument("--produce", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--topic", default="", help=argparse.SUPPRESS)
    parser.add_argument("--group", default="", help=argparse.SUPPRESS)
    parser.add_argument("--records", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--tuned", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        child(args)
        return
    if args.produce:
        producer_main(args)
        return
    clients = [c for c in args.clients.split(",") if c]
    unknown = set(clients) - set(PYTHON_CLIENTS) - set(EXTERNAL_CLIENTS)
    if unknown:
        parser.error(f"unknown clients: {', '.join(sorted(unknown))}")
    rates = [int(r) for r in args.rates.split(",") if r]
    broker = None
    if not args.bootstrap:
        broker = start_broker(args.broker)
        args.bootstrap = broker.bootstrap
    results: list[dict[str, Any]] = []
    try:
        print(
            f"{args.broker if broker else args.bootstrap}, {args.partitions} partitions, "
            f"{args.size} B records, {args.warmup:g} s warm-up + {args.seconds:g} s per run; "
            f"load {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
        )
        if args.broker_warmup > 0:
            # A fresh JVM broker answers slowly until its JIT has compiled the hot paths (the
            # first client measured on it saw seconds): warm it up with a run nobody is judged on.
            warm = argparse.Namespace(**{**vars(args), "seconds": args.broker_warmup})
            r = run_one(warm, broker, "confluent-tuned", 10_000)
            print(f"broker warm-up: {r['read']:,} records at 10,000/s, p99 {r['p99_ms']:.1f} ms")
        for round_, rate in ((n, rate) for n in range(args.rounds) for rate in rates):
            # Each round starts the clients one further along, so none is always first.
            turn = round_ % len(clients)
            for client in clients[turn:] + clients[:turn]:
                r = run_one(args, broker, client, rate)
                r["round"] = round_ + 1
                results.append(r)
                if "skipped" in r:
                    print(f"  {rate:>7,}/s {client:20s} skipped: {r['skipped']}")
                    continue
                print(
                    f"  round {round_ + 1} {rate:>7,}/s {client:20s} read {r['read']:,}/"
                    f"{r['produced']:,} "
                    f"(achieved {r['achieved_rate']:,.0f}/s) p50 {r['p50_ms']:.2f} "
                    f"p99 {r['p99_ms']:.2f} p99.9 {r['p999_ms']:.2f} max {r['max_ms']:.1f} ms; "
                    f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}",
                    flush=True,
                )
        report(results, args.grace)
    finally:
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(results, f, indent=1)
        if broker is not None:
            broker.stop()


if __name__ == "__main__":
    main()
