"""One consumer in its own process, for the churn and mixed-group proofs:
``python consumer_proc.py KIND --bootstrap ... --group ... --topic ... --out FILE --name NAME``.

KIND is ``aiogroup`` (:class:`aiogroup.Consumer`), ``confluent`` (librdkafka) or
``kafka-python``. Each line of ``--out`` is one JSON event with a wall-clock stamp ``t``:

- ``started``, ``closed``, ``error``;
- ``assigned`` / ``revoked`` / ``lost`` with ``partitions`` (rebalance callbacks);
- ``records`` with ``records: [[partition, offset], ...]``: a batch the application was handed,
  stamped when the call returned (before the line is written);
- ``state`` (aiogroup only): the member's state (``joining``, ``stable``, ...) when it changes.

SIGTERM closes the consumer cleanly (commit, revoke, leave); SIGKILL/SIGSTOP are the test's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any


class Log:
    def __init__(self, path: str, who: str) -> None:
        self.path = path
        self.who = who
        self.lock = threading.Lock()
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at exit

    def write(self, event: str, t: float | None = None, **extra: Any) -> None:
        line = json.dumps(
            {"t": t or time.time(), "who": self.who, "pid": os.getpid(), "event": event, **extra}
        )
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()

    def partitions(self, event: str, parts: Iterable[tuple[str, int]]) -> None:
        self.write(event, partitions=sorted([t, p] for t, p in parts))


def run_aiogroup(args: argparse.Namespace, log: Log, stop: threading.Event) -> None:
    from aiogroup import Consumer

    class Listener:
        def on_partitions_assigned(self, partitions: Any) -> None:
            log.partitions("assigned", partitions)

        def on_partitions_revoked(self, partitions: Any) -> None:
            log.partitions("revoked", partitions)

        def on_partitions_lost(self, partitions: Any) -> None:
            log.partitions("lost", partitions)

    async def watch(consumer: Consumer) -> None:
        member = consumer.member
        last = None
        while True:
            changed = member.changed()
            if member.state is not last:
                last = member.state
                log.write("state", state=last.value)
            await changed

    async def main() -> None:
        consumer = Consumer(
            args.bootstrap,
            args.group,
            topics=[args.topic],
            assignors=[args.assignor],
            listener=Listener(),
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=1000,
            fetch_max_wait_ms=100,
            client_id=args.name,
        )
        async with consumer:
            watcher = asyncio.create_task(watch(consumer))
            log.write("started")
            while not stop.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=args.max_records)
                t = time.time()
                records = [[tp.partition, r.offset] for tp, rs in batch.items() for r in rs]
                if records:
                    log.write("records", t=t, records=records)
                    await asyncio.sleep(args.work_ms / 1000)  # the application's work
            watcher.cancel()
        log.write("closed")

    asyncio.run(main())


def run_confluent(args: argparse.Namespace, log: Log, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "partition.assignment.strategy": args.assignor,
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": args.heartbeat_ms,
            "enable.auto.commit": True,
            "auto.commit.interval.ms": 1000,
            "auto.offset.reset": "earliest",
            "client.id": args.name,
        }
    )

    def tps(parts: list[Any]) -> list[tuple[str, int]]:
        return [(p.topic, p.partition) for p in parts]

    def on_revoke(c: Any, parts: list[Any]) -> None:
        log.partitions("revoked", tps(parts))
        if parts:
            try:
                c.commit(asynchronous=False)  # what was read, before it moves
            except Exception as exc:  # nothing stored to commit, or the generation moved on
                log.write("commit_failed", error=repr(exc))

    consumer.subscribe(
        [args.topic],
        on_assign=lambda c, parts: log.partitions("assigned", tps(parts)),
        on_revoke=on_revoke,
        on_lost=lambda c, parts: log.partitions("lost", tps(parts)),
    )
    log.write("started")
    while not stop.is_set():
        messages = consumer.consume(num_messages=args.max_records, timeout=0.1)
        t = time.time()
        records = [[m.partition(), m.offset()] for m in messages if m.error() is None]
        if records:
            log.write("records", t=t, records=records)
            time.sleep(args.work_ms / 1000)  # the application's work
    consumer.close()
    log.write("closed")


def run_kafka_python(args: argparse.Namespace, log: Log, stop: threading.Event) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    assignor = {"cooperative-sticky": CooperativeStickyAssignor, "range": RangePartitionAssignor}

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            log.partitions("revoked", [(p.topic, p.partition) for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            log.partitions("assigned", [(p.topic, p.partition) for p in assigned])

        def on_partitions_lost(self, lost: Any) -> None:
            log.partitions("lost", [(p.topic, p.partition) for p in lost])

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        partition_assignment_strategy=[assignor[args.assignor]],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        enable_auto_commit=True,
        auto_commit_interval_ms=1000,
        auto_offset_reset="earliest",
    )
    # Know the topic before the first JoinGroup (kafka-python 3.0.12 may hang after joining
    # with no metadata; see the conformance suite). Bounded.
    for _ in range(100):
        if consumer.partitions_for_topic(args.topic):
            break
    consumer.subscribe([args.topic], listener=Listener())
    log.write("started")
    while not stop.is_set():
        polled = consumer.poll(timeout_ms=100, max_records=args.max_records)
        t = time.time()
        records = [[tp.partition, r.offset] for tp, rs in polled.items() for r in rs]
        if records:
            log.write("records", t=t, records=records)
            time.sleep(args.work_ms / 1000)  # the application's work
    consumer.close()
    log.write("closed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["aiogroup", "confluent", "kafka-python"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--assignor", default="cooperative-sticky")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--max-records", type=int, default=20)
    parser.add_argument("--work-ms", type=float, default=5.0)
    args = parser.parse_args(argv)
    log = Log(args.out, args.name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    runner = {
        "aiogroup": run_aiogroup,
        "confluent": run_confluent,
        "kafka-python": run_kafka_python,
    }[args.kind]
    try:
        runner(args, log, stop)
    except Exception as exc:
        log.write("error", error=repr(exc))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
