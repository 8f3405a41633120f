"""Ownership on its own: what is given up before a JoinGroup (1a-1d) and reconciled after a
SyncGroup (3a-3d)."""

from __future__ import annotations

from aiogroup.membership.ownership import Ownership
from aiogroup.protocol import Assignment

from ..helpers import tps


def owning(*names: str) -> Ownership:
    own = Ownership()
    own.reconcile(Assignment(), tps(*names))
    own.take_assignment()
    own.reconciled()
    return own


def test_a_fresh_assignment_is_owned_and_fetchable() -> None:
    own = Ownership()
    rec = own.reconcile(Assignment(), tps("t-0", "t-1"))
    assert rec.added == tps("t-0", "t-1") and rec.revoked == frozenset()
    assert not own.revoking
    assert own.take_assignment() is rec
    assert own.owned == own.fetchable == tps("t-0", "t-1")


def test_revoked_first_then_assigned_and_not_fetchable_meanwhile() -> None:
    own = owning("t-0", "t-1")
    rec = own.reconcile(Assignment(), tps("t-1", "t-2"))
    assert rec.revoked == tps("t-0") and rec.added == tps("t-2") and own.revoking
    assert own.owned == tps("t-0", "t-1")  # the callback may still commit t-0 (3c)
    assert own.fetchable == tps("t-1")  # KAFKA-14196
    own.revoked()
    assert own.owned == tps("t-1")
    own.take_assignment()
    assert own.owned == own.fetchable == tps("t-1", "t-2") and not own.revoking


def test_before_a_cooperative_join_only_unsubscribed_topics_are_revoked() -> None:
    own = owning("t-0", "u-0")
    assert own.give_up_before_join(eager=False, subscribed=frozenset({"t", "u"})) is None
    lost, revoked = own.give_up_before_join(eager=False, subscribed=frozenset({"t"})) or ((), ())
    assert lost == frozenset() and revoked == tps("u-0")  # 1a
    assert own.fetchable == tps("t-0")
    own.given_up()
    assert own.owned == tps("t-0")


def test_before_an_eager_join_everything_is_revoked() -> None:
    own = owning("t-0", "t-1")
    assert own.give_up_before_join(eager=True, subscribed=frozenset({"t"})) == (
        frozenset(),
        tps("t-0", "t-1"),
    )
    own.given_up()
    assert own.owned == frozenset()


def test_vanished_partitions_are_lost_not_revoked() -> None:
    own = owning("t-0", "t-1")
    assert own.vanished(tps("t-1")) and not own.vanished(tps("t-1"))  # news once
    assert own.owed_callbacks and own.fetchable == tps("t-0")
    assert own.give_up_before_join(eager=False, subscribed=frozenset({"t"})) == (
        tps("t-1"),
        frozenset(),
    )
    own.given_up()
    assert own.owned == tps("t-0") and own.pending_lost == frozenset()
    assert not own.owed_callbacks


def test_after_a_reset_everything_is_lost_and_nothing_fetchable() -> None:
    own = owning("t-0", "t-1")
    own.generation_reset()
    assert own.reset_pending and own.fetchable == frozenset() and own.owed_callbacks
    assert own.give_up_before_join(eager=False, subscribed=frozenset({"t"})) == (
        tps("t-0", "t-1"),
        frozenset(),
    )
    own.given_up()
    assert own.owned == frozenset() and not own.reset_pending
    empty = Ownership()
    empty.generation_reset()
    assert not empty.reset_pending  # nothing to report lost


def test_abandon_and_drop() -> None:
    own = owning("t-0", "t-1")
    own.reconcile(Assignment(), tps("t-1"))
    own.vanished(tps("t-1"))
    own.abandon()
    assert own.reconciling is None and own.pending_revocation == frozenset()
    assert own.drop() == tps("t-0", "t-1")
    assert own.owned == own.pending_lost == frozenset() and not own.reset_pending
