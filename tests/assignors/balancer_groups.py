"""Random groups for the tests of the balancer's parts, and the general path's state run up to
a given step (the tests of ``held``, ``general`` and ``detours`` look at it between steps)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, MemberClaim, balance
from aiogroup.assignors.balancer.fill import fill_unowned
from aiogroup.assignors.balancer.general import Rebalance, TopicSets, subscribers
from aiogroup.assignors.balancer.held import Held
from aiogroup.assignors.balancer.owned import Owned, OwnedClaims, OwnedIds


@dataclass
class Group:
    """Partition counts and, per member (sorted), its topics and its claim."""

    counts: dict[str, int]
    claims: list[MemberClaim]


@st.composite
def unequal_groups(draw: st.DrawFn, owning: bool = True) -> Group:
    """2-8 members on random subsets of 1-5 topics of 1-12 partitions. With ``owning``, each
    claims what a first plan gave it (as the previous generation), after one member left, one
    joined or a topic grew, and sometimes a partition claimed by two members at the same
    generation."""
    counts = {f"t{k}": draw(st.integers(1, 12)) for k in range(draw(st.integers(1, 5)))}
    names = sorted(counts)
    size = draw(st.integers(2, 8))
    topics = {
        f"m{i}": sorted(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
        for i in range(size)
    }
    if not owning:
        return Group(counts, [MemberClaim(m, ts) for m, ts in sorted(topics.items())])
    first = balance(counts, [MemberClaim(m, ts) for m, ts in topics.items()]).assignments()
    change = draw(st.sampled_from(["leave", "join", "grow", "conflict", "none"]))
    now = dict(counts)
    if change == "leave":
        del topics[draw(st.sampled_from(sorted(topics)))]
    elif change == "join":
        topics["m9"] = sorted(draw(st.lists(st.sampled_from(names), min_size=1, unique=True)))
    elif change == "grow":
        now[draw(st.sampled_from(names))] += draw(st.integers(1, 5))
    claims = []
    for m, ts in sorted(topics.items()):
        owned = dict(first.get(m, {}))
        if change == "conflict" and m == min(topics):
            other = first[max(topics)]
            for t, ps in list(other.items())[:1]:
                owned[t] = tuple(sorted(set(owned.get(t, ())) | set(ps[:1])))
        claims.append(MemberClaim(m, ts, owned, 1))
    return Group(now, claims)


@dataclass
class State:
    """The general path's state after its fill and, once :meth:`rebalance` ran, its moves."""

    layout: Layout
    member_ids: list[str]
    subscribed: list[frozenset[str]]
    owned: Owned
    subs: list[list[int]]
    topics_of: list[list[int]]
    topic_sets: TopicSets
    load: list[int]
    filled_by: list[int]
    fills: list[list[int]]
    held: Held
    moves: Rebalance

    def rebalance(self) -> State:
        self.moves.run()
        return self


def filled(group: Group, hinted: dict[int, int] | None = None, record: bool = True) -> State:
    """The general path's state after the fill (:func:`fill_unowned`), as
    :func:`~aiogroup.assignors.balancer.general.general` builds it. ``record=False``: the
    fill's notes are not given to ``Held`` (it then finds each run's topic from its ids)."""
    layout = Layout(group.counts)
    member_ids = [c.member_id for c in group.claims]
    subscribed = [frozenset(c.topics) & frozenset(group.counts) for c in group.claims]
    owned: Owned | None = OwnedClaims.of(layout, group.claims, subscribed)
    if owned is None:
        owned = OwnedIds(layout, member_ids, group.claims, subscribed)
    subs, topics_of = subscribers(layout, subscribed)
    topic_sets = TopicSets(topics_of)
    load = list(owned.loads)
    filled_by = [-1] * layout.total
    fills: list[list[int]] = [[] for _ in member_ids]
    by_level = sorted(range(len(layout.topics)), key=lambda k: (len(subs[k]), k))
    order, runs = fill_unowned(
        layout, owned, subscribed, subs, hinted or {}, load, filled_by, fills, by_level
    )
    if not record:
        order = runs = None
    held = Held(layout, owned, fills, order, runs)
    moves = Rebalance(layout, owned, subs, topics_of, topic_sets, load, held, filled_by)
    return State(
        layout,
        member_ids,
        subscribed,
        owned,
        subs,
        topics_of,
        topic_sets,
        load,
        filled_by,
        fills,
        held,
        moves,
    )


def holdings(state: State) -> dict[int, int]:
    """Who holds each id, from ``held`` (every member grouped)."""
    out: dict[int, int] = {}
    for i in range(len(state.member_ids)):
        for ids in state.held[i].values():
            for g in ids:
                assert g not in out, f"id {g} held twice"
                out[g] = i
    return out


def violations(state: State, load: list[int]) -> int:
    """Partitions held by a member with 2+ more than the least loaded subscriber of their
    topic (0 for a balanced plan)."""
    least = [min((load[v] for v in s), default=0) for s in state.subs]
    return sum(
        len(ids)
        for i in range(len(state.member_ids))
        for k, ids in state.held[i].items()
        if load[i] - least[k] >= 2
    )


def moved(state: State) -> int:
    """Ids held by a member that does not validly own them."""
    owner_of = state.owned.owner_of
    return sum(1 for g, i in holdings(state).items() if owner_of[g] != i)
