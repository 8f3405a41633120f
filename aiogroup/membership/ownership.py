"""Ownership: the partitions a member owns, and those it is giving up (KIP-429 1a-1d, 3a-3d).

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). Partitions leave a member in two ways, always
through the listener first: *revoked* (given up in order: the member may still commit them in
its callback) or *lost* (already someone else's: a reset generation, a vanished topic, a
fatal error). Until the callback returns they stay in :attr:`Ownership.owned` but are no
longer :attr:`Ownership.fetchable` (KAFKA-14196).

Before a JoinGroup (:meth:`Ownership.give_up_before_join`): everything (EAGER), or what is no
longer subscribed (COOPERATIVE, 1a), minus what is lost (1b, 1d). After a SyncGroup
(:meth:`Ownership.reconcile`): revoke what the assignment takes away (3c), then take the new
assignment (3b, 3d). A KIP-848 member reconciles its target assignment the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from aiogroup.membership.deltas import member_delta
from aiogroup.protocol import Assignment, TopicPartition

__all__ = ["Ownership", "Reconcile"]

Partitions = frozenset[TopicPartition]


@dataclass(slots=True)
class Reconcile:
    """A SyncGroup's assignment being taken (3a-3d): first ``revoked`` go, then ``assigned``
    is owned and ``added`` are announced."""

    assignment: Assignment
    assigned: Partitions
    added: Partitions
    revoked: Partitions
    phase: Literal["revoking", "assigning"] = "assigning"


class Ownership:
    """What a member owns, what it is giving up, and the assignment it is taking."""

    __slots__ = (
        "_lost_included",
        "owned",
        "pending_lost",
        "pending_revocation",
        "reconciling",
        "reset_pending",
    )

    def __init__(self) -> None:
        self.owned: Partitions = frozenset()
        #: Being revoked or reported lost: the callback runs (KAFKA-14196: not fetchable).
        self.pending_revocation: Partitions = frozenset()
        #: Owned partitions that vanished from metadata (1b): reported lost before the next join.
        self.pending_lost: Partitions = frozenset()
        #: The generation was reset (1d): everything owned is lost before the next join.
        self.reset_pending = False
        #: The SyncGroup assignment being taken.
        self.reconciling: Reconcile | None = None
        self._lost_included = False

    @property
    def fetchable(self) -> Partitions:
        """Owned partitions that are neither being revoked nor about to be reported lost."""
        if self.reset_pending:
            return frozenset()
        return self.owned - self.pending_revocation - self.pending_lost

    @property
    def owed_callbacks(self) -> bool:
        """Some owned partitions must be reported lost before the next JoinGroup."""
        return self.reset_pending or bool(self.pending_lost)

    def generation_reset(self) -> None:
        """KIP-429 1d: what we own is reported lost before the next JoinGroup, which then
        claims nothing (KAFKA-12984)."""
        if self.owned:
            self.reset_pending = True

    def vanished(self, gone: Iterable[TopicPartition]) -> bool:
        """1b: these owned partitions no longer exist; True if any is new news."""
        gone = frozenset(gone)
        if not gone - self.pending_lost:
            return False
        self.pending_lost = self.pending_lost | gone
        return True

    # -- before a JoinGroup ------------------------------------------------------------------------

    def give_up_before_join(
        self, *, eager: bool, subscribed: frozenset[str]
    ) -> tuple[Partitions, Partitions] | None:
        """KIP-429 1a-1d: ``(lost, revoked)`` to give up before joining, now pending until
        :meth:`given_up`; None if nothing is (then nothing is pending lost either)."""
        # 1d: after a reset everything we owned is lost; 1b: owned partitions that vanished.
        lost = self.owned if self.reset_pending else self.owned & self.pending_lost
        if eager:
            revoked = self.owned - lost  # eager: revoke everything before joining
        else:
            # 1a: revoke what we no longer subscribe to
            revoked = frozenset(tp for tp in self.owned - lost if tp.topic not in subscribed)
        if lost or revoked:
            self._lost_included = self.reset_pending
            self.pending_revocation = lost | revoked
            return lost, revoked
        self.pending_lost = frozenset()
        return None

    def given_up(self) -> None:
        """The callbacks for what :meth:`give_up_before_join` gave up returned: it is gone
        whatever they did (KIP-429)."""
        self.owned = self.owned - self.pending_revocation
        self.pending_lost = self.pending_lost - self.pending_revocation
        self.pending_revocation = frozenset()
        if self._lost_included:
            self.reset_pending = False
            self._lost_included = False
        if not self.owned:
            self.reset_pending = False

    # -- after a SyncGroup -------------------------------------------------------------------------

    def reconcile(self, assignment: Assignment, assigned: Partitions) -> Reconcile:
        """3a: take ``assigned``; what it no longer holds is revoked first (pending until
        :meth:`revoked`) when the result's ``revoked`` is not empty."""
        delta = member_delta(self.owned, assigned)
        rec = Reconcile(
            assignment,
            assigned,
            delta.added,
            delta.revoked,
            "revoking" if delta.revoked else "assigning",
        )
        self.reconciling = rec
        if delta.revoked:
            self.pending_revocation = delta.revoked
        return rec

    @property
    def revoking(self) -> bool:
        """The reconcile waits for its revoked callback (3c)."""
        return self.reconciling is not None and self.reconciling.phase == "revoking"

    def revoked(self) -> None:
        """3c done: the revoked partitions are gone (with nothing left, nothing is owed as
        lost after a reset either)."""
        assert self.reconciling is not None
        self.owned = self.owned - self.reconciling.revoked
        if not self.owned:
            self.reset_pending = False

    def take_assignment(self) -> Reconcile:
        """3b: own the new assignment (its assigned callback comes next)."""
        rec = self.reconciling
        assert rec is not None
        rec.phase = "assigning"
        self.owned = rec.assigned
        self.pending_revocation = frozenset()
        return rec

    def reconciled(self) -> None:
        self.reconciling = None

    # -- leaving -----------------------------------------------------------------------------------

    def abandon(self) -> None:
        """The rebalance under way is abandoned (a leave, a fatal error)."""
        self.reconciling = None
        self.pending_revocation = frozenset()

    def drop(self) -> Partitions:
        """Own nothing from now; return what was owned."""
        owned = self.owned
        self.owned = frozenset()
        self.pending_lost = frozenset()
        self.reset_pending = False
        return owned
