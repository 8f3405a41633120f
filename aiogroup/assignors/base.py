"""The assignor API, in Python idiom after Java's ``ConsumerPartitionAssignor`` (KIP-429).

Users write their own assignor by subclassing :class:`PartitionAssignor`::

    class MyAssignor(PartitionAssignor):
        name = "mine"
        supported_protocols = (RebalanceProtocol.EAGER,)

        def assign(self, partitions_per_topic, subscriptions):
            ...

Assignors are pure: no I/O, no clock, deterministic (KAFKA-12898: the same input must give the
same bytes, whatever order members or topics arrive in).

Rack-aware assignors (KIP-881) also want the racks of each partition's replicas. The leader
calls :func:`run_assignor`, which hands them to :meth:`PartitionAssignor.assign_partitions`
(Java's ``AbstractPartitionAssignor.assignPartitions``); its default ignores them and calls
:meth:`PartitionAssignor.assign`, so an assignor written against ``assign`` alone keeps
working unchanged.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import ClassVar, TypeAlias

from aiogroup.protocol.types import NO_GENERATION, Assignment, Subscription

__all__ = [
    "GroupMetadata",
    "PartitionAssignor",
    "PartitionRacks",
    "RebalanceProtocol",
    "run_assignor",
]

#: The racks of each partition's replicas (KIP-881), as the leader reads them from Metadata:
#: per topic, one set per partition, in partition order (``racks[topic][p]``). Every replica
#: counts, in the ISR or not, as in Java; a replica on a broker without ``broker.rack`` adds
#: nothing, so an empty set means "racks unknown". A topic missing, or a list shorter than the
#: topic, means the same for the partitions it leaves out.
PartitionRacks: TypeAlias = Mapping[str, Sequence[frozenset[str]]]


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

    def assign_partitions(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        """:meth:`assign` with the racks of each partition's replicas (KIP-881); what the
        leader calls, through :func:`run_assignor`.

        Each member's rack is its ``Subscription.rack_id`` (V3, the member's ``client_rack``).
        ``partition_racks`` is ``None`` when the leader knows no rack at all. The default
        ignores the racks and returns :meth:`assign`; the built-in assignors override it.
        """
        return self.assign(partitions_per_topic, subscriptions)

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:  # noqa: B027
        """Called on every member when SyncGroup delivers its assignment."""


def _owner(cls: type, name: str) -> int:
    """Position in ``cls.__mro__`` of the class that defines ``name``."""
    return next(i for i, c in enumerate(cls.__mro__) if name in c.__dict__)


def run_assignor(
    assignor: PartitionAssignor,
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    partition_racks: PartitionRacks | None = None,
) -> dict[str, Assignment]:
    """The leader's call: :meth:`~PartitionAssignor.assign_partitions` with the racks, unless
    the assignor's class overrides :meth:`~PartitionAssignor.assign` below the class that
    defines ``assign_partitions`` (a subclass of a built-in that changes ``assign``): that
    ``assign`` is what its author wants run, and it is called as before, without racks."""
    cls = type(assignor)
    if _owner(cls, "assign") < _owner(cls, "assign_partitions"):
        return assignor.assign(partitions_per_topic, subscriptions)
    return assignor.assign_partitions(partitions_per_topic, subscriptions, partition_racks)
