"""The state table is data: every event is routed, every response answers one request, and the
named groups of states agree with the transitions."""

from __future__ import annotations

from aiogroup.membership import events as ev
from aiogroup.membership.machine import _HANDLERS
from aiogroup.membership.states import (
    ACCEPTED_EVENTS,
    ANSWERS,
    CALLBACK_STATES,
    ENDED,
    HEARTBEATING,
    IDLE,
    QUIET,
    REBALANCING,
    RESPONSE_EVENTS,
    TRANSITIONS,
    MemberState,
    Request,
)

S = MemberState


def test_every_event_is_routed_once() -> None:
    events = {
        cls for cls in vars(ev).values() if isinstance(cls, type) and issubclass(cls, ev.Event)
    }
    events.discard(ev.Event)
    assert set(_HANDLERS) == events
    assert not set(ACCEPTED_EVENTS) & RESPONSE_EVENTS
    assert set(ACCEPTED_EVENTS) | RESPONSE_EVENTS == events
    assert set(ANSWERS) == RESPONSE_EVENTS
    assert set(ANSWERS.values()) == set(Request)


def test_every_response_carries_a_token() -> None:
    for kind in ANSWERS:
        assert "token" in kind.__dataclass_fields__, kind


def test_the_transitions_cover_every_state() -> None:
    assert set(TRANSITIONS) == set(S)
    for state, nexts in TRANSITIONS.items():
        assert state not in nexts  # staying is no transition
    assert TRANSITIONS[S.CLOSED] == frozenset()
    assert TRANSITIONS[S.FATAL] == {S.CLOSED}
    assert all(S.CLOSED in TRANSITIONS[s] for s in set(S) - {S.CLOSED})  # close from anywhere


def test_the_named_groups_agree() -> None:
    assert ENDED <= QUIET and S.LEAVING in QUIET
    assert not QUIET & (HEARTBEATING | REBALANCING | IDLE | CALLBACK_STATES)
    assert not IDLE & REBALANCING and not HEARTBEATING & REBALANCING
    assert CALLBACK_STATES <= HEARTBEATING
    # Nothing leaves the terminal states but a close of a fatal member.
    assert all(not TRANSITIONS[s] - {S.CLOSED} for s in ENDED)
