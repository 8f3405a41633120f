"""The balancer's fast paths give exactly what its general code gives.

With equal subscriptions and plainly valid claims, the uniform path keeps each member's claim
whole instead of turning it into partition ids (``uniform_by_topic``). It must return the
same assignment, byte for byte once encoded, the same move count and, under COOPERATIVE, the
same withheld partitions as the member-by-member code, which is run here by switching the fast
path off.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer import Layout, MemberClaim, entry
from aiogroup.assignors.balancer.uniform import uniform_by_topic
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol import encode_assignment, encode_sticky_user_data
from aiogroup.protocol.types import Assignment, Subscription

Case = tuple[dict[str, int], dict[str, Subscription]]


@st.composite
def uniform_groups(draw: st.DrawFn) -> Case:
    """Equal subscriptions; claims that are mostly valid and disjoint (the fast path), with
    sometimes a shape that must send it back to the general code: a partition claimed twice, a
    list instead of a tuple, an empty tuple, a claim of another or a missing topic or partition.
    """
    ntopics = draw(st.integers(1, 4))
    ppt = {f"t{k}": draw(st.integers(0, 6)) for k in range(ntopics)}
    topics = sorted(ppt)
    if draw(st.booleans()):
        topics.append("absent")  # subscribed, not in the metadata
    members = [f"m{i}" for i in range(draw(st.integers(1, 6)))]
    existing = [(t, p) for t, n in ppt.items() for p in range(n)]
    rnd = random.Random(draw(st.integers(0, 2**16)))
    rnd.shuffle(existing)
    cuts = sorted(
        draw(
            st.lists(
                st.integers(0, len(existing)), min_size=len(members) - 1, max_size=len(members) - 1
            )
        )
    )
    subs: dict[str, Subscription] = {}
    for i, m in enumerate(members):
        lo = cuts[i - 1] if i else 0
        hi = cuts[i] if i < len(cuts) else len(existing)
        mine = existing[lo:hi] if draw(st.integers(0, 3)) else []
        owned: dict[str, list[int]] = {}
        for t, p in mine:
            owned.setdefault(t, []).append(p)
        odd = draw(st.integers(0, 12))
        if odd == 0 and existing:
            t, p = existing[0]
            owned.setdefault(t, []).append(p)  # claimed twice (maybe by another member too)
        elif odd == 1:
            owned.setdefault("t0", [])  # an empty list
        elif odd == 2:
            owned.setdefault("ghost", []).append(0)
        elif odd == 3:
            owned.setdefault("t0", []).append(99)
        keys = list(owned)
        rnd.shuffle(keys)
        as_list = draw(st.integers(0, 8)) == 0
        claim = {
            t: (list(owned[t]) if as_list else tuple(rnd.sample(owned[t], len(owned[t]))))
            for t in keys
        }
        subs[m] = Subscription(list(topics), None, claim, draw(st.integers(-1, 2)), version=3)
    return ppt, subs


def _took_fast_path(ppt: dict[str, int], subs: dict[str, Subscription]) -> bool:
    claims = [
        MemberClaim(m, s.topics, s.owned_partitions, s.generation_id)
        for m, s in sorted(subs.items())
    ]
    layout = Layout({t: n for t, n in ppt.items() if n > 0})
    subscribed = frozenset(next(iter(subs.values())).topics).intersection(layout.count_of)
    return uniform_by_topic(layout, sorted(subs), claims, subscribed) is not None


def _general_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entry, "uniform_by_topic", lambda *args: None)


def _wire(result: dict[str, Assignment]) -> list[tuple[str, bytes]]:
    return [(m, encode_assignment(a)) for m, a in sorted(result.items())]


def _shape(result: dict[str, Assignment]) -> list[object]:
    """Everything visible: member order, topic order, tuple types and values."""
    return [
        (m, [(t, type(ps).__name__, tuple(ps)) for t, ps in a.partitions.items()])
        for m, a in result.items()
    ]


@settings(max_examples=400, deadline=None)
@given(uniform_groups())
def test_uniform_fast_path_equals_the_general_code(case: Case) -> None:
    ppt, subs = case
    fast = CooperativeStickyAssignor()
    got = fast.assign(ppt, subs)
    event("fast path" if _took_fast_path(ppt, subs) else "general code")
    with pytest.MonkeyPatch.context() as mp:
        _general_only(mp)
        slow = CooperativeStickyAssignor()
        want = slow.assign(ppt, subs)
    assert _shape(got) == _shape(want)
    assert _wire(got) == _wire(want)
    assert (fast.last_moved, fast.last_withheld) == (slow.last_moved, slow.last_withheld)
    assert fast._pending == slow._pending


@settings(max_examples=150, deadline=None)
@given(uniform_groups())
def test_eager_sticky_fast_path_equals_the_general_code(case: Case) -> None:
    ppt, coop = case
    subs = {
        m: Subscription(
            s.topics,
            encode_sticky_user_data(
                {t: tuple(ps) for t, ps in s.owned_partitions.items()}, s.generation_id
            ),
            version=0,
        )
        for m, s in coop.items()
    }
    fast = StickyAssignor()
    got = fast.assign(ppt, subs)
    with pytest.MonkeyPatch.context() as mp:
        _general_only(mp)
        slow = StickyAssignor()
        want = slow.assign(ppt, subs)
    assert _shape(got) == _shape(want)
    assert fast.last_moved == slow.last_moved


def test_fast_path_is_taken_for_plain_claims() -> None:
    """A balanced group that lost a member: the shape the fast path exists for."""
    ppt = {f"t{k}": 30 for k in range(20)}
    first = CooperativeStickyAssignor().assign(
        ppt, {f"m{i:02d}": Subscription(sorted(ppt)) for i in range(30)}
    )
    subs = {
        m: Subscription(sorted(ppt), None, a.partitions, 1) for m, a in first.items() if m != "m07"
    }
    calls: list[object] = []
    real = uniform_by_topic

    def spy(*args: object) -> object:
        calls.append(result := real(*args))  # type: ignore[arg-type]
        return result

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(entry, "uniform_by_topic", spy)
        assignor = CooperativeStickyAssignor()
        result = assignor.assign(ppt, subs)
    assert calls and calls[0] is not None
    assert assignor.last_moved == 20 and assignor.last_withheld == 0
    for m, sub in subs.items():  # nothing revoked
        for t, ps in sub.owned_partitions.items():
            assert set(ps) <= set(result[m].partitions[t])


def test_an_empty_partition_list_claims_nothing(caplog: pytest.LogCaptureFixture) -> None:
    """As many partitions as topics is not one per topic: ``{t0: (), t1: (0, 1)}`` claims
    t1-0 and t1-1 only. The general code used to read it as t0-0 and t1-1, so m1 seemed to
    contest m3's t0-0, a warning was logged and t1-0 counted as moved."""
    ppt = {"t0": 2, "t1": 2}
    topics = ["t0", "t1"]
    subs = {
        "m1": Subscription(topics, None, {"t0": (), "t1": (0, 1)}, 1),
        "m3": Subscription(topics, None, {"t0": (0,)}, 1),
    }
    for general in (False, True):
        with pytest.MonkeyPatch.context() as mp:
            if general:
                _general_only(mp)
            assignor = CooperativeStickyAssignor()
            result = assignor.assign(ppt, subs)
        assert result["m1"].partitions == {"t1": (0, 1)}
        assert result["m3"].partitions == {"t0": (0, 1)}
        assert assignor.last_moved == 1
    assert not caplog.records
