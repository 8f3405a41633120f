"""The KIP-848 machine's state table: which event each state accepts, which request each
response answers, which state may follow which, and the named groups of states its rules speak
of (:mod:`~aiogroup.membership.consumer_machine`).

It uses the states of the classic machine (:class:`~aiogroup.membership.states.MemberState`)
that keep their meaning, so a driver and a consumer read either machine alike:

=============  ===========================================================================
UNJOINED       no subscription, or waiting (backoff) before joining again
DISCOVERING    not a member yet, and FindCoordinator in flight (or backing off)
JOINING        the heartbeat with member epoch 0 is due or in flight
RECONCILING    a new assignment is being taken: revoked callbacks first, then assigned
STABLE         a member at its epoch, owning what it acknowledged (or acknowledges next)
PREPARING      fenced, or the session lapsed: the lost callbacks run before it rejoins
LEAVING        close or unsubscribe: commit, revoked callbacks, the heartbeat with epoch -1
               (-2 for a static member)
CLOSED, FATAL  as the classic machine's
=============  ===========================================================================

The classic machine's AWAITING_METADATA and AWAITING_SYNC never occur: the coordinator
assigns, and a target that names a topic not resolvable yet is reconciled in part while the
metadata is asked again.
"""

from __future__ import annotations

from aiogroup.membership import consumer_events as cev
from aiogroup.membership import events as ev
from aiogroup.membership.states import MemberState, Request

__all__ = [
    "ACCEPTED_EVENTS",
    "ANSWERS",
    "CALLBACK_STATES",
    "ENDED",
    "HEARTBEATING",
    "MEMBER",
    "QUIET",
    "RESPONSE_EVENTS",
    "STATES",
    "TRANSITIONS",
]

S = MemberState
R = Request

#: The states this machine uses.
STATES = frozenset(
    {
        S.UNJOINED,
        S.DISCOVERING,
        S.JOINING,
        S.RECONCILING,
        S.STABLE,
        S.PREPARING,
        S.LEAVING,
        S.CLOSED,
        S.FATAL,
    }
)

#: Which request each response event answers (acted on only with the awaited token; the leave
#: heartbeat is awaited as HEARTBEAT too, the regular one abandoned before it goes).
ANSWERS: dict[type[ev.Event], Request] = {
    ev.CoordinatorFound: R.FIND_COORDINATOR,
    ev.CoordinatorLookupFailed: R.FIND_COORDINATOR,
    cev.ConsumerGroupHeartbeatCompleted: R.HEARTBEAT,
    cev.ConsumerGroupHeartbeatFailed: R.HEARTBEAT,
    ev.CallbacksFinished: R.CALLBACKS,
    ev.CommitCompleted: R.COMMIT,
    ev.CommitFailed: R.COMMIT,
}

RESPONSE_EVENTS: frozenset[type[ev.Event]] = frozenset(ANSWERS)

_LIVE = STATES - {S.CLOSED, S.FATAL}

#: Which non-response event each state accepts.
ACCEPTED_EVENTS: dict[type[ev.Event], frozenset[MemberState]] = {
    ev.SubscriptionChanged: _LIVE - {S.LEAVING},
    ev.UnsubscribeRequested: _LIVE,
    ev.CloseRequested: STATES,
    ev.MetadataUpdated: STATES,
    ev.CoordinatorLost: STATES,
}

_OUT = frozenset({S.LEAVING, S.CLOSED, S.FATAL})

#: Which state may follow which (checked on every move).
TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    S.UNJOINED: _OUT | {S.DISCOVERING, S.JOINING},
    S.DISCOVERING: _OUT | {S.UNJOINED, S.JOINING},
    S.JOINING: _OUT | {S.UNJOINED, S.DISCOVERING, S.STABLE, S.PREPARING},
    S.RECONCILING: _OUT | {S.STABLE, S.PREPARING, S.JOINING, S.DISCOVERING},
    S.STABLE: _OUT | {S.UNJOINED, S.DISCOVERING, S.JOINING, S.RECONCILING, S.PREPARING},
    S.PREPARING: _OUT | {S.UNJOINED, S.DISCOVERING, S.JOINING},
    S.LEAVING: frozenset({S.UNJOINED, S.CLOSED, S.FATAL}),
    S.CLOSED: frozenset(),
    S.FATAL: frozenset({S.CLOSED}),
}

#: Terminal: nothing runs, nothing is sent.
ENDED = frozenset({S.CLOSED, S.FATAL})
#: No timers and no moving on by itself: leaving, or terminal.
QUIET = ENDED | {S.LEAVING}
#: A member of the group at an epoch (it heartbeats with it, commits with it).
MEMBER = frozenset({S.STABLE, S.RECONCILING})
#: Heartbeats go out here (JOINING: the one with epoch 0).
HEARTBEATING = MEMBER | {S.JOINING}
#: The rebalance listener may be running.
CALLBACK_STATES = frozenset({S.RECONCILING, S.PREPARING})
