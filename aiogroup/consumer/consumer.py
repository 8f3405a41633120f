"""``aiogroup.Consumer``: an asyncio Kafka consumer on the cooperative group member.

Membership (join, heartbeats, KIP-429 rebalances, commits) stays in
:class:`~aiogroup.client.GroupMember`; positions, fetch planning and the prefetch buffer are
the sans-I/O :class:`~aiogroup.consumer.state.ConsumerState`; the asyncio
:class:`~aiogroup.consumer.fetcher.Fetcher` moves the bytes. This class composes them, and is
the one place where the rebalance hooks meet the positions:

- before ``on_partitions_revoked`` runs, fetching of those partitions stops and their buffered
  records are dropped (KAFKA-14196); with auto-commit, their consumed positions are committed
  first (KIP-70); the callback can still read and commit their positions;
- lost partitions are dropped without a commit (someone else may own them already);
- records are only handed out for partitions the member may act on now
  (``GroupMember.assignment``: not pending revocation, not after a silent session expiry);
- ``close()`` during a rebalance finishes it first (bounded by the close timeout), so the final
  commit lands instead of the partitions being reported lost.

See ``docs/consumer.md`` for usage, options and the migration table from aiokafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.client.options import aiokafka_client_options, check_options, parameter_names
from aiogroup.client.signal import Signal, loop_time
from aiogroup.config import DEFAULTS, ConsumerConfig, GroupProtocol, IsolationLevel, ResetPolicy
from aiogroup.consumer.errors import (
    ConsumerStoppedError,
    NoOffsetForPartitionError,
    PollIntervalExceededError,
)
from aiogroup.consumer.group_metadata import ConsumerGroupMetadata, group_metadata_of
from aiogroup.consumer.hooks import Hooks, poll_watchdog
from aiogroup.consumer.offsets import OffsetAndTimestamp, OffsetQueries, offset_of
from aiogroup.consumer.records import ConsumerRecord, Deserializer
from aiogroup.errors import (
    AiogroupError,
    CommitFailedError,
    ConfigurationError,
    GroupIdRequiredError,
    LocalProtocolError,
    MemberClosedError,
    RebalanceInProgressError,
)
from aiogroup.membership.states import MemberState
from aiogroup.observability.metrics import MetricsSink
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:  # the parts a Consumer is built of load when one is built, not at import
    from aiogroup.client.member import GroupMember
    from aiogroup.observability.health import Health

__all__ = ["Consumer", "OffsetAndTimestamp"]

log = logging.getLogger("aiogroup.consumer")

Partitions = frozenset[TopicPartition]
_UNLIMITED = 2**31 - 1
#: Records handed out between two yields to the event loop when records are buffered.
_YIELD_EVERY = 256


class Consumer(OffsetQueries):
    """An asyncio Kafka consumer in a classic consumer group (KIP-429 cooperative rebalancing).

    ``async with Consumer("host:9092", "group", topics=["orders"]) as consumer:`` then
    ``async for record in consumer`` or ``await consumer.getmany(timeout_ms=...)``. Method
    names and meanings follow aiokafka's ``AIOKafkaConsumer`` (where aiokafka's meaning is
    eager-only, Java's cooperative one applies). Options keep Java's names and defaults;
    ``assignors`` are protocol names or :class:`PartitionAssignor` instances, most preferred
    first (default: cooperative-sticky). ``group_protocol="consumer"`` runs KIP-848's consumer
    group protocol instead (Kafka 4.0+: the broker assigns, ``group_remote_assignor`` names
    its assignor; ``docs/consumer-protocol.md``). Extra keyword arguments go to aiokafka's client
    (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ...).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str | None,
        *,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        listener: Any = None,
        assignors: Sequence[PartitionAssignor | str] | None = None,
        group_instance_id: str | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        auto_offset_reset: ResetPolicy = DEFAULTS.auto_offset_reset,
        enable_auto_commit: bool = DEFAULTS.enable_auto_commit,
        auto_commit_interval_ms: int = DEFAULTS.auto_commit_interval_ms,
        isolation_level: IsolationLevel = DEFAULTS.isolation_level,
        max_poll_interval_ms: int = DEFAULTS.max_poll_interval_ms,
        max_poll_records: int | None = DEFAULTS.max_poll_records,
        fetch_max_bytes: int = DEFAULTS.fetch_max_bytes,
        max_partition_fetch_bytes: int = DEFAULTS.max_partition_fetch_bytes,
        fetch_min_bytes: int = DEFAULTS.fetch_min_bytes,
        fetch_max_wait_ms: int = DEFAULTS.fetch_max_wait_ms,
        check_crcs: bool = DEFAULTS.check_crcs,
        hand_off_on_close: bool = DEFAULTS.hand_off_on_close,
        session_timeout_ms: int = DEFAULTS.session_timeout_ms,
        heartbeat_interval_ms: int = DEFAULTS.heartbeat_interval_ms,
        rebalance_timeout_ms: int | None = DEFAULTS.rebalance_timeout_ms,
        retry_backoff_ms: int = DEFAULTS.retry_backoff_ms,
        retry_backoff_max_ms: int = DEFAULTS.retry_backoff_max_ms,
        request_timeout_ms: int = DEFAULTS.request_timeout_ms,
        metadata_max_age_ms: int = DEFAULTS.metadata_max_age_ms,
        close_timeout_s: float = DEFAULTS.close_timeout_s,
        client_id: str = DEFAULTS.client_id,
        client_rack: str | None = DEFAULTS.rack_id,
        group_protocol: GroupProtocol = DEFAULTS.group_protocol,
        group_remote_assignor: str | None = DEFAULTS.group_remote_assignor,
        telemetry: Any = None,
        metrics: MetricsSink | None = None,
        **client_options: Any,
    ) -> None:
        from aiogroup.client.logs import member_context
        from aiogroup.client.member import GroupMember, check_subscription
        from aiogroup.consumer.fetcher import Fetcher
        from aiogroup.consumer.manual import ManualAssignment
        from aiogroup.consumer.meters import ConsumerMeters
        from aiogroup.consumer.state import ConsumerState, FetchConfig
        from aiogroup.consumer.wire import DataPlane

        # A misspelt option names the Consumer and its closest valid option (not aiokafka's
        # TypeError, not GroupMember's parameters).
        check_options(
            client_options,
            aiokafka_client_options(),
            own=parameter_names(Consumer.__init__),
            owner="Consumer",
        )
        if topics is not None and pattern is not None:
            raise ConfigurationError("give topics or pattern, not both")
        if isinstance(topics, str):
            raise ConfigurationError("topics must be a list of names, not one string")
        if group_id is None and (topics is not None or pattern is not None):
            raise GroupIdRequiredError(
                "topics and pattern need a consumer group: give a group_id, or assign() "
                "partitions to a consumer without one"
            )
        # Every option checked once, before anything is built (aiogroup.config).
        config = self.config = ConsumerConfig(
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            close_timeout_s=close_timeout_s,
            client_id=client_id,
            group_instance_id=group_instance_id,
            rack_id=client_rack,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            auto_offset_reset=auto_offset_reset,
            isolation_level=isolation_level,
            max_poll_interval_ms=max_poll_interval_ms,
            max_poll_records=max_poll_records,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            check_crcs=check_crcs,
            hand_off_on_close=hand_off_on_close,
            group_protocol=group_protocol,
            group_remote_assignor=group_remote_assignor,
        )
        check_subscription(config, assignors, pattern)
        self._state = ConsumerState(FetchConfig.of(config))
        self.group_id = group_id
        self._auto_commit = config.enable_auto_commit and group_id is not None
        self._auto_commit_interval = config.auto_commit_interval_ms / 1000
        self._max_poll_interval = config.max_poll_interval_ms / 1000
        self._max_poll_records = config.max_poll_records or _UNLIMITED
        self._key_deserializer = key_deserializer
        self._value_deserializer = value_deserializer
        self._request_timeout = config.request_timeout_ms / 1000
        self._close_timeout = config.close_timeout_s
        self._hooks = Hooks(self, listener)
        self._topics: frozenset[str] | None = frozenset(topics) if topics is not None else None
        self._pattern: str | None = pattern.pattern if isinstance(pattern, re.Pattern) else pattern
        self._member = GroupMember(
            bootstrap_servers,
            group_id or "<no group>",  # never sent: without a group it joins and commits nothing
            assignors=assignors,
            listener=self._hooks,
            config=config,
            telemetry=telemetry,
            metrics=metrics,
            enable_auto_commit=config.enable_auto_commit,
            offsets_source=self,
            **client_options,
        )
        self._manual = ManualAssignment(self._member, group_id)
        registry = self._member.metrics_registry  # one registry: the member's and ours
        self._meters = ConsumerMeters(self._state, registry)
        self._polls = self._meters.polls
        self._plane = DataPlane(self._member.transport, client_rack=client_rack)
        self._fetcher = Fetcher(
            self._state,
            self._plane,
            self._lookup_committed,
            retry_backoff_ms=config.retry_backoff_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            metrics=registry,
        )
        self._started = False
        self._closed = False
        # Marks the consumer's tasks as the member's (their log records carry its identity).
        self._context = member_context(self._member.log_identity)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._control: asyncio.Task[None] | None = None
        self._errors: list[AiogroupError] = []
        self._last_poll = 0.0
        self._polling = 0
        self._left_for_poll: str | None = None
        self._poll_changed = Signal()
        #: Partitions whose records the last getmany/getone handed out, with the offset of the
        #: first of them: the application may still be processing them, so auto-commit commits
        #: that offset, not the position, until the next call (at-least-once, as Java).
        self._in_hand: dict[TopicPartition, int] = {}
        self._released: asyncio.Future[None] | None = None
        self._unyielded = 0
        #: The task that last asked for records (close() hands off while it still reads).
        self._reader: asyncio.Task[Any] | None = None
        self._closing: asyncio.Future[None] | None = None
        #: Partitions whose ``on_partitions_revoked`` is running: no longer read, still owned.
        self._revoking: Partitions = frozenset()

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Consumer:
        """Connect, join the group (if subscribed) and start fetching."""
        if self._closed:
            raise ConsumerStoppedError("the consumer was closed")
        if self._started:
            return self
        self._started = True
        await self._member.start()
        loop = asyncio.get_running_loop()
        self._last_poll = loop.time()
        # The fetcher's requests count as the member's: a broker outage is reported once by
        # its Reachability, not per attempt by aiokafka (client.logs).
        self._context.copy().run(self._fetcher.start)
        if self._topics is not None or self._pattern is not None:
            await self._member.subscribe(self._topics, pattern=self._pattern)
        self._spawn(poll_watchdog(self), "aiogroup-poll-watchdog")
        if self._auto_commit:
            self._spawn(self._auto_commit_loop(), "aiogroup-auto-commit")
        return self

    async def close(self, timeout: float | None = None, *, hand_off: bool | None = None) -> None:
        """Commit (auto-commit), revoke, leave the group and disconnect.

        **Called while another task is reading** (``async for``, ``getmany``: the usual SIGTERM
        handler), under the COOPERATIVE protocol, for a dynamic member that owns partitions, it
        hands them off first, as :meth:`hand_off` does: that task keeps getting their records
        until the round that moves them, its ``async for`` then ends, and the others take them
        over a fraction of a heartbeat later instead of after a stop. ``hand_off=False`` (or
        the option ``hand_off_on_close=False``) closes at once instead; called from the
        reading task itself, or with nobody reading, there is no one to keep the records
        flowing for, and it closes at once too.

        A rebalance under way is finished first (within three quarters of ``timeout``,
        default ``close_timeout_s``), so the final commit lands in a generation the broker
        accepts; only if it cannot (the membership is gone, or the time is up) are the
        partitions reported lost. Completes within ``timeout`` plus a few seconds of cleanup.
        Several calls share one close.
        """
        if self._closing is not None:
            await asyncio.shield(self._closing)
            return
        if self._closed:
            return
        self._closing = asyncio.get_running_loop().create_future()
        try:
            await self._close(self._close_timeout if timeout is None else timeout, hand_off)
        finally:
            self._closing.set_result(None)

    def _hand_off_now(self, asked: bool | None) -> bool:
        """Whether close() hands off first: wanted, and someone reads while it does."""
        if not (self.config.hand_off_on_close if asked is None else asked):
            return False
        reader = self._reader
        member = self._member
        return (
            self._started
            and reader is not None
            and not reader.done()
            and reader is not asyncio.current_task()
            and member.protocol is RebalanceProtocol.COOPERATIVE
            and member.group_instance_id is None  # a static member never leaves (KIP-345)
            and bool(member.assignment)
        )

    async def _close(self, limit: float, hand_off: bool | None) -> None:
        if self._hand_off_now(hand_off):
            self.hand_off(limit)
        if self._member.handing_off:
            # The reader gets the records of the partitions being handed off until the round
            # that moves them; the member then leaves by itself (or gives up, bounded).
            await self._member.wait_closed(limit)
        self._closed = True
        self._release()  # closing: what was handed out is processed
        if self._auto_commit and self._manual.partitions:  # as Java's close, for assign()
            await self._commit_quietly(self._manual.partitions, "on close")
        for task in list(self._tasks):
            task.cancel()
        if self._control is not None and not self._control.done():
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(asyncio.shield(self._control), limit / 4)
        try:
            await self._fetcher.stop()
            self._state.stop(self._state.assigned)  # nothing more is read; positions stay
            await self._member.close(limit, finish_rebalance=True)
        finally:
            self._state.clear()
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5.0)
            self._wake_pollers()

    def hand_off(self, timeout: float | None = None) -> None:
        """Start leaving the group gracefully; returns at once (safe in a signal handler).

        Under the COOPERATIVE protocol (the default) this consumer keeps delivering the
        records of its partitions while the group makes room for them elsewhere: it rejoins
        once claiming its partitions but subscribing to nothing, so the leader keeps them from
        the others for that round (KIP-429); when that round takes them away they are committed
        (auto-commit) and revoked, the member leaves at once, and the rest of the group picks
        them up in its next round, a fraction of a heartbeat interval later. A plain close
        instead stops them first and leaves them unowned until the others' next heartbeat.

        Keep reading: ``async for`` ends, and ``getone``/``getmany`` raise
        :class:`ConsumerStoppedError`, once the member has left; then :meth:`close` (or the
        end of ``async with``) only disconnects. Under EAGER, for a static member or with
        nothing assigned, the member leaves as :meth:`close` would. Gives up after three
        quarters of ``timeout`` (default ``close_timeout_s``) and leaves anyway.
        """
        if self._closed or not self._started:
            return
        self._member.hand_off(self._close_timeout if timeout is None else timeout)
        self._wake_pollers()

    @property
    def handing_off(self) -> bool:
        """:meth:`hand_off` was called (reading ends once the member has left)."""
        return self._member.handing_off

    async def stop(self) -> None:
        """aiokafka's name for :meth:`close`."""
        await self.close()

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if exc is None:
            self._raise_errors()

    # ------------------------------------------------------------------ records

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        """The next record (``async for record in consumer``); ends when the consumer closes."""
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None

    async def getone(self, *partitions: TopicPartition) -> ConsumerRecord:
        """The next record (of ``partitions`` if given), waiting as long as it takes."""
        if not partitions and self._unyielded < _YIELD_EVERY and self._left_for_poll is None:
            # The quick way (issue 29): a record converted ahead, with what _get does around
            # it (checks, liveness, poll metrics, the record in hand) and nothing more.
            self._ensure_open()
            self._release()
            self._raise_errors()
            taken = self._state.next_one(self._owned())
            if taken is not None:
                self._last_poll = now = loop_time()
                self._polls.begin(now)
                self._polls.end(now)
                tp, record = taken
                self._in_hand = {tp: record.offset}
                self._unyielded += 1
                return record
        while True:
            batch = await self._get(partitions, 1, None)
            for records in batch.values():
                return records[0]

    async def getmany(
        self,
        *partitions: TopicPartition,
        timeout_ms: int = 0,
        max_records: int | None = None,
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition (of ``partitions`` if given), waiting up to ``timeout_ms`` for
        the first; at most ``max_records`` (default ``max_poll_records``, else unlimited)."""
        if max_records is not None and max_records <= 0:
            raise ConfigurationError("max_records must be > 0")
        limit = max_records or self._max_poll_records
        return await self._get(partitions, limit, max(0, timeout_ms) / 1000)

    async def _get(
        self,
        partitions: Sequence[TopicPartition],
        limit: int,
        timeout: float | None,
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        self._ensure_open()
        self._release()  # asking for more: the records handed out before are processed
        self._raise_errors()
        loop = asyncio.get_running_loop()
        self._polling += 1
        self._last_poll = now = loop.time()
        self._polls.begin(now)
        self._reader = asyncio.current_task()
        try:
            if self._unyielded >= _YIELD_EVERY:
                # The last calls found records buffered, so nothing in them awaited: let the
                # fetcher, the heartbeats and the sockets run (asyncio is cooperative), or a
                # busy application starves its own prefetching. Before reading, so a
                # cancellation here loses nothing. The metrics of those records go now too.
                self._meter(now)
                await asyncio.sleep(0)
            if self._left_for_poll is not None:
                await self._rejoin()
            wanted = frozenset(partitions) if partitions else None
            deadline = None if timeout is None else loop.time() + timeout
            member = self._member
            state = self._state
            while True:
                records = state.collect(
                    limit,
                    loop.time(),
                    allowed=self._owned(),
                    partitions=wanted,
                    key_deserializer=self._key_deserializer,
                    value_deserializer=self._value_deserializer,
                )
                if state.freed:  # room in the buffer: the fetcher may fetch again (also when
                    state.freed = False  # what was read held no record for the application)
                    self._fetcher.wake()
                if records:
                    # Nothing awaits between here and the caller: a cancellation cannot lose
                    # records whose positions have moved.
                    self._in_hand = {tp: rs[0].offset for tp, rs in records.items()}
                    self._unyielded += sum(map(len, records.values()))
                    return records
                self._raise_errors()
                if member.handing_off and member.state is MemberState.CLOSED:
                    raise ConsumerStoppedError(
                        "the consumer handed its partitions over and left the group"
                    )
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    return {}
                if self._unyielded:
                    self._meter(loop.time())  # about to wait: a good moment for the metrics
                await self._wait_for_data(remaining)
                self._ensure_open()
        finally:
            self._polling -= 1
            self._last_poll = now = loop.time()
            self._polls.end(now)

    def _meter(self, now: float) -> None:
        """Hand the records counted since the last time (and the rest) to the metrics."""
        self._meters.flush(self._unyielded, now)
        self._unyielded = 0

    # ------------------------------------------------------------------ metrics, health

    @property
    def client_id(self) -> str:
        return self.config.client_id

    @property
    def metrics(self) -> dict[str, float]:
        """Java's consumer metrics now, by name: the member's ``consumer-coordinator-metrics``
        (:attr:`GroupMember.metrics`), ``consumer-fetch-manager-metrics`` and
        ``consumer-metrics`` (:mod:`aiogroup.observability.registry`; docs/operating.md)."""
        now = loop_time()
        self._meter(now)
        registry = self._meters.registry
        out = self._member.metrics
        out.update(registry.fetch_manager_metrics(now))
        out.update(registry.consumer_metrics(now))
        return out

    @property
    def node_metrics(self) -> dict[int, dict[str, float]]:
        """Per broker fetched from: ``fetch-total``, ``bytes-fetched-total``,
        ``records-fetched-total`` (which replica served the records, KIP-392)."""
        return self._meters.registry.node_metrics()

    @property
    def partition_metrics(self) -> dict[TopicPartition, dict[str, float]]:
        """Per partition read so far: ``records-lag``, ``records-lag-avg``, ``-max``,
        ``records-lead``, ``records-lead-avg``, ``-min``."""
        now = loop_time()
        self._meter(now)
        return self._meters.registry.partition_metrics(now)

    def current_lag(self, partition: TopicPartition) -> int | None:
        """Records between the position and the end of ``partition`` as the last Fetch answer
        gave it (the high watermark; the last stable offset under read_committed), as Java's
        ``currentLag``; None while either is unknown. Asks no broker."""
        self._checked(partition)
        return self._meters.current_lag(partition)

    def health(self) -> Health:
        """OK, or why not (:mod:`aiogroup.observability.health`): the member's causes
        (:meth:`GroupMember.health`), a stalled partition, an application that stopped asking
        for records; each with since when, for how long, and why in words."""
        from aiogroup.observability.health import Health, Limits, evaluate

        member = self._member.health()
        if not self._started or self._closed or self._member.handing_off:
            return member
        now = loop_time()
        self._meter(now)
        config = self.config
        limits = Limits(
            config.rebalance_timeout / 1000,
            config.session_timeout_ms / 1000,
            self._max_poll_interval,
        )
        subscribed = self._topics is not None or self._pattern is not None
        own = self._meters.problems(
            limits, now, last_poll=self._last_poll, polling=self._polling > 0 or not subscribed
        )
        return Health(member.problems + evaluate(own, now, time.time()).problems, member.checked_at)

    async def _wait_for_data(self, timeout: float | None) -> None:
        data = self._fetcher.data_waiter()
        changed: asyncio.Future[Any] = asyncio.ensure_future(self._member.changed())
        poll = self._poll_changed.next()
        try:
            await asyncio.wait(
                {data, changed, poll}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            changed.cancel()

    def _wake_pollers(self) -> None:
        self._poll_changed.fire()

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: Mapping[TopicPartition, Any] | None = None) -> None:
        """Commit ``offsets`` (``{tp: next offset}``, or ``{tp: (offset, "")}`` as aiokafka
        accepts), by default the consumed positions of every assigned partition.

        Raises :class:`~aiogroup.errors.RebalanceInProgressError` (retriable: retry once the
        rebalance completes), :class:`~aiogroup.errors.CommitFailedError` (the member is no
        longer in the generation; :class:`PollIntervalExceededError` if it left because the
        application stopped polling; :class:`~aiogroup.errors.PartitionNotAssignedError` for
        offsets of a partition not assigned to this consumer, as aiokafka refuses them).
        """
        if offsets is None:
            self._ensure_open(self._revoking or None)
            self._raise_errors()
            self._release()  # committing what was consumed: it is processed
            owned = self._owned() | self._revoking
            to_commit = {tp: o for tp, o in self._state.positions().items() if tp in owned}
        else:
            to_commit = {tp: offset_of(tp, value) for tp, value in offsets.items()}
            self._ensure_open(to_commit)
            self._raise_errors()
        if not to_commit:
            return
        try:
            await self._send_commit(to_commit)
        except CommitFailedError as exc:
            if self._left_for_poll is not None and not isinstance(exc, PollIntervalExceededError):
                raise PollIntervalExceededError(self._left_for_poll) from exc
            raise
        except MemberClosedError as exc:
            raise ConsumerStoppedError("the consumer is closed") from exc
        self._state.mark_committed(to_commit)

    async def committed(self, partition: TopicPartition) -> int | None:
        """The committed offset of ``partition`` (None if nothing is committed)."""
        self._ensure_open((partition,))
        self._manual.require_group("committed()")
        result = await self._member.committed([partition])
        return result.get(partition)

    async def _lookup_committed(
        self, partitions: Sequence[TopicPartition]
    ) -> Mapping[TopicPartition, int | None]:
        return await self._manual.committed(partitions)

    async def _send_commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """To the member (a generation's commit) or as a simple member (manual assignment)."""
        if self._manual.active or self.group_id is None:
            await self._manual.commit(offsets, self._request_timeout)
        else:
            await self._member.commit(offsets)

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be returned for ``partition`` (waits until the
        position is known: committed offset or ``auto_offset_reset``)."""
        self._ensure_open((partition,))
        while True:
            self._raise_errors()
            st = self._state.get(partition)
            if st is None or (st.stopped and partition not in self._revoking):
                raise LocalProtocolError(f"{partition} is not assigned to this consumer")
            if st.error is not None and st.reset == "none":
                raise st.error
            position = self._state.position(partition)
            if position is not None:
                return position
            if st.stopped:  # revoking: nothing fetches it any more, so look it up here
                return await self._stopped_position(partition)
            await self._wait_for_data(self._request_timeout)

    async def _stopped_position(self, partition: TopicPartition) -> int:
        """The position of a partition being revoked before any was known: the committed
        offset, else what ``auto_offset_reset`` gives (kept, so a commit can use it)."""
        committed = (await self._manual.committed([partition])).get(partition)
        if committed is not None:
            offset = committed
        else:
            reset = self._state.config.auto_offset_reset
            if reset == "none":
                raise NoOffsetForPartitionError(partition)
            listed = await self._list_offsets({partition: -2 if reset == "earliest" else -1})
            offset = listed[partition].offset
        self._state.seek(partition, offset, stopped=True)
        return offset

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (buffered records are dropped). Inside
        ``on_partitions_revoked`` it moves what a commit of the position commits."""
        self._checked(partition)
        self._state.seek(partition, offset, stopped=partition in self._revoking)
        self._in_hand.pop(partition, None)
        self._fetcher.wake()

    async def seek_to_beginning(self, *partitions: TopicPartition) -> bool:
        """Read from the first available offset (all assigned partitions if none given);
        True once every new position is known (bounded by the request timeout)."""
        return await self._seek_reset(partitions, "earliest")

    async def seek_to_end(self, *partitions: TopicPartition) -> bool:
        """Read from the end of the log (only records produced from now on)."""
        return await self._seek_reset(partitions, "latest")

    async def seek_to_committed(self, *partitions: TopicPartition) -> bool:
        """Read from the committed offsets again."""
        return await self._seek_reset(partitions, "committed")

    async def _seek_reset(
        self, partitions: Sequence[TopicPartition], how: Literal["earliest", "latest", "committed"]
    ) -> bool:
        self._ensure_open()
        targets = list(partitions) or sorted(self._owned())
        for tp in targets:
            self._checked(tp)
        for tp in targets:
            self._state.request_reset(tp, how)
            self._in_hand.pop(tp, None)
        self._fetcher.wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._request_timeout
        while True:
            if all(self._state.position(tp) is not None for tp in targets):
                return True
            if any(self._state.get(tp) is None for tp in targets):
                return False  # revoked meanwhile
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            await self._wait_for_data(remaining)

    def _checked(self, partition: TopicPartition) -> TopicPartition:
        if not isinstance(partition, tuple) or len(partition) != 2:
            raise TypeError("partitions must be TopicPartition instances")
        self._ensure_open((partition,))
        st = self._state.get(partition)
        if st is None or (st.stopped and partition not in self._revoking):
            raise LocalProtocolError(f"{partition} is not assigned to this consumer")
        return partition

    # ------------------------------------------------------------------ flow control

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching and returning records of ``partitions`` (buffered ones are kept)."""
        for tp in partitions:
            self._checked(tp)
        self._state.pause(partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._state.resume(partitions)
        self._fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return set(self._state.paused())

    def assignment(self) -> set[TopicPartition]:
        """The partitions this consumer may read now: those given to :meth:`assign`, or the
        group's assignment less those being revoked (KAFKA-14196)."""
        return set(self._owned())

    def _owned(self) -> Partitions:
        manual = self._manual.partitions
        return self._member.assignment if manual is None else manual

    # ------------------------------------------------------------------ subscription

    def subscribe(
        self,
        topics: Iterable[str] = (),
        pattern: str | None = None,
        listener: Any = None,
    ) -> None:
        """Subscribe to ``topics`` or ``pattern`` (KIP-70: the next rebalance revokes what is
        no longer wanted). Takes effect in the background; errors surface from the next
        ``getmany``/``getone``. ``listener`` replaces the rebalance listener. May be called
        before :meth:`start`."""
        if self._closed:
            raise ConsumerStoppedError("the consumer is closed")
        self._manual.check_subscribe()
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if bool(topic_list) == (pattern is not None):
            raise ConfigurationError("subscribe needs topics or pattern (exactly one)")
        if listener is not None:
            self._hooks.listener = listener
        self._topics = frozenset(topic_list) if topic_list else None
        self._pattern = pattern
        if not self._started:
            return  # start() subscribes
        topics_now, pattern_now = self._topics, self._pattern
        self._run_control(lambda: self._member.subscribe(topics_now, pattern=pattern_now))

    def subscription(self) -> frozenset[str]:
        """The topics subscribed to (a pattern: the topics it matches now)."""
        return self._member.subscription

    def unsubscribe(self) -> None:
        """Commit (auto-commit), revoke everything and leave the group (KIP-70); or drop the
        manual assignment (as ``assign([])``)."""
        self._ensure_open()
        if self._manual.active:
            self.assign([])
            return
        self._topics = None
        self._pattern = None
        if self._started:
            self._run_control(self._member.unsubscribe)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly ``partitions``, without a group (Java's and aiokafka's ``assign``):
        no coordinator, no rebalances, no listener. Replaces the previous manual set (kept
        partitions keep their positions; dropped ones are committed with auto-commit and
        forgotten); ``assign([])`` unassigns. Positions start at the group's committed
        offsets when ``group_id`` is given, else at ``auto_offset_reset``. A topic that does
        not exist yet gives no records until it does. Raises
        :class:`~aiogroup.errors.IllegalStateError` on a subscribed consumer."""
        if self._closed:
            raise ConsumerStoppedError("the consumer is closed")
        self._manual.check_assign(self._topics is not None or self._pattern is not None)
        added, removed = self._manual.assign(partitions)
        if removed:
            offsets = self._state.offsets_to_commit(removed, in_hand=self._in_hand)
            if self._auto_commit and self._started and offsets:  # Java commits before, async
                self._spawn(self._commit_quietly(removed, "on assign", offsets), "aiogroup-commit")
            self._state.stop(removed)
            self._state.remove(removed)
            self._meters.forget(removed)
            for tp in removed:
                self._in_hand.pop(tp, None)
        self._state.add(added)
        self._fetcher.wake()
        self._wake_pollers()

    def enforce_rebalance(self, reason: str | None = None) -> None:
        """Make the member rejoin its group now (Java's ``enforceRebalance``): one new
        generation; ``reason`` reaches the coordinator in JoinGroup v8+ (KIP-800). Returns at
        once. Under ``group_protocol="consumer"`` (KIP-848) it does nothing but log a warning,
        as Java's consumer does. Raises :class:`~aiogroup.errors.IllegalStateError` for a
        consumer with a manual assignment or without a group."""
        self._manual.check_rebalance()
        self._ensure_open()
        self._run_control(lambda: self._member.enforce_rebalance(reason))

    def _run_control(self, call: Any) -> None:
        previous = self._control

        async def run() -> None:
            if previous is not None:
                with contextlib.suppress(Exception):
                    await previous
            try:
                await call()
            except AiogroupError as exc:
                self._errors.append(exc)
                self._wake_pollers()

        self._control = asyncio.ensure_future(run())

    # ------------------------------------------------------------------ groups, topics

    @property
    def member(self) -> GroupMember:
        """The group member underneath (generation, member id, rebalance outcomes)."""
        return self._member

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Group, generation (KIP-848: member epoch), member id and instance id now, for
        ``TransactionalProducer.send_offsets_to_transaction`` (KIP-447; docs/exactly-once.md).
        A consumer without a group id has none (``GroupIdRequiredError``, as Java's)."""
        self._manual.require_group("group_metadata()")
        return group_metadata_of(self._member)

    async def topics(self) -> set[str]:
        """Every topic the cluster has."""
        self._ensure_open()
        return set(await self._member.transport.partitions_per_topic(None))

    async def partitions_for_topic(self, topic: str) -> set[int] | None:
        """The partitions of ``topic`` (None if it does not exist)."""
        self._ensure_open()
        counts = await self._member.transport.partitions_per_topic([topic])
        return None if topic not in counts else set(range(counts[topic]))

    # ------------------------------------------------------------------ the offsets source

    def offsets_to_commit(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Processed positions not committed yet (the member's auto-commit asks)."""
        return self._state.offsets_to_commit(partitions, in_hand=self._in_hand)

    def offsets_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        self._state.mark_committed(offsets)

    async def _commit_quietly(
        self,
        partitions: Iterable[TopicPartition],
        why: str,
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """Auto-commit the processed positions of ``partitions`` (or ``offsets``, taken before
        they were dropped); failures are logged."""
        if offsets is None:
            offsets = self._state.offsets_to_commit(partitions, in_hand=self._in_hand)
        if not offsets:
            return
        try:
            await self._send_commit(offsets)
        except asyncio.CancelledError:
            raise
        except AiogroupError as exc:
            log.warning("auto-commit %s failed: %s", why, exc)
            return
        self._state.mark_committed(offsets)

    def _release(self) -> None:
        """The application came back: the records handed out before are processed."""
        self._in_hand = {}
        released, self._released = self._released, None
        if released is not None and not released.done():
            released.set_result(None)

    async def _wait_released(self, partitions: Iterable[TopicPartition]) -> None:
        """Wait (at most ``max_poll_interval_ms``) until the application is done with the
        records of ``partitions`` it was handed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._max_poll_interval
        wanted = set(partitions)
        while wanted & self._in_hand.keys() and not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                log.warning(
                    "the application kept records of %s past max_poll_interval_ms; "
                    "committing before them",
                    sorted(wanted & self._in_hand.keys()),
                )
                return
            if self._released is None or self._released.done():
                self._released = loop.create_future()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._released), remaining)

    # ------------------------------------------------------------------ background

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.create_task(coro, name=name, context=self._context.copy())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _auto_commit_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_at = loop.time() + self._auto_commit_interval
        while not self._closed:
            await asyncio.sleep(max(0.0, next_at - loop.time()))  # a periodic timer
            next_at = loop.time() + self._auto_commit_interval
            manual = self._manual.active
            if not manual and self._member.state is not MemberState.STABLE:
                continue  # the rebalance commits before it revokes; try again next interval
            assignment = self._owned()
            if assignment:
                with contextlib.suppress(RebalanceInProgressError):
                    await self._commit_quietly(assignment, "on its interval")

    async def _rejoin(self) -> None:
        """The next poll after a poll-timeout leave: subscribe again."""
        self._left_for_poll = None
        if self._topics is not None:
            await self._member.subscribe(self._topics)
        elif self._pattern is not None:
            await self._member.subscribe(pattern=self._pattern)

    # ------------------------------------------------------------------ helpers

    def _ensure_open(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Refuse calls on a closed consumer, except for ``partitions`` that are all being
        revoked: a revoke callback that ``close()`` runs may still use them."""
        if self._closed and not (
            partitions is not None and self._revoking and self._revoking.issuperset(partitions)
        ):
            raise ConsumerStoppedError("the consumer is closed")
        if not self._started:
            raise ConsumerStoppedError("the consumer is not started (await start() first)")

    def _raise_errors(self) -> None:
        if self._errors:
            first, self._errors = self._errors[0], []
            raise first
        self._member.raise_errors()
