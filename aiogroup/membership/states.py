"""The member's states and the explicit tables that say which event each state accepts and
which state may follow which (h11 style: anything missing is a LocalProtocolError)."""

from __future__ import annotations

import enum

from aiogroup.membership import events as ev

__all__ = ["ACCEPTED_EVENTS", "RESPONSE_EVENTS", "TRANSITIONS", "MemberState"]


class MemberState(enum.Enum):
    """Where the member stands in the group."""

    #: No subscription yet, or waiting (backoff) before the next rejoin.
    UNJOINED = "unjoined"
    #: FindCoordinator in flight, or backing off before the next lookup.
    DISCOVERING = "discovering"
    #: Before JoinGroup (KIP-429 1a-1d): auto-commit, then lost/revoked callbacks, in flight.
    PREPARING = "preparing"
    #: JoinGroup in flight.
    JOINING = "joining"
    #: Leader only: waiting for metadata covering every member's topics before assigning.
    AWAITING_METADATA = "awaiting_metadata"
    #: SyncGroup in flight.
    AWAITING_SYNC = "awaiting_sync"
    #: After SyncGroup (KIP-429 3a-3d): revoked, then assigned callbacks in flight.
    RECONCILING = "reconciling"
    #: A member of the current generation; heartbeating.
    STABLE = "stable"
    #: Unsubscribe or close: commit, revoke callbacks, LeaveGroup.
    LEAVING = "leaving"
    #: Closed by the user; terminal.
    CLOSED = "closed"
    #: A fatal error (FENCED_INSTANCE_ID, ...); only CloseRequested is accepted.
    FATAL = "fatal"


S = MemberState

#: Response events: accepted in every state, acted on only when their token matches the
#: request the machine waits for (otherwise they are stale and dropped).
RESPONSE_EVENTS: frozenset[type[ev.Event]] = frozenset(
    {
        ev.CoordinatorFound,
        ev.CoordinatorLookupFailed,
        ev.JoinGroupCompleted,
        ev.JoinGroupFailed,
        ev.SyncGroupCompleted,
        ev.SyncGroupFailed,
        ev.HeartbeatCompleted,
        ev.HeartbeatFailed,
        ev.LeaveGroupCompleted,
        ev.CommitCompleted,
        ev.CommitFailed,
        ev.CallbacksFinished,
    }
)

_LIVE = frozenset(S) - {S.CLOSED, S.FATAL}

#: Which non-response event each state accepts.
ACCEPTED_EVENTS: dict[type[ev.Event], frozenset[MemberState]] = {
    ev.SubscriptionChanged: _LIVE - {S.LEAVING},
    ev.UnsubscribeRequested: _LIVE,
    ev.CloseRequested: frozenset(S),
    ev.MetadataUpdated: frozenset(S),
    ev.CoordinatorLost: frozenset(S),
}

#: Which state may follow which (checked after every event and timer).
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: frozenset({S.DISCOVERING, S.PREPARING, S.JOINING, S.LEAVING, S.CLOSED, S.FATAL}),
    S.DISCOVERING: frozenset(
        {S.UNJOINED, S.PREPARING, S.JOINING, S.STABLE, S.LEAVING, S.CLOSED, S.FATAL}
    ),
    S.PREPARING: frozenset({S.DISCOVERING, S.JOINING, S.UNJOINED, S.LEAVING, S.CLOSED, S.FATAL}),
    S.JOINING: frozenset(
        {
            S.UNJOINED,
            S.DISCOVERING,
            S.PREPARING,
            S.AWAITING_METADATA,
            S.AWAITING_SYNC,
            S.LEAVING,
            S.CLOSED,
            S.FATAL,
        }
    ),
    S.AWAITING_METADATA: frozenset(
        {S.AWAITING_SYNC, S.UNJOINED, S.DISCOVERING, S.PREPARING, S.LEAVING, S.CLOSED, S.FATAL}
    ),
    S.AWAITING_SYNC: frozenset(
        {
            S.RECONCILING,
            S.STABLE,
            S.UNJOINED,
            S.DISCOVERING,
            S.PREPARING,
            S.LEAVING,
            S.CLOSED,
            S.FATAL,
        }
    ),
    S.RECONCILING: frozenset(
        {S.STABLE, S.DISCOVERING, S.PREPARING, S.UNJOINED, S.LEAVING, S.CLOSED, S.FATAL}
    ),
    S.STABLE: frozenset(
        {S.DISCOVERING, S.PREPARING, S.JOINING, S.UNJOINED, S.LEAVING, S.CLOSED, S.FATAL}
    ),
    S.LEAVING: frozenset({S.UNJOINED, S.CLOSED, S.FATAL}),
    S.CLOSED: frozenset(),
    S.FATAL: frozenset({S.CLOSED}),
}
