"""What a group member tells its telemetry sink (:mod:`aiogroup.observability.telemetry`):
each callback timed, what the member may act on and why it changed, what a leader assigned
and withheld. The driver reports through one :class:`Reporter`; telemetry never breaks the
member (a sink that raises is logged at DEBUG and otherwise ignored)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any, Protocol

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.membership import actions as act
from aiogroup.membership.interface import Machine
from aiogroup.protocol.consumer import decode_assignment
from aiogroup.protocol.types import TopicPartition, to_topic_partitions

__all__ = ["ActingWatch", "MemberView", "Reporter", "TelemetryListener"]

log = logging.getLogger("aiogroup.client")

Partitions = frozenset[TopicPartition]


class Reporter:
    """Calls the telemetry sink's methods by name (nothing without a sink)."""

    def __init__(self, telemetry: Any) -> None:
        self.telemetry = telemetry

    def __call__(self, method: str, *args: Any, **kwargs: Any) -> None:
        if self.telemetry is None:
            return
        try:
            getattr(self.telemetry, method)(*args, **kwargs)
        except Exception as exc:  # telemetry must never break the member
            log.debug("telemetry %s failed: %r", method, exc)

    def leader_round(self, action: act.SendSyncGroup, machine: Machine) -> None:
        """What this leader assigned, withheld (KIP-429 2d) and ignored as stale."""
        if self.telemetry is None:
            return
        try:
            assignments = {
                member_id: to_topic_partitions(decode_assignment(data).partitions)
                for member_id, data in action.assignments
            }
        except Exception as exc:  # our own encoding: never expected, never fatal
            log.debug("telemetry leader_round failed: %r", exc)
            return
        plan = machine.last_leader_plan
        self(
            "leader_round",
            action.generation_id,
            assignments,
            withheld=plan.withheld if plan is not None else (),
            stale_claims=machine.stale_claims,
        )


class MemberView(Protocol):
    """What :class:`TelemetryListener` reads of the member when a callback ends."""

    @property
    def generation_id(self) -> int: ...

    @property
    def protocol(self) -> RebalanceProtocol: ...

    @property
    def protocol_name(self) -> str | None:
        """The assignor the group chose (None before the first join)."""
        ...


class TelemetryListener:
    """Wraps the user's listener to report each callback (timed) to the telemetry sink."""

    def __init__(self, member: MemberView, listener: Any, report: Reporter) -> None:
        self._member = member
        self._listener = listener
        self._report = report

    async def _run(self, kind: str, partitions: Partitions) -> None:
        started = time.time()
        error: str | None = None
        try:
            listener = self._listener
            method = getattr(listener, f"on_partitions_{kind}", None) if listener else None
            if method is None and kind == "lost" and listener is not None:
                method = listener.on_partitions_revoked
            if method is not None:
                result = method(partitions)
                if isinstance(result, Awaitable):
                    await result
        except Exception as exc:
            error = repr(exc)
            raise
        finally:
            member = self._member
            self._report(
                f"partitions_{kind}",
                partitions,
                member.generation_id,
                member.protocol_name,
                started,
                time.time(),
                error=error,
                rebalance_protocol=member.protocol.name.lower(),
            )

    async def on_partitions_revoked(self, partitions: Partitions) -> None:
        await self._run("revoked", partitions)

    async def on_partitions_assigned(self, partitions: Partitions) -> None:
        await self._run("assigned", partitions)

    async def on_partitions_lost(self, partitions: Partitions) -> None:
        await self._run("lost", partitions)


class ActingWatch:
    """Notices, in the driver's loop, when what the member may act on changes, and tells the
    telemetry sink why (``lapse``, ``proof`` or ``rebalance``) along with every state change."""

    def __init__(self, machine: Machine, report: Reporter, now: float) -> None:
        self._machine = machine
        self._report = report
        self._acting = machine.may_act_on(now)
        self._state = machine.state
        #: (generation, partitions) when a session lapsed; a return to them is the proof.
        self._lapsed: tuple[int, Partitions] | None = None

    def check(self, now: float) -> bool:
        """Record what changed since the last call; True if the acting set changed."""
        machine = self._machine
        if machine.state is not self._state:
            self._state = machine.state
            self._report("state", self._state.value, machine.generation_id)
        acting = machine.may_act_on(now)
        if acting == self._acting:
            return False
        before, self._acting = self._acting, acting
        deadline = machine.session_deadline
        at: float | None = None
        if not acting and deadline is not None and now >= deadline:
            reason = "lapse"
            at = time.time() - (now - deadline)  # took effect at the deadline, not now
            self._lapsed = (machine.generation_id, before)
        elif (
            self._lapsed is not None
            and self._lapsed[0] == machine.generation_id
            and acting <= self._lapsed[1]
        ):
            reason = "proof"
            self._lapsed = None
        else:
            reason = "rebalance"
            self._lapsed = None
        self._report("acting", acting, reason, machine.generation_id, at=at)
        return True
