"""Regenerate the real recordings in tests/data/ from a run on the Tansu broker.

    .venv/bin/python tests/data/record_tansu.py                 # both recordings
    .venv/bin/python tests/data/record_tansu.py --only cooperative

* ``tansu_cooperative/``: three confluent-kafka (librdkafka) members with cooperative-sticky
  join one by one, then the second one leaves, then all stop.
* ``tansu_eager/``: the same choreography with kafka-python members and the eager range
  assignor.

Each member writes its own JSONL file through the telemetry wrappers
(:func:`aiogroup.observability.telemetry.confluent_callbacks`,
:class:`aiogroup.observability.telemetry.KafkaPythonListener`).
Tansu holds every JoinGroup for session/2, so a run takes a minute or two; waits are on
conditions with generous deadlines, never fixed sleeps.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiogroup.observability.telemetry import ConfluentRecorder, JsonlTelemetry, KafkaPythonListener
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.launchers.tansu import TansuBroker

HERE = Path(__file__).parent
TOPIC = "orders"
PARTITIONS = 6
SESSION_MS = 6000
DEADLINE_S = 90.0


class Group:
    """What each member owns, as its callbacks report it; waiters block on a condition."""

    def __init__(self) -> None:
        self.owned: dict[str, set[int]] = {}
        self.cond = threading.Condition()

    def change(self, member: str, added: list[int], removed: list[int]) -> None:
        with self.cond:
            mine = self.owned.setdefault(member, set())
            mine |= set(added)
            mine -= set(removed)
            self.cond.notify_all()

    def wait_balanced(self, members: list[str], what: str) -> None:
        """Until the given members own every partition between them, balanced, no others."""

        def done() -> bool:
            held = [self.owned.get(m, set()) for m in members]
            others = [p for m, s in self.owned.items() if m not in members for p in s]
            union = set().union(*held)
            return (
                len(union) == PARTITIONS
                and sum(len(s) for s in held) == PARTITIONS
                and max(map(len, held)) - min(map(len, held)) <= 1  # rounds finished
                and not others
            )

        with self.cond:
            if not self.cond.wait_for(done, timeout=DEADLINE_S):
                raise TimeoutError(f"{what}: owned={self.owned}")
        print(f"  {what}: {dict(sorted((m, sorted(s)) for m, s in self.owned.items()))}")


class Member(threading.Thread):
    def __init__(self, name: str, run: Callable[[threading.Event], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.stop = threading.Event()
        self._run = run
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run(self.stop)
        except BaseException as exc:  # reported by the main thread
            self.error = exc


def confluent_member(
    name: str, bootstrap: str, group_id: str, out: Path, group: Group
) -> Member:
    from confluent_kafka import Consumer

    def run(stop: threading.Event) -> None:
        telemetry = JsonlTelemetry(out, name, group_id=group_id)
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group_id,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": 1000,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "log_level": 3,
            }
        )

        def on_assign(c: Any, parts: list[Any]) -> None:
            group.change(name, [p.partition for p in parts], [])

        def on_revoke(c: Any, parts: list[Any]) -> None:
            group.change(name, [], [p.partition for p in parts])

        recorder = ConfluentRecorder(
            telemetry, protocol="cooperative-sticky", group_id=group_id,
            on_assign=on_assign, on_revoke=on_revoke,
        )
        consumer.subscribe([TOPIC], **recorder.callbacks())
        try:
            while not stop.is_set():
                msgs = consumer.consume(50, timeout=0.2)
                recorder.observe(consumer)
                done = [
                    (p, o)
                    for m in msgs
                    if m.error() is None
                    and (p := m.partition()) is not None
                    and (o := m.offset()) is not None
                ]
                _record_batch(telemetry, done)
                if done:
                    consumer.commit(asynchronous=False)
                    telemetry.offsets_committed(
                        {TopicPartition(TOPIC, p): o + 1 for p, o in done},
                        telemetry.generation_id,
                    )
        finally:
            consumer.close()  # runs the final revoke callback
            group.change(name, [], list(group.owned.get(name, set())))
            telemetry.close()

    return Member(name, run)


def kafka_python_member(
    name: str, bootstrap: str, group_id: str, out: Path, group: Group
) -> Member:
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    class Tracker(ConsumerRebalanceListener):  # type: ignore[misc]
        def on_partitions_assigned(self, assigned: Any) -> None:
            group.change(name, [p.partition for p in assigned], [])

        def on_partitions_revoked(self, revoked: Any) -> None:
            group.change(name, [], [p.partition for p in revoked])

    def run(stop: threading.Event) -> None:
        telemetry = JsonlTelemetry(out, name, group_id=group_id)
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group_id,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=1000,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        listener = KafkaPythonListener(
            telemetry, Tracker(), consumer=consumer, protocol="range", group_id=group_id
        )
        consumer.subscribe([TOPIC], listener=listener)
        try:
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=200)
                listener.observe()
                records = [(r.partition, r.offset) for rs in batches.values() for r in rs]
                _record_batch(telemetry, records)
                if records:
                    consumer.commit()
        finally:
            consumer.close()
            group.change(name, [], list(group.owned.get(name, set())))
            telemetry.close()

    return Member(name, run)


def _record_batch(telemetry: JsonlTelemetry, records: list[tuple[int, int]]) -> None:
    by_partition: dict[int, list[int]] = {}
    for partition, offset in records:
        by_partition.setdefault(partition, []).append(offset)
    for partition, offsets in sorted(by_partition.items()):
        telemetry.processed(TopicPartition(TOPIC, partition), min(offsets), max(offsets))


def produce(bootstrap: str, n: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 3})
    for i in range(n):
        producer.produce(TOPIC, value=f"m{i}".encode(), partition=i % PARTITIONS)
    producer.flush(30)


def create_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    futures = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
    for future in futures.values():
        future.result(30)


def record(kind: str, out: Path) -> None:
    make = confluent_member if kind == "cooperative" else kafka_python_member
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    group = Group()
    with TansuBroker() as broker:
        create_topic(broker.bootstrap)
        produce(broker.bootstrap, 120)
        group_id = f"audit-{kind}-{uuid.uuid4().hex[:6]}"
        names = [f"{kind[:4]}-{i}" for i in (1, 2, 3)]
        members: list[Member] = []
        started = time.monotonic()
        try:
            for i, name in enumerate(names):
                member = make(name, broker.bootstrap, group_id, out, group)
                member.start()
                members.append(member)
                group.wait_balanced(names[: i + 1], f"{name} joined")
            leaving = members[1]
            leaving.stop.set()
            leaving.join(DEADLINE_S)
            group.wait_balanced([names[0], names[2]], f"{names[1]} left")
        finally:
            for m in members:
                m.stop.set()
            for m in members:
                m.join(DEADLINE_S)
        for m in members:
            if m.error is not None:
                raise RuntimeError(f"{m.name} failed") from m.error
        print(f"  {kind}: recorded in {time.monotonic() - started:.0f} s -> {out}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--only", choices=["cooperative", "eager"], default=None)
    p.add_argument("--out", default=str(HERE))
    args = p.parse_args(argv)
    for kind in ("cooperative", "eager"):
        if args.only in (None, kind):
            record(kind, Path(args.out) / f"tansu_{kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
