"""Table tests of the eager ``sticky`` assignor (KIP-54, KIP-341)."""

from __future__ import annotations

import logging
import struct

import pytest

from aiogroup.assignors.base import GroupMetadata, RebalanceProtocol
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol import decode_sticky_user_data, encode_sticky_user_data
from aiogroup.protocol.types import Assignment, PartitionsByTopic, Subscription
from tests.assignors.invariants import (
    check_balanced,
    check_complete,
    check_valid,
    loads,
    min_moves_uniform,
)


def sub(topics: list[str], owned: PartitionsByTopic | None = None, gen: int = -1) -> Subscription:
    """A sticky Subscription: the previous assignment travels in v1 user data."""
    data = None if owned is None else encode_sticky_user_data(owned, gen)
    return Subscription(topics, user_data=data, version=0)


def sub_v0(topics: list[str], owned: PartitionsByTopic) -> Subscription:
    """Sticky user data v0 (no generation), as pre-KIP-341 clients write it."""
    data = encode_sticky_user_data(owned, 0)[:-4]  # v1 minus its trailing generation
    assert decode_sticky_user_data(data).generation == -1
    return Subscription(topics, user_data=data, version=0)


def parts(result: dict[str, Assignment]) -> dict[str, dict[str, tuple[int, ...]]]:
    return {m: {t: tuple(ps) for t, ps in a.partitions.items()} for m, a in result.items()}


def check_all(
    ppt: dict[str, int], subs: dict[str, Subscription], result: dict[str, Assignment]
) -> None:
    check_valid(ppt, subs, result)
    check_complete(ppt, subs, result)
    check_balanced(ppt, subs, result)


def test_identity() -> None:
    a = StickyAssignor()
    assert a.name == "sticky"
    assert a.supported_protocols == (RebalanceProtocol.EAGER,)


def test_kip54_example1_member_leaves() -> None:
    """KIP-54's first example: round-robin start, C1 leaves, survivors keep everything."""
    ppt = {"t0": 2, "t1": 2, "t2": 2, "t3": 2}
    topics = list(ppt)
    subs = {
        "C0": sub(topics, {"t0": (0,), "t1": (1,), "t3": (0,)}, 1),
        "C2": sub(topics, {"t1": (0,), "t2": (1,)}, 1),
    }
    result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {
        "C0": {"t0": (0,), "t1": (1,), "t2": (0,), "t3": (0,)},
        "C2": {"t0": (1,), "t1": (0,), "t2": (1,), "t3": (1,)},
    }
    check_all(ppt, subs, result)


def test_kip54_example2_unequal_subscriptions() -> None:
    """KIP-54's second example: C0 -> t0, C1 -> t0,t1, C2 -> t0,t1,t2; then C0 leaves."""
    ppt = {"t0": 1, "t1": 2, "t2": 3}
    subs = {"C0": sub(["t0"]), "C1": sub(["t0", "t1"]), "C2": sub(["t0", "t1", "t2"])}
    result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {
        "C0": {"t0": (0,)},
        "C1": {"t1": (0, 1)},
        "C2": {"t2": (0, 1, 2)},
    }
    check_all(ppt, subs, result)
    subs2 = {
        "C1": sub(["t0", "t1"], {"t1": (0, 1)}, 1),
        "C2": sub(["t0", "t1", "t2"], {"t2": (0, 1, 2)}, 1),
    }
    result2 = StickyAssignor().assign(ppt, subs2)
    assert parts(result2) == {"C1": {"t0": (0,), "t1": (0, 1)}, "C2": {"t2": (0, 1, 2)}}
    check_all(ppt, subs2, result2)


def test_fresh_spreads_topics_kafka_16277() -> None:
    """Two topics, two members: each member gets half of each topic, not one topic each."""
    ppt = {"a": 4, "b": 4}
    subs = {"m1": sub(["a", "b"]), "m2": sub(["a", "b"])}
    result = StickyAssignor().assign(ppt, subs)
    for assignment in result.values():
        assert set(assignment.partitions) == {"a", "b"}
        assert all(len(ps) == 2 for ps in assignment.partitions.values())


def test_conflicting_previous_generations() -> None:
    """Java's StickyAssignorTest: the higher generation wins each conflict (tp0, tp1 to c2,
    tp4 to c3); owners over quota keep their first partitions."""
    ppt = {"t": 6}
    subs = {
        "c1": sub(["t"], {"t": (0, 1, 4)}, 1),
        "c2": sub(["t"], {"t": (0, 1, 2)}, 2),
        "c3": sub(["t"], {"t": (3, 4, 5)}, 2),
    }
    result = StickyAssignor().assign(ppt, subs)
    got = parts(result)
    assert set(got["c2"]["t"]) <= {0, 1, 2}
    assert set(got["c3"]["t"]) <= {3, 4, 5}
    assert got == {"c1": {"t": (2, 5)}, "c2": {"t": (0, 1)}, "c3": {"t": (3, 4)}}
    check_all(ppt, subs, result)


def test_equal_generation_conflict_nobody_keeps(caplog: pytest.LogCaptureFixture) -> None:
    """KAFKA-12984: two members claim t-0 at the same generation; neither keeps it, so it goes
    to the member that needs a partition."""
    ppt = {"t": 3}
    subs = {
        "a": sub(["t"], {"t": (0, 1)}, 4),
        "b": sub(["t"], {"t": (0, 2)}, 4),
        "c": sub(["t"]),
    }
    with caplog.at_level(logging.WARNING, logger="aiogroup.assignors"):
        result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {"a": {"t": (1,)}, "b": {"t": (2,)}, "c": {"t": (0,)}}
    assert "same generation" in caplog.text


def test_stale_member_does_not_keep_kafka_7026() -> None:
    """A member paused past its session timeout comes back claiming its old partitions at an
    old generation; the member that got them later (higher generation) keeps them."""
    ppt = {"t": 4}
    subs = {
        "zombie": sub(["t"], {"t": (0, 1, 2, 3)}, 3),
        "fresh": sub(["t"], {"t": (0, 1, 2, 3)}, 5),
    }
    result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {"fresh": {"t": (0, 1)}, "zombie": {"t": (2, 3)}}


def test_schema_backward_compatibility() -> None:
    """Java's testSchemaBackwardCompatibility: v1 (generation 1), v0 (no generation), none."""
    ppt = {"t": 3}
    subs = {
        "c1": sub(["t"], {"t": (0, 2)}, 1),
        "c2": sub_v0(["t"], {"t": (1,)}),
        "c3": sub(["t"]),
    }
    result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {"c1": {"t": (0,)}, "c2": {"t": (1,)}, "c3": {"t": (2,)}}
    check_all(ppt, subs, result)


def test_v0_loses_to_v1_claim() -> None:
    """A v0 claim has generation -1, so any v1 claim of the same partition beats it."""
    ppt = {"t": 2}
    subs = {"old": sub_v0(["t"], {"t": (0, 1)}), "new": sub(["t"], {"t": (0,)}, 0)}
    result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {"new": {"t": (0,)}, "old": {"t": (1,)}}


def test_undecodable_user_data_is_no_claim(caplog: pytest.LogCaptureFixture) -> None:
    ppt = {"t": 2}
    bad = Subscription(["t"], user_data=struct.pack(">i", 5) + b"\x00", version=0)
    subs = {"a": bad, "b": sub(["t"], {"t": (0, 1)}, 2)}
    with caplog.at_level(logging.WARNING, logger="aiogroup.assignors"):
        result = StickyAssignor().assign(ppt, subs)
    assert parts(result) == {"a": {"t": (1,)}, "b": {"t": (0,)}}
    assert any("cannot be decoded" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    ("owned", "what"),
    [
        ({"t": (7,)}, "do not exist"),
        ({"t": (-1,)}, "do not exist"),
        ({"t": (0, 0)}, "listed twice"),
    ],
)
def test_bad_claims_ignored_with_warning(
    owned: PartitionsByTopic, what: str, caplog: pytest.LogCaptureFixture
) -> None:
    ppt = {"t": 2, "u": 1}
    subs = {"a": sub(["t"], owned, 1), "b": sub(["t", "u"])}
    with caplog.at_level(logging.WARNING, logger="aiogroup.assignors"):
        result = StickyAssignor().assign(ppt, subs)
    check_all(ppt, subs, result)
    assert any(what in r.getMessage() for r in caplog.records), caplog.text


def test_claims_of_a_topic_no_longer_subscribed_are_ignored_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Legal under KIP-429 (step 1a is the member's, and a hand-off relies on it): noted at
    DEBUG, never a warning."""
    ppt = {"t": 2, "u": 1}
    subs = {"a": sub(["t"], {"u": (0,)}, 1), "b": sub(["t", "u"])}
    with caplog.at_level(logging.DEBUG, logger="aiogroup.assignors"):
        result = StickyAssignor().assign(ppt, subs)
    check_all(ppt, subs, result)
    noted = [r for r in caplog.records if "does not subscribe" in r.getMessage()]
    assert noted and all(r.levelno == logging.DEBUG for r in noted), caplog.text


def test_claims_of_a_topic_nobody_subscribes_to_any_more_are_no_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every member handing off at once (a whole service stopping) subscribes to nothing
    while still claiming its partitions: legal, noted at DEBUG (a new user's rolling restart
    printed one warning per member here)."""
    ppt = {"t": 2}
    subs = {"a": sub([], {"t": (0,)}, 1), "b": sub([], {"t": (1,)}, 1)}
    with caplog.at_level(logging.DEBUG, logger="aiogroup.assignors"):
        StickyAssignor().assign(ppt, subs)
    noted = [r for r in caplog.records if "no member subscribes to" in r.getMessage()]
    assert noted and all(r.levelno == logging.DEBUG for r in noted), caplog.text


def test_user_data_roundtrip_through_on_assignment() -> None:
    a = StickyAssignor()
    assert a.subscription_user_data({"t"}) is None
    a.on_assignment(Assignment({"t": (1, 0)}), GroupMetadata(generation_id=7, member_id="m"))
    data = a.subscription_user_data({"t"})
    assert data is not None
    decoded = decode_sticky_user_data(data)
    assert decoded.generation == 7
    assert {t: tuple(ps) for t, ps in decoded.partitions.items()} == {"t": (0, 1)}
    a.reset()
    assert a.subscription_user_data({"t"}) is None


def test_survivors_keep_everything_and_moves_are_minimal() -> None:
    ppt = {f"t{i}": 7 for i in range(5)}
    topics = list(ppt)
    first = StickyAssignor().assign(ppt, {f"m{i}": sub(topics) for i in range(6)})
    subs = {m: sub(topics, a.partitions, 1) for m, a in first.items() if m != "m3"}
    assignor = StickyAssignor()
    result = assignor.assign(ppt, subs)
    check_all(ppt, subs, result)
    for m in subs:
        for t, ps in first[m].partitions.items():
            assert set(ps) <= set(result[m].partitions.get(t, ()))
    owned_counts = [sum(map(len, first[m].partitions.values())) for m in subs]
    assert assignor.last_moved == min_moves_uniform(35, owned_counts)


# Unequal subscriptions, a member joins (hypothesis-shrunk from the kafka-python cross-check).
# m00 holds 9 and m01 8; m02 can take t0 only. Loads 6, 6, 5 need five moves (m00 gives three
# t0 partitions, m01 two), and no owned partition should move between m00 and m01.
JOIN_UNEQUAL_PPT = {"t0": 7, "t1": 5, "t2": 5}
JOIN_UNEQUAL_OWNED: dict[str, tuple[list[str], PartitionsByTopic]] = {
    "m00": (["t0", "t1"], {"t0": (0, 2, 4, 6), "t1": (0, 1, 2, 3, 4)}),
    "m01": (["t0", "t2"], {"t0": (1, 3, 5), "t2": (0, 1, 2, 3, 4)}),
}


def test_unequal_join_moves_only_what_balance_needs() -> None:
    subs = {m: sub(topics, owned, 2) for m, (topics, owned) in JOIN_UNEQUAL_OWNED.items()}
    subs["m02"] = sub(["t0"])
    assignor = StickyAssignor()
    result = assignor.assign(JOIN_UNEQUAL_PPT, subs)
    check_all(JOIN_UNEQUAL_PPT, subs, result)
    assert assignor.last_moved == 5
    assert sorted(loads(result).values()) == [5, 6, 6]
    # The two old members only ever lose partitions; m02 gains them all.
    for m, (_, owned) in JOIN_UNEQUAL_OWNED.items():
        for t, ps in result[m].partitions.items():
            assert set(ps) <= set(owned[t]), (m, t, ps)
