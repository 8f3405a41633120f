"""KIP-848 consumer groups in the embedded coordinator, as the other APIs see them.

:class:`ConsumerGroupAdmin` puts the consumer groups of
:class:`~aiogroup.testing.embedded.consumer_requests.ConsumerGroupRequests` in the coordinator's
one namespace of groups: a JoinGroup naming a consumer group, OffsetCommit and OffsetFetch
checked against a member's epoch (``ConsumerGroup.validateOffsetCommit`` /
``validateOffsetFetch``), ConsumerGroupDescribe, ListGroups, DeleteGroups, the cleanup after a
topic deletion, a coordinator failover, and the snapshots for tests. A base class of
:class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`. Sans-I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiogroup.testing.embedded.consumer_classic import ClassicMembersInConsumerGroups
from aiogroup.testing.embedded.consumer_group import MemberState
from aiogroup.testing.embedded.consumer_messages import (
    ConsumerGroupDescribed,
    ConsumerGroupView,
    ConsumerMemberView,
    DescribedConsumerMember,
    DescribedTopicPartitions,
)
from aiogroup.testing.embedded.consumer_requests import Deadlines, Refused
from aiogroup.testing.embedded.group import State
from aiogroup.testing.embedded.messages import (
    NO_MEMBER_ID,
    ErrorCode,
    ListedGroup,
    OffsetCommitRequestData,
    OffsetCommitResponseData,
    OffsetFetchRequestData,
)
from aiogroup.testing.embedded.rebalance import CommittedOffset
from aiogroup.testing.embedded.server_assignors import Assignment

__all__ = ["ConsumerGroupAdmin"]


class ConsumerGroupAdmin(ClassicMembersInConsumerGroups):
    """Consumer groups among the coordinator's other APIs (a base class of
    :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`)."""

    # ================================================================ offsets

    def _consumer_commit(self, req: OffsetCommitRequestData) -> OffsetCommitResponseData | None:
        """OffsetCommit to a consumer group (``ConsumerGroup.validateOffsetCommit``), or from
        v9 to a group that does not exist (GROUP_ID_NOT_FOUND, where v8 and older get
        ILLEGAL_GENERATION); None: the classic coordinator's business."""
        group = self._consumer_groups.get(req.group_id)
        error: ErrorCode | None = None
        if group is None:
            classic = self._groups.get(req.group_id)
            missing = classic is None or classic.is_in(State.DEAD)
            if not (missing and req.generation_id >= 0 and req.api_version >= 9):
                return None
            error = ErrorCode.GROUP_ID_NOT_FOUND
        elif not (req.generation_id < 0 and group.is_empty):
            member = group.members.get(req.member_id)
            if member is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            elif not member.uses_classic_protocol and req.api_version < 9:
                error = ErrorCode.UNSUPPORTED_VERSION
            elif req.generation_id != member.member_epoch:
                error = (
                    ErrorCode.ILLEGAL_GENERATION
                    if member.uses_classic_protocol
                    else ErrorCode.STALE_MEMBER_EPOCH
                )
        if error is not None:
            return OffsetCommitResponseData(
                tuple((p.topic, p.partition, int(error)) for p in req.partitions)
            )
        store = self._offsets.setdefault(req.group_id, {})
        out: list[tuple[str, int, int]] = []
        limit = self.config.offset_metadata_max_bytes
        for p in req.partitions:
            metadata = p.committed_metadata if p.committed_metadata is not None else ""
            if len(metadata.encode("utf-16-le", "surrogatepass")) // 2 > limit:
                out.append((p.topic, p.partition, int(ErrorCode.OFFSET_METADATA_TOO_LARGE)))
                continue
            store[(p.topic, p.partition)] = CommittedOffset(
                p.committed_offset, p.committed_leader_epoch, metadata
            )
            out.append((p.topic, p.partition, int(ErrorCode.NONE)))
        return OffsetCommitResponseData(tuple(out))

    def _consumer_fetch_error(self, request: OffsetFetchRequestData) -> ErrorCode | None:
        """OffsetFetch v9 naming a member of a consumer group (``validateOffsetFetch``): it
        must be a member, at its epoch. A classic group ignores the member."""
        group = self._consumer_groups.get(request.group_id)
        if group is None or (request.member_id is None and request.member_epoch < 0):
            return None
        member = group.members.get(request.member_id or NO_MEMBER_ID)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if request.member_epoch != member.member_epoch:
            if member.uses_classic_protocol:
                return ErrorCode.ILLEGAL_GENERATION
            return ErrorCode.STALE_MEMBER_EPOCH
        return None

    # ================================================================ admin

    def consumer_group_describe(self, group_ids: Sequence[str]) -> list[ConsumerGroupDescribed]:
        """ConsumerGroupDescribe: GROUP_ID_NOT_FOUND for a group that is not a consumer group."""
        out: list[ConsumerGroupDescribed] = []
        default = self.consumer_settings.assignors[0]
        for group_id in group_ids:
            try:
                group = self._consumer_group(group_id)
            except Refused as refused:
                out.append(ConsumerGroupDescribed(int(refused.code), group_id, refused.message))
                continue
            out.append(
                ConsumerGroupDescribed(
                    error_code=ErrorCode.NONE,
                    group_id=group_id,
                    group_state=group.state.value,
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=group.preferred_assignor() or default,
                    members=tuple(
                        DescribedConsumerMember(
                            member_id=m.member_id,
                            instance_id=m.instance_id,
                            rack_id=m.rack_id,
                            member_epoch=m.member_epoch,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            subscribed_topic_names=tuple(sorted(m.subscribed_topic_names)),
                            subscribed_topic_regex=m.subscribed_topic_regex,
                            assignment=self._described(m.assigned),
                            target_assignment=self._described(group.target.get(m.member_id, {})),
                            member_type=0 if m.uses_classic_protocol else 1,
                        )
                        for m in group.members.values()
                    ),
                )
            )
        return out

    def _described(self, assignment: Assignment) -> tuple[DescribedTopicPartitions, ...]:
        return tuple(
            DescribedTopicPartitions(t, self._topics_by_id[t].name, tuple(sorted(ps)))
            for t, ps in assignment.items()
            if t in self._topics_by_id
        )

    def _consumer_listed(self, wanted: set[str] | None) -> list[ListedGroup]:
        return [
            ListedGroup(g.group_id, "consumer", g.state.value)
            for g in self._consumer_groups.values()
            if wanted is None or g.state.value.lower() in wanted
        ]

    def _consumer_delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a consumer group (None: not one): only an empty one goes."""
        group = self._consumer_groups.get(group_id)
        if group is None:
            return None
        if not group.is_empty:
            return ErrorCode.NON_EMPTY_GROUP
        self._forget_consumer_group(group_id)
        self._offsets.pop(group_id, None)
        return ErrorCode.NONE

    def _consumer_cleanup(self) -> None:
        """``cleanupGroupMetadata``: an empty consumer group left without offsets goes."""
        for group_id, group in list(self._consumer_groups.items()):
            if group.is_empty and not self._offsets.get(group_id):
                self._forget_consumer_group(group_id)

    def _consumer_failover(self, now: float) -> None:
        """A coordinator move: consumer groups are stored whole (members, epochs, targets,
        assignments) and come back as they were; sessions restart at ``now``, a member asked
        to revoke gets its rebalance timeout again; a regex resolution under way is lost."""
        self._consumer_timers = Deadlines()
        self._regex_pending.clear()
        for group in self._consumer_groups.values():
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id, now)
                if member.state is MemberState.UNREVOKED_PARTITIONS and member.classic is None:
                    self._consumer_timers.schedule(
                        ("rebalance", group.group_id, member.member_id),
                        now + member.rebalance_timeout_ms / 1000,
                        member.member_epoch,
                    )

    # ================================================================ inspection

    def consumer_group_state(self, group_id: str) -> ConsumerGroupView | None:
        """A snapshot of one consumer group (None if there is none)."""
        group = self._consumer_groups.get(group_id)
        if group is None:
            return None

        def names(assignment: Assignment) -> frozenset[tuple[str, int]]:
            return frozenset(
                (self._topics_by_id[t].name if t in self._topics_by_id else str(t), p)
                for t, ps in assignment.items()
                for p in ps
            )

        return ConsumerGroupView(
            group_id=group_id,
            state=group.state.value,
            group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch,
            assignor=group.preferred_assignor() or self.consumer_settings.assignors[0],
            members=tuple(
                ConsumerMemberView(
                    member_id=m.member_id,
                    instance_id=m.instance_id,
                    member_epoch=m.member_epoch,
                    previous_member_epoch=m.previous_member_epoch,
                    state=m.state.value,
                    subscribed_topic_names=m.subscribed_topic_names,
                    subscribed_topic_regex=m.subscribed_topic_regex,
                    assigned=names(m.assigned),
                    pending_revocation=names(m.pending_revocation),
                    target=names(group.target.get(m.member_id, {})),
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    client_id=m.client_id,
                    uses_classic_protocol=m.uses_classic_protocol,
                )
                for m in group.members.values()
            ),
        )

    def consumer_group_ids(self) -> list[str]:
        return list(self._consumer_groups)
