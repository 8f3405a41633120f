"""The ``roundrobin`` assignor: Java's ``RoundRobinAssignor``.

All partitions of all subscribed topics are laid out sorted by (topic, partition) and dealt to
the members in turn, in Java's member order (static members by ``group_instance_id`` first, then
dynamic members by member id, KIP-345). A member not subscribed to a partition's topic is
skipped, and the turn moves on from the member that took the partition. Java's javadoc example:
members C0, C1, topics t0 and t1 with 3 partitions each give ``C0: t0p0 t0p2 t1p1`` and
``C1: t0p1 t1p0 t1p2``.

Java deals partition by partition and walks over unsubscribed members one at a time, which is
O(P * M) when subscriptions are sparse. Within one topic the deal only ever visits the topic's
own subscribers, in cyclic order, so we find the first of them at or after the current turn by
bisection and hand out whole strides at once: ``range(offset, n, len(subscribers))``. The result
is the same and costs O(M log M + S + P).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import ClassVar

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.assignors.range import (
    build_assignments,
    checked_partition_counts,
    java_string_key,
    member_order,
    unique_topics,
)
from aiogroup.protocol.types import Assignment, Subscription

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor(PartitionAssignor):
    """Java's ``roundrobin`` assignor (EAGER only).

    ``assign`` also accepts ``group_instance_ids`` (member id to ``group_instance_id``), as
    :class:`~aiogroup.assignors.range.RangeAssignor` does.
    """

    name: ClassVar[str] = "roundrobin"
    version: ClassVar[int] = 0
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
        *,
        group_instance_ids: Mapping[str, str | None] | None = None,
    ) -> dict[str, Assignment]:
        counts = checked_partition_counts(partitions_per_topic)
        members = member_order(subscriptions, group_instance_ids)

        # Positions (in the member cycle) of each topic's subscribers, ascending because we
        # walk the members in cycle order.
        subscribers: dict[str, list[int]] = {}
        for position, member_id in enumerate(members):
            for topic in unique_topics(member_id, subscriptions[member_id].topics):
                if topic in counts:  # absent or empty topics are simply not assigned
                    subscribers.setdefault(topic, []).append(position)

        plan: dict[str, dict[str, tuple[int, ...]]] = {}
        turn = 0  # position of the member whose turn it is (Java's CircularIterator.peek())
        # Java collects the subscribed topics in a TreeSet<String>: UTF-16 code-unit order.
        for topic in sorted(subscribers, key=java_string_key):
            positions = subscribers[topic]
            count = counts[topic]
            width = len(positions)
            first = bisect.bisect_left(positions, turn)
            if first == width:
                first = 0  # wrap around the cycle
            # Partition k goes to positions[(first + k) % width]; so the subscriber at index j
            # takes partitions offset, offset + width, ... with offset = (j - first) % width.
            for index, position in enumerate(positions):
                offset = (index - first) % width
                if offset < count:
                    member_id = members[position]
                    plan.setdefault(member_id, {})[topic] = tuple(range(offset, count, width))
            last = positions[(first + count - 1) % width]
            turn = (last + 1) % len(members)
        return build_assignments(subscriptions, plan)
