"""Golden tests: Subscriptions captured from librdkafka and aiokafka (shared/vectors) fed to
our leaders, so what peers really write is what the assignors are tested on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor, generation_of
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol import decode_sticky_user_data, decode_subscription
from aiogroup.protocol.types import Subscription
from tests.assignors.invariants import (
    check_balanced,
    check_complete,
    check_cooperative_safe,
    check_valid,
)

VECTORS = Path(__file__).resolve().parents[2].parent / "shared" / "vectors"
VECTORS_FILE = VECTORS / "consumer_protocol.json"
PPT = {"foo": 3, "bar": 2}  # the captured cluster

pytestmark = pytest.mark.skipif(
    not VECTORS_FILE.exists(), reason=f"captured vectors not found at {VECTORS_FILE}"
)


def vectors() -> dict[str, dict[str, Any]]:
    data = json.loads(VECTORS_FILE.read_text())
    return {v["id"]: v for v in data}


def subscription(vector_id: str) -> Subscription:
    return decode_subscription(bytes.fromhex(vectors()[vector_id]["hex"]))


def join_metadata(assignor: str) -> list[dict[str, Any]]:
    if not VECTORS_FILE.exists():
        return []
    return [
        v
        for v in vectors().values()
        if v["assignor"] == assignor and v["message"] == "join-metadata"
    ]


@pytest.mark.parametrize("vector", join_metadata("cooperative-sticky"), ids=lambda v: v["id"])
def test_librdkafka_generation_is_read(vector: dict[str, Any]) -> None:
    """librdkafka writes V3: the generation comes from the field; its user data (a sticky v1
    block) carries the same number."""
    sub = decode_subscription(bytes.fromhex(vector["hex"]))
    decoded = vector["decoded"]
    assert generation_of("m", sub) == decoded["generation_id"]
    if decoded.get("user_data_decoded"):
        old = Subscription(sub.topics, sub.user_data, sub.owned_partitions, version=1)
        assert generation_of("m", old) == decoded["user_data_decoded"]["generation"]


def test_librdkafka_member_rejoins_owning_everything() -> None:
    """Member A rejoins owning all 5 partitions (librdkafka's bytes), B joins fresh: A keeps a
    balanced share, the rest waits one round for A to revoke it, then goes to B."""
    subs = {
        "A": subscription("ck-cooperative-sticky/join-metadata/02"),
        "B": subscription("ck-cooperative-sticky/join-metadata/01"),
    }
    assignor = CooperativeStickyAssignor()
    r1 = assignor.assign(PPT, subs)
    check_valid(PPT, subs, r1)
    check_cooperative_safe({m: s.owned_partitions for m, s in subs.items()}, r1)
    assert {m: dict(a.partitions) for m, a in r1.items()} == {
        "A": {"bar": (0, 1), "foo": (0,)},
        "B": {},
    }
    assert assignor.last_withheld == 2
    subs2 = {
        "A": Subscription(["bar", "foo"], owned_partitions=r1["A"].partitions, generation_id=1),
        "B": Subscription(["bar", "foo"], generation_id=1),
    }
    r2 = assignor.assign(PPT, subs2)
    assert {m: dict(a.partitions) for m, a in r2.items()} == {
        "A": {"bar": (0, 1), "foo": (0,)},
        "B": {"foo": (1, 2)},
    }
    check_complete(PPT, subs2, r2)
    check_balanced(PPT, subs2, r2)


def test_aiokafka_sticky_user_data_conflict() -> None:
    """aiokafka's sticky user data always says generation -1: two members claiming the same
    partitions at -1 is an equal-generation conflict, so neither keeps the shared ones."""
    a = subscription("aio-sticky/join-metadata/02")  # bar 0,1 + foo 0,1,2
    b = subscription("aio-sticky/join-metadata/03")  # bar 0,1 + foo 0
    assert decode_sticky_user_data(a.user_data).generation == -1
    subs = {"A": a, "B": b}
    result = StickyAssignor().assign(PPT, subs)
    check_valid(PPT, subs, result)
    check_complete(PPT, subs, result)
    check_balanced(PPT, subs, result)
    # A solely claims foo-1 and foo-2 and keeps them; the contested ones are dealt afresh.
    assert set(result["A"].partitions.get("foo", ())) >= {1, 2}
