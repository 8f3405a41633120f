"""A real Kafka consumer in its own process, for the conformance suite.

    python peer.py KIND --bootstrap HOST:PORT --group G --topic T --name N [--assignors a,b]
                   [--instance-id I] [--session-ms 6000] [--heartbeat-ms 1000]

KIND is ``confluent`` (librdkafka) or ``kafka-python``. The peer writes one JSON object per line
on stdout::

    {"event": "owned", "partitions": [0, 2]}        whenever its assignment changes
    {"event": "revoked", "partitions": [2]}         from the rebalance listener
    {"event": "consumed", "count": 10}              running total of records read
    {"event": "committed", "offsets": {"0": 10}}    after a "commit" command
    {"event": "error", "code": 23, "text": "..."}   a group error the client surfaced
    {"event": "closed"}

Commands on stdin, one per line: ``commit`` (synchronous commit of the positions), ``close``
(a clean close: the consumer leaves the group unless it is static). SIGKILL is the test's way
to crash a member.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
from typing import Any


def emit(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def read_commands(commands: queue.Queue[str]) -> None:
    for line in sys.stdin:
        commands.put(line.strip())
    commands.put("close")  # stdin closed: the test is gone


def run_confluent(args: argparse.Namespace, commands: queue.Queue[str]) -> None:
    import confluent_kafka as ck

    errors: list[Any] = []
    config = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        "partition.assignment.strategy": args.assignors,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": args.heartbeat_ms,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": 1000,
        "error_cb": errors.append,
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = ck.Consumer(config)

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        emit("revoked", partitions=sorted(p.partition for p in partitions))

    consumer.subscribe([args.topic], on_revoke=on_revoke, on_lost=on_revoke)
    loop(consumer, commands, errors, confluent=True)


def run_kafka_python(args: argparse.Namespace, commands: queue.Queue[str]) -> None:
    import kafka
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    by_name = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        group_instance_id=args.instance_id or None,
        partition_assignment_strategy=[by_name[a] for a in args.assignors.split(",")],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        metadata_max_age_ms=1000,
    )

    class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_revoked(self, revoked: Any) -> None:
            emit("revoked", partitions=sorted(p.partition for p in revoked))

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    # Know the topic before the first JoinGroup. Otherwise kafka-python 3 (3.0.12) may join with
    # no metadata, get an empty assignment, rejoin once the metadata arrives, and sometimes hang
    # after that rejoin: every request was answered, but its own threads were stuck.
    for _ in range(100):
        if consumer.partitions_for_topic(args.topic):
            break
    consumer.subscribe([args.topic], listener=Listener())
    loop(consumer, commands, [], confluent=False)


def loop(consumer: Any, commands: queue.Queue[str], errors: list[Any], *, confluent: bool) -> None:
    owned: list[int] | None = None
    consumed = 0
    while True:
        try:
            if confluent:
                msg = consumer.poll(0.1)
                if msg is not None and msg.error():
                    errors.append(msg.error())
                elif msg is not None:
                    consumed += 1
                    emit("consumed", count=consumed)
            else:
                batches = consumer.poll(timeout_ms=100)
                n = sum(len(records) for records in batches.values())
                if n:
                    consumed += n
                    emit("consumed", count=consumed)
        except Exception as exc:  # kafka-python raises group errors from poll()
            code = getattr(exc, "errno", None)
            emit("error", code=code, text=f"{type(exc).__name__}: {exc}"[:300])
            if code in (23, 82):
                break
            continue
        while errors:
            err = errors.pop(0)
            code = err.code()
            if code == -150 and "group.instance.id" in str(err):
                code = 82  # librdkafka wraps FENCED_INSTANCE_ID in _FATAL (-150)
            emit("error", code=code, text=str(err)[:300])
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != owned:
            owned = now
            emit("owned", partitions=now)
        try:
            command = commands.get_nowait()
        except queue.Empty:
            continue
        if command == "commit":
            if confluent:
                done = consumer.commit(asynchronous=False)
                offsets = {str(tp.partition): tp.offset for tp in done or []}
            else:
                consumer.commit()
                offsets = {str(tp.partition): consumer.position(tp) for tp in consumer.assignment()}
            emit("committed", offsets=offsets)
        elif command == "close":
            break
    consumer.close()
    emit("closed")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["confluent", "kafka-python"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--assignors", default="range")
    parser.add_argument("--instance-id", default="")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    args = parser.parse_args()
    if os.environ.get("PEER_TRACEBACKS"):
        import faulthandler
        import signal

        trace = open(f"{os.environ['PEER_TRACEBACKS']}/{args.name}-{os.getpid()}.txt", "w")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=trace, all_threads=True)
    commands: queue.Queue[str] = queue.Queue()
    threading.Thread(target=read_commands, args=(commands,), daemon=True).start()
    if args.kind == "confluent":
        run_confluent(args, commands)
    else:
        run_kafka_python(args, commands)


if __name__ == "__main__":
    main()
