"""Fault injection for the embedded broker, reachable as ``broker.faults``.

Every fault is deterministic: a rule applies to the next ``count`` responses of one API that
match its filters (``member_id`` and/or ``client_id``), in the order requests arrive, and each
application is recorded in :attr:`Faults.events` and logged on the
``aiogroup.testing.embedded.faults``
logger. Rules::

    broker.faults.delay("Heartbeat", 0.5, count=2, member_id=m)  # answer 0.5 s late
    broker.faults.drop("SyncGroup")                                # never answer (lost response)
    broker.faults.fail("OffsetCommit", 27, client_id="c1")        # answer REBALANCE_IN_PROGRESS

Where a failed request is processed: JoinGroup, SyncGroup, Heartbeat and LeaveGroup are *not*
processed (the coordinator never sees them, as if the broker had refused them); every other API
is processed and its answer has every ``error_code`` replaced, as if the broker had failed late.
``delay`` and ``drop`` always process the request, then hold or discard the answer.

Connections and the broker itself::

    broker.faults.cut(member_id=m)      # close that member's connections (returns how many)
    await broker.restart()              # same port; topics and committed offsets survive
    broker.faults.group_state("g")      # the coordinator's GroupView (state, generation, ...)

The broker's own incidents (malformed frames, unknown API keys, oversized or truncated
requests) are recorded in the same list with ``action="closed"``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.messages import GroupView
from aiogroup.testing.wire import API_KEYS_BY_NAME, API_NAMES

__all__ = ["Action", "FaultEvent", "FaultRule", "Faults"]

logger = logging.getLogger("aiogroup.testing.embedded.faults")

Action = Literal["delay", "drop", "fail"]

#: APIs whose failure is injected before the coordinator sees the request.
GROUP_APIS = frozenset({11, 12, 13, 14, 68})  # 68: ConsumerGroupHeartbeat (KIP-848)


@dataclass(slots=True)
class FaultRule:
    """One armed fault; ``remaining`` counts down as it is applied."""

    rule_id: int
    action: Action
    api_key: int
    remaining: int
    seconds: float = 0.0
    error_code: int = 0
    member_id: str | None = None
    client_id: str | None = None

    def matches(self, api_key: int, client_id: str, member_ids: frozenset[str]) -> bool:
        if self.remaining <= 0 or api_key != self.api_key:
            return False
        if self.client_id is not None and client_id != self.client_id:
            return False
        return self.member_id is None or self.member_id in member_ids


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """One applied fault or broker incident."""

    seq: int
    action: str  # delay | drop | fail | cut | stop | start | restart | closed
    api: str | None = None
    client_id: str | None = None
    member_id: str | None = None
    detail: str = ""
    rule_id: int | None = None


@dataclass
class Faults:
    """The fault plan of one broker. Methods are synchronous and must be called on the broker's
    event loop thread (the threaded runner forwards them)."""

    _cutter: Callable[[str | None, str | None], int] | None = None
    _group_view: Callable[[str], GroupView | None] | None = None
    rules: list[FaultRule] = field(default_factory=list)
    events: list[FaultEvent] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _seq: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # --- arming -----------------------------------------------------------------------------

    def delay(
        self,
        api: str | int,
        seconds: float,
        *,
        count: int = 1,
        member_id: str | None = None,
        client_id: str | None = None,
    ) -> FaultRule:
        """Answer the next ``count`` matching requests ``seconds`` late."""
        if seconds < 0:
            raise ConfigurationError("a delay must be >= 0 seconds")
        return self._arm("delay", api, count, member_id, client_id, seconds=seconds)

    def drop(
        self,
        api: str | int,
        *,
        count: int = 1,
        member_id: str | None = None,
        client_id: str | None = None,
    ) -> FaultRule:
        """Process the next ``count`` matching requests but never answer them."""
        return self._arm("drop", api, count, member_id, client_id)

    def fail(
        self,
        api: str | int,
        error_code: int,
        *,
        count: int = 1,
        member_id: str | None = None,
        client_id: str | None = None,
    ) -> FaultRule:
        """Answer the next ``count`` matching requests with ``error_code``."""
        if not -1 <= error_code <= 32767 or error_code == 0:
            raise ConfigurationError(f"error code {error_code} is not a Kafka error")
        return self._arm("fail", api, count, member_id, client_id, error_code=error_code)

    def clear(self) -> None:
        """Disarm every rule (events are kept)."""
        self.rules.clear()

    def _arm(
        self,
        action: Action,
        api: str | int,
        count: int,
        member_id: str | None,
        client_id: str | None,
        *,
        seconds: float = 0.0,
        error_code: int = 0,
    ) -> FaultRule:
        api_key = _api_key(api)
        if count < 1:
            raise ConfigurationError("count must be >= 1")
        rule = FaultRule(
            rule_id=next(self._ids),
            action=action,
            api_key=api_key,
            remaining=count,
            seconds=seconds,
            error_code=error_code,
            member_id=member_id,
            client_id=client_id,
        )
        self.rules.append(rule)
        logger.info("armed fault %s", rule)
        return rule

    # --- applying (called by the broker) ----------------------------------------------------

    def take(self, api_key: int, client_id: str, member_ids: frozenset[str]) -> FaultRule | None:
        """The first armed rule matching this request, consumed by one; None if none."""
        for rule in self.rules:
            if rule.matches(api_key, client_id, member_ids):
                rule.remaining -= 1
                if rule.remaining == 0:
                    self.rules.remove(rule)
                member = rule.member_id or (min(member_ids) if member_ids else None)
                detail = {
                    "delay": f"{rule.seconds:g}s",
                    "drop": "response discarded",
                    "fail": f"error_code={rule.error_code}",
                }[rule.action]
                self.record(
                    rule.action,
                    api=API_NAMES.get(api_key),
                    client_id=client_id,
                    member_id=member,
                    detail=detail,
                    rule_id=rule.rule_id,
                )
                return rule
        return None

    def record(
        self,
        action: str,
        *,
        api: str | None = None,
        client_id: str | None = None,
        member_id: str | None = None,
        detail: str = "",
        rule_id: int | None = None,
    ) -> FaultEvent:
        event = FaultEvent(next(self._seq), action, api, client_id, member_id, detail, rule_id)
        self.events.append(event)
        level = logging.INFO if action in ("start", "stop", "restart") else logging.WARNING
        logger.log(level, "fault %s", event)
        return event

    def events_of(self, action: str) -> list[FaultEvent]:
        return [e for e in self.events if e.action == action]

    # --- connections and inspection ---------------------------------------------------------

    def cut(self, *, member_id: str | None = None, client_id: str | None = None) -> int:
        """Close every connection of a member (or client id); returns how many were closed."""
        if member_id is None and client_id is None:
            raise ConfigurationError("cut() needs a member_id or a client_id")
        if self._cutter is None:
            raise ConfigurationError("this fault plan is not attached to a broker")
        return self._cutter(member_id, client_id)

    def group_state(self, group_id: str) -> GroupView | None:
        """The coordinator's view of ``group_id`` (None if it never existed)."""
        if self._group_view is None:
            raise ConfigurationError("this fault plan is not attached to a broker")
        return self._group_view(group_id)

    def generation(self, group_id: str) -> int:
        """The group's generation id (-1 if the group does not exist)."""
        view = self.group_state(group_id)
        return -1 if view is None else view.generation_id


def _api_key(api: str | int) -> int:
    if isinstance(api, int):
        if api not in API_NAMES:
            raise ConfigurationError(f"the embedded broker does not serve API key {api}")
        return api
    key = API_KEYS_BY_NAME.get(api)
    if key is None:
        raise ConfigurationError(f"unknown API {api!r}; known: {sorted(API_KEYS_BY_NAME)}")
    return key
