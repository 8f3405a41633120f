"""A KIP-848 consumer group and its members, as Kafka 4.1's group coordinator keeps them.

Sans-I/O and clock-free. :class:`ConsumerGroupMember` is one member's record (an immutable
value, replaced as a whole, as Kafka's ``ConsumerGroupMember`` is rebuilt): its subscription,
its member epoch and the epoch before it, its reconciliation state, the partitions it owns and
those it still has to revoke. :class:`ConsumerGroup` holds the group epoch, the target
assignment and its epoch, the members, and what Kafka derives from them on every update
(``ConsumerGroup.updateMember``): who owns each partition at which epoch, the static members
by instance id, how many members subscribe to each topic name and regular expression, the
server assignors they ask for, and the group's state (Empty, Assigning, Reconciling, Stable).

:func:`reconcile` is Kafka's ``CurrentAssignmentBuilder``: it moves one member towards its
target assignment. A partition still owned by another member (its epoch in
``partition_epochs``) is not given yet (``UNRELEASED_PARTITIONS``); a member that must revoke
stays at its epoch (``UNREVOKED_PARTITIONS``) until its heartbeat no longer reports those
partitions, then takes the next epoch. So a partition reaches its new owner only after its old
owner acknowledged the revocation.

Topic ids are ``uuid.UUID``; an assignment maps a topic id to a frozenset of partitions.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from aiogroup.errors import LocalProtocolError
from aiogroup.testing.embedded.consumer_messages import TopicMetadata
from aiogroup.testing.embedded.hashorder import java_string_hash
from aiogroup.testing.embedded.server_assignors import Assignment

__all__ = [
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "InvalidRegexError",
    "MemberState",
    "ResolvedRegex",
    "TimelineOrder",
    "compile_topic_regex",
    "owned_is_subset",
    "reconcile",
]

#: ConsumerGroupHeartbeat's member epochs for a leave: a dynamic member's (or a static member
#: leaving for good) and a static member's that will be back within its session.
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

#: Owned partitions as a heartbeat reports them: (topic id, partitions) pairs, or None for
#: "unchanged" (not sent).
Owned = Sequence[tuple[uuid.UUID, Sequence[int]]] | None


class MemberState(Enum):
    """Where a member is in its reconciliation (Kafka's ``MemberState``)."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(Enum):
    """A consumer group's state as DescribeGroups and ListGroups spell it."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """What a member using the classic protocol in a consumer group keeps of its JoinGroup:
    its session timeout and its protocols (name, metadata), in order."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True, eq=True)
class ConsumerGroupMember:
    """One member of a consumer group, Kafka's ``ConsumerGroupMember``: replaced whole with
    ``dataclasses.replace``, compared by value (a changed record is what Kafka persists).

    ``subscribed_topic_regex`` is ``""`` when there is none (Kafka's default).
    ``classic`` is set for a member that joined with JoinGroup (a mixed group)."""

    member_id: str
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: frozenset[str] = frozenset()
    subscribed_topic_regex: str = ""
    server_assignor: str | None = None
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMemberMetadata | None = None

    __hash__ = None  # type: ignore[assignment]  # a record with mappings inside

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerGroupMember:
        """``Builder.updateMemberEpoch``: the current epoch becomes the previous one."""
        return dataclasses.replace(
            self,
            member_epoch=epoch,
            previous_member_epoch=self.member_epoch,
            **changes,  # type: ignore[arg-type]
        )


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """A regular expression resolved against the topics (``ResolvedRegularExpression``): the
    topic names it matched, the metadata version and the time (seconds) of the resolution."""

    topics: frozenset[str]
    version: int
    resolved_at: float


class InvalidRegexError(ValueError):
    """A SubscribedTopicRegex RE2/J would not compile (INVALID_REGULAR_EXPRESSION)."""


#: Constructs RE2 (so RE2/J) refuses that Python's ``re`` would take, in a pattern whose
#: escapes were blanked out, with RE2/J's description of each: lookaround, atomic groups,
#: named backreferences and conditionals; possessive repeats.
_NOT_RE2 = (
    (re.compile(r"\(\?(?:[=!>]|<[=!]|P=|\()"), "invalid or unsupported Perl syntax"),
    (re.compile(r"[*+?}]\+"), "invalid nested repetition operator"),
)

#: RE2 refuses a repeat count above this; ``x{n}``, ``x{n,}``, ``x{n,m}``.
RE2_MAX_REPEAT = 1000
_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}")

#: Python's ``re.error`` messages as RE2/J's ``PatternSyntaxException`` describes the same
#: mistakes (what Kafka's INVALID_REGULAR_EXPRESSION message quotes).
_RE2_DESCRIPTIONS = (
    ("missing ), unterminated subpattern", "missing closing )"),
    ("unbalanced parenthesis", "regexp/syntax: internal error"),  # RE2/J's own words
    ("unterminated character set", "missing closing ]"),
    ("nothing to repeat", "missing argument to repetition operator"),
    ("multiple repeat", "invalid nested repetition operator"),
    ("bad character range", "invalid character class range"),
    ("bad escape (end of pattern)", "trailing backslash at end of expression"),
    ("bad escape", "invalid escape sequence"),
    ("unknown extension", "invalid or unsupported Perl syntax"),
    ("unexpected end of pattern", "missing argument to repetition operator"),
)


def compile_topic_regex(pattern: str) -> re.Pattern[str]:
    """Compile a SubscribedTopicRegex (RE2/J syntax) with Python's ``re``, for the subset both
    read alike (what aiogroup's client sends, :func:`aiogroup.membership.regex.to_re2`):
    ``\\z`` becomes ``\\Z``; what RE2 lacks (the constructs above, ``\\Z``, numbered
    backreferences) is an :class:`InvalidRegexError` carrying RE2/J's description, as its
    ``PatternSyntaxException`` does. The pattern must match a whole topic name."""
    out: list[str] = []
    blanked: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            if nxt == "Z" or nxt in "123456789":
                raise InvalidRegexError("invalid escape sequence")
            out.append(r"\Z" if nxt == "z" else ch + nxt)
            blanked.append("_")
            i += 2
            continue
        if pattern.startswith("(?<", i) and pattern[i + 3 : i + 4].isalpha():
            out.append("(?P<")  # RE2's named group, in Python's spelling
            blanked.append("(?P<")
            i += 3
            continue
        out.append(ch)
        blanked.append(ch)
        i += 1
    scan = "".join(blanked)
    for construct, description in _NOT_RE2:
        if construct.search(scan):
            raise InvalidRegexError(description)
    for repeat in _REPEAT.finditer(scan):
        if any(int(n) > RE2_MAX_REPEAT for n in repeat.groups() if n):
            raise InvalidRegexError("invalid repeat count")
    try:
        return re.compile("".join(out))
    except re.error as exc:
        message = str(exc.msg)
        for python, re2 in _RE2_DESCRIPTIONS:
            if message.startswith(python):
                raise InvalidRegexError(re2) from exc
        raise InvalidRegexError(message) from exc


def owned_is_subset(owned: Owned, assigned: Assignment) -> bool:
    """``isSubset``: every reported partition is in ``assigned`` (False when not reported)."""
    if owned is None:
        return False
    for topic_id, partitions in owned:
        mine = assigned.get(topic_id)
        if mine is None:
            return False
        if any(p not in mine for p in partitions):
            return False
    return True


def _owns_any(owned: Owned, partitions: Assignment) -> bool:
    """``ownsRevokedPartitions``: the heartbeat still reports one of ``partitions`` (True when
    it reports nothing: the member has not told us it revoked them)."""
    if owned is None:
        return True
    return any(p in partitions.get(topic_id, frozenset()) for topic_id, ps in owned for p in ps)


def reconcile(
    member: ConsumerGroupMember,
    *,
    assignment_epoch: int,
    target: Assignment,
    partition_epoch: Mapping[tuple[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerGroupMember:
    """``CurrentAssignmentBuilder.build``: the member's next state towards ``target``."""
    if member.state is MemberState.STABLE:
        if member.member_epoch != assignment_epoch:
            return _next_assignment(member, member.member_epoch, target, assignment_epoch,
                                    partition_epoch, owned)  # fmt: skip
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        # Everything asked for is revoked: the member moves to the next epoch.
        return _next_assignment(member, member.member_epoch + 1, target, assignment_epoch,
                                partition_epoch, owned)  # fmt: skip
    # UNRELEASED_PARTITIONS: take what was released meanwhile.
    return _next_assignment(member, member.member_epoch, target, assignment_epoch,
                            partition_epoch, owned)  # fmt: skip


def _next_assignment(
    member: ConsumerGroupMember,
    epoch: int,
    target: Assignment,
    assignment_epoch: int,
    partition_epoch: Mapping[tuple[uuid.UUID, int], int],
    owned: Owned,
) -> ConsumerGroupMember:
    """``computeNextAssignment``: keep what is in both, revoke what left the target, add what
    is new and free; a partition another member still owns waits."""
    assigned: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    add: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        gone = current - keep
        new = wanted - keep
        free = frozenset(p for p in new if partition_epoch.get((topic_id, p), -1) == -1)
        unreleased = unreleased or free != new
        if keep:
            assigned[topic_id] = keep
        if gone:
            revoke[topic_id] = gone
        if free:
            add[topic_id] = free
    if revoke and _owns_any(owned, revoke):
        # Revoke first, at the current epoch; nothing is added until that is acknowledged.
        return member.with_epoch(
            epoch,
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoke,
        )
    for topic_id, partitions in add.items():
        assigned[topic_id] = assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(
        assignment_epoch, state=state, assigned=assigned, pending_revocation={}
    )


class TimelineOrder:
    """The iteration order of Kafka's ``TimelineHashMap`` (``BaseHashTable``), which holds a
    consumer group's members: Fibonacci hashing of ``hashCode`` into a power-of-two table
    (from 2 slots, doubled once 3/4 full, rehashed slot by slot), colliding keys appended to
    their slot's array, and iteration slot by slot, each slot's array from its end. The server
    assignors see the members in this order (their ``java.util.HashMap`` is filled from it)."""

    _FIBONACCI = -7046029254386353131 & 0xFFFFFFFFFFFFFFFF

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self._slots: list[list[str]] = [[], []]
        self._keys: set[str] = set()
        for key in keys:
            self.put(key)

    @classmethod
    def _slot(cls, key: str, size: int) -> int:
        h = java_string_hash(key)
        signed = h - (1 << 32) if h & 0x80000000 else h
        return ((signed * cls._FIBONACCI) & 0xFFFFFFFFFFFFFFFF) >> (65 - size.bit_length())

    def put(self, key: str) -> None:
        # The table grows before the key is looked for: replacing a key may grow it too.
        if (len(self._keys) + 1) * 0.75 > len(self._slots):
            old, self._slots = self._slots, [[] for _ in range(len(self._slots) * 2)]
            for slot in old:
                for moved in slot:
                    self._slots[self._slot(moved, len(self._slots))].append(moved)
        if key in self._keys:
            return  # replaced in place
        self._slots[self._slot(key, len(self._slots))].append(key)
        self._keys.add(key)

    def remove(self, key: str) -> None:
        if key in self._keys:
            self._keys.discard(key)
            self._slots[self._slot(key, len(self._slots))].remove(key)

    def __iter__(self) -> Iterator[str]:
        return iter([key for slot in self._slots for key in reversed(slot)])

    def __len__(self) -> int:
        return len(self._keys)


@dataclass(eq=False)
class ConsumerGroup:
    """A consumer group, Kafka's ``ConsumerGroup``: :meth:`update_member` and
    :meth:`remove_member` keep everything derived from the members consistent."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerGroupMember] = field(default_factory=dict)
    #: member id -> its target assignment (``targetAssignment``).
    target: dict[str, Assignment] = field(default_factory=dict)
    #: member id -> topic id -> the target's partitions in the order Kafka's set holds them.
    target_order: dict[str, dict[uuid.UUID, tuple[int, ...]]] = field(default_factory=dict)
    #: (topic id, partition) -> the member the target gives it (``invertedTargetAssignment``).
    target_owner: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    #: (topic id, partition) -> the epoch of its current owner (``currentPartitionEpoch``).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    #: topic name -> members subscribed to it by name.
    subscribed_names: Counter[str] = field(default_factory=Counter)
    #: regular expression -> members subscribed to it.
    subscribed_regexes: Counter[str] = field(default_factory=Counter)
    resolved_regexes: dict[str, ResolvedRegex] = field(default_factory=dict)
    server_assignors: Counter[str] = field(default_factory=Counter)
    #: What the subscribed topics looked like at the last epoch bump (Kafka's metadata hash).
    metadata_hash: frozenset[TopicMetadata] = frozenset()
    #: A subscribed topic changed since: the next heartbeat recomputes the hash.
    metadata_refresh: bool = False
    #: The members in the order Kafka's ``TimelineHashMap`` iterates them.
    member_order: TimelineOrder = field(default_factory=TimelineOrder)

    # --- state ----------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        """``maybeUpdateGroupState``: Empty, Assigning (the group epoch is ahead of the target
        assignment), Reconciling (a member is not at the target yet), or Stable."""
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def static_member(self, instance_id: str | None) -> ConsumerGroupMember | None:
        if instance_id is None:
            return None
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members[member_id]

    def target_of(self, member_id: str, instance_id: str | None = None) -> Assignment:
        """``targetAssignment(memberId, instanceId)``: a static member's is its instance's."""
        if instance_id is not None:
            previous = self.static_members.get(instance_id)
            return self.target.get(previous, {}) if previous is not None else {}
        return self.target.get(member_id, {})

    def preferred_assignor(self, counts: Counter[str] | None = None) -> str | None:
        """``computePreferredServerAssignor``: the name the most members ask for (ties: the
        first counted, as Java's stream ``max`` over a HashMap keeps the first maximum)."""
        counts = self.server_assignors if counts is None else counts
        best: tuple[int, str] | None = None
        for name, count in counts.items():
            if count > 0 and (best is None or count > best[0]):
                best = (count, name)
        return None if best is None else best[1]

    def subscribed_topics(
        self, names: Counter[str] | None = None, regexes: Iterable[str] | None = None
    ) -> set[str]:
        """Every topic name some member subscribes to, by name or through a resolved regex."""
        names = self.subscribed_names if names is None else names
        regexes = self.subscribed_regexes if regexes is None else regexes
        out = {n for n, c in names.items() if c > 0}
        for regex in regexes:
            resolved = self.resolved_regexes.get(regex)
            if resolved is not None:
                out |= resolved.topics
        return out

    def member_topics(self, member: ConsumerGroupMember) -> set[str]:
        """The topic names ``member`` subscribes to: its names and its resolved regex (an
        unresolved one matches nothing yet)."""
        out = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            resolved = self.resolved_regexes.get(member.subscribed_topic_regex)
            if resolved is not None:
                out |= resolved.topics
        return out

    def is_homogeneous(self, names: Counter[str], regexes: Counter[str], member_count: int) -> bool:
        """``ConsumerGroup.subscriptionType``: everyone on the same names, or everyone on the
        one same regex and nothing else."""
        live = {r: c for r, c in regexes.items() if c > 0}
        if not live:
            return all(c == member_count for c in names.values() if c > 0)
        if next(iter(live.values())) != member_count:
            return False
        by_regex: Counter[str] = Counter()
        for regex in live:
            resolved = self.resolved_regexes.get(regex)
            for topic in resolved.topics if resolved is not None else ():
                by_regex[topic] += 1
        topics = {t for t, c in names.items() if c > 0} | set(by_regex)
        return all(by_regex[t] == 1 and names.get(t, 0) == 0 for t in topics)

    # --- updates (ConsumerGroup.updateMember / removeMember) --------------------------------

    def update_member(self, member: ConsumerGroupMember) -> None:
        old = self.members.get(member.member_id)
        self.members[member.member_id] = member
        self.member_order.put(member.member_id)
        self._count(old, -1)
        self._count(member, +1)
        self._release(old)
        self._own(member)
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerGroupMember | None:
        old = self.members.pop(member_id, None)
        if old is None:
            return None
        self.member_order.remove(member_id)
        self._count(old, -1)
        self._release(old)
        if old.instance_id is not None and self.static_members.get(old.instance_id) == member_id:
            del self.static_members[old.instance_id]
        self.set_target(member_id, None)
        return old

    def set_target(
        self,
        member_id: str,
        assignment: Assignment | None,
        order: Mapping[uuid.UUID, tuple[int, ...]] | None = None,
    ) -> None:
        """``updateTargetAssignment`` / ``removeTargetAssignment`` with the inverted index;
        ``order``: each partition set's order as Kafka holds it (the assignor's)."""
        old = self.target.pop(member_id, {})
        self.target_order.pop(member_id, None)
        for topic_id, partitions in old.items():
            for p in partitions:
                if self.target_owner.get((topic_id, p)) == member_id:
                    del self.target_owner[(topic_id, p)]
        if assignment is None:
            return
        self.target[member_id] = assignment
        if order is not None:
            self.target_order[member_id] = dict(order)
        for topic_id, partitions in assignment.items():
            for p in partitions:
                self.target_owner[(topic_id, p)] = member_id

    def _count(self, member: ConsumerGroupMember | None, delta: int) -> None:
        if member is None:
            return
        for name in member.subscribed_topic_names:
            self.subscribed_names[name] += delta
            if self.subscribed_names[name] <= 0:
                del self.subscribed_names[name]
        if member.subscribed_topic_regex:
            regex = member.subscribed_topic_regex
            self.subscribed_regexes[regex] += delta
            if self.subscribed_regexes[regex] <= 0:
                del self.subscribed_regexes[regex]
        if member.server_assignor:
            self.server_assignors[member.server_assignor] += delta
            if self.server_assignors[member.server_assignor] <= 0:
                del self.server_assignors[member.server_assignor]

    def _release(self, member: ConsumerGroupMember | None) -> None:
        if member is None:
            return
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    epoch = self.partition_epochs.pop((topic_id, p), None)
                    if epoch != member.member_epoch:
                        raise LocalProtocolError(
                            f"partition {topic_id}-{p} was owned at epoch {epoch}, "
                            f"not {member.member_epoch} ({member.member_id})"
                        )

    def _own(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, partitions in assignment.items():
                for p in partitions:
                    if (topic_id, p) in self.partition_epochs:
                        raise LocalProtocolError(
                            f"partition {topic_id}-{p} is still owned at epoch "
                            f"{self.partition_epochs[(topic_id, p)]} ({member.member_id})"
                        )
                    self.partition_epochs[(topic_id, p)] = member.member_epoch
