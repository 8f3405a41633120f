"""Consumer throughput: aiogroup.Consumer.getmany against aiokafka, confluent-kafka's
``Consumer`` and ``AIOConsumer`` (librdkafka's defaults, and tuned for throughput), the Java
``KafkaConsumer`` 4.1.1 and franz-go: same broker, same records, same run (issue 29).

For each broker (``--broker kafka4,kafka23``: Apache Kafka 4.1.1 in KRaft mode, then 2.3.0
with ZooKeeper; full JIT, 1 GiB heap, on 127.0.0.1) and each shape (``--shapes``):

========  ===============================  ==========
shape     records (x ``--scale``)          partitions
========  ===============================  ==========
``100B``  1,000,000 x 100 B                12
``10KB``  100,000 x 10 KiB                 12
``1MB``   1,000 x 1 MiB (topic            12
          ``max.message.bytes`` 4 MiB)
``1000p`` 1,000,000 x 100 B                1,000
========  ===============================  ==========

confluent-kafka's producer (``linger.ms`` 20) writes the records round-robin over the
partitions, one record at a time (``1000p``: 100 at a time, else producing takes minutes and
every batch holds a few records); then every
client of ``--clients`` reads them all, each in its own process with a fresh group
(``bench/consumer_clients.py`` says exactly what a client does: read ``--warmup`` records,
**stop reading for ``--idle`` seconds** while prefetching runs on and take the RSS, then read
the rest timed, wall clock and process CPU of every thread, and check every record came
exactly once, offsets 0..n-1 per partition). The clients take turns across ``--rounds``
(reversed order on even rounds). Every client keeps its defaults for fetch sizes: each reads
1 MiB values as they are (KIP-74: a batch larger than ``max.partition.fetch.bytes`` is
returned anyway); only confluent-*-tuned change settings (``LIBRDKAFKA_TUNED`` in
``consumer_clients.py``, from librdkafka's CONFIGURATION.md: ``fetch.queue.backoff.ms`` 10 ms
instead of 1 s, ``queued.min.messages`` 1M, ``fetch.message.max.bytes`` 4 MiB). The Python
clients read in batches of ``--batch`` (``getmany(max_records=...)``,
``consume(num_messages=...)``, confluent-kafka's advice for throughput); Java polls with its
``max.poll.records`` (500), franz-go takes what ``PollFetches`` has.

Prints per shape a table (records/s best of the rounds, CPU us per record, peak RSS, RSS
after the pause, verdict, load average during the shape), then the ratios and goals of issue
29: aiogroup/aiokafka >= 2x when the machine is quiet (1-minute load < 1.5), >= 1.5x at load
>= 4 (judged on the loads seen around the two runs compared: all below 1.5, or all at 4 or
more; otherwise both verdicts are printed); aiogroup/confluent-tuned >= 1x; aiogroup
against confluent-aio-tuned, Java and franz-go (no goal); aiogroup's CPU <= 0.30 us per 100 B
record. ``aiogroup`` decodes records with the C decoder when it was built (the header says);
``aiogroup-pure`` is the same consumer with ``AIOGROUP_PURE_PYTHON=1`` (aiokafka's reader), an
installation without a C compiler. ``--json FILE`` saves everything. Usage::

    python bench/bench_consumer.py                         # both brokers, every shape, 1 round
    python bench/bench_consumer.py --broker kafka4 --shapes 100B --rounds 3
    python bench/bench_consumer.py --scale 0.1 --idle 2    # a short development run
    python bench/bench_consumer.py --bootstrap H:P         # an existing broker (topics made)

The Java and Go programs (``bench/peer_programs``) are built on first use by
:mod:`aiogroup.testing.peers` (javac against the pinned kafka-clients 4.1.1 jars; ``go
build`` with the franz-go peer's ``go.mod``/``go.sum``). They also have a latency mode for
``bench_latency.py`` (the contract is at the top of each program).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from typing import Any

from common import BROKERS, start_broker
from consumer_clients import CLIENTS, client_command


@dataclass(frozen=True)
class Shape:
    name: str
    records: int
    size: int
    partitions: int
    #: Records written to a partition before the next (1: round-robin, record by record).
    run: int = 1
    topic_config: tuple[tuple[str, str], ...] = ()


SHAPES = {
    s.name: s
    for s in (
        Shape("100B", 1_000_000, 100, 12),
        Shape("10KB", 100_000, 10 * 1024, 12),
        Shape("1MB", 1_000, 1024 * 1024, 12, 1, (("max.message.bytes", str(4 << 20)),)),
        Shape("1000p", 1_000_000, 100, 1_000, 100),
    )
}
#: Issue 29's goals.
QUIET_LOAD, BUSY_LOAD = 1.5, 4.0
GOAL_QUIET, GOAL_BUSY, GOAL_LIBRDKAFKA, GOAL_CPU_US = 2.0, 1.5, 1.0, 0.30


def load() -> float:
    return os.getloadavg()[0]


# --------------------------------------------------------------------------- records


def produce(bootstrap: str, topic: str, shape: Shape, records: int) -> dict[int, int]:
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.size": 1_000_000,
            "message.max.bytes": max(1_000_000, 2 * shape.size),
            "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1024 * 1024,
            "acks": 1,
        }
    )
    value = b"x" * shape.size
    counts = {p: 0 for p in range(shape.partitions)}
    for i in range(records):
        p = (i // shape.run) % shape.partitions
        while True:
            try:
                producer.produce(topic, value, partition=p)
                break
            except BufferError:
                producer.poll(0.05)
        counts[p] += 1
    if producer.flush(300) != 0:
        raise RuntimeError("the producer could not deliver every record")
    return counts


def create_topic(broker: Any, bootstrap: str, topic: str, shape: Shape) -> None:
    config = dict(shape.topic_config)
    if broker is not None:
        broker.create_topic(topic, shape.partitions, config=config, timeout=120.0)
        return
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the futures resolve
    futures = admin.create_topics([NewTopic(topic, shape.partitions, 1, config=config)])
    for future in futures.values():
        future.result(120)


# --------------------------------------------------------------------------- one client


def run_client(
    args: argparse.Namespace,
    client: str,
    topic: str,
    expected: dict[int, int],
    warmup: int,
    timed: int,
) -> dict[str, Any]:
    argv = client_command(
        client,
        bootstrap=args.bootstrap,
        topic=topic,
        group=f"bench-{client}-{uuid.uuid4().hex[:8]}",
        expected=expected,
        warmup=warmup,
        timed=timed,
        idle=args.idle,
        batch=args.batch,
    )
    before = load()
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
    except subprocess.TimeoutExpired:
        return failed(client, "timed out after 1800 s", before)
    lines = [line for line in out.stdout.splitlines() if line.startswith('{"client"')]
    if out.returncode != 0 or not lines:
        return failed(client, f"exit {out.returncode}: {out.stderr.strip()[-600:]}", before)
    result: dict[str, Any] = json.loads(lines[-1])
    result["load"] = [before, load()]
    return result


def failed(client: str, why: str, before: float) -> dict[str, Any]:
    return {
        "client": client, "rate": 0.0, "cpu_seconds": 0.0, "timed_records": 0, "seconds": 0.0,
        "records": 0, "peak_rss_mb": 0.0, "idle_rss_mb": 0.0, "verdict": f"FAILED: {why}",
        "load": [before, load()],
    }  # fmt: skip


def us_per_record(r: dict[str, Any]) -> float:
    return 1e6 * r["cpu_seconds"] / r["timed_records"] if r["timed_records"] else 0.0


# --------------------------------------------------------------------------- one shape


def run_shape(
    args: argparse.Namespace, broker: Any, broker_name: str, shape: Shape
) -> dict[str, Any]:
    records = max(shape.partitions, round(shape.records * args.scale))
    warmup = max(1, min(args.warmup, records // 20))
    timed = round((records - warmup) * (1 - args.tail))
    topic = f"bench-{shape.name.lower()}-{uuid.uuid4().hex[:8]}"
    create_topic(broker, args.bootstrap, topic, shape)
    t0 = time.perf_counter()
    expected = produce(args.bootstrap, topic, shape, records)
    print(
        f"\n== {broker_name} {shape.name}: {records:,} records of {shape.size:,} B over "
        f"{shape.partitions} partitions, produced in {time.perf_counter() - t0:.1f} s "
        f"(load {load():.1f}); warm-up {warmup:,}, timed {timed:,}, then idle {args.idle:g} s",
        flush=True,
    )
    runs: dict[str, list[dict[str, Any]]] = {c: [] for c in args.clients}
    for round_ in range(args.rounds):
        order = args.clients if round_ % 2 == 0 else list(reversed(args.clients))
        for client in order:
            r = run_client(args, client, topic, expected, warmup, timed)
            runs[client].append(r)
            print(
                f"  round {round_ + 1} {client:20s} {r['rate'] / 1e3:9.1f} k/s "
                f"CPU {us_per_record(r):6.3f} us/rec  peak {r['peak_rss_mb']:7.1f} MB  "
                f"idle {r['idle_rss_mb']:7.1f} MB  load {r['load'][0]:.1f}-{r['load'][1]:.1f}"
                f"  {r['verdict'][:120]}",
                flush=True,
            )
    best = {c: max(rs, key=lambda r: r["rate"]) for c, rs in runs.items() if rs}
    loads = [x for rs in runs.values() for r in rs for x in r["load"]]
    result = {
        "broker": broker_name,
        "shape": shape.name,
        "records": records,
        "size": shape.size,
        "partitions": shape.partitions,
        "rounds": runs,
        "best": best,
        "load": [min(loads), max(loads), sum(loads) / len(loads)],
    }
    result["ratios"] = ratios(result)
    print_shape(result)
    return result


def decoder() -> str:
    """Which decoder the ``aiogroup`` client reads v2 records with."""
    from aiogroup.consumer.records import NATIVE

    return "C (aiogroup.consumer._native_records)" if NATIVE else "aiokafka's reader (C not built)"


def ratios(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 29's ratios of aiogroup's best rate, each with its goal and verdict."""
    best = result["best"]
    ours = best.get("aiogroup", {}).get("rate", 0.0)
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, goal: str, verdict: str) -> None:
        out.append({"name": name, "value": value, "goal": goal, "verdict": verdict})

    def pass_miss(value: float, floor: float) -> str:
        return "PASS" if value >= floor else "MISS"

    for peer in ("aiokafka", "confluent-tuned", "confluent-aio-tuned", "java", "franz-go",
                 "confluent", "confluent-aio"):  # fmt: skip
        if not ours or peer not in best or not best[peer]["rate"]:
            continue
        ratio = ours / best[peer]["rate"]
        if peer == "aiokafka":
            # The loads around the two runs compared (the best of each), not the whole shape's.
            around = best["aiogroup"]["load"] + best[peer]["load"]
            quiet = f">= {GOAL_QUIET:g}x quiet (load < {QUIET_LOAD:g})"
            busy = f">= {GOAL_BUSY:g}x at load >= {BUSY_LOAD:g}"
            if max(around) < QUIET_LOAD:
                add(f"aiogroup/{peer}", ratio, quiet, pass_miss(ratio, GOAL_QUIET))
            elif min(around) >= BUSY_LOAD:
                add(f"aiogroup/{peer}", ratio, busy, pass_miss(ratio, GOAL_BUSY))
            else:
                goal = f"load {min(around):.1f}-{max(around):.1f}: {quiet}; {busy}"
                add(f"aiogroup/{peer}", ratio, goal,
                    f"{pass_miss(ratio, GOAL_QUIET)}; {pass_miss(ratio, GOAL_BUSY)}")  # fmt: skip
        elif peer == "confluent-tuned":
            add(f"aiogroup/{peer}", ratio, f">= {GOAL_LIBRDKAFKA:g}x",
                pass_miss(ratio, GOAL_LIBRDKAFKA))  # fmt: skip
        else:
            add(f"aiogroup/{peer}", ratio, "", "")
    if result["size"] == 100 and "aiogroup" in best:
        cpu = us_per_record(best["aiogroup"])
        add("aiogroup CPU us per 100 B record", cpu, f"<= {GOAL_CPU_US:.2f}",
            "PASS" if 0 < cpu <= GOAL_CPU_US else "MISS")  # fmt: skip
    return out


def print_shape(result: dict[str, Any]) -> None:
    lo, hi, mean = result["load"]
    rounds = max(len(rs) for rs in result["rounds"].values())
    print(
        f"\n{result['broker']} {result['shape']}: best of {rounds} round(s); 1-minute load "
        f"during the shape {lo:.1f}-{hi:.1f} (mean {mean:.1f})"
    )
    print(
        f"  {'client':20s} {'records/s':>11s} {'CPU us/rec':>10s} {'peak RSS':>9s} "
        f"{'idle RSS':>9s}  {'load':9s} verdict"
    )
    for client, r in result["best"].items():
        print(
            f"  {client:20s} {r['rate']:11,.0f} {us_per_record(r):10.3f} "
            f"{r['peak_rss_mb']:7.1f}MB {r['idle_rss_mb']:7.1f}MB  "
            f"{r['load'][0]:3.1f}-{r['load'][1]:<4.1f}  {r['verdict'][:200]}"
        )
    for ratio in result["ratios"]:
        value = ratio["value"]
        figure = f"{value:6.2f}x" if "CPU" not in ratio["name"] else f"{value:6.3f} us"
        goal = f"  goal {ratio['goal']}: {ratio['verdict']}" if ratio["goal"] else ""
        print(f"  {ratio['name']:36s} {figure}{goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", default=",".join(BROKERS), help="kafka4, kafka23 or both")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=",".join(SHAPES))
    parser.add_argument("--clients", default=",".join(CLIENTS), help=",".join(CLIENTS))
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies record counts")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=1000, help="at most 1/20 of the records")
    parser.add_argument("--idle", type=float, default=10.0)
    parser.add_argument(
        "--tail", type=float, default=0.3, help="share of the records read after the pause"
    )
    parser.add_argument("--bootstrap", default="", help="an existing broker instead")
    parser.add_argument("--json", default="", help="save every result there")
    args = parser.parse_args()
    args.clients = [c for c in args.clients.split(",") if c]
    unknown = set(args.clients) - set(CLIENTS)
    shapes = [SHAPES[s] for s in args.shapes.split(",") if s]
    brokers = ["existing"] if args.bootstrap else [b for b in args.broker.split(",") if b]
    if unknown or set(brokers) - {*BROKERS, "existing"}:
        parser.error(f"unknown clients {sorted(unknown)} or brokers {brokers}")
    print(f"start: load {load():.1f}, clients {','.join(args.clients)}, scale {args.scale:g}")
    print(f"aiogroup's records decoder: {decoder()}; aiogroup-pure: aiokafka's reader")
    results: list[dict[str, Any]] = []
    for name in brokers:
        broker = None if args.bootstrap else start_broker(name)
        if broker is not None:
            args.bootstrap = broker.bootstrap
        try:
            for shape in shapes:
                results.append(run_shape(args, broker, name, shape))
                if args.json:
                    with open(args.json, "w", encoding="utf-8") as f:
                        json.dump({"argv": vars(args), "results": results}, f, indent=1)
        finally:
            if broker is not None:
                broker.stop()
                args.bootstrap = ""
    print(f"\nend: load {load():.1f}")


if __name__ == "__main__":
    main()
