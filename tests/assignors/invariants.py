"""Reusable checkers for the assignor invariants of notes/design.md.

Each ``check_*`` raises ``AssertionError`` with a message naming the offending member, topic or
partition. They take the assignor's plain inputs and outputs, so any assignor can be checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from aiogroup.protocol.types import Assignment, PartitionsByTopic, Subscription

__all__ = [
    "check_balanced",
    "check_complete",
    "check_cooperative_safe",
    "check_shape",
    "check_valid",
    "claims_of",
    "loads",
    "min_moves_uniform",
    "owners",
]

Result = Mapping[str, Assignment]


def _eligible(partitions_per_topic: Mapping[str, int], topics: Sequence[str]) -> set[str]:
    return {t for t in topics if partitions_per_topic.get(t, 0) > 0}


def owners(result: Result) -> dict[tuple[str, int], list[str]]:
    """Every assigned (topic, partition) and the members it went to."""
    out: dict[tuple[str, int], list[str]] = {}
    for member, assignment in result.items():
        for topic, parts in assignment.partitions.items():
            for p in parts:
                out.setdefault((topic, p), []).append(member)
    return out


def loads(result: Result) -> dict[str, int]:
    return {m: sum(map(len, a.partitions.values())) for m, a in result.items()}


def check_shape(subscriptions: Mapping[str, Subscription], result: Result) -> None:
    """One Assignment per member, topics sorted, partitions sorted, no empty topic entries."""
    assert set(result) == set(subscriptions), "not every member got an Assignment"
    for member, assignment in result.items():
        topics = list(assignment.partitions)
        assert topics == sorted(topics), f"{member}: topics not sorted"
        for topic, parts in assignment.partitions.items():
            assert isinstance(parts, tuple), f"{member}/{topic}: partitions not a tuple"
            assert parts, f"{member}/{topic}: empty partition list"
            assert list(parts) == sorted(set(parts)), f"{member}/{topic}: not sorted/unique"


def check_valid(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    result: Result,
) -> None:
    """Invariant 1: each partition to at most one member, only to a member subscribed to it,
    and only partitions that exist."""
    check_shape(subscriptions, result)
    for (topic, p), members in owners(result).items():
        assert len(members) == 1, f"{topic}-{p} assigned to {members}"
        assert 0 <= p < partitions_per_topic.get(topic, 0), f"{topic}-{p} does not exist"
        member = members[0]
        assert topic in subscriptions[member].topics, f"{member} not subscribed to {topic}"


def check_complete(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    result: Result,
) -> None:
    """Invariant 2: every partition of a subscribed topic is assigned."""
    wanted = set()
    for s in subscriptions.values():
        wanted |= _eligible(partitions_per_topic, list(s.topics))
    assigned = owners(result)
    for topic in wanted:
        for p in range(partitions_per_topic[topic]):
            assert (topic, p) in assigned, f"{topic}-{p} not assigned"


def check_balanced(
    partitions_per_topic: Mapping[str, int],
    subscriptions: Mapping[str, Subscription],
    result: Result,
) -> None:
    """Invariant 3: equal subscriptions -> counts differ by at most 1; otherwise no partition
    could move to an eligible member with 2+ fewer partitions."""
    load = loads(result)
    subs = {m: _eligible(partitions_per_topic, list(s.topics)) for m, s in subscriptions.items()}
    if not load:
        return
    if len({frozenset(s) for s in subs.values()}) == 1:
        assert max(load.values()) - min(load.values()) <= 1, f"unbalanced: {load}"
        return
    for member, assignment in result.items():
        for topic in assignment.partitions:
            for other, topics in subs.items():
                if topic in topics:
                    assert load[other] >= load[member] - 1, (
                        f"a partition of {topic} could move from {member} ({load[member]}) "
                        f"to {other} ({load[other]})"
                    )


def claims_of(subscriptions: Mapping[str, PartitionsByTopic]) -> dict[tuple[str, int], set[str]]:
    """(topic, partition) -> the members claiming it (malformed entries skipped)."""
    out: dict[tuple[str, int], set[str]] = {}
    for member, owned in subscriptions.items():
        for topic, parts in owned.items():
            for p in parts if isinstance(parts, Iterable) else ():
                if isinstance(p, int):
                    out.setdefault((topic, p), set()).add(member)
    return out


def check_cooperative_safe(owned: Mapping[str, PartitionsByTopic], result: Result) -> None:
    """Invariant 6: a partition goes to a member that did not claim it only if nobody claims
    it; and a claimed partition goes to a claimant only when no other member claims it with
    the same right (callers check generations separately)."""
    claims = claims_of(owned)
    for (topic, p), members in owners(result).items():
        member = members[0]
        claimants = claims.get((topic, p), set())
        if member not in claimants:
            assert not claimants, (
                f"{topic}-{p} assigned to {member} while {sorted(claimants)} still claim it"
            )


def min_moves_uniform(total: int, owned_counts: Sequence[int]) -> int:
    """The fewest partitions that must change hands with equal subscriptions, given how many
    valid, unconflicted partitions each member owns: quotas are ``total // M`` plus one for
    ``total % M`` members, best given to those owning the most."""
    members = len(owned_counts)
    if not members:
        return 0
    floor, extra = divmod(total, members)
    kept = 0
    for n in sorted(owned_counts, reverse=True):
        quota = floor + (1 if extra > 0 else 0)
        if extra > 0:
            extra -= 1
        kept += min(n, quota)
    return total - kept
