"""Rebalance telemetry to a Kafka topic: the same events as the JSON Lines sink, one record each.

:class:`KafkaTelemetry` is a :class:`~aiogroup.observability.telemetry.TelemetrySink`: an
aiogroup member, a confluent-kafka recorder or a kafka-python listener writes to it exactly as
to :class:`~aiogroup.observability.telemetry.JsonlTelemetry`. Each event becomes one record:

* **value**: the event's JSON object, the very bytes a JSON Lines file would hold (without the
  newline), so the audit parses both the same way;
* **key**: ``<group>/<member>`` (UTF-8). Records are spread by the key's murmur2 hash, as Java's
  default partitioner does, so one member's events stay in one partition, in order;
* **timestamp**: the event's ``ts`` (CreateTime).

**It never blocks or breaks the member.** ``emit()`` appends to a bounded buffer and returns; a
thread of the sink's own (its own event loop) sends the buffer with Produce requests. When the
buffer is full (the broker is slow or unreachable) new events are **dropped, never waited
for**: every drop is counted (:attr:`KafkaTelemetry.dropped`, ``metrics()``'s
``records-dropped-total``), the first one is logged at once as a warning, later ones in one
line per ``report_interval_s``, and ``close()`` logs what it could not deliver. A record the
broker refuses for good (too large, not authorised) is dropped and counted the same way.

**Produced with aiogroup's own wire code.** Requests go through the group member's transport
(:class:`aiogroup.client.transport.Transport`: aiokafka's connections, TLS and SASL, versions
negotiated per connection) and leaders come from the consumer's metadata request
(:class:`aiogroup.consumer.wire.DataPlane`); record batches are built by the library's one
encoder, :func:`aiogroup.protocol.record_batch.encode_batch` (magic v2, aiokafka's builder).
One request is in flight at a time and a failed batch is retried before any later event,
so each partition keeps the order of the events.

Usage::

    telemetry = KafkaTelemetry("broker:9092", "aiogroup-telemetry", member_name="worker-1")
    async with Consumer(..., telemetry=telemetry) as consumer:
        ...
    await telemetry.aclose()    # sends what is buffered (within close_timeout_s)

The topic must exist (the sink creates nothing); ``python -m aiogroup analyze --follow TOPIC``
audits it live (docs/audit.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiokafka.partitioner import murmur2

from aiogroup.errors import AiogroupError
from aiogroup.observability.telemetry import Clock, TelemetrySink
from aiogroup.protocol.record_batch import BatchRecord, encode_batch
from aiogroup.protocol.types import TopicPartition

__all__ = ["KafkaTelemetry", "record_key"]

log = logging.getLogger(__name__)

#: Per-partition answers worth another try (leadership moving, a topic being created, time-outs).
_RETRIABLE = frozenset({3, 5, 6, 7, 13, 14, 15, 19, 20, 56, 74, 75})


def record_key(group: str | None, member: str) -> bytes:
    """The key of a member's events: ``<group>/<member>``."""
    return f"{group or ''}/{member}".encode()


def _partition_for(key: bytes, partitions: int) -> int:
    """Java's default partitioner for a keyed record (murmur2, made positive)."""
    return (int(murmur2(key)) & 0x7FFFFFFF) % partitions


@dataclass(frozen=True, slots=True)
class _Record:
    key: bytes
    value: bytes
    timestamp_ms: int


class KafkaTelemetry(TelemetrySink):
    """Publish one member's rebalance events to ``topic`` (see the module doc).

    ``buffer_events`` bounds what waits to be sent (in flight included); ``batch_events`` is
    the most sent in one request; ``linger_s`` lets a burst of events (a rebalance writes
    several) share a request. ``client_options`` go to aiokafka's client as for a member
    (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ...).
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topic: str,
        member_name: str | None = None,
        *,
        group_id: str | None = None,
        client: str = "aiogroup",
        clock: Clock = time.time,
        buffer_events: int = 10_000,
        batch_events: int = 500,
        linger_s: float = 0.005,
        acks: int = -1,
        request_timeout_ms: int = 10_000,
        retry_backoff_s: float = 0.2,
        close_timeout_s: float = 5.0,
        report_interval_s: float = 60.0,
        **client_options: Any,
    ) -> None:
        super().__init__(member_name, clock=clock, client=client, group_id=group_id)
        self.bootstrap_servers = bootstrap_servers
        self.topic = topic
        self.buffer_events = max(1, int(buffer_events))
        self.batch_events = max(1, int(batch_events))
        self.linger_s = max(0.0, float(linger_s))
        self.acks = acks
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_s = retry_backoff_s
        self.close_timeout_s = close_timeout_s
        self.report_interval_s = report_interval_s
        self._client_options = client_options
        #: Events given up: the buffer was full, the broker refused them for good, or close()
        #: could not deliver them in time.
        self.dropped = 0
        self._dropped_reported = 0
        self._drop_logged_at: float | None = None
        self._buffer: deque[_Record] = deque()
        self._in_flight = 0
        self._stopping = False
        self._abandon = False
        self._signalled = False
        self._loop = asyncio.new_event_loop()
        self._wake: asyncio.Event | None = None
        self._thread = threading.Thread(
            target=self._thread_main, name=f"aiogroup-telemetry-{topic}", daemon=True
        )
        self._thread.start()

    # -- the member's side: never blocks ---------------------------------------------------

    def _write(self, record: Mapping[str, Any], line: bytes) -> None:
        member = str(record.get("member", self.member_name))
        if len(self._buffer) + self._in_flight >= self.buffer_events:
            self._drop(1, "the buffer is full (the broker is slow or unreachable)")
            return
        ts = record.get("ts")
        stamp = int(float(ts) * 1000) if isinstance(ts, int | float) else 0
        self._buffer.append(_Record(record_key(record.get("group"), member), line, stamp))
        if not self._signalled:
            self._signalled = True
            self._loop.call_soon_threadsafe(self._signal)

    def forward(self, line: bytes) -> None:
        """Send an event written elsewhere (a line of a JSON Lines file, as it is), keyed by
        its own group and member: a recording replayed into the topic. Never raises; a line
        that is not an event goes under the empty key, for the audit to count as bad input."""
        try:
            with self._lock:
                if self._closed:
                    return
                value = line.rstrip(b"\r\n")
                try:
                    event = json.loads(value)
                    event = event if isinstance(event, dict) else {}
                except ValueError:
                    event = {}
                member = event.get("member")
                record = {"group": event.get("group"), "member": member if member else "",
                          "ts": event.get("ts") if isinstance(event.get("ts"), int | float)
                          else self.clock()}
                self._write(record, value)
        except Exception as exc:  # the sink must never break its caller
            self._error("forward", exc)

    def _drop(self, count: int, why: str) -> None:
        """Count ``count`` lost events; a warning for the first, then one per interval."""
        self.dropped += count
        now = time.monotonic()
        last = self._drop_logged_at
        if last is None or now - last >= self.report_interval_s:
            self._drop_logged_at = now
            log.warning(
                "telemetry of %s to topic %s: %d event(s) dropped so far (%d since the last "
                "report): %s",
                self.member_name, self.topic, self.dropped, self.dropped - self._dropped_reported,
                why,
            )
            self._dropped_reported = self.dropped

    def metrics(self) -> dict[str, float]:
        """``records-sent-total``, ``records-dropped-total``, ``buffer-records`` (waiting or in
        flight) and ``errors-total``."""
        with self._lock:
            return {
                "records-sent-total": float(self.written),
                "records-dropped-total": float(self.dropped),
                "buffer-records": float(len(self._buffer) + self._in_flight),
                "errors-total": float(self.errors),
            }

    def close(self, *, closed_event: bool = True) -> None:
        """Write the ``closed`` event, send what is buffered within ``close_timeout_s``, stop.

        Whatever is still unsent then is dropped, counted and logged. Idempotent. With
        ``closed_event=False`` no event of the sink's own is written: a sink that only
        forwards another's events (which wrote its own ``closed``)."""
        if closed_event:
            super().close()
            return
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._finish()

    async def aclose(self) -> None:
        """:meth:`close` from a coroutine: the event loop keeps running while the sink sends
        (``close()`` waits in the calling thread, up to ``close_timeout_s``)."""
        await asyncio.to_thread(self.close)

    def _finish(self) -> None:
        with self._lock:
            self._stopping = True
        self._loop.call_soon_threadsafe(self._signal)
        self._thread.join(self.close_timeout_s)
        with self._lock:
            self._abandon = True
            left = len(self._buffer) + self._in_flight
            self._buffer.clear()
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._signal)
            self._thread.join(1.0)
        if left:
            with self._lock:
                self._drop_logged_at = None  # always said at close
                self._drop(left, f"not delivered within close_timeout_s={self.close_timeout_s:g}")

    # -- the sender's side: its own thread and event loop ----------------------------------

    def _signal(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _thread_main(self) -> None:
        try:
            self._loop.run_until_complete(self._run())
        except Exception as exc:  # never seen by the member; counted and logged
            with self._lock:
                self._error("sender", exc)
        finally:
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def _take(self) -> list[_Record]:
        """The next batch (kept as in flight until answered)."""
        with self._lock:
            self._signalled = False
            n = min(self.batch_events, len(self._buffer))
            batch = [self._buffer.popleft() for _ in range(n)]
            self._in_flight = n
            return batch

    async def _run(self) -> None:
        from aiogroup.client.transport import Transport
        from aiogroup.consumer.wire import DataPlane

        self._wake = asyncio.Event()
        self._wake.set()  # events written before the loop ran
        transport = Transport(
            self.bootstrap_servers,
            self.group_id or "",
            client_id=f"aiogroup-telemetry-{self.member_name}",
            request_timeout_ms=self.request_timeout_ms,
            **self._client_options,
        )
        plane = DataPlane(transport)
        sender = _Sender(self, transport, plane)
        pending: list[_Record] = []
        try:
            while True:
                if not pending:
                    with self._lock:
                        idle, stopping = not self._buffer, self._stopping
                    if idle and stopping:
                        return
                    if idle:
                        await self._wake.wait()
                        self._wake.clear()
                    if self.linger_s and not self._stopping:
                        await asyncio.sleep(self.linger_s)  # let a burst share one request
                    pending = self._take()
                    if not pending:
                        continue
                if self._abandon:
                    return
                pending = await sender.send(pending)
                with self._lock:
                    self._in_flight = len(pending)
                if pending:  # a retriable failure: back off, then the same batch first
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stop_wait(), self.retry_backoff_s)
        finally:
            await transport.close()

    async def _stop_wait(self) -> None:
        """Returns when close() gives up (the back-off is cut short then)."""
        while not self._abandon:
            assert self._wake is not None
            await self._wake.wait()
            self._wake.clear()


class _Sender:
    """Produce requests for one sink: metadata, partitioning, answers."""

    def __init__(self, sink: KafkaTelemetry, transport: Any, plane: Any) -> None:
        self.sink = sink
        self.transport = transport
        self.plane = plane
        self.started = False
        self.partitions = 0
        self.leaders: dict[int, int] = {}
        self.problem: str | None = None

    def _trouble(self, what: str) -> None:
        """Log a sending problem once until sending works again."""
        if self.problem != what:
            self.problem = what
            log.warning("telemetry of %s to topic %s: %s (retrying; events wait in the "
                        "buffer, then are dropped and counted)",
                        self.sink.member_name, self.sink.topic, what)

    async def _prepare(self) -> bool:
        if not self.started:
            await self.transport.start()
            self.started = True
        if not self.partitions or not self.leaders:
            view = await self.plane.metadata([self.sink.topic])
            self.partitions = view.partitions.get(self.sink.topic, 0)
            self.leaders = {tp.partition: node for tp, (node, _) in view.leaders.items()}
            if not self.partitions:
                self._trouble("the topic does not exist")
                return False
        return True

    async def send(self, batch: list[_Record]) -> list[_Record]:
        """Send ``batch``; returns what must be sent again (a retriable failure)."""
        try:
            if not await self._prepare():
                return batch
        except AiogroupError as exc:
            self._trouble(f"cannot reach the cluster: {exc}")
            return batch
        by_partition: dict[int, list[_Record]] = {}
        for r in batch:
            by_partition.setdefault(_partition_for(r.key, self.partitions), []).append(r)
        by_node: dict[int, list[int]] = {}
        retry: list[_Record] = []
        for p, records in by_partition.items():
            node = self.leaders.get(p)
            if node is None:
                retry.extend(records)
            else:
                by_node.setdefault(node, []).append(p)
        for node, parts in by_node.items():
            retry.extend(await self._produce(node, {p: by_partition[p] for p in parts}))
        if retry:
            self.leaders = {}  # look the leaders up again before the retry
        else:
            self.problem = None
        order = {id(r): i for i, r in enumerate(batch)}
        return sorted(retry, key=lambda r: order[id(r)])

    async def _produce(self, node: int, parts: dict[int, list[_Record]]) -> list[_Record]:
        from aiogroup.client.produce import produce

        sink = self.sink
        data = {TopicPartition(sink.topic, p): _batch_bytes(rs) for p, rs in parts.items()}
        try:
            codes = await produce(
                self.transport, node, data, acks=sink.acks, timeout_ms=sink.request_timeout_ms
            )
        except AiogroupError as exc:
            self._trouble(f"Produce to node {node} failed: {exc}")
            return [r for records in parts.values() for r in records]
        retry: list[_Record] = []
        for p, records in parts.items():
            code = codes[TopicPartition(sink.topic, p)]
            if code == 0:
                with sink._lock:
                    sink.written += len(records)
            elif code is None:  # left out of the answer: try again
                retry.extend(records)
            elif code in _RETRIABLE:
                self._trouble(f"partition {p} answered error code {code}")
                retry.extend(records)
            else:
                with sink._lock:
                    sink._drop(len(records), f"the broker refused them (error code {code})")
        return retry


def _batch_bytes(records: list[_Record]) -> bytes:
    """One v2 record batch (no compression, not idempotent) of ``records``."""
    return encode_batch([BatchRecord(r.key, r.value, r.timestamp_ms) for r in records])
