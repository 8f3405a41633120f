"""Commits in flight: who sent each, for what, and what a broker's refusal means to the caller.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). The machine stamps each commit with the
``(member_id, generation_id)`` it is sent with and a purpose: the user's, the auto-commit
before a join (``prepare``, KIP-429 1a and Java's ``onJoinPrepare``) or before a leave
(``leave``, KIP-70). The machine waits for the answer of some of them before going on (an
eager member's prepare commit, the leave commit): they are *awaited*. Whatever answers a
commit, the caller learns the outcome from :func:`commit_error`'s translation.

Nothing here is specific to the classic protocol: the KIP-848 machine commits with its member
epoch in the same way (its purposes: the user's and ``leave``), and :func:`commit_error` reads
its STALE_MEMBER_EPOCH too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from aiogroup.errors import (
    AiogroupError,
    CommitFailedError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    KafkaError,
    LocalProtocolError,
    PartitionNotAssignedError,
    RebalanceInProgressError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    error_for_code,
)
from aiogroup.membership.states import REBALANCING, MemberState
from aiogroup.protocol import TopicPartition

__all__ = [
    "CommitPurpose",
    "Commits",
    "PendingCommit",
    "commit_error",
    "refuse_commit",
    "refuse_unowned",
]

S = MemberState

CommitPurpose = Literal["user", "prepare", "leave"]

_FENCED_INSTANCE_ID = FencedInstanceIdError.code
_ILLEGAL_GENERATION = IllegalGenerationError.code
_UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
_REBALANCE_IN_PROGRESS = RebalanceInProgressError.code


@dataclass(slots=True)
class PendingCommit:
    """One commit in flight, as sent."""

    member_id: str
    generation_id: int
    purpose: CommitPurpose
    #: Sent while this member's JoinGroup was in flight (see CommitOffsets.during_join).
    during_join: bool = False
    #: The offsets asked for (None: the consumed positions), to send them again (KIP-848: a
    #: commit refused for a stale member epoch goes again with the new one).
    offsets: Mapping[TopicPartition, int] | None = None


class Commits:
    """The commits in flight, by token."""

    __slots__ = ("_awaited", "_pending", "prepared")

    def __init__(self) -> None:
        self._pending: dict[int, PendingCommit] = {}
        #: The token of the commit of each purpose the machine waits for, if any.
        self._awaited: dict[CommitPurpose, int] = {}
        #: The auto-commit before the next JoinGroup has been sent (once per join).
        self.prepared = False

    def __len__(self) -> int:
        return len(self._pending)

    def add(
        self,
        token: int,
        member_id: str,
        generation_id: int,
        purpose: CommitPurpose,
        *,
        during_join: bool = False,
        awaited: bool = False,
        offsets: Mapping[TopicPartition, int] | None = None,
    ) -> None:
        """A commit goes out; ``awaited``: the machine goes on only once it is answered."""
        self._pending[token] = PendingCommit(
            member_id, generation_id, purpose, during_join, offsets
        )
        if awaited:
            self._awaited[purpose] = token

    def pop(self, token: int) -> PendingCommit | None:
        """The commit ``token`` is answered (None: not ours, or answered already)."""
        return self._pending.pop(token, None)

    def drain(self) -> list[tuple[int, PendingCommit]]:
        """Every commit in flight, oldest first; none is in flight after."""
        out = sorted(self._pending.items())
        self._pending.clear()
        return out

    def awaiting(self, purpose: CommitPurpose) -> bool:
        """The machine waits for the answer of a commit of this purpose."""
        return purpose in self._awaited

    def stop_awaiting(self, purpose: CommitPurpose) -> None:
        """Its answer (if it comes) no longer moves the machine on."""
        self._awaited.pop(purpose, None)

    def settled(self, token: int, pending: PendingCommit) -> CommitPurpose | None:
        """The commit ``token`` (just popped) is over: its purpose if the machine awaited it
        (and now goes on), else None."""
        purpose = pending.purpose
        if self._awaited.get(purpose) != token:
            return None
        del self._awaited[purpose]
        return purpose


def commit_error(code: int, *, during_join: bool) -> KafkaError:
    """What the caller of a commit refused with ``code`` gets.

    UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION: a fatal CommitFailedError, except ILLEGAL_GENERATION
    for a commit sent during a join: the join phase completed before the coordinator handled
    the commit (our JoinGroup moved the generation on), retriable like Java's
    REBALANCE_IN_PROGRESS. REBALANCE_IN_PROGRESS stays the retriable RebalanceInProgressError.
    """
    if code == _FENCED_INSTANCE_ID:
        return FencedInstanceIdError()
    if code == _ILLEGAL_GENERATION and during_join:
        return RebalanceInProgressError(
            "commit failed: the rebalance completed before the commit reached the "
            "coordinator; retry once this member has its new assignment"
        )
    if code in (_UNKNOWN_MEMBER_ID, _ILLEGAL_GENERATION):
        return CommitFailedError(
            "commit cannot be completed: the member was removed from the group or its "
            f"generation is over (error {code}); its partitions may be elsewhere now"
        )
    if code == _REBALANCE_IN_PROGRESS:
        return RebalanceInProgressError("commit failed: the group is rebalancing")
    if code == StaleMemberEpochError.code:
        return StaleMemberEpochError(
            "commit failed: the coordinator has a newer member epoch for this member (KIP-848); "
            "retry once its heartbeat has brought it"
        )
    return error_for_code(code)


def refuse_commit(
    state: MemberState,
    *,
    cooperative: bool,
    in_generation: bool,
    joined: bool,
    coordinator_known: bool,
    fatal_error: AiogroupError | None = None,
) -> None:
    """Raise where the coordinator would refuse a commit of a member in ``state`` (see
    :meth:`MembershipMachine.commit <aiogroup.membership.machine.MembershipMachine.commit>`):
    ``in_generation``, it holds a member id and generation; ``joined``, it has its assignment.
    """
    if state is S.CLOSED:
        raise LocalProtocolError("commit on a closed member")
    if state is S.FATAL:
        raise CommitFailedError("the member failed fatally") from fatal_error
    if state in (S.AWAITING_METADATA, S.AWAITING_SYNC):
        # We hold the JoinGroup answer of generation_id but not its assignment: the group
        # is CompletingRebalance, where the coordinator answers REBALANCE_IN_PROGRESS.
        raise RebalanceInProgressError(
            "commit cannot be completed before this member has its assignment "
            "(SyncGroup in flight); retry after it completes"
        )
    if cooperative and in_generation:
        # KIP-429: it still owns its partitions while it rejoins.
        if not coordinator_known:
            raise CoordinatorNotAvailableError("the group coordinator is not known yet")
        return
    active = joined and in_generation
    if state in REBALANCING or (not active and state is S.PREPARING):
        raise RebalanceInProgressError(
            "commit cannot be completed: the group is rebalancing; retry after it completes"
        )
    if not active:
        raise CommitFailedError(
            "commit cannot be completed: the member is not part of an active group"
        )
    if not coordinator_known:
        raise CoordinatorNotAvailableError("the group coordinator is not known yet")


def refuse_unowned(
    offsets: Mapping[TopicPartition, int] | None, owned: frozenset[TopicPartition]
) -> None:
    """Offsets of a partition we do not own (never assigned, or its revocation callback
    has returned) are refused: the broker would take them under our generation, and under
    COOPERATIVE the partition's new owner is in that generation too, so a late commit here
    could rewind its progress (found by the chaos runs: a commit loop that read
    ``assignment`` just before a revocation)."""
    if offsets is None:
        return
    unowned = [tp for tp in offsets if tp not in owned]
    if unowned:
        shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(unowned)[:5])
        more = f" and {len(unowned) - 5} more" if len(unowned) > 5 else ""
        raise PartitionNotAssignedError(
            f"commit refused: this member does not own {shown}{more} (not assigned, or "
            "revoked since); nothing was committed"
        )
