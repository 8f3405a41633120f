"""What differs between Kafka versions in the classic coordinator, and its settings.

Kafka's classic group coordinator changed between versions; ``CoordinatorConfig.flavour``
picks a generation: ``kafka4`` (the default), ``kafka3`` or ``kafka2`` (Kafka 2.3).

* :data:`RULES`: each rule the flavours differ on, what each flavour does and where the change
  comes from (the ids appear in the coordinator's ``rule_hits`` and in the conformance table,
  docs/conformance.md);
* :data:`FLAVOURS`: each flavour's choices, as the fields of a :class:`Flavour` the coordinator
  reads where a rule applies (``if self.flavour.pending_sync_timeout: ...``);
* :class:`CoordinatorConfig`: the coordinator's broker settings, the flavour among them.

The member order and the protocol vote's tie-break, which follow each version's hash map, are
:mod:`aiogroup.testing.embedded.hashorder`'s; the API versions each flavour serves are
:func:`aiogroup.testing.wire.versions_for`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
from aiogroup.testing.embedded.messages import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_CONFIG_OPERATIONS,
    GROUP_OPERATIONS,
    ErrorCode,
)

__all__ = ["FLAVOURS", "RULES", "CoordinatorConfig", "Flavour", "Rule"]


@dataclass(frozen=True, slots=True)
class Rule:
    """A rule of the classic coordinator that changed between Kafka versions: what each flavour
    does (``by_flavour``) and where the change comes from (``source``)."""

    title: str
    by_flavour: dict[str, str]
    source: str


#: The rules the flavours differ on, by id (the ids appear in :attr:`GroupCoordinator.rule_hits`
#: and in the conformance table, docs/conformance.md).
RULES: dict[str, Rule] = {
    "member-order": Rule(
        "order of the members (leader's JoinGroup member list, next leader, DescribeGroups)",
        {
            "kafka2": "Scala 2.12 mutable.HashMap",
            "kafka3": "Scala 2.13 mutable.HashMap",
            "kafka4": "java.util.HashMap",
        },
        "GroupMetadata.members (Scala 2.12 / 2.13 builds), ClassicGroup.members (4.0, KAFKA-14500)",
    ),
    "vote-tie": Rule(
        "protocol vote tie-break",
        {
            "kafka2": "first of groupBy's Map1-Map4 (Scala 2.12)",
            "kafka3": "first of groupBy's CHAMP HashMap (Scala 2.13)",
            "kafka4": "first of a java.util.HashMap",
        },
        "GroupMetadata.selectProtocol, ClassicGroup.selectProtocol",
    ),
    "heartbeat-completing": Rule(
        "Heartbeat while CompletingRebalance",
        {"kafka2": "REBALANCE_IN_PROGRESS", "kafka3": "NONE", "kafka4": "NONE"},
        "KAFKA-10134 (2.7)",
    ),
    "static-restart-completing": Rule(
        "static member restarts while CompletingRebalance",
        {"kafka2": "same generation, no rebalance", "kafka3": "rebalance", "kafka4": "rebalance"},
        "KAFKA-9801 (2.6)",
    ),
    "static-restart-protocol": Rule(
        "static member restarts in Stable with a vote-changing protocol list",
        {"kafka2": "no rebalance", "kafka3": "rebalance", "kafka4": "rebalance"},
        "KAFKA-10284 (2.8)",
    ),
    "pending-sync-timeout": Rule(
        "members that never send SyncGroup",
        {
            "kafka2": "kept",
            "kafka3": "removed after the rebalance timeout",
            "kafka4": "removed after the rebalance timeout",
        },
        "KAFKA-12890 (3.0)",
    ),
    "group-max-size": Rule(
        "group.max.size admission",
        {
            "kafka2": "new member refused at size >= max; pending ids not counted",
            "kafka3": "acceptJoiningMember: while rebalancing, the awaiting-join count",
            "kafka4": "acceptJoiningMember: while rebalancing, the awaiting-join count",
        },
        "KAFKA-9885 (2.6)",
    ),
    "initial-delay": Rule(
        "initial rebalance delay when members leave or return to an emptied group",
        {
            "kafka2": "delay extended only at generation 0; no removal ends it",
            "kafka3": "delay extended only at generation 0; no removal ends it",
            "kafka4": (
                "extended whenever the group came from Empty; a session expiry ends it once "
                "everyone left has joined (a LeaveGroup does not)"
            ),
        },
        "GroupMetadataManager (4.0, KAFKA-14500): prepareRebalance, the expiry paths "
        "(removePendingMemberAndUpdateClassicGroup) vs LeaveGroup's maybeCompleteJoinPhase; "
        "InitialDelayedJoin before",
    ),
    "max-size-refusal": Rule(
        "a member turned away with GROUP_MAX_SIZE_REACHED while the group rebalances",
        {
            "kafka2": "the join completes at once if everyone left has joined",
            "kafka3": "the join completes at once if everyone left has joined",
            "kafka4": "the join waits for the next request or the rebalance timeout",
        },
        "GroupCoordinator.doJoinGroup (checkAndComplete after every JoinGroup) vs "
        "GroupMetadataManager.classicGroupJoinToClassicGroup (4.0, KAFKA-14500)",
    ),
    "commit-completing": Rule(
        "OffsetCommit while CompletingRebalance from a stale or unknown member",
        {
            "kafka2": "REBALANCE_IN_PROGRESS first",
            "kafka3": "member and generation checked first",
            "kafka4": "member and generation checked first",
        },
        "apache/kafka#9958 (3.0)",
    ),
    "unknown-instance-id": Rule(
        "a group.instance.id the group does not know (Heartbeat, SyncGroup, OffsetCommit)",
        {"kafka2": "ignored", "kafka3": "UNKNOWN_MEMBER_ID", "kafka4": "UNKNOWN_MEMBER_ID"},
        "apache/kafka#9958 (3.0)",
    ),
    "static-member-id": Rule(
        "static member ids",
        {
            "kafka2": "instance id + state timestamp (a restart may get the same id back)",
            "kafka3": "instance id + UUID",
            "kafka4": "instance id + UUID",
        },
        "KAFKA-8715 (2.4)",
    ),
    "describe-metadata": Rule(
        "DescribeGroups member_metadata",
        {
            "kafka2": "the assignment (bug)",
            "kafka3": "the subscription",
            "kafka4": "the subscription",
        },
        "KAFKA-9150 (2.4)",
    ),
    "api-versions": Rule(
        "API versions served (any other version closes the connection)",
        {
            "kafka2": "Kafka 2.3's: JoinGroup v0-5, SyncGroup v0-3, DescribeGroups v0-3, ...",
            "kafka3": "Kafka 3.9's: DescribeGroups v0-5, ...",
            "kafka4": (
                "Kafka 4.1's: DescribeGroups v0-6 (KIP-1043); none of the versions KIP-896 "
                "removed (OffsetCommit v0-1, OffsetFetch v0, Fetch v0-3, ...)"
            ),
        },
        "each version's ApiVersions, where the embedded broker speaks them "
        "(aiogroup.testing.wire.versions_for); KIP-896 (4.0)",
    ),
    "api-versions-refusal": Rule(
        "ApiVersions in a version the broker does not serve",
        {
            "kafka2": "UNSUPPORTED_VERSION, no API listed",
            "kafka3": "UNSUPPORTED_VERSION, listing ApiVersions' own versions",
            "kafka4": "UNSUPPORTED_VERSION, listing ApiVersions' own versions",
        },
        "KIP-511 (2.4)",
    ),
    "authorized-operations": Rule(
        "DescribeGroups v3+ authorized_operations when not asked for",
        {"kafka2": "0", "kafka3": "-2147483648", "kafka4": "-2147483648"},
        "KIP-430; apache/kafka#7710 (2.5)",
    ),
    "group-operations": Rule(
        "DescribeGroups v3+ authorized_operations asked for (no authorizer: every operation)",
        {
            "kafka2": "READ, DELETE, DESCRIBE",
            "kafka3": "READ, DELETE, DESCRIBE",
            "kafka4": "READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS",
        },
        "AclEntry.supportedOperations(GROUP); KAFKA-14510 (4.0, group configs)",
    ),
    "deleted-topic-group": Rule(
        "an Empty group left without offsets by a topic's deletion",
        {
            "kafka2": "Dead at once (the deletion runs cleanupGroupMetadata)",
            "kafka3": "Dead at once (the deletion runs cleanupGroupMetadata)",
            "kafka4": (
                "stays Empty (Kafka drops it at its next periodic cleanup, every "
                "offsets.retention.check.interval.ms; the embedded broker runs none)"
            ),
        },
        "GroupMetadataManager.handleDeletedPartitions vs GroupCoordinatorShard.onPartitionsDeleted "
        "(4.0, KAFKA-14500)",
    ),
}


@dataclass(frozen=True, slots=True)
class Flavour:
    """The rules of one Kafka generation where they differ (see :data:`RULES`)."""

    name: str
    kafka: str
    heartbeat_in_completing_rebalance: ErrorCode
    static_restart_in_completing_rebalances: bool
    static_restart_checks_protocol: bool
    pending_sync_timeout: bool
    accept_joining_member: bool
    initial_delay_4x: bool
    commit_checks_members_first: bool
    unknown_instance_id_fails: bool
    static_member_id_from_state_time: bool
    describe_metadata_is_assignment: bool
    authorized_operations_default: int
    #: ``max-size-refusal``: after a GROUP_MAX_SIZE_REACHED refusal the join may complete.
    refusal_completes_join: bool
    #: ``deleted-topic-group``: deleting a topic drops the Empty groups it left without offsets.
    deletion_drops_emptied_groups: bool
    #: ``group-operations``: the authorized operations of a group when asked for.
    group_operations: int
    #: ``api-versions-refusal``: an unsupported ApiVersions version's answer lists ApiVersions.
    unsupported_api_versions_lists_itself: bool


#: ``kafka4`` (the default): Apache Kafka 4.x's Java coordinator (``GroupMetadataManager`` /
#: ``ClassicGroup``); ``kafka3``: 3.x's Scala ``GroupCoordinator`` (Scala 2.13 builds);
#: ``kafka2``: Kafka 2.3's (Scala 2.12), the broker ``aiogroup.testing.launchers.kafka`` runs.
FLAVOURS: dict[str, Flavour] = {
    "kafka4": Flavour(
        "kafka4",
        "4.x",
        heartbeat_in_completing_rebalance=ErrorCode.NONE,
        static_restart_in_completing_rebalances=True,
        static_restart_checks_protocol=True,
        pending_sync_timeout=True,
        accept_joining_member=True,
        initial_delay_4x=True,
        commit_checks_members_first=True,
        unknown_instance_id_fails=True,
        static_member_id_from_state_time=False,
        describe_metadata_is_assignment=False,
        authorized_operations_default=AUTHORIZED_OPERATIONS_OMITTED,
        refusal_completes_join=False,
        deletion_drops_emptied_groups=False,
        group_operations=GROUP_OPERATIONS | GROUP_CONFIG_OPERATIONS,
        unsupported_api_versions_lists_itself=True,
    ),
    "kafka3": Flavour(
        "kafka3",
        "3.x",
        heartbeat_in_completing_rebalance=ErrorCode.NONE,
        static_restart_in_completing_rebalances=True,
        static_restart_checks_protocol=True,
        pending_sync_timeout=True,
        accept_joining_member=True,
        initial_delay_4x=False,
        commit_checks_members_first=True,
        unknown_instance_id_fails=True,
        static_member_id_from_state_time=False,
        describe_metadata_is_assignment=False,
        authorized_operations_default=AUTHORIZED_OPERATIONS_OMITTED,
        refusal_completes_join=True,
        deletion_drops_emptied_groups=True,
        group_operations=GROUP_OPERATIONS,
        unsupported_api_versions_lists_itself=True,
    ),
    "kafka2": Flavour(
        "kafka2",
        "2.3",
        heartbeat_in_completing_rebalance=ErrorCode.REBALANCE_IN_PROGRESS,
        static_restart_in_completing_rebalances=False,
        static_restart_checks_protocol=False,
        pending_sync_timeout=False,
        accept_joining_member=False,
        initial_delay_4x=False,
        commit_checks_members_first=False,
        unknown_instance_id_fails=False,
        static_member_id_from_state_time=True,
        describe_metadata_is_assignment=True,
        authorized_operations_default=0,
        refusal_completes_join=True,
        deletion_drops_emptied_groups=True,
        group_operations=GROUP_OPERATIONS,
        unsupported_api_versions_lists_itself=False,
    ),
}


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    """Broker settings of the classic coordinator (Kafka's names, milliseconds).

    ``initial_rebalance_delay_ms`` is ``group.initial.rebalance.delay.ms`` (Kafka's default is
    3000; ours 0 for fast tests). ``group_max_size`` None means unlimited (Kafka's default is
    Integer.MAX_VALUE). ``offset_metadata_max_bytes`` is ``offset.metadata.max.bytes`` (counted,
    as Kafka does, in UTF-16 code units: ``String.length()``). ``flavour`` picks the rules of a
    Kafka generation where they changed (:data:`FLAVOURS`): ``kafka4`` (default), ``kafka3`` or
    ``kafka2`` (Kafka 2.3).
    """

    initial_rebalance_delay_ms: int = 0
    group_min_session_timeout_ms: int = 6000
    group_max_session_timeout_ms: int = 1_800_000
    group_max_size: int | None = None
    offset_metadata_max_bytes: int = 4096
    #: How long a new member's parked JoinGroup may wait before the member is dropped (it has no
    #: member id to heartbeat with yet). Kafka: ``NewMemberJoinTimeoutMs`` = 5 minutes.
    new_member_join_timeout_ms: int = 300_000
    flavour: str = "kafka4"
    #: KIP-848's consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe): Kafka's
    #: ``group.coordinator.rebalance.protocols`` including ``consumer``. None: the flavour's
    #: default, served by ``kafka4`` only; True on ``kafka3`` serves them as 3.7-3.9 did behind
    #: that flag (ConsumerGroupHeartbeat v0); Kafka 2.3 had none.
    consumer_protocol: bool | None = None
    #: The ``group.consumer.*`` settings of consumer groups.
    consumer_group: ConsumerGroupSettings = field(default_factory=ConsumerGroupSettings)

    def __post_init__(self) -> None:
        if self.flavour not in FLAVOURS:
            raise ConfigurationError(
                f"flavour must be one of {', '.join(FLAVOURS)}, not {self.flavour!r}"
            )
        if self.consumer_protocol and self.flavour == "kafka2":
            raise ConfigurationError("consumer_protocol: Kafka 2.3 has no KIP-848 groups")
        if self.initial_rebalance_delay_ms < 0:
            raise ConfigurationError("initial_rebalance_delay_ms must be >= 0")
        if not 0 <= self.group_min_session_timeout_ms <= self.group_max_session_timeout_ms:
            raise ConfigurationError("need 0 <= group_min_session_timeout_ms <= max")
        if self.group_max_size is not None and self.group_max_size < 1:
            raise ConfigurationError("group_max_size must be >= 1 (or None)")
        if self.offset_metadata_max_bytes < 0 or self.new_member_join_timeout_ms < 0:
            raise ConfigurationError("offset_metadata_max_bytes and timeouts must be >= 0")

    @property
    def serves_consumer_protocol(self) -> bool:
        """Whether KIP-848's consumer groups are served (:attr:`consumer_protocol`)."""
        if self.consumer_protocol is None:
            return self.flavour == "kafka4"
        return self.consumer_protocol
