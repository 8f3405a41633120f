"""The member processes of ``bench_rolling_bounce.py``: one consumer of a given client, which
consumes the bench's records, records rebalance telemetry and tells the bench its generation and
how many partitions it owns (``--status``, one JSON line per change).

    python bench/bounce_members.py --kind aiogroup --assignor cooperative-sticky \
        --bootstrap H:P --group G --topic T --name m1 --session-ms 10000 --heartbeat-ms 1000 \
        --telemetry-dir DIR --status FILE [--records] [--close] [--revoke-ms N] \
        [--group-protocol consumer]

With ``--group-protocol consumer`` (KIP-848; aiogroup and librdkafka) the broker assigns with its
default assignor and ``--assignor`` is not used; the session and heartbeat interval are the
group's, set broker side (aiogroup is told the session all the same: its KAFKA-7026 rule;
librdkafka refuses both settings there).

SIGTERM closes the member as the bench's docstring says for its kind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: The clients a member process runs.
KINDS = ("aiogroup", "librdkafka", "kafka-python", "aiokafka")
COOP, RANGE = "cooperative-sticky", "range"


class Status:
    """What the member tells the bench: one JSON line per change (generation, partitions)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.last: tuple[Any, ...] | None = None

    def write(self, generation: int | None, owned: int, state: str = "") -> None:
        key = (generation, owned, state)
        with self.lock:
            if key == self.last:
                return
            self.last = key
            line = json.dumps({"t": time.time(), "pid": os.getpid(), "gen": generation,
                               "owned": owned, "state": state}) + "\n"
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line)


@dataclass
class MemberLoop:
    """The member's main loop: poll the client, report status, and ``on_tick`` between polls
    (the place where a record-consuming member processes records)."""

    stop: threading.Event
    status: Status
    tick_s: float = 0.1
    on_tick: Callable[[], None] | None = None


def _protocol(args: argparse.Namespace) -> str:
    """What telemetry calls the member's protocol: its assignor, or KIP-848's ``consumer``."""
    return "consumer" if args.group_protocol == "consumer" else str(args.assignor)


def _aiogroup_protocol(args: argparse.Namespace) -> dict[str, Any]:
    """An aiogroup member's assignor (classic) or group protocol (KIP-848: the broker's
    default assignor)."""
    if args.group_protocol == "consumer":
        return {"group_protocol": "consumer"}
    return {"assignors": [args.assignor]}


def _member_confluent(args: argparse.Namespace, loop: MemberLoop) -> None:
    from confluent_kafka import Consumer

    from aiogroup.observability.telemetry import (
        ConfluentRecorder,
        JsonlTelemetry,
        confluent_generation,
    )
    from aiogroup.tools.chaos.member import librdkafka_group_options

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
    consumer = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        **librdkafka_group_options(args.group_protocol, assignors=args.assignor,
                                   session_ms=args.session_ms, heartbeat_ms=args.heartbeat_ms),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    def revoke(consumer: Any, partitions: list[Any]) -> None:
        _commit_quietly(lambda: consumer.commit(asynchronous=False))  # what was consumed
        time.sleep(args.revoke_ms / 1000)  # the application's further revocation work

    recorder = ConfluentRecorder(telemetry, protocol=_protocol(args), group_id=args.group,
                                 on_revoke=revoke)
    consumer.subscribe([args.topic], **recorder.callbacks())
    while not loop.stop.is_set():
        offsets: list[tuple[tuple[str, int], int]] = []
        for m in consumer.consume(500, loop.tick_s):
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is not None or topic is None or partition is None or offset is None:
                continue  # a record (no error) has all three; librdkafka's types allow None
            offsets.append(((topic, partition), offset))
        _processed(telemetry, offsets)
        recorder.observe(consumer)
        generation = confluent_generation(consumer)
        loop.status.write(generation if generation is not None and generation >= 0 else None,
                          len(consumer.assignment()))
        if loop.on_tick is not None:
            loop.on_tick()
    consumer.close()  # revokes (recorded, commits) and leaves the group
    telemetry.close()


def _kafka_python_generation(consumer: Any) -> int | None:
    """kafka-python keeps the generation in its coordinator (no public API)."""
    try:
        generation = int(consumer._coordinator._generation.generation_id)
    except (AttributeError, TypeError, ValueError):
        return None
    return generation if generation >= 0 else None


def _member_kafka_python(args: argparse.Namespace, loop: MemberLoop) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    from aiogroup.observability.telemetry import JsonlTelemetry, KafkaPythonListener

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)
    assignor = CooperativeStickyAssignor if args.assignor == COOP else RangePartitionAssignor
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        partition_assignment_strategy=[assignor],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    class Work:
        def on_partitions_revoked(self, revoked: Any) -> None:
            _commit_quietly(consumer.commit)  # what was consumed
            time.sleep(args.revoke_ms / 1000)  # the application's further revocation work

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    listener = KafkaPythonListener(telemetry, Work(),
                                   consumer=consumer, protocol=args.assignor,
                                   group_id=args.group)
    # Know the topic before the first JoinGroup (kafka-python 3.0.12 may otherwise join with no
    # metadata and rejoin; see tests/integration/peer_proc.py).
    for _ in range(100):
        if consumer.partitions_for_topic(args.topic):
            break
    consumer.subscribe([args.topic], listener=listener)
    while not loop.stop.is_set():
        batch = consumer.poll(timeout_ms=int(loop.tick_s * 1000), max_records=500)
        _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                               for tp, records in batch.items() for r in records])
        listener.observe(consumer)
        loop.status.write(_kafka_python_generation(consumer), len(consumer.assignment()))
        if loop.on_tick is not None:
            loop.on_tick()
    consumer.close()
    telemetry.close()


def _commit_quietly(commit: Callable[[], Any]) -> None:
    """A peer's synchronous commit in its revocation callback; nothing to commit is no error."""
    try:
        commit()
    except Exception as exc:  # the peers raise their own types
        print(f"commit in revocation: {exc!r}", file=sys.stderr)


def _processed(telemetry: Any, offsets: Sequence[tuple[tuple[str, int], int]]) -> None:
    """One ``processed`` event per partition of a poll's records (first and last offset)."""
    spans: dict[tuple[str, int], list[int]] = {}
    for tp, offset in offsets:
        span = spans.setdefault(tp, [offset, offset])
        span[0], span[1] = min(span[0], offset), max(span[1], offset)
    for tp, (first, last) in spans.items():
        telemetry.processed(tp, first, last)


def _member_aiogroup(args: argparse.Namespace, loop: MemberLoop) -> None:
    from aiogroup import Consumer
    from aiogroup.client import GroupMember
    from aiogroup.consumer.errors import ConsumerStoppedError
    from aiogroup.observability.telemetry import JsonlTelemetry

    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)

    class Work:
        async def on_partitions_revoked(self, revoked: Any) -> None:
            await asyncio.sleep(args.revoke_ms / 1000)  # the application's revocation work

        def on_partitions_assigned(self, assigned: Any) -> None:
            pass

    async def consume() -> None:
        # aiogroup.Consumer commits what was consumed before a partition is revoked (and on
        # close), then calls the listener.
        consumer = Consumer(
            args.bootstrap, args.group, topics=[args.topic], **_aiogroup_protocol(args),
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            client_id=args.name, telemetry=telemetry, auto_offset_reset="earliest",
            listener=Work() if args.revoke_ms else None,
        )
        closing: asyncio.Future[None] | None = None
        async with consumer:
            member = consumer.member
            while True:
                if loop.stop.is_set() and closing is None:
                    if args.close:
                        break  # close() at the end of the block: revoke, then leave
                    # What a SIGTERM handler does: close() from another task while this
                    # loop reads on (the default shutdown hands off; the loop ends by
                    # itself once the partitions have moved).
                    closing = asyncio.ensure_future(consumer.close())
                generation = member.generation_id
                loop.status.write(generation if generation >= 0 else None,
                                  len(member.assignment), member.state.name)
                try:
                    batch = await consumer.getmany(timeout_ms=int(loop.tick_s * 1000),
                                                   max_records=500)
                except ConsumerStoppedError:
                    break  # handed off and left
                _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                                       for tp, records in batch.items() for r in records])
            if closing is not None:
                await closing
        telemetry.close()

    async def main() -> None:
        member = GroupMember(
            args.bootstrap, args.group, topics=[args.topic], **_aiogroup_protocol(args),
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            client_id=args.name, telemetry=telemetry,
            listener=Work() if args.revoke_ms else None,
        )
        async with member:
            while not loop.stop.is_set():
                generation = member.generation_id
                loop.status.write(generation if generation >= 0 else None, len(member.assignment),
                                  member.state.name)
                if loop.on_tick is not None:
                    loop.on_tick()
                with contextlib.suppress(TimeoutError):  # a status tick, not synchronisation
                    await asyncio.wait_for(member.changed(), loop.tick_s)
            await member.close(hand_off=not args.close)
        telemetry.close()

    asyncio.run(consume() if args.records else main())


def _member_aiokafka(args: argparse.Namespace, loop: MemberLoop) -> None:
    from aiokafka import AIOKafkaConsumer

    from aiogroup.observability.telemetry import AiokafkaListener, JsonlTelemetry

    if args.assignor != RANGE:
        raise SystemExit("aiokafka speaks only the eager protocol: use range")
    telemetry = JsonlTelemetry(args.telemetry_dir, args.name, group_id=args.group)

    async def main() -> None:
        # Commits by hand in the revocation (aiokafka's auto-commit commits there too, but
        # only what was committed on the interval before), as the peers above do.
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name,
            session_timeout_ms=args.session_ms, heartbeat_interval_ms=args.heartbeat_ms,
            enable_auto_commit=False, auto_offset_reset="earliest",
        )  # fmt: skip

        class Work:
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if revoked:
                    try:
                        await consumer.commit()  # what was consumed
                    except Exception as exc:  # aiokafka raises its own types
                        print(f"commit in revocation: {exc!r}", file=sys.stderr)
                await asyncio.sleep(args.revoke_ms / 1000)  # further revocation work

            async def on_partitions_assigned(self, assigned: Any) -> None:
                pass

        listener = AiokafkaListener(telemetry, Work(), consumer=consumer,
                                    protocol=args.assignor, group_id=args.group)
        consumer.subscribe([args.topic], listener=listener)
        await consumer.start()
        try:
            while not loop.stop.is_set():
                batch = await consumer.getmany(timeout_ms=int(loop.tick_s * 1000),
                                               max_records=500)
                _processed(telemetry, [((tp.topic, tp.partition), r.offset)
                                       for tp, records in batch.items() for r in records])
                generation = listener._generation()
                loop.status.write(generation, len(consumer.assignment()))
                if loop.on_tick is not None:
                    loop.on_tick()
        finally:
            # commits nothing more (manual commits) and leaves; aiokafka runs no revocation
            # callback on stop, so the listener records the release itself
            await listener.stop()
        telemetry.close()

    asyncio.run(main())


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bounce_members.py")
    p.add_argument("--kind", choices=KINDS, required=True)
    p.add_argument("--assignor", choices=[COOP, RANGE], required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--session-ms", type=int, required=True)
    p.add_argument("--heartbeat-ms", type=int, required=True)
    p.add_argument("--telemetry-dir", required=True)
    p.add_argument("--status", required=True)
    p.add_argument("--revoke-ms", type=int, default=0)
    p.add_argument("--records", action="store_true", help="consume records")
    p.add_argument("--close", action="store_true",
                   help="aiogroup: SIGTERM closes at once instead of handing off first")
    p.add_argument("--group-protocol", choices=["classic", "consumer"], default="classic",
                   help="consumer: KIP-848 (aiogroup and librdkafka)")
    args = p.parse_args(argv)
    if args.group_protocol == "consumer" and args.kind not in ("aiogroup", "librdkafka"):
        p.error(f"{args.kind} speaks only the classic group protocol")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    loop = MemberLoop(stop, Status(args.status))
    runner = {"aiogroup": _member_aiogroup, "librdkafka": _member_confluent,
              "kafka-python": _member_kafka_python, "aiokafka": _member_aiokafka}[args.kind]
    runner(args, loop)
    return 0



if __name__ == "__main__":
    sys.exit(main())
