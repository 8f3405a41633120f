"""One chaos-run member in its own process: ``python -m aiogroup.tools.chaos.member KIND ...``.

KIND is one of :data:`KINDS`:

``aiogroup``
    an :class:`aiogroup.GroupMember` that acts on its ``assignment`` by committing a counter
    for every partition in it every ``--commit-every-ms`` (what a service that keeps its own
    records would do);
``aiogroup-consumer``
    an :class:`aiogroup.Consumer` processing records (auto-commit every second);
``librdkafka``
    a confluent-kafka consumer processing records, committing every second and on revocation;
``kafka-python``
    a kafka-python 3 consumer, the same but for the commit on revocation (its listeners run
    on its IO thread, where a blocking commit is refused);
``java``, ``franz-go``
    Apache Kafka's Java ``KafkaConsumer`` and franz-go, our peer programs of
    :mod:`aiogroup.testing.peers` (built on first use): this process becomes the peer
    (``exec``), which processes records, commits every second and on revocation, and writes
    the same telemetry itself. They are not drawn by default (:data:`DEFAULT_KINDS`): ask for
    them with ``--kinds``.

All use the cooperative-sticky assignor (KIP-429; ``--assignors`` changes it for every kind but
kafka-python). With ``--group-protocol consumer`` (KIP-848, Kafka 4.x) the broker assigns
instead, with its default assignor: every kind but kafka-python speaks it
(:data:`CONSUMER_PROTOCOL_KINDS`: aiogroup's ``group_protocol="consumer"``, librdkafka's and
Java's ``group.protocol=consumer``, franz-go's ``ServerSideBalancer``), and the group's session
and heartbeat interval are the broker's (the group configs ``consumer.session.timeout.ms`` and
``consumer.heartbeat.interval.ms``; the runner sets them). Every member writes one JSON Lines
file in the shared
telemetry schema (:mod:`aiogroup.observability.telemetry`) to ``--dir``: ``joined``, the rebalance
callbacks,
``processed`` (records handed to the application, per partition and batch, stamped when the
poll returned), ``offsets_committed`` (with the time the commit was sent), ``commit_failed``,
``closed``; aiogroup members add ``acting``, ``state`` and ``leader_round`` (see
docs/telemetry.md); the kafka-python wrapper adds ``leader_round`` when it leads. Besides:
``started`` (with the kind) and ``error`` (what ended the process abnormally). With
``--telemetry-topic TOPIC`` (every kind but the peers) each event also goes, as it is, to that
topic through :class:`~aiogroup.observability.telemetry_kafka.KafkaTelemetry` (on
``--telemetry-bootstrap``, default the member's broker), which ``analyze --follow TOPIC``
audits live; the file stays the evidence the checker reads.

SIGTERM closes the member cleanly: aiogroup members hand their partitions off first
(``hand_off()``, under an aiogroup leader; otherwise commit, revoke, leave; consumers keep
reading until the round that moves them), peers close; SIGKILL and SIGSTOP are the runner's.
The exit code is 0 after a clean close, 1 after an error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from aiogroup.observability.telemetry import JsonlTelemetry
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "CLIENT_OF",
    "CONSUMER_PROTOCOL_DEFAULT_KINDS",
    "CONSUMER_PROTOCOL_KINDS",
    "DEFAULT_KINDS",
    "KINDS",
    "PEER_KINDS",
    "KafkaTee",
    "librdkafka_group_options",
    "main",
]

#: Member kinds and the client (library) each runs: violations are attributed to the client.
CLIENT_OF = {
    "aiogroup": "aiogroup",
    "aiogroup-consumer": "aiogroup",
    "librdkafka": "librdkafka",
    "kafka-python": "kafka-python",
    "java": "java",
    "franz-go": "franz-go",
}
KINDS = tuple(CLIENT_OF)
#: Kinds that are programs of :mod:`aiogroup.testing.peers` (a JDK or Go builds them).
PEER_KINDS = ("java", "franz-go")
#: The kinds a run draws from unless told (the seeds' plans keep their meaning).
DEFAULT_KINDS = tuple(k for k in KINDS if k not in PEER_KINDS)
#: The kinds that speak KIP-848's consumer group protocol (``--group-protocol consumer``):
#: kafka-python 3 speaks only the classic protocol.
CONSUMER_PROTOCOL_KINDS = tuple(k for k in KINDS if k != "kafka-python")
#: The kinds a KIP-848 run draws from unless told: Java's consumer is the protocol's reference
#: client (a JDK is there for Kafka anyway); franz-go on request (a Go toolchain builds it, and
#: franz-go itself advises its KIP-848 mode only from Kafka 4.3 on).
CONSUMER_PROTOCOL_DEFAULT_KINDS = ("aiogroup", "aiogroup-consumer", "librdkafka", "java")
ASSIGNOR = "cooperative-sticky"
#: Records handed to the application per poll (small batches: fine-grained evidence).
MAX_RECORDS = 50


class KafkaTee(JsonlTelemetry):
    """The member's JSON Lines file, each event also forwarded to a telemetry topic (the same
    bytes:
    :meth:`~aiogroup.observability.telemetry_kafka.KafkaTelemetry.forward`). Closing writes
    ``closed`` to both, then sends what the topic's sink holds (within its
    ``close_timeout_s``)."""

    def __init__(
        self, directory: str, member_name: str, *, kafka: Any, client: str, group_id: str
    ) -> None:
        super().__init__(directory, member_name, client=client, group_id=group_id)
        self.kafka = kafka

    def _write(self, record: Mapping[str, Any], line: bytes) -> None:
        super()._write(record, line)
        self.kafka.forward(line)

    def _finish(self) -> None:
        super()._finish()
        self.kafka.close(closed_event=False)


def _telemetry(args: argparse.Namespace) -> JsonlTelemetry:
    """The member's sink: its file, and the topic too with ``--telemetry-topic``."""
    client = CLIENT_OF[args.kind]
    if not args.telemetry_topic:
        return JsonlTelemetry(args.dir, args.name, client=client, group_id=args.group)
    from aiogroup.observability.telemetry_kafka import KafkaTelemetry

    kafka = KafkaTelemetry(
        args.telemetry_bootstrap or args.bootstrap,
        args.telemetry_topic,
        args.name,
        group_id=args.group,
        client=client,
        retry_backoff_s=0.05,
        close_timeout_s=30.0,  # a run's audit needs every event: a loaded machine may be slow
    )
    return KafkaTee(args.dir, args.name, kafka=kafka, client=client, group_id=args.group)


def _processed(telemetry: JsonlTelemetry, batch: Mapping[TopicPartition, list[int]]) -> None:
    for tp, offsets in batch.items():
        if offsets:
            telemetry.processed(tp, min(offsets), max(offsets))


def _error(telemetry: JsonlTelemetry, where: str, exc: BaseException) -> None:
    telemetry.emit("error", where=where, error=repr(exc)[:500])


def _started(args: argparse.Namespace, telemetry: JsonlTelemetry) -> None:
    args.started = True
    telemetry.emit("started", kind=args.kind)


# -- aiogroup --------------------------------------------------------------------------------


def _common_options(args: argparse.Namespace, telemetry: JsonlTelemetry) -> dict[str, Any]:
    """The options both aiogroup kinds take alike (KIP-848's consumer protocol: no assignors,
    the broker assigns)."""
    consumer_protocol = args.group_protocol == "consumer"
    return {
        "topics": [args.topic],
        "assignors": None if consumer_protocol else args.assignors.split(","),
        "group_protocol": args.group_protocol,
        "group_instance_id": args.instance_id or None,
        "session_timeout_ms": args.session_ms,
        "heartbeat_interval_ms": args.heartbeat_ms,
        "request_timeout_ms": args.request_timeout_ms,
        "close_timeout_s": args.close_timeout_ms / 1000,
        "client_id": args.name,
        "telemetry": telemetry,
    }


async def _run_group_member(
    args: argparse.Namespace, telemetry: JsonlTelemetry, stop: asyncio.Event
) -> None:
    from aiogroup import GroupMember
    from aiogroup.errors import AiogroupError

    counter = 0
    async with GroupMember(
        args.bootstrap,
        args.group,
        rebalance_timeout_ms=args.rebalance_ms,
        **_common_options(args, telemetry),
    ) as member:
        _started(args, telemetry)
        while not stop.is_set():
            owned = member.assignment
            if owned:
                counter += 1
                # Refused or fenced: the driver records it (commit_failed); go on.
                with contextlib.suppress(AiogroupError):
                    await member.commit({tp: counter for tp in owned})
            try:
                member.raise_errors()
            except AiogroupError as exc:
                telemetry.emit("member_error", error=repr(exc)[:500])
            with contextlib.suppress(TimeoutError):  # the work loop's pace, or SIGTERM
                await asyncio.wait_for(stop.wait(), args.commit_every_ms / 1000)
        # SIGTERM: hand the partitions over (a plain leave where a hand-off does not apply).
        # The loop above stops first: it commits what it read from ``assignment``, which a
        # hand-off round may revoke in between (see docs/chaos.md, "acting without holding").
        await member.close(hand_off=True)


async def _run_consumer(
    args: argparse.Namespace, telemetry: JsonlTelemetry, stop: asyncio.Event
) -> None:
    from aiogroup import Consumer
    from aiogroup.consumer import ConsumerStoppedError
    from aiogroup.errors import AiogroupError

    consumer = Consumer(
        args.bootstrap,
        args.group,
        max_poll_interval_ms=args.rebalance_ms,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=1000,
        fetch_max_wait_ms=100,
        max_poll_records=MAX_RECORDS,
        **_common_options(args, telemetry),
    )
    async with consumer:
        _started(args, telemetry)
        while True:
            if stop.is_set() and not consumer.handing_off:
                consumer.hand_off()  # SIGTERM: read on until the partitions have moved
            try:
                batch = await consumer.getmany(timeout_ms=100)
            except ConsumerStoppedError:
                break  # handed off and left
            except AiogroupError as exc:  # a callback error, a commit failure on poll, ...
                telemetry.emit("member_error", error=repr(exc)[:500])
                continue
            _processed(telemetry, {tp: [r.offset for r in rs] for tp, rs in batch.items()})


def run_aiogroup(args: argparse.Namespace, telemetry: JsonlTelemetry) -> None:
    """Run the member until SIGTERM. A start that cannot reach the broker (started while it
    restarts) is tried again every second, as a service's supervisor would: librdkafka and
    kafka-python keep trying on their own."""
    from aiogroup.errors import BrokerUnreachableError

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        run = _run_group_member if args.kind == "aiogroup" else _run_consumer
        while not stop.is_set():
            try:
                await run(args, telemetry, stop)
                return
            except BrokerUnreachableError as exc:
                if getattr(args, "started", False):
                    raise
                telemetry.emit("start_failed", error=repr(exc)[:300])
            with contextlib.suppress(TimeoutError):  # the supervisor's pace, or SIGTERM
                await asyncio.wait_for(stop.wait(), 1.0)

    asyncio.run(main())


# -- peers -----------------------------------------------------------------------------------


def _stop_on_sigterm() -> threading.Event:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _committed(
    telemetry: JsonlTelemetry,
    offsets: Mapping[TopicPartition, int],
    generation: int | None,
    started: float,
) -> None:
    if offsets:
        telemetry.offsets_committed(offsets, generation, started=started)


def librdkafka_group_options(
    group_protocol: str, *, assignors: str, session_ms: int, heartbeat_ms: int
) -> dict[str, Any]:
    """The group settings of a librdkafka member (``assignors``: comma-separated). Under
    KIP-848 (``group.protocol=consumer``)
    librdkafka refuses ``partition.assignment.strategy`` (the broker assigns, with its default
    assignor unless ``group.remote.assignor`` names one), ``session.timeout.ms`` and
    ``heartbeat.interval.ms`` (the group's, set broker side: ``consumer.session.timeout.ms``,
    ``consumer.heartbeat.interval.ms``); a client that sets them fails to start."""
    if group_protocol == "consumer":
        return {"group.protocol": "consumer"}
    return {
        "partition.assignment.strategy": assignors,
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": heartbeat_ms,
    }


def run_librdkafka(args: argparse.Namespace, telemetry: JsonlTelemetry) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    from aiogroup.observability.telemetry import ConfluentRecorder, confluent_generation

    stop = _stop_on_sigterm()
    config: dict[str, Any] = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.name,
        **librdkafka_group_options(
            args.group_protocol,
            assignors=args.assignors,
            session_ms=args.session_ms,
            heartbeat_ms=args.heartbeat_ms,
        ),
        "max.poll.interval.ms": max(args.rebalance_ms, args.session_ms),
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "error_cb": lambda err: (
            telemetry.emit("client_error", error=str(err)[:300]) if err.fatal() else None
        ),
    }
    if args.instance_id:
        config["group.instance.id"] = args.instance_id
    consumer = Consumer(config)

    def commit(reason: str) -> None:
        started = time.time()
        try:
            done = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if getattr(err, "code", lambda: None)() == KafkaError._NO_OFFSET:
                return  # nothing consumed since the last commit
            telemetry.commit_failed(
                {}, confluent_generation(consumer), error=str(exc)[:300], started=started
            )
            return
        offsets = {
            TopicPartition(tp.topic, tp.partition): tp.offset
            for tp in done or []
            if tp.offset >= 0 and tp.error is None
        }
        _committed(telemetry, offsets, confluent_generation(consumer), started)

    def on_revoke(c: Any, partitions: list[Any]) -> None:
        if partitions:
            commit("revoke")  # what was processed, before it moves

    protocol = "consumer" if args.group_protocol == "consumer" else args.assignors.split(",")[0]
    recorder = ConfluentRecorder(
        telemetry, protocol=protocol, group_id=args.group, on_revoke=on_revoke
    )
    callbacks = recorder.callbacks()
    consumer.subscribe([args.topic], **callbacks)
    telemetry.emit("started", kind=args.kind)
    last_commit = time.monotonic()
    while not stop.is_set():
        messages = consumer.consume(num_messages=MAX_RECORDS, timeout=0.1)
        batch: dict[TopicPartition, list[int]] = {}
        for m in messages:
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            if m.error() is None and topic is not None and partition is not None:
                batch.setdefault(TopicPartition(topic, partition), []).append(offset or 0)
        _processed(telemetry, batch)
        recorder.observe(consumer)
        if time.monotonic() - last_commit >= 1.0:
            last_commit = time.monotonic()
            commit("interval")
    consumer.close()  # commits nothing (auto-commit off): on_revoke commits, then it leaves


def run_kafka_python(args: argparse.Namespace, telemetry: JsonlTelemetry) -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.errors import KafkaError

    from aiogroup.observability.telemetry import KafkaPythonListener

    stop = _stop_on_sigterm()
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.name,
        group_instance_id=args.instance_id or None,
        partition_assignment_strategy=[CooperativeStickyAssignor],
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        max_poll_interval_ms=max(args.rebalance_ms, args.session_ms),
        request_timeout_ms=max(args.request_timeout_ms, args.rebalance_ms + 5000),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    )
    coordinator = consumer._coordinator

    def generation() -> int | None:
        try:
            return int(coordinator._generation.generation_id)
        except Exception:
            return None

    def commit() -> None:
        offsets = consumer._subscription.all_consumed_offsets()
        if not offsets:
            return
        started = time.time()
        try:
            consumer.commit(offsets)
        except KafkaError as exc:
            telemetry.commit_failed({}, generation(), error=repr(exc)[:300], started=started)
            return
        _committed(
            telemetry,
            {TopicPartition(tp.topic, tp.partition): om.offset for tp, om in offsets.items()},
            generation(),
            started,
        )

    # No commit in the revocation listener: kafka-python 3 runs listeners on its IO thread,
    # where a blocking commit raises ("Cannot block on net.run() from the IO thread").
    listener = KafkaPythonListener(
        telemetry, None, consumer=consumer, protocol=ASSIGNOR, group_id=args.group
    )
    _record_kafka_python_leader(coordinator, telemetry, generation)
    # Know the topic before the first JoinGroup (kafka-python 3.0.12 may hang after joining
    # with no metadata; see the conformance suite). Bounded.
    for _ in range(100):
        if consumer.partitions_for_topic(args.topic):
            break
    consumer.subscribe([args.topic], listener=listener)
    telemetry.emit("started", kind=args.kind)
    last_commit = time.monotonic()
    while not stop.is_set():
        polled = consumer.poll(timeout_ms=100, max_records=MAX_RECORDS)
        _processed(
            telemetry,
            {
                TopicPartition(tp.topic, tp.partition): [r.offset for r in rs]
                for tp, rs in polled.items()
            },
        )
        listener.observe()
        if time.monotonic() - last_commit >= 1.0:
            last_commit = time.monotonic()
            commit()
    consumer.close()


def _record_kafka_python_leader(
    coordinator: Any, telemetry: JsonlTelemetry, generation: Any
) -> None:
    """Wrap kafka-python's leader assignment to write ``leader_round`` (no public hook)."""
    perform = coordinator._perform_assignment

    def recorded(leader_id: str, protocol: str, members: Any) -> Any:
        result = perform(leader_id, protocol, members)
        try:
            assignments: dict[str, Iterable[TopicPartition]] = {}
            for member_id, assignment in result.items():
                assignments[str(member_id)] = [
                    TopicPartition(str(tp.topic), int(tp.partition))
                    for tp in assignment.partitions()
                ]
            telemetry.leader_round(generation() or -1, assignments)
        except Exception as exc:  # telemetry never breaks the peer
            telemetry.emit("telemetry_error", error=repr(exc)[:300])
        return result

    coordinator._perform_assignment = recorded


def exec_peer(args: argparse.Namespace) -> None:
    """Become the ``java`` or ``franz-go`` peer (built first if needed): same pid, so the
    runner's signals reach it; it writes the telemetry itself."""
    from aiogroup.testing.peers import peer_command

    argv = peer_command(
        args.kind,
        bootstrap=args.bootstrap,
        group=args.group,
        topic=args.topic,
        name=args.name,
        assignors=args.assignors.split(","),
        instance_id=args.instance_id,
        session_ms=args.session_ms,
        heartbeat_ms=args.heartbeat_ms,
        rebalance_ms=max(args.rebalance_ms, args.session_ms),
        commit_every_ms=1000,
        max_records=MAX_RECORDS,
        telemetry_dir=args.dir,
        protocol=args.group_protocol,
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)


# -- entry point -----------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m aiogroup.tools.chaos.member")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--dir", required=True, help="telemetry directory")
    parser.add_argument("--instance-id", default="", help="static membership (KIP-345)")
    parser.add_argument(
        "--assignors", default=ASSIGNOR, help="comma-separated (not for kafka-python)"
    )
    parser.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="'consumer': KIP-848 (Kafka 4.x; the kinds of CONSUMER_PROTOCOL_KINDS)",
    )
    parser.add_argument(
        "--telemetry-topic",
        default="",
        help="also send every telemetry event to this topic (KafkaTelemetry; not the peers)",
    )
    parser.add_argument(
        "--telemetry-bootstrap", default="", help="the topic's brokers (default --bootstrap)"
    )
    parser.add_argument("--session-ms", type=int, default=3000)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--rebalance-ms", type=int, default=10000)
    parser.add_argument("--request-timeout-ms", type=int, default=10000)
    parser.add_argument("--commit-every-ms", type=int, default=500)
    parser.add_argument(
        "--close-timeout-ms",
        type=int,
        default=10000,
        help="aiogroup's close bound (the runner kills a member after 20 s)",
    )
    args = parser.parse_args(argv)
    if args.telemetry_topic and args.kind in PEER_KINDS:
        parser.error(f"{args.kind} writes its own telemetry: no --telemetry-topic")
    if args.group_protocol == "consumer" and args.kind not in CONSUMER_PROTOCOL_KINDS:
        parser.error(f"{args.kind} speaks only the classic group protocol")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.kind in PEER_KINDS:
        try:
            exec_peer(args)  # returns only if it could not be built or started
        except Exception as exc:
            with JsonlTelemetry(args.dir, args.name, client=CLIENT_OF[args.kind]) as telemetry:
                _error(telemetry, "exec", exc)
            raise
    telemetry = _telemetry(args)
    runner = {
        "aiogroup": run_aiogroup,
        "aiogroup-consumer": run_aiogroup,
        "librdkafka": run_librdkafka,
        "kafka-python": run_kafka_python,
    }[args.kind]
    try:
        runner(args, telemetry)
    except BaseException as exc:
        _error(telemetry, "main", exc)
        telemetry.close()
        raise
    telemetry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
