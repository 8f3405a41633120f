"""Table tests of ``cooperative-sticky`` (KIP-429) and its adjust step."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aiogroup.assignors._cooperative import withhold_transfers
from aiogroup.assignors.balancer import MemberClaim, balance
from aiogroup.assignors.base import GroupMetadata, RebalanceProtocol
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor, generation_of
from aiogroup.protocol import (
    encode_cooperative_user_data,
    encode_sticky_user_data,
    generation_from_user_data,
)
from aiogroup.protocol.types import Assignment, PartitionsByTopic, Subscription
from tests.assignors.invariants import (
    check_balanced,
    check_complete,
    check_cooperative_safe,
    check_valid,
)


def sub(topics: list[str], owned: PartitionsByTopic | None = None, gen: int = -1) -> Subscription:
    """A V2+ Subscription, as Java, librdkafka and franz-go write it."""
    return Subscription(topics, owned_partitions=owned or {}, generation_id=gen, version=3)


def parts(result: dict[str, Assignment]) -> dict[str, dict[str, tuple[int, ...]]]:
    return {m: {t: tuple(ps) for t, ps in a.partitions.items()} for m, a in result.items()}


def next_round(
    subs: dict[str, Subscription], result: dict[str, Assignment], gen: int
) -> dict[str, Subscription]:
    """What members send next: what they were assigned, at the new generation."""
    return {m: sub(list(s.topics), result[m].partitions, gen) for m, s in subs.items()}


def test_identity() -> None:
    a = CooperativeStickyAssignor()
    assert a.name == "cooperative-sticky"
    # Java's order; COOPERATIVE first makes [range, cooperative-sticky] upgrades possible.
    assert a.supported_protocols == (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)


def test_kip429_new_member_joins() -> None:
    """KIP-429's example: C1 owns a-0 and b-0, C2 joins. Round 1 only revokes b-0 (C2 gets
    nothing yet); round 2 gives b-0 to C2. a-0 never moves."""
    ppt = {"a": 1, "b": 1}
    a = CooperativeStickyAssignor()
    subs = {"C1": sub(["a", "b"], {"a": (0,), "b": (0,)}, 1), "C2": sub(["a", "b"])}
    r1 = a.assign(ppt, subs)
    assert parts(r1) == {"C1": {"a": (0,)}, "C2": {}}
    assert a.last_withheld == 1
    r2 = a.assign(ppt, next_round(subs, r1, 2))
    assert parts(r2) == {"C1": {"a": (0,)}, "C2": {"b": (0,)}}
    assert a.last_withheld == 0


def test_equal_generation_conflict_withheld_from_everyone() -> None:
    """Java's CooperativeStickyAssignorTest (KAFKA-12984): c1 and c2 both claim t-0 at the same
    generation. Nobody keeps it and, because both may still hold it, nobody gets it this round."""
    ppt = {"t": 3}
    subs = {
        "c1": sub(["t"], {"t": (0, 1)}, 2),
        "c2": sub(["t"], {"t": (0, 2)}, 2),
        "c3": sub(["t"]),
    }
    result = CooperativeStickyAssignor().assign(ppt, subs)
    assert parts(result) == {"c1": {"t": (1,)}, "c2": {"t": (2,)}, "c3": {}}


def test_highest_generation_keeps_conflicted_partition() -> None:
    ppt = {"t": 2}
    subs = {"c1": sub(["t"], {"t": (0,)}, 5), "c2": sub(["t"], {"t": (0, 1)}, 4)}
    result = CooperativeStickyAssignor().assign(ppt, subs)
    assert parts(result) == {"c1": {"t": (0,)}, "c2": {"t": (1,)}}


def test_stale_rejoin_gets_nothing_claimed_kafka_13406() -> None:
    """A member that missed a generation rejoins with its old partitions; the current owners
    keep them; the stale member receives only unclaimed partitions, after revocation."""
    ppt = {"t": 4}
    subs = {
        "old": sub(["t"], {"t": (0, 1, 2, 3)}, 1),
        "x": sub(["t"], {"t": (0, 1)}, 3),
        "y": sub(["t"], {"t": (2, 3)}, 3),
    }
    a = CooperativeStickyAssignor()
    r1 = a.assign(ppt, subs)
    check_cooperative_safe({m: s.owned_partitions for m, s in subs.items()}, r1)
    assert parts(r1)["old"] == {}
    r2 = a.assign(ppt, next_round(subs, r1, 4))
    check_complete(ppt, subs, r2)
    check_balanced(ppt, subs, r2)


def test_spread_after_join_kafka_16277() -> None:
    """One member owns both topics entirely; after a join both members end with half of each
    topic, not one topic each."""
    ppt = {"a": 4, "b": 4}
    a = CooperativeStickyAssignor()
    subs = {"c1": sub(["a", "b"], {"a": (0, 1, 2, 3), "b": (0, 1, 2, 3)}, 1), "c2": sub(["a", "b"])}
    r1 = a.assign(ppt, subs)
    r2 = a.assign(ppt, next_round(subs, r1, 2))
    assert parts(r2) == {"c1": {"a": (0, 1), "b": (0, 1)}, "c2": {"a": (2, 3), "b": (2, 3)}}


def test_unsubscribed_topic_withheld_until_revoked() -> None:
    """c1 changed its subscription from u to t but still holds u-0 until it revokes it (KIP-70
    semantics): c2 may only get u-0 in the next round."""
    ppt = {"t": 1, "u": 1}
    a = CooperativeStickyAssignor()
    subs = {"c1": sub(["t"], {"u": (0,)}, 1), "c2": sub(["u"])}
    r1 = a.assign(ppt, subs)
    assert parts(r1) == {"c1": {"t": (0,)}, "c2": {}}
    r2 = a.assign(ppt, next_round(subs, r1, 2))
    assert parts(r2) == {"c1": {"t": (0,)}, "c2": {"u": (0,)}}


def test_eager_protocol_does_not_withhold() -> None:
    """Under EAGER (the first bounce of an upgrade) members revoked everything: no withholding."""
    ppt = {"a": 1, "b": 1}
    subs = {"C1": sub(["a", "b"], {"a": (0,), "b": (0,)}, 1), "C2": sub(["a", "b"])}
    result = CooperativeStickyAssignor(RebalanceProtocol.EAGER).assign(ppt, subs)
    assert parts(result) == {"C1": {"a": (0,)}, "C2": {"b": (0,)}}


@pytest.mark.parametrize(
    ("subscription", "expected"),
    [
        # V2+: the field wins, user data is ignored (KIP-792).
        (Subscription(["t"], encode_cooperative_user_data(9), generation_id=4, version=2), 4),
        (Subscription(["t"], None, generation_id=-1, version=3), -1),
        # V1 and older: Java's bare int32 ...
        (Subscription(["t"], encode_cooperative_user_data(9), version=1), 9),
        # ... librdkafka / franz-go's sticky v1 block ...
        (Subscription(["t"], encode_sticky_user_data({"t": (0,)}, 6), version=1), 6),
        # ... kafka-python's empty user data.
        (Subscription(["t"], b"", version=1), -1),
        (Subscription(["t"], None, version=0), -1),
    ],
)
def test_generation_sources(subscription: Subscription, expected: int) -> None:
    assert generation_of("m", subscription) == expected


def test_undecodable_generation_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="aiogroup.assignors"):
        assert generation_of("m", Subscription(["t"], b"\x00\x00\x00\x01\x00", version=1)) == -1
    assert "cannot be decoded" in caplog.text


def test_v1_generation_from_user_data_decides_conflict() -> None:
    """A V1 member (no generation field) whose user data carries a higher generation wins."""
    ppt = {"t": 2}
    subs = {
        "java": Subscription(
            ["t"], encode_cooperative_user_data(8), owned_partitions={"t": (0,)}, version=1
        ),
        "other": sub(["t"], {"t": (0, 1)}, 7),
    }
    result = CooperativeStickyAssignor().assign(ppt, subs)
    assert parts(result) == {"java": {"t": (0,)}, "other": {"t": (1,)}}


def test_user_data_is_java_bare_int32() -> None:
    a = CooperativeStickyAssignor()
    assert generation_from_user_data(a.subscription_user_data({"t"})) == -1
    a.on_assignment(Assignment({"t": (0,)}), GroupMetadata(generation_id=12))
    data = a.subscription_user_data({"t"})
    assert data == encode_cooperative_user_data(12)
    assert data is not None and len(data) == 4
    a.reset()
    assert generation_from_user_data(a.subscription_user_data({"t"})) == -1


@pytest.mark.parametrize(
    "owned",
    [
        {"t": (-1, 0)},
        {"t": (0, 99)},
        {"t": (1, 1)},
        {"nope": (0,)},
        {"t": (0,), "u": (0,)},
        {"t": ("x",)},
        {"t": (1.5, 2)},
        {"t": None},
    ],
)
def test_bad_claims_never_crash(owned: Any, caplog: pytest.LogCaptureFixture) -> None:
    ppt = {"t": 3, "u": 2}
    subs = {"bad": sub(["t"], owned, 3), "good": sub(["t", "u"], {"t": (0,)}, 3)}
    with caplog.at_level(logging.DEBUG, logger="aiogroup.assignors"):
        result = CooperativeStickyAssignor().assign(ppt, subs)
    check_valid(ppt, subs, result)
    check_cooperative_safe({m: s.owned_partitions for m, s in subs.items()}, result)
    assert any("'bad' claims" in r.getMessage() for r in caplog.records)  # said, never raised


def test_adjust_step_is_separate_and_composable() -> None:
    """The cooperative step works on a plan from the balancer, nothing else."""
    plan = balance(
        {"t": 2},
        [MemberClaim("a", ["t"], {"t": (0, 1)}, 1), MemberClaim("b", ["t"])],
    )
    assert plan.assignments() == {"a": {"t": (0,)}, "b": {"t": (1,)}}
    adjusted, withheld = withhold_transfers(plan)
    assert withheld == {("t", 1): "b"}
    assert adjusted.assignments() == {"a": {"t": (0,)}, "b": {}}


def test_empty_inputs() -> None:
    a = CooperativeStickyAssignor()
    assert a.assign({"t": 3}, {}) == {}
    assert parts(a.assign({}, {"m": sub(["t"])})) == {"m": {}}
    assert parts(a.assign({"t": 0}, {"m": sub(["t"])})) == {"m": {}}


def test_unequal_join_moves_only_to_the_newcomers() -> None:
    """Unequal subscriptions (every other member on half the topics), balanced; two members
    join. Every partition that moves goes to a newcomer: no donor is drained and refilled."""
    ppt = {f"t{i:02d}": 10 for i in range(20)}
    names = sorted(ppt)
    topics = {f"m{i:02d}": names if i % 2 else names[:10] for i in range(20)}
    first = CooperativeStickyAssignor().assign(ppt, {m: sub(ts) for m, ts in topics.items()})
    subs = {m: sub(ts, first[m].partitions, 1) for m, ts in topics.items()}
    subs["new1"] = sub(names)
    subs["new2"] = sub(names[10:])
    plan = balance(ppt, [MemberClaim(m, s.topics, s.owned_partitions, 1) for m, s in subs.items()])
    intended = {m: Assignment(p) for m, p in plan.assignments().items()}
    check_balanced(ppt, subs, intended)
    newcomers = sum(len(ps) for m in ("new1", "new2") for ps in intended[m].partitions.values())
    assert newcomers > 0
    assert plan.moved() == newcomers
