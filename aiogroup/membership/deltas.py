"""Pure partition-set arithmetic for KIP-429: the leader's five sets (2a-2f), its cooperative
safety net, and a member's added/revoked delta after SyncGroup (3a)."""

from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import dataclass

from aiogroup.protocol.types import (
    Assignment,
    Subscription,
    TopicPartition,
    group_by_topic,
    to_topic_partitions,
)

__all__ = [
    "LeaderPlan",
    "MemberDelta",
    "existing_partitions",
    "leader_plan",
    "member_delta",
    "owners_by_claims",
    "validate_cooperative",
    "withhold_moving_partitions",
]


def existing_partitions(partitions_per_topic: Mapping[str, int]) -> frozenset[TopicPartition]:
    """Every partition that exists according to ``partitions_per_topic``."""
    return frozenset(
        TopicPartition(t, p) for t, n in partitions_per_topic.items() for p in range(max(n, 0))
    )


def owners_by_claims(
    subscriptions: Mapping[str, Subscription],
) -> dict[TopicPartition, frozenset[str]]:
    """Who owns each partition claimed in ``owned_partitions``.

    A sole claimant owns it. With conflicting claims the highest generation wins; claimants
    tied at the highest generation all keep the claim, which means nobody may receive the
    partition this round (KAFKA-12984, KAFKA-14639).
    """
    claims: dict[TopicPartition, list[tuple[int, str]]] = {}
    for member_id, sub in subscriptions.items():
        for tp in to_topic_partitions(sub.owned_partitions):
            claims.setdefault(tp, []).append((sub.generation_id, member_id))
    owners: dict[TopicPartition, frozenset[str]] = {}
    for tp, cl in claims.items():
        top = max(g for g, _ in cl)
        owners[tp] = frozenset(m for g, m in cl if g == top)
    return owners


def withhold_moving_partitions(
    assignments: Mapping[str, Assignment],
    owners: Mapping[TopicPartition, frozenset[str]],
) -> tuple[dict[str, Assignment], frozenset[TopicPartition]]:
    """KIP-429 2d: drop from each member's assignment any partition someone else still owns.

    The owner revokes it after SyncGroup and rejoins; the next round hands it to its new owner.
    Returns the adjusted assignments and the partitions withheld.
    """
    withheld: set[TopicPartition] = set()
    adjusted: dict[str, Assignment] = {}
    for member_id, assignment in assignments.items():
        keep: list[TopicPartition] = []
        for tp in to_topic_partitions(assignment.partitions):
            owner = owners.get(tp)
            if owner is None or owner == frozenset({member_id}):
                keep.append(tp)
            else:
                withheld.add(tp)
        if len(keep) == sum(len(ps) for ps in assignment.partitions.values()):
            adjusted[member_id] = assignment
        else:
            adjusted[member_id] = Assignment(
                group_by_topic(keep), assignment.user_data, assignment.version
            )
    return adjusted, frozenset(withheld)


def validate_cooperative(
    assignments: Mapping[str, Assignment],
    owners: Mapping[TopicPartition, frozenset[str]],
) -> frozenset[TopicPartition]:
    """Partitions revoked from an owner and assigned to another member in the same round.

    Must be empty for a cooperative round (KIP-429, KAFKA-14639).
    """
    bad: set[TopicPartition] = set()
    for member_id, assignment in assignments.items():
        for tp in to_topic_partitions(assignment.partitions):
            owner = owners.get(tp)
            if owner is not None and owner != frozenset({member_id}):
                bad.add(tp)
    return frozenset(bad)


@dataclass(frozen=True, slots=True)
class LeaderPlan:
    """The leader's view of one round (KIP-429 2a-2c), for logs, metrics and tests."""

    #: 2a: partitions claimed as owned by some member.
    owned: frozenset[TopicPartition]
    #: 2b: partitions the assignor handed out.
    assigned: frozenset[TopicPartition]
    #: 2c-i: owned and assigned (maybe to a new owner).
    maybe_revoking: frozenset[TopicPartition]
    #: 2c-ii: assigned, owned by nobody: safe to hand out at once (2e).
    ready_to_migrate: frozenset[TopicPartition]
    #: 2c-iii: owned but not assigned (deleted topics, stale leader metadata, ...).
    unknown_but_owned: frozenset[TopicPartition]
    #: 2d: partitions withheld from a new owner because the old one still claims them.
    withheld: frozenset[TopicPartition]
    #: 2f: unknown-but-owned partitions handed back to their sole owner.
    given_back: frozenset[TopicPartition]


def leader_plan(
    assignments: Mapping[str, Assignment],
    subscriptions: Mapping[str, Subscription],
    partitions_per_topic: Mapping[str, int],
    *,
    cooperative: bool,
) -> tuple[dict[str, Assignment], LeaderPlan]:
    """Apply KIP-429 2a-2f to the assignor's output.

    For the cooperative protocol: withhold partitions changing owner (2d) and give
    unknown-but-owned partitions of topics missing from the leader's metadata back to their
    sole owner, if it still subscribes to the topic (2f). The eager protocol only computes the
    sets (everyone revoked everything before joining).
    """
    owners = owners_by_claims(subscriptions)
    owned = frozenset(owners)
    assigned = frozenset(
        tp for a in assignments.values() for tp in to_topic_partitions(a.partitions)
    )
    result = dict(assignments)
    withheld: frozenset[TopicPartition] = frozenset()
    given_back: set[TopicPartition] = set()
    if cooperative:
        result, withheld = withhold_moving_partitions(result, owners)
        exists = existing_partitions(partitions_per_topic)
        extra: dict[str, list[TopicPartition]] = {}
        for tp in sorted(owned - assigned):
            owner = owners[tp]
            if tp in exists or len(owner) != 1:
                continue
            (member_id,) = owner
            sub = subscriptions.get(member_id)
            if sub is not None and member_id in result and tp.topic in set(sub.topics):
                extra.setdefault(member_id, []).append(tp)
                given_back.add(tp)
        for member_id, tps in extra.items():
            a = result[member_id]
            merged = to_topic_partitions(a.partitions) + tps
            result[member_id] = Assignment(group_by_topic(merged), a.user_data, a.version)
    plan = LeaderPlan(
        owned=owned,
        assigned=assigned,
        maybe_revoking=owned & assigned,
        ready_to_migrate=assigned - owned,
        unknown_but_owned=owned - assigned,
        withheld=withheld,
        given_back=frozenset(given_back),
    )
    return result, plan


@dataclass(frozen=True, slots=True)
class MemberDelta:
    """A member's change after SyncGroup (KIP-429 3a)."""

    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]


def member_delta(owned: Set[TopicPartition], assigned: Set[TopicPartition]) -> MemberDelta:
    """newly-added = assigned - owned; revoked = owned - assigned."""
    return MemberDelta(frozenset(assigned) - owned, frozenset(owned) - assigned)
