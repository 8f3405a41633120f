"""A tiny in-process group: several MembershipMachine instances and a fake coordinator that follows
the broker's classic group states (Empty, PreparingRebalance, CompletingRebalance, Stable).

The members run the real assignors; the coordinator answers every request in virtual time.
After every event the simulator checks that no partition is owned by two members at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.membership import (
    Action,
    CallbacksFinished,
    CloseRequested,
    CommitCompleted,
    CommitFailed,
    CommitOffsets,
    CoordinatorFound,
    Event,
    FindCoordinator,
    HeartbeatCompleted,
    HeartbeatFailed,
    InvokeCallbacks,
    JoinGroupCompleted,
    JoinGroupFailed,
    JoinGroupMember,
    LeaveGroupCompleted,
    MemberConfig,
    MembershipMachine,
    MemberState,
    MetadataUpdated,
    RaiseToUser,
    RequestMetadata,
    SendHeartbeat,
    SendJoinGroup,
    SendLeaveGroup,
    SendSyncGroup,
    SubscriptionChanged,
    SyncGroupCompleted,
    SyncGroupFailed,
)
from aiogroup.protocol import TopicPartition


@dataclass
class SimMember:
    name: str
    machine: MembershipMachine
    callbacks: list[InvokeCallbacks] = field(default_factory=list)
    raised: list[RaiseToUser] = field(default_factory=list)


@dataclass
class _Join:
    member_id: str
    who: SimMember
    token: int
    protocols: tuple[tuple[str, bytes], ...]


class FakeGroup:
    def __init__(self, partitions_per_topic: Mapping[str, int]) -> None:
        self.cluster = dict(partitions_per_topic)
        self.members: list[SimMember] = []
        self.queue: deque[tuple[SimMember, Event]] = deque()
        self.now = 0.0
        # coordinator state
        self.state = "Empty"
        self.generation = 0
        self.next_id = 0
        self.group: dict[str, tuple[tuple[str, bytes], ...]] = {}  # member_id -> protocols
        self.leader = ""
        self.protocol = ""
        self.pending_joins: dict[str, _Join] = {}
        self.pending_syncs: dict[str, tuple[SimMember, int]] = {}
        self.assignments: dict[str, bytes] = {}
        self.generations_completed = 0
        self.commits: list[tuple[str, int]] = []
        self.zombies: set[str] = set()

    # -- members -----------------------------------------------------------------------------

    def add(
        self, name: str, assignors: Sequence[PartitionAssignor], topics: frozenset[str]
    ) -> SimMember:
        cfg = MemberConfig(
            group_id="sim",
            assignors=list(assignors),
            heartbeat_interval_ms=1000,
            session_timeout_ms=10_000,
            enable_auto_commit=True,
        )
        sm = SimMember(name, MembershipMachine(cfg))
        self.members.append(sm)
        self.queue.append((sm, SubscriptionChanged(topics=topics)))
        return sm

    def close(self, sm: SimMember) -> None:
        self.queue.append((sm, CloseRequested()))

    def live(self) -> list[SimMember]:
        return [m for m in self.members if m.machine.state is not MemberState.CLOSED]

    def kick(self, sm: SimMember) -> None:
        """The coordinator forgets ``sm`` (as when its session expires) and rebalances.

        Until ``sm`` hears of it (UNKNOWN_MEMBER_ID) it is a zombie that still believes it owns
        its partitions (KAFKA-7026); the exclusivity check leaves zombies out until they have
        reported their partitions lost.
        """
        if sm.machine.assignment:
            self.zombies.add(sm.name)
        if sm.machine.member_id in self.group:
            del self.group[sm.machine.member_id]
            self.pending_joins.pop(sm.machine.member_id, None)
            self._rebalance()

    def update_cluster(self, partitions_per_topic: Mapping[str, int]) -> None:
        """Partitions were added; every member's next metadata refresh sees them."""
        self.cluster = dict(partitions_per_topic)
        for m in self.live():
            self.queue.append((m, MetadataUpdated(dict(self.cluster))))

    # -- loop --------------------------------------------------------------------------------

    def run(
        self, done: Callable[[], bool], max_time: float = 600.0, max_steps: int = 20_000
    ) -> None:
        steps = 0
        while steps < max_steps:
            steps += 1
            if self.queue:
                sm, event = self.queue.popleft()
                self._apply(sm, sm.machine.handle(event, self.now))
            else:
                if done():
                    return
                deadlines = [
                    (d, i)
                    for i, m in enumerate(self.members)
                    if (d := m.machine.next_deadline()) is not None
                ]
                if not deadlines:
                    raise AssertionError("nothing to do but not done")
                self.now = max(self.now, min(deadlines)[0])
                if self.now > max_time:
                    raise AssertionError("the group did not converge in time")
                for m in self.members:
                    d = m.machine.next_deadline()
                    if d is not None and d <= self.now:
                        self._apply(m, m.machine.handle_timer(self.now))
            self.check_exclusive()
        raise AssertionError("too many steps")

    def check_exclusive(self) -> None:
        seen: dict[TopicPartition, str] = {}
        for m in self.members:
            if m.name in self.zombies:
                if m.machine.assignment:
                    continue  # until its lost callback completes
                self.zombies.discard(m.name)
            for tp in m.machine.assignment:
                assert tp not in seen, f"{tp} owned by {seen[tp]} and {m.name} at t={self.now}"
                seen[tp] = m.name

    def all_stable(self) -> bool:
        live = [m for m in self.members if m.machine.state is not MemberState.CLOSED]
        if not live:
            return True
        return self.state == "Stable" and all(
            m.machine.state is MemberState.STABLE and m.machine.generation_id == self.generation
            for m in live
        )

    # -- actions -----------------------------------------------------------------------------

    def _reply(self, sm: SimMember, event: Event) -> None:
        self.queue.append((sm, event))

    def _apply(self, sm: SimMember, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, FindCoordinator):
                self._reply(sm, CoordinatorFound(a.token, 0))
            elif isinstance(a, RequestMetadata):
                self._reply(sm, MetadataUpdated(dict(self.cluster)))
            elif isinstance(a, InvokeCallbacks):
                sm.callbacks.append(a)
                self._reply(sm, CallbacksFinished(a.token))
            elif isinstance(a, RaiseToUser):
                sm.raised.append(a)
            elif isinstance(a, SendJoinGroup):
                self._join(sm, a)
            elif isinstance(a, SendSyncGroup):
                self._sync(sm, a)
            elif isinstance(a, SendHeartbeat):
                code = self._check(a.member_id, a.generation_id)
                if code == 0 and self.state == "PreparingRebalance":
                    code = 27
                self._reply(
                    sm, HeartbeatCompleted(a.token) if code == 0 else HeartbeatFailed(a.token, code)
                )
            elif isinstance(a, SendLeaveGroup):
                self._reply(sm, LeaveGroupCompleted(a.token))
                if a.member_id in self.group:
                    del self.group[a.member_id]
                    self.pending_joins.pop(a.member_id, None)
                    self._rebalance()
            elif isinstance(a, CommitOffsets):
                code = self._check(a.member_id, a.generation_id)
                if code == 0 and self.state == "CompletingRebalance":
                    code = 27
                if code == 0:
                    self.commits.append((a.member_id, a.generation_id))
                self._reply(
                    sm, CommitCompleted(a.token) if code == 0 else CommitFailed(a.token, code)
                )

    def _check(self, member_id: str, generation_id: int) -> int:
        if member_id not in self.group:
            return 25
        if generation_id != self.generation:
            return 22
        return 0

    def _join(self, sm: SimMember, a: SendJoinGroup) -> None:
        if not a.member_id:
            # KIP-394: hand out an id and ask the member to come back with it.
            self.next_id += 1
            self._reply(sm, JoinGroupFailed(a.token, 79, member_id=f"{sm.name}-{self.next_id}"))
            return
        self.group[a.member_id] = a.protocols
        self.pending_joins[a.member_id] = _Join(a.member_id, sm, a.token, a.protocols)
        self._rebalance()

    def _rebalance(self) -> None:
        if self.state != "PreparingRebalance":
            self.state = "PreparingRebalance"
            for sm, token in self.pending_syncs.values():
                self._reply(sm, SyncGroupFailed(token, 27))
            self.pending_syncs.clear()
        if not self.group:
            self.state = "Empty"
            return
        if set(self.pending_joins) >= set(self.group):
            self._complete_join()

    def _complete_join(self) -> None:
        self.generation += 1
        joins = [self.pending_joins[m] for m in sorted(self.pending_joins)]
        self.pending_joins.clear()
        if self.leader not in self.group:
            self.leader = sorted(self.group)[0]
        # The first protocol (in the leader's order) every member supports.
        common = set.intersection(*({n for n, _ in j.protocols} for j in joins))
        leader_protocols = self.group[self.leader]
        self.protocol = next(n for n, _ in leader_protocols if n in common)
        members = tuple(
            JoinGroupMember(mid, dict(self.group[mid])[self.protocol]) for mid in sorted(self.group)
        )
        self.state = "CompletingRebalance"
        for j in joins:
            mid = j.member_id
            self._reply(
                j.who,
                JoinGroupCompleted(
                    j.token,
                    self.generation,
                    mid,
                    self.leader,
                    self.protocol,
                    members=members if mid == self.leader else (),
                ),
            )

    def _sync(self, sm: SimMember, a: SendSyncGroup) -> None:
        code = self._check(a.member_id, a.generation_id)
        if code == 0 and self.state == "PreparingRebalance":
            code = 27
        if code:
            self._reply(sm, SyncGroupFailed(a.token, code))
            return
        if self.state == "Stable":
            self._reply(sm, SyncGroupCompleted(a.token, self.assignments[a.member_id]))
            return
        self.pending_syncs[a.member_id] = (sm, a.token)
        if a.member_id == self.leader:
            self.assignments = dict(a.assignments)
            self.state = "Stable"
            self.generations_completed += 1
            for mid, (who, token) in self.pending_syncs.items():
                self._reply(who, SyncGroupCompleted(token, self.assignments[mid]))
            self.pending_syncs.clear()


def all_partitions(cluster: Mapping[str, int]) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(t, p) for t, n in cluster.items() for p in range(n))
