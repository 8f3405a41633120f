"""One group member in its own process, for integration tests: ``python peer_proc.py KIND ...``.

KIND is ``confluent`` (librdkafka), ``kafka-python`` (kafka-python 3) or ``aiogroup``. Every
rebalance callback is appended to ``--out`` as one JSON line with a wall-clock timestamp::

    {"t": 1700000000.1, "who": "p1", "event": "assigned", "partitions": [["topic", 0], ...]}

Events: ``started``, ``assigned``, ``revoked``, ``lost``, ``owner_check`` (aiogroup only: the
partitions the member believes it owns, written every heartbeat interval), ``error``, ``closed``.
SIGTERM closes the consumer cleanly (it leaves the group); SIGKILL/SIGSTOP are the test's tools.
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


class Recorder:
    def __init__(self, path: str, who: str) -> None:
        self.path = path
        self.who = who
        self.lock = threading.Lock()

    def write(
        self,
        event: str,
        partitions: Iterable[tuple[str, int]] = (),
        *,
        t: float | None = None,
        **extra: Any,
    ) -> None:
        record = {
            "t": time.time() if t is None else t,
            "who": self.who,
            "pid": os.getpid(),
            "event": event,
            "partitions": sorted([t, p] for t, p in partitions),
            **extra,
        }
        line = json.dumps(record) + "\n"
        with self.lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()


def run_confluent(args: argparse.Namespace, rec: Recorder, stop: threading.Event) -> None:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": args.session_ms,
            "heartbeat.interval.ms": args.heartbeat_ms,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "client.id": args.name,
        }
    )

    def tps(parts: list[Any]) -> list[tuple[str, int]]:
        return [(p.topic, p.partition) for p in parts]

    def on_assign(c: Any, parts: list[Any]) -> None:
        rec.write("assigned", tps(parts))

    def on_revoke(c: Any, parts: list[Any]) -> None:
        rec.write("revoked", tps(parts))

    def on_lost(c: Any, parts: list[Any]) -> None:
        rec.write("lost", tps(parts))

    callbacks: dict[str, Any] = {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}
    if args.telemetry_dir:
        from aiogroup.observability.telemetry import JsonlTelemetry, confluent_callbacks

        telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
        callbacks = confluent_callbacks(
            telemetry, protocol="cooperative-sticky", group_id=args.group, **callbacks
        )
    consumer.subscribe(args.topics, **callbacks)
    rec.write("started")
    while not stop.is_set():
        consumer.poll(0.2)
    consumer.close()  # revokes (on_revoke) and leaves the group
    rec.write("closed")


def run_kafka_python(args: argparse.Namespace, rec: Recorder, stop: threading.Event) -> None:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            rec.write("revoked", [(p.topic, p.partition) for p in revoked])

        def on_partitions_assigned(self, assigned: Any) -> None:
            rec.write("assigned", [(p.topic, p.partition) for p in assigned])

        def on_partitions_lost(self, lost: Any) -> None:
            rec.write("lost", [(p.topic, p.partition) for p in lost])

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        partition_assignment_strategy=[CooperativeStickyAssignor],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    listener: Any = Listener()
    if args.telemetry_dir:
        from aiogroup.observability.telemetry import JsonlTelemetry, KafkaPythonListener

        telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
        listener = KafkaPythonListener(
            telemetry,
            listener,
            consumer=consumer,
            protocol="cooperative-sticky",
            group_id=args.group,
        )
    # Know the topics before the first JoinGroup: kafka-python 3.0.12 may otherwise join with no
    # metadata, get an empty assignment, rejoin, and sometimes hang after that rejoin (seen in
    # the conformance suite; the broker had answered every request). Bounded.
    for topic in args.topics:
        for _ in range(100):
            if consumer.partitions_for_topic(topic):
                break
    consumer.subscribe(args.topics, listener=listener)
    rec.write("started")
    while not stop.is_set():
        consumer.poll(timeout_ms=200)
    consumer.close()
    rec.write("closed")


def run_aiogroup(args: argparse.Namespace, rec: Recorder, stop: threading.Event) -> None:
    from aiogroup.client import GroupMember

    class Listener:
        def on_partitions_revoked(self, revoked: Any) -> None:
            rec.write("revoked", revoked)

        def on_partitions_assigned(self, assigned: Any) -> None:
            rec.write("assigned", assigned)

        def on_partitions_lost(self, lost: Any) -> None:
            rec.write("lost", lost)

    telemetry: Any = None
    if args.telemetry_dir:
        from aiogroup.observability.telemetry import JsonlTelemetry

        telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)

    async def main() -> None:
        async with GroupMember(
            args.bootstrap,
            args.group,
            topics=args.topics,
            assignors=["cooperative-sticky"],
            listener=Listener(),
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms,
            client_id=args.name,
            telemetry=telemetry,
        ) as member:
            rec.write("started")
            while not stop.is_set():
                # What the member believes it owns right now, as a consumer would act on it.
                # Stamped before it is read: a SIGSTOP landing between the two would otherwise
                # date a belief from before the pause after it.
                t = time.time()
                believed, generation = member.assignment, member.generation_id
                rec.write("owner_check", believed, t=t, generation_id=generation)
                await asyncio.sleep(args.heartbeat_ms / 1000)  # a work loop, not synchronisation
        rec.write("closed")

    asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["confluent", "kafka-python", "aiogroup"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True, type=lambda s: s.split(","))
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--telemetry-dir", default="", help="also write aiogroup telemetry here")
    args = parser.parse_args(argv)
    rec = Recorder(args.out, args.name)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    runner = {
        "confluent": run_confluent,
        "kafka-python": run_kafka_python,
        "aiogroup": run_aiogroup,
    }[args.kind]
    try:
        runner(args, rec, stop)
    except Exception as exc:
        rec.write("error", error=repr(exc))
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
