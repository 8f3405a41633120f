"""HeartbeatFields: what the next ConsumerGroupHeartbeat carries (KIP-848).

A part of :class:`~aiogroup.membership.consumer_machine.ConsumerProtocolMachine` with its own
state, usable on its own (``tests/membership/parts/``). A ConsumerGroupHeartbeat leaves out
(null, or -1) what has not changed since the last one the coordinator took, as Java's consumer
does: the subscription, the owned partitions (the member's acknowledgement), the rebalance
timeout, the server assignor and the rack. A *full* heartbeat carries them all; it is sent to
join (epoch 0), and after any failed heartbeat or a coordinator change, when the member cannot
know what the coordinator took. The coordinator answers a full heartbeat with the member's
whole assignment, so a member whose answer was lost learns it again.

A subscription is either topic names or a regular expression (v1's SubscribedTopicRegex, in
RE2/J syntax): the coordinator keeps both fields, so the one not in use goes out empty whenever
the other does (an empty regex clears it, as an empty list of names does).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["HeartbeatFields", "Subscribed"]

#: What the member subscribes to: ``(topic names, None)`` or ``(None, regex)``.
Subscribed = tuple[frozenset[str] | None, str | None]
Owned = Mapping[uuid.UUID, tuple[int, ...]]


class HeartbeatFields:
    """The fields of the last heartbeat sent, to leave out of the next what did not change.

    ``rebalance_timeout_ms``, ``server_assignor`` and ``rack_id`` are the member's, sent in
    every full heartbeat (they never change while it runs).
    """

    __slots__ = ("_owned", "_subscribed", "rack_id", "rebalance_timeout_ms", "server_assignor")

    def __init__(
        self, *, rebalance_timeout_ms: int, server_assignor: str | None, rack_id: str | None
    ) -> None:
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.rack_id = rack_id
        self._subscribed: Subscribed | None = None
        self._owned: dict[uuid.UUID, tuple[int, ...]] | None = None

    @property
    def full_next(self) -> bool:
        """The next heartbeat is a full one (nothing is known to have been taken)."""
        return self._subscribed is None

    def reset(self) -> None:
        """A heartbeat failed, or the coordinator changed, or the member rejoins: the next one
        carries every field."""
        self._subscribed = None
        self._owned = None

    def unacknowledged(self, owned: Owned) -> bool:
        """The member owns something else than the last heartbeat said: it must say so now
        (KIP-848: the coordinator moves on once a member has acknowledged its revocations).
        False while the next heartbeat is a full one anyway (it carries ``owned``)."""
        return self._owned is not None and dict(owned) != self._owned

    def next(self, *, subscribed: Subscribed, owned: Owned) -> dict[str, Any]:
        """The fields of the next heartbeat (the keyword arguments of
        :class:`~aiogroup.membership.consumer_events.SendConsumerGroupHeartbeat` besides the
        member's identity), recorded as sent."""
        full = self.full_next
        out: dict[str, Any] = {}
        if full:
            out["rebalance_timeout_ms"] = self.rebalance_timeout_ms
            out["server_assignor"] = self.server_assignor
            out["rack_id"] = self.rack_id
        if full or subscribed != self._subscribed:
            topics, regex = subscribed
            out["subscribed_topic_names"] = tuple(sorted(topics or ()))
            out["subscribed_topic_regex"] = regex if regex is not None else ""
            self._subscribed = subscribed
        if full or self.unacknowledged(owned):
            out["owned"] = dict(owned)
            self._owned = dict(owned)
        return out
