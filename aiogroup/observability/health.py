"""Is this consumer healthy, and if not, why and since when? (sans-I/O)

``consumer.health()`` and ``member.health()`` return a :class:`Health`: OK, or the
:class:`Problem` list, each with its :class:`Cause`, since when (wall clock) and for how long,
and a reason in words. The rules, each bounded by an option the member already has, so a blip
the group rides out by itself never reads as a problem:

==========================  ===============================================================
``rebalancing``             the member has been out of a stable generation (joining, waiting
                            for SyncGroup or the assignment's callbacks) for longer than its
                            rebalance timeout (the time the coordinator gives every member
                            to rejoin; ``max_poll_interval_ms`` for a Consumer, as Java)
``no_coordinator``          no group coordinator known for longer than the session timeout
                            (by then the coordinator has evicted a silent member, and the
                            member has stopped acting on its partitions, KAFKA-7026)
``disconnected``            a broker unreachable for longer than the session timeout
``partition_stalled``       a partition that wants records got none for longer than the
                            session timeout: its fetches fail, go unanswered, or come back
                            empty while the log has records past the position (Consumer only)
``not_polling``             the application has not asked for records for longer than
                            ``max_poll_interval_ms`` (KIP-62: the member has left the group;
                            the next ``getmany``/``getone`` rejoins) (Consumer only)
``stopped``                 the member is closed, or stopped on a fatal error
==========================  ===============================================================

:attr:`Health.live` is False only for the causes a restart can cure (:data:`LIVENESS`: an
application that stopped polling, a rebalance stuck in the member, a fatal error): a liveness
probe built on it restarts a stuck process, not every pod at once while a broker is down.
:attr:`Health.ready` is :attr:`Health.ok`.

Nothing here reads a clock: the driver passes ``now`` (its monotonic clock, in which every
"since" it tracks is taken) and ``wall`` (``time.time()`` at that moment), and each problem's
``since`` comes out on the wall clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiogroup.membership.states import MemberState
from aiogroup.protocol.types import TopicPartition

__all__ = [
    "LIVENESS",
    "Cause",
    "Health",
    "Limits",
    "MemberWatch",
    "Outage",
    "Problem",
    "Stall",
    "evaluate",
    "member_problems",
    "poll_problem",
    "stall_problems",
]


class Cause(enum.Enum):
    """Why a member or consumer is not healthy."""

    REBALANCING = "rebalancing"
    NO_COORDINATOR = "no_coordinator"
    DISCONNECTED = "disconnected"
    PARTITION_STALLED = "partition_stalled"
    NOT_POLLING = "not_polling"
    STOPPED = "stopped"


#: The causes a liveness probe fails on: those a restart of the process can cure.
LIVENESS = frozenset({Cause.REBALANCING, Cause.NOT_POLLING, Cause.STOPPED})


@dataclass(frozen=True, slots=True)
class Problem:
    """One reason the member is not healthy."""

    cause: Cause
    #: When it began, wall-clock seconds (``time.time()``).
    since: float
    #: How long it had lasted when health was checked, in seconds.
    duration_s: float
    #: What is wrong, in words.
    reason: str
    #: The partitions it concerns (``partition_stalled``).
    partitions: frozenset[TopicPartition] = frozenset()

    def __str__(self) -> str:
        return f"{self.cause.value} for {self.duration_s:.1f} s: {self.reason}"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form: cause, since (wall seconds), duration_s, reason, partitions."""
        return {
            "cause": self.cause.value,
            "since": self.since,
            "duration_s": round(self.duration_s, 3),
            "reason": self.reason,
            "partitions": [str(tp) for tp in sorted(self.partitions)],
        }


@dataclass(frozen=True, slots=True)
class Health:
    """The verdict at one moment: OK, or the problems."""

    problems: tuple[Problem, ...] = ()
    #: When it was checked, wall-clock seconds.
    checked_at: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def ready(self) -> bool:
        """For a readiness probe: no problem at all."""
        return not self.problems

    @property
    def live(self) -> bool:
        """For a liveness probe: no problem a restart would cure (:data:`LIVENESS`)."""
        return not any(p.cause in LIVENESS for p in self.problems)

    @property
    def causes(self) -> frozenset[Cause]:
        return frozenset(p.cause for p in self.problems)

    def __bool__(self) -> bool:
        return self.ok

    def describe(self) -> str:
        """``"OK"``, or each problem in words, one per line."""
        return "OK" if self.ok else "\n".join(str(p) for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready form (what the example HTTP service serves)."""
        return {
            "status": "ok" if self.ok else "unhealthy",
            "live": self.live,
            "ready": self.ready,
            "checked_at": self.checked_at,
            "problems": [p.as_dict() for p in self.problems],
        }


@dataclass(frozen=True, slots=True)
class Limits:
    """How long each condition may last before it is a problem (seconds)."""

    rebalance_timeout_s: float
    session_timeout_s: float
    #: A Consumer's ``max_poll_interval_ms`` (None for a bare group member).
    max_poll_interval_s: float | None = None


@dataclass(frozen=True, slots=True)
class Outage:
    """A broker the client cannot reach (:class:`aiogroup.client.reachability.Reachability`)."""

    node_id: object
    address: str
    since: float
    attempts: int
    reason: str


@dataclass(frozen=True, slots=True)
class Stall:
    """A partition waiting for records since ``since`` (monotonic), with the last reason seen."""

    partition: TopicPartition
    since: float
    reason: str


#: The member states of a rebalance (out of a stable generation, still subscribed), in words.
_REBALANCE_WORDS = {
    MemberState.UNJOINED: "waiting to rejoin",
    MemberState.DISCOVERING: "looking for the group coordinator",
    MemberState.PREPARING: "committing and running its revocation callbacks before rejoining",
    MemberState.JOINING: "waiting for the coordinator to admit it (JoinGroup or heartbeat)",
    MemberState.AWAITING_METADATA: "the leader waiting for metadata of the members' topics",
    MemberState.AWAITING_SYNC: "waiting for its assignment (SyncGroup)",
    MemberState.RECONCILING: "running its assignment callbacks",
}
_ENDED = frozenset({MemberState.CLOSED, MemberState.FATAL})


@dataclass(slots=True)
class MemberWatch:
    """Since when the member has been rebalancing and without a coordinator (monotonic time).

    The driver calls :meth:`observe` after every event, timer and call the machine took; the
    first moment a condition holds is kept until it ends.
    """

    rebalancing_since: float | None = None
    no_coordinator_since: float | None = None
    state: MemberState = MemberState.UNJOINED
    #: The generation (or epoch) the member was last stable in (-1: never).
    last_generation: int = -1
    _generation: int = field(default=-1, repr=False)

    def observe(
        self,
        state: MemberState,
        *,
        subscribed: bool,
        coordinator_known: bool,
        generation_id: int,
        now: float,
    ) -> None:
        self.state = state
        rebalancing = subscribed and state in _REBALANCE_WORDS
        if not rebalancing:
            self.rebalancing_since = None
        elif self.rebalancing_since is None:
            self.rebalancing_since = now
        if state is MemberState.STABLE:
            self.last_generation = generation_id
        lost = subscribed and not coordinator_known and state not in _ENDED
        if not lost:
            self.no_coordinator_since = None
        elif self.no_coordinator_since is None:
            self.no_coordinator_since = now


def member_problems(
    watch: MemberWatch,
    limits: Limits,
    now: float,
    *,
    outages: Iterable[Outage] = (),
    fatal: BaseException | None = None,
    closed: bool = False,
) -> list[tuple[Cause, float, str, frozenset[TopicPartition]]]:
    """The member's problems at ``now``: ``(cause, since (monotonic), reason, partitions)``."""
    out: list[tuple[Cause, float, str, frozenset[TopicPartition]]] = []
    if fatal is not None or closed or watch.state in _ENDED:
        why = (
            f"the member stopped on a fatal error: {fatal}"
            if fatal is not None
            else "the member is closed"
        )
        out.append((Cause.STOPPED, now, why, frozenset()))
        return out
    since = watch.rebalancing_since
    if since is not None and now - since > limits.rebalance_timeout_s:
        after = (
            f"since it left generation {watch.last_generation}"
            if watch.last_generation >= 0
            else "since it started, never having joined"
        )
        out.append(
            (
                Cause.REBALANCING,
                since,
                f"rebalancing for {now - since:.0f} s ({after}), longer than the rebalance "
                f"timeout ({limits.rebalance_timeout_s:g} s); now "
                f"{_REBALANCE_WORDS.get(watch.state, watch.state.value)}",
                frozenset(),
            )
        )
    since = watch.no_coordinator_since
    if since is not None and now - since > limits.session_timeout_s:
        out.append(
            (
                Cause.NO_COORDINATOR,
                since,
                f"no group coordinator for {now - since:.0f} s, longer than the session timeout "
                f"({limits.session_timeout_s:g} s): FindCoordinator finds none, or the one found "
                "cannot be reached; the coordinator has evicted the member by now",
                frozenset(),
            )
        )
    for outage in outages:
        if now - outage.since > limits.session_timeout_s:
            out.append(
                (
                    Cause.DISCONNECTED,
                    outage.since,
                    f"broker {outage.address} (node {outage.node_id}) unreachable for "
                    f"{now - outage.since:.0f} s ({outage.attempts} failed attempts): "
                    f"{outage.reason}",
                    frozenset(),
                )
            )
    return out


def stall_problems(
    stalls: Iterable[Stall], limits: Limits, now: float
) -> list[tuple[Cause, float, str, frozenset[TopicPartition]]]:
    """One ``partition_stalled`` problem per partition waiting longer than the session
    timeout."""
    out = []
    for stall in stalls:
        waited = now - stall.since
        if waited > limits.session_timeout_s:
            out.append(
                (
                    Cause.PARTITION_STALLED,
                    stall.since,
                    f"{stall.partition} has had no records for {waited:.0f} s although it "
                    f"wants some (longer than the session timeout, "
                    f"{limits.session_timeout_s:g} s): {stall.reason}",
                    frozenset({stall.partition}),
                )
            )
    return out


def poll_problem(
    last_poll: float, polling: bool, limits: Limits, now: float
) -> list[tuple[Cause, float, str, frozenset[TopicPartition]]]:
    """``not_polling`` when the application last asked for records (or last got them) more
    than ``max_poll_interval_ms`` ago and is not waiting in a call now."""
    limit = limits.max_poll_interval_s
    if limit is None or polling or now - last_poll <= limit:
        return []
    return [
        (
            Cause.NOT_POLLING,
            last_poll,
            f"the application has not asked for records (getmany/getone) for "
            f"{now - last_poll:.0f} s, longer than max_poll_interval_ms ({limit:g} s): the "
            "member left the group and its partitions went to others (KIP-62); the next "
            "getmany/getone rejoins",
            frozenset(),
        )
    ]


def evaluate(
    problems: Sequence[tuple[Cause, float, str, frozenset[TopicPartition]]],
    now: float,
    wall: float,
) -> Health:
    """The :class:`Health` of ``problems`` found at monotonic ``now`` = wall-clock ``wall``."""
    return Health(
        tuple(
            Problem(cause, wall - (now - since), now - since, reason, partitions)
            for cause, since, reason, partitions in problems
        ),
        checked_at=wall,
    )

