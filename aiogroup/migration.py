"""Where a group stands in a move between the classic and the consumer group protocol (KIP-848's
online migration), judged from one snapshot (sans-I/O: feed it an
:class:`~aiogroup.inspector.GroupDescription`).

What Kafka 4.x does (``GroupMetadataManager`` and the group classes of its group coordinator):

* **Upgrade.** The first ConsumerGroupHeartbeat of a member joining a non-empty *classic* group
  converts it into a *consumer* group, provided ``group.consumer.migration.policy`` allows
  upgrades (``bidirectional``, the default, or ``upgrade``), the group uses the consumer embedded
  protocol (protocol type ``consumer``), it has no more members than
  ``group.consumer.max.size``, and no member's current assignment carries user data (Kafka 4.1
  refuses: "userData from a custom assignor would be lost"; an aiogroup leader's marks are
  assignment entries without partitions, not user data, and Kafka skips them). Otherwise the
  joining member is answered GROUP_ID_NOT_FOUND and the group stays classic. The group epoch
  starts at the classic generation; each classic member keeps its member id and its assignment.
* **A mixed group.** The remaining classic members are served through JoinGroup, SyncGroup and
  Heartbeat: the broker assigns them (its server assignor, as the others), their generation is
  their member epoch, and a heartbeat answers REBALANCE_IN_PROGRESS when they must rejoin to
  revoke or to take new partitions. A classic member joining a consumer group must offer a
  protocol every classic member in it offers (else INCONSISTENT_GROUP_PROTOCOL).
* **Downgrade.** When the last member on the consumer protocol leaves (or is fenced) and every
  other member uses the classic protocol, the group is converted back into a classic group, if
  the policy allows downgrades (``bidirectional`` or ``downgrade``) and the group fits
  ``group.max.size``, and a rebalance starts. A static member on the consumer protocol replaced
  by a classic one with the same instance id converts it too (KAFKA-19546 fixed the
  subscription change case in 4.1.1).
* **Empty groups** are converted either way regardless of the policy (offsets stay).

The policy, ``group.consumer.max.size`` and ``group.max.size`` are broker settings no group
snapshot shows; what a snapshot shows is which members speak which protocol (ConsumerGroupDescribe
v1's ``MemberType``, KIP-1099) and, for a classic group, its protocol type and whether any
assignment carries user data.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiogroup.membership.leader import MARK_PREFIX

if TYPE_CHECKING:
    from aiogroup.inspector import GroupDescription, MemberDescription

__all__ = [
    "CLASSIC",
    "CONSUMER",
    "MigrationStatus",
    "Stage",
    "Upgrade",
    "migration_status",
]

#: ConsumerGroupDescribe v1's ``MemberType`` (KIP-1099): -1 unknown, 0 classic, 1 consumer.
CLASSIC = "classic"
CONSUMER = "consumer"
MEMBER_TYPES = {0: CLASSIC, 1: CONSUMER}


class Stage(enum.Enum):
    """Which protocols the group's members speak."""

    #: A classic group: every member speaks JoinGroup/SyncGroup (KIP-429's world).
    CLASSIC = "classic"
    #: A consumer group some of whose members still speak the classic protocol.
    MIXED = "mixed"
    #: A consumer group whose members all speak the consumer protocol.
    CONSUMER = "consumer"
    #: No members, or the members' protocols cannot be told (ConsumerGroupDescribe v0).
    UNKNOWN = "unknown"


class Upgrade(enum.Enum):
    """Whether Kafka would convert this classic group when a consumer-protocol member joins."""

    #: Yes, as far as a snapshot shows (the broker's policy must allow it).
    POSSIBLE = "possible"
    #: No: the broker would refuse the joining member (``blockers`` says why).
    BLOCKED = "blocked"
    #: Not a classic group (already converted), or nothing to tell.
    NOT_APPLICABLE = "n/a"


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """Where a group stands between the two protocols, in words and in counts."""

    group_type: str
    stage: Stage
    #: Members (client id, else member id) on each protocol, and those not told.
    consumer_members: tuple[str, ...]
    classic_members: tuple[str, ...]
    unknown_members: tuple[str, ...]
    upgrade: Upgrade
    #: Why Kafka would refuse to convert this classic group (empty unless BLOCKED).
    blockers: tuple[str, ...]
    #: Where the migration stands, one sentence.
    summary: str
    #: What converts the group next, and what to check.
    advice: str

    @property
    def members(self) -> int:
        return len(self.consumer_members) + len(self.classic_members) + len(self.unknown_members)

    def as_json(self) -> dict[str, object]:
        return {
            "group_type": self.group_type,
            "stage": self.stage.value,
            "consumer_members": list(self.consumer_members),
            "classic_members": list(self.classic_members),
            "unknown_members": list(self.unknown_members),
            "upgrade": self.upgrade.value,
            "blockers": list(self.blockers),
            "summary": self.summary,
            "advice": self.advice,
        }


def _legacy_marks(user_data: bytes | None) -> bool:
    """User data an aiogroup 0.x leader wrote: its marks (``aiogroup:<name>/<version>``).
    Today's leaders mark with assignment entries, which are no user data."""
    return user_data is not None and user_data.startswith(MARK_PREFIX.encode())


def _name(m: MemberDescription) -> str:
    return m.client_id or m.member_id


def _classic_status(group: GroupDescription) -> MigrationStatus:
    names = tuple(sorted(_name(m) for m in group.members))
    blockers: list[str] = []
    if group.protocol_type and group.protocol_type != "consumer":
        blockers.append(
            f"its protocol type is {group.protocol_type!r}, not 'consumer': only groups of "
            "consumers (the consumer embedded protocol) are converted"
        )
    carrying = [m for m in group.members if m.assignment_user_data]
    legacy = sorted(_name(m) for m in carrying if _legacy_marks(m.assignment_user_data))
    custom = sorted(_name(m) for m in carrying if not _legacy_marks(m.assignment_user_data))
    if custom:
        blockers.append(
            f"{len(custom)} member(s) hold an assignment carrying a custom assignor's user data "
            f"({', '.join(custom)}): Kafka refuses to convert the group, the consumer protocol "
            "would lose it; stop the group and start it again with group_protocol='consumer' "
            "(an empty group always converts), or roll the classic members onto a built-in "
            "assignor (range, roundrobin, sticky, cooperative-sticky) first"
        )
    if legacy:
        blockers.append(
            f"{len(legacy)} member(s) hold an assignment whose user data carries an older "
            f"aiogroup leader's marks ({', '.join(legacy)}): Kafka refuses to convert the "
            "group while any does; roll the classic members onto a current aiogroup, whose "
            "leader marks with assignment entries, not user data, first"
        )
    if not group.members:
        return MigrationStatus(
            "classic", Stage.UNKNOWN, (), (), (), Upgrade.NOT_APPLICABLE, (),
            "an empty classic group",
            "an empty group converts to whichever protocol its next member speaks",
        )  # fmt: skip
    summary = f"classic group, {len(names)} member(s) on the classic protocol"
    if blockers:
        return MigrationStatus(
            "classic", Stage.CLASSIC, (), names, (), Upgrade.BLOCKED, tuple(blockers),
            summary + "; an upgrade to the consumer protocol would be refused",
            "fix what blocks the upgrade before the first member restarts with "
            "group_protocol='consumer': Kafka answers that member GROUP_ID_NOT_FOUND",
        )  # fmt: skip
    return MigrationStatus(
        "classic", Stage.CLASSIC, (), names, (), Upgrade.POSSIBLE, (), summary,
        "the first member restarted with group_protocol='consumer' converts the group to a "
        "consumer group (Kafka 4.x, group.consumer.migration.policy 'bidirectional' or "
        "'upgrade'); the others keep working through JoinGroup/SyncGroup, the broker assigning",
    )  # fmt: skip


def migration_status(group: GroupDescription) -> MigrationStatus:
    """Where ``group`` stands between the classic and the consumer protocol."""
    if not group.consumer_protocol:
        return _classic_status(group)
    consumer = tuple(sorted(_name(m) for m in group.members if m.member_type == CONSUMER))
    classic = tuple(sorted(_name(m) for m in group.members if m.member_type == CLASSIC))
    unknown = tuple(sorted(_name(m) for m in group.members if m.member_type is None))
    n = len(group.members)
    if not n:
        return MigrationStatus(
            "consumer", Stage.UNKNOWN, (), (), (), Upgrade.NOT_APPLICABLE, (),
            "an empty consumer group",
            "an empty group converts to whichever protocol its next member speaks",
        )  # fmt: skip
    if unknown:
        return MigrationStatus(
            "consumer", Stage.UNKNOWN, consumer, classic, unknown, Upgrade.NOT_APPLICABLE, (),
            f"consumer group of {n} member(s); the broker does not tell which protocol each "
            "speaks (ConsumerGroupDescribe v1's member type, Kafka 4.0+)",
            "bounce members one at a time, each once the group is Stable again",
        )  # fmt: skip
    if classic:
        back = (
            "the group converts back to a classic group when its last consumer-protocol "
            "member leaves (group.consumer.migration.policy 'bidirectional' or 'downgrade')"
        )
        return MigrationStatus(
            "consumer", Stage.MIXED, consumer, classic, (), Upgrade.NOT_APPLICABLE, (),
            f"consumer group, {len(consumer)} of {n} members on the consumer protocol, "
            f"{len(classic)} classic (served through JoinGroup/SyncGroup, the broker assigning)",
            f"restart the classic members ({', '.join(classic)}) with group_protocol='consumer' "
            f"one at a time to finish the upgrade; {back}",
        )  # fmt: skip
    return MigrationStatus(
        "consumer", Stage.CONSUMER, consumer, (), (), Upgrade.NOT_APPLICABLE, (),
        f"consumer group, every member on the consumer protocol ({n} of {n})",
        "to go back, restart members with group_protocol='classic' one at a time: the group "
        "converts back to a classic group when the last consumer-protocol member leaves",
    )  # fmt: skip
