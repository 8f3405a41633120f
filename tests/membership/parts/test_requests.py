"""Requests on their own: stamped actions and the tokens awaited."""

from __future__ import annotations

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.membership import actions as act
from aiogroup.membership.config import MemberConfig
from aiogroup.membership.requests import Requests
from aiogroup.membership.states import Request
from aiogroup.protocol import TopicPartition, decode_subscription

from ..helpers import EagerFixed, FixedAssignor, tps

R = Request


def requests(**kw: object) -> Requests:
    config = MemberConfig(
        group_id="g",
        assignors=[FixedAssignor(), EagerFixed()],
        **kw,  # type: ignore[arg-type]
    )
    return Requests(config)


def test_tokens_are_fresh_and_one_of_each_kind_is_awaited() -> None:
    r = requests()
    first = r.find_coordinator()
    assert first == act.FindCoordinator(1, "g") and r.waiting(R.FIND_COORDINATOR)
    again = r.find_coordinator()  # a new lookup supersedes the first
    assert not r.answered(R.FIND_COORDINATOR, first.token)  # stale
    assert r.answered(R.FIND_COORDINATOR, again.token)
    assert not r.waiting(R.FIND_COORDINATOR)
    assert not r.answered(R.FIND_COORDINATOR, again.token)  # answered once
    commit = r.commit("m", 1, None, during_join=False)
    assert commit.token == 3 and not r.waiting(R.COMMIT)  # commits: tracked elsewhere


def test_abandon() -> None:
    r = requests()
    hb = r.heartbeat("m", 1)
    assert not r.abandon(R.JOIN_GROUP)
    assert r.abandon(R.JOIN_GROUP, R.HEARTBEAT)
    assert not r.answered(R.HEARTBEAT, hb.token)
    r.heartbeat("m", 1)
    r.callbacks(RebalanceProtocol.COOPERATIVE, "m", 1)
    r.abandon_all()
    assert not r.waiting(R.HEARTBEAT) and not r.waiting(R.CALLBACKS)


def test_join_group_lists_every_assignor_in_preference_order() -> None:
    r = requests(group_instance_id="i-1", rack_id="rack-a", session_timeout_ms=10_000)
    join = r.join_group(
        "m", 4, topics=frozenset({"t", "u"}), owned=tps("t-0", "u-1"), reason="because"
    )
    assert [name for name, _ in join.protocols] == ["fixed", "eager-fixed"]
    sub = decode_subscription(join.protocols[0][1])
    assert list(sub.topics) == ["t", "u"] and sub.generation_id == 4 and sub.rack_id == "rack-a"
    assert sub.owned_partitions == {"t": (0,), "u": (1,)}
    assert (join.member_id, join.generation_id, join.group_instance_id) == ("m", 4, "i-1")
    assert join.session_timeout_ms == 10_000 and join.reason == "because"
    assert r.waiting(R.JOIN_GROUP) and r.answered(R.JOIN_GROUP, join.token)


def test_every_action_carries_the_stamp_it_was_built_with() -> None:
    r = requests(group_instance_id="i-1")
    sync = r.sync_group("m", 2, "fixed", (("m", b"x"),))
    hb = r.heartbeat("m", 2)
    leave = r.leave_group("m", 2, "bye")
    commit = r.commit("m", 2, {TopicPartition("t", 0): 5}, during_join=True)
    for a in (sync, hb, leave, commit):
        assert (a.group_id, a.member_id, a.generation_id, a.group_instance_id) == (
            "g",
            "m",
            2,
            "i-1",
        )
    assert sync.protocol_name == "fixed" and sync.assignments == (("m", b"x"),)
    assert leave.reason == "bye" and commit.during_join
    cb = r.callbacks(RebalanceProtocol.EAGER, "m", 2, revoked=tps("t-0"), lost=tps("t-1"))
    assert (cb.protocol, cb.revoked, cb.lost, cb.assigned) == (
        RebalanceProtocol.EAGER,
        tps("t-0"),
        tps("t-1"),
        None,
    )
    assert [a.token for a in (sync, hb, leave, commit, cb)] == [1, 2, 3, 4, 5]
