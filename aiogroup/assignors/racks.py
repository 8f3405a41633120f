"""Racks for rack-aware assignment (KIP-881): who is where, and whether racks matter.

A member's rack is its ``client_rack``, sent as ``Subscription.rack_id`` (V3); an empty string
is no rack, as in Java. A partition's racks are those of the brokers holding its replicas
(:data:`~aiogroup.assignors.base.PartitionRacks`). A partition assigned to a member whose rack
holds one of its replicas is *rack-matched*: that member can fetch it from a replica in its own
rack (KIP-392) and cross no zone.

Rack-aware assignment applies only when it can change something, by Java's rule
(``AbstractPartitionAssignor.useRackAwareAssignment``, :func:`rack_aware`): some member has a
rack, some partition has a replica in one of the members' racks, and the partitions do not all
have replicas on the same set of racks. When every partition is on the same racks (every
partition on every rack, say), every balanced assignment matches as many partitions as any
other, and the rack-unaware result is used unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat

from aiogroup.assignors.base import PartitionRacks
from aiogroup.protocol.types import Assignment, Subscription

__all__ = ["NO_RACKS", "RackMatch", "member_racks", "rack_aware", "rack_match", "racks_of"]

#: The racks of a partition whose replicas' racks are unknown.
NO_RACKS: frozenset[str] = frozenset()


def member_racks(subscriptions: Mapping[str, Subscription]) -> dict[str, str]:
    """Member id to rack, for the members that have one (an empty ``rack_id`` is none)."""
    out: dict[str, str] = {}
    for member_id, subscription in subscriptions.items():
        rack = getattr(subscription, "rack_id", None)
        if isinstance(rack, str) and rack:
            out[member_id] = rack
    return out


def racks_of(partition_racks: PartitionRacks, topic: str, count: int) -> Sequence[frozenset[str]]:
    """The racks of each of ``count`` partitions of ``topic`` (unknown ones empty)."""
    racks = partition_racks.get(topic)
    if racks is None:
        return list(repeat(NO_RACKS, count))
    if len(racks) == count:
        return racks
    out = list(racks[:count])
    out.extend(repeat(NO_RACKS, count - len(out)))
    return out


def rack_aware(consumer_racks: Collection[str], partition_racks: Iterable[frozenset[str]]) -> bool:
    """Java's rule for using rack-aware assignment: some member has a rack, some partition has
    a replica on a member's rack, and not every partition's replicas are on the same racks."""
    if not consumer_racks:
        return False
    distinct = set(partition_racks)
    every = frozenset().union(*distinct)
    if every.isdisjoint(consumer_racks):
        return False
    return len(distinct) > 1


@dataclass(frozen=True, slots=True)
class RackMatch:
    """How many assigned partitions went to a member in a rack holding one of their replicas
    (``matched``), out of those assigned to members that have a rack (``racked``), out of all
    assigned (``assigned``)."""

    matched: int
    racked: int
    assigned: int

    @property
    def rate(self) -> float:
        """``matched / racked`` (1.0 when no member has a rack)."""
        return self.matched / self.racked if self.racked else 1.0


def rack_match(
    assignments: Mapping[str, Assignment],
    subscriptions: Mapping[str, Subscription],
    partition_racks: PartitionRacks,
) -> RackMatch:
    """The rack match of ``assignments`` (see :class:`RackMatch`)."""
    racks = member_racks(subscriptions)
    matched = racked = assigned = 0
    for member_id, assignment in assignments.items():
        rack = racks.get(member_id)
        for topic, parts in assignment.partitions.items():
            assigned += len(parts)
            if rack is None:
                continue
            racked += len(parts)
            of_topic = partition_racks.get(topic, ())
            n = len(of_topic)
            matched += sum(1 for p in parts if p < n and rack in of_topic[p])
    return RackMatch(matched, racked, assigned)
