"""The ``sticky`` assignor (KIP-54, KIP-341): balanced, and moves as few partitions as it can.

EAGER only, like Java's ``StickyAssignor`` (KIP-429 kept it eager so that users follow the
upgrade path to ``cooperative-sticky``). Under EAGER a member revokes everything before it
joins, so its Subscription carries no owned partitions; instead each member puts its previous
assignment and generation in its user data (sticky user data v1, KIP-341), remembered from
:meth:`StickyAssignor.on_assignment`.

The leader decodes every member's user data (v0 has no generation: -1) and resolves claims per
partition: a sole claimant keeps it, the highest generation wins, equal generations lose it.
This is what stops a member that was paused past its session timeout from keeping partitions
that were handed to someone else meanwhile (KAFKA-7026, the reason for KIP-341). User data that
cannot be decoded counts as no claim, with a warning: one odd peer must not stop the leader.

Example::

    assignor = StickyAssignor()
    result = assignor.assign({"t": 4}, {"a": Subscription(["t"]), "b": Subscription(["t"])})
    # {'a': Assignment({'t': (0, 1)}), 'b': Assignment({'t': (2, 3)})}
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from typing import ClassVar

from aiogroup.assignors.balancer import MemberClaim, balance, gc_paused
from aiogroup.assignors.base import (
    GroupMetadata,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
)
from aiogroup.errors import CodecError
from aiogroup.protocol import decode_sticky_user_data, encode_sticky_user_data
from aiogroup.protocol.types import NO_GENERATION, Assignment, PartitionsByTopic, Subscription

__all__ = ["StickyAssignor"]

logger = logging.getLogger("aiogroup.assignors")


class StickyAssignor(PartitionAssignor):
    """Java's ``sticky`` assignor: EAGER, previous assignment carried in user data (KIP-341)."""

    name: ClassVar[str] = "sticky"
    version: ClassVar[int] = 0
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        self._partitions: PartitionsByTopic | None = None
        self._generation: int = NO_GENERATION
        #: Partitions moved to a member that did not own them, in the last ``assign``.
        self.last_moved: int = 0

    def subscription_user_data(self, topics: Set[str]) -> bytes | None:
        """Sticky user data v1: the last assignment and its generation; ``None`` before the
        first assignment (as Java)."""
        if self._partitions is None:
            return None
        return encode_sticky_user_data(self._partitions, self._generation)

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        """Remember the assignment and its generation for the next JoinGroup (KIP-341)."""
        self._partitions = dict(assignment.partitions)
        self._generation = metadata.generation_id

    def reset(self) -> None:
        """Forget the remembered assignment (the member lost its partitions or left)."""
        self._partitions = None
        self._generation = NO_GENERATION

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        return self.assign_partitions(partitions_per_topic, subscriptions)

    def assign_partitions(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        partition_racks: PartitionRacks | None = None,
    ) -> dict[str, Assignment]:
        """Balanced, then rack-matched (KIP-881: members' ``rack_id`` against
        ``partition_racks``), then sticky; see :mod:`aiogroup.assignors.balancer.racks`."""
        with gc_paused():
            claims = [_claim(m, s) for m, s in subscriptions.items()]
            plan = balance(partitions_per_topic, claims, None, partition_racks)
            self.last_moved = plan.moved()
            return {m: Assignment(p) for m, p in plan.assignments().items()}


def _claim(member_id: str, subscription: Subscription) -> MemberClaim:
    """What a member claims under EAGER: only its sticky user data counts (as Java: owned
    partitions in the Subscription are always empty under EAGER)."""
    try:
        data = decode_sticky_user_data(subscription.user_data)
    except CodecError as exc:
        logger.warning(
            "member %r sent sticky user data that cannot be decoded (%s); treated as "
            "no previous assignment",
            member_id,
            exc,
        )
        return MemberClaim(member_id, subscription.topics, rack=subscription.rack_id)
    return MemberClaim(
        member_id, subscription.topics, data.partitions, data.generation, subscription.rack_id
    )
