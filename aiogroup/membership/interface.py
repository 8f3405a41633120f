"""What a driver needs of a membership machine: the interface both machines implement.

The classic machine (:class:`~aiogroup.membership.machine.MembershipMachine`, JoinGroup and
SyncGroup, KIP-429) and the KIP-848 one
(:class:`~aiogroup.membership.consumer_machine.ConsumerProtocolMachine`, ConsumerGroupHeartbeat)
take the same events and return the same actions, but for their own requests, and answer the
same queries, so :class:`aiogroup.client.GroupMember` and :class:`aiogroup.Consumer` drive
either without asking which it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import AiogroupError
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.deltas import LeaderPlan
from aiogroup.membership.states import MemberState
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.membership.config import MemberConfig
    from aiogroup.membership.consumer_machine import ConsumerMemberConfig

__all__ = ["Machine"]


class Machine(Protocol):
    """A sans-I/O group member: events in, actions out, ``now`` passed in."""

    member_id: str
    coordinator_id: int | None
    fatal_error: AiogroupError | None
    #: The assignor the group runs (None before it is known).
    protocol_name: str | None

    @property
    def config(self) -> MemberConfig | ConsumerMemberConfig: ...

    @property
    def state(self) -> MemberState: ...

    @property
    def generation_id(self) -> int:
        """The generation (classic) or the member epoch (KIP-848); -1 outside the group."""
        ...

    @property
    def protocol(self) -> RebalanceProtocol:
        """How the callbacks read: COOPERATIVE (what is added) or EAGER (everything)."""
        ...

    @property
    def is_leader(self) -> bool: ...

    @property
    def assignment(self) -> frozenset[TopicPartition]: ...

    @property
    def subscribed_topics(self) -> frozenset[str]: ...

    @property
    def has_subscription(self) -> bool: ...

    @property
    def session_deadline(self) -> float | None: ...

    @property
    def last_leader_plan(self) -> LeaderPlan | None: ...

    @property
    def stale_claims(self) -> dict[str, frozenset[TopicPartition]]: ...

    def may_act_on(self, now: float) -> frozenset[TopicPartition]: ...

    def next_deadline(self) -> float | None: ...

    def handle(self, event: ev.Event, now: float) -> list[act.Action]: ...

    def handle_timer(self, now: float) -> list[act.Action]: ...

    def commit(
        self, offsets: Mapping[TopicPartition, int] | None, now: float
    ) -> act.CommitOffsets: ...

    def offset_fetch_identity(self) -> tuple[str, int] | None:
        """``(member id, epoch)`` to send with OffsetFetch (v9+), or None (an admin's fetch)."""
        ...
