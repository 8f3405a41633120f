"""The consumer's sans-I/O core: positions, fetch planning and the prefetch buffer.

No asyncio, no sockets, no clock: every call that needs the time takes ``now`` (seconds, any
monotonic origin). The asyncio driver (:mod:`aiogroup.consumer.fetcher`) asks this core what to
do and feeds back what happened; the :class:`~aiogroup.consumer.Consumer` asks it for records.
It plays the parts of Java's ``SubscriptionState`` (positions, pause flags), ``AbstractFetch``
(which partitions to fetch from which leader now), ``FetchBuffer`` (completed fetches,
bounded) and ``FetchCollector`` (records out, positions moved).

Per partition (:class:`PartitionState`):

- ``position``: the next offset the application has not been given (what ``commit()``
  commits); ``fetch_offset``: the next offset to fetch, ahead of ``position`` by whatever is
  buffered (pipelined prefetch);
- ``reset``: how to find a position when there is none: the committed offset, then
  ``auto_offset_reset`` (``earliest``/``latest``), or ``none`` (an error for the application);
- ``paused`` (not fetched, buffered records kept, not returned) and ``stopped`` (being revoked
  or lost: not fetched, nothing returned, buffer dropped; KAFKA-14196);
- ``version``: bumped by every seek/reset/stop, so a Fetch answer that was in flight across
  one is dropped instead of moving the position back.

Fetch planning: one request per node at a time (its KIP-227 session needs answers in order), to
each partition's leader or its KIP-392 read replica (:mod:`aiogroup.consumer.replicas`);
a partition is fetched when it has a position, is neither paused nor stopped, has no response
buffered (as Java's and aiokafka's), and the whole buffer is below ``fetch_max_bytes``; each
request asks for what is left of it. The buffer therefore holds at most ``fetch_max_bytes`` per
broker with a request in flight (plus the one batch per answer KIP-74 sends whole), however long
the application stops reading. A plan looks only at the partitions a change may have made
fetchable, and reads only at those holding records (issue 29: 1,000 partitions).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from aiogroup.consumer.errors import (
    NoOffsetForPartitionError,
    OffsetOutOfRangeError,
    RecordDeserializationError,
    RecordError,
    TopicAuthorizationFailedError,
)
from aiogroup.consumer.fetch_errors import (
    LEADER_ERRORS,
    OFFSET_OUT_OF_RANGE,
    TOPIC_AUTHORIZATION_FAILED,
)
from aiogroup.consumer.fetch_errors import error_words as _error_words
from aiogroup.consumer.fetch_session import FetchSession, PartitionFetch
from aiogroup.consumer.fetch_types import (
    FetchConfig,
    FetchedPartition,
    FetchedResponse,
    FetchPlan,
)
from aiogroup.consumer.records import (
    ConsumerRecord,
    Deserializer,
    PartitionRecords,
    next_fetch_offset,
)
from aiogroup.consumer.replicas import ReadReplicas
from aiogroup.errors import AiogroupError, ConfigurationError, LocalProtocolError
from aiogroup.observability.health import Stall
from aiogroup.observability.lag import end_offset
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "ConsumerState",
    "FetchConfig",
    "FetchPlan",
    "FetchedPartition",
    "FetchedResponse",
    "PartitionState",
]

log = logging.getLogger("aiogroup.consumer")

#: ListOffsets timestamps (Kafka's ``ListOffsetsRequest.EARLIEST_TIMESTAMP`` / ``LATEST``).
EARLIEST = -2
LATEST = -1

#: Reads of fewer records than this stay on the partition being read.
_STICKY_BELOW = 64
_Reset = Literal["committed", "earliest", "latest", "none"] | int

@dataclass(slots=True)
class PartitionState:
    tp: TopicPartition
    position: int | None = None
    fetch_offset: int | None = None
    #: How to get a position: "committed" / "earliest" / "latest" / a timestamp / "none"
    #: (the policy says raise), or None (the position is valid).
    reset: _Reset | None = "committed"
    lookup_in_flight: bool = False
    paused: bool = False
    stopped: bool = False
    version: int = 0
    buffer: deque[PartitionRecords] = field(default_factory=deque)
    buffered: int = 0
    #: A fetch including this partition is in flight to this node.
    fetching: int | None = None
    #: The buffer holds a response that ends in an error: fetch nothing until it is read.
    blocked: bool = False
    retry_at: float | None = None
    error: AiogroupError | None = None
    committed: int | None = None
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None
    #: When a Fetch answer for this partition last arrived (``now`` of the driver).
    last_fetch: float | None = None
    #: Since when it has wanted records without getting any (None: it wants none now, or
    #: just got some); with the last reason it got none (health: a stalled partition).
    waiting_since: float | None = None
    stall_reason: str = ""


class ConsumerState:
    """Positions, leaders, fetch sessions and the buffer of one consumer (sans-I/O)."""

    def __init__(self, config: FetchConfig | None = None) -> None:
        self.config = config or FetchConfig()
        self._partitions: dict[TopicPartition, PartitionState] = {}
        self._leaders: dict[TopicPartition, tuple[int, int]] = {}
        #: The brokers of the last metadata (None: not told); KIP-392 replicas fetched from.
        self._brokers: frozenset[int] | None = None
        self.replicas = ReadReplicas(self.config.metadata_max_age_ms / 1000)
        self._sessions: dict[int, FetchSession] = {}
        self._in_flight: dict[int, FetchPlan] = {}
        self._node_retry: dict[int, float] = {}
        self._rotation = 0
        #: The partitions :meth:`plan` looks at (issue 29: not every partition per plan):
        #: each change that can make one fetchable puts it in ``_due``; one that waits for a
        #: busy node is parked under it until that node's request ends or its backoff does.
        #: ``_scan``: look at every partition (after new metadata).
        self._due: dict[TopicPartition, PartitionState] = {}
        self._parked: dict[int, dict[TopicPartition, PartitionState]] = {}
        self._scan = True
        #: The partitions holding records or an error for the application, not stopped, in
        #: the order they are read: one read and not finished goes to the back (round robin).
        self._ready: dict[TopicPartition, PartitionState] = {}
        #: Partitions that may have no position, or a backoff (``retry_at``) set: the driver's
        #: every step looks at these, not at every partition (pruned as they are looked at).
        self._unpositioned: dict[TopicPartition, PartitionState] = {}
        self._retrying: dict[TopicPartition, PartitionState] = {}
        self._current: PartitionState | None = None
        self._deferred: tuple[TopicPartition, int, AiogroupError] | None = None
        self.buffered_bytes = 0
        #: Leaders are unknown for some partition (or a broker said they moved).
        self.metadata_needed = False
        #: A buffered response was read to its end since the driver last looked: something
        #: may be fetchable again (the driver clears it).
        self.freed = False
        #: Partitions whose records were handed out since :meth:`take_moved` (metrics).
        self.moved: set[TopicPartition] = set()

    # -- queries ----------------------------------------------------------------------------

    @property
    def assigned(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions)

    def get(self, tp: TopicPartition) -> PartitionState | None:
        return self._partitions.get(tp)

    def position(self, tp: TopicPartition) -> int | None:
        st = self._partitions.get(tp)
        return None if st is None or st.reset is not None else st.position

    def positions(self) -> dict[TopicPartition, int]:
        """Every valid position (partitions being stopped included: they may still commit)."""
        return {
            tp: st.position
            for tp, st in self._partitions.items()
            if st.position is not None and st.reset is None
        }

    def offsets_to_commit(
        self,
        partitions: Iterable[TopicPartition] | None = None,
        *,
        in_hand: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, int]:
        """Positions to commit that differ from the last offset known to be committed.

        ``in_hand``: partitions whose last records the application may still be processing,
        with the offset of the first of them; that offset is committed instead of the position
        (at-least-once, as Java commits only what earlier polls returned).
        """
        states = (
            self._partitions.values()
            if partitions is None
            else [s for tp in partitions if (s := self._partitions.get(tp)) is not None]
        )
        held = in_hand or {}
        out: dict[TopicPartition, int] = {}
        for st in states:
            if st.position is None or st.reset is not None:
                continue
            offset = held.get(st.tp, st.position)
            if offset != st.committed:
                out[st.tp] = offset
        return out

    def mark_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            st = self._partitions.get(tp)
            if st is not None:
                st.committed = offset

    def leader(self, tp: TopicPartition) -> tuple[int, int] | None:
        """``(node_id, leader_epoch)`` of ``tp`` as last known."""
        return self._leaders.get(tp)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(tp.topic for tp in self._partitions)

    def paused(self) -> frozenset[TopicPartition]:
        return frozenset(tp for tp, st in self._partitions.items() if st.paused)

    def next_deadline(self, now: float | None = None) -> float | None:
        """The earliest backoff that ends (the driver plans again then); given ``now``, only
        one still ahead of it. A backoff that has ended is due already: the plan at ``now``
        took its partition, or something else holds it (a Fetch in flight, a full buffer) whose
        end wakes the driver by itself. (A passed one kept the driver waking every
        millisecond: ``retry_at`` stays set after the refetch.)"""
        partitions = self._partitions
        self._retrying = retrying = {
            tp: st
            for tp, st in self._retrying.items()
            if st.retry_at is not None
            and partitions.get(tp) is st
            and (now is None or st.retry_at > now)
        }
        times = [st.retry_at for st in retrying.values() if st.retry_at is not None]
        times.extend(self._node_retry.values())
        if now is not None:
            times = [t for t in times if t > now]
        return min(times) if times else None

    def _backoff(self, st: PartitionState, until: float) -> None:
        st.retry_at = until
        self._retrying[st.tp] = st

    def _to_position(self) -> list[PartitionState]:
        """The partitions without a position (those that found one, or left, are dropped)."""
        partitions = self._partitions
        out = [
            st
            for tp, st in self._unpositioned.items()
            if st.reset is not None and partitions.get(tp) is st
        ]
        if len(out) < len(self._unpositioned):
            self._unpositioned = {st.tp: st for st in out}
        return out

    def has_records(self, allowed: Collection[TopicPartition] | None = None) -> bool:
        """Anything the application could be given now (records or an error to raise)."""
        if self._deferred is not None:
            return True
        for st in self._ready.values():
            if not st.paused and (allowed is None or st.tp in allowed):
                return True
        return False

    def _mark(self, st: PartitionState) -> None:
        """``st`` changed: keep ``_ready`` exact (records or an error, not stopped) and have
        the next plan look at it."""
        if (st.buffer or st.error is not None) and not st.stopped:
            if st.tp not in self._ready:
                self._ready[st.tp] = st
        else:
            self._ready.pop(st.tp, None)
        self._due[st.tp] = st

    def _wants_records(self, st: PartitionState) -> bool:
        """``st`` would be fetched if nothing were wrong (not paused, stopped, holding an error
        for the application, nor with its share of the buffer full)."""
        return (
            not st.paused
            and not st.stopped
            and st.error is None
            and self.has_room(st)
            and self.buffered_bytes < self.config.fetch_max_bytes
        )

    def has_room(self, st: PartitionState) -> bool:
        """Whether ``st`` may be fetched again: nothing buffered, or (below
        ``max_buffered_responses``) less than half of ``max_partition_fetch_bytes``. One that
        is behind waits with a full response; one that keeps up stays in the next long poll
        rather than waiting for it to end once its few records are read (issue 29)."""
        n = len(st.buffer)
        if n == 0:
            return True
        cfg = self.config
        return n < cfg.max_buffered_responses and 2 * st.buffered < cfg.max_partition_fetch_bytes

    def _waiting(self, st: PartitionState, now: float) -> None:
        """Start (or stop) ``st``'s clock of waiting for records."""
        if not self._wants_records(st):
            st.waiting_since = None
        elif st.waiting_since is None:
            st.waiting_since = now

    def _progress(self, st: PartitionState, now: float) -> None:
        """``st`` got records, or learned it has none to get: its wait starts over."""
        st.waiting_since = now if self._wants_records(st) else None
        st.stall_reason = ""

    def stalls(self, now: float) -> list[Stall]:
        """Every partition that wants records, since when it has waited and why it got none
        (health keeps those that waited too long)."""
        out = []
        for st in self._partitions.values():
            self._waiting(st, now)
            if st.waiting_since is None:
                continue
            reason = st.stall_reason
            if not reason:
                if st.reset is not None:
                    reason = "its position is not known yet (committed offset or offset reset)"
                elif st.fetching is not None:
                    reason = f"a Fetch to node {st.fetching} has not been answered"
                elif st.tp not in self._leaders:
                    reason = "its leader is not known (waiting for metadata)"
                else:
                    reason = "waiting for its next Fetch"
            out.append(Stall(st.tp, st.waiting_since, reason))
        return out

    def take_moved(self, now: float) -> list[PartitionState]:
        """The partitions whose records were handed out since the last call (their waits start
        over: records are progress), for the driver's lag metrics."""
        if not self.moved:
            return []
        out = []
        for tp in self.moved:
            st = self._partitions.get(tp)
            if st is not None:
                self._progress(st, now)
                out.append(st)
        self.moved.clear()
        return out

    # -- assignment -------------------------------------------------------------------------

    def add(self, partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Start tracking ``partitions`` (position: the committed offset, looked up)."""
        added = []
        for tp in partitions:
            st = self._partitions.get(tp)
            if st is None:
                self._partitions[tp] = st = PartitionState(tp)
                self._due[tp] = self._unpositioned[tp] = st
                added.append(tp)
            elif st.stopped:
                self._drop(st)
                st.stopped = False
                st.reset = "committed"
                self._unpositioned[tp] = st
                st.position = st.fetch_offset = None
                st.version += 1
                self._mark(st)
                added.append(tp)
        if any(tp not in self._leaders for tp in added):
            self.metadata_needed = True
        return added

    def stop(self, partitions: Iterable[TopicPartition]) -> None:
        """KAFKA-14196: no more fetching or records for ``partitions``; drop what is buffered.

        Their positions stay readable (a revoke callback may commit them) until :meth:`remove`.
        """
        for tp in partitions:
            st = self._partitions.get(tp)
            if st is not None and not st.stopped:
                st.stopped = True
                st.version += 1
                self._drop(st)
                if self._deferred is not None and self._deferred[0] == tp:
                    self._deferred = None

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._partitions.pop(tp, None)
            self.replicas.clear(tp)
            self._due.pop(tp, None)
            for parked in self._parked.values():
                parked.pop(tp, None)
            if st is not None:
                self._drop(st)
                self._ready.pop(tp, None)
                if self._deferred is not None and self._deferred[0] == tp:
                    self._deferred = None

    def clear(self) -> None:
        self.remove(list(self._partitions))

    # -- positions --------------------------------------------------------------------------

    def seek(self, tp: TopicPartition, offset: int, *, stopped: bool = False) -> None:
        """Set the position; ``stopped``: the partition may be one being revoked (its
        position is what a commit in the revoke callback commits; nothing fetches it)."""
        st = self._require(tp, stopped=stopped)
        if offset < 0:
            raise ConfigurationError(f"seek offset must be >= 0, not {offset}")
        self._restart(st)
        st.position = st.fetch_offset = offset
        st.reset = None

    def request_reset(self, tp: TopicPartition, how: _Reset) -> None:
        """Look the position up again: "committed", "earliest", "latest" or a timestamp."""
        st = self._require(tp)
        self._restart(st)
        st.position = st.fetch_offset = None
        st.reset = how
        self._unpositioned[tp] = st

    def pause(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._require(tp).paused = True

    def resume(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            st = self._partitions.get(tp)
            if st is not None:
                st.paused = False
                self._due[tp] = st

    def _require(self, tp: TopicPartition, *, stopped: bool = False) -> PartitionState:
        st = self._partitions.get(tp)
        if st is None or (st.stopped and not stopped):
            raise LocalProtocolError(f"{tp} is not assigned to this consumer")
        return st

    def _restart(self, st: PartitionState) -> None:
        st.error = None
        self._drop(st)
        st.version += 1
        st.retry_at = None
        st.lookup_in_flight = False
        if self._deferred is not None and self._deferred[0] == st.tp:
            self._deferred = None

    def _drop(self, st: PartitionState) -> None:
        if self._current is st:
            self._current = None
        self.buffered_bytes -= st.buffered
        st.buffer.clear()
        st.buffered = 0
        st.blocked = False
        if st.fetch_offset is not None and st.position is not None:
            st.fetch_offset = st.position
        self._mark(st)

    # -- position lookups ---------------------------------------------------------------------

    def take_committed_lookups(self, now: float) -> list[TopicPartition]:
        """Partitions whose committed offset must be fetched now (marked in flight)."""
        out = []
        for st in self._to_position():
            if st.reset != "committed" or st.lookup_in_flight or st.stopped:
                continue
            if st.retry_at is not None and now < st.retry_at:
                continue
            st.lookup_in_flight = True
            st.retry_at = None
            out.append(st.tp)
        return sorted(out)

    def on_committed(self, offsets: Mapping[TopicPartition, int | None]) -> None:
        """OffsetFetch answered (None: nothing committed: apply ``auto_offset_reset``)."""
        for tp, offset in offsets.items():
            st = self._partitions.get(tp)
            if st is None or st.reset != "committed" or not st.lookup_in_flight:
                continue
            st.lookup_in_flight = False
            if offset is not None and offset >= 0:
                st.committed = offset
                st.position = st.fetch_offset = offset
                st.reset = None
            else:
                self._apply_policy(st, None)
            self._mark(st)

    def lookup_failed(
        self, partitions: Iterable[TopicPartition], now: float, reason: str = ""
    ) -> None:
        for tp in partitions:
            st = self._partitions.get(tp)
            if st is not None and st.lookup_in_flight:
                st.lookup_in_flight = False
                self._backoff(st, now + self.config.retry_backoff_ms / 1000)
                st.stall_reason = f"its committed offset could not be looked up: {reason}"

    def _apply_policy(self, st: PartitionState, out_of_range: int | None) -> None:
        policy = self.config.auto_offset_reset
        st.position = st.fetch_offset = None
        self._unpositioned[st.tp] = st
        if policy == "none":
            st.reset = "none"
            if out_of_range is not None:
                st.error = OffsetOutOfRangeError(
                    "fetch position out of range and auto_offset_reset is 'none'",
                    partition=st.tp,
                    offset=out_of_range,
                )
            else:
                st.error = NoOffsetForPartitionError(st.tp)
            self._mark(st)
        else:
            st.reset = policy

    def take_resets(self, now: float) -> dict[int, dict[TopicPartition, int]]:
        """ListOffsets to send now: ``{leader node: {tp: timestamp}}`` (marked in flight)."""
        out: dict[int, dict[TopicPartition, int]] = {}
        for st in self._to_position():
            reset = st.reset
            if reset in (None, "committed", "none") or st.lookup_in_flight or st.stopped:
                continue
            if st.retry_at is not None and now < st.retry_at:
                continue
            leader = self._leaders.get(st.tp)
            if leader is None:
                self.metadata_needed = True
                continue
            timestamp = EARLIEST if reset == "earliest" else LATEST if reset == "latest" else reset
            assert isinstance(timestamp, int)
            st.lookup_in_flight = True
            st.retry_at = None
            out.setdefault(leader[0], {})[st.tp] = timestamp
        return out

    def on_reset_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        errors: Mapping[TopicPartition, int],
        now: float,
    ) -> None:
        """ListOffsets answered: positions for ``offsets``, ``errors`` retried after backoff."""
        for tp, offset in offsets.items():
            st = self._partitions.get(tp)
            if st is None or not st.lookup_in_flight or st.reset in (None, "committed"):
                continue
            st.lookup_in_flight = False
            if offset < 0:  # no record at or after that timestamp: the end of the log
                st.reset = "latest"
                continue
            st.position = st.fetch_offset = offset
            st.reset = None
            self._due[tp] = st
        for tp, code in errors.items():
            st = self._partitions.get(tp)
            if st is None or not st.lookup_in_flight:
                continue
            st.lookup_in_flight = False
            self._backoff(st, now + self.config.retry_backoff_ms / 1000)
            st.stall_reason = f"ListOffsets for its position failed: {_error_words(code)}"
            if code in LEADER_ERRORS:
                self._leaders.pop(tp, None)
                self.metadata_needed = True
            elif code == TOPIC_AUTHORIZATION_FAILED:
                st.error = TopicAuthorizationFailedError(f"not authorized to read {tp}")
                self._mark(st)
            else:
                log.info("ListOffsets for %s failed with error %s; retrying", tp, code)

    # -- metadata -----------------------------------------------------------------------------

    def on_metadata(
        self,
        leaders: Mapping[TopicPartition, tuple[int, int]],
        brokers: Collection[int] | None = None,
    ) -> None:
        """Who leads what (``(node_id, leader_epoch)``; partitions without a leader omitted),
        and which brokers the cluster has now (a read replica not among them is left)."""
        if brokers is not None:
            self._brokers = frozenset(brokers)
        for tp in list(self._leaders):
            if tp.topic in self.topics and tp not in leaders:
                del self._leaders[tp]
        self._leaders.update(leaders)
        self._scan = True  # leaders moved: every partition may go elsewhere now
        self.metadata_needed = any(tp not in self._leaders for tp in self._partitions)

    # -- fetching -----------------------------------------------------------------------------

    def _fetchable(self, st: PartitionState) -> bool:
        """``st`` may be fetched once its backoff (``retry_at``) has ended."""
        return (
            st.reset is None
            and st.fetch_offset is not None
            and not st.paused
            and not st.stopped
            and not st.blocked
            and st.error is None
            and st.fetching is None
            and self.has_room(st)
        )

    def plan(self, now: float) -> list[FetchPlan]:
        """The Fetch requests to send now, at most one per leader."""
        cfg = self.config
        if self.buffered_bytes >= cfg.fetch_max_bytes:
            return []  # what is due stays due (a full buffer changes no partition's state)
        parked = self._parked
        for node in [n for n in parked if n not in self._in_flight]:
            if self._node_retry.get(node, now) <= now:
                self._due.update(parked.pop(node))
        if self._scan:
            self._scan = False
            parked.clear()
            states = list(self._partitions.values())
            if not states:
                return []
            # Rotate the order so no partition is always first in line for the answer's bytes.
            self._rotation = (self._rotation + 1) % len(states)
            states = states[self._rotation :] + states[: self._rotation]
        else:
            # Issue 29: only the partitions something happened to since the last plan (their
            # buffer was read, their Fetch answered, a seek, a resume...) or still held back
            # by a backoff or an unknown leader; the others cannot have become fetchable.
            states = list(self._due.values())
        due: dict[TopicPartition, PartitionState] = {}
        self._due = due
        wanted: dict[int, dict[TopicPartition, PartitionFetch]] = {}
        versions: dict[int, dict[TopicPartition, int]] = {}
        partitions = self._partitions
        for st in states:
            if partitions.get(st.tp) is not st:
                continue  # removed since
            self._waiting(st, now)
            if not self._fetchable(st):
                continue
            if st.retry_at is not None and now < st.retry_at:
                due[st.tp] = st
                continue
            leader = self._leaders.get(st.tp)
            if leader is None:
                self.metadata_needed = True
                st.stall_reason = "its leader is not known (waiting for metadata)"
                due[st.tp] = st
                continue
            node = self.replicas.select(st.tp, leader[0], now, self._brokers)
            epoch = leader[1]
            if node in self._in_flight or self._node_retry.get(node, now) > now:
                parked.setdefault(node, {})[st.tp] = st
                continue
            assert st.fetch_offset is not None
            wanted.setdefault(node, {})[st.tp] = PartitionFetch(
                st.fetch_offset, cfg.max_partition_fetch_bytes, epoch
            )
            versions.setdefault(node, {})[st.tp] = st.version
        plans = []
        for node, parts in wanted.items():
            self._node_retry.pop(node, None)
            session = self._sessions.setdefault(node, FetchSession()).build(parts)
            plan = FetchPlan(
                node_id=node,
                session=session,
                versions=versions[node],
                max_bytes=max(1, cfg.fetch_max_bytes - self.buffered_bytes),
                min_bytes=cfg.fetch_min_bytes,
                max_wait_ms=cfg.fetch_max_wait_ms,
                isolation_level=1 if cfg.read_committed else 0,
            )
            self._in_flight[node] = plan
            for tp in parts:
                self._partitions[tp].fetching = node
            plans.append(plan)
        return plans

    def _end_flight(self, plan: FetchPlan) -> None:
        if self._in_flight.get(plan.node_id) is plan:
            del self._in_flight[plan.node_id]
        for tp in plan.session.fetching:
            st = self._partitions.get(tp)
            if st is not None and st.fetching == plan.node_id:
                st.fetching = None
                self._due[tp] = st
        parked = self._parked.pop(plan.node_id, None)
        if parked:
            self._due.update(parked)

    def on_fetch_failed(self, plan: FetchPlan, now: float, reason: str = "") -> None:
        """The request failed in transport (connection lost, timeout, undecodable answer)."""
        self._end_flight(plan)
        self._stall_reason(plan, f"a Fetch to node {plan.node_id} failed: {reason or 'no answer'}")
        session = self._sessions.get(plan.node_id)
        if session is not None:
            session.on_failure()
        self.replicas.clear_all(plan.session.fetching)  # the leaders next (as Java)
        self._node_retry[plan.node_id] = now + self.config.retry_backoff_ms / 1000
        self.metadata_needed = True

    def on_fetch_response(self, plan: FetchPlan, response: FetchedResponse, now: float) -> int:
        """A Fetch answer: buffer records, update positions and leaders. Returns the number
        of partitions that got records."""
        self._end_flight(plan)
        fetching = plan.session.fetching
        session = self._sessions.setdefault(plan.node_id, FetchSession())
        session.on_response(plan.session, response.error_code, response.session_id)
        if response.error_code:
            log.info("Fetch to node %s failed with error %s", plan.node_id, response.error_code)
            self._stall_reason(
                plan, f"Fetch to node {plan.node_id}: {_error_words(response.error_code)}"
            )
            if response.error_code not in (70, 71):  # session errors: just resend in full
                self.replicas.clear_all(fetching)
                self._node_retry[plan.node_id] = now + self.config.retry_backoff_ms / 1000
                self.metadata_needed = True
            return 0
        cfg = self.config
        backoff = cfg.retry_backoff_ms / 1000
        with_records = 0
        for part in response.partitions:
            tp = part.tp
            sent = fetching.get(tp)
            st = self._still_fetched(plan, tp)
            if sent is None or st is None:
                continue  # not ours any more, or seeked/reset since the request left
            code = part.error_code
            st.last_fetch = now
            if code == 0:
                if part.high_watermark >= 0:
                    st.high_watermark = part.high_watermark
                if part.last_stable_offset >= 0:
                    st.last_stable_offset = part.last_stable_offset
                if part.log_start_offset >= 0:
                    st.log_start_offset = part.log_start_offset
                if part.preferred_read_replica >= 0:
                    self._prefer(tp, part.preferred_read_replica, plan.node_id, now)
                data = part.records
                if not data:
                    self._answered_empty(st, sent.fetch_offset, now)
                    continue
                records = PartitionRecords(
                    tp,
                    data,
                    sent.fetch_offset,
                    aborted_transactions=part.aborted_transactions,
                    read_committed=cfg.read_committed,
                    check_crcs=cfg.check_crcs,
                )
                st.buffer.append(records)
                if st.tp not in self._ready:
                    self._ready[st.tp] = st
                st.buffered += records.size
                self.buffered_bytes += records.size
                with_records += 1
                self._progress(st, now)
                end = next_fetch_offset(data)
                if end is None or end <= sent.fetch_offset:
                    st.blocked = True  # reading it raises (truncated); refetch after that
                else:
                    st.fetch_offset = end
            elif code == OFFSET_OUT_OF_RANGE and self.replicas.clear(tp) is not None:
                # A follower may lag its leader: the leader says whether it is out of range.
                log.info("%s: offset %s out of range on node %s: back to the leader", tp,
                         sent.fetch_offset, plan.node_id)  # fmt: skip
            elif code == OFFSET_OUT_OF_RANGE:
                if st.buffer:
                    # Deliver what is buffered first; the position check happens on refetch.
                    self._backoff(st, now + backoff)
                    continue
                log.info("%s: offset %s out of range: auto_offset_reset", tp, sent.fetch_offset)
                st.version += 1
                self._apply_policy(st, sent.fetch_offset)
            elif code in LEADER_ERRORS:
                self.replicas.clear(tp)
                self._leaders.pop(tp, None)
                self.metadata_needed = True
                self._backoff(st, now + backoff)
                st.stall_reason = f"Fetch answered {_error_words(code)}"
            elif code == TOPIC_AUTHORIZATION_FAILED:
                st.error = TopicAuthorizationFailedError(f"not authorized to read {tp}")
                self._mark(st)
            else:
                log.info("Fetch of %s failed with error %s (%s)", tp, code, _error_words(code))
                self._backoff(st, now + backoff)
                st.stall_reason = f"Fetch answered {_error_words(code)}"
        if len(response.partitions) < len(fetching):
            # An incremental session (KIP-227) leaves out the partitions with no news: no
            # records, the same watermarks. Answered all the same, with nothing.
            answered = {part.tp for part in response.partitions}
            for tp, sent in fetching.items():
                if tp not in answered and (st := self._still_fetched(plan, tp)) is not None:
                    self._answered_empty(st, sent.fetch_offset, now)
        return with_records

    def _prefer(self, tp: TopicPartition, node: int, answered_by: int, now: float) -> None:
        leader = self._leaders.get(tp)
        if self.replicas.on_preferred(tp, node, answered_by if leader is None else leader[0], now):
            log.info("%s: fetching from node %s (preferred read replica, KIP-392)", tp, node)

    def _still_fetched(self, plan: FetchPlan, tp: TopicPartition) -> PartitionState | None:
        """``tp``'s state if ``plan``'s answer still applies to it: neither revoked nor sought
        or reset since the request left."""
        sent = plan.session.fetching.get(tp)
        st = self._partitions.get(tp)
        if (
            sent is None
            or st is None
            or st.stopped
            or st.version != plan.versions.get(tp, -1)
            or st.fetch_offset != sent.fetch_offset
        ):
            return None
        return st

    def _answered_empty(self, st: PartitionState, fetch_offset: int, now: float) -> None:
        """A Fetch answer without records: caught up (progress), or records withheld."""
        end = end_offset(st.high_watermark, st.last_stable_offset, self.config.read_committed)
        if end is None or fetch_offset >= end:
            self._progress(st, now)
        else:
            st.stall_reason = (
                f"Fetch answered no records at offset {fetch_offset} although the log has "
                f"records up to {end}"
            )

    def _stall_reason(self, plan: FetchPlan, reason: str) -> None:
        for tp in plan.session.fetching:
            st = self._partitions.get(tp)
            if st is not None:
                st.stall_reason = reason

    # -- records out ----------------------------------------------------------------------------

    def collect(
        self,
        max_records: int,
        now: float,
        *,
        allowed: Collection[TopicPartition] | None = None,
        partitions: Collection[TopicPartition] | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` buffered records, moving positions past them.

        Only partitions in ``allowed`` (the member's fetchable assignment) and, if given, in
        ``partitions`` are read. A record error (corrupt batch, failing deserializer) or a
        partition error (no offset, out of range with policy "none", not authorized) is raised
        here; if records were collected before it, they are returned and the error is raised
        by the next call, so other partitions keep flowing.
        """
        deferred = self._deferred
        if deferred is not None:
            self._deferred = None
            tp, version, deferred_error = deferred
            st = self._partitions.get(tp)
            if st is not None and st.version == version and not st.stopped:
                raise deferred_error
        result: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        failed: tuple[PartitionState, AiogroupError] | None = None
        # Small reads (getone) keep reading the partition the last call was reading while its
        # response lasts (Java's "next in line fetch"): no walk over every partition per
        # record. Larger ones start at the next partition in turn, so partitions drain evenly
        # and come due for fetching together, which fills each Fetch with many of them.
        current = self._current if max_records < _STICKY_BELOW else None
        if current is not None and self._eligible(current, allowed, partitions):
            remaining, failed = self._take(
                current, result, remaining, now, key_deserializer, value_deserializer
            )
        ready = self._ready
        read = set() if current is None else {current.tp}
        while remaining > 0 and failed is None:
            # The first partition in line (issue 29: only those holding records are looked
            # at); one read and not finished goes to the back of the line.
            st = next(
                (
                    s
                    for s in ready.values()
                    if s.tp not in read and self._eligible(s, allowed, partitions)
                ),
                None,
            )
            if st is None:
                break
            read.add(st.tp)
            remaining, failed = self._take(
                st, result, remaining, now, key_deserializer, value_deserializer
            )
            if st.tp in ready:
                ready[st.tp] = ready.pop(st.tp)
        if failed is not None:
            st, error = failed
            if result:
                self._deferred = (st.tp, st.version, error)
                return result
            raise error
        return result

    def next_one(
        self, allowed: Collection[TopicPartition]
    ) -> tuple[TopicPartition, ConsumerRecord] | None:
        """``collect(1)``'s record when it is one converted ahead of the partition being read
        (``PartitionRecords.next_ahead``): nothing else to settle, so none of collect's walk.
        None when collect must decide (another partition, an error held, the last record)."""
        st = self._current
        if st is None or self._deferred is not None or not self._eligible(st, allowed, None):
            return None
        record = st.buffer[0].next_ahead() if st.error is None else None
        if record is None:
            return None
        st.position = record.offset + 1
        self.moved.add(st.tp)
        return st.tp, record

    @staticmethod
    def _eligible(
        st: PartitionState,
        allowed: Collection[TopicPartition] | None,
        partitions: Collection[TopicPartition] | None,
    ) -> bool:
        if st.stopped or st.paused or (not st.buffer and st.error is None):
            return False
        tp = st.tp
        return (allowed is None or tp in allowed) and (partitions is None or tp in partitions)

    def _take(
        self,
        st: PartitionState,
        result: dict[TopicPartition, list[ConsumerRecord]],
        remaining: int,
        now: float,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> tuple[int, tuple[PartitionState, AiogroupError] | None]:
        """Read ``st`` into ``result``; the records still wanted and the error met, if any."""
        if st.error is not None:
            return remaining, (st, st.error)
        out: list[ConsumerRecord] = []
        failed: tuple[PartitionState, AiogroupError] | None = None
        try:
            self._drain(st, out, remaining, key_deserializer, value_deserializer)
        except RecordError as exc:
            if not isinstance(exc, RecordDeserializationError):
                # Records past a batch that cannot be read (corrupt, unsupported codec) cannot
                # be returned without skipping it: refetch from the position after the backoff.
                self._drop(st)
                st.version += 1
                self._backoff(st, now + self.config.retry_backoff_ms / 1000)
            failed = (st, exc)
        self._current = st if st.buffer and failed is None else None
        if out:
            result[st.tp] = out
            remaining -= len(out)
            self.moved.add(st.tp)
        return remaining, failed

    def _drain(
        self,
        st: PartitionState,
        out: list[ConsumerRecord],
        limit: int,
        key_deserializer: Deserializer | None,
        value_deserializer: Deserializer | None,
    ) -> None:
        buffer = st.buffer
        while buffer and len(out) < limit:
            records = buffer[0]
            try:
                records.drain(out, limit - len(out), key_deserializer, value_deserializer)
            finally:
                st.position = records.position
            if records.exhausted and not records.has_pending:
                buffer.popleft()
                st.buffered -= records.size
                self.buffered_bytes -= records.size
                self.freed = True
                self._due[st.tp] = st
                if not buffer:
                    st.blocked = False
                    self._mark(st)
                    if st.fetch_offset is not None and st.fetch_offset < st.position:
                        st.fetch_offset = st.position
            else:
                break
