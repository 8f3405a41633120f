"""A whole-group simulation: random joins, leaves, subscription changes and stale rejoins.

Each rebalance's output is fed back as the next round's claims, with real generations: under
COOPERATIVE a member drops what it was not assigned (revoked or withheld) as a real member would,
and rejoins if it revoked anything (KIP-429); under EAGER the previous assignment travels in
sticky user data (KIP-341). After every event the group must converge: in at most two rounds
(cooperative) or one (eager), ending complete, balanced and stable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.base import GroupMetadata, PartitionAssignor
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol.types import Assignment, PartitionsByTopic, Subscription
from tests.assignors.invariants import (
    check_balanced,
    check_complete,
    check_cooperative_safe,
    check_valid,
)


@dataclass
class Member:
    topics: list[str]
    owned: dict[str, tuple[int, ...]] = field(default_factory=dict)
    generation: int = -1
    assignor: PartitionAssignor | None = None


def total(owned: PartitionsByTopic) -> int:
    return sum(map(len, owned.values()))


class Group:
    def __init__(self, ppt: dict[str, int], cooperative: bool, new_leaders: bool = False) -> None:
        self.ppt = ppt
        self.cooperative = cooperative
        # A different member leads every rebalance: no memory of what was withheld.
        self.new_leaders = new_leaders
        self.members: dict[str, Member] = {}
        self.generation = 0
        self.leader: PartitionAssignor = (
            CooperativeStickyAssignor() if cooperative else StickyAssignor()
        )

    def new_assignor(self) -> PartitionAssignor:
        return CooperativeStickyAssignor() if self.cooperative else StickyAssignor()

    def subscriptions(self) -> dict[str, Subscription]:
        subs = {}
        for m, mem in self.members.items():
            assert mem.assignor is not None
            data = mem.assignor.subscription_user_data(set(mem.topics))
            if self.cooperative:
                subs[m] = Subscription(mem.topics, data, mem.owned, mem.generation, version=3)
            else:
                subs[m] = Subscription(mem.topics, data, version=0)
        return subs

    def rebalance(self) -> tuple[dict[str, Assignment], bool]:
        """One round; returns the result and whether anyone must rejoin."""
        self.generation += 1
        subs = self.subscriptions()
        if self.new_leaders:
            self.leader = self.new_assignor()
        result = self.leader.assign(self.ppt, subs)
        check_valid(self.ppt, subs, result)
        if self.cooperative:
            check_cooperative_safe({m: s.owned_partitions for m, s in subs.items()}, result)
        rejoin = False
        for m, mem in self.members.items():
            got = result[m].partitions
            revoked = any(set(ps) - set(got.get(t, ())) for t, ps in mem.owned.items() if ps)
            rejoin = rejoin or revoked
            mem.owned = {t: tuple(ps) for t, ps in got.items()}
            mem.generation = self.generation
            assert mem.assignor is not None
            mem.assignor.on_assignment(result[m], GroupMetadata(self.generation, m))
        return result, rejoin

    def converge(self) -> int:
        """Rebalance until nobody needs to rejoin; returns the number of rounds."""
        rounds = 0
        while True:
            result, rejoin = self.rebalance()
            rounds += 1
            if not rejoin or not self.cooperative:
                break
            assert rounds < 2, "a second round still revoked partitions"
        subs = self.subscriptions()
        check_complete(self.ppt, subs, result)
        check_balanced(self.ppt, subs, result)
        # Stable: one more round moves nothing.
        again, rejoin = self.rebalance()
        assert not rejoin
        assert {m: dict(a.partitions) for m, a in again.items()} == {
            m: dict(a.partitions) for m, a in result.items()
        }
        return rounds


def simulate(seed: int, cooperative: bool, steps: int, new_leaders: bool = False) -> None:
    rnd = random.Random(seed)
    topics = [f"t{i}" for i in range(rnd.randint(1, 5))]
    ppt = {t: rnd.randint(0, 9) for t in topics}
    uniform = new_leaders or rnd.random() < 0.5
    group = Group(ppt, cooperative, new_leaders)
    next_id = 0
    zombies: list[tuple[str, Member]] = []

    def pick_topics() -> list[str]:
        return list(topics) if uniform else rnd.sample(topics, rnd.randint(1, len(topics)))

    def join() -> None:
        nonlocal next_id
        name = f"m{next_id:03d}"
        next_id += 1
        group.members[name] = Member(pick_topics(), assignor=group.new_assignor())

    for _ in range(rnd.randint(1, 4)):
        join()
    group.converge()
    for _ in range(steps):
        event = rnd.choice(["join", "leave", "resubscribe", "zombie", "rejoin", "partitions"])
        if event == "join" or not group.members:
            join()
        elif event == "leave" and len(group.members) > 1:
            del group.members[rnd.choice(sorted(group.members))]
        elif event == "resubscribe" and not uniform:
            mem = group.members[rnd.choice(sorted(group.members))]
            mem.topics = pick_topics()
            if rnd.random() < 0.5:  # KIP-429 1.a: revoke what is no longer subscribed
                mem.owned = {t: ps for t, ps in mem.owned.items() if t in mem.topics}
        elif event == "zombie" and len(group.members) > 1:
            # Paused past its session timeout: the group moves on without it.
            name = rnd.choice(sorted(group.members))
            old = group.members.pop(name)
            zombies.append((name, Member(old.topics, dict(old.owned), old.generation)))
        elif event == "rejoin" and zombies:
            # It comes back believing it still owns its partitions (KAFKA-7026, KAFKA-13406).
            name, mem = zombies.pop()
            mem.assignor = group.new_assignor()
            if not cooperative:
                mem.assignor.on_assignment(Assignment(mem.owned), GroupMetadata(mem.generation))
            group.members[name] = mem
        elif event == "partitions":
            t = rnd.choice(topics)
            ppt[t] += rnd.randint(1, 3)
        group.converge()


@settings(max_examples=40)
@given(st.integers(0, 2**32), st.booleans())
def test_simulation_converges(seed: int, cooperative: bool) -> None:
    simulate(seed, cooperative, steps=8)


@settings(max_examples=25)
@given(st.integers(0, 2**32))
def test_simulation_uniform_converges_whoever_leads(seed: int) -> None:
    """With equal subscriptions two rounds suffice even when the leader of the follow-up round
    has no memory of the first (the quota path is convergent by construction)."""
    simulate(seed, True, steps=10, new_leaders=True)


@pytest.mark.slow
@settings(max_examples=150)
@given(st.integers(0, 2**32), st.booleans())
def test_simulation_converges_long(seed: int, cooperative: bool) -> None:
    simulate(seed, cooperative, steps=25)


def test_simulation_large_uniform_group() -> None:
    """Bigger numbers, fixed seed: 40 members, 6 topics x 50 partitions, churn."""
    rnd = random.Random(7)
    ppt = {f"t{i}": 50 for i in range(6)}
    group = Group(ppt, cooperative=True)
    for i in range(40):
        group.members[f"m{i:02d}"] = Member(list(ppt), assignor=group.new_assignor())
    group.converge()
    for step in range(10):
        if step % 2:
            del group.members[rnd.choice(sorted(group.members))]
        else:
            name = f"n{step:02d}"
            group.members[name] = Member(list(ppt), assignor=group.new_assignor())
        assert group.converge() <= 2
