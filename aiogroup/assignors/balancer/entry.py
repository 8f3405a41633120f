"""The entry point: :func:`balance` checks the input and picks the path.

- Equal subscriptions: :func:`~aiogroup.assignors.balancer.uniform.uniform_by_topic` when every
  claim is plainly valid, else
  :func:`~aiogroup.assignors.balancer.uniform.uniform_by_member`.
- Unequal subscriptions: :func:`~aiogroup.assignors.balancer.general.general`, with what each
  member validly owns (:class:`~aiogroup.assignors.balancer.owned.OwnedClaims`, else
  :class:`~aiogroup.assignors.balancer.owned.OwnedIds`) and the hinted partitions as ids.
- With racks that matter (KIP-881, :func:`~aiogroup.assignors.balancer.racks.rack_view`):
  :func:`~aiogroup.assignors.balancer.racks.uniform_racks` for equal subscriptions, the general
  path then :func:`~aiogroup.assignors.balancer.racks.improve_matches` otherwise.

:func:`gc_paused` pauses the cyclic garbage collector around one assignment.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from aiogroup.assignors.balancer.general import general
from aiogroup.assignors.balancer.layout import Layout, MemberClaim, Plan
from aiogroup.assignors.balancer.owned import OwnedClaims, OwnedIds
from aiogroup.assignors.balancer.racks import improve_matches, rack_view, uniform_racks
from aiogroup.assignors.balancer.uniform import uniform_by_member, uniform_by_topic
from aiogroup.assignors.base import PartitionRacks
from aiogroup.assignors.range import refuse_bare_string

__all__ = ["balance", "gc_paused"]

logger = logging.getLogger("aiogroup.assignors")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for one assignment.

    A large assignment allocates millions of small acyclic objects (ints, tuples, dicts); each
    allocation burst would make the cyclic collector rescan all of them, about a tenth of the
    time at 1M partitions. Nothing cyclic is created, so pausing it loses nothing; it is
    re-enabled on the way out, exceptions included.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def balance(
    partitions_per_topic: Mapping[str, int],
    members: Iterable[MemberClaim],
    hint: Mapping[tuple[str, int], str] | None = None,
    partition_racks: PartitionRacks | None = None,
) -> Plan:
    """Compute a balanced, sticky plan. Pure and deterministic.

    ``hint`` optionally names, for some partitions, the member a previous plan meant them for
    (the cooperative step withheld them until revoked, KIP-429). With unequal subscriptions a
    free partition goes to its hinted member first when that member can take it, so the
    follow-up round reproduces the plan it completes; balancing still applies afterwards.
    ``partition_racks``: the racks of the partitions' replicas, matched against each member's
    ``rack`` (KIP-881); ``None``, or racks that change nothing, give the plan without racks.
    """
    by_id: dict[str, MemberClaim] = {}
    for claim in members:
        refuse_bare_string(claim.member_id, claim.topics)
        by_id[claim.member_id] = claim
    member_ids = sorted(by_id)
    claims = [by_id[m] for m in member_ids]

    # Members usually share one topic list: compute each distinct subscription once. Each
    # list is hashed once (a tuple keeps no hash, and 2,000 lists of 250 topics take
    # milliseconds per pass): per member, the position of the first member with its list.
    topic_lists = [tuple(c.topics) for c in claims]
    distinct: dict[tuple[str, ...], int] = {}
    firsts = list(map(distinct.setdefault, topic_lists, range(len(topic_lists))))
    wanted: set[str] = set().union(*distinct)
    counts: dict[str, int] = {}
    for topic in wanted:
        n = partitions_per_topic.get(topic)
        if n is None:
            continue
        if type(n) is not int or n < 0:
            logger.warning("topic %r has an invalid partition count %r; ignored", topic, n)
            continue
        if n:
            counts[topic] = n
    layout = Layout.of(counts)

    known = frozenset(counts)
    # The subscription of each distinct list, by the position of its first member.
    subscriptions = _subscriptions(distinct, known, len(claims))
    of_first = dict(zip(distinct.values(), subscriptions, strict=True))
    subscribed = list(map(of_first.__getitem__, firsts))
    view = None if partition_racks is None else rack_view(layout, claims, partition_racks)
    if claims and all(s is subscribed[0] or s == subscribed[0] for s in subscribed):
        if view is not None:
            return uniform_racks(layout, member_ids, claims, subscribed, view)
        fast = uniform_by_topic(layout, member_ids, claims, subscribed[0])
        if fast is not None:
            return fast
    uniform = not claims or all(s == subscribed[0] for s in subscribed)
    if not uniform:
        hinted: dict[int, int] = {}
        if hint:
            position = {m: i for i, m in enumerate(member_ids)}
            for (topic, p), member in hint.items():
                k = layout.index.get(topic)
                to = position.get(member)
                if k is not None and to is not None and 0 <= p < layout.counts[k]:
                    hinted[layout.offsets[k] + p] = to
        owned_view: OwnedIds | OwnedClaims | None = OwnedClaims.of(layout, claims, subscribed)
        if owned_view is None:
            owned_view = OwnedIds(layout, member_ids, claims, subscribed)
        plan = general(layout, member_ids, subscribed, owned_view, hinted)
        if view is not None:
            return improve_matches(plan, claims, subscribed, view)
        return plan
    return uniform_by_member(layout, member_ids, claims, subscribed)


#: The topics known to the last :func:`balance` call, and what each topic list it met
#: subscribes to of them (members keep their subscriptions from one rebalance to the next).
_last_subscribed: tuple[frozenset[str], dict[tuple[str, ...], frozenset[str]]] | None = None


def _subscriptions(
    distinct: Iterable[tuple[str, ...]], known: frozenset[str], members: int
) -> list[frozenset[str]]:
    """:func:`_subscribed` of each of ``distinct``, in order, kept from the last call with the
    same ``known`` topics (cleared when it has grown well past the number of ``members``). The
    sets are shared: nobody may change them (they are frozen)."""
    global _last_subscribed
    last = _last_subscribed
    if last is None or last[0] != known or len(last[1]) > 2 * members + 64:
        last = _last_subscribed = (known, {})
    seen = last[1]
    out: list[frozenset[str]] = []
    for topics in distinct:
        subscribed = seen.get(topics)
        if subscribed is None:
            subscribed = seen[topics] = _subscribed(topics, known)
        out.append(subscribed)
    return out


def _subscribed(topics: tuple[str, ...], known: frozenset[str]) -> frozenset[str]:
    """The topics of a subscription that have partitions."""
    mine = frozenset(topics)
    return mine if mine <= known else mine & known
