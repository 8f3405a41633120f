"""KIP-848 consumer groups in the embedded coordinator: ConsumerGroupHeartbeat and
ConsumerGroupDescribe, rule by rule from Kafka 4.1's ``GroupMetadataManager``.

:class:`ConsumerGroupRequests` is a base class of
:class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`, beside the classic
:class:`~aiogroup.testing.embedded.member_requests.MemberRequests`: one coordinator, one
namespace of groups (a group id is a classic group or a consumer group), one store of
committed offsets, one clock (``now``, seconds) and one ``next_deadline()``. Sans-I/O.

A heartbeat (``consumerGroupHeartbeat``) does three things, as Kafka's does:

1. creates or updates the member (a new member joins with epoch 0; a changed subscription, a
   new group or a changed subscribed topic bumps the **group epoch**);
2. recomputes the **target assignment** with the group's server assignor
   (:mod:`~aiogroup.testing.embedded.server_assignors`) when the group epoch is past the
   **assignment epoch**;
3. reconciles this member towards its target
   (:func:`~aiogroup.testing.embedded.consumer_group.reconcile`): revocations first, at its
   current **member epoch**; a partition goes to its new owner only once the old owner's
   heartbeat no longer reports it.

Timers (:meth:`ConsumerGroupRequests.next_deadline`): a member's session
(``group.consumer.session.timeout.ms``, or the group's ``consumer.session.timeout.ms``)
restarts with each heartbeat and fences it when it lapses; a member asked to revoke has its
rebalance timeout to do so, or is fenced; regular expressions are resolved against the topics
"asynchronously", right after the heartbeat that needed it (so that heartbeat's answer does
not have them yet, as with Kafka's executor).

The coordinator learns the broker's topics from :meth:`ConsumerGroupRequests.update_topics`
(Kafka's metadata image); groups subscribed to a topic that changed recompute their assignment
at their next heartbeat.
"""

from __future__ import annotations

import base64
import heapq
import uuid
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupMember,
    InvalidRegexError,
    MemberState,
    ResolvedRegex,
    compile_topic_regex,
    owned_is_subset,
    reconcile,
)
from aiogroup.testing.embedded.consumer_messages import (
    ConsumerGroupHeartbeatRequestData,
    ConsumerGroupHeartbeatResponseData,
    ConsumerGroupSettings,
    TopicMetadata,
)
from aiogroup.testing.embedded.group import State
from aiogroup.testing.embedded.hashorder import JavaMap
from aiogroup.testing.embedded.messages import (
    ErrorCode,
)
from aiogroup.testing.embedded.rebalance import RebalanceCore
from aiogroup.testing.embedded.server_assignors import (
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSpec,
    stored_order,
)

__all__ = ["ConsumerGroupRequests", "Deadlines", "Refused", "kafka_uuid"]

#: ``REGEX_BATCH_REFRESH_MIN_INTERVAL_MS``: regular expressions are resolved again at most
#: this often (seconds), whatever asks for it.
REGEX_MIN_REFRESH_S = 10.0


class Refused(Exception):
    """A request answered with an error (Kafka throws an ``ApiException``): nothing changed."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


_Key = tuple[str, str, str]  # (kind, group id, member id)


class Deadlines:
    """Kafka's keyed coordinator timer: scheduling a key again replaces its deadline."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Key]] = []
        self.live: dict[_Key, tuple[float, int]] = {}
        self._seq = 0

    def schedule(self, key: _Key, deadline: float, payload: int = 0) -> None:
        self._seq += 1
        self.live[key] = (deadline, payload)
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def cancel(self, key: _Key) -> None:
        self.live.pop(key, None)

    def next(self) -> float | None:
        while self._heap:
            deadline, _, key = self._heap[0]
            if self.live.get(key, (None,))[0] == deadline:
                return deadline
            heapq.heappop(self._heap)
        return None

    def pop_due(self, now: float) -> tuple[_Key, int] | None:
        deadline = self.next()
        if deadline is None or deadline > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        return key, self.live.pop(key)[1]


@dataclass(slots=True)
class _GroupConfig:
    """A group's own ``consumer.session.timeout.ms`` / ``consumer.heartbeat.interval.ms``."""

    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None


class ConsumerGroupRequests(RebalanceCore):
    """The consumer-group half of
    :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator` (its base class, beside
    the classic requests)."""

    _consumer_groups: dict[str, ConsumerGroup]
    _consumer_timers: Deadlines
    _topics: dict[str, TopicMetadata]
    _topics_by_id: dict[uuid.UUID, TopicMetadata]
    _metadata_version: int
    _new_topics_version: int
    _group_configs: dict[str, _GroupConfig]
    _regex_pending: set[str]

    def _init_consumer_groups(self) -> None:
        self._consumer_groups = {}
        self._consumer_timers = Deadlines()
        self._topics = {}
        self._topics_by_id = {}
        self._metadata_version = 0
        self._new_topics_version = 0
        self._group_configs = {}
        self._regex_pending = set()

    # ================================================================ settings

    @property
    def consumer_settings(self) -> ConsumerGroupSettings:
        """The broker's ``group.consumer.*`` settings."""
        return self.config.consumer_group

    @property
    def serves_consumer_protocol(self) -> bool:
        """Whether ConsumerGroupHeartbeat is served (``group.coordinator.rebalance.protocols``
        includes ``consumer``): by default on ``kafka4`` only."""
        return self.config.serves_consumer_protocol

    def set_group_config(
        self,
        group_id: str,
        *,
        session_timeout_ms: int | None = None,
        heartbeat_interval_ms: int | None = None,
    ) -> None:
        """A group's ``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms``
        (Kafka's group configs, ``kafka-configs --entity-type groups``), within the broker's
        ``group.consumer.min/max.*`` bounds; None leaves one as it is."""
        s = self.consumer_settings
        if session_timeout_ms is not None and not (
            s.min_session_timeout_ms <= session_timeout_ms <= s.max_session_timeout_ms
        ):
            raise ConfigurationError(
                f"consumer.session.timeout.ms must be within [{s.min_session_timeout_ms}, "
                f"{s.max_session_timeout_ms}], not {session_timeout_ms}"
            )
        if heartbeat_interval_ms is not None and not (
            s.min_heartbeat_interval_ms <= heartbeat_interval_ms <= s.max_heartbeat_interval_ms
        ):
            raise ConfigurationError(
                f"consumer.heartbeat.interval.ms must be within [{s.min_heartbeat_interval_ms}, "
                f"{s.max_heartbeat_interval_ms}], not {heartbeat_interval_ms}"
            )
        config = self._group_configs.setdefault(group_id, _GroupConfig())
        if session_timeout_ms is not None:
            config.session_timeout_ms = session_timeout_ms
        if heartbeat_interval_ms is not None:
            config.heartbeat_interval_ms = heartbeat_interval_ms

    def _session_ms(self, group_id: str) -> int:
        config = self._group_configs.get(group_id)
        if config is not None and config.session_timeout_ms is not None:
            return config.session_timeout_ms
        return self.consumer_settings.session_timeout_ms

    def _interval_ms(self, group_id: str) -> int:
        config = self._group_configs.get(group_id)
        if config is not None and config.heartbeat_interval_ms is not None:
            return config.heartbeat_interval_ms
        return self.consumer_settings.heartbeat_interval_ms

    # ================================================================ the topics

    def update_topics(self, topics: Iterable[TopicMetadata], now: float) -> None:
        """The broker's topics changed (Kafka's ``onNewMetadataImage``): groups subscribed to a
        created, changed or deleted topic recompute their target at their next heartbeat, and
        a created topic makes regular expressions due for a new resolution."""
        self._run_timers(now)
        new = {t.name: t for t in topics}
        changed = {n for n in set(new) | set(self._topics) if new.get(n) != self._topics.get(n)}
        if changed:
            self._metadata_version += 1
            if any(n not in self._topics for n in new):
                self._new_topics_version = self._metadata_version
        self._topics = new
        self._topics_by_id = {t.topic_id: t for t in new.values()}
        for group in self._consumer_groups.values():
            if changed & group.subscribed_topics():
                group.metadata_refresh = True
        self._flush()

    def _topic_ids(self, names: Iterable[str]) -> frozenset[uuid.UUID]:
        return frozenset(self._topics[n].topic_id for n in names if n in self._topics)

    def _fingerprint(self, names: Iterable[str]) -> frozenset[TopicMetadata]:
        """What Kafka's metadata hash covers: each subscribed topic's name, id and size."""
        return frozenset(self._topics[n] for n in names if n in self._topics)

    # ================================================================ ConsumerGroupHeartbeat

    def consumer_group_heartbeat(
        self, request: ConsumerGroupHeartbeatRequestData, now: float
    ) -> ConsumerGroupHeartbeatResponseData:
        """Handle a ConsumerGroupHeartbeat (join, heartbeat, acknowledge, leave)."""
        self._run_timers(now)
        try:
            self._check_heartbeat(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                response = self._consumer_leave(request, now)
            else:
                response = self._consumer_heartbeat(request, now)
        except Refused as refused:
            response = ConsumerGroupHeartbeatResponseData(
                error_code=int(refused.code), error_message=refused.message
            )
        self._run_timers(now)
        self._flush()
        return response

    def _check_heartbeat(self, r: ConsumerGroupHeartbeatRequestData) -> None:
        """``throwIfConsumerGroupHeartbeatRequestIsInvalid`` (GroupCoordinatorService)."""

        def invalid(message: str) -> Refused:
            return Refused(ErrorCode.INVALID_REQUEST, message)

        if (r.api_version >= 1 or r.member_epoch > 0 or r.member_epoch == -1) and not (r.member_id):
            # v1 (KIP-1082): the client generates its member id; v0 only when joining.
            raise invalid("MemberId can't be empty.")
        if not r.group_id:
            raise invalid("GroupId can't be empty.")
        if r.instance_id == "":
            raise invalid("InstanceId can't be empty.")
        if r.rack_id == "":
            raise invalid("RackId can't be empty.")
        if r.member_epoch == 0:
            if r.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if r.topic_partitions is None or len(r.topic_partitions) > 0:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if r.subscribed_topic_names is None and r.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                    "(re-)joining."
                )
        elif r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if r.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif r.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        assignors = self.consumer_settings.assignors
        if r.server_assignor is not None and r.server_assignor not in assignors:
            raise Refused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {r.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(assignors)}.",
            )

    def _consumer_group(self, group_id: str) -> ConsumerGroup:
        """``consumerGroup(groupId)``: GROUP_ID_NOT_FOUND unless it is a consumer group."""
        group = self._consumer_groups.get(group_id)
        if group is not None:
            return group
        if group_id in self._groups and not self._groups[group_id].is_in(State.DEAD):
            raise Refused(
                ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
            )
        raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found.")

    @staticmethod
    def _member(group: ConsumerGroup, member_id: str) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            raise Refused(
                ErrorCode.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        return member

    @staticmethod
    def _check_epoch(
        member: ConsumerGroupMember,
        epoch: int,
        owned: Sequence[tuple[uuid.UUID, Sequence[int]]] | None,
    ) -> None:
        """``throwIfConsumerGroupMemberEpochIsInvalid``: an epoch ahead of ours is fenced; one
        behind is accepted only if it is the previous epoch and the member owns nothing beyond
        its assignment (our answer with the new epoch may have been lost)."""
        if epoch > member.member_epoch:
            raise Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not owned_is_subset(owned, member.assigned)
        ):
            raise Refused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one "
                f"known by the group coordinator ({member.member_epoch}). The member must "
                "abandon all its partitions and rejoin.",
            )

    def _consumer_heartbeat(
        self, r: ConsumerGroupHeartbeatRequestData, now: float
    ) -> ConsumerGroupHeartbeatResponseData:
        joining = r.member_epoch == 0
        group_id = r.group_id
        group = self._consumer_groups.get(group_id)
        drop_classic = upgrade = False
        if group is None:
            classic = self._groups.get(group_id)
            if classic is not None and not classic.is_in(State.DEAD):
                if not joining:
                    raise Refused(
                        ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group."
                    )
                if classic.is_in(State.EMPTY):
                    drop_classic = True  # an empty classic group becomes a consumer group
                    group = ConsumerGroup(group_id)
                else:
                    upgrade = True  # the online upgrade (mixed groups)
                    group = self._upgraded(group_id)
            elif not joining:
                raise Refused(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            else:
                group = ConsumerGroup(group_id)
        self._check_group_size(group, r.member_id)
        member_id = r.member_id or kafka_uuid()  # v0: the coordinator names a joining member
        replaced: ConsumerGroupMember | None = None
        if r.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    self._member(group, member_id)  # raises UNKNOWN_MEMBER_ID
                member = ConsumerGroupMember(member_id)
            self._check_epoch(member, r.member_epoch, r.topic_partitions)
        else:
            existing = group.static_member(r.instance_id)
            if joining:
                if existing is None:
                    member = group.members.get(member_id) or ConsumerGroupMember(member_id)
                else:
                    if (
                        not existing.uses_classic_protocol
                        and existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH
                    ):
                        raise Refused(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {member_id} with instance id {r.instance_id} "
                            "cannot join the group because the instance id is owned by "
                            f"{existing.member_id} member.",
                        )
                    # The new instance takes the old one's place, its partitions and target.
                    replaced = existing
                    member = replace(
                        existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
                    )
            else:
                if existing is None:
                    raise Refused(
                        ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown."
                    )
                self._check_fenced_instance(existing, member_id, r.instance_id)
                self._check_epoch(existing, r.member_epoch, r.topic_partitions)
                member = existing

        updated = replace(
            member,
            instance_id=r.instance_id if r.instance_id is not None else member.instance_id,
            rack_id=r.rack_id if r.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                r.rebalance_timeout_ms if r.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=(
                r.server_assignor if r.server_assignor is not None else member.server_assignor
            ),
            subscribed_topic_names=(
                frozenset(r.subscribed_topic_names) if r.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                r.subscribed_topic_regex if r.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=r.client_id,
            client_host=r.client_host,
            classic=None,
        )  # fmt: skip
        regex_bump, refresh = self._regex_update(group, member, updated, now)

        # Every check passed: from here on the group changes (Kafka writes its records).
        if drop_classic:
            self._drop_classic_group(group_id, now)
        if upgrade:
            self._finish_upgrade(group, now)
        self._consumer_groups[group_id] = group
        if replaced is not None:
            self._replace_static_member(group, replaced, member)
        self._apply_member_update(group, member, updated, now, regex_bump, refresh)
        updated = group.members[member_id]

        target_epoch = group.assignment_epoch
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group)
            target_epoch = group.assignment_epoch
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = reconcile(
                updated,
                assignment_epoch=target_epoch,
                target=group.target_of(updated.member_id, updated.instance_id),
                partition_epoch=group.partition_epochs,
                owned=r.topic_partitions,
            )
            if reconciled != updated:
                self._store_reconciled(group, reconciled, now)
        self._schedule_session(group_id, member_id, now)

        full = (
            r.rebalance_timeout_ms != -1
            and (r.subscribed_topic_names is not None or r.subscribed_topic_regex is not None)
            and r.topic_partitions is not None
        )
        assignment = None
        if joining or full or reconciled.assigned != member.assigned:
            assignment = {t: tuple(sorted(ps)) for t, ps in reconciled.assigned.items()}
        return ConsumerGroupHeartbeatResponseData(
            error_code=ErrorCode.NONE,
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._interval_ms(group_id),
            assignment=assignment,
        )

    def _check_group_size(self, group: ConsumerGroup, member_id: str) -> None:
        """``throwIfConsumerGroupIsFull``: a group at its maximum size takes no new member."""
        max_size = self.consumer_settings.max_size
        if (
            max_size is not None
            and len(group.members) >= max_size
            and (not member_id or member_id not in group.members)
        ):
            raise Refused(
                ErrorCode.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {max_size} members.",
            )

    def _upgraded(self, group_id: str) -> ConsumerGroup:
        """The consumer group a non-empty classic group would become (mixed groups override
        this; here: refused)."""
        raise self._classic_upgrade_refused(group_id)

    def _finish_upgrade(self, group: ConsumerGroup, now: float) -> None:
        """Apply the conversion :meth:`_upgraded` prepared."""

    def _consumer_fence_hook(
        self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember], now: float
    ) -> bool:
        """Fencing ``members`` converts the group instead (True: done; mixed groups)."""
        return False

    def _classic_upgrade_refused(self, group_id: str) -> Refused:
        """A consumer-protocol member joining a non-empty classic group (the online upgrade)."""
        return Refused(
            ErrorCode.GROUP_ID_NOT_FOUND,
            f"Cannot upgrade classic group {group_id} to consumer group because online upgrade "
            "is disabled.",
        )

    @staticmethod
    def _check_fenced_instance(
        existing: ConsumerGroupMember, member_id: str, instance_id: str
    ) -> None:
        if existing.member_id != member_id:
            raise Refused(
                ErrorCode.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )

    def _drop_classic_group(self, group_id: str, now: float) -> None:
        """``maybeDeleteEmptyClassicGroup``: the empty classic group goes, its offsets stay."""
        classic = self._groups.pop(group_id)
        classic.transition_to(State.DEAD, now)

    @staticmethod
    def _replace_static_member(
        group: ConsumerGroup, old: ConsumerGroupMember, new: ConsumerGroupMember
    ) -> None:
        """``replaceMember``: the old instance's record goes; the new one has its partitions
        (now at epoch 0) and its target assignment."""
        target = group.target.get(old.member_id, {})
        order = group.target_order.get(old.member_id)
        group.remove_member(old.member_id)
        group.update_member(new)
        group.set_target(new.member_id, target, order)

    def _regex_update(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        now: float,
    ) -> tuple[bool, frozenset[str] | None]:
        """``maybeUpdateRegularExpressions``, before anything changes: whether the member's new
        regex bumps the group epoch (it is already resolved) and which regexes to resolve now
        (None: no resolution). A new regex that does not compile is refused here."""
        old_rx, new_rx = member.subscribed_topic_regex, updated.subscribed_topic_regex
        bump = False
        refresh = False
        if old_rx != new_rx and new_rx:
            if group.subscribed_regexes.get(new_rx, 0) == 0:
                try:
                    compile_topic_regex(new_rx)
                except InvalidRegexError as exc:
                    raise Refused(
                        ErrorCode.INVALID_REGULAR_EXPRESSION,
                        f"SubscribedTopicRegex `{new_rx}` is not a valid regular expression: "
                        f"{exc}.",
                    ) from exc
                refresh = True
            else:
                bump = new_rx in group.resolved_regexes
        if not refresh and not group.subscribed_regexes:
            return bump, None
        if group.group_id in self._regex_pending:
            return bump, None
        last = min((r.resolved_at for r in group.resolved_regexes.values()), default=None)
        if last is not None and now <= last + REGEX_MIN_REFRESH_S:
            return bump, None
        regexes = Counter(group.subscribed_regexes)
        if old_rx:
            regexes[old_rx] -= 1
        if new_rx:
            regexes[new_rx] += 1
        live = frozenset(r for r, c in regexes.items() if c > 0)
        version = min((r.version for r in group.resolved_regexes.values()), default=0)
        refresh = (
            refresh
            or len(live) != len(group.resolved_regexes)
            or version < self._new_topics_version
            or last is None
            or now > last + self.consumer_settings.regex_refresh_interval_ms / 1000
        )
        return bump, (live if refresh and live else None)

    def _apply_member_update(
        self,
        group: ConsumerGroup,
        member: ConsumerGroupMember,
        updated: ConsumerGroupMember,
        now: float,
        regex_bump: bool,
        refresh: frozenset[str] | None,
    ) -> None:
        """Store the updated member; bump the group epoch when the group is new, the member's
        topic names changed, its regex is already resolved, or the subscribed topics differ
        from the last bump's (``updateSubscriptionMetadata``)."""
        old_rx = member.subscribed_topic_regex
        last_of_old = old_rx and group.subscribed_regexes.get(old_rx, 0) == 1
        if last_of_old and old_rx != updated.subscribed_topic_regex:
            group.resolved_regexes.pop(old_rx, None)  # its last subscriber moved on
        bump = group.group_epoch == 0 or regex_bump
        bump = bump or updated.subscribed_topic_names != member.subscribed_topic_names
        group.update_member(updated)
        if bump or group.metadata_refresh:
            fingerprint = self._fingerprint(group.subscribed_topics())
            if fingerprint != group.metadata_hash:
                bump = True
            if bump:
                group.group_epoch += 1
                group.metadata_hash = fingerprint
            group.metadata_refresh = False
        if refresh is not None:
            self._regex_pending.add(group.group_id)
            self._consumer_timers.schedule(("regex", group.group_id, ""), now)

    def _compute_target(self, group: ConsumerGroup) -> None:
        """``updateTargetAssignment``: the assignor the most members ask for (else the first
        configured) computes every member's target; the assignment epoch catches up."""
        name = group.preferred_assignor() or self.consumer_settings.assignors[0]
        # Kafka fills a java.util.HashMap from its TimelineHashMap of members for the assignor.
        order = JavaMap(group.member_order)
        specs = {
            member_id: MemberSpec(
                topic_ids=self._topic_ids(group.member_topics(group.members[member_id])),
                assignment=group.target.get(member_id, {}),
                instance_id=group.members[member_id].instance_id,
                rack_id=group.members[member_id].rack_id,
                order=group.target_order.get(member_id, {}),
            )
            for member_id in order
        }
        spec = GroupSpec(
            members=specs,
            homogeneous=group.is_homogeneous(
                group.subscribed_names, group.subscribed_regexes, len(group.members)
            ),
            partitions={t.topic_id: t.partitions for t in self._topics.values()},
            owners=dict(group.target_owner),
        )
        result = SERVER_ASSIGNORS[name](spec)
        for member_id in specs:
            listed = result.get(member_id, {})
            new = {t: frozenset(ps) for t, ps in listed.items()}
            if new == group.target.get(member_id):
                continue  # no record: Kafka keeps the set it had
            # The record lists the assignor's sets; Kafka rebuilds each from that list.
            group.set_target(member_id, new, {t: stored_order(ps) for t, ps in listed.items()})
        group.assignment_epoch = group.group_epoch

    def _store_reconciled(
        self, group: ConsumerGroup, member: ConsumerGroupMember, now: float
    ) -> None:
        """Store a member's new assignment state; one asked to revoke has its rebalance
        timeout to do so (at this epoch), else the timeout is cancelled."""
        group.update_member(member)
        key = ("rebalance", group.group_id, member.member_id)
        if member.classic is not None:
            return  # a classic-protocol member has its join and sync timers instead
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            deadline = now + member.rebalance_timeout_ms / 1000
            self._consumer_timers.schedule(key, deadline, member.member_epoch)
        else:
            self._consumer_timers.cancel(key)

    def _schedule_session(
        self, group_id: str, member_id: str, now: float, session_ms: int | None = None
    ) -> None:
        """A member's session, the group's (or a classic member's own) from ``now``."""
        deadline = (
            now + (session_ms if session_ms is not None else self._session_ms(group_id)) / 1000
        )
        self._consumer_timers.schedule(("session", group_id, member_id), deadline)

    def _forget_consumer_group(self, group_id: str) -> None:
        del self._consumer_groups[group_id]
        self._regex_pending.discard(group_id)
        for key in [k for k in self._consumer_timers.live if k[1] == group_id]:
            self._consumer_timers.cancel(key)

    # ================================================================ leaving

    def _consumer_leave(
        self, r: ConsumerGroupHeartbeatRequestData, now: float
    ) -> ConsumerGroupHeartbeatResponseData:
        """``consumerGroupLeave``: epoch -1 removes the member (the group epoch moves and its
        partitions are reassigned); -2, a static member's, keeps its partitions and target for
        the instance's return within its session."""
        group = self._consumer_group(r.group_id)
        answer = ConsumerGroupHeartbeatResponseData(
            error_code=ErrorCode.NONE, member_id=r.member_id, member_epoch=r.member_epoch
        )
        if r.instance_id is None:
            member = self._member(group, r.member_id)
        else:
            found = group.static_member(r.instance_id)
            if found is None:
                raise Refused(
                    ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {r.instance_id} is unknown."
                )
            member = found
            self._check_fenced_instance(member, r.member_id, r.instance_id)
            if r.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                group.update_member(
                    replace(
                        member,
                        member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                        pending_revocation={},
                    )
                )
                return ConsumerGroupHeartbeatResponseData(
                    error_code=ErrorCode.NONE,
                    member_id=member.member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                )
        self._fence(group, [member], now)
        return answer

    def _fence(
        self, group: ConsumerGroup, members: Sequence[ConsumerGroupMember], now: float
    ) -> None:
        """``consumerGroupFenceMembers``: remove them (with their target and any regex only
        they used) and bump the group epoch, unless the group becomes a classic one."""
        if not members:
            return
        if self._consumer_fence_hook(group, members, now):
            return
        regexes = Counter(m.subscribed_topic_regex for m in members if m.subscribed_topic_regex)
        for regex, count in regexes.items():
            if group.subscribed_regexes.get(regex, 0) == count:
                group.resolved_regexes.pop(regex, None)
        for member in members:
            group.remove_member(member.member_id)
            for kind in ("session", "rebalance", "join", "sync"):
                self._consumer_timers.cancel((kind, group.group_id, member.member_id))
        group.group_epoch += 1
        group.metadata_hash = self._fingerprint(group.subscribed_topics())

    def _fence_by_timer(self, group_id: str, member_id: str, epoch: int | None, now: float) -> None:
        group = self._consumer_groups.get(group_id)
        member = None if group is None else group.members.get(member_id)
        if group is None or member is None:
            return
        if epoch is not None and member.member_epoch != epoch:
            return  # it moved on from the epoch it had to leave in time
        self._fence(group, [member], now)

    # ================================================================ timers

    def next_deadline(self) -> float | None:
        """When ``on_timer`` must next be called (None: nothing is pending)."""
        classic = super().next_deadline()
        consumer = self._consumer_timers.next()
        if classic is None or (consumer is not None and consumer < classic):
            return consumer
        return classic

    def _run_timers(self, now: float) -> None:
        self._run_consumer_timers(now)
        super()._run_timers(now)

    def _run_consumer_timers(self, now: float) -> None:
        while (due := self._consumer_timers.pop_due(now)) is not None:
            (kind, group_id, member_id), payload = due
            if kind in ("session", "join", "sync"):
                # A silent member; a classic member told to rejoin, or to sync, in vain.
                self._fence_by_timer(group_id, member_id, None, now)
            elif kind == "rebalance":
                self._fence_by_timer(group_id, member_id, payload, now)
            elif kind == "regex":
                self._resolve_regexes(group_id, now)

    def _resolve_regexes(self, group_id: str, now: float) -> None:
        """``refreshRegularExpressions`` + ``handleRegularExpressionsResult``: match every regex
        the group uses against the topics; a changed match bumps the group epoch."""
        self._regex_pending.discard(group_id)
        group = self._consumer_groups.get(group_id)
        if group is None:
            return
        bump = False
        for regex in list(group.subscribed_regexes):
            try:
                pattern = compile_topic_regex(regex)
            except InvalidRegexError:
                matched: frozenset[str] = frozenset()  # Kafka logs it and ignores it
            else:
                matched = frozenset(n for n in self._topics if pattern.fullmatch(n))
            old = group.resolved_regexes.get(regex)
            if old is None or old.topics != matched:
                bump = True
            group.resolved_regexes[regex] = ResolvedRegex(matched, self._metadata_version, now)
        fingerprint = self._fingerprint(group.subscribed_topics())
        if fingerprint != group.metadata_hash:
            bump = True
        if bump:
            group.group_epoch += 1
            group.metadata_hash = fingerprint
            group.metadata_refresh = False


def kafka_uuid() -> str:
    """``Uuid.randomUuid().toString()``: 16 random bytes in URL-safe base64, unpadded, never
    starting with ``-``."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text
