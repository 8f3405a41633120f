"""What both membership machines do alike with an event before its handler, and with a
callback's error after it (:mod:`~aiogroup.membership.machine`,
:mod:`~aiogroup.membership.consumer_machine`)."""

from __future__ import annotations

from collections.abc import Mapping

from aiogroup.errors import AiogroupError, LocalProtocolError, RebalanceCallbackError
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.requests import Tokens
from aiogroup.membership.states import MemberState, Request

__all__ = ["accepts", "callback_error"]


def accepts(
    event: ev.Event,
    state: MemberState,
    *,
    answers: Mapping[type[ev.Event], Request],
    accepted: Mapping[type[ev.Event], frozenset[MemberState]],
    tokens: Tokens,
) -> bool:
    """Whether a machine in ``state`` acts on ``event`` by its tables: a response only with the
    token it awaits (then it awaits it no more; a stale one is dropped, KAFKA-13406; commits
    are many and matched by the commits part), a user event only in the states that accept it
    (else :class:`LocalProtocolError`)."""
    kind = type(event)
    request = answers.get(kind)
    if request is None:
        allowed = accepted.get(kind)
        if allowed is None:
            raise LocalProtocolError(f"not an event of this membership machine: {event!r}")
        if state not in allowed:
            raise LocalProtocolError(f"{kind.__name__} not accepted in state {state.name}")
        return True
    return request is Request.COMMIT or tokens.answered(request, getattr(event, "token", None))


def callback_error(error: BaseException | None) -> act.RaiseToUser | None:
    """What the first error of a rebalance's callbacks becomes (KIP-429: raised to the user,
    the assignment change stands): ours as it is, the user's wrapped (its ``__cause__``)."""
    if error is None:
        return None
    if isinstance(error, AiogroupError):
        return act.RaiseToUser(error)
    wrapped = RebalanceCallbackError(f"rebalance callback raised {error!r}")
    wrapped.__cause__ = error
    return act.RaiseToUser(wrapped)
