"""Opt-in rebalance telemetry: one JSON Lines file per member process (or a Kafka topic,
:mod:`aiogroup.observability.telemetry_kafka`).

Every event is one line, written with a single ``write(2)`` on a descriptor opened with
``O_APPEND``, so lines from one process never interleave and a crash loses at most the line being
written (the audit counts a truncated last line as corrupt and goes on). Files rotate by size.

The sink never raises into the member: every failure is logged once per kind and counted in
:attr:`TelemetrySink.errors`.

Schema (version 1; the full table is in docs/telemetry.md, "Event schema, version 1")::

    {"v": 1, "type": "partitions_assigned", "ts": 1700000000.123, "seq": 7,
     "group": "g", "member": "worker-1", "member_id": "worker-1-3f2a...", "client": "aiogroup",
     "pid": 4242, "host": "box", "generation_id": 3, "protocol": "cooperative-sticky",
     "rebalance_protocol": "cooperative", "partitions": {"orders": [0, 1]},
     "started": 1700000000.101, "ended": 1700000000.120}

Wrappers make peers write the same events: :func:`confluent_callbacks` for confluent-kafka
(librdkafka) ``Consumer.subscribe`` and :class:`KafkaPythonListener` for kafka-python 3.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Self

from aiokafka.abc import ConsumerRebalanceListener as AiokafkaRebalanceListener
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from aiogroup.protocol.types import TopicPartition, group_by_topic

__all__ = [
    "SCHEMA_VERSION",
    "AiokafkaListener",
    "ConfluentRecorder",
    "JsonlTelemetry",
    "KafkaPythonListener",
    "TelemetrySink",
    "confluent_callbacks",
    "confluent_generation",
    "rebalance_protocol_of",
]

log = logging.getLogger(__name__)

#: Version written in every event's ``"v"`` field. Readers skip (and count) newer versions.
SCHEMA_VERSION = 1

Clock = Callable[[], float]


def rebalance_protocol_of(protocol: str | None) -> str:
    """``"cooperative"`` for cooperative assignors (KIP-429) and for KIP-848's consumer group
    protocol (``"consumer"``: the broker assigns, and a member gives up only what moves),
    ``"eager"`` otherwise."""
    if protocol and ("cooperative" in protocol.lower() or protocol == "consumer"):
        return "cooperative"
    return "eager"


def _topic_partition(tp: Any) -> TopicPartition:
    """Any peer's partition (a plain tuple, or an object with topic/partition) as ours."""
    if isinstance(tp, tuple) and len(tp) >= 2 and not hasattr(tp, "topic"):
        return TopicPartition(str(tp[0]), int(tp[1]))
    return TopicPartition(str(tp.topic), int(tp.partition))


def _grouped(partitions: Iterable[Any]) -> dict[str, list[int]]:
    """Partitions as ``{topic: [p, ...]}`` (sorted). Accepts anything with topic/partition."""
    grouped = group_by_topic(_topic_partition(tp) for tp in partitions)
    return {topic: list(ps) for topic, ps in grouped.items()}


class TelemetrySink:
    """The events every telemetry sink writes, one JSON object each (schema version 1).

    Subclasses say where a finished event goes (:meth:`_write`, called under the sink's lock
    with the event and its serialised line, without the newline): :class:`JsonlTelemetry` to
    a file, :class:`aiogroup.observability.telemetry_kafka.KafkaTelemetry` to a Kafka topic.
    ``member_name`` is the stable identity the audit keys ownership on (a Kafka member id
    changes whenever the member rejoins from scratch); it defaults to
    ``<host>-<pid>-<random>``. ``clock`` gives wall-clock seconds (the audit compares members
    across hosts). A sink never raises into the member: failures are logged once per kind and
    counted in :attr:`errors`.
    """

    def __init__(
        self,
        member_name: str | None = None,
        *,
        clock: Clock = time.time,
        client: str = "aiogroup",
        group_id: str | None = None,
    ) -> None:
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.member_name = member_name or f"{self.host}-{self.pid}-{uuid.uuid4().hex[:8]}"
        self.clock = clock
        self.client = client
        self.group_id = group_id
        self.member_id: str | None = None
        self.generation_id: int | None = None
        #: Number of events that could not be written (logged, never raised).
        self.errors = 0
        #: Number of events written.
        self.written = 0
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        self._logged: set[str] = set()

    def _error(self, kind: str, exc: BaseException) -> None:
        self.errors += 1
        if kind not in self._logged:  # log each kind of failure once, count all of them
            self._logged.add(kind)
            log.warning("telemetry %s failed for %s: %r", kind, self.member_name, exc)

    def _write(self, record: Mapping[str, Any], line: bytes) -> None:
        """Deliver one event (its JSON ``line`` has no newline); called under the lock."""
        raise NotImplementedError

    def emit(self, event_type: str, **fields: Any) -> None:
        """Write one event. Never raises: failures are logged and counted in :attr:`errors`."""
        try:
            with self._lock:
                if self._closed:
                    return
                record: dict[str, Any] = {
                    "v": SCHEMA_VERSION,
                    "type": event_type,
                    "ts": float(self.clock()),
                    "seq": next(self._seq),
                    "group": self.group_id,
                    "member": self.member_name,
                    "member_id": self.member_id,
                    "client": self.client,
                    "pid": self.pid,
                    "host": self.host,
                }
                record.update(fields)
                self._write(record, json.dumps(record, separators=(",", ":"), default=str).encode())
        except Exception as exc:  # the sink must never break the member
            self._error(event_type, exc)

    # -- events ------------------------------------------------------------------------------
    def joined(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        protocol: str | None,
        *,
        leader: bool | None = None,
        group_instance_id: str | None = None,
        rebalance_protocol: str | None = None,
        **extra: Any,
    ) -> None:
        """The member completed JoinGroup (and learnt its member_id and generation_id).

        ``rebalance_protocol``: the one the member runs, if it knows (KIP-429: the highest
        every assignor it offers supports, so ``[cooperative-sticky, range]`` runs eager in a
        group whose protocol is cooperative-sticky); by default guessed from ``protocol``."""
        self.group_id = group_id
        self.member_id = member_id
        self.generation_id = generation_id
        self.emit(
            "joined",
            generation_id=generation_id,
            protocol=protocol,
            rebalance_protocol=rebalance_protocol or rebalance_protocol_of(protocol),
            leader=leader,
            group_instance_id=group_instance_id,
            **extra,
        )

    def _partitions_event(
        self,
        event_type: str,
        partitions: Iterable[TopicPartition],
        generation_id: int | None,
        protocol: str | None,
        started: float,
        ended: float,
        error: str | None,
        rebalance_protocol: str | None,
    ) -> None:
        try:
            grouped = _grouped(partitions)
        except Exception as exc:
            self._error(event_type, exc)
            return
        if generation_id is not None:
            self.generation_id = generation_id
        self.emit(
            event_type,
            generation_id=generation_id,
            protocol=protocol,
            rebalance_protocol=rebalance_protocol or rebalance_protocol_of(protocol),
            partitions=grouped,
            started=float(started),
            ended=float(ended),
            error=error,
        )

    def partitions_assigned(
        self,
        partitions: Iterable[TopicPartition],
        generation_id: int | None,
        protocol: str | None,
        started: float,
        ended: float,
        *,
        error: str | None = None,
        rebalance_protocol: str | None = None,
    ) -> None:
        """The assigned callback ran from ``started`` to ``ended`` (incremental under KIP-429)."""
        self._partitions_event(
            "partitions_assigned",
            partitions,
            generation_id,
            protocol,
            started,
            ended,
            error,
            rebalance_protocol,
        )

    def partitions_revoked(
        self,
        partitions: Iterable[TopicPartition],
        generation_id: int | None,
        protocol: str | None,
        started: float,
        ended: float,
        *,
        error: str | None = None,
        rebalance_protocol: str | None = None,
    ) -> None:
        """The revoked callback ran from ``started`` to ``ended``."""
        self._partitions_event(
            "partitions_revoked",
            partitions,
            generation_id,
            protocol,
            started,
            ended,
            error,
            rebalance_protocol,
        )

    def partitions_lost(
        self,
        partitions: Iterable[TopicPartition],
        generation_id: int | None,
        protocol: str | None,
        started: float,
        ended: float,
        *,
        error: str | None = None,
        rebalance_protocol: str | None = None,
    ) -> None:
        """The lost callback (KIP-429 ``onPartitionsLost``) ran from ``started`` to ``ended``."""
        self._partitions_event(
            "partitions_lost",
            partitions,
            generation_id,
            protocol,
            started,
            ended,
            error,
            rebalance_protocol,
        )

    def rebalance_completed(self, generation_id: int | None, latency_s: float) -> None:
        """A rebalance finished; ``latency_s`` from its start to the end of the last callback."""
        self.emit("rebalance_completed", generation_id=generation_id, latency_s=float(latency_s))

    def rebalance_failed(
        self, reason: str, latency_s: float, generation_id: int | None = None
    ) -> None:
        """A rebalance attempt failed (error code name or exception text)."""
        self.emit(
            "rebalance_failed",
            generation_id=generation_id,
            reason=str(reason)[:500],
            latency_s=float(latency_s),
        )

    def offsets_committed(
        self,
        offsets: Mapping[TopicPartition, int],
        generation_id: int | None,
        *,
        started: float | None = None,
    ) -> None:
        """Offsets committed (next offset to read per partition); ``started``: when the commit
        was sent (the event itself is written when the answer arrived)."""
        try:
            by_topic: dict[str, dict[str, int]] = {}
            for tp, offset in offsets.items():
                by_topic.setdefault(str(tp[0]), {})[str(int(tp[1]))] = int(offset)
        except Exception as exc:
            self._error("offsets_committed", exc)
            return
        extra: dict[str, Any] = {} if started is None else {"started": float(started)}
        self.emit("offsets_committed", generation_id=generation_id, offsets=by_topic, **extra)

    def commit_failed(
        self,
        offsets: Mapping[TopicPartition, int],
        generation_id: int | None,
        *,
        error: str,
        state: str | None = None,
        local: bool = False,
        error_code: int | None = None,
        during_join: bool | None = None,
        started: float | None = None,
    ) -> None:
        """A commit was refused: by the member itself (``local``, no request sent) or by the
        coordinator (``error_code``); ``state`` is the member's state then."""
        try:
            grouped = _grouped(TopicPartition(str(tp[0]), int(tp[1])) for tp in offsets)
        except Exception as exc:
            self._error("commit_failed", exc)
            return
        self.emit(
            "commit_failed",
            generation_id=generation_id,
            partitions=grouped,
            error=str(error)[:500],
            state=state,
            local=bool(local),
            error_code=error_code,
            during_join=during_join,
            started=started,
        )

    def acting(
        self,
        partitions: Iterable[TopicPartition],
        reason: str,
        generation_id: int | None,
        *,
        at: float | None = None,
    ) -> None:
        """The partitions the member may act on changed (all of them, not a delta).

        ``reason``: ``rebalance`` (a callback round or a revocation began), ``lapse`` (a session
        timeout passed without an answer from the coordinator, KAFKA-7026: nothing), ``proof``
        (the coordinator answered again within the generation). ``at`` is when the change took
        effect, if earlier than the event (a lapse is noticed after its deadline).
        """
        try:
            grouped = _grouped(partitions)
        except Exception as exc:
            self._error("acting", exc)
            return
        extra: dict[str, Any] = {} if at is None else {"at": float(at)}
        self.emit(
            "acting", generation_id=generation_id, partitions=grouped, reason=reason, **extra
        )

    def state(self, state: str, generation_id: int | None) -> None:
        """The member's state changed (``joining``, ``stable``, ...; see ``MemberState``)."""
        self.emit("state", generation_id=generation_id, state=str(state))

    def leader_round(
        self,
        generation_id: int,
        assignments: Mapping[str, Iterable[TopicPartition]],
        *,
        withheld: Iterable[TopicPartition] = (),
        stale_claims: Mapping[str, Iterable[TopicPartition]] | None = None,
    ) -> None:
        """This member led ``generation_id``: what it assigned to each member id, what it
        withheld from a new owner (KIP-429 2d) and which claims it ignored as stale."""
        try:
            fields: dict[str, Any] = {
                "assignments": {m: _grouped(tps) for m, tps in assignments.items()},
                "withheld": _grouped(withheld),
                "stale_claims": {m: _grouped(tps) for m, tps in (stale_claims or {}).items()},
            }
        except Exception as exc:
            self._error("leader_round", exc)
            return
        self.emit("leader_round", generation_id=generation_id, **fields)

    def processed(self, tp: TopicPartition, first: int, last: int) -> None:
        """Records with offsets ``first..last`` (inclusive) of ``tp`` were processed."""
        self.emit(
            "processed",
            generation_id=self.generation_id,
            topic=str(tp[0]),
            partition=int(tp[1]),
            first=int(first),
            last=int(last),
        )

    def close(self) -> None:
        """Write the ``closed`` event (the member's end) and release the sink. Idempotent."""
        self.emit("closed", generation_id=self.generation_id, errors=self.errors)
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._finish()

    def _finish(self) -> None:
        """Release what the sink holds, after the last event (once)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlTelemetry(TelemetrySink):
    """Append rebalance events for one member process to ``directory/<member_name>.<n>.jsonl``.

    A file that reaches ``max_bytes`` is closed and the next one (``n + 1``) opened. The other
    arguments are :class:`TelemetrySink`'s.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        member_name: str | None = None,
        *,
        max_bytes: int = 64 * 1024 * 1024,
        clock: Clock = time.time,
        client: str = "aiogroup",
        group_id: str | None = None,
    ) -> None:
        super().__init__(member_name, clock=clock, client=client, group_id=group_id)
        self.directory = Path(directory)
        self.max_bytes = max(1024, int(max_bytes))
        self._fd: int | None = None
        self._size = 0
        self._index = 0
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.member_name)
        self._stem = safe or "member"

    @property
    def path(self) -> Path:
        """The file currently written to."""
        return self.directory / f"{self._stem}.{self._index:04d}.jsonl"

    def _open(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            size = os.fstat(fd).st_size
            if size < self.max_bytes:
                self._size = size
                return fd
            os.close(fd)  # a previous process filled this one: move on
            self._index += 1

    def _write(self, record: Mapping[str, Any], line: bytes) -> None:
        line += b"\n"
        if self._fd is None:
            self._fd = self._open()
        elif self._size + len(line) > self.max_bytes and self._size > 0:
            os.close(self._fd)
            self._fd = None
            self._index += 1
            self._fd = self._open()
        written = os.write(self._fd, line)  # one write per line (O_APPEND)
        self._size += written
        if written != len(line):
            raise OSError(f"short write: {written} of {len(line)} bytes")
        self.written += 1

    def _finish(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError as exc:
                    self._error("close", exc)
                self._fd = None


# -- peers: confluent-kafka (librdkafka) ------------------------------------------------------

_CGMD_MAGIC = b"CGMDv2:"


def confluent_generation(consumer: Any) -> int | None:
    """The generation_id librdkafka holds, read from ``consumer_group_metadata()``.

    confluent-kafka exposes no generation; its serialized group metadata (``CGMDv2:`` magic,
    then the int32 generation_id in host byte order, as librdkafka copies it) carries it.
    None when unavailable.
    """
    try:
        blob = consumer.consumer_group_metadata()
        if isinstance(blob, bytes | bytearray) and blob.startswith(_CGMD_MAGIC):
            (generation,) = struct.unpack_from("=i", blob, len(_CGMD_MAGIC))
            return int(generation)
    except Exception:
        return None
    return None


class _PeerRecorder:
    """Bookkeeping shared by the peer wrappers: rebalance start, joins per generation."""

    def __init__(self, telemetry: TelemetrySink, protocol: str | None, group_id: str | None):
        self.telemetry = telemetry
        self.protocol = protocol
        if group_id is not None:
            telemetry.group_id = group_id
        self.rebalance_started: float | None = telemetry.clock()  # subscribe() time
        self.last_generation: int | None = None

    def note_start(self, now: float) -> None:
        if self.rebalance_started is None:
            self.rebalance_started = now

    def note_generation(self, generation: int | None, member_id: str | None) -> None:
        if generation is not None and generation != self.last_generation:
            self.last_generation = generation
            self.telemetry.joined(
                self.telemetry.group_id or "",
                member_id or self.telemetry.member_id or "",
                generation,
                self.protocol,
            )

    def completed(self, generation: int | None, ended: float) -> None:
        started = self.rebalance_started if self.rebalance_started is not None else ended
        self.telemetry.rebalance_completed(generation, max(0.0, ended - started))
        self.rebalance_started = None


class ConfluentRecorder:
    """Records a confluent-kafka (librdkafka) consumer's rebalances around the user's callbacks.

    ``protocol`` is the configured ``partition.assignment.strategy``; with
    ``cooperative-sticky`` librdkafka hands the callbacks incremental lists (KIP-429), which is
    what the events record. The user's callbacks run inside, timed; their exceptions propagate
    unchanged (confluent-kafka re-raises them from ``poll()``).

    librdkafka runs no callback for a member whose cooperative assignment is empty, so the audit
    would not see it in that generation: call :meth:`observe` from the poll loop (cheap) to
    record every generation the member joins.
    """

    def __init__(
        self,
        telemetry: TelemetrySink,
        *,
        protocol: str | None = None,
        group_id: str | None = None,
        on_assign: Callable[[Any, list[Any]], None] | None = None,
        on_revoke: Callable[[Any, list[Any]], None] | None = None,
        on_lost: Callable[[Any, list[Any]], None] | None = None,
    ) -> None:
        telemetry.client = "librdkafka"
        self.telemetry = telemetry
        self.protocol = protocol
        self.on_assign = on_assign
        self.on_revoke = on_revoke
        self.on_lost = on_lost
        self._rec = _PeerRecorder(telemetry, protocol, group_id)

    def callbacks(self) -> dict[str, Callable[[Any, list[Any]], None]]:
        """Keyword arguments for ``Consumer.subscribe``."""
        return {"on_assign": self._assigned, "on_revoke": self._revoked, "on_lost": self._lost}

    def observe(self, consumer: Any) -> None:
        """Record a ``joined`` event if the consumer is in a generation not seen yet."""
        try:
            generation, member_id = self._ids(consumer)
            if generation is not None and generation >= 0:
                self._rec.note_generation(generation, member_id)
        except Exception as exc:  # never break the poll loop
            self.telemetry._error("observe", exc)

    def _ids(self, consumer: Any) -> tuple[int | None, str | None]:
        generation = confluent_generation(consumer)
        try:
            member_id = consumer.memberid()
        except Exception:
            member_id = None
        if member_id:
            self.telemetry.member_id = member_id
        return generation, member_id

    @staticmethod
    def _tps(partitions: list[Any]) -> list[TopicPartition]:
        return [TopicPartition(p.topic, p.partition) for p in partitions]

    def _assigned(self, consumer: Any, partitions: list[Any]) -> None:
        telemetry = self.telemetry
        started = telemetry.clock()
        self._rec.note_start(started)
        generation, member_id = self._ids(consumer)
        self._rec.note_generation(generation, member_id)
        error: str | None = None
        try:
            if self.on_assign is not None:
                self.on_assign(consumer, partitions)
        except BaseException as exc:
            error = repr(exc)
            raise
        finally:
            ended = telemetry.clock()
            telemetry.partitions_assigned(
                self._tps(partitions), generation, self.protocol, started, ended, error=error
            )
            self._rec.completed(generation, ended)

    def _revoked(self, consumer: Any, partitions: list[Any]) -> None:
        self._release("revoked", self.on_revoke, consumer, partitions)

    def _lost(self, consumer: Any, partitions: list[Any]) -> None:
        # confluent-kafka falls back to on_revoke when no on_lost is given; so do we
        self._release("lost", self.on_lost or self.on_revoke, consumer, partitions)

    def _release(
        self,
        kind: str,
        user: Callable[[Any, list[Any]], None] | None,
        consumer: Any,
        partitions: list[Any],
    ) -> None:
        telemetry = self.telemetry
        started = telemetry.clock()
        self._rec.note_start(started)
        generation, _ = self._ids(consumer)
        error: str | None = None
        try:
            if user is not None:
                user(consumer, partitions)
        except BaseException as exc:
            error = repr(exc)
            raise
        finally:
            record = (
                telemetry.partitions_revoked if kind == "revoked" else telemetry.partitions_lost
            )
            record(
                self._tps(partitions), generation, self.protocol, started, telemetry.clock(),
                error=error,
            )


def confluent_callbacks(
    telemetry: TelemetrySink,
    *,
    protocol: str | None = None,
    group_id: str | None = None,
    on_assign: Callable[[Any, list[Any]], None] | None = None,
    on_revoke: Callable[[Any, list[Any]], None] | None = None,
    on_lost: Callable[[Any, list[Any]], None] | None = None,
) -> dict[str, Callable[[Any, list[Any]], None]]:
    """Keyword arguments for confluent-kafka ``Consumer.subscribe`` that record events.

    Usage: ``consumer.subscribe(topics, **confluent_callbacks(telemetry, protocol=...))``.
    See :class:`ConfluentRecorder` (and its ``observe``) for the details.
    """
    return ConfluentRecorder(
        telemetry,
        protocol=protocol,
        group_id=group_id,
        on_assign=on_assign,
        on_revoke=on_revoke,
        on_lost=on_lost,
    ).callbacks()


# -- peers: kafka-python 3 -------------------------------------------------------------------


class KafkaPythonListener(ConsumerRebalanceListener):  # type: ignore[misc]
    """A kafka-python ``ConsumerRebalanceListener`` that records events around the user's own.

    Pass it as ``consumer.subscribe(topics, listener=KafkaPythonListener(telemetry, ...))``.
    ``consumer`` (optional, may be set later via :attr:`consumer`) lets the listener read the
    generation_id and member_id from kafka-python's coordinator.
    """

    def __init__(
        self,
        telemetry: TelemetrySink,
        listener: Any = None,
        *,
        consumer: Any = None,
        protocol: str | None = None,
        group_id: str | None = None,
    ) -> None:
        telemetry.client = "kafka-python"
        self.telemetry = telemetry
        self.listener = listener
        self.consumer = consumer
        self.protocol = protocol
        self._rec = _PeerRecorder(telemetry, protocol, group_id)

    def _generation(self) -> int | None:
        try:
            gen = self.consumer._coordinator._generation
            member_id = gen.member_id
            if member_id:
                self.telemetry.member_id = member_id
            if self.protocol is None and gen.protocol:
                self.protocol = self._rec.protocol = gen.protocol
            generation = int(gen.generation_id)
            return generation if generation >= 0 else None
        except Exception:
            return None

    def observe(self, consumer: Any = None) -> None:
        """Record a ``joined`` event if the consumer is in a generation not seen yet.

        kafka-python calls no listener method when a cooperative round adds nothing; call this
        from the poll loop so the audit sees every generation the member joins.
        """
        if consumer is not None:
            self.consumer = consumer
        generation = self._generation()
        if generation is not None:
            self._rec.note_generation(generation, self.telemetry.member_id)

    def _call(self, name: str, partitions: Any) -> None:
        method = getattr(self.listener, name, None) if self.listener is not None else None
        if method is not None:
            method(partitions)

    def _run(self, kind: str, name: str, partitions: Any) -> None:
        started = self.telemetry.clock()
        self._rec.note_start(started)
        generation = self._generation()
        if kind == "assigned":
            self._rec.note_generation(generation, self.telemetry.member_id)
        error: str | None = None
        try:
            self._call(name, partitions)
        except BaseException as exc:
            error = repr(exc)
            raise
        finally:
            ended = self.telemetry.clock()
            tps = [TopicPartition(p.topic, p.partition) for p in partitions]
            record = getattr(self.telemetry, f"partitions_{kind}")
            record(tps, generation, self.protocol, started, ended, error=error)
            if kind == "assigned":
                self._rec.completed(generation, ended)

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._run("revoked", "on_partitions_revoked", revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._run("assigned", "on_partitions_assigned", assigned)

    def on_partitions_lost(self, lost: Any) -> None:
        if self.listener is not None and hasattr(self.listener, "on_partitions_lost"):
            self._run("lost", "on_partitions_lost", lost)
        else:  # kafka-python's default on_partitions_lost delegates to on_partitions_revoked
            self._run("lost", "on_partitions_revoked", lost)


class AiokafkaListener(AiokafkaRebalanceListener):  # type: ignore[misc]
    """An aiokafka ``ConsumerRebalanceListener`` that records events around the user's own
    (eager only: aiokafka has no cooperative protocol and no ``on_partitions_lost``).

    Pass it as ``consumer.subscribe(topics, listener=AiokafkaListener(telemetry, ...))``;
    ``consumer`` (optional, may be set later) lets it read the generation and member id from
    aiokafka's coordinator. aiokafka awaits the methods, so the user's may be coroutines.
    """

    def __init__(
        self,
        telemetry: TelemetrySink,
        listener: Any = None,
        *,
        consumer: Any = None,
        protocol: str | None = None,
        group_id: str | None = None,
    ) -> None:
        telemetry.client = "aiokafka"
        self.telemetry = telemetry
        self.listener = listener
        self.consumer = consumer
        self.protocol = protocol
        self._rec = _PeerRecorder(telemetry, protocol, group_id)

    def _generation(self) -> int | None:
        try:
            coordinator = self.consumer._coordinator
            if coordinator.member_id:
                self.telemetry.member_id = coordinator.member_id
            generation = int(coordinator.generation)
            return generation if generation >= 0 else None
        except Exception:
            return None

    async def _run(self, kind: str, partitions: Any) -> None:
        started = self.telemetry.clock()
        self._rec.note_start(started)
        generation = self._generation()
        if kind == "assigned":
            self._rec.note_generation(generation, self.telemetry.member_id)
        error: str | None = None
        try:
            method = getattr(self.listener, f"on_partitions_{kind}", None)
            if method is not None:
                result = method(partitions)
                if hasattr(result, "__await__"):
                    await result
        except BaseException as exc:
            error = repr(exc)
            raise
        finally:
            ended = self.telemetry.clock()
            tps = [TopicPartition(p.topic, p.partition) for p in partitions]
            record = getattr(self.telemetry, f"partitions_{kind}")
            record(tps, generation, self.protocol, started, ended, error=error)
            if kind == "assigned":
                self._rec.completed(generation, ended)

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._run("revoked", revoked)

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._run("assigned", assigned)

    async def stop(self) -> None:
        """Stop the consumer, recording that its partitions were given up.

        aiokafka's ``stop()`` leaves the group without calling ``on_partitions_revoked``
        (Java's ``close()`` calls it), so without this the audit would see the member own its
        last partitions for ever. Recorded as a revocation from the start of the stop to its
        end, with no callback run.
        """
        held = list(self.consumer.assignment())
        generation = self._generation()
        started = self.telemetry.clock()
        await self.consumer.stop()
        if held:
            tps = [TopicPartition(p.topic, p.partition) for p in held]
            self.telemetry.partitions_revoked(
                tps, generation, self.protocol, started, self.telemetry.clock()
            )
