"""The in-memory model of one classic group: members, states, the protocol vote.

Pure data and rules, no timers and no callbacks invoked here (the coordinator decides when a
parked JoinGroup/SyncGroup answer is delivered). Follows Kafka's ``GroupMetadata.scala`` /
``MemberMetadata.scala`` (2.x-3.x) and ``ClassicGroup`` / ``ClassicGroupMember`` (3.7+).

Members live in a :class:`MemberMap` that iterates in the order of the coordinator flavour's
hash map (:mod:`aiogroup.testing.embedded.hashorder`): Kafka never sorts members, so the member
list in
the leader's JoinGroup answer, the next leader and the vote's tie-break all follow it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from aiogroup.errors import LocalProtocolError
from aiogroup.testing.embedded.hashorder import FLAVOUR_MAPS, KeyOrder, vote_order

FLAVOURS = tuple(FLAVOUR_MAPS)


def _first_max(order: list[str], votes: list[str]) -> str:
    """The first name of ``order`` with the most votes (every version keeps the first max)."""
    counts = {name: votes.count(name) for name in votes}
    best = order[0]
    for name in order[1:]:
        if counts[name] > counts[best]:
            best = name
    return best

__all__ = ["ClassicGroup", "Member", "MemberMap", "State"]


class State(StrEnum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's ``validPreviousStates`` (GroupMetadata.scala / ClassicGroupState.java): the states a
# group may come FROM to enter the key state. Anything else is a coordinator bug.
VALID_PREVIOUS_STATES: dict[State, frozenset[State]] = {
    State.DEAD: frozenset(State),
    State.COMPLETING_REBALANCE: frozenset({State.PREPARING_REBALANCE}),
    State.STABLE: frozenset({State.COMPLETING_REBALANCE}),
    State.PREPARING_REBALANCE: frozenset({State.STABLE, State.COMPLETING_REBALANCE, State.EMPTY}),
    State.EMPTY: frozenset({State.PREPARING_REBALANCE}),
}

# A parked JoinGroup/SyncGroup answer: any one-argument callable (typed by the coordinator).
Callback = Callable[[Any], None]


@dataclass(eq=False)
class Member:
    """One member (``MemberMetadata``). ``protocols`` keeps the client's order: it is its vote."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    assignment: bytes = b""
    join_callback: Callback | None = None
    sync_callback: Callback | None = None
    # Kafka's ``isNew``: added during this rebalance; expires on the new-member join timeout
    # rather than being treated as satisfied while it awaits the join (KAFKA-7610).
    is_new: bool = False
    heartbeat_deadline: float | None = None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_callback is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_callback is not None

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.protocols)

    def metadata(self, protocol: str) -> bytes:
        for name, data in self.protocols:
            if name == protocol:
                return data
        raise LocalProtocolError(f"member {self.member_id} does not support {protocol!r}")

    def vote(self, candidates: frozenset[str]) -> str:
        """The member's first choice among ``candidates`` (``MemberMetadata.vote``)."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise LocalProtocolError(f"member {self.member_id} supports no candidate protocol")

    def matches(self, protocols: Iterable[tuple[str, bytes]]) -> bool:
        """Same protocols, same order, same metadata bytes (``MemberMetadata.matches``)."""
        return self.protocols == tuple(protocols)


class MemberMap:
    """Member id -> :class:`Member`, iterated in the order of ``flavour``'s hash map."""

    def __init__(self, flavour: str) -> None:
        self._order: KeyOrder = FLAVOUR_MAPS[flavour]()
        self._members: dict[str, Member] = {}

    def __getitem__(self, member_id: str) -> Member:
        return self._members[member_id]

    def __setitem__(self, member_id: str, member: Member) -> None:
        self._order.put(member_id)
        self._members[member_id] = member

    def get(self, member_id: str) -> Member | None:
        return self._members.get(member_id)

    def pop(self, member_id: str) -> Member | None:
        member = self._members.pop(member_id, None)
        if member is not None:
            self._order.remove(member_id)
        return member

    def __contains__(self, member_id: object) -> bool:
        return member_id in self._members

    def __len__(self) -> int:
        return len(self._members)

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def values(self) -> list[Member]:
        return [self._members[k] for k in self._order]

    def first(self) -> str | None:
        """The first key (Scala's ``members.keys.headOption``, Java's ``iterator().next()``)."""
        return next(iter(self._order), None)


@dataclass(frozen=True)
class StoredMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class StoredGroup:
    """What Kafka writes to ``__consumer_offsets`` as the GroupMetadata record (value v3):
    only the selected protocol's metadata is kept for each member."""

    protocol_type: str | None
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    members: tuple[StoredMember, ...]


@dataclass(eq=False)
class ClassicGroup:
    """One group (``GroupMetadata``). ``flavour`` picks the member map's order (see
    :class:`MemberMap`) and the vote's tie-break; ``state_since`` is when the state last changed
    (Kafka 2.x builds static member ids from it)."""

    group_id: str
    flavour: str = "kafka4"
    state: State = State.EMPTY
    state_since: float = 0.0
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: MemberMap = field(init=False)
    static_members: dict[str, str] = field(default_factory=dict)
    # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, with their expiry deadline.
    pending_members: dict[str, float] = field(default_factory=dict)
    # Members that got their JoinGroup answer but have not sent SyncGroup yet (KAFKA-12890).
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False
    # The DelayedJoin / InitialDelayedJoin of the rebalance purgatory.
    join_deadline: float | None = None
    join_is_initial: bool = False
    initial_delay_ms: int = 0
    initial_remaining_ms: int = 0
    # The DelayedSync: generation it watches and its deadline.
    sync_deadline: float | None = None
    sync_generation: int = -1
    stored: StoredGroup | None = None
    vote_tie_varies: bool = False

    def __post_init__(self) -> None:
        self.members = MemberMap(self.flavour)

    # --- states ----------------------------------------------------------------------------

    def is_in(self, *states: State) -> bool:
        return self.state in states

    def transition_to(self, target: State, now: float) -> None:
        if self.state not in VALID_PREVIOUS_STATES[target]:
            raise LocalProtocolError(
                f"group {self.group_id!r}: illegal transition {self.state} -> {target}"
            )
        self.state = target
        self.state_since = now

    def can_rebalance(self) -> bool:
        return self.state in VALID_PREVIOUS_STATES[State.PREPARING_REBALANCE]

    # --- membership ------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, callback: Callback | None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        member.join_callback = callback
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id)
        if (
            member is not None
            and member.group_instance_id is not None
            and self.static_members.get(member.group_instance_id) == member_id
        ):
            del self.static_members[member.group_instance_id]
        if self.is_leader(member_id):
            self.leader_id = self.members.first()
        self.pending_members.pop(member_id, None)
        self.pending_sync_members.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Move ``old_id``'s member to ``new_id`` (``replaceStaticMember``); the caller fences
        the callbacks the old id still had parked."""
        member = self.members[old_id]
        self.members.pop(old_id)
        member.member_id = new_id
        self.members[new_id] = member
        if self.is_leader(old_id):
            self.leader_id = new_id
        self.static_members[instance_id] = new_id
        if old_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_id)
            self.pending_sync_members.add(new_id)
        return member

    def num_awaiting_join(self) -> int:
        return sum(1 for m in self.members.values() if m.is_awaiting_join)

    def has_all_members_joined(self) -> bool:
        """Every member rejoined and no KIP-394 pending member is still out there."""
        return len(self.members) == self.num_awaiting_join() and not self.pending_members

    def not_yet_rejoined(self) -> list[Member]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined; else pick the first member that did (None: none did)."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    # --- protocols -------------------------------------------------------------------------

    def protocol_support_counts(self) -> dict[str, int]:
        """How many members support each protocol name (each member counted once per name;
        Kafka counts duplicates twice, which only a malformed request has)."""
        counts: dict[str, int] = {}
        for member in self.members.values():
            for name in member.protocol_names:
                counts[name] = counts.get(name, 0) + 1
        return counts

    def supports_protocols(self, protocol_type: str, names: frozenset[str]) -> bool:
        """``supportsProtocols``: an empty group accepts any non-empty protocol list of a
        non-empty type; otherwise the type must match and one of ``names`` must be supported by
        every current member."""
        if self.state == State.EMPTY:
            return bool(protocol_type) and bool(names)
        counts = self.protocol_support_counts()
        size = len(self.members)
        return protocol_type == self.protocol_type and any(counts.get(n, 0) == size for n in names)

    def candidate_protocols(self) -> frozenset[str]:
        size = len(self.members)
        return frozenset(n for n, c in self.protocol_support_counts().items() if c == size)

    def votes(self) -> list[str]:
        """Each member's vote, in member order: its first choice among the protocols every
        member supports (``MemberMetadata.vote``)."""
        candidates = self.candidate_protocols()
        return [member.vote(candidates) for member in self.members.values()]

    def select_protocol(self) -> str:
        """The vote (``selectProtocol``): most votes wins; a tie goes to the protocol the
        version's map of votes iterates first (see
        :func:`~aiogroup.testing.embedded.hashorder.vote_order`:
        every version keeps the first maximum it meets)."""
        if not self.members:
            raise LocalProtocolError("cannot select a protocol for an empty group")
        votes = self.votes()
        winners = {flavour: _first_max(vote_order(flavour, votes), votes) for flavour in FLAVOURS}
        # A tie the versions break differently (the coordinator records the rule).
        self.vote_tie_varies = len(set(winners.values())) > 1
        return winners[self.flavour]

    def init_next_generation(self, now: float) -> None:
        """Bump the generation; pick the protocol (CompletingRebalance) or go Empty."""
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(State.COMPLETING_REBALANCE, now)
        else:
            self.protocol_name = None
            self.transition_to(State.EMPTY, now)
        self.pending_sync_members.clear()

    # --- persistence -----------------------------------------------------------------------

    def to_stored(self) -> StoredGroup:
        protocol = self.protocol_name
        return StoredGroup(
            protocol_type=self.protocol_type,
            generation_id=self.generation_id,
            protocol_name=protocol,
            leader_id=self.leader_id,
            members=tuple(
                StoredMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(protocol) if protocol is not None else b"",
                    assignment=m.assignment,
                )
                for m in self.members.values()
            ),
        )

    @classmethod
    def from_stored(
        cls, group_id: str, stored: StoredGroup | None, flavour: str, now: float
    ) -> ClassicGroup:
        """A group as the offsets-topic loader rebuilds it: Stable with members, else Empty
        (members put into the map in the record's order, as the loader does)."""
        group = cls(group_id, flavour, state_since=now)
        if stored is None:
            return group
        group.protocol_type = stored.protocol_type
        group.generation_id = stored.generation_id
        group.stored = stored
        if stored.members and stored.protocol_name is not None:
            group.protocol_name = stored.protocol_name
            group.leader_id = stored.leader_id
            for sm in stored.members:
                member = Member(
                    member_id=sm.member_id,
                    group_instance_id=sm.group_instance_id,
                    client_id=sm.client_id,
                    client_host=sm.client_host,
                    rebalance_timeout_ms=sm.rebalance_timeout_ms,
                    session_timeout_ms=sm.session_timeout_ms,
                    protocol_type=stored.protocol_type or "",
                    protocols=((stored.protocol_name, sm.subscription),),
                    assignment=sm.assignment,
                )
                group.members[sm.member_id] = member
                if sm.group_instance_id is not None:
                    group.static_members[sm.group_instance_id] = sm.member_id
            if group.leader_id not in group.members:
                group.leader_id = group.members.first()
            group.state = State.STABLE
        return group
