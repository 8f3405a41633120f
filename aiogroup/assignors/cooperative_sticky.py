"""The ``cooperative-sticky`` assignor (KIP-429): the sticky balancer plus the cooperative step.

Supports ``(COOPERATIVE, EAGER)`` like Java, so that ``[range, cooperative-sticky]`` runs EAGER
with ``range`` during the first rolling bounce and switches to COOPERATIVE after the second
(KIP-429's upgrade path).

What the leader reads from each member:

- owned partitions: the Subscription's ``owned_partitions`` (V1+, KIP-429);
- generation: the Subscription's ``generation_id`` when it was written at V2+ (KIP-792), else
  the user data: Java's bare int32, or the sticky v1 block librdkafka and franz-go write there;
  empty user data (kafka-python) or bytes that fit nothing mean -1.

What it writes: Java's bare int32 generation as user data, so leaders that only read V1
Subscriptions (older Java, Java-compatible clients) still see our generation. librdkafka and
franz-go read a 4-byte block as that same int32.

Conflicting claims (KAFKA-12984, KAFKA-14639): a sole claimant keeps its partition, else the
highest generation wins, and at equal generations nobody keeps it this round. Under COOPERATIVE,
a partition moving to a new member while anyone still claims it is withheld for one round. The
leader remembers whom each withheld partition was meant for and, if it leads the follow-up
rebalance too, hands it there once it is free (KIP-429: "assigned to its final owner in the
second rebalance"); a new leader simply recomputes.

Example::

    assignor = CooperativeStickyAssignor()
    owned = Subscription(["t"], owned_partitions={"t": (0, 1)}, generation_id=1)
    assignor.assign({"t": 2}, {"a": owned, "b": Subscription(["t"])})
    # {'a': Assignment({'t': (0,)}), 'b': Assignment({})}: t-1 waits for a to revoke it
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Set
from typing import ClassVar

from aiogroup.assignors._cooperative import withhold_transfers
from aiogroup.assignors.balancer import MemberClaim, balance, gc_paused
from aiogroup.assignors.base import (
    GroupMetadata,
    PartitionAssignor,
    PartitionRacks,
    RebalanceProtocol,
)
from aiogroup.errors import CodecError
from aiogroup.protocol import encode_cooperative_user_data, generation_from_user_data
from aiogroup.protocol.types import NO_GENERATION, Assignment, Subscription

__all__ = ["CooperativeStickyAssignor", "generation_of"]

logger = logging.getLogger("aiogroup.assignors")


class CooperativeStickyAssignor(PartitionAssignor):
    """Java's ``cooperative-sticky``: sticky balancing, owned partitions from the Subscription,
    partitions that change owner withheld until revoked (KIP-429)."""

    name: ClassVar[str] = "cooperative-sticky"
    version: ClassVar[int] = 0
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (
        RebalanceProtocol.COOPERATIVE,
        RebalanceProtocol.EAGER,
    )

    def __init__(self, protocol: RebalanceProtocol = RebalanceProtocol.COOPERATIVE) -> None:
        #: The rebalance protocol the group runs. Under EAGER every member revokes everything
        #: before joining, so the cooperative step is skipped.
        self.protocol = protocol
        self._generation: int = NO_GENERATION
        # As leader: partitions withheld last round and the member each was meant for.
        self._pending: dict[tuple[str, int], str] = {}
        #: Partitions moved and withheld in the last ``assign`` (for telemetry and benchmarks).
        self.last_moved: int = 0
        self.last_withheld: int = 0

    def subscription_user_data(self, topics: Set[str]) -> bytes | None:
        """Java's user data: the bare int32 generation of the last assignment."""
        return encode_cooperative_user_data(self._generation)

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        self._generation = metadata.generation_id

    def reset(self) -> None:
        """Forget the generation (the member fell out of the group, KAFKA-12984) and what it
        withheld as leader."""
        self._generation = NO_GENERATION
        self._pending = {}

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
        ``partition_racks``), then sticky, then the cooperative step; see
        :mod:`aiogroup.assignors.balancer.racks`."""
        with gc_paused():
            claims = [
                MemberClaim(m, s.topics, s.owned_partitions, generation_of(m, s), s.rack_id)
                for m, s in subscriptions.items()
            ]
            plan = balance(partitions_per_topic, claims, self._pending, partition_racks)
            self.last_moved = plan.moved()
            self._pending = {}
            if self.protocol == RebalanceProtocol.COOPERATIVE:
                plan, self._pending = withhold_transfers(plan)
            self.last_withheld = len(self._pending)
            return {m: Assignment(p) for m, p in plan.assignments().items()}


def generation_of(member_id: str, subscription: Subscription) -> int:
    """A member's generation: the V2+ field (KIP-792), else from its user data, else -1."""
    if subscription.version >= 2:
        return subscription.generation_id
    try:
        return generation_from_user_data(subscription.user_data, strict=True)
    except CodecError as exc:
        logger.warning(
            "member %r sent cooperative-sticky user data that cannot be decoded (%s); "
            "treated as no generation",
            member_id,
            exc,
        )
        return NO_GENERATION
