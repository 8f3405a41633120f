"""Commits on their own: what is in flight, what is awaited, what a refusal means."""

from __future__ import annotations

import pytest

from aiogroup.errors import (
    CommitFailedError,
    CoordinatorNotAvailableError,
    FencedInstanceIdError,
    IllegalGenerationError,
    LocalProtocolError,
    PartitionNotAssignedError,
    RebalanceInProgressError,
    UnknownMemberIdError,
)
from aiogroup.membership.commits import Commits, commit_error, refuse_commit, refuse_unowned
from aiogroup.membership.states import MemberState

from ..helpers import tps

S = MemberState


def test_commits_in_flight_and_the_awaited_ones() -> None:
    c = Commits()
    c.add(1, "m1", 3, "user")
    c.add(2, "m1", 3, "prepare", during_join=True)  # a cooperative prepare goes with the join
    c.add(3, "m1", 3, "prepare", awaited=True)  # an eager one is awaited
    assert len(c) == 3 and c.awaiting("prepare") and not c.awaiting("leave")
    pending = c.pop(2)
    assert pending is not None and pending.during_join
    assert c.settled(2, pending) is None  # not the awaited one
    assert c.pop(2) is None  # answered already
    pending = c.pop(3)
    assert pending is not None and c.settled(3, pending) == "prepare"
    assert not c.awaiting("prepare")
    c.add(4, "m1", 3, "leave", awaited=True)
    c.stop_awaiting("leave")
    pending = c.pop(4)
    assert pending is not None and c.settled(4, pending) is None


def test_drain_hands_out_every_commit_oldest_first() -> None:
    c = Commits()
    for token in (5, 2, 9):
        c.add(token, "m1", 1, "user")
    assert [t for t, _ in c.drain()] == [2, 5, 9]
    assert len(c) == 0 and c.drain() == []


@pytest.mark.parametrize(
    ("code", "during_join", "kind", "retriable"),
    [
        (FencedInstanceIdError.code, False, FencedInstanceIdError, False),
        (IllegalGenerationError.code, True, RebalanceInProgressError, True),
        (IllegalGenerationError.code, False, CommitFailedError, False),
        (UnknownMemberIdError.code, True, CommitFailedError, False),
        (RebalanceInProgressError.code, False, RebalanceInProgressError, True),
        (CoordinatorNotAvailableError.code, False, CoordinatorNotAvailableError, True),
    ],
)
def test_commit_error(code: int, during_join: bool, kind: type, retriable: bool) -> None:
    error = commit_error(code, during_join=during_join)
    assert type(error) is kind and error.retriable is retriable


def refuse(
    state: MemberState,
    *,
    cooperative: bool = True,
    in_generation: bool = True,
    joined: bool = True,
    coordinator_known: bool = True,
) -> None:
    refuse_commit(
        state,
        cooperative=cooperative,
        in_generation=in_generation,
        joined=joined,
        coordinator_known=coordinator_known,
    )


def test_refuse_commit_where_the_coordinator_would() -> None:
    for state in (S.STABLE, S.PREPARING, S.JOINING, S.RECONCILING, S.DISCOVERING, S.LEAVING):
        refuse(state)  # cooperative, in a generation: fine while it rejoins
    with pytest.raises(LocalProtocolError):
        refuse(S.CLOSED)
    cause = FencedInstanceIdError()
    with pytest.raises(CommitFailedError) as info:
        refuse_commit(
            S.FATAL,
            cooperative=True,
            in_generation=True,
            joined=True,
            coordinator_known=True,
            fatal_error=cause,
        )
    assert info.value.__cause__ is cause
    for state in (S.AWAITING_METADATA, S.AWAITING_SYNC):
        with pytest.raises(RebalanceInProgressError):
            refuse(state)
    with pytest.raises(CoordinatorNotAvailableError):
        refuse(S.STABLE, coordinator_known=False)
    # EAGER revoked everything before joining: the whole round refuses.
    refuse(S.STABLE, cooperative=False)
    for state in (S.JOINING, S.AWAITING_SYNC):
        with pytest.raises(RebalanceInProgressError):
            refuse(state, cooperative=False)
    with pytest.raises(RebalanceInProgressError):
        refuse(S.PREPARING, cooperative=False, joined=False)
    with pytest.raises(CommitFailedError):
        refuse(S.UNJOINED, cooperative=False, in_generation=False)
    with pytest.raises(CommitFailedError):
        refuse(S.STABLE, in_generation=False)
    with pytest.raises(CoordinatorNotAvailableError):
        refuse(S.STABLE, cooperative=False, coordinator_known=False)


def test_refuse_unowned() -> None:
    owned = tps("t-0", "t-1")
    refuse_unowned(None, owned)
    refuse_unowned(dict.fromkeys(owned, 5), owned)
    with pytest.raises(PartitionNotAssignedError, match="t-2, t-3, t-4, t-5, t-6 and 2 more"):
        refuse_unowned(dict.fromkeys(tps(*(f"t-{i}" for i in range(9))), 1), owned)
