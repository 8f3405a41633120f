"""The least loaded subscriber of a topic (:mod:`aiogroup.assignors.balancer.least`).

``LeastLoaded`` finds the least loaded subscriber of a topic (lowest index on ties) from bit
sets, and whether a lighter member shares a topic with a donor: each answer must be the one the
plain minimum gives, or the plan changes.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aiogroup.assignors.balancer.least import LeastLoaded


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_least_loaded_is_the_minimum(data: st.DataObject) -> None:
    members = data.draw(st.integers(1, 10))
    ntopics = data.draw(st.integers(1, 6))
    topics_of = [
        data.draw(st.lists(st.integers(0, ntopics - 1), unique=True)) for _ in range(members)
    ]
    subs = [[i for i in range(members) if k in topics_of[i]] for k in range(ntopics)]
    load = data.draw(st.lists(st.integers(0, 5), min_size=members, max_size=members))
    finder = LeastLoaded(members, subs, load, topics_of)
    for _ in range(data.draw(st.integers(0, 8))):
        i = data.draw(st.integers(0, members - 1))
        new = max(0, load[i] + data.draw(st.integers(-2, 2)))
        finder.moved(i, load[i], new)
        load[i] = new
        for k in range(ntopics):
            want = min(((load[m], m) for m in subs[k]), default=(0, -1))[1]
            assert finder.least_of(k) == want
    for a in range(members):
        for limit in range(-1, 7):
            near = {m for k in topics_of[a] for m in subs[k]}
            want_near = any(load[m] <= limit for m in near)
            finder2 = LeastLoaded(members, subs, list(load), topics_of)
            assert finder2.lighter_near(a, limit) == want_near
