"""The cooperative adjust step (KIP-429), applied to a plan of the sticky balancer.

KIP-429 lets a partition change owner only once its previous owner has revoked it: the leader
works out the intended assignment, then withholds every partition that would go to a new member
while another member still claims it. The previous owner sees the partition missing from its
assignment, revokes it and rejoins; the follow-up rebalance hands it out, now unclaimed. So a
partition is never revoked and assigned in the same round (KAFKA-14639), and a group converges
in at most two rebalances.

This is a separate step composed after :func:`aiogroup.assignors.balancer.balance`, as in
franz-go, rather than a subclass overriding the balancer's internals.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import replace
from itertools import filterfalse

from aiogroup.assignors.balancer import Plan

__all__ = ["withhold_transfers"]


def withhold_transfers(plan: Plan) -> tuple[Plan, dict[tuple[str, int], str]]:
    """Drop from ``plan`` every newly given partition that some member still claims.

    A claim counts whatever its validity for ownership: a stale generation, an equal-generation
    conflict (KAFKA-12984: nobody keeps it, so everybody must revoke it first) or a topic the
    member no longer subscribes to all mean the claimant may still be consuming it. Partitions a
    member keeps are never withheld. Returns the adjusted plan and the withheld partitions with
    the member each was meant for (a hint for the follow-up round).
    """
    claimed = plan.claimed
    withheld: dict[tuple[str, int], str] = {}
    if not claimed:
        return plan, withheld
    contains = claimed.__contains__
    layout = plan.layout
    added: list[list[int]] = []
    ready = list(plan.ready)
    for i, (member_id, ids) in enumerate(zip(plan.member_ids, plan.added, strict=True)):
        taken = list(filter(contains, ids)) if ids else ids
        if not taken:
            added.append(ids)
            continue
        added.append(list(filterfalse(contains, ids)))
        if ready:
            ready[i] = None  # its assignment changes
        for g in taken:
            k = bisect_left(layout.offsets, g + 1) - 1
            withheld[(layout.topics[k], g - layout.offsets[k])] = member_id
    return replace(plan, added=added, ready=ready), withheld
