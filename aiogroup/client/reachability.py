"""What an operator reads when a broker goes away: one line when it becomes unreachable, a
reminder every :data:`REMINDER_S` seconds while it stays away, one line when it is back, with
how long it was gone.

A stopped broker makes every request of a member and of its consumer fail within milliseconds,
and aiokafka's client logs each reconnect attempt (19 lines a second were seen from one
consumer). The :class:`~aiogroup.client.transport.Transport` reports each request's outcome
per broker here instead, and those aiokafka lines go to DEBUG
(:class:`~aiogroup.client.logs.AiokafkaFilter`). Lines go to the ``aiogroup.client`` logger at
WARNING, with ``node_id``, ``address``, ``down_s`` and ``attempts`` as record attributes.

Sans-I/O: every call takes ``now`` (monotonic seconds); nothing here reads a clock.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiogroup.observability.health import Outage

__all__ = ["REMINDER_S", "Reachability"]

#: Seconds between two reminders that a broker is still unreachable.
REMINDER_S = 30.0

log = logging.getLogger("aiogroup.client")


@dataclass(slots=True)
class _Outage:
    since: float
    last_line: float
    address: str
    reason: str
    attempts: int = 1


class Reachability:
    """Which brokers a client cannot reach now, and since when (per node id; bootstrap
    servers have ids of their own, as aiokafka names them)."""

    def __init__(self, owner: str, reminder_s: float | None = None) -> None:
        #: Who is reporting, for the lines (``"aiogroup (group billing)"``).
        self.owner = owner
        self.reminder_s = REMINDER_S if reminder_s is None else reminder_s
        self._down: dict[object, _Outage] = {}

    @property
    def unreachable(self) -> frozenset[object]:
        """The nodes whose last request failed to reach them."""
        return frozenset(self._down)

    def is_down(self, node_id: object) -> bool:
        """Whether the last request to ``node_id`` failed to reach it (cheap: every answer
        asks)."""
        return node_id in self._down

    def since(self, node_id: object) -> float | None:
        """When ``node_id`` became unreachable (None: it is not)."""
        outage = self._down.get(node_id)
        return None if outage is None else outage.since

    def outages(self) -> list[Outage]:
        """Every broker unreachable now: since when, how many attempts, the latest reason
        (what health reports as ``disconnected``)."""
        return [
            Outage(node, o.address, o.since, o.attempts, o.reason) for node, o in self._down.items()
        ]

    def failed(self, node_id: object, address: str, reason: str, now: float) -> None:
        """A request to ``node_id`` could not reach it (refused, lost, no answer)."""
        outage = self._down.get(node_id)
        extra = {"node_id": node_id, "address": address}
        if outage is None:
            self._down[node_id] = _Outage(since=now, last_line=now, address=address, reason=reason)
            log.warning(
                "%s: broker %s (node %s) is unreachable (%s); retrying, with a reminder every "
                "%.0f s while it stays so",
                self.owner, address, node_id, reason, self.reminder_s,
                extra={**extra, "down_s": 0.0, "attempts": 1},
            )  # fmt: skip
            return
        outage.attempts += 1
        outage.reason = reason
        if now - outage.last_line >= self.reminder_s:
            outage.last_line = now
            down = now - outage.since
            log.warning(
                "%s: broker %s (node %s) still unreachable after %.0f s (%d attempts; %s)",
                self.owner, address, node_id, down, outage.attempts, reason,
                extra={**extra, "down_s": down, "attempts": outage.attempts},
            )  # fmt: skip

    def answered(self, node_id: object, address: str, now: float) -> None:
        """A request reached ``node_id`` (whatever it answered)."""
        outage = self._down.pop(node_id, None)
        if outage is None:
            return
        down = now - outage.since
        log.warning(
            "%s: broker %s (node %s) is reachable again after %.1f s (%d failed attempts)",
            self.owner, address, node_id, down, outage.attempts,
            extra={"node_id": node_id, "address": address, "down_s": down,
                   "attempts": outage.attempts},
        )  # fmt: skip

    def forget(self, node_id: object) -> None:
        """``node_id`` left the cluster (or the client closed): no line either way."""
        self._down.pop(node_id, None)
