"""A consumer group seen from outside: DescribeGroups, decoded and judged for a rolling upgrade.

:func:`describe_group` asks the group's coordinator (FindCoordinator, then DescribeGroups at the
highest version both sides speak: Apache Kafka 2.3 speaks v0-3 and closes the connection on v4)
and decodes each member's metadata and assignment with :mod:`aiogroup.protocol`. The rest of the
module is sans-I/O: :func:`assess` says which step of a KIP-429 rolling upgrade the group is in
and whether the next bounce is safe, and :class:`GroupWatch` follows a group from snapshot to
snapshot (``aiogroup group watch``), which tells more than one snapshot can.

What a snapshot can and cannot show (Kafka's ``GroupMetadata.summary``, kept by the classic
``ClassicGroup`` coordinator of Kafka 4):

* Member metadata and assignments are returned only while the group is ``Stable``, and the
  metadata is that of the **group's protocol only**: the other assignors a member offers in its
  JoinGroup are known to the coordinator (they take part in the vote) but are never returned to
  anyone. So a member's full, ordered assignor list cannot be read from outside; what is known
  is the group's protocol (the vote), which every member offers.
* DescribeGroups carries no generation. Members that write Subscription V2+ (KIP-792: Java,
  librdkafka, aiogroup) or cooperative-sticky user data report the generation they held at
  their last join; the group's generation is one more than the highest of those.
* A member's rebalance protocol (KIP-429) is not on the wire either, but it shows: a COOPERATIVE
  member reports the partitions it owns when it rejoins (``owned_partitions``), an EAGER one
  revokes everything first and reports none. A member that held partitions in an earlier
  snapshot and then reports none runs EAGER; one that reports some runs COOPERATIVE.
* Apache Kafka 2.3.0 (and 2.3.1) put each member's *assignment* in the metadata field too
  (KAFKA-9150, fixed in 2.4 and 2.3.2). The two fields then hold the same bytes; the metadata is
  treated as missing, and the step is judged from the protocol and, when watching, from which
  members joined after the vote moved.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import AiogroupError, CodecError, error_for_code
from aiogroup.group_lag import GroupLag, group_lag_of, read_group_lag
from aiogroup.membership.leader import without_marks
from aiogroup.migration import CLASSIC, MEMBER_TYPES, migration_status
from aiogroup.protocol import decode_assignment, decode_subscription, generation_from_user_data
from aiogroup.protocol.types import (
    NO_GENERATION,
    Subscription,
    TopicPartition,
    group_by_topic,
    to_topic_partitions,
)

__all__ = [
    "Assessment",
    "GroupDescription",
    "GroupInspector",
    "GroupLag",
    "GroupWatch",
    "MemberDescription",
    "MemberMode",
    "RawMember",
    "Step",
    "Verdict",
    "assess",
    "describe_group",
    "format_partitions",
    "group_lag_of",
    "parse_group",
    "protocol_of",
]

Partitions = frozenset[TopicPartition]

#: Assignors whose user data carries a generation (Java's int32, or a sticky block).
_GENERATION_IN_USER_DATA = frozenset({"cooperative-sticky", "sticky"})


def protocol_of(assignor: str) -> RebalanceProtocol:
    """The rebalance protocol a group runs under ``assignor`` (KIP-429).

    Built-in and registered assignors answer from their ``supported_protocols``; an unknown
    name counts as COOPERATIVE when it says so (``cooperative-sticky`` of other clients), else
    EAGER.
    """
    from aiogroup.assignors.registry import get_assignor

    try:
        supported = get_assignor(assignor).supported_protocols
    except AiogroupError:
        return (
            RebalanceProtocol.COOPERATIVE
            if "cooperative" in assignor.lower()
            else RebalanceProtocol.EAGER
        )
    return max(supported)


def format_partitions(partitions: Partitions | None) -> str:
    """``orders[0,1] payments[2]``; ``-`` for none, ``?`` when unknown."""
    if partitions is None:
        return "?"
    if not partitions:
        return "-"
    return " ".join(
        f"{topic}[{','.join(map(str, ps))}]" for topic, ps in group_by_topic(partitions).items()
    )


# --------------------------------------------------------------------------- the snapshot


@dataclass(frozen=True, slots=True)
class RawMember:
    """One member as DescribeGroups lists it, bytes undecoded."""

    member_id: str
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """One member, with its metadata (for the group's protocol) and assignment decoded.

    ``subscription`` and ``assignment`` are None when the broker sent none (the group is not
    Stable, or the broker never sends them: Tansu) or they could not be decoded (``problem``
    says why; the rest of the group is still shown).
    """

    member_id: str
    client_id: str
    client_host: str
    group_instance_id: str | None
    subscription: Subscription | None
    assignment: Partitions | None
    problem: str | None = None
    #: A consumer-protocol member's epoch (KIP-848; None in a classic group).
    member_epoch: int | None = None
    #: The protocol the member speaks: "classic" or "consumer" (KIP-848's mixed groups:
    #: ConsumerGroupDescribe v1's MemberType, KIP-1099); None when the broker does not say.
    member_type: str | None = None
    #: A consumer group member's target assignment (KIP-848): what the broker is moving it to.
    target: Partitions | None = None
    #: The user data of the member's assignment in a classic group (None: none): a custom
    #: assignor's. Kafka 4.x refuses to convert a classic group to the consumer protocol while
    #: any member has some. (An aiogroup leader's marks are assignment entries, not user data.)
    assignment_user_data: bytes | None = None

    @property
    def pending_revocation(self) -> Partitions:
        """Partitions a consumer group member still owns that its target no longer has: it
        has yet to revoke them (KIP-848's reconciliation)."""
        if self.assignment is None or self.target is None:
            return frozenset()
        return self.assignment - self.target

    @property
    def owned(self) -> Partitions | None:
        """The partitions the member reported owning when it last joined (Subscription V1+)."""
        if self.subscription is None:
            return None
        return frozenset(to_topic_partitions(self.subscription.owned_partitions))

    def reported_generation(self, protocol: str | None) -> int | None:
        """The generation the member held when it last joined; None when it does not say.

        Subscription V2+ carries it (KIP-792); otherwise cooperative-sticky or sticky user data
        may (Java's int32, librdkafka's sticky block). -1 means the member held none (new).
        """
        sub = self.subscription
        if sub is None:
            return None
        if sub.version >= 2:
            return sub.generation_id
        if protocol in _GENERATION_IN_USER_DATA and sub.user_data:
            return generation_from_user_data(sub.user_data)
        return None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """The coordinator's answer for one group, decoded.

    ``protocol`` is the group's chosen assignor (None while it rebalances, when DescribeGroups
    names none); ``partitions`` the partition counts of the topics the members subscribe to (from
    a Metadata request; empty when unknown); ``api_version`` the DescribeGroups version used.
    """

    group_id: str
    state: str
    protocol_type: str
    protocol: str | None
    members: tuple[MemberDescription, ...]
    partitions: Mapping[str, int] = field(default_factory=dict)
    api_version: int = -1
    coordinator: str = ""
    #: ``"classic"`` (DescribeGroups) or ``"consumer"`` (a KIP-848 group, ConsumerGroupDescribe).
    group_type: str = "classic"
    #: A consumer group's epochs (KIP-848): the group's, and the one its assignment is for.
    group_epoch: int | None = None
    assignment_epoch: int | None = None

    @property
    def stable(self) -> bool:
        return self.state == "Stable"

    @property
    def consumer_protocol(self) -> bool:
        """A KIP-848 consumer group: the broker assigns, members reconcile (no eager steps)."""
        return self.group_type == "consumer"

    @property
    def exists(self) -> bool:
        """False for a group the coordinator does not know: Kafka describes an unknown group
        id as Dead with no members (a misspelt id reads the same)."""
        return bool(self.members) or self.state != "Dead"

    #: The broker sent each member's assignment in place of its metadata (KAFKA-9150).
    metadata_is_assignment: bool = False
    #: The group's lag from its committed offsets (None: not asked, ``describe(with_lag=True)``).
    lag: GroupLag | None = None

    @property
    def has_metadata(self) -> bool:
        """Whether the broker returned member metadata (Kafka does for a Stable group, except
        2.3.0-2.3.1, KAFKA-9150; Tansu never does)."""
        return any(m.subscription is not None or m.problem for m in self.members)

    @property
    def has_assignments(self) -> bool:
        """Whether the broker returned member assignments (Kafka does for a Stable group)."""
        return any(m.assignment is not None for m in self.members)

    @property
    def rebalance_protocol(self) -> RebalanceProtocol | None:
        """The classic group's rebalance protocol (None for a KIP-848 group: the broker
        assigns, and a member gives up only what moves)."""
        if self.consumer_protocol or not self.protocol:
            return None
        return protocol_of(self.protocol)

    @property
    def generation(self) -> int | None:
        """The group's generation: a consumer group's epoch as the broker tells it; in a classic
        group, inferred: one more than the highest generation a member reported at its last
        join (None when no member reports one, e.g. all new or V0/V1)."""
        if self.consumer_protocol:
            return self.group_epoch
        reported = [m.reported_generation(self.protocol) for m in self.members]
        known = [g for g in reported if g is not None and g > NO_GENERATION]
        return max(known) + 1 if known else None

    @property
    def topics(self) -> frozenset[str]:
        """Every topic a member subscribes to (or, without metadata, is assigned)."""
        subscribed = {
            t for m in self.members if m.subscription is not None for t in m.subscription.topics
        }
        assigned = {tp.topic for m in self.members for tp in (m.assignment or ())}
        return frozenset(subscribed | assigned)

    @property
    def all_partitions(self) -> Partitions:
        return frozenset(
            TopicPartition(t, p) for t, n in self.partitions.items() for p in range(n)
        )


def _decode_member(raw: RawMember, stable: bool) -> MemberDescription:
    subscription: Subscription | None = None
    assignment: Partitions | None = None
    user_data: bytes | None = None
    problems: list[str] = []
    if raw.metadata and raw.metadata == raw.assignment:
        pass  # KAFKA-9150: the broker sent the assignment as metadata; the metadata is unknown
    elif raw.metadata:
        try:
            subscription = decode_subscription(raw.metadata)
        except CodecError as exc:
            problems.append(f"metadata undecodable: {exc}")
    if raw.assignment:
        try:
            decoded = decode_assignment(raw.assignment)
            # An aiogroup leader's marks are entries without partitions (nothing assigned);
            # the user data is kept as Kafka sees it, an older leader's marks included.
            assignment = frozenset(to_topic_partitions(without_marks(decoded).partitions))
            user_data = decoded.user_data or None
        except CodecError as exc:
            problems.append(f"assignment undecodable: {exc}")
    elif stable and raw.metadata:
        assignment = frozenset()  # Stable with metadata: an empty assignment is "nothing"
    return MemberDescription(
        member_id=raw.member_id,
        client_id=raw.client_id,
        client_host=raw.client_host,
        group_instance_id=raw.group_instance_id,
        subscription=subscription,
        assignment=assignment,
        problem="; ".join(problems) or None,
        member_type=CLASSIC,  # DescribeGroups lists a classic group's members
        assignment_user_data=user_data,
    )


def parse_group(
    group_id: str,
    state: str,
    protocol_type: str,
    protocol: str | None,
    members: Sequence[RawMember],
    *,
    partitions: Mapping[str, int] | None = None,
    api_version: int = -1,
    coordinator: str = "",
) -> GroupDescription:
    """Decode one DescribeGroups group (pure: no I/O). Undecodable member bytes are reported
    per member, never raised."""
    stable = state == "Stable"
    swapped = bool(members) and all(m.metadata and m.metadata == m.assignment for m in members)
    decoded = tuple(sorted((_decode_member(m, stable) for m in members),
                           key=lambda m: (m.client_id, m.member_id)))
    return GroupDescription(
        group_id=group_id,
        state=state,
        protocol_type=protocol_type,
        protocol=protocol or None,
        members=decoded,
        partitions=dict(partitions or {}),
        api_version=api_version,
        coordinator=coordinator,
        metadata_is_assignment=swapped,
    )


#: DescribeGroups/ConsumerGroupDescribe: the coordinator has no such group (of that kind).
GROUP_ID_NOT_FOUND = 69


def _consumer_partitions(assignment: Any) -> Partitions:
    return frozenset(
        TopicPartition(str(tp.topic_name), int(p))
        for tp in (assignment.topic_partitions if assignment is not None else ())
        for p in tp.partitions
    )


def parse_consumer_group(
    group: Any, *, api_version: int = -1, coordinator: str = ""
) -> GroupDescription:
    """Decode one ConsumerGroupDescribe group (KIP-848; pure: no I/O)."""
    members = []
    for m in group.members or ():
        assigned = _consumer_partitions(m.assignment)
        topics = sorted(str(t) for t in (m.subscribed_topic_names or ()))
        members.append(
            MemberDescription(
                member_id=str(m.member_id or ""),
                client_id=str(m.client_id or ""),
                client_host=str(m.client_host or ""),
                group_instance_id=m.instance_id,
                subscription=Subscription(topics),
                assignment=assigned,
                member_epoch=int(m.member_epoch),
                member_type=MEMBER_TYPES.get(int(getattr(m, "member_type", -1))),
                target=_consumer_partitions(m.target_assignment),
            )
        )
    return GroupDescription(
        group_id=str(group.group_id),
        state=str(group.group_state or ""),
        protocol_type="consumer",
        protocol=str(group.assignor_name or "") or None,
        members=tuple(sorted(members, key=lambda m: (m.client_id, m.member_id))),
        api_version=api_version,
        coordinator=coordinator,
        group_type="consumer",
        group_epoch=int(group.group_epoch),
        assignment_epoch=int(group.assignment_epoch),
    )


# --------------------------------------------------------------------------- judging it


class Step(enum.Enum):
    """Where a group stands in a KIP-429 rolling upgrade (eager -> cooperative-sticky)."""

    EMPTY = "empty"
    UNKNOWN = "unknown"
    #: A KIP-848 consumer group: the broker assigns and members reconcile; no eager step.
    CONSUMER = "consumer"
    #: A KIP-848 consumer group some of whose members still speak the classic protocol
    #: (an online migration under way, docs/migration.md).
    MIXED = "mixed"
    #: The group's protocol is eager (range, ...): every member runs EAGER. Members may already
    #: offer cooperative-sticky (bounce 1 under way); from outside the two look the same.
    EAGER = "eager"
    #: The group's protocol is cooperative, and some members still run EAGER (their assignor
    #: lists still hold an eager assignor): bounce 2 under way.
    VOTE_MOVED = "vote-moved"
    #: Cooperative protocol and no member known to run EAGER.
    COOPERATIVE = "cooperative"


STEP_TEXT = {
    Step.EMPTY: "the group has no members",
    Step.UNKNOWN: "unknown",
    Step.EAGER: "eager: every member runs EAGER",
    Step.VOTE_MOVED: "the vote has moved: cooperative protocol, some members still EAGER",
    Step.COOPERATIVE: "cooperative",
    Step.CONSUMER: "the consumer protocol (KIP-848): the broker assigns, members reconcile",
    Step.MIXED: "a consumer group with classic members (KIP-848's online migration): the broker "
                "assigns every member",
}


class MemberMode(enum.Enum):
    """A member's rebalance protocol as far as the group shows it."""

    EAGER = "EAGER"
    COOPERATIVE = "COOPERATIVE"
    #: It reported no generation and no partitions: it joined with nothing.
    NEW = "new"
    #: It reports no owned partitions: EAGER, or it held none before this generation.
    UNCONFIRMED = "unconfirmed"
    UNKNOWN = "?"


class Verdict(enum.Enum):
    SAFE = "safe"
    WAIT = "wait"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Assessment:
    """What :func:`assess` concludes about one snapshot."""

    step: Step
    verdict: Verdict
    #: Why it is not safe (or cannot be told); empty when safe.
    reasons: tuple[str, ...]
    #: What to do next, in one or two sentences.
    advice: str
    modes: Mapping[str, MemberMode]
    #: Partitions of the subscribed topics that no member is assigned, and those assigned twice.
    unassigned: Partitions = frozenset()
    doubly_assigned: Partitions = frozenset()

    @property
    def safe(self) -> bool:
        return self.verdict is Verdict.SAFE

    @property
    def eager_members(self) -> list[str]:
        """Member ids known to run EAGER."""
        return sorted(m for m, mode in self.modes.items() if mode is MemberMode.EAGER)

    @property
    def step_text(self) -> str:
        """The step in words, saying how sure it is."""
        if self.step is Step.VOTE_MOVED and not self.eager_members:
            return ("the vote has moved: cooperative protocol; some members may still run "
                    "EAGER (not visible from one snapshot)")
        return STEP_TEXT[self.step]


def member_mode(
    member: MemberDescription,
    group: GroupDescription,
    held_before: Partitions | None = None,
    *,
    joined_since: bool = False,
) -> MemberMode:
    """The member's rebalance protocol as the snapshot shows it.

    ``held_before``: the partitions the member was seen holding in an earlier generation.
    ``joined_since``: it joined while the group was watched, so it has held nothing yet that it
    could have reported.
    """
    if group.rebalance_protocol is RebalanceProtocol.EAGER:
        return MemberMode.EAGER  # a member runs EAGER when any of its assignors is eager-only
    owned = member.owned
    if owned is None or group.rebalance_protocol is None:
        return MemberMode.UNKNOWN
    if owned:
        return MemberMode.COOPERATIVE  # only a cooperative member rejoins holding partitions
    if held_before:
        return MemberMode.EAGER  # it held partitions and rejoined reporting none: it revoked all
    if joined_since or member.reported_generation(group.protocol) == NO_GENERATION:
        return MemberMode.NEW
    return MemberMode.UNCONFIRMED


def _assess_consumer_group(group: GroupDescription, expected: int | None) -> Assessment:
    """A KIP-848 group, classic members or not: safe to bounce the next member once it is
    Stable, every member has reconciled to the group's epoch (nothing left to revoke or to
    receive), and every partition is assigned once."""
    reasons: list[str] = []
    if not group.stable:
        reasons.append(f"the group is {group.state}: the broker is assigning or members are "
                       "reconciling")
    behind = sorted(m.client_id or m.member_id for m in group.members
                    if m.member_epoch is not None and m.member_epoch != group.group_epoch)
    if behind:
        reasons.append(f"not reconciled to epoch {group.group_epoch} yet: {', '.join(behind)}")
    revoking = [f"{m.client_id or m.member_id} {format_partitions(m.pending_revocation)}"
                for m in group.members if m.pending_revocation]
    if revoking:
        reasons.append(f"still to revoke: {'; '.join(revoking)}")
    awaiting = [f"{m.client_id or m.member_id} {format_partitions(m.target - m.assignment)}"
                for m in group.members
                if m.target is not None and m.assignment is not None and m.target - m.assignment]
    if awaiting:
        reasons.append(f"still to receive: {'; '.join(awaiting)}")
    counts: Counter[TopicPartition] = Counter()
    for m in group.members:
        counts.update(m.assignment or ())
    doubly = frozenset(tp for tp, n in counts.items() if n > 1)
    unassigned = group.all_partitions - frozenset(counts)
    if doubly:
        reasons.append(f"assigned to two members: {format_partitions(doubly)}")
    if unassigned:
        reasons.append(f"assigned to nobody: {format_partitions(unassigned)}")
    if expected is not None and len(group.members) < expected:
        reasons.append(f"{len(group.members)} of {expected} members: a bounced member has not "
                       "rejoined yet")
    mixed = any(m.member_type == CLASSIC for m in group.members)
    advice = ("the broker assigns (KIP-848): bounce members one at a time, each once the group "
              "is Stable again")
    if mixed:
        advice += "; " + migration_status(group).advice
    return Assessment(
        Step.MIXED if mixed else Step.CONSUMER, Verdict.WAIT if reasons else Verdict.SAFE,
        tuple(reasons), advice, {}, unassigned=unassigned, doubly_assigned=doubly,
    )  # fmt: skip


def assess(
    group: GroupDescription,
    *,
    expected_members: int | None = None,
    held_before: Mapping[str, Partitions] | None = None,
    known_modes: Mapping[str, MemberMode] | None = None,
    joined_since: frozenset[str] = frozenset(),
    joined_after_vote: frozenset[str] | None = None,
) -> Assessment:
    """Say which upgrade step ``group`` is in and whether bouncing the next member is safe.

    ``expected_members``: how many members the group should have (a bounced member that has not
    rejoined makes it wait). ``held_before``: partitions each member id was seen holding in an
    earlier generation, ``known_modes`` what earlier snapshots established and ``joined_since``
    the member ids that joined while the group was watched (all from :class:`GroupWatch`);
    without them a member that reports no owned partitions stays ``unconfirmed`` (EAGER, or it
    held none before). ``joined_after_vote``: the members that joined after the vote moved to a
    cooperative protocol, as far as the watch knows (None: unknown); on a broker that shows no
    member metadata (KAFKA-9150) that is all there is to tell bounce 2 is done.
    """
    held_before = held_before or {}
    known_modes = known_modes or {}
    reasons: list[str] = []
    if not group.exists:
        return Assessment(
            Step.EMPTY, Verdict.UNKNOWN,
            (f"group {group.group_id!r} does not exist: the coordinator describes it as "
             f"{group.state} with no members",),
            "check the group id (and that the bootstrap servers are the group's cluster)", {},
        )
    if not group.members:
        # Never safe: a bounced member that has not come back leaves nobody consuming.
        missing = f" of {expected_members}" if expected_members else ""
        return Assessment(
            Step.EMPTY, Verdict.WAIT,
            (f"0{missing} members: nobody is consuming (the group is {group.state})",),
            "wait until the members have joined before bouncing the next one", {},
        )
    if group.consumer_protocol:
        return _assess_consumer_group(group, expected_members)
    if not group.stable:
        return Assessment(
            Step.UNKNOWN, Verdict.WAIT,
            (f"the group is rebalancing ({group.state})",),
            "wait until the group is Stable again before bouncing the next member (members' "
            "metadata and assignments are shown only while it is Stable)", {},
        )
    if not group.has_metadata and not group.has_assignments:
        return Assessment(
            Step.UNKNOWN, Verdict.UNKNOWN,
            ("the broker returned no member metadata and no assignments (Tansu does this), so "
             "neither the protocol step nor the assignment can be judged",),
            "use a broker that returns member metadata (Apache Kafka does) to follow the upgrade",
            {},
        )
    modes: dict[str, MemberMode] = {}
    for m in group.members:
        mode = member_mode(m, group, held_before.get(m.member_id),
                           joined_since=m.member_id in joined_since)
        earlier = known_modes.get(m.member_id)
        if mode in (MemberMode.UNCONFIRMED, MemberMode.NEW, MemberMode.UNKNOWN) and earlier in (
            MemberMode.EAGER, MemberMode.COOPERATIVE
        ):
            mode = earlier  # a member's assignor list does not change without a restart
        modes[m.member_id] = mode

    # The assignment: every partition of the subscribed topics exactly once.
    counts: Counter[TopicPartition] = Counter()
    undecoded = [m for m in group.members if m.assignment is None]
    for m in group.members:
        counts.update(m.assignment or ())
    doubly = frozenset(tp for tp, n in counts.items() if n > 1)
    unassigned = group.all_partitions - frozenset(counts)
    for m in group.members:
        if m.problem:
            reasons.append(f"{m.client_id or m.member_id}: {m.problem}")
    if undecoded and not any(m.problem for m in undecoded):
        reasons.append(f"{len(undecoded)} member(s) without an assignment")
    if doubly:
        reasons.append(f"assigned to two members: {format_partitions(doubly)}")
    if unassigned:
        reasons.append(f"assigned to nobody: {format_partitions(unassigned)}")
    if expected_members is not None and len(group.members) < expected_members:
        reasons.append(
            f"{len(group.members)} of {expected_members} members: a bounced member has not "
            "rejoined yet"
        )

    if group.metadata_is_assignment:
        reasons_note = (
            "this broker returns each member's assignment in place of its metadata (KAFKA-9150, "
            "Apache Kafka 2.3.0-2.3.1): owned partitions, generations and member protocols "
            "cannot be read"
        )
    else:
        reasons_note = (
            "some members' metadata is missing: their rebalance protocol cannot be read"
        )
    protocol = group.protocol or "?"
    unseen = sorted(
        m.client_id or m.member_id for m in group.members
        if modes[m.member_id] is MemberMode.UNKNOWN
        and (joined_after_vote is None or m.member_id not in joined_after_vote)
    )
    eager = sorted(m.client_id or mid for mid, mode in modes.items() if mode is MemberMode.EAGER)
    # Members that may run EAGER: no owned partitions reported, no history, and something
    # assigned now (one that holds nothing matters to no bounce).
    unconfirmed = sorted(
        m.client_id or m.member_id for m in group.members
        if modes[m.member_id] is MemberMode.UNCONFIRMED and m.assignment
    )
    if group.rebalance_protocol is RebalanceProtocol.EAGER:
        step = Step.EAGER
        advice = (
            f"bounce members with cooperative-sticky first and {protocol} kept "
            f"([cooperative-sticky, {protocol}]); do not remove {protocol} from any member until "
            "the vote has moved to cooperative-sticky (a member offering only cooperative-sticky "
            f"cannot join while another offers only {protocol}: INCONSISTENT_GROUP_PROTOCOL)"
        )
    elif eager or unconfirmed or unseen:
        step = Step.VOTE_MOVED
        advice = f"every member offers {protocol}"
        if unseen:
            advice += (
                f"; {reasons_note}: bounce each member that was running when the vote moved "
                f"with [{protocol}] alone (`aiogroup group watch` counts the members that "
                "joined after the vote moved)"
            )
        if eager:
            advice += (
                f": bounce the members still running EAGER ({', '.join(eager)}) with "
                f"[{protocol}] alone"
            )
        if unconfirmed:
            advice += (
                f"; {', '.join(unconfirmed)} reported no owned partitions when they joined: "
                "EAGER (bounce them too), or cooperative members that held nothing before "
                "this generation (`aiogroup group watch` tells them apart)"
            )
    else:
        step = Step.COOPERATIVE
        advice = "the group is cooperative; bounces now move only the partitions they must"
        if any(mode is MemberMode.UNKNOWN for mode in modes.values()):
            advice += (
                f" (judged from the restarts alone: {reasons_note}, and every member joined "
                "after the vote moved)"
            )
    verdict = Verdict.WAIT if reasons else Verdict.SAFE
    return Assessment(step, verdict, tuple(reasons), advice, modes, unassigned, doubly)


# --------------------------------------------------------------------------- following it


@dataclass
class GroupWatch:
    """Follows a group from snapshot to snapshot (sans-I/O: feed it :class:`GroupDescription`).

    It remembers what each member id held in earlier generations (which shows EAGER members
    once the vote has moved), the modes established, the largest group seen (the expected size
    unless ``expected_members`` is given) and the members that joined since the watch began.
    """

    expected_members: int | None = None
    modes: dict[str, MemberMode] = field(default_factory=dict)
    first_members: frozenset[str] | None = None
    seen_members: set[str] = field(default_factory=set)
    largest: int = 0
    last: GroupDescription | None = None
    last_assessment: Assessment | None = None
    last_step: Step | None = None
    #: What each member held in the generations before the current one, and in the current.
    _held_before: dict[str, Partitions] = field(default_factory=dict)
    _held_now: dict[str, Partitions] = field(default_factory=dict)
    _now: Any = None
    #: The members present when the watch saw the vote move to a cooperative protocol (or saw
    #: it cooperative first).
    _at_vote: frozenset[str] | None = None
    #: Some snapshot showed an eager protocol, or a member known to run EAGER: the group is
    #: (or was, while watched) in a rolling upgrade.
    saw_eager: bool = False

    def upgrading(self, a: Assessment) -> bool:
        """Whether upgrade steps are worth telling: an eager protocol or an EAGER member was
        seen. A group cooperative throughout the watch is told as it is, without steps."""
        return self.saw_eager or bool(a.eager_members) or a.step is Step.EAGER

    @property
    def restarted(self) -> int:
        """Members that joined since the watch began (a bounce is a leave and a join)."""
        if self.first_members is None:
            return 0
        return len(self.seen_members - self.first_members)

    @staticmethod
    def _generation_key(group: GroupDescription) -> Any:
        """What tells one generation from the next: its number where members report one, else
        what they reported at the join and were assigned (a new join changes it)."""
        if group.generation is not None:
            return group.generation
        return tuple((m.member_id, m.owned, m.assignment) for m in group.members)

    def observe(self, group: GroupDescription) -> Assessment:
        shown = group.stable and (group.has_metadata or group.has_assignments)
        ids = frozenset(m.member_id for m in group.members)
        if (shown and group.rebalance_protocol is RebalanceProtocol.COOPERATIVE
              and self._at_vote is None):
            # The vote has moved: by the time of this snapshot, or (first snapshot) before the
            # watch began. Either way every member here, and in the last snapshot, may have
            # been running before it moved; members that join from now on joined after it.
            before = self.last.members if self.last is not None else ()
            self._at_vote = ids | frozenset(m.member_id for m in before)
        if shown:
            key = self._generation_key(group)
            if key != self._now:
                self._held_before.update(self._held_now)
                self._held_now = {}
                self._now = key
        self.seen_members |= ids
        if group.stable:
            self.largest = max(self.largest, len(ids))
        joined = frozenset() if self.first_members is None else ids - self.first_members
        result = assess(group, expected_members=self.expected_members or (self.largest or None),
                        held_before=self._held_before, known_modes=self.modes,
                        joined_since=joined,
                        joined_after_vote=None if self._at_vote is None else ids - self._at_vote)
        if shown:
            if self.first_members is None:
                self.first_members = ids
            for m in group.members:
                if m.assignment is not None:
                    self._held_now[m.member_id] = m.assignment
            for mid, mode in result.modes.items():
                if mode in (MemberMode.EAGER, MemberMode.COOPERATIVE):
                    self.modes[mid] = mode
            if group.rebalance_protocol is RebalanceProtocol.EAGER or result.eager_members:
                self.saw_eager = True
        if result.step is Step.UNKNOWN and self.last_step is not None and not group.stable:
            # While the group rebalances nothing is shown; the step is the last one known.
            result = Assessment(self.last_step, result.verdict, result.reasons, result.advice,
                                result.modes)
        elif result.step is not Step.UNKNOWN:
            self.last_step = result.step
        self.last = group
        self.last_assessment = result
        return result


# --------------------------------------------------------------------------- the wire


class GroupInspector:
    """Reads a group's state from its coordinator; one connection pool for many snapshots.

    ``client_options`` go to aiokafka's client as for :class:`~aiogroup.GroupMember`
    (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ``sasl_plain_username``,
    ``sasl_plain_password``, ...).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        group_id: str,
        *,
        client_id: str = "aiogroup-admin",
        request_timeout_ms: int = 10_000,
        **client_options: Any,
    ) -> None:
        from aiogroup.client.transport import Transport

        self.group_id = group_id
        self._transport = Transport(
            bootstrap_servers,
            group_id,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            **client_options,
        )

    async def start(self) -> GroupInspector:
        await self._transport.start()
        return self

    async def close(self) -> None:
        await self._transport.close()

    async def __aenter__(self) -> GroupInspector:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def describe(
        self, *, with_partitions: bool = True, with_lag: bool = False
    ) -> GroupDescription:
        """One snapshot of the group. Raises a retriable error when the coordinator cannot be
        reached (it is looked up again on the next call). ``with_lag``: the group's lag too
        (:meth:`lag`: OffsetFetch to the coordinator, ListOffsets to the leaders)."""
        described = await self._describe(with_partitions)
        if with_lag and described.exists:
            described = dataclasses.replace(described, lag=await self.lag(described))
        return described

    async def lag(self, described: GroupDescription) -> GroupLag:
        """The lag of the group ``described`` is a snapshot of, as ``kafka-consumer-groups
        --describe`` computes it (:func:`aiogroup.group_lag.read_group_lag`)."""
        return await read_group_lag(self._transport, self.group_id, described.members)

    async def _describe(self, with_partitions: bool) -> GroupDescription:
        from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

        from aiogroup.client.transport import COORDINATOR_ERRORS, Request

        group_id = self.group_id
        transport = self._transport

        def build(version: int) -> Any:
            return DescribeGroupsRequest(groups=[group_id], include_authorized_operations=False)

        request = Request("DescribeGroups", DescribeGroupsRequest, DescribeGroupsResponse, build)
        response = await transport.send_to_coordinator(request)
        if len(response.groups) != 1:
            from aiogroup.errors import RemoteProtocolError

            raise RemoteProtocolError(
                f"DescribeGroups answered {len(response.groups)} groups for one"
            )
        g = response.groups[0]
        node = transport.coordinator_id
        coordinator = ""
        if node is not None:
            address = transport.address(node)
            if address is not None:
                coordinator = f"{address} (node {node})"
        unknown = g.error_code == GROUP_ID_NOT_FOUND or (
            not g.error_code and g.group_state == "Dead" and not g.members
        )
        if unknown:
            # Kafka 4.x: a KIP-848 consumer group is no classic group, and DescribeGroups
            # calls it Dead (or not found). ConsumerGroupDescribe sees it as it is.
            consumer = await self._describe_consumer_group(coordinator)
            if consumer is not None:
                return await self._with_partitions(consumer, with_partitions)
        if g.error_code:
            if g.error_code in COORDINATOR_ERRORS:
                transport.coordinator_dead()
            raise error_for_code(int(g.error_code), f"DescribeGroups {group_id!r} failed")
        raw = [
            RawMember(
                member_id=str(m.member_id or ""),
                client_id=str(m.client_id or ""),
                client_host=str(m.client_host or ""),
                metadata=bytes(m.member_metadata or b""),
                assignment=bytes(m.member_assignment or b""),
                group_instance_id=getattr(m, "group_instance_id", None),
            )
            for m in (g.members or ())
        ]
        described = parse_group(
            group_id,
            str(g.group_state or ""),
            str(g.protocol_type or ""),
            str(g.protocol_data or "") or None,
            raw,
            api_version=request.version,
            coordinator=coordinator,
        )
        return await self._with_partitions(described, with_partitions)

    async def _with_partitions(
        self, described: GroupDescription, with_partitions: bool
    ) -> GroupDescription:
        if with_partitions and described.topics:
            counts = await self._transport.partitions_per_topic(sorted(described.topics))
            described = dataclasses.replace(described, partitions=counts)
        return described

    async def _describe_consumer_group(self, coordinator: str) -> GroupDescription | None:
        """The group as ConsumerGroupDescribe (KIP-848) sees it; None when the broker has no
        such API (before Kafka 3.7) or no consumer group of that id."""
        from aiogroup.client.transport import COORDINATOR_ERRORS, Request
        from aiogroup.errors import UnsupportedApiVersionError
        from aiogroup.protocol.messages import (
            ConsumerGroupDescribeRequest,
            ConsumerGroupDescribeResponse,
        )

        group_id = self.group_id
        transport = self._transport

        def build(version: int) -> Any:
            return ConsumerGroupDescribeRequest(
                group_ids=[group_id], include_authorized_operations=False
            )

        request = Request(
            "ConsumerGroupDescribe", ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
            build,
        )  # fmt: skip
        try:
            response = await transport.send_to_coordinator(request)
        except UnsupportedApiVersionError:
            return None
        groups = list(response.groups or ())
        if len(groups) != 1 or groups[0].error_code == GROUP_ID_NOT_FOUND:
            return None
        g = groups[0]
        if g.error_code:
            if g.error_code in COORDINATOR_ERRORS:
                transport.coordinator_dead()
            raise error_for_code(int(g.error_code), f"ConsumerGroupDescribe {group_id!r} failed")
        return parse_consumer_group(g, api_version=request.version, coordinator=coordinator)


async def describe_group(
    bootstrap_servers: str | Sequence[str],
    group_id: str,
    *,
    request_timeout_ms: int = 10_000,
    with_lag: bool = False,
    **client_options: Any,
) -> GroupDescription:
    """One snapshot of ``group_id`` (see :class:`GroupInspector`), bounded by the timeout."""
    inspector = GroupInspector(
        bootstrap_servers, group_id, request_timeout_ms=request_timeout_ms, **client_options
    )
    await inspector.start()
    try:
        return await asyncio.wait_for(
            inspector.describe(with_lag=with_lag), 3 * request_timeout_ms / 1000
        )
    finally:
        await inspector.close()
