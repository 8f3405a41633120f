"""Test assignors and a small script driver for the membership machine (no sockets)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, TypeVar

from aiogroup.assignors.base import GroupMetadata, PartitionAssignor, RebalanceProtocol
from aiogroup.membership import (
    Action,
    CallbacksFinished,
    CoordinatorFound,
    Event,
    FindCoordinator,
    InvokeCallbacks,
    JoinGroupCompleted,
    JoinGroupMember,
    MemberConfig,
    MembershipMachine,
    MemberState,
    SendJoinGroup,
    SendSyncGroup,
    SubscriptionChanged,
    SyncGroupCompleted,
)
from aiogroup.membership.interface import Machine
from aiogroup.protocol import Assignment, Subscription, TopicPartition, encode_assignment
from aiogroup.protocol.types import group_by_topic

A = TypeVar("A", bound=Action)


def tps(*names: str) -> frozenset[TopicPartition]:
    """tps("t-0", "t-1") -> frozenset of TopicPartition."""
    out = set()
    for n in names:
        topic, _, p = n.rpartition("-")
        out.add(TopicPartition(topic, int(p)))
    return frozenset(out)


def state_of(m: Machine) -> MemberState:
    """``m.state``, read afresh: mypy keeps the state an earlier ``assert m.state is ...``
    narrowed it to across the events fed since."""
    return m.state


class FixedAssignor(PartitionAssignor):
    """Returns whatever ``plan`` says (member id -> partitions); records its inputs."""

    name = "fixed"
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (
        RebalanceProtocol.EAGER,
        RebalanceProtocol.COOPERATIVE,
    )

    def __init__(self, plan: Mapping[str, frozenset[TopicPartition]] | None = None) -> None:
        self.plan: dict[str, frozenset[TopicPartition]] = dict(plan or {})
        self.calls: list[tuple[dict[str, int], dict[str, Subscription]]] = []
        self.on_assignment_calls: list[tuple[Assignment, GroupMetadata]] = []

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> dict[str, Assignment]:
        self.calls.append((dict(partitions_per_topic), dict(subscriptions)))
        return {m: Assignment(group_by_topic(self.plan.get(m, frozenset()))) for m in subscriptions}

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        self.on_assignment_calls.append((assignment, metadata))


class EagerFixed(FixedAssignor):
    name = "eager-fixed"
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)


class CoopOnly(FixedAssignor):
    name = "coop-only"
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.COOPERATIVE,)


def member(
    protocol: RebalanceProtocol = RebalanceProtocol.COOPERATIVE,
    *,
    assignor: FixedAssignor | None = None,
    **config: object,
) -> MembershipMachine:
    if assignor is None:
        assignor = FixedAssignor() if protocol is RebalanceProtocol.COOPERATIVE else EagerFixed()
    config.setdefault("enable_auto_commit", False)
    cfg = MemberConfig(group_id="g", assignors=[assignor], **config)  # type: ignore[arg-type]
    m = MembershipMachine(cfg)
    assert m.protocol is protocol
    return m


class Script:
    """Feeds events to one member and keeps the actions it returned, for assertions."""

    def __init__(self, m: MembershipMachine, now: float = 100.0) -> None:
        self.m = m
        self.now = now
        self.pending: list[Action] = []

    def feed(self, event: Event) -> list[Action]:
        acts = self.m.handle(event, self.now)
        self.pending.extend(acts)
        return acts

    def timer(self, now: float) -> list[Action]:
        self.now = now
        acts = self.m.handle_timer(now)
        self.pending.extend(acts)
        return acts

    def take(self, kind: type[A]) -> A:
        for i, a in enumerate(self.pending):
            if isinstance(a, kind):
                del self.pending[i]
                return a
        raise AssertionError(f"no {kind.__name__} in {self.pending}")

    def has(self, kind: type[Action]) -> bool:
        return any(isinstance(a, kind) for a in self.pending)

    def kinds(self) -> list[str]:
        return [type(a).__name__ for a in self.pending]

    def clear(self) -> None:
        self.pending.clear()

    def finish_callbacks(self, error: BaseException | None = None) -> InvokeCallbacks:
        cb = self.take(InvokeCallbacks)
        self.feed(CallbacksFinished(cb.token, error))
        return cb

    def join_as_follower(
        self,
        assigned: frozenset[TopicPartition],
        *,
        member_id: str = "m1",
        generation_id: int = 1,
        protocol_name: str | None = None,
        join: SendJoinGroup | None = None,
        user_data: bytes | None = None,
        marks: Sequence[bytes] = (),
        leader: str = "leader-x",
    ) -> InvokeCallbacks:
        """From SendJoinGroup pending to RECONCILING: returns the InvokeCallbacks emitted.
        ``marks``: an aiogroup leader's (HAND_OFF_AWARE, ...), as entries with no partitions."""
        if join is None:
            join = self.take(SendJoinGroup)
        name = protocol_name or join.protocols[0][0]
        self.feed(JoinGroupCompleted(join.token, generation_id, member_id, leader, name))
        sync = self.take(SendSyncGroup)
        assert sync.assignments == ()
        partitions = {**group_by_topic(assigned), **{m.decode(): () for m in marks}}
        assignment = Assignment(partitions, user_data=user_data)
        self.feed(SyncGroupCompleted(sync.token, encode_assignment(assignment)))
        return self.take(InvokeCallbacks)

    def start(self, topics: frozenset[str] = frozenset({"t"})) -> None:
        """UNJOINED -> JoinGroup pending."""
        self.feed(SubscriptionChanged(topics=topics))
        find = self.take(FindCoordinator)
        self.feed(CoordinatorFound(find.token, 1, "127.0.0.1", 9092))
        assert self.has(SendJoinGroup), self.kinds()

    def stable(
        self,
        assigned: frozenset[TopicPartition],
        *,
        topics: frozenset[str] = frozenset({"t"}),
        member_id: str = "m1",
        generation_id: int = 1,
        user_data: bytes | None = None,
        marks: Sequence[bytes] = (),
    ) -> None:
        """A fresh member all the way to STABLE owning ``assigned``."""
        self.start(topics)
        cb = self.join_as_follower(
            assigned,
            member_id=member_id,
            generation_id=generation_id,
            user_data=user_data,
            marks=marks,
        )
        self.feed(CallbacksFinished(cb.token))
        assert self.m.state is MemberState.STABLE
        assert self.m.assignment == assigned
        self.clear()


def leader_join(
    script: Script,
    members: Mapping[str, bytes],
    *,
    member_id: str = "m1",
    generation_id: int = 1,
) -> None:
    join = script.take(SendJoinGroup)
    script.feed(
        JoinGroupCompleted(
            join.token,
            generation_id,
            member_id,
            member_id,
            join.protocols[0][0],
            members=tuple(JoinGroupMember(m, md) for m, md in members.items()),
        )
    )
