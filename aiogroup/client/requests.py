"""The membership machines' requests, sent: each request action becomes a transport call, each
answer (or failure) the event the machine waits for.

The machine never waits on the network: it returns ``FindCoordinator``, ``SendJoinGroup``,
``SendSyncGroup``, ``SendHeartbeat``, ``SendLeaveGroup``, ``CommitOffsets`` and
``RequestMetadata`` actions (the KIP-848 machine ``SendConsumerGroupHeartbeat`` instead of the
JoinGroup, SyncGroup, Heartbeat and LeaveGroup) and later takes their answers as events.
:class:`Requests` does the
sending for the driver (:class:`aiogroup.client.GroupMember`), so that every failure turns into
an event too (a request that reached no broker is ``CoordinatorLost``, a lookup that failed
``CoordinatorLookupFailed``): the machine's answer is never lost. What the driver adds (posting
events, logging failures, reporting refused credentials, telemetry of commits) comes in through
:class:`RequestHost`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from aiogroup.client.outcome import OffsetsSource
from aiogroup.client.reporting import Reporter
from aiogroup.client.transport import Transport
from aiogroup.errors import (
    AiogroupError,
    AuthenticationError,
    BrokerUnreachableError,
    KafkaError,
    UnsupportedApiVersionError,
)
from aiogroup.membership import actions as act
from aiogroup.membership import consumer_events as cev
from aiogroup.membership import events as ev
from aiogroup.membership.interface import Machine
from aiogroup.observability.registry import MetricsRegistry
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.client.member import GroupMember

__all__ = ["MemberHost", "RequestHost", "Requests"]

log = logging.getLogger("aiogroup.client")

_UNSUPPORTED_VERSION = 35


class RequestHost(Protocol):
    """What :class:`Requests` needs of the driver."""

    @property
    def closed(self) -> bool:
        """The member is closing: background refreshes stop."""
        ...

    def post(self, event: ev.Event) -> None:
        """Hand an answer to the machine."""

    def trouble(self, msg: str, exc: BaseException, *, key: str) -> None:
        """A failed request (``msg`` takes the group id and the error), rate-limited."""

    def auth_failed(self, exc: BaseException) -> None:
        """A connect refused by TLS or SASL: the user hears of it from the next call."""



class MemberHost:
    """What the request sender needs of the member
    (:class:`~aiogroup.client.requests.RequestHost`)."""

    def __init__(self, member: GroupMember) -> None:
        self._member = member

    @property
    def closed(self) -> bool:
        return self._member._closed

    def post(self, event: ev.Event) -> None:
        self._member._post(event)

    def trouble(self, msg: str, exc: BaseException, *, key: str) -> None:
        self._member._trouble(msg, exc, key=key)

    def auth_failed(self, exc: BaseException) -> None:
        self._member._auth_failed(exc)


class Requests:
    """Sends the machine's requests over ``transport``; answers go to ``host.post``."""

    def __init__(
        self,
        transport: Transport,
        group_id: str,
        host: RequestHost,
        *,
        retry_backoff_ms: int,
        metadata_max_age_ms: int,
        report: Reporter,
        offsets_source: OffsetsSource | None,
        machine: Machine,
        metrics: MetricsRegistry | None = None,
    ) -> None:
        self.transport = transport
        self.group_id = group_id
        self.host = host
        #: Telemetry of commits; the consumer's bookkeeping of what is committed; the machine
        #: (its state goes with a refused commit into telemetry).
        self.report = report
        self.offsets_source = offsets_source
        self.machine = machine
        #: Where each OffsetCommit answer's latency goes (``commit-latency-*``, ``commit-rate``).
        self.metrics = metrics
        self.retry_backoff_ms = retry_backoff_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        #: The last metadata the machine asked for, refreshed every ``metadata_max_age_ms``.
        self.last_metadata: act.RequestMetadata | None = None
        self._refresh: asyncio.Task[None] | None = None

    def stop(self) -> None:
        """Stop the periodic metadata refresh."""
        if self._refresh is not None:
            self._refresh.cancel()

    # -- the coordinator requests -------------------------------------------------------

    async def guard(self, request: Callable[[], Awaitable[ev.Event]]) -> None:
        """Run one coordinator request; connection trouble becomes CoordinatorLost."""
        try:
            event = await request()
        except asyncio.CancelledError:
            raise
        except AiogroupError as exc:
            self.host.trouble(
                "group %s: coordinator request failed (%s); looking for the coordinator again",
                exc,
                key="coordinator request failed",
            )
            self.host.auth_failed(exc)
            self.transport.coordinator_dead()
            event = ev.CoordinatorLost()
        except Exception as exc:  # never lose the answer the machine waits for
            log.warning("coordinator request failed unexpectedly: %r", exc)
            self.transport.coordinator_dead()
            event = ev.CoordinatorLost()
        self.host.post(event)

    async def find_coordinator(self, action: act.FindCoordinator) -> None:
        self.transport.coordinator_dead()
        try:
            node_id = await self.transport.find_coordinator()
        except asyncio.CancelledError:
            raise
        except AuthenticationError as exc:  # reported with its own words, then retried
            self.host.auth_failed(exc)
            self.host.post(ev.CoordinatorLookupFailed(action.token, -1))
            return
        except Exception as exc:
            unreachable = isinstance(exc, BrokerUnreachableError)
            code = exc.error_code if isinstance(exc, KafkaError) and not unreachable else -1
            if isinstance(exc, KafkaError) and exc.retriable and not unreachable:
                log.debug("group %s: no coordinator yet (%s); retrying", self.group_id, exc)
            else:
                self.host.trouble(
                    "group %s: no coordinator found (%s); retrying", exc, key="FindCoordinator"
                )
            self.host.post(ev.CoordinatorLookupFailed(action.token, code))
            return
        self.host.post(ev.CoordinatorFound(action.token, node_id))

    async def join_group(self, action: act.SendJoinGroup) -> None:
        async def request() -> ev.Event:
            r = await self.transport.join_group(
                member_id=action.member_id,
                group_instance_id=action.group_instance_id,
                session_timeout_ms=action.session_timeout_ms,
                rebalance_timeout_ms=action.rebalance_timeout_ms,
                protocols=list(action.protocols),
                protocol_type=action.protocol_type,
                reason=action.reason or None,
            )
            if r.error_code:
                return ev.JoinGroupFailed(action.token, r.error_code, r.member_id)
            return ev.JoinGroupCompleted(
                token=action.token,
                generation_id=r.generation_id,
                member_id=r.member_id,
                leader=r.leader,
                protocol_name=r.protocol_name or "",
                protocol_type=action.protocol_type,
                members=r.members,
            )

        await self.guard(request)

    async def sync_group(self, action: act.SendSyncGroup) -> None:
        async def request() -> ev.Event:
            r = await self.transport.sync_group(
                generation_id=action.generation_id,
                member_id=action.member_id,
                group_instance_id=action.group_instance_id,
                protocol_name=action.protocol_name,
                protocol_type=action.protocol_type,
                assignments=dict(action.assignments),
            )
            if r.error_code:
                return ev.SyncGroupFailed(action.token, r.error_code)
            return ev.SyncGroupCompleted(action.token, r.assignment)

        await self.guard(request)

    async def heartbeat(self, action: act.SendHeartbeat) -> None:
        async def request() -> ev.Event:
            code = await self.transport.heartbeat(
                generation_id=action.generation_id,
                member_id=action.member_id,
                group_instance_id=action.group_instance_id,
            )
            if code:
                return ev.HeartbeatFailed(action.token, code)
            return ev.HeartbeatCompleted(action.token)

        await self.guard(request)

    async def leave_group(self, action: act.SendLeaveGroup) -> None:
        async def request() -> ev.Event:
            code = await self.transport.leave_group(
                member_id=action.member_id,
                group_instance_id=action.group_instance_id,
                reason=action.reason or None,
            )
            return ev.LeaveGroupCompleted(action.token, code)

        await self.guard(request)

    async def consumer_group_heartbeat(self, action: cev.SendConsumerGroupHeartbeat) -> None:
        """ConsumerGroupHeartbeat (KIP-848); a broker without it is an answer too
        (UNSUPPORTED_VERSION, with the words that say what is missing), never a lost
        coordinator to look for again and again."""

        async def request() -> ev.Event:
            try:
                r = await self.transport.consumer_group_heartbeat(
                    member_id=action.member_id,
                    member_epoch=action.member_epoch,
                    group_instance_id=action.group_instance_id,
                    rack_id=action.rack_id,
                    rebalance_timeout_ms=action.rebalance_timeout_ms,
                    subscribed_topic_names=action.subscribed_topic_names,
                    subscribed_topic_regex=action.subscribed_topic_regex,
                    server_assignor=action.server_assignor,
                    owned=action.owned,
                )
            except UnsupportedApiVersionError as exc:
                return cev.ConsumerGroupHeartbeatFailed(
                    action.token, _UNSUPPORTED_VERSION, str(exc)
                )
            if r.error_code:
                return cev.ConsumerGroupHeartbeatFailed(action.token, r.error_code, r.error_message)
            return cev.ConsumerGroupHeartbeatCompleted(
                token=action.token,
                member_id=r.member_id,
                member_epoch=r.member_epoch,
                heartbeat_interval_ms=r.heartbeat_interval_ms,
                assignment=r.assignment,
            )

        await self.guard(request)

    async def commit(
        self, action: act.CommitOffsets, offsets: Mapping[TopicPartition, int]
    ) -> None:
        """OffsetCommit of ``offsets`` (the action's, or the consumed positions the driver
        found for an auto-commit)."""
        started = time.time()
        loop = asyncio.get_running_loop()
        sent = loop.time()
        try:
            result = await self.transport.offset_commit(
                offsets,
                generation_id=action.generation_id,
                member_id=action.member_id,
                group_instance_id=action.group_instance_id,
                # Not behind our own JoinGroup, which the coordinator holds (KIP-429 commits).
                coordination=not action.during_join,
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.trouble(
                "group %s: OffsetCommit failed (%s); looking for the coordinator again",
                exc,
                key="commit failed",
            )
            self.host.auth_failed(exc)
            self.transport.coordinator_dead()
            self.host.post(ev.CommitFailed(action.token, -1))
            self.host.post(ev.CoordinatorLost())
            return
        if self.metrics is not None:  # every answer counts, as Java's commit sensor
            now = loop.time()
            self.metrics.record_commit(now - sent, now)
        if result.error_code:
            self.report(
            "commit_failed",
            offsets,
            action.generation_id,
            error=f"error {result.error_code}",
            state=self.machine.state.value,
            error_code=result.error_code,
            during_join=action.during_join,
            started=started,
        )
            self.host.post(ev.CommitFailed(action.token, result.error_code))
            return
        log.debug(
            "group %s: committed %d offsets (generation %d)",
            self.group_id,
            len(offsets),
            action.generation_id,
        )
        self.report("offsets_committed", offsets, action.generation_id, started=started)
        if self.offsets_source is not None:
            try:
                self.offsets_source.offsets_committed(offsets)
            except Exception as exc:  # the source's bookkeeping must not lose the answer
                log.warning("offsets_committed hook failed: %r", exc)
        self.host.post(ev.CommitCompleted(action.token))

    # -- metadata -----------------------------------------------------------------------

    async def metadata(self, action: act.RequestMetadata) -> None:
        """Partition counts of the topics the machine asked about, retried with backoff
        until they come (or the member closes); then refreshed every metadata_max_age_ms."""
        self.last_metadata = action
        self._schedule_refresh()
        await self._fetch(action)

    async def _fetch(self, action: act.RequestMetadata) -> None:
        backoff = max(self.retry_backoff_ms / 1000, 0.05)
        while not self.host.closed:
            try:
                if action.topic_ids:  # KIP-848: assignments name topics by id
                    wanted = None if action.topics is None else sorted(action.topics)
                    infos = await self.transport.topic_metadata(wanted)
                    ids = {t: i.topic_id for t, i in infos.items() if i.topic_id is not None}
                    counts = {t: i.partitions for t, i in infos.items()}
                    self.host.post(ev.MetadataUpdated(counts, ids))
                    return
                if action.racks:  # KIP-881: a leader some of whose members have a rack
                    wanted = None if action.topics is None else sorted(action.topics)
                    infos = await self.transport.topic_metadata(wanted, racks=True)
                    if action.topics is None and action.pattern is not None:
                        pat = action.pattern
                        infos = {t: i for t, i in infos.items() if pat.fullmatch(t)}
                    counts = {t: i.partitions for t, i in infos.items()}
                    racks = {t: i.partition_racks or () for t, i in infos.items()}
                    self.host.post(ev.MetadataUpdated(counts, partition_racks=racks))
                    return
                if action.topics is None:
                    counts = await self.transport.partitions_per_topic(None)
                    if action.pattern is not None:
                        pat = action.pattern
                        counts = {t: n for t, n in counts.items() if pat.fullmatch(t)}
                else:
                    counts = await self.transport.partitions_per_topic(sorted(action.topics))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.host.trouble(
                    "group %s: metadata request failed (%s); retrying", exc, key="metadata failed"
                )
                self.host.auth_failed(exc)
                await asyncio.sleep(backoff)  # retry backoff
                backoff = min(backoff * 2, 5.0)
                continue
            self.host.post(ev.MetadataUpdated(counts))
            return

    def _schedule_refresh(self) -> None:
        if self._refresh is not None and not self._refresh.done():
            return

        async def refresh() -> None:
            while not self.host.closed:
                await asyncio.sleep(self.metadata_max_age_ms / 1000)  # a periodic timer
                if self.last_metadata is not None and not self.host.closed:
                    await self._fetch(self.last_metadata)

        self._refresh = asyncio.ensure_future(refresh())
