"""The uniform path: every member subscribes to the same topics.

Each member gets ``N // M`` partitions and ``N % M`` members one more (:func:`quotas_for`); the
one-more slots go first to members that own more than ``N // M``, which gives the fewest
moves. A member keeps what it owns up to its quota (the first ones in partition-then-topic
order, KAFKA-16277), and the free partitions are handed out in contiguous runs of
partition-then-topic order (:func:`hand_out`), so every member gets a spread of topics.

- :func:`uniform_by_topic`: when every claim is plainly valid (checked per topic with the
  claims index), a member's claim itself stands for what it keeps; only free partitions get ids.
- :func:`uniform_by_member`: otherwise, member by member: bad claims dropped with a warning,
  conflicts settled by generation.

Both give the same plan wherever the first applies.
"""

from __future__ import annotations

from bisect import bisect_left
from itertools import chain, filterfalse, repeat
from operator import add

from aiogroup.assignors.balancer.claims import (
    ClaimedIds,
    ClaimIndex,
    in_order,
    shared_index,
    tuple_len,
)
from aiogroup.assignors.balancer.layout import Layout, MemberClaim, Plan, resolve, valid_ids
from aiogroup.protocol.types import PartitionsByTopic

__all__ = [
    "hand_out",
    "owned_by_member",
    "quotas_for",
    "uniform",
    "uniform_by_member",
    "uniform_by_topic",
]


def uniform_by_topic(
    layout: Layout, member_ids: list[str], claims: list[MemberClaim], subscribed: frozenset[str]
) -> Plan | None:
    """The uniform path without a per-partition id for what members keep.

    Taken when every claim is plainly valid: each claimed topic is subscribed (by everyone:
    subscriptions are equal) and exists, each partition is an int that exists, and no
    partition is claimed twice (so there is no conflict to resolve and nothing to warn about).
    A member then keeps its whole claim unless it owns more than its quota, and its claim
    itself stands for what it keeps (:attr:`Plan.whole`); only free partitions get ids. The
    result is the one :func:`uniform` gives. ``None`` for anything else (the general code
    then validates member by member, with warnings).
    """
    maps = [c.owned for c in claims]
    try:
        index = shared_index(maps)
    except TypeError:  # a partition list that is not iterable
        return None
    count_of = layout.count_of
    for topic in index.claims:
        count = count_of.get(topic)
        if count is None or topic not in subscribed or not index.plain(topic, count):
            return None
    sizes: list[int] = []
    ordered: list[bool] = []
    for m in maps:
        try:
            # tuple_len refuses anything but a tuple: lists and the like take the general way.
            lens = list(map(tuple_len, m.values())) if m else []
        except TypeError:
            return None
        size = sum(lens)
        sizes.append(size)
        ordered.append(in_order(m, lens))
    total = layout.total
    quotas = quotas_for(total, sizes)
    kept: list[list[int]] = [[] for _ in maps]
    whole: list[PartitionsByTopic | None] = [m or None for m in maps]
    dropped: list[int] = []  # ids owned beyond a quota
    for i, (size, quota) in enumerate(zip(sizes, quotas, strict=True)):
        if size > quota:
            ids = sorted(valid_ids(layout, claims[i], subscribed)[0], key=layout.pt_key)
            kept[i] = ids[:quota]
            dropped.extend(ids[quota:])
            whole[i] = None
    have = [min(size, quota) for size, quota in zip(sizes, quotas, strict=True)]
    kept_total = sum(have)
    if kept_total == 0:
        pool = layout.pt_order()
    elif kept_total == total:
        pool = []
    elif (total - kept_total) * 8 < total:
        pool = free_in_pt_order(layout, index, dropped)
    else:
        offset_of = layout.offset_of
        kept_ids = set(
            chain.from_iterable(
                map(add, parts, repeat(offset_of[t])) for t, parts in index.claims.items()
            )
        )
        kept_ids.difference_update(dropped)
        pool = list(filterfalse(kept_ids.__contains__, layout.pt_order()))
    added = hand_out(pool, quotas, have)
    return Plan(layout, member_ids, kept, added, ClaimedIds(layout, index), whole, ordered)


def free_in_pt_order(layout: Layout, index: ClaimIndex, dropped: list[int]) -> list[int]:
    """Ids of the partitions nobody claims, plus ``dropped``, in partition-then-topic order
    (KAFKA-16277)."""
    ntopics = len(layout.topics)
    keys: list[int] = []  # partition * topics + topic: sorts in partition-then-topic order
    empty: list[int] = []
    for k, (topic, count) in enumerate(zip(layout.topics, layout.counts, strict=True)):
        if len(index.claims.get(topic, empty)) != count:
            keys.extend(p * ntopics + k for p in index.unclaimed(topic, count))
    part_of = layout.part_of
    offsets = layout.offsets
    for g in dropped:
        keys.append(part_of[g] * ntopics + bisect_left(offsets, g + 1) - 1)
    keys.sort()
    return [offsets[key % ntopics] + key // ntopics for key in keys]


def uniform_by_member(
    layout: Layout,
    member_ids: list[str],
    claims: list[MemberClaim],
    subscribed: list[frozenset[str]],
) -> Plan:
    """The uniform path, member by member: each claim validated (:func:`valid_ids`, with
    warnings), partitions claimed by several members settled (:func:`resolve`)."""
    owned, claimed = owned_by_member(layout, member_ids, claims, subscribed)
    if not claims:
        return Plan(layout, [], [], [], claimed)
    kept, added = uniform(layout, owned, claimed)
    return Plan(layout, member_ids, kept, added, claimed)


def owned_by_member(
    layout: Layout,
    member_ids: list[str],
    claims: list[MemberClaim],
    subscribed: list[frozenset[str]],
) -> tuple[list[list[int]], set[int]]:
    """What each member validly owns, as ids (bad claims dropped with a warning, partitions
    claimed by several members settled by generation), and every existing partition some
    member claims, valid or not (what the cooperative step must not hand over yet)."""
    owned: list[list[int]] = []
    claimed_lists: list[list[int]] = []
    foreign_any = False
    for claim, subs in zip(claims, subscribed, strict=True):
        valid, foreign = valid_ids(layout, claim, subs)
        owned.append(valid)
        if foreign:
            foreign_any = True
            claimed_lists.append(foreign)
    claimed: set[int] = set()
    for ids in owned:
        claimed.update(ids)
    if len(claimed) != sum(map(len, owned)):
        resolve(member_ids, [c.generation for c in claims], owned)
    if foreign_any:
        claimed.update(chain.from_iterable(claimed_lists))
    return owned, claimed


def uniform(
    layout: Layout, owned: list[list[int]], claimed: set[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """Everyone subscribes to the same topics: quotas of ``N // M`` and ``N // M + 1``."""
    total = layout.total
    quotas = quotas_for(total, list(map(len, owned)))

    kept: list[list[int]] = []
    trimmed = False
    for i, ids in enumerate(owned):
        quota = quotas[i]
        if len(ids) > quota:
            # Keep the first ones in partition-then-topic order (KAFKA-16277).
            ids = sorted(ids, key=layout.pt_key)[:quota]
            trimmed = True
        kept.append(ids)

    kept_total = sum(map(len, kept))
    if kept_total == 0:
        pool = layout.pt_order()
    elif kept_total == total:
        pool = []
    else:
        kept_set = claimed if not trimmed and kept_total == len(claimed) else None
        if kept_set is None:
            kept_set = set(chain.from_iterable(kept))
        free = total - kept_total
        if free * 8 < total:
            pool = sorted(filterfalse(kept_set.__contains__, range(total)), key=layout.pt_key)
        else:
            pool = list(filterfalse(kept_set.__contains__, layout.pt_order()))

    return kept, hand_out(pool, quotas, list(map(len, kept)))


def quotas_for(total: int, sizes: list[int]) -> list[int]:
    """Each member's share of ``total`` partitions with equal subscriptions: ``N // M``, and
    ``N % M`` members one more. The extra slots go first to members that own more than the
    floor (``sizes``: what each validly owns): each one saves a move."""
    members = len(sizes)
    floor, extra = divmod(total, members)
    plus = bytearray(members)
    slots = extra
    for i in range(members):
        if not slots:
            break
        if sizes[i] > floor:
            plus[i] = 1
            slots -= 1
    for i in range(members):
        if not slots:
            break
        if not plus[i]:
            plus[i] = 1
            slots -= 1
    return [floor + x for x in plus]


def hand_out(pool: list[int], quotas: list[int], kept: list[int]) -> list[list[int]]:
    """Slices of ``pool``, in member order, filling each member up to its quota."""
    added: list[list[int]] = []
    pos = 0
    for quota, have in zip(quotas, kept, strict=True):
        need = quota - have
        added.append(pool[pos : pos + need])
        pos += need
    return added
