"""The member's states and the explicit tables that say which event each state accepts, which
request each response answers, and which state may follow which (h11 style: anything missing
is a LocalProtocolError), with the named groups of states the machine's rules speak of."""

from __future__ import annotations

import enum

from aiogroup.membership import events as ev

__all__ = [
    "ACCEPTED_EVENTS",
    "ANSWERS",
    "CALLBACK_STATES",
    "ENDED",
    "HEARTBEATING",
    "IDLE",
    "QUIET",
    "REBALANCING",
    "RESPONSE_EVENTS",
    "TRANSITIONS",
    "MemberState",
    "Request",
]


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


class Request(enum.Enum):
    """What the machine waits for an answer to (one of each kind at a time; commits: many)."""

    FIND_COORDINATOR = "FindCoordinator"
    JOIN_GROUP = "JoinGroup"
    SYNC_GROUP = "SyncGroup"
    HEARTBEAT = "Heartbeat"
    LEAVE_GROUP = "LeaveGroup"
    CALLBACKS = "InvokeCallbacks"
    COMMIT = "OffsetCommit"


R = Request

#: Which request each response event answers. Responses are accepted in every state and acted
#: on only when their token is the one the machine waits for (then it waits no more); anything
#: else is stale and dropped (KAFKA-13406). Commits are matched by the commits part.
ANSWERS: dict[type[ev.Event], Request] = {
    ev.CoordinatorFound: R.FIND_COORDINATOR,
    ev.CoordinatorLookupFailed: R.FIND_COORDINATOR,
    ev.JoinGroupCompleted: R.JOIN_GROUP,
    ev.JoinGroupFailed: R.JOIN_GROUP,
    ev.SyncGroupCompleted: R.SYNC_GROUP,
    ev.SyncGroupFailed: R.SYNC_GROUP,
    ev.HeartbeatCompleted: R.HEARTBEAT,
    ev.HeartbeatFailed: R.HEARTBEAT,
    ev.LeaveGroupCompleted: R.LEAVE_GROUP,
    ev.CallbacksFinished: R.CALLBACKS,
    ev.CommitCompleted: R.COMMIT,
    ev.CommitFailed: R.COMMIT,
}

#: Response events (see ANSWERS).
RESPONSE_EVENTS: frozenset[type[ev.Event]] = frozenset(ANSWERS)

_LIVE = frozenset(S) - {S.CLOSED, S.FATAL}

#: Which non-response event each state accepts.
ACCEPTED_EVENTS: dict[type[ev.Event], frozenset[MemberState]] = {
    ev.SubscriptionChanged: _LIVE - {S.LEAVING},
    ev.UnsubscribeRequested: _LIVE,
    ev.RejoinRequested: frozenset(S),  # ignored where there is nothing to rejoin
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

# -- the groups of states the machine's rules name -------------------------------------------------

#: Terminal: nothing runs, nothing is sent.
ENDED = frozenset({S.CLOSED, S.FATAL})
#: No timers and no moving on by itself: leaving, or terminal.
QUIET = ENDED | {S.LEAVING}
#: A round's JoinGroup or SyncGroup is in flight (or the leader waits for metadata between).
REBALANCING = frozenset({S.JOINING, S.AWAITING_METADATA, S.AWAITING_SYNC})
#: A member of a generation heartbeats here (while joined, with a coordinator).
HEARTBEATING = frozenset({S.STABLE, S.PREPARING, S.RECONCILING})
#: The rebalance listener may be running (before the JoinGroup, after the SyncGroup).
CALLBACK_STATES = frozenset({S.PREPARING, S.RECONCILING})
#: Nothing of a rebalance in flight: news (a subscription, metadata, a close, an answer that
#: asks for a rejoin) moves the member on at once.
IDLE = frozenset({S.UNJOINED, S.DISCOVERING, S.STABLE})
