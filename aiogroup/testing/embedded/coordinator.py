"""The embedded broker's group coordinator: Apache Kafka's *classic* coordinator, sans-I/O.

This module is pure: no asyncio, no sockets, no clock. Time is the ``now`` argument (seconds, any
monotonic origin) of every call. Requests and responses are plain dataclasses
(:mod:`~aiogroup.testing.embedded.messages`); the asyncio server's group APIs
(:mod:`aiogroup.testing.embedded.group_apis`) translate kafka-python's wire classes to and from
them.

Rules follow Apache Kafka's classic group coordinator (``GroupCoordinator.scala`` /
``GroupMetadata.scala`` in Kafka 2.x-3.x, ``GroupMetadataManager`` + ``ClassicGroup`` in the
``group-coordinator`` module of 3.7+); each rule cites where it comes from. Where Kafka's rules
changed between versions, ``CoordinatorConfig.flavour`` picks a generation: ``kafka4`` (the
default), ``kafka3`` or ``kafka2`` (Kafka 2.3); :data:`RULES` lists those rules, :data:`FLAVOURS`
what each flavour does (both in :mod:`~aiogroup.testing.embedded.rules`, with
:class:`CoordinatorConfig`).

The state machine is :class:`GroupCoordinator`, in three layers: this module's public calls
(each request's entry point, offsets, DeleteGroups, failover, inspection) over
:mod:`~aiogroup.testing.embedded.member_requests` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup)
over :mod:`~aiogroup.testing.embedded.rebalance` (the transitions, timers and answer delivery
they share); the group and its members are :mod:`~aiogroup.testing.embedded.group`'s. Beside
them, KIP-848's consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe, mixed groups)
are :mod:`~aiogroup.testing.embedded.consumer_admin` over
:mod:`~aiogroup.testing.embedded.consumer_classic` over
:mod:`~aiogroup.testing.embedded.consumer_requests`, in the same namespace of groups.

How the server wires it (one coordinator per broker, shared by every connection)::

    coord = GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=0))

    # JoinGroup / SyncGroup answers may be deferred: pass a callback; it is called exactly once,
    # either before the method returns or later, from inside another call (another member's
    # request, on_timer(now), ...). If the client disconnected, make the callback a no-op.
    # It gets None for a request Kafka never answers (superseded by the member's next one, or
    # the SyncGroup of a member that left): send nothing, keep the connection muted.
    coord.join_group(JoinGroupRequestData(...), now, respond=send_join_response)
    coord.sync_group(SyncGroupRequestData(...), now, respond=send_sync_response)

    # The others answer at once.
    coord.heartbeat(HeartbeatRequestData(...), now) -> HeartbeatResponseData
    coord.leave_group(LeaveGroupRequestData(...), now) -> LeaveGroupResponseData
    coord.commit_offsets(OffsetCommitRequestData(...), now) -> OffsetCommitResponseData
    coord.fetch_offsets(OffsetFetchRequestData(...)) -> OffsetFetchResponseData
    coord.describe_groups([group_id, ...]) -> list[DescribedGroup]
    coord.list_groups(states_filter=None) -> list[ListedGroup]
    coord.delete_groups([group_id, ...]) -> list[tuple[group_id, error_code]]
    coord.delete_partitions([(topic, partition), ...], now)  # a topic was deleted

    # Timers: after every call, (re)arm one timer at coord.next_deadline() (None: nothing
    # pending); when it fires call coord.on_timer(now). Calling on_timer early is harmless.

    # Broker "restart" / coordinator failover (fault injection): coord.failover(now).
    # What Kafka does when a coordinator moves: parked JoinGroup/SyncGroup requests are answered
    # NOT_COORDINATOR (the old one unloads), then the new one reloads each group from the
    # __consumer_offsets log, i.e. as of its last stored GroupMetadata record (written when a
    # rebalance completes, a static member is replaced, or the group empties): Stable with its
    # members, generation and assignments (they keep heartbeating, no rebalance), or Empty; a
    # rebalance in progress is lost; every committed offset survives; sessions restart at ``now``.

    # Inspection for tests and the fault API:
    coord.group_state(group_id) -> GroupView | None

Version-dependent behaviour is driven by ``api_version`` in the request dataclasses (the wire
version the client used): MEMBER_ID_REQUIRED only for JoinGroup v4+ (KIP-394), SkipAssignment for
v9+ (KIP-814), protocol type/name checks only when a v5 SyncGroup sends them (KIP-559).

Error codes are plain ints (see :class:`ErrorCode`); the coordinator never raises for a bad
request, it answers with the error code Kafka would. The only exceptions: a ``respond`` callback
that raised (re-raised as :class:`CoordinatorCallbackError` once every other answer went out and
the state is consistent), and :class:`LocalProtocolError` for a coordinator bug (an illegal
state transition). ``now`` should not go backwards; if it does, nothing expires early.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence

from aiogroup.testing.embedded.consumer_admin import ConsumerGroupAdmin
from aiogroup.testing.embedded.group import ClassicGroup, State
from aiogroup.testing.embedded.member_requests import MemberRequests
from aiogroup.testing.embedded.messages import (
    NO_MEMBER_ID,
    DescribedGroup,
    DescribedMember,
    ErrorCode,
    GroupView,
    HeartbeatRequestData,
    HeartbeatResponseData,
    JoinCallback,
    JoinGroupMember,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMemberResponse,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    ListedGroup,
    MemberIdentity,
    MemberView,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetFetchPartition,
    OffsetFetchRequestData,
    OffsetFetchResponseData,
    SyncCallback,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.rebalance import CommittedOffset, CoordinatorCallbackError
from aiogroup.testing.embedded.rules import FLAVOURS, RULES, CoordinatorConfig, Flavour, Rule

# The messages, the rules and CoordinatorConfig are defined beside this module
# (messages.py, rules.py) and re-exported here, where they have always been importable.

__all__ = [
    "FLAVOURS",
    "RULES",
    "CoordinatorCallbackError",
    "CoordinatorConfig",
    "DescribedGroup",
    "DescribedMember",
    "ErrorCode",
    "Flavour",
    "GroupCoordinator",
    "GroupState",
    "GroupView",
    "HeartbeatRequestData",
    "HeartbeatResponseData",
    "JoinGroupMember",
    "JoinGroupRequestData",
    "JoinGroupResponseData",
    "LeaveGroupMemberResponse",
    "LeaveGroupRequestData",
    "LeaveGroupResponseData",
    "ListedGroup",
    "MemberIdentity",
    "MemberView",
    "OffsetCommitPartition",
    "OffsetCommitRequestData",
    "OffsetCommitResponseData",
    "OffsetFetchPartition",
    "OffsetFetchRequestData",
    "OffsetFetchResponseData",
    "Rule",
    "SyncGroupRequestData",
    "SyncGroupResponseData",
]


GroupState = State
"""The classic group states (``Empty``, ``PreparingRebalance``, ...) as Kafka spells them."""


class GroupCoordinator(ConsumerGroupAdmin, MemberRequests):
    """Kafka's classic group coordinator, sans-I/O. See the module docstring for the wiring.

    ``id_factory(prefix)`` makes member ids (default ``f"{prefix}-{uuid4()}"``, the prefix being
    the client_id, or the group_instance_id for static members, as Kafka does; the ``kafka2``
    flavour builds static ids from the group's state timestamp, as Kafka 2.3 did, unless an
    ``id_factory`` is given).

    ``rule_hits`` maps each group id to the :data:`RULES` that decided something for it which
    another flavour would have decided differently (the conformance suite explains differences
    between flavours with it).

    Every public call first runs the timers that are due at ``now`` (so a late ``on_timer`` never
    lets an expired member act), then handles the request, then runs what became due at once
    (e.g. a zero initial rebalance delay). Parked answers are delivered after the coordinator's
    state is consistent, so a ``respond`` callback may safely call the coordinator again.
    """

    def __init__(
        self,
        config: CoordinatorConfig | None = None,
        *,
        id_factory: Callable[[str], str] | None = None,
    ) -> None:
        self.config = config if config is not None else CoordinatorConfig()
        self._custom_ids = id_factory is not None
        self._id_factory = id_factory if id_factory is not None else _uuid_member_id
        self.rule_hits = {}
        self._groups = {}
        self._offsets = {}
        self._outbox = []
        self._timers = []
        self._seq = 0
        self._flushing = False
        self._init_consumer_groups()  # KIP-848 groups (consumer_requests.py)

    # ================================================================ a member's requests

    def join_group(self, request: JoinGroupRequestData, now: float, respond: JoinCallback) -> None:
        """Handle a JoinGroup; ``respond`` is called once, now or later (``handleJoinGroup``)."""
        self._run_timers(now)
        if not self._consumer_join(request, now, respond):  # a consumer group's id?
            self._join(request, now, respond)
        self._run_timers(now)
        self._flush()

    def sync_group(self, request: SyncGroupRequestData, now: float, respond: SyncCallback) -> None:
        """Handle a SyncGroup; ``respond`` is called once, now or when the leader's assignment
        arrives (``handleSyncGroup``)."""
        self._run_timers(now)
        if not self._consumer_sync(request, now, respond):  # a consumer group's member?
            self._sync(request, now, respond)
        self._run_timers(now)
        self._flush()

    def heartbeat(self, request: HeartbeatRequestData, now: float) -> HeartbeatResponseData:
        """``handleHeartbeat``: refreshes the session of a valid member."""
        self._run_timers(now)
        code = self._consumer_classic_heartbeat(request, now)  # a consumer group's member?
        if code is None:
            code = self._heartbeat(request, now)
        self._run_timers(now)
        self._flush()
        return HeartbeatResponseData(error_code=code)

    def leave_group(self, request: LeaveGroupRequestData, now: float) -> LeaveGroupResponseData:
        """``handleLeaveGroup``: per-member results (v3+ batch; KIP-345 leave by instance id)."""
        self._run_timers(now)
        response = self._consumer_classic_leave(request, now) or self._leave(request, now)
        self._run_timers(now)
        self._flush()
        return response

    # ================================================================ offsets

    def commit_offsets(
        self, request: OffsetCommitRequestData, now: float
    ) -> OffsetCommitResponseData:
        """``handleCommitOffsets``. Unknown topics are the server's business (it knows the log):
        filter them out and answer UNKNOWN_TOPIC_OR_PARTITION for them yourself."""
        self._run_timers(now)
        response = self._commit(request, now)
        self._run_timers(now)
        self._flush()
        return response

    def _commit(self, req: OffsetCommitRequestData, now: float) -> OffsetCommitResponseData:
        def all_fail(code: ErrorCode) -> OffsetCommitResponseData:
            return OffsetCommitResponseData(
                tuple((p.topic, p.partition, int(code)) for p in req.partitions)
            )

        consumer = self._consumer_commit(req)  # a consumer group's, or v9's missing group
        if consumer is not None:
            return consumer
        group = self._groups.get(req.group_id)
        if group is None:
            if req.generation_id >= 0:
                # Not a simple-consumer commit, and no such group: a commit from an older life.
                return all_fail(ErrorCode.ILLEGAL_GENERATION)
            group = self._new_group(req.group_id, now)
        error = self._validate_offset_commit(group, req)
        if error is not None:
            return all_fail(error)
        if group.is_in(State.STABLE, State.PREPARING_REBALANCE):
            # Commits are accepted while PreparingRebalance: the member learns of the rebalance
            # from its heartbeat, and KIP-429 members keep committing what they still own.
            self._schedule_heartbeat(group, group.members[req.member_id], now)
        store = self._offsets.setdefault(req.group_id, {})
        out: list[tuple[str, int, int]] = []
        for p in req.partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            # Kafka checks String.length(): UTF-16 code units, not bytes.
            if len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > (
                self.config.offset_metadata_max_bytes
            ):
                out.append((p.topic, p.partition, int(ErrorCode.OFFSET_METADATA_TOO_LARGE)))
                continue
            store[(p.topic, p.partition)] = CommittedOffset(
                p.committed_offset, p.committed_leader_epoch, metadata
            )
            out.append((p.topic, p.partition, int(ErrorCode.NONE)))
        return OffsetCommitResponseData(tuple(out))

    def _validate_offset_commit(
        self, group: ClassicGroup, req: OffsetCommitRequestData
    ) -> ErrorCode | None:
        """``validateOffsetCommit``: generation -1 commits only into an Empty group (admin /
        manual assignment); anything naming a member must be that member at this generation;
        nothing is committed while CompletingRebalance (the member has its JoinGroup answer but
        not its assignment yet)."""
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if req.generation_id < 0 and group.is_in(State.EMPTY):
            return None
        if group.is_in(State.COMPLETING_REBALANCE):
            newer = self._validate_member_commit(group, req) or ErrorCode.REBALANCE_IN_PROGRESS
            if newer != ErrorCode.REBALANCE_IN_PROGRESS:
                self._hit(group, "commit-completing")
            if self.flavour.commit_checks_members_first:
                return newer
            # Kafka 2.3: only a fenced instance is told so before REBALANCE_IN_PROGRESS.
            fenced = self._validate_current_member(group, req.member_id, req.group_instance_id)
            if fenced == ErrorCode.FENCED_INSTANCE_ID:
                return fenced
            return ErrorCode.REBALANCE_IN_PROGRESS
        return self._validate_member_commit(group, req)

    def _validate_member_commit(
        self, group: ClassicGroup, req: OffsetCommitRequestData
    ) -> ErrorCode | None:
        if (
            req.generation_id >= 0
            or req.member_id != NO_MEMBER_ID
            or req.group_instance_id is not None
        ):
            error = self._validate_current_member(group, req.member_id, req.group_instance_id)
            if error is not None:
                return error
            if req.generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_in(State.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None  # pragma: no cover - the Empty case returned above

    def fetch_offsets(self, request: OffsetFetchRequestData) -> OffsetFetchResponseData:
        """``handleFetchOffsets``: committed offsets whatever the group's state; -1 (with empty
        metadata) for partitions without one; ``partitions`` None returns all of them. v9
        naming a consumer group's member is refused unless it is one, at its epoch."""
        error = self._consumer_fetch_error(request)
        if error is not None:
            return OffsetFetchResponseData(error_code=error)
        store = self._offsets.get(request.group_id, {})
        if request.partitions is None:
            keys = sorted(store)
        else:
            keys = [(t, p) for t, p in request.partitions]
        out: list[OffsetFetchPartition] = []
        for topic, partition in keys:
            off = store.get((topic, partition))
            if off is None:
                out.append(OffsetFetchPartition(topic, partition))
            else:
                out.append(
                    OffsetFetchPartition(
                        topic,
                        partition,
                        off.committed_offset,
                        off.committed_leader_epoch,
                        off.metadata,
                    )
                )
        return OffsetFetchResponseData(error_code=ErrorCode.NONE, partitions=tuple(out))

    # ================================================================ admin

    def describe_groups(
        self,
        group_ids: Sequence[str],
        api_version: int = 5,
        include_authorized_operations: bool = False,
    ) -> list[DescribedGroup]:
        """``handleDescribeGroup``. Member metadata, assignments and the protocol name are shown
        only for a Stable group (``GroupMetadata.summary``); a missing group is Dead (v0-5) or
        GROUP_ID_NOT_FOUND with a message (v6+, KIP-1043). v3+ carries the authorized operations
        when asked for (with no authorizer, every operation of a group in that flavour);
        otherwise the flavour's default."""
        flavour = self.flavour
        operations = flavour.authorized_operations_default
        if include_authorized_operations:
            operations = flavour.group_operations
        if api_version >= 3:
            rule = "group-operations" if include_authorized_operations else "authorized-operations"
            for gid in group_ids:
                self._hit(gid, rule)
        out: list[DescribedGroup] = []
        for gid in group_ids:
            group = self._groups.get(gid)
            if group is None or group.is_in(State.DEAD):
                if api_version >= 6:
                    code, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found."
                else:
                    code, message = ErrorCode.NONE, None
                out.append(
                    DescribedGroup(
                        code, gid, State.DEAD.value, "", "", (), operations, error_message=message
                    )
                )
                continue
            stable = group.is_in(State.STABLE) and group.protocol_name is not None
            protocol = group.protocol_name if stable and group.protocol_name else ""
            if stable:
                self._hit(group, "describe-metadata")
                if len(group.members) > 1:
                    self._hit(group, "member-order")
            members = tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    # Kafka 2.3 filled the metadata with the assignment (KAFKA-9150).
                    member_metadata=(
                        b""
                        if not stable
                        else m.assignment
                        if flavour.describe_metadata_is_assignment
                        else m.metadata(protocol)
                    ),
                    member_assignment=m.assignment if stable else b"",
                )
                for m in group.members.values()
            )
            out.append(
                DescribedGroup(
                    ErrorCode.NONE,
                    gid,
                    group.state.value,
                    group.protocol_type or "",
                    protocol,
                    members,
                    operations,
                )
            )
        return out

    def list_groups(self, states_filter: Sequence[str] | None = None) -> list[ListedGroup]:
        """``handleListGroups``; the states filter (KIP-518) is case-insensitive."""
        wanted = {s.lower() for s in states_filter} if states_filter else None
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_in(State.DEAD) and (wanted is None or g.state.value.lower() in wanted)
        ] + self._consumer_listed(wanted)

    def delete_groups(self, group_ids: Sequence[str], now: float) -> list[tuple[str, int]]:
        """``handleDeleteGroups``: only Empty groups go (Dead, with their offsets)."""
        self._run_timers(now)
        out: list[tuple[str, int]] = []
        for gid in group_ids:
            group = self._groups.get(gid)
            consumer = self._consumer_delete(gid)
            if consumer is not None:
                out.append((gid, int(consumer)))
            elif group is None or group.is_in(State.DEAD):
                out.append((gid, int(ErrorCode.GROUP_ID_NOT_FOUND)))
            elif group.is_in(State.EMPTY):
                group.transition_to(State.DEAD, now)
                del self._groups[gid]
                self._offsets.pop(gid, None)
                out.append((gid, int(ErrorCode.NONE)))
            else:
                out.append((gid, int(ErrorCode.NON_EMPTY_GROUP)))
        self._flush()
        return out

    def delete_partitions(self, partitions: Sequence[tuple[str, int]], now: float) -> int:
        """``handleDeletedPartitions`` (a topic was deleted): every group forgets its offsets
        for ``partitions``; then, up to Kafka 3.x, as ``cleanupGroupMetadata`` does for *every*
        group it scans, an Empty group left without offsets is Dead and gone. Kafka 4.x only
        deletes the offsets (``onPartitionsDeleted``): such a group waits for the periodic
        cleanup, which the embedded broker does not run (rule ``deleted-topic-group``). Returns
        how many offsets were removed."""
        self._run_timers(now)
        gone = set(partitions)
        removed = 0
        for store in self._offsets.values():
            for key in [k for k in store if k in gone]:
                del store[key]
                removed += 1
        for gid, group in list(self._groups.items()):
            if group.is_in(State.EMPTY) and not self._offsets.get(gid):
                self._hit(group, "deleted-topic-group")
                if not self.flavour.deletion_drops_emptied_groups:
                    continue
                group.transition_to(State.DEAD, now)
                del self._groups[gid]
                self._offsets.pop(gid, None)
        self._consumer_cleanup()
        self._flush()
        return removed

    # ================================================================ failover

    def failover(self, now: float) -> None:
        """Simulate a coordinator move or broker restart, as Kafka's does it.

        The old coordinator unloads every group: parked JoinGroup/SyncGroup requests are
        answered NOT_COORDINATOR (``onGroupUnloaded``). The new one reloads each group from
        its last stored GroupMetadata record (written when a rebalance completed, when a
        static member was replaced, and when the group emptied): Stable with those members,
        generation, leader and assignments, or Empty; a rebalance in progress is lost. Members
        keep their ids and only the selected protocol's metadata; sessions restart at ``now``
        (``onGroupLoaded``). Groups with only committed offsets come back Empty. Committed
        offsets all survive.
        """
        for group in self._groups.values():
            for member in group.members.values():
                self._answer_parked(member, ErrorCode.NOT_COORDINATOR)
        old = self._groups
        self._groups = {}
        self._timers = []
        for gid in sorted((set(old) | set(self._offsets)) - set(self._consumer_groups)):
            stored = old[gid].stored if gid in old else None
            if stored is None and gid not in self._offsets:
                continue
            group = ClassicGroup.from_stored(gid, stored, self.config.flavour, now)
            for member in group.members.values():
                self._schedule_heartbeat(group, member, now)
            self._groups[gid] = group
            max_size = self.config.group_max_size
            if max_size is not None and len(group.members) > max_size:
                # Over capacity after a config change: rebalance so members can commit first.
                self._prepare_rebalance(group, now)
        self._consumer_failover(now)
        self._run_timers(now)
        self._flush()

    # ================================================================ inspection

    def group_state(self, group_id: str) -> GroupView | None:
        """A snapshot of one group (None if unknown)."""
        group = self._groups.get(group_id)
        if group is None:
            return None
        return GroupView(
            group_id=group.group_id,
            state=group.state.value,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id,
            members=tuple(
                MemberView(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    protocols=m.protocols,
                    assignment=m.assignment if group.is_in(State.STABLE) else None,
                    awaiting_join=m.is_awaiting_join,
                    awaiting_sync=m.is_awaiting_sync,
                )
                for m in group.members.values()
            ),
            pending_members=tuple(group.pending_members),
        )

    def group_ids(self) -> list[str]:
        return list(self._groups)


def _uuid_member_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4()}"
