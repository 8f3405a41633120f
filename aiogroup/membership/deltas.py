"""Pure partition-set arithmetic for KIP-429: the leader's five sets (2a-2f), its cooperative
safety net, and a member's added/revoked delta after SyncGroup (3a).

The leader works on partitions grouped by topic and keys partitions as plain ``(topic,
partition)`` tuples (equal to, and hashing like, :class:`TopicPartition`): building one object
per partition dominated the leader's round with 10k partitions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Set
from dataclasses import dataclass
from functools import cached_property

from aiogroup.protocol.types import Assignment, Subscription, TopicPartition

__all__ = [
    "LeaderPlan",
    "MemberDelta",
    "Owners",
    "claimants",
    "drop_claims",
    "existing_partitions",
    "leader_plan",
    "member_delta",
    "owners_by_claims",
    "unassigned_partitions",
    "validate_cooperative",
    "withhold_moving_partitions",
]

#: Who owns a partition: its member id, or ``None`` when claimants tie (nobody may take it).
Owners = dict[tuple[str, int], str | None]


def existing_partitions(partitions_per_topic: Mapping[str, int]) -> frozenset[TopicPartition]:
    """Every partition that exists according to ``partitions_per_topic``."""
    return frozenset(
        TopicPartition(t, p) for t, n in partitions_per_topic.items() for p in range(max(n, 0))
    )


def owners_by_claims(subscriptions: Mapping[str, Subscription]) -> Owners:
    """Who owns each partition claimed in ``owned_partitions``.

    A sole claimant owns it. With conflicting claims the highest generation wins; claimants
    tied at the highest generation all lose it this round: nobody may receive it (KAFKA-12984,
    KAFKA-14639).
    """
    best: dict[tuple[str, int], tuple[int, str | None]] = {}
    for member_id in sorted(subscriptions):
        sub = subscriptions[member_id]
        generation = sub.generation_id
        for topic, partitions in sub.owned_partitions.items():
            for p in partitions:
                key = (topic, p)
                seen = best.get(key)
                if seen is None or generation > seen[0]:
                    best[key] = (generation, member_id)
                elif generation == seen[0] and seen[1] != member_id:
                    best[key] = (generation, None)
    return {key: owner for key, (_, owner) in best.items()}


def withhold_moving_partitions(
    assignments: Mapping[str, Assignment], owners: Owners
) -> tuple[dict[str, Assignment], frozenset[TopicPartition]]:
    """KIP-429 2d: drop from each member's assignment any partition someone else still owns.

    The owner revokes it after SyncGroup and rejoins; the next round hands it to its new owner.
    Returns the adjusted assignments and the partitions withheld.
    """
    withheld: list[TopicPartition] = []
    adjusted: dict[str, Assignment] = {}
    for member_id, assignment in assignments.items():
        changed = False
        kept: dict[str, tuple[int, ...]] = {}
        for topic, partitions in assignment.partitions.items():
            get = owners.get
            keep = tuple(p for p in partitions if get((topic, p), member_id) == member_id)
            if len(keep) != len(partitions):
                changed = True
                withheld.extend(TopicPartition(topic, p) for p in set(partitions) - set(keep))
            if keep:
                kept[topic] = keep
        adjusted[member_id] = (
            Assignment(kept, assignment.user_data, assignment.version) if changed else assignment
        )
    return adjusted, frozenset(withheld)


def validate_cooperative(
    assignments: Mapping[str, Assignment], owners: Owners
) -> frozenset[TopicPartition]:
    """Partitions revoked from an owner and assigned to another member in the same round.

    Must be empty for a cooperative round (KIP-429, KAFKA-14639).
    """
    return frozenset(
        TopicPartition(topic, p)
        for member_id, assignment in assignments.items()
        for topic, partitions in assignment.partitions.items()
        for p in partitions
        if owners.get((topic, p), member_id) != member_id
    )


def _flatten(assignments: Mapping[str, Assignment]) -> frozenset[TopicPartition]:
    return frozenset(
        TopicPartition(t, p)
        for a in assignments.values()
        for t, ps in a.partitions.items()
        for p in ps
    )


class LeaderPlan:
    """The leader's view of one round (KIP-429 2a-2c), for logs, metrics and tests.

    The sets are computed on first access, so a leader that never looks pays nothing.
    """

    def __init__(
        self,
        owners: Owners,
        raw: Mapping[str, Assignment],
        withheld: frozenset[TopicPartition],
        given_back: frozenset[TopicPartition],
    ) -> None:
        self._owners = owners
        self._raw = raw
        #: 2d: partitions withheld from a new owner because the old one still claims them.
        self.withheld = withheld
        #: 2f: unknown-but-owned partitions handed back to their sole owner.
        self.given_back = given_back

    @cached_property
    def owned(self) -> frozenset[TopicPartition]:
        """2a: partitions claimed as owned by some member."""
        return frozenset(TopicPartition(t, p) for t, p in self._owners)

    @cached_property
    def assigned(self) -> frozenset[TopicPartition]:
        """2b: partitions the assignor handed out."""
        return _flatten(self._raw)

    @property
    def maybe_revoking(self) -> frozenset[TopicPartition]:
        """2c-i: owned and assigned (maybe to a new owner)."""
        return self.owned & self.assigned

    @property
    def ready_to_migrate(self) -> frozenset[TopicPartition]:
        """2c-ii: assigned, owned by nobody: safe to hand out at once (2e)."""
        return self.assigned - self.owned

    @property
    def unknown_but_owned(self) -> frozenset[TopicPartition]:
        """2c-iii: owned but not assigned (deleted topics, stale leader metadata, ...)."""
        return self.owned - self.assigned


class CooperativeViolationError(AssertionError):
    """Internal guard: the leader's adjusted assignment still moves an owned partition."""


def leader_plan(
    assignments: Mapping[str, Assignment],
    subscriptions: Mapping[str, Subscription],
    partitions_per_topic: Mapping[str, int],
    *,
    cooperative: bool,
) -> tuple[dict[str, Assignment], LeaderPlan]:
    """Apply KIP-429 2a-2f to the assignor's output.

    For the cooperative protocol: withhold partitions changing owner (2d), give
    unknown-but-owned partitions of topics missing from the leader's metadata back to their
    sole owner if it still subscribes to the topic (2f), and validate that nothing is revoked
    and assigned in the same round. The eager protocol only records the sets (everyone revoked
    everything before joining).
    """
    owners = owners_by_claims(subscriptions)
    result = dict(assignments)
    withheld: frozenset[TopicPartition] = frozenset()
    given_back: list[TopicPartition] = []
    if cooperative:
        result, withheld = withhold_moving_partitions(result, owners)
        assigned_keys = {
            (t, p) for a in assignments.values() for t, ps in a.partitions.items() for p in ps
        }
        extra: dict[str, dict[str, list[int]]] = {}
        for (topic, p), owner in sorted(owners.items(), key=lambda kv: kv[0]):
            if owner is None or (topic, p) in assigned_keys:
                continue
            if 0 <= p < partitions_per_topic.get(topic, 0):
                continue  # exists: the assignor chose not to assign it
            sub = subscriptions.get(owner)
            if sub is not None and owner in result and topic in set(sub.topics):
                extra.setdefault(owner, {}).setdefault(topic, []).append(p)
                given_back.append(TopicPartition(topic, p))
        for member_id, more in extra.items():
            a = result[member_id]
            merged = {t: tuple(ps) for t, ps in a.partitions.items()}
            for t, ps in more.items():
                merged[t] = tuple(sorted(set(merged.get(t, ())) | set(ps)))
            result[member_id] = Assignment(
                {t: merged[t] for t in sorted(merged)}, a.user_data, a.version
            )
        bad = validate_cooperative(result, owners)
        if bad:  # cannot happen after withholding; a guard against regressions
            raise CooperativeViolationError(f"revoked and assigned in one round: {sorted(bad)}")
    return result, LeaderPlan(owners, assignments, withheld, frozenset(given_back))


def unassigned_partitions(
    assignments: Mapping[str, Assignment], partitions_per_topic: Mapping[str, int]
) -> frozenset[TopicPartition]:
    """Partitions of ``partitions_per_topic`` that no member is assigned.

    After KIP-429 2d these are the partitions withheld until their owner revokes them (and any
    an assignor chose to leave out). Cheap when everything is assigned.
    """
    taken: dict[str, set[int]] = {}
    for a in assignments.values():
        for topic, partitions in a.partitions.items():
            taken.setdefault(topic, set()).update(partitions)
    out: list[TopicPartition] = []
    for topic, n in partitions_per_topic.items():
        missing = set(range(max(n, 0))).difference(taken.get(topic, ()))
        out.extend(TopicPartition(topic, p) for p in sorted(missing))
    return frozenset(out)


def claimants(
    subscriptions: Mapping[str, Subscription], partitions: Set[TopicPartition]
) -> dict[TopicPartition, frozenset[str]]:
    """Who claims each of ``partitions`` in its ``owned_partitions`` (partitions nobody claims
    are left out)."""
    if not partitions:
        return {}
    topics = {tp.topic for tp in partitions}
    found: dict[TopicPartition, set[str]] = {}
    for member_id, sub in subscriptions.items():
        for topic, owned in sub.owned_partitions.items():
            if topic not in topics:
                continue
            for p in owned:
                tp = TopicPartition(topic, p)
                if tp in partitions:
                    found.setdefault(tp, set()).add(member_id)
    return {tp: frozenset(members) for tp, members in found.items()}


def drop_claims(
    subscriptions: Mapping[str, Subscription], stale: Mapping[str, Set[TopicPartition]]
) -> dict[str, Subscription]:
    """``subscriptions`` with the claims in ``stale`` (member id -> partitions) removed from
    ``owned_partitions``; everything else in each Subscription is kept."""
    out = dict(subscriptions)
    for member_id, partitions in stale.items():
        sub = out.get(member_id)
        if sub is None or not partitions:
            continue
        kept: dict[str, tuple[int, ...]] = {}
        for topic, owned in sub.owned_partitions.items():
            left = tuple(p for p in owned if TopicPartition(topic, p) not in partitions)
            if left:
                kept[topic] = left
        out[member_id] = dataclasses.replace(sub, owned_partitions=kept)
    return out


@dataclass(frozen=True, slots=True)
class MemberDelta:
    """A member's change after SyncGroup (KIP-429 3a)."""

    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]


def member_delta(owned: Set[TopicPartition], assigned: Set[TopicPartition]) -> MemberDelta:
    """newly-added = assigned - owned; revoked = owned - assigned."""
    return MemberDelta(frozenset(assigned) - owned, frozenset(owned) - assigned)
