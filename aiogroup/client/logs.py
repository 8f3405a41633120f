"""What a group member logs, and how the aiokafka client underneath is kept from flooding.

Loggers (all under ``aiogroup``, so one ``logging.getLogger("aiogroup").setLevel(...)`` decides):

* ``aiogroup.client`` INFO: the member joined (generation, protocol, leader or not), a
  rebalance completed (generation, protocol, how many partitions were assigned, revoked and lost,
  how many it owns, how long it took), the member left. WARNING: errors it recovers from
  (coordinator unreachable, a failed rebalance, a failed commit), at most one line per kind
  per :data:`RATE_LIMIT_S` seconds; the next line says how many were not shown. Every line
  carries its numbers as record attributes too (``group_id``, ``generation_id``, ``protocol``,
  ``assigned``, ``revoked``, ``lost``, ``owned``, ``duration_s``, ...), for structured logging.
* ``aiogroup.membership`` WARNING: a subscribed topic does not exist (once per topic).
* ``aiogroup.client`` WARNING, for a broker that cannot be reached: one line when it goes away,
  a reminder every 30 s while it stays away, one line when it is back, with how long it was
  gone (:mod:`aiogroup.client.reachability`).
* ``aiogroup.client.aiokafka``: what aiokafka's client logged at WARNING or above *on behalf of
  a member or its consumer*: its line per reconnect attempt to a broker that is down (dozens per
  second) at DEBUG only, anything else one WARNING per message per :data:`RATE_LIMIT_S` seconds,
  the rest at DEBUG.

The aiokafka records are recognised by a context variable that the member sets in the tasks it
runs (:func:`member_context`), and that the tasks aiokafka starts from them inherit. Records your
own aiokafka producers and consumers log carry no such mark and pass untouched.

The same mark says whose record it is: :class:`MemberFields`, a filter on every logger of the
library (:data:`LIBRARY_LOGGERS`), gives each record logged for a member its identity as
attributes (``group_id``, ``client_id``, ``member_id``, ``generation_id`` or, under the
consumer group protocol, ``member_epoch``, and ``group_instance_id``; see
``docs/logging.md``), read when the record is made, so a JSON formatter or a log pipeline can
index them.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

from aiogroup.errors import error_for_code
from aiogroup.membership import events as ev

if TYPE_CHECKING:
    from aiogroup.membership.interface import Machine

__all__ = [
    "AIOKAFKA_LOGGERS",
    "LIBRARY_LOGGERS",
    "RATE_LIMIT_S",
    "AiokafkaFilter",
    "LogIdentity",
    "MemberFields",
    "RateLimitedLog",
    "install_aiokafka_filter",
    "install_member_fields",
    "member_context",
]

#: Minimum seconds between two lines of one kind from one member (the others go to DEBUG).
RATE_LIMIT_S = 30.0

_install_lock = threading.Lock()

#: The aiokafka loggers a member's client logs through.
AIOKAFKA_LOGGERS = ("aiokafka", "aiokafka.conn", "aiokafka.cluster")

#: aiokafka's lines for a broker it cannot reach, logged on every attempt (dozens a second);
#: :class:`~aiogroup.client.reachability.Reachability` reports the outage instead.
UNREACHABLE_LINES = (
    "Unable connect to",
    "Unable to request metadata from",
    "Unable to update metadata from",
)

#: Every logger the library logs through (:class:`MemberFields` goes on each; a test holds the
#: library's ``getLogger`` calls to this list).
LIBRARY_LOGGERS = (
    "aiogroup.client",
    "aiogroup.client.aiokafka",
    "aiogroup.client.oauth",
    "aiogroup.client.reauth",
    "aiogroup.client.security",
    "aiogroup.client.transport",
    "aiogroup.consumer",
    "aiogroup.membership",
    "aiogroup.assignors",
    "aiogroup.observability.metrics",
    "aiogroup.observability.telemetry",
    "aiogroup.observability.telemetry_kafka",
    "aiogroup.producer",
)


class LogIdentity:
    """Who a member's log records are about. ``member`` (anything with ``member_id`` and
    ``generation_id``: the membership machine) is read when a record is made, so each record
    carries the member id and generation of that moment."""

    __slots__ = ("client_id", "epoch", "group_id", "group_instance_id", "member")

    def __init__(
        self,
        group_id: str,
        *,
        client_id: str | None = None,
        group_instance_id: str | None = None,
        member: Any = None,
        epoch: bool = False,
    ) -> None:
        self.group_id = group_id
        self.client_id = client_id
        self.group_instance_id = group_instance_id
        self.member = member
        #: Under the consumer group protocol (KIP-848) the generation is a member epoch.
        self.epoch = epoch

    def fields(self) -> dict[str, Any]:
        """The record attributes: ``group_id``, ``client_id``, ``member_id`` ("" before the
        first join), ``generation_id`` (-1 outside a generation) or ``member_epoch``, and
        ``group_instance_id`` (None for a dynamic member)."""
        out: dict[str, Any] = {"group_id": self.group_id, "client_id": self.client_id}
        member = self.member
        if member is not None:
            out["member_id"] = member.member_id
            out["member_epoch" if self.epoch else "generation_id"] = member.generation_id
        out["group_instance_id"] = self.group_instance_id
        return out


#: The member a task works for, inherited by the tasks it starts.
_MEMBER: contextvars.ContextVar[LogIdentity | None] = contextvars.ContextVar(
    "aiogroup_member", default=None
)


def member_context(member: LogIdentity | str) -> contextvars.Context:
    """A context marking the code run in it (and the tasks it starts) as ``member``'s (a
    :class:`LogIdentity`, or a group id).

    Run a member's tasks in copies of it (``asyncio.create_task(coro, context=ctx.copy())``).
    """
    identity = LogIdentity(member) if isinstance(member, str) else member
    context = contextvars.copy_context()
    context.run(_MEMBER.set, identity)
    return context


class MemberFields(logging.Filter):
    """Adds the identity of the member a record was logged for (:meth:`LogIdentity.fields`)
    as record attributes, leaving any the call gave in ``extra``. Records logged outside a
    member's tasks pass untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        identity = _MEMBER.get()
        if identity is not None:
            attributes = record.__dict__
            for name, value in identity.fields().items():
                attributes.setdefault(name, value)
        return True


_fields = MemberFields()


def install_member_fields() -> MemberFields:
    """Put :class:`MemberFields` on every logger of :data:`LIBRARY_LOGGERS` (idempotent)."""
    with _install_lock:
        for name in LIBRARY_LOGGERS:
            logger = logging.getLogger(name)
            if _fields not in logger.filters:
                logger.addFilter(_fields)
    return _fields


class RateLimitedLog:
    """Log lines of one kind at most once per ``interval`` seconds; the rest at DEBUG.

    The kind is the ``key`` given (by default the message template). The first line after a
    quiet spell says how many of its kind were not shown. Thread-safe; ``clock`` is monotonic.
    """

    def __init__(
        self,
        logger: logging.Logger,
        interval: float = RATE_LIMIT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def log(
        self,
        level: int,
        msg: str,
        *args: object,
        key: Hashable = None,
        extra: dict[str, Any] | None = None,
        exc_info: Any = None,
        stacklevel: int = 2,
    ) -> bool:
        """Log at ``level``, or at DEBUG if a line of this kind was logged less than
        ``interval`` seconds ago. Returns whether it was logged at ``level``."""
        kind = msg if key is None else key
        now = self._clock()
        with self._lock:
            last = self._seen.get(kind)
            if last is not None and now - last[0] < self.interval:
                self._seen[kind] = (last[0], last[1] + 1)
                shown = False
            else:
                self._seen[kind] = (now, 0)
                shown = True
        if not shown:
            self.logger.debug(msg, *args, extra=extra, exc_info=exc_info, stacklevel=stacklevel)
            return False
        if last is not None and last[1]:
            msg += " (%d more like this in the last %.0f s not shown above DEBUG)"
            args = (*args, last[1], now - last[0])
        self.logger.log(level, msg, *args, extra=extra, exc_info=exc_info, stacklevel=stacklevel)
        return True

    def warning(self, msg: str, *args: object, **kwargs: Any) -> bool:
        kwargs.setdefault("stacklevel", 3)
        return self.log(logging.WARNING, msg, *args, **kwargs)


class AiokafkaFilter(logging.Filter):
    """On aiokafka's loggers: moves records logged for a member to ``aiogroup.client.aiokafka``,
    WARNING and above rate-limited there (one per message and member per interval, the rest at
    DEBUG). Records logged outside a member's tasks pass untouched."""

    def __init__(self, interval: float = RATE_LIMIT_S) -> None:
        super().__init__()
        self.limited = RateLimitedLog(logging.getLogger("aiogroup.client.aiokafka"), interval)

    def filter(self, record: logging.LogRecord) -> bool:
        identity = _MEMBER.get()
        if identity is None or record.levelno < logging.WARNING:
            return True
        group_id = identity.group_id
        if isinstance(record.msg, str) and record.msg.startswith(UNREACHABLE_LINES):
            # One per attempt while a broker is down: the member's Reachability says it once.
            self.limited.logger.debug(
                "aiokafka (for the member of group %s): %s", group_id, record.getMessage(),
                extra={"group_id": group_id, "aiokafka_level": record.levelname},
            )  # fmt: skip
            return False
        self.limited.log(
            logging.WARNING,
            "aiokafka (for the member of group %s): %s",
            group_id,
            record.getMessage(),
            key=(group_id, record.name, record.msg),
            extra={"group_id": group_id, "aiokafka_level": record.levelname},
            exc_info=record.exc_info,
        )
        return False


_installed: AiokafkaFilter | None = None


def install_aiokafka_filter() -> AiokafkaFilter:
    """Attach one :class:`AiokafkaFilter` to aiokafka's loggers (idempotent)."""
    global _installed
    with _install_lock:
        if _installed is None:
            _installed = AiokafkaFilter()
            for name in AIOKAFKA_LOGGERS:
                logging.getLogger(name).addFilter(_installed)
        return _installed


# ---------------------------------------------------------------------- the member's own lines

log = logging.getLogger("aiogroup.client")


def log_joined(
    group_id: str, member_id: str, generation_id: int, protocol: str, *, leader: bool
) -> None:
    log.info(
        "joined group %s as member %s (generation %d, protocol %s%s)",
        group_id,
        member_id,
        generation_id,
        protocol,
        ", leader" if leader else "",
        extra={
            "group_id": group_id,
            "member_id": member_id,
            "generation_id": generation_id,
            "protocol": protocol,
            "leader": leader,
        },
    )


def log_response(limited: RateLimitedLog, group_id: str, machine: Machine, event: ev.Event) -> None:
    """The operator's view of a response the membership machine has just taken."""
    if isinstance(event, ev.JoinGroupCompleted):
        if machine.generation_id == event.generation_id and machine.member_id:
            log_joined(
                group_id,
                event.member_id,
                event.generation_id,
                event.protocol_name,
                leader=machine.is_leader,
            )
    elif isinstance(event, ev.JoinGroupFailed | ev.SyncGroupFailed):
        api = "JoinGroup" if isinstance(event, ev.JoinGroupFailed) else "SyncGroup"
        name = type(error_for_code(event.error_code)).__name__
        if event.error_code in _ROUTINE:
            log.debug("group %s: %s answered %s; rejoining", group_id, api, name)
        else:
            limited.warning(
                "group %s: rebalance failed: %s answered %s (error %d); rejoining",
                group_id,
                api,
                name,
                event.error_code,
                key=("rebalance failed", event.error_code),
                extra={"group_id": group_id, "error_code": event.error_code},
            )


#: JoinGroup/SyncGroup answers that are part of an ordinary rebalance: MEMBER_ID_REQUIRED
#: (KIP-394) and REBALANCE_IN_PROGRESS.
_ROUTINE = frozenset({79, 27})


def log_rebalance(
    group_id: str,
    member_id: str,
    generation_id: int,
    protocol: str,
    *,
    assigned: int,
    revoked: int,
    lost: int,
    owned: int,
    duration_s: float | None,
) -> None:
    """INFO, or WARNING when partitions were lost (another member may own them already)."""
    took = "" if duration_s is None else f" in {duration_s:.3f} s"
    log.log(
        logging.WARNING if lost else logging.INFO,
        "rebalance completed%s: group %s, member %s, generation %d, protocol %s; "
        "assigned %d, revoked %d, lost %d partitions; owns %d",
        took,
        group_id,
        member_id,
        generation_id,
        protocol,
        assigned,
        revoked,
        lost,
        owned,
        extra={
            "group_id": group_id,
            "member_id": member_id,
            "generation_id": generation_id,
            "protocol": protocol,
            "assigned": assigned,
            "revoked": revoked,
            "lost": lost,
            "owned": owned,
            "duration_s": duration_s,
        },
    )


def log_left(group_id: str, member_id: str, *, static: bool, closing: bool) -> None:
    why = "closed" if closing else "unsubscribed"
    if static:
        message = "%s: static member %s of group %s did not leave (KIP-345); its partitions wait"
        message += " for it until its session times out"
    else:
        message = "%s: member %s left group %s"
    log.info(
        message,
        why,
        member_id or "-",
        group_id,
        extra={"group_id": group_id, "member_id": member_id, "static": static},
    )
