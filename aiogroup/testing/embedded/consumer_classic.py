"""Mixed groups: classic-protocol members in a KIP-848 consumer group, and the conversions
between the two kinds of group, as Kafka 4.1's ``GroupMetadataManager`` does them.

A member sending JoinGroup to a non-empty consumer group (``classicGroupJoinToConsumerGroup``)
becomes a member of it like any other: the broker's assignor decides its partitions, its
reconciliation follows the same rules, and its JoinGroup is answered at once (it is never the
leader, the member list is empty); SyncGroup hands it its current partitions, encoded in the
consumer protocol at its subscription's version; its Heartbeat says REBALANCE_IN_PROGRESS
whenever it must rejoin to move on (a new group epoch, something to revoke, something released
for it); LeaveGroup fences it. It keeps its classic session timeout, and must rejoin within its
rebalance timeout once told to, and sync within it once joined, or it is fenced.

The conversions (``group.consumer.migration.policy``: ``bidirectional``, ``upgrade``,
``downgrade``, ``disabled``; an empty group always converts):

* **upgrade**: the first ConsumerGroupHeartbeat joining a non-empty classic group whose
  protocol type is ``consumer`` turns it into a consumer group (``convertToConsumerGroup``):
  the group epoch and every member's epoch are the generation, each member keeps the
  partitions its assignment gave it. Pending JoinGroup and SyncGroup answers get
  REBALANCE_IN_PROGRESS. An assignment carrying user data (a custom assignor's) cannot be
  converted: GROUP_ID_NOT_FOUND.
* **downgrade**: when the last member using the consumer protocol leaves (or is fenced) and
  only classic members remain, the group becomes a classic group again
  (``convertToClassicGroup``), Stable at the group epoch with each member's target
  assignment, and rebalances at once; likewise when a static member rejoining with JoinGroup
  replaces the last one.

A base class of :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`. Sans-I/O.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from aiogroup.errors import CodecError
from aiogroup.protocol.consumer import (
    ASSIGNMENT_VERSION,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from aiogroup.protocol.types import Assignment as ConsumerAssignment
from aiogroup.protocol.types import Subscription
from aiogroup.testing.embedded.consumer_group import (
    ClassicMemberMetadata,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    reconcile,
)
from aiogroup.testing.embedded.consumer_requests import ConsumerGroupRequests, Refused, kafka_uuid
from aiogroup.testing.embedded.group import ClassicGroup, Member, State
from aiogroup.testing.embedded.messages import (
    NO_MEMBER_ID,
    ErrorCode,
    HeartbeatRequestData,
    JoinCallback,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMemberResponse,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    SyncCallback,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.server_assignors import Assignment

__all__ = ["ClassicMembersInConsumerGroups"]

CONSUMER_PROTOCOL = "consumer"


class ClassicMembersInConsumerGroups(ConsumerGroupRequests):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup of classic-protocol members in consumer
    groups, and the upgrade and downgrade of groups (a base class of
    :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`)."""

    # ================================================================ JoinGroup

    def _consumer_join(
        self, request: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> bool:
        """A JoinGroup naming a consumer group (False: the classic coordinator's business).
        An empty one becomes a classic group (``maybeDeleteEmptyConsumerGroup``: its offsets
        stay); a member joins a non-empty one as a classic-protocol member of it."""
        group = self._consumer_groups.get(request.group_id)
        if group is None:
            return False
        if group.is_empty:
            self._forget_consumer_group(request.group_id)
            return False
        try:
            self._classic_join(group, request, now, respond)
        except Refused as refused:
            self._send(
                respond,
                JoinGroupResponseData(error_code=refused.code, member_id=request.member_id),
            )
        return True

    def _classic_join(
        self, group: ConsumerGroup, r: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> None:
        """``classicGroupJoinToConsumerGroup``."""
        cfg = self.config
        if (
            not cfg.group_min_session_timeout_ms
            <= r.session_timeout_ms
            <= (cfg.group_max_session_timeout_ms)
        ):
            raise Refused(ErrorCode.INVALID_SESSION_TIMEOUT)
        unknown = r.member_id == NO_MEMBER_ID
        member_id = kafka_uuid() if unknown else r.member_id
        self._check_group_size(group, member_id)
        if not self._supports_classic_protocols(group, r.protocol_type, r.protocols):
            raise Refused(
                ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                f"Member {member_id}'s protocols are not supported.",
            )
        if unknown and r.group_instance_id is None and r.api_version >= 4:
            # KIP-394: a dynamic member is given its id first.
            self._send(
                respond,
                JoinGroupResponseData(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id),
            )
            return
        replaced: ConsumerGroupMember | None = None
        if r.group_instance_id is None:
            member = group.members.get(member_id) or ConsumerGroupMember(member_id)
        else:
            existing = group.static_member(r.group_instance_id)
            if unknown:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                else:
                    replaced = existing
                    member = replace(
                        existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
                    )
            else:
                if existing is None:
                    raise Refused(
                        ErrorCode.UNKNOWN_MEMBER_ID,
                        f"Instance id {r.group_instance_id} is unknown.",
                    )
                self._check_fenced_instance(existing, member_id, r.group_instance_id)
                member = existing
        downgrade = replaced is not None and self._may_downgrade(group, [replaced])
        subscription = _subscription(r.protocols)
        updated = replace(
            member,
            instance_id=r.group_instance_id or member.instance_id,
            rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                r.rebalance_timeout_ms
                if r.rebalance_timeout_ms not in (None, -1)
                else member.rebalance_timeout_ms
            ),
            subscribed_topic_names=frozenset(subscription.topics),
            client_id=r.client_id,
            client_host=r.client_host,
            classic=ClassicMemberMetadata(r.session_timeout_ms, tuple(r.protocols)),
        )
        owned = [
            (self._topics[topic].topic_id, list(partitions))
            for topic, partitions in subscription.owned_partitions.items()
            if topic in self._topics
        ]
        self._consumer_groups[group.group_id] = group
        if replaced is not None:
            self._replace_static_member(group, replaced, member)
        names_changed = updated.subscribed_topic_names != member.subscribed_topic_names
        self._apply_member_update(group, member, updated, now, False, None)
        updated = group.members[member_id]
        if downgrade:
            if not names_changed and not updated.is_reconciled_to(group.assignment_epoch):
                self._reconcile_member(group, updated, owned, now)
            answered = group.members[member_id]
            self._convert_to_classic(group, [], answered, names_changed, now)
        else:
            if group.group_epoch > group.assignment_epoch:
                self._compute_target(group)
            if not updated.is_reconciled_to(group.assignment_epoch):
                self._reconcile_member(group, updated, owned, now)
            answered = group.members[member_id]
            for kind in ("join",):
                self._consumer_timers.cancel((kind, group.group_id, member_id))
            self._schedule_session(group.group_id, member_id, now, r.session_timeout_ms)
            self._consumer_timers.schedule(
                ("sync", group.group_id, member_id), now + _rebalance_s(r)
            )
        self._send(
            respond,
            JoinGroupResponseData(
                error_code=ErrorCode.NONE,
                generation_id=answered.member_epoch,
                protocol_type=CONSUMER_PROTOCOL,
                protocol_name=r.protocols[0][0],
                member_id=member_id,
            ),
        )

    def _reconcile_member(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        owned: Sequence[tuple[uuid.UUID, Sequence[int]]],
        now: float,
    ) -> None:
        reconciled = reconcile(
            member,
            assignment_epoch=group.assignment_epoch,
            target=group.target_of(member.member_id, member.instance_id),
            partition_epoch=group.partition_epochs,
            owned=owned,
        )
        if reconciled != member:
            self._store_reconciled(group, reconciled, now)

    @staticmethod
    def _supports_classic_protocols(
        group: ConsumerGroup, protocol_type: str, protocols: Sequence[tuple[str, bytes]]
    ) -> bool:
        """``ConsumerGroup.supportsClassicProtocols``: the consumer protocol type, and a
        protocol every classic member of the group supports."""
        if protocol_type != CONSUMER_PROTOCOL:
            return False
        names = {name for name, _ in protocols}
        if group.is_empty:
            return bool(names)
        classic = [m.classic for m in group.members.values() if m.classic is not None]
        return any(all(name in {n for n, _ in c.protocols} for c in classic) for name in names)

    # ================================================================ SyncGroup, Heartbeat

    def _consumer_sync(self, r: SyncGroupRequestData, now: float, respond: SyncCallback) -> bool:
        """``classicGroupSyncToConsumerGroup``: the member's partitions (False: not a consumer
        group)."""
        group = self._consumer_groups.get(r.group_id)
        if group is None:
            return False
        try:
            member = self._classic_member(group, r.member_id, r.group_instance_id)
            self._check_generation(member, r.generation_id)
            protocol = member.classic.protocols[0][0] if member.classic else ""
            if (r.protocol_type is not None and r.protocol_type != CONSUMER_PROTOCOL) or (
                r.protocol_name is not None and r.protocol_name != protocol
            ):
                raise Refused(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
            if group.group_epoch > member.member_epoch and (
                member.state is not MemberState.UNREVOKED_PARTITIONS
            ):
                self._schedule_join_timeout(group, member, now)
                raise Refused(ErrorCode.REBALANCE_IN_PROGRESS)
        except Refused as refused:
            self._send(respond, SyncGroupResponseData(error_code=refused.code))
            return True
        self._consumer_timers.cancel(("sync", group.group_id, member.member_id))
        assert member.classic is not None
        self._schedule_session(
            group.group_id, member.member_id, now, member.classic.session_timeout_ms
        )
        self._send(
            respond,
            SyncGroupResponseData(
                error_code=ErrorCode.NONE,
                assignment=self._encoded_assignment(member.assigned, member.classic),
                protocol_type=r.protocol_type,
                protocol_name=r.protocol_name,
            ),
        )
        return True

    def _consumer_classic_heartbeat(self, r: HeartbeatRequestData, now: float) -> ErrorCode | None:
        """``classicGroupHeartbeatToConsumerGroup`` (None: not a consumer group): the session
        goes on; REBALANCE_IN_PROGRESS tells the member to rejoin to move on."""
        group = self._consumer_groups.get(r.group_id)
        if group is None:
            return None
        try:
            member = self._classic_member(group, r.member_id, r.group_instance_id)
            self._check_generation(member, r.generation_id)
        except Refused as refused:
            return refused.code
        assert member.classic is not None
        self._schedule_session(
            group.group_id, member.member_id, now, member.classic.session_timeout_ms
        )
        if (
            member.member_epoch < group.group_epoch
            or member.state is MemberState.UNREVOKED_PARTITIONS
            or (
                member.state is MemberState.UNRELEASED_PARTITIONS
                and not self._waiting_on_unreleased(group, member)
            )
        ):
            self._schedule_join_timeout(group, member, now)
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    @staticmethod
    def _waiting_on_unreleased(group: ConsumerGroup, member: ConsumerGroupMember) -> bool:
        """``waitingOnUnreleasedPartition``: a partition of its target still has an owner."""
        for topic_id, partitions in group.target.get(member.member_id, {}).items():
            mine = member.assigned.get(topic_id, frozenset())
            if any(p not in mine and (topic_id, p) in group.partition_epochs for p in partitions):
                return True
        return False

    def _classic_member(
        self, group: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerGroupMember:
        """``validateConsumerGroupMember`` + ``throwIfMemberDoesNotUseClassicProtocol``."""
        if instance_id is None:
            member = self._member(group, member_id)
        else:
            found = group.static_member(instance_id)
            if found is None:
                raise Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID,
                    f"Member with instance id {instance_id} is not a member of group "
                    f"{group.group_id}.",
                )
            self._check_fenced_instance(found, member_id, instance_id)
            member = found
        if member.classic is None:
            raise Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member.member_id} does not use the classic protocol.",
            )
        return member

    @staticmethod
    def _check_generation(member: ConsumerGroupMember, generation_id: int) -> None:
        if member.member_epoch != generation_id:
            raise Refused(
                ErrorCode.ILLEGAL_GENERATION,
                f"The request generation id {generation_id} is not equal to the member epoch "
                f"{member.member_epoch} of member {member.member_id}.",
            )

    def _schedule_join_timeout(
        self, group: ConsumerGroup, member: ConsumerGroupMember, now: float
    ) -> None:
        """``scheduleConsumerGroupJoinTimeoutIfAbsent``: told to rejoin, it has its rebalance
        timeout to do so."""
        key = ("join", group.group_id, member.member_id)
        if key not in self._consumer_timers.live:
            self._consumer_timers.schedule(key, now + member.rebalance_timeout_ms / 1000)

    def _encoded_assignment(self, assigned: Assignment, classic: ClassicMemberMetadata) -> bytes:
        """``prepareAssignment``: the partitions in the consumer protocol, at the version of
        the member's first protocol's subscription."""
        version = _subscription_version(classic.protocols[0][1])
        partitions = {
            self._topics_by_id[t].name: sorted(ps)
            for t, ps in assigned.items()
            if t in self._topics_by_id
        }
        return encode_assignment(
            ConsumerAssignment(partitions=partitions), min(version, ASSIGNMENT_VERSION)
        )

    # ================================================================ LeaveGroup

    def _consumer_classic_leave(
        self, r: LeaveGroupRequestData, now: float
    ) -> LeaveGroupResponseData | None:
        """``classicGroupLeaveToConsumerGroup`` (None: not a consumer group): the members named
        are fenced together, each answered on its own."""
        group = self._consumer_groups.get(r.group_id)
        if group is None:
            return None
        results: list[LeaveGroupMemberResponse] = []
        leaving: list[ConsumerGroupMember] = []
        for ident in r.members:
            try:
                if ident.group_instance_id is None:
                    member = self._member(group, ident.member_id)
                else:
                    found = group.static_member(ident.group_instance_id)
                    if found is None:
                        raise Refused(
                            ErrorCode.UNKNOWN_MEMBER_ID,
                            f"Instance id {ident.group_instance_id} is unknown.",
                        )
                    if ident.member_id != NO_MEMBER_ID:
                        self._check_fenced_instance(found, ident.member_id, ident.group_instance_id)
                    member = found
            except Refused as refused:
                results.append(
                    LeaveGroupMemberResponse(ident.member_id, ident.group_instance_id, refused.code)
                )
                continue
            results.append(
                LeaveGroupMemberResponse(ident.member_id, ident.group_instance_id, ErrorCode.NONE)
            )
            if member not in leaving:
                leaving.append(member)
        self._fence(group, leaving, now)
        return LeaveGroupResponseData(error_code=ErrorCode.NONE, members=tuple(results))

    # ================================================================ conversions

    def _may_downgrade(
        self, group: ConsumerGroup, leaving: Sequence[ConsumerGroupMember], *, fencing: bool = False
    ) -> bool:
        """``validateOnlineDowngradeWith{FencedMembers,ReplacedMember}``: every member left
        uses the classic protocol, the policy allows it, and a classic group may be that
        large (and, when members leave, someone stays)."""
        gone = {m.member_id for m in leaving}
        staying = [m for m in group.members.values() if m.member_id not in gone]
        if any(m.classic is None for m in staying):
            return False
        if fencing and not staying:
            return False
        if not self.consumer_settings.downgrade_enabled:
            return False
        count = len(staying) if fencing else len(group.members)
        max_size = self.config.group_max_size
        return max_size is None or count <= max_size

    def _convert_to_classic(
        self,
        group: ConsumerGroup,
        leaving: Sequence[ConsumerGroupMember],
        joining: ConsumerGroupMember | None,
        subscription_changed: bool,
        now: float,
    ) -> None:
        """``convertToClassicGroup`` (``ClassicGroup.fromConsumerGroup``): Stable at the group
        epoch, every member with its target assignment (a static member that joined takes the
        one it replaced), then a rebalance when members left or a joining member's
        subscription changed."""
        gone = {m.member_id for m in leaving}
        classic = ClassicGroup(group.group_id, self.config.flavour, state_since=now)
        classic.generation_id = group.group_epoch
        classic.protocol_type = CONSUMER_PROTOCOL
        for member in group.members.values():
            if member.member_id in gone or member.classic is None:
                continue
            classic.add(
                Member(
                    member_id=member.member_id,
                    group_instance_id=member.instance_id,
                    client_id=member.client_id,
                    client_host=member.client_host,
                    rebalance_timeout_ms=member.rebalance_timeout_ms,
                    session_timeout_ms=member.classic.session_timeout_ms,
                    protocol_type=CONSUMER_PROTOCOL,
                    protocols=member.classic.protocols,
                ),
                None,
            )
        classic.protocol_name = classic.select_protocol()
        for m in classic.members.values():
            target = group.target.get(m.member_id, {})
            version = _subscription_version(m.metadata(classic.protocol_name))
            partitions = {
                self._topics_by_id[t].name: sorted(ps)
                for t, ps in target.items()
                if t in self._topics_by_id
            }
            m.assignment = encode_assignment(
                ConsumerAssignment(partitions=partitions), min(version, ASSIGNMENT_VERSION)
            )
        classic.state = State.STABLE
        classic.stored = classic.to_stored()
        self._forget_consumer_group(group.group_id)
        self._groups[group.group_id] = classic
        for m in classic.members.values():
            self._schedule_heartbeat(classic, m, now)
        if joining is None or subscription_changed:
            self._prepare_rebalance(classic, now)

    def _consumer_fence_hook(
        self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember], now: float
    ) -> bool:
        """Fencing the last consumer-protocol members of a group of classic ones downgrades
        it instead (True: done)."""
        if not self._may_downgrade(group, members, fencing=True):
            return False
        self._convert_to_classic(group, members, None, False, now)
        return True

    def _upgraded(self, group_id: str) -> ConsumerGroup:
        """``validateOnlineUpgrade`` + ``ConsumerGroup.fromClassicGroup``: a consumer-protocol
        member joins a non-empty classic group. Nothing changes yet: the caller applies the
        conversion (:meth:`_finish_upgrade`) once the rest of its heartbeat is valid."""
        classic = self._groups[group_id]
        if not self.consumer_settings.upgrade_enabled:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because online "
                "upgrade is disabled.",
            )
        if classic.protocol_type != CONSUMER_PROTOCOL:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because the group "
                "does not use the consumer embedded protocol.",
            )
        max_size = self.consumer_settings.max_size
        if max_size is not None and len(classic.members) > max_size:
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND,
                f"Cannot upgrade classic group {group_id} to consumer group because the group "
                "size exceeds the consumer group maximum size.",
            )
        group = ConsumerGroup(group_id)
        group.group_epoch = group.assignment_epoch = classic.generation_id
        for m in classic.members.values():
            try:
                assigned = self._decoded_assignment(m.assignment)
                subscription = decode_subscription(m.metadata(classic.protocol_name or ""))
            except (CodecError, Refused) as exc:
                reason = (
                    "an unsupported custom assignor is in use. Please refer to the "
                    "documentation or switch to a default assignor before re-attempting the "
                    "upgrade."
                    if isinstance(exc, Refused)
                    else "the embedded consumer protocol is malformed."
                )
                raise Refused(
                    ErrorCode.GROUP_ID_NOT_FOUND,
                    f"Cannot upgrade classic group {group_id} to consumer group because {reason}",
                ) from exc
            member = ConsumerGroupMember(
                member_id=m.member_id,
                member_epoch=classic.generation_id,
                previous_member_epoch=classic.generation_id,
                state=MemberState.STABLE,
                instance_id=m.group_instance_id,
                rack_id=subscription.rack_id,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=frozenset(subscription.topics),
                assigned=assigned,
                classic=ClassicMemberMetadata(m.session_timeout_ms, m.protocols),
            )
            group.set_target(member.member_id, assigned)
            group.update_member(member)
        group.metadata_hash = self._fingerprint(group.subscribed_topics())
        return group

    def _finish_upgrade(self, group: ConsumerGroup, now: float) -> None:
        """``convertToConsumerGroup``: the classic group goes (its parked JoinGroup and
        SyncGroup answers are told to rejoin) and its members keep their sessions."""
        classic = self._groups.pop(group.group_id)
        for m in classic.members.values():
            self._answer_parked(m, ErrorCode.REBALANCE_IN_PROGRESS)
            m.heartbeat_deadline = None
        classic.transition_to(State.DEAD, now)
        for member in group.members.values():
            assert member.classic is not None
            self._schedule_session(
                group.group_id, member.member_id, now, member.classic.session_timeout_ms
            )

    def _decoded_assignment(self, data: bytes) -> Assignment:
        if not data:
            return {}  # a member that never synced
        decoded = decode_assignment(data)
        if decoded.user_data:
            raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, "userData from a custom assignor")
        return {
            self._topics[t].topic_id: frozenset(ps)
            for t, ps in decoded.partitions.items()
            if t in self._topics and ps
        }


def _subscription(protocols: Sequence[tuple[str, bytes]]) -> Subscription:
    """``deserializeSubscription``: malformed metadata is Kafka's IllegalStateException,
    answered UNKNOWN_SERVER_ERROR."""
    try:
        return decode_subscription(protocols[0][1]) if protocols else Subscription(topics=())
    except CodecError as exc:
        raise Refused(ErrorCode.UNKNOWN_SERVER_ERROR) from exc


def _subscription_version(metadata: bytes) -> int:
    """``ConsumerProtocol.deserializeVersion``: a subscription's first two bytes."""
    return int.from_bytes(metadata[:2], "big", signed=True) if len(metadata) >= 2 else 0


def _rebalance_s(r: JoinGroupRequestData) -> float:
    timeout = r.rebalance_timeout_ms if r.rebalance_timeout_ms is not None else r.session_timeout_ms
    return max(timeout, 0) / 1000
