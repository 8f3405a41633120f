"""The entry point (:mod:`aiogroup.assignors.balancer.entry`): ``balance`` checks the input
and picks the path; ``gc_paused`` pauses the cyclic collector around one assignment.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from aiogroup.assignors.balancer import MemberClaim, balance, entry, gc_paused
from aiogroup.assignors.balancer.owned import OwnedClaims, OwnedIds


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The paths ``balance`` takes, in order, with what each returned (or, for the general
    path, the view of what members own and the hinted ids it was given)."""
    taken: list[tuple[str, Any]] = []

    def spy(name: str) -> None:
        real = getattr(entry, name)

        def wrapper(*args: Any) -> Any:
            result = real(*args)
            taken.append((name, args[3:] if name == "general" else result))
            return result

        monkeypatch.setattr(entry, name, wrapper)

    for name in ("uniform_by_topic", "uniform_by_member", "general"):
        spy(name)
    return taken


def names(taken: list[tuple[str, Any]]) -> list[str]:
    return [name for name, _ in taken]


def test_equal_subscriptions_and_plain_claims(paths: list[tuple[str, Any]]) -> None:
    claims = [MemberClaim("b", ["t"], {"t": (2, 3)}, 1), MemberClaim("a", ["t"], {"t": (0,)}, 1)]
    plan = balance({"t": 4}, claims)
    assert names(paths) == ["uniform_by_topic"] and paths[0][1] is plan
    assert plan.member_ids == ["a", "b"]  # sorted: input order is irrelevant (KAFKA-12898)


def test_equal_subscriptions_and_a_bad_claim(paths: list[tuple[str, Any]]) -> None:
    claims = [MemberClaim("a", ["t"], {"t": (0, 9)}, 1), MemberClaim("b", ["t"])]
    plan = balance({"t": 4}, claims)
    assert names(paths) == ["uniform_by_topic", "uniform_by_member"]
    assert paths[0][1] is None and paths[1][1] is plan
    assert plan.assignments() == {"a": {"t": (0, 1)}, "b": {"t": (2, 3)}}


def test_unequal_subscriptions(paths: list[tuple[str, Any]]) -> None:
    plain = [MemberClaim("a", ["t"], {"t": (0,)}, 1), MemberClaim("b", ["t", "u"])]
    balance({"t": 2, "u": 2}, plain)
    conflict = [
        MemberClaim("a", ["t"], {"t": (0,)}, 1),
        MemberClaim("b", ["t", "u"], {"t": (0,)}, 1),
    ]
    balance({"t": 2, "u": 2}, conflict)
    assert names(paths) == ["general", "general"]
    assert isinstance(paths[0][1][0], OwnedClaims) and isinstance(paths[1][1][0], OwnedIds)


def test_hints_become_ids(paths: list[tuple[str, Any]]) -> None:
    claims = [MemberClaim("a", ["t"]), MemberClaim("b", ["t", "u"])]
    hint = {("u", 1): "b", ("t", 0): "a", ("t", 5): "a", ("x", 0): "a", ("t", 1): "gone"}
    balance({"t": 2, "u": 2}, claims, hint=hint)
    assert paths[0][1][1] == {3: 1, 0: 0}  # u-1 is id 3; the rest name nothing that exists


def test_topics_and_counts(caplog: pytest.LogCaptureFixture) -> None:
    """Invalid partition counts are ignored with a warning; topics with no partitions, or not
    in the metadata, have nothing to assign."""
    counts: dict[str, Any] = {"a": -1, "b": 2, "c": "3", "d": 0}
    claims = [MemberClaim("m", ["a", "b", "c", "d", "e"])]
    plan = balance(counts, claims)
    assert plan.assignments() == {"m": {"b": (0, 1)}}
    assert plan.layout.topics == ["b"]
    assert "'a' has an invalid partition count -1" in caplog.text
    assert "'c' has an invalid partition count '3'" in caplog.text
    assert balance({"t": 2}, []).assignments() == {}


def test_gc_paused() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
        assert gc.isenabled()
        with pytest.raises(ValueError), gc_paused():
            raise ValueError
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # left as it was found
    finally:
        if was:
            gc.enable()
        else:
            gc.disable()
