"""The assignor API, in Python idiom after Java's ``ConsumerPartitionAssignor`` (KIP-429).

Users write their own assignor by subclassing :class:`PartitionAssignor`::

    class MyAssignor(PartitionAssignor):
        name = "mine"
        supported_protocols = (RebalanceProtocol.EAGER,)

        def assign(self, partitions_per_topic, subscriptions):
            ...

Assignors are pure: no I/O, no clock, deterministic (KAFKA-12898: the same input must give the
same bytes, whatever order members or topics arrive in).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import ClassVar

from aiogroup.protocol.types import NO_GENERATION, Assignment, Subscription

__all__ = ["GroupMetadata", "PartitionAssignor", "RebalanceProtocol"]


class RebalanceProtocol(enum.IntEnum):
    """KIP-429's rebalance protocols; a higher id is preferred when several are common."""

    EAGER = 0
    COOPERATIVE = 1


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """What an assignor learns about the member in ``on_assignment`` (KIP-341 exposes the
    generation to assignors)."""

    generation_id: int = NO_GENERATION
    member_id: str = ""
    group_id: str = ""
    group_instance_id: str | None = None


class PartitionAssignor(abc.ABC):
    """Base class of every assignor.

    ``name`` is the protocol name put in JoinGroup; ``version`` is the assignor's own version;
    ``supported_protocols`` lists the rebalance protocols it can run under (EAGER=0,
    COOPERATIVE=1).
    """

    name: ClassVar[str]
    version: ClassVar[int] = 0
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: Set[str]) -> bytes | None:
        """User data to put in this member's Subscription (``None`` for none)."""
        return None

    @abc.abstractmethod
    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        """Compute the group's assignment on the leader.

        ``partitions_per_topic`` maps each subscribed topic that exists to its partition count
        (partitions are ``0..n-1``); ``subscriptions`` maps member id to its Subscription. The
        result has one :class:`Assignment` per member id, every member included (an empty one
        for a member that gets nothing).
        """

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:  # noqa: B027
        """Called on every member when SyncGroup delivers its assignment."""
