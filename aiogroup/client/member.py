"""An asyncio member of a Kafka consumer group: the driver around the sans-I/O machine.

One task owns the state machine (:class:`aiogroup.membership.MembershipMachine`): it feeds
events with ``now`` from the loop's monotonic clock, wakes it at ``next_deadline()``, and carries
out the actions it returns. Requests, metadata lookups and listener callbacks run in their own
tasks and post their results back as events; user calls (subscribe, commit, close) go through
the same queue, so nothing touches the machine concurrently. The rebalance rules live in the
machine; this module only does I/O.

Usage::

    async with GroupMember("127.0.0.1:9092", "my-group", topics=["orders"],
                           assignors=["cooperative-sticky"], listener=my_listener) as member:
        outcome = await member.wait_for_assignment()
        await member.commit({TopicPartition("orders", 0): 42})
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.client import logs
from aiogroup.client.callbacks import RebalanceListener, run_callbacks
from aiogroup.client.commits import PendingCommits, fetch_committed
from aiogroup.client.machines import (
    DEFAULT_ASSIGNORS,
    check_subscription,
    make_machine,
    new_member_id,
)
from aiogroup.client.options import (
    aiokafka_client_options,
    check_options,
    parameter_names,
    topic_names,
)
from aiogroup.client.outcome import OffsetsSource, RebalanceOutcome
from aiogroup.client.reporting import ActingWatch, Reporter, TelemetryListener
from aiogroup.client.requests import MemberHost, Requests
from aiogroup.client.signal import Signal, loop_time
from aiogroup.client.transport import Transport
from aiogroup.config import GROUP_DEFAULTS, GroupConfig, GroupProtocol
from aiogroup.errors import (
    AiogroupError,
    AuthenticationError,
    BrokerUnreachableError,
    ConfigurationError,
    LocalProtocolError,
    MemberClosedError,
    NotSubscribedError,
    RebalanceInProgressError,
)
from aiogroup.membership import actions as act
from aiogroup.membership import consumer_events as cev
from aiogroup.membership import events as ev
from aiogroup.membership.interface import Machine
from aiogroup.membership.states import MemberState
from aiogroup.observability.health import Health, Limits, MemberWatch, evaluate, member_problems
from aiogroup.observability.metrics import MetricsSink, TeeMetrics
from aiogroup.observability.registry import MetricsRegistry
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "DEFAULT_ASSIGNORS",
    "GroupMember",
    "MemberClosedError",
    "OffsetsSource",
    "RebalanceOutcome",
    "check_subscription",
    "new_member_id",
]

log = logging.getLogger("aiogroup.client")

Partitions = frozenset[TopicPartition]
T = TypeVar("T")

@dataclass(slots=True)
class _Call:
    """A user request run by the owner task (so only that task touches the machine)."""

    fn: Callable[[float], list[act.Action]]
    future: asyncio.Future[None]


def _consume_exception(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()  # reported through the member's state, not this future


class GroupMember:
    """One member of a Kafka consumer group (classic protocol, KIP-429 cooperative rebalancing).

    ``assignors`` are :class:`PartitionAssignor` instances or their protocol names
    (``"cooperative-sticky"``, ``"range"``, ...), most preferred first. ``listener`` has
    ``on_partitions_revoked`` / ``on_partitions_assigned`` and optionally ``on_partitions_lost``
    (plain or ``async`` methods). ``group_instance_id`` makes the member static (KIP-345): it
    never sends LeaveGroup, and FENCED_INSTANCE_ID is fatal. Extra keyword arguments go to
    aiokafka's client (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ...).
    ``config`` gives the options as one :class:`~aiogroup.config.GroupConfig` instead;
    ``transport`` a :class:`~aiogroup.client.transport.Transport` to send through (tests drive
    the member with :class:`aiogroup.testing.ScriptedTransport`, whose broker is a script).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        *,
        topics: Iterable[str] | None = None,
        pattern: str | re.Pattern[str] | None = None,
        assignors: Sequence[PartitionAssignor | str] | None = None,
        listener: RebalanceListener | Any | None = None,
        group_instance_id: str | None = GROUP_DEFAULTS.group_instance_id,
        session_timeout_ms: int = GROUP_DEFAULTS.session_timeout_ms,
        heartbeat_interval_ms: int = GROUP_DEFAULTS.heartbeat_interval_ms,
        rebalance_timeout_ms: int = GROUP_DEFAULTS.rebalance_timeout,
        retry_backoff_ms: int = GROUP_DEFAULTS.retry_backoff_ms,
        retry_backoff_max_ms: int = GROUP_DEFAULTS.retry_backoff_max_ms,
        request_timeout_ms: int = GROUP_DEFAULTS.request_timeout_ms,
        metadata_max_age_ms: int = GROUP_DEFAULTS.metadata_max_age_ms,
        close_timeout_s: float = GROUP_DEFAULTS.close_timeout_s,
        rack_id: str | None = GROUP_DEFAULTS.rack_id,
        client_id: str = GROUP_DEFAULTS.client_id,
        group_protocol: GroupProtocol = GROUP_DEFAULTS.group_protocol,
        group_remote_assignor: str | None = GROUP_DEFAULTS.group_remote_assignor,
        config: GroupConfig | None = None,
        transport: Transport | None = None,
        telemetry: Any = None,
        metrics: MetricsSink | None = None,
        enable_auto_commit: bool = False,
        offsets_source: OffsetsSource | None = None,
        **client_options: Any,
    ) -> None:
        # Before anything is built: a misspelt option must not become aiokafka's TypeError.
        check_options(client_options, aiokafka_client_options(), own=_own_options())
        if topics is not None and pattern is not None:
            raise ConfigurationError("give topics or pattern, not both")
        options = GroupConfig(
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
            rack_id=rack_id,
            group_protocol=group_protocol,
            group_remote_assignor=group_remote_assignor,
        )
        if config is None:
            config = options
        elif options != GROUP_DEFAULTS:
            raise ConfigurationError(
                "give the options as keywords or as config=, not both (config already holds "
                "every option)"
            )
        self.config = config
        check_subscription(config, assignors, pattern)
        topic_set = None if topics is None else topic_names(topics)
        # Java's metrics, always kept (``member.metrics``, and its consumer's); a user sink gets
        # the machine's KIP-429 observations too.
        self._registry = MetricsRegistry(started_at=time.monotonic())
        sink: MetricsSink = (
            self._registry if metrics is None else TeeMetrics(self._registry, metrics)
        )
        self.group_id = group_id
        self.client_id = config.client_id
        self.group_instance_id = config.group_instance_id
        self.session_timeout_ms = config.session_timeout_ms
        self.close_timeout_s = config.close_timeout_s
        self.metadata_max_age_ms = config.metadata_max_age_ms
        self.retry_backoff_ms = config.retry_backoff_ms
        # Auto-commit needs positions: only a consumer that fetches has them.
        auto_commit = enable_auto_commit and offsets_source is not None
        # The one place the group protocol is chosen: the driver runs either machine alike.
        self._machine: Machine = make_machine(
            config, group_id, assignors, enable_auto_commit=auto_commit, metrics=sink
        )
        if transport is not None:
            if client_options:
                raise ConfigurationError(
                    "client options go to the transport aiogroup builds; with transport= "
                    f"given, set them on it ({', '.join(sorted(client_options))})"
                )
            self._transport = transport
        else:
            self._transport = Transport(
                bootstrap_servers,
                group_id,
                client_id=config.client_id,
                request_timeout_ms=config.request_timeout_ms,
                join_timeout_ms=config.rebalance_timeout + 5_000,
                **client_options,
            )
        self._offsets_source = offsets_source
        self._telemetry = telemetry
        self._report = Reporter(telemetry)
        self._listener: Any = (
            TelemetryListener(self, listener, self._report) if telemetry else listener
        )
        self._metrics = sink
        self._initial: ev.SubscriptionChanged | None = None
        if topic_set:  # no topics at all is no subscription (Java: as unsubscribe)
            self._initial = ev.SubscriptionChanged(topics=topic_set)
        elif pattern is not None:
            self._initial = ev.SubscriptionChanged(pattern=re.compile(pattern))

        self._queue: asyncio.Queue[ev.Event | _Call] = asyncio.Queue()
        self._owner: asyncio.Task[None] | None = None
        self._io_tasks: set[asyncio.Task[None]] = set()
        self._commits = PendingCommits()
        self._callbacks: dict[int, act.InvokeCallbacks] = {}
        self._outcomes: list[RebalanceOutcome] = []
        self._changed = Signal()
        self._pending_errors: list[AiogroupError] = []
        self._fatal: AiogroupError | None = None
        self._closed = False
        self._handing_off = False
        self._started = False
        self._requests = Requests(
            self._transport,
            group_id,
            MemberHost(self),
            retry_backoff_ms=config.retry_backoff_ms,
            metadata_max_age_ms=config.metadata_max_age_ms,
            report=self._report,
            offsets_source=offsets_source,
            machine=self._machine,
            metrics=self._registry,
        )
        self._revoked_acc: set[TopicPartition] = set()
        self._lost_acc: set[TopicPartition] = set()
        self._error_acc: BaseException | None = None
        self._rebalance_started: float | None = None
        self._protocol_name: str | None = self._machine.protocol_name
        #: Who our log records are about; marks our tasks (their records carry it, aiokafka's
        #: lines for them are tamed).
        self.log_identity = logs.LogIdentity(
            group_id,
            client_id=config.client_id,
            group_instance_id=config.group_instance_id,
            member=self._machine,
            epoch=config.group_protocol == "consumer",
        )
        self._context = logs.member_context(self.log_identity)
        self._health = MemberWatch()
        self._limited = logs.RateLimitedLog(log)

    # ------------------------------------------------------------------ public queries

    @property
    def transport(self) -> Transport:
        """The transport the member's requests go through (a :class:`Transport` over aiokafka's
        connections, or the one given as ``transport=``): its ``send``, ``send_to_coordinator``
        and ``address`` serve the consumer's fetcher and the group inspector too."""
        return self._transport

    @property
    def member_id(self) -> str:
        """The member id the coordinator gave us ("" before the first JoinGroup)."""
        return self._machine.member_id

    @property
    def generation_id(self) -> int:
        """The generation this member is in (-1 outside a generation)."""
        return self._machine.generation_id

    @property
    def state(self) -> MemberState:
        return self._machine.state

    @property
    def is_leader(self) -> bool:
        return self._machine.is_leader

    @property
    def protocol(self) -> RebalanceProtocol:
        """The rebalance protocol this member runs (COOPERATIVE or EAGER)."""
        return self._machine.protocol

    @property
    def protocol_name(self) -> str | None:
        """The assignor the group chose at the last join (None before the first); under the
        consumer protocol the broker's assignor asked for (None: the broker's default)."""
        return self._protocol_name

    @property
    def group_protocol(self) -> GroupProtocol:
        """``"classic"`` (JoinGroup/SyncGroup, KIP-429) or ``"consumer"`` (KIP-848)."""
        return self.config.group_protocol

    @property
    def subscription(self) -> frozenset[str]:
        return self._machine.subscribed_topics

    @property
    def assignment(self) -> Partitions:
        """The partitions this member may act on now (fetch, hand out, commit positions of).

        Partitions pending revocation are excluded (KAFKA-14196), and so is everything once a
        session timeout has passed without an answer from the coordinator, in every state
        (joining and waiting for SyncGroup included): a member paused past its session timeout
        must not act as owner before the coordinator answers it again (KAFKA-7026). The rule
        lives in the state machine
        (:meth:`aiogroup.membership.MembershipMachine.may_act_on`); the awaitable from
        :meth:`changed` completes when this set changes. See ``docs/safety.md``.
        """
        return self._machine.may_act_on(loop_time())

    @property
    def session_deadline(self) -> float | None:
        """When :attr:`assignment` empties unless the coordinator answers before (loop time);
        ``None`` outside a generation."""
        return self._machine.session_deadline

    @property
    def metrics(self) -> dict[str, float]:
        """Java's consumer-coordinator metrics now: KIP-429's, the commit metrics and
        ``assigned-partitions`` (:mod:`aiogroup.observability.registry`); latencies in ms,
        ``nan`` where nothing was observed yet."""
        snapshot = self._registry.coordinator_metrics(loop_time())
        snapshot["assigned-partitions"] = float(len(self._machine.assignment))
        return snapshot

    @property
    def metrics_registry(self) -> MetricsRegistry:
        """The registry behind :attr:`metrics` (a Consumer records its own metrics in it)."""
        return self._registry

    def health(self) -> Health:
        """OK, or why not: rebalancing longer than the rebalance timeout, no coordinator or a
        broker unreachable longer than the session timeout, stopped
        (:mod:`aiogroup.observability.health`)."""
        now = loop_time()
        config = self.config
        limits = Limits(config.rebalance_timeout / 1000, config.session_timeout_ms / 1000)
        running = self._owner is not None and not self._owner.done()
        problems = member_problems(
            self._health,
            limits,
            now,
            outages=self._transport.reachability.outages(),
            fatal=self._fatal,
            closed=not running,
        )
        return evaluate(problems, now, time.time())

    @property
    def outcomes(self) -> list[RebalanceOutcome]:
        """Every rebalance outcome so far, oldest first."""
        return list(self._outcomes)

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> GroupMember:
        """Connect (bounded by the request timeout) and start joining if subscribed."""
        if self._started:
            return self
        self._started = True
        logs.install_aiokafka_filter()
        logs.install_member_fields()
        try:
            await self._in_context(self._transport.start())
        except BaseException:
            self._closed = True
            await self._transport.close()
            raise
        self._owner = asyncio.create_task(
            self._run(), name=f"aiogroup-member-{self.group_id}", context=self._context.copy()
        )
        if self._initial is not None:
            await self._call_event(self._initial)
        return self

    async def close(
        self,
        timeout: float | None = None,
        *,
        finish_rebalance: bool = False,
        hand_off: bool = False,
    ) -> None:
        """Revoke (callbacks run), leave the group unless static, and disconnect.

        Completes within ``timeout`` (default ``close_timeout_s``) even if the broker is gone.
        ``finish_rebalance=True``: a rebalance under way is finished first (for at most three
        quarters of ``timeout``), so the final commit and the revocation happen in a generation
        the broker accepts; otherwise (the default, as Java) closing mid-rebalance reports the
        partitions lost.

        ``hand_off=True`` (implies ``finish_rebalance``): hand the owned partitions over
        before leaving, as :meth:`hand_off` does, and wait for that; the application keeps
        working on its partitions until their revocation callback. A close already handing
        off (after :meth:`hand_off`) waits for it (within ``timeout``) whatever the options.
        """
        if self._closed:
            return
        self._closed = True
        limit = self.close_timeout_s if timeout is None else timeout
        owner = self._owner
        try:
            if owner is not None and not owner.done():
                closing: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                finish = finish_rebalance or hand_off

                def close_now(now: float) -> list[act.Action]:
                    by = now + 0.75 * limit if finish else None
                    return self._machine.handle(
                        ev.CloseRequested(finish_rebalance_by=by, hand_off=hand_off), now
                    )

                if self._handing_off:
                    closing.set_result(None)  # hand_off() started the leave: wait for it
                else:
                    self._queue.put_nowait(_Call(close_now, closing))
                with contextlib.suppress(TimeoutError, AiogroupError):
                    await asyncio.wait_for(self._wait_state({MemberState.CLOSED}, closing), limit)
        finally:
            await self._shutdown()

    def hand_off(self, timeout: float | None = None) -> None:
        """Start leaving the group gracefully; returns at once (safe in a signal handler).

        Under the COOPERATIVE protocol a dynamic member rejoins once with an empty
        subscription while it still owns its partitions: the leader gives it nothing and keeps
        those partitions from the others for that round (KIP-429), so the application goes on
        working on them until their revocation callback; the member then leaves at once and
        the others pick them up in the next round (told by an aiogroup leader that it is
        coming, they learn of it within a hundredth of a heartbeat interval). Under EAGER, or for a
        static member (KIP-345), or with nothing owned, it is the usual leave.

        Gives up after three quarters of ``timeout`` (default ``close_timeout_s``) and leaves
        as :meth:`close` does. The member ends CLOSED; :meth:`close` then disconnects.
        """
        if self._closed or self._handing_off:
            return
        owner = self._owner
        if owner is None or owner.done():
            return
        self._handing_off = True
        limit = self.close_timeout_s if timeout is None else timeout

        def start(now: float) -> list[act.Action]:
            return self._machine.handle(
                ev.CloseRequested(finish_rebalance_by=now + 0.75 * limit, hand_off=True), now
            )

        accepted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        accepted.add_done_callback(_consume_exception)
        self._queue.put_nowait(_Call(start, accepted))
        self._notify()

    async def wait_closed(self, timeout: float | None = None) -> bool:
        """Wait (at most ``timeout`` seconds) until the member has left the group (CLOSED), as
        it does by itself at the end of a :meth:`hand_off`; whether it has. Never raises."""
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wait_state({MemberState.CLOSED}, done), timeout)
        return self._machine.state is MemberState.CLOSED

    @property
    def handing_off(self) -> bool:
        """:meth:`hand_off` was called (the member may have left already: see ``state``)."""
        return self._handing_off

    async def __aenter__(self) -> GroupMember:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
        if exc is None:
            self._raise_pending()

    # ------------------------------------------------------------------ user intents

    async def subscribe(
        self, topics: Iterable[str] | None = None, *, pattern: str | None = None
    ) -> None:
        """Change the subscription (KIP-70: a rebalance revokes what is no longer wanted).

        An empty collection of topics unsubscribes, as in the Java consumer.
        """
        if (topics is None) == (pattern is None):
            raise ConfigurationError("subscribe needs topics or pattern (exactly one)")
        if topics is not None:
            topic_set = topic_names(topics)
            if not topic_set:
                await self.unsubscribe()
                return
            await self._call_event(ev.SubscriptionChanged(topics=topic_set))
            return
        await self._call_event(ev.SubscriptionChanged(pattern=re.compile(pattern or "")))

    async def unsubscribe(self) -> None:
        """Revoke everything (callbacks run) and leave the group (KIP-70); stays usable."""
        await self._call_event(ev.UnsubscribeRequested())

    async def leave_group(self, reason: str) -> None:
        """Leave at once without committing; what is owned is reported lost (KIP-62: the
        application stopped polling). Subscribe again to rejoin."""
        await self._call_event(ev.UnsubscribeRequested(lost=True, reason=reason))

    async def enforce_rebalance(self, reason: str | None = None) -> None:
        """Rejoin now (Java's ``enforceRebalance``); ``reason`` goes in the JoinGroup (KIP-800,
        v8+). The consumer protocol (KIP-848) has no such call: a warning, as Java's."""
        if self.config.group_protocol == "consumer":
            log.warning("enforce_rebalance: not supported by the consumer group protocol; ignored")
            return
        await self._call_event(ev.RejoinRequested(reason or "rebalance enforced by user"))

    def raise_errors(self) -> None:
        """Raise the first pending callback error (then forget it), or the fatal error."""
        self._raise_pending()

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) for this generation.

        Raises :class:`~aiogroup.errors.RebalanceInProgressError` (retriable: retry once the
        rebalance completes) or :class:`~aiogroup.errors.CommitFailedError` (the member is not
        in the generation any more; its partitions may be elsewhere); its subclass
        :class:`~aiogroup.errors.PartitionNotAssignedError` when ``offsets`` name a partition
        this member does not own (never assigned, or revoked since: inside
        ``on_partitions_revoked`` it is still owned), and nothing is committed.
        """
        self._raise_pending()
        holder: dict[str, asyncio.Future[None]] = {}

        def start(now: float) -> list[act.Action]:
            action = self._machine.commit(dict(offsets), now)
            holder["result"] = self._commits.open(action.token)
            return [action]

        try:
            await self._submit(start)
        except RebalanceInProgressError as exc:  # refused here: no request was sent
            self._report(
                "commit_failed",
                offsets,
                self.generation_id,
                error=repr(exc),
                state=self.state.value,
                local=True,
            )
            raise
        await asyncio.wait_for(asyncio.shield(holder["result"]), self._request_bound())

    async def committed(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, int | None]:
        """The committed offsets of ``partitions`` (None where nothing is committed).

        Retriable answers (the coordinator loading its offsets after a restart, moving, or out
        of reach) are retried with backoff within the request bound, as Java's
        ``committed()`` does within ``default.api.timeout.ms``; other errors raise.
        """
        self._raise_pending()
        self._ensure_running()
        return await fetch_committed(
            self._transport,
            partitions,
            member=self._machine.offset_fetch_identity,  # KIP-848: who asks, at its epoch
            run=self._in_context,
            still_running=self._ensure_running,
            bound_s=self._request_bound(),
            backoff_s=self.retry_backoff_ms / 1000,
            group_id=self.group_id,
        )

    # ------------------------------------------------------------------ waiting

    async def wait_for_assignment(self, timeout: float | None = None) -> RebalanceOutcome:
        """Wait until the member is in a stable generation; return the latest outcome.

        Raises the first pending callback error (cause preserved) or a fatal error, and
        :class:`~aiogroup.errors.NotSubscribedError` at once if the member subscribes to
        nothing (no assignment could ever come).
        """

        async def wait() -> RebalanceOutcome:
            while True:
                self._raise_pending()
                if not self._machine.has_subscription and (self._started or not self._initial):
                    raise NotSubscribedError(
                        "the member is not subscribed to any topics: give topics or a pattern "
                        "(GroupMember(..., topics=[...]) or await member.subscribe([...]))"
                    )
                if self._outcomes and self._machine.state is MemberState.STABLE:
                    return self._outcomes[-1]
                if self._owner is None or self._owner.done():
                    raise MemberClosedError("the member is not running")
                await self._wait_change()

        return await asyncio.wait_for(wait(), timeout)

    async def rebalances(self) -> AsyncIterator[RebalanceOutcome]:
        """Every rebalance outcome since the member started, then each new one as it happens.

        Ends when the member closes; raises callback and fatal errors as they occur.
        """
        index = 0
        while True:
            self._raise_pending()
            if index < len(self._outcomes):
                index += 1
                yield self._outcomes[index - 1]
                continue
            if self._owner is None or self._owner.done():
                return
            await self._wait_change()

    # ------------------------------------------------------------------ the owner task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        machine = self._machine
        watch = ActingWatch(self._machine, self._report, loop.time())
        try:
            while machine.state is not MemberState.CLOSED:
                now = loop.time()
                self._health.observe(
                    machine.state,
                    subscribed=machine.has_subscription,
                    coordinator_known=machine.coordinator_id is not None,
                    generation_id=machine.generation_id,
                    now=now,
                )
                if watch.check(now):
                    self._notify()  # a session lapsed, or an answer ended the lapse
                deadline = machine.next_deadline()
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    item = await asyncio.wait_for(self._queue.get(), timeout)
                except TimeoutError:
                    item = None
                # Awake: what the member may act on before anything is handled. A process
                # paused past its session (SIGSTOP, a long GC) wakes with its deadline and an
                # answer both due; its acting set ended at the deadline (a lapse, KAFKA-7026),
                # not when the answer or the timer fences it.
                if watch.check(loop.time()):
                    self._notify()
                if item is None:
                    before = machine.state
                    self._execute(machine.handle_timer(loop.time()))
                    if machine.state is not before:
                        self._notify()  # a timer moved the state (a retry, a backoff's end)
                    continue
                now = loop.time()
                if isinstance(item, _Call):
                    if item.future.done():
                        continue
                    before = machine.state
                    try:
                        actions = item.fn(now)
                    except AiogroupError as exc:
                        item.future.set_exception(exc)
                        continue
                    self._execute(actions)
                    item.future.set_result(None)
                    if machine.state is not before:
                        self._notify()  # a call moved the state (subscribe, a hand-off's join)
                    continue
                self._note_event(item, now)
                before = machine.state
                before_generation, before_member_id = machine.generation_id, machine.member_id
                self._execute(machine.handle(item, now))
                logs.log_response(self._limited, self.group_id, machine, item)
                if isinstance(item, ev.CallbacksFinished):
                    self._after_callbacks(item, now)
                if machine.state is not before:
                    if machine.state in (MemberState.UNJOINED, MemberState.CLOSED) and (
                        self._revoked_acc or self._lost_acc
                    ):
                        # Unsubscribed or closed: the revocation is this rebalance's outcome.
                        self._publish(before_generation, before_member_id, frozenset())
                    if before is MemberState.LEAVING:
                        logs.log_left(
                            self.group_id,
                            before_member_id,
                            static=self.group_instance_id is not None,
                            closing=self._closed,
                        )
                    self._notify()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug in the machine or here: fail the member loudly
            log.exception("the member's driver failed")
            self._fatal = exc if isinstance(exc, AiogroupError) else LocalProtocolError(repr(exc))
            if not isinstance(exc, AiogroupError):
                self._fatal.__cause__ = exc
        finally:
            watch.check(loop.time())  # the last state (closed) and acting set
            self._commits.fail_all(self._fatal or MemberClosedError("the member closed"))
            self._notify()

    def _note_event(self, event: ev.Event, now: float) -> None:
        if (
            isinstance(event, cev.ConsumerGroupHeartbeatCompleted)
            and self._machine.state is MemberState.JOINING
            and event.member_epoch > 0
        ):
            # KIP-848: the heartbeat with epoch 0 was answered with an epoch: joined.
            if self._rebalance_started is None:
                self._rebalance_started = time.monotonic()
            logs.log_joined(
                self.group_id, event.member_id, event.member_epoch, "consumer", leader=False
            )
            self._report(
                "joined",
                self.group_id,
                event.member_id,
                event.member_epoch,
                self._protocol_name or "consumer",
                leader=False,
                group_instance_id=self.group_instance_id,
                rebalance_protocol=self.protocol.name.lower(),
                group_protocol="consumer",
            )
        elif isinstance(event, ev.JoinGroupCompleted):
            self._protocol_name = event.protocol_name
            self._report(
                "joined",
                self.group_id,
                event.member_id,
                event.generation_id,
                event.protocol_name,
                leader=event.leader == event.member_id,
                group_instance_id=self.group_instance_id,
                rebalance_protocol=self.protocol.name.lower(),
            )
        elif (
            isinstance(event, ev.JoinGroupFailed | ev.SyncGroupFailed)
            and event.error_code not in (0, 79)
            and self._rebalance_started is not None
        ):
            latency = time.monotonic() - self._rebalance_started
            self._report("rebalance_failed", f"error {event.error_code}", latency)

    def _execute(self, actions: list[act.Action]) -> None:
        for action in actions:
            requests = self._requests
            if isinstance(action, act.FindCoordinator):
                self._spawn(requests.find_coordinator(action))
            elif isinstance(action, act.RequestMetadata):
                self._spawn(requests.metadata(action))
            elif isinstance(action, act.SendJoinGroup):
                if self._rebalance_started is None:
                    self._rebalance_started = time.monotonic()
                self._spawn(requests.join_group(action))
            elif isinstance(action, act.SendSyncGroup):
                if action.assignments and self._telemetry is not None:
                    self._report.leader_round(action, self._machine)
                self._spawn(requests.sync_group(action))
            elif isinstance(action, act.SendHeartbeat):
                self._spawn(requests.heartbeat(action))
            elif isinstance(action, cev.SendConsumerGroupHeartbeat):
                self._spawn(requests.consumer_group_heartbeat(action))
            elif isinstance(action, act.SendLeaveGroup):
                self._spawn(requests.leave_group(action))
            elif isinstance(action, act.CommitOffsets):
                offsets = action.offsets
                if offsets is None and self._offsets_source is not None:
                    # Auto-commit of the consumed positions of what the member owns.
                    owned = self._machine.assignment
                    offsets = dict(self._offsets_source.offsets_to_commit(owned))
                if not offsets:
                    self._queue.put_nowait(ev.CommitCompleted(action.token))
                else:
                    self._spawn(requests.commit(action, offsets))
            elif isinstance(action, act.ResolveCommit):
                self._commits.resolve(action.token, action.error)
            elif isinstance(action, act.InvokeCallbacks):
                self._callbacks[action.token] = action
                self._spawn(self._invoke_callbacks(action))
            elif isinstance(action, act.RaiseToUser):
                if action.fatal:
                    self._fatal = action.error
                else:
                    self._pending_errors.append(action.error)
                self._notify()
            else:  # pragma: no cover - a new action type the driver does not know
                raise LocalProtocolError(f"unknown action {action!r}")

    def _after_callbacks(self, event: ev.CallbacksFinished, now: float) -> None:
        action = self._callbacks.pop(event.token, None)
        if action is None:
            return
        self._revoked_acc |= action.revoked
        self._lost_acc |= action.lost
        if self._error_acc is None and event.first_error is not None:
            self._error_acc = event.first_error
        if action.assigned is None:
            return  # more callbacks follow in this rebalance (or the leave completes it)
        self._publish(action.generation_id, action.member_id, action.assigned)
        if self._rebalance_started is not None:
            latency = time.monotonic() - self._rebalance_started
            self._report("rebalance_completed", action.generation_id, latency)
        self._rebalance_started = None

    def _publish(self, generation_id: int, member_id: str, assigned: Partitions) -> None:
        """Record one outcome: what changed since the previous one."""
        outcome = RebalanceOutcome(
            generation_id=generation_id,
            member_id=member_id,
            protocol=self._machine.protocol,
            assigned=assigned,
            revoked=frozenset(self._revoked_acc),
            lost=frozenset(self._lost_acc),
            assignment=self._machine.assignment,
            ended=time.time(),
            error=self._error_acc,
        )
        self._revoked_acc.clear()
        self._lost_acc.clear()
        self._error_acc = None
        started = self._rebalance_started
        logs.log_rebalance(
            self.group_id,
            member_id,
            generation_id,
            self._protocol_name or outcome.protocol.name.lower(),
            assigned=len(assigned),
            revoked=len(outcome.revoked),
            lost=len(outcome.lost),
            owned=len(outcome.assignment),
            duration_s=None if started is None else time.monotonic() - started,
        )
        self._outcomes.append(outcome)
        self._notify()

    # ------------------------------------------------------------------ I/O tasks

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._io_tasks.add(task)
        task.add_done_callback(self._io_tasks.discard)

    def _post(self, event: ev.Event) -> None:
        self._queue.put_nowait(event)

    async def _invoke_callbacks(self, action: act.InvokeCallbacks) -> None:
        finished = await run_callbacks(self._listener, action, metrics=self._metrics)
        if action.revoked:  # commits started while they were owned go out first
            await self._commits.settle(self._request_bound())
        self._post(finished)

    # ------------------------------------------------------------------ helpers

    def _in_context(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Run ``coro`` as a task marked as this member's (so aiokafka's lines are tamed)."""
        return asyncio.create_task(coro, context=self._context.copy())

    def _trouble(self, msg: str, exc: BaseException, *, key: str) -> None:
        """A failed request, rate-limited; at DEBUG when no broker could be reached (the
        transport's :class:`~aiogroup.client.reachability.Reachability` says that once)."""
        if isinstance(exc, BrokerUnreachableError):
            log.debug(msg, self.group_id, exc)
        else:
            self._limited.warning(msg, self.group_id, exc, key=key, stacklevel=4)

    def _auth_failed(self, exc: BaseException) -> None:
        """A connect refused by TLS or SASL (credentials changed, certificate replaced): raise
        it from the user's next call, as the Java client does from ``poll``, and keep
        retrying in the background (the broker may be fixed)."""
        if isinstance(exc, AuthenticationError):
            log.warning("authentication failed: %s", exc)
            self._pending_errors.append(exc)
            self._notify()

    def _request_bound(self) -> float:
        return self._transport.request_timeout_ms / 1000 + 5.0

    def _ensure_running(self) -> None:
        if self._fatal is not None:
            raise self._fatal
        # While closing, the owner still runs: a revoked callback may commit (KIP-429).
        if self._owner is None or self._owner.done():
            raise MemberClosedError("the member is not running (start it, or it was closed)")

    def _raise_pending(self) -> None:
        if self._pending_errors:
            first, self._pending_errors = self._pending_errors[0], []
            raise first
        if self._fatal is not None:
            raise self._fatal

    def _submit(self, fn: Callable[[float], list[act.Action]]) -> asyncio.Future[None]:
        self._ensure_running()
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Call(fn, future))
        return future

    async def _call_event(self, event: ev.Event) -> None:
        self._raise_pending()
        await self._submit(lambda now: self._machine.handle(event, now))

    def _change_future(self) -> asyncio.Future[bool]:
        # Shared by every waiter; each gets its own shield, so that cancelling one waiter
        # never cancels the others.
        return self._changed.next()

    def _notify(self) -> None:
        self._changed.fire()

    async def _wait_change(self) -> None:
        await asyncio.shield(self._change_future())

    def changed(self) -> Awaitable[bool]:
        """An awaitable that completes at the next observable change (a state, an outcome, an
        error, closing). Take it *before* checking your condition, then await it; dropping it
        unawaited is harmless."""
        return asyncio.shield(self._change_future())

    async def _wait_state(self, states: set[MemberState], first: Awaitable[None]) -> None:
        await first
        while self._machine.state not in states:
            if self._owner is None or self._owner.done():
                return
            waiter: asyncio.Future[Any] = asyncio.shield(self._change_future())
            owner: asyncio.Future[Any] = self._owner
            try:
                await asyncio.wait({waiter, owner}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waiter.cancel()

    async def _shutdown(self) -> None:
        self._requests.stop()
        tasks = [t for t in (self._owner, *self._io_tasks) if t is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5.0)
        self._commits.fail_all(MemberClosedError("the member closed"))
        await self._transport.close()
        self._notify()


def _own_options() -> frozenset[str]:
    return parameter_names(GroupMember.__init__)

