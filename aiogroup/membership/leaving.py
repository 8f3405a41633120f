"""Leaving: a close or unsubscribe under way, a close that waits, and the hand-off before it.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). The machine carries the leave out (commit,
callbacks, LeaveGroup, KIP-70); :class:`Leaving` holds what the leave is (a close or an
unsubscribe, partitions revoked or lost, the reason), and decides for a close that waits:

- **finish the rebalance first** (``CloseRequested.finish_rebalance_by``): leave once the final
  commit and the revocation can happen in a generation the broker accepts, or at the deadline;
- **hand the partitions over first** (``CloseRequested.hand_off``): rejoin once subscribed to
  nothing while still owning them, under a leader known to withhold them for that round
  (KIP-429 2c-2d), and leave once that round's assignment has taken them away.

A KIP-848 machine leaves differently on the wire (a heartbeat with epoch -1) but can reuse the
waiting close and its deadline.
"""

from __future__ import annotations

import logging
from typing import Literal

from aiogroup.membership.leader import HAND_OFF_AWARE

__all__ = ["HandOff", "LeavePhase", "Leaving"]

log = logging.getLogger("aiogroup.membership")

#: "pending" until the JoinGroup with the empty subscription is sent, "joined" until that
#: round's SyncGroup answers, "done" after it (the close then leaves).
HandOff = Literal["", "pending", "joined", "done"]
LeavePhase = Literal["commit", "callbacks", "leave", ""]


class Leaving:
    """The leave under way (:meth:`start` to :meth:`finished`) and the close waiting for it."""

    __slots__ = ("aware_leader", "close", "close_by", "hand_off", "lost", "phase", "reason")

    def __init__(self) -> None:
        #: The leave ends in CLOSED (a close) rather than UNJOINED (an unsubscribe).
        self.close = False
        #: The owned partitions are reported lost, not revoked, and nothing is committed.
        self.lost = False
        #: The LeaveGroup reason (KIP-800); empty: the default for a close or an unsubscribe.
        self.reason = ""
        #: Where the leave is: the final commit, the callbacks, the LeaveGroup request.
        self.phase: LeavePhase = ""
        #: A close waiting for the rebalance to finish (CloseRequested.finish_rebalance_by).
        self.close_by: float | None = None
        #: A close handing its partitions over first (CloseRequested.hand_off).
        self.hand_off: HandOff = ""
        #: The leader whose last assignment announced HAND_OFF_AWARE (None: unknown).
        self.aware_leader: str | None = None

    # -- a close that waits ------------------------------------------------------------------------

    @property
    def waiting(self) -> bool:
        """A close waits (for the rebalance to finish, or for its hand-off)."""
        return self.close_by is not None

    @property
    def handing_off(self) -> bool:
        """A hand-off is under way and its round has not answered yet."""
        return self.hand_off in ("pending", "joined")

    def wait_for_rebalance(self, by: float) -> None:
        self.close_by = by

    def begin_hand_off(self, by: float) -> None:
        self.hand_off = "pending"
        self.close_by = by

    def cancel_hand_off(self) -> None:
        self.hand_off = ""

    def expired(self, now: float) -> bool:
        """The waiting close's deadline has passed: leave now (partitions may be lost)."""
        return self.close_by is not None and now >= self.close_by

    def join_sent(self) -> bool:
        """A JoinGroup goes out: True if it is the hand-off's (subscribe to nothing but still
        claim what is owned, so the leader gives us nothing and withholds our partitions from
        the others for this round, KIP-429 2c-2d, while we keep working on them)."""
        if not self.handing_off:
            return False
        self.hand_off = "joined"
        return True

    def synced(self, leader_id: str, marks: frozenset[bytes]) -> None:
        """A SyncGroup answered with an assignment bearing ``marks`` from ``leader_id``: who
        assigned it, a leader that withholds claimed partitions of topics their owner no longer
        subscribes to (ours announces it) or one that may not (librdkafka's); and the
        hand-off's round is over (the close leaves after it)."""
        self.aware_leader = leader_id if HAND_OFF_AWARE in marks else None
        if self.hand_off == "joined":
            self.hand_off = "done"

    def leader_withholds(self, leader_id: str, *, is_leader: bool) -> bool:
        """The current leader keeps a member's claimed partitions from others for a round even
        of topics the member no longer subscribes to: ourselves, or an announced aiogroup."""
        return is_leader or self.aware_leader == leader_id

    def due(self, *, ready: bool, owns: bool, leader_id: str, is_leader: bool) -> bool:
        """A waiting close goes ahead now: ``ready`` (see the machine's ``_close_ready``), and a
        hand-off first needs its round, unless nothing is left to hand over (``owns``), or the
        leader is no longer one that withholds for it."""
        if self.close_by is None or not ready:
            return False
        if self.handing_off and owns:
            if self.leader_withholds(leader_id, is_leader=is_leader):
                return False
            # The leader changed since the hand-off began (the aiogroup leader left, a peer
            # leads now): rejoining subscribed to nothing could get our partitions handed to
            # others while we still hold them. Leave as a plain close does.
            log.info(
                "the group's leader (%s) did not announce %r: leaving without a hand-off",
                leader_id,
                HAND_OFF_AWARE,
            )
            self.hand_off = ""
        return True

    @staticmethod
    def may_hand_off(
        by: float | None,
        now: float,
        *,
        cooperative: bool,
        static: bool,
        owns: bool,
        reset_pending: bool,
        member_id: str,
        coordinator_known: bool,
        leader_withholds: bool,
    ) -> bool:
        """A close can hand the owned partitions over first (CloseRequested.hand_off)."""
        return (
            by is not None
            and now < by
            and cooperative
            and not static  # KIP-345: a static member stays
            and owns
            and not reset_pending
            and bool(member_id)
            and coordinator_known
            # Only a leader known to withhold our claims keeps this safe: librdkafka's leader
            # hands partitions of topics their owner no longer subscribes to straight to
            # others, trusting KIP-429 1a (found by tests/consumer/test_hand_off.py).
            and leader_withholds
        )

    # -- the leave ---------------------------------------------------------------------------------

    def start(self, *, close: bool, lost: bool, reason: str) -> None:
        """The leave begins; a close waiting for it waits no more."""
        self.close_by = None
        self.hand_off = ""
        self.close = close
        self.lost = lost
        self.reason = reason

    def request_reason(self) -> str:
        """The reason the LeaveGroup request gives."""
        return self.reason or ("the consumer is closing" if self.close else "unsubscribed")

    def finished(self) -> None:
        self.phase = ""
        self.lost = False
        self.reason = ""
