"""The classic group's rebalance: the state transitions every request shares.

:class:`RebalanceCore` holds what JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
the timers and a failover all go through: preparing and completing a rebalance
(``prepareRebalance``, ``onCompleteJoin``), handing out the leader's assignment
(``propagateAssignment``), removing a member (``removeMemberAndUpdateGroup``), checking one
(``validateCurrentMember``), session and rebalance deadlines, and the delivery of parked
answers. The requests themselves are :mod:`~aiogroup.testing.embedded.member_requests`' and
:mod:`~aiogroup.testing.embedded.coordinator`'s; the state they share is declared here and set
by :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`.

Where Kafka versions differ, the code reads the flavour (``self.flavour``, a
:class:`~aiogroup.testing.embedded.rules.Flavour`) and records the rule it applied
(``self._hit(group, rule_id)``, :data:`~aiogroup.testing.embedded.rules.RULES`).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiogroup.errors import CallbackError, LocalProtocolError
from aiogroup.testing.embedded.group import ClassicGroup, Member, State
from aiogroup.testing.embedded.messages import (
    NO_MEMBER_ID,
    ErrorCode,
    JoinGroupMember,
    JoinGroupResponseData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.rules import FLAVOURS, CoordinatorConfig, Flavour

__all__ = ["CommittedOffset", "CoordinatorCallbackError", "RebalanceCore"]


class CoordinatorCallbackError(CallbackError):
    """A ``respond`` callback raised; the coordinator's state is already updated."""


@dataclass(eq=False)
class CommittedOffset:
    """One committed offset, as the coordinator stores it."""

    committed_offset: int
    committed_leader_epoch: int
    metadata: str


class RebalanceCore:
    """The rebalance machinery of :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`
    (its base class; the coordinator sets every attribute declared here)."""

    config: CoordinatorConfig
    #: Group id -> the :data:`~aiogroup.testing.embedded.rules.RULES` that decided something for
    #: it which another flavour would have decided differently.
    rule_hits: dict[str, set[str]]
    _custom_ids: bool
    _id_factory: Callable[[str], str]
    _groups: dict[str, ClassicGroup]
    _offsets: dict[str, dict[tuple[str, int], CommittedOffset]]
    _outbox: list[tuple[Callable[[Any], None], object]]
    _timers: list[tuple[float, int, str, str, str]]
    _seq: int
    _flushing: bool

    @property
    def flavour(self) -> Flavour:
        """The rules of ``config.flavour`` (:data:`~aiogroup.testing.embedded.rules.FLAVOURS`)."""
        return FLAVOURS[self.config.flavour]

    def _hit(self, group: ClassicGroup | str, rule: str) -> None:
        gid = group if isinstance(group, str) else group.group_id
        self.rule_hits.setdefault(gid, set()).add(rule)

    def _new_group(self, group_id: str, now: float) -> ClassicGroup:
        group = ClassicGroup(group_id, self.config.flavour, state_since=now)
        self._groups[group_id] = group
        return group

    # ================================================================ rebalance

    def _maybe_prepare_rebalance(self, group: ClassicGroup, now: float) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now)

    def _prepare_rebalance(self, group: ClassicGroup, now: float) -> None:
        if group.is_in(State.COMPLETING_REBALANCE):
            # Members waiting for their assignment must rejoin instead.
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now)
        group.pending_sync_members.clear()
        group.sync_deadline = None
        if group.is_in(State.EMPTY):
            # group.initial.rebalance.delay.ms (KIP-134): the first rebalance of an empty group
            # waits, and is extended by the same delay whenever a new member arrives, for at
            # most the rebalance timeout (InitialDelayedJoin).
            delay = self.config.initial_rebalance_delay_ms
            group.join_is_initial = True
            group.initial_delay_ms = delay
            group.initial_remaining_ms = max(group.rebalance_timeout_ms() - delay, 0)
            group.join_deadline = now + delay / 1000
        else:
            group.join_is_initial = False
            group.join_deadline = now + group.rebalance_timeout_ms() / 1000
        self._arm(group.join_deadline, "join", group.group_id)
        group.transition_to(State.PREPARING_REBALANCE, now)
        self._try_complete_join(group, now)

    def _try_complete_join(
        self, group: ClassicGroup, now: float, *, removal: str | None = None
    ) -> None:
        """DelayedJoin.tryComplete: done once every member rejoined. The initial delay
        (InitialDelayedJoin) only completes on its timer, except in 4.x when a member's or a
        pending member's session just expired (``removal="expiry"``): those removal paths
        complete the join whenever everyone left has joined. A LeaveGroup (``"leave"``) goes
        through ``maybeCompleteJoinPhase``, which never ends an initial rebalance."""
        if not (
            group.is_in(State.PREPARING_REBALANCE)
            and group.join_deadline is not None
            and group.has_all_members_joined()
        ):
            return
        if group.join_is_initial:
            if removal != "expiry":
                return
            self._hit(group, "initial-delay")
            if not self.flavour.initial_delay_4x:
                return
        self._complete_join(group, now)

    def _expire_join(self, group: ClassicGroup, now: float) -> None:
        if group.join_is_initial and group.new_member_added and group.initial_remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.config.initial_rebalance_delay_ms, group.initial_remaining_ms)
            group.initial_remaining_ms = max(group.initial_remaining_ms - group.initial_delay_ms, 0)
            group.initial_delay_ms = delay
            group.join_deadline = now + delay / 1000
            self._arm(group.join_deadline, "join", group.group_id)
            return
        self._complete_join(group, now)

    def _complete_join(self, group: ClassicGroup, now: float) -> None:
        """``onCompleteJoin``: drop dynamic members that did not rejoin, bump the generation,
        answer every parked JoinGroup (the leader gets the members' metadata)."""
        group.join_deadline = None
        for member in group.not_yet_rejoined():
            if member.group_instance_id is None:
                # Static members stay until their session expires (KIP-345, KAFKA-8220).
                group.remove(member.member_id)
                self._answer_parked(member, ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(State.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Only static members that did not rejoin are left: wait another rebalance timeout
            # for them to come back or for their sessions to expire.
            group.join_is_initial = False
            group.join_deadline = now + max(group.rebalance_timeout_ms(), 1) / 1000
            self._arm(group.join_deadline, "join", group.group_id)
            return
        group.init_next_generation(now)
        if group.vote_tie_varies:
            self._hit(group, "vote-tie")
        if group.is_in(State.EMPTY):
            group.stored = group.to_stored()
            return
        for member in group.members.values():
            if member.join_callback is not None:
                cb, member.join_callback = member.join_callback, None
                self._send(cb, self._join_result(group, member, with_members=None))
            self._schedule_heartbeat(group, member, now)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        if self.flavour.pending_sync_timeout:
            # KAFKA-12890 (DelayedSync): members must send SyncGroup within the rebalance
            # timeout (Kafka 2.3 waits for them forever).
            group.sync_generation = group.generation_id
            group.sync_deadline = now + group.rebalance_timeout_ms() / 1000
            self._arm(group.sync_deadline, "sync", group.group_id)

    def _join_result(
        self,
        group: ClassicGroup,
        member: Member,
        *,
        with_members: bool | None,
        leader: str | None = None,
        skip_assignment: bool = False,
    ) -> JoinGroupResponseData:
        """A successful JoinGroup answer; ``with_members`` None means "if it is the leader"."""
        if with_members is None:
            with_members = group.is_leader(member.member_id)
        members: tuple[JoinGroupMember, ...] = ()
        if with_members and group.protocol_name is not None:
            protocol = group.protocol_name
            if len(group.members) > 1:
                self._hit(group, "member-order")
            members = tuple(
                JoinGroupMember(
                    m.member_id, m.metadata(protocol), group_instance_id=m.group_instance_id
                )
                for m in group.members.values()
            )
        return JoinGroupResponseData(
            error_code=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=(leader if leader is not None else group.leader_id) or "",
            member_id=member.member_id,
            members=members,
            skip_assignment=skip_assignment,
        )

    # ================================================================ assignment

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            group.sync_deadline = None

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, now: float) -> None:
        ok = error == ErrorCode.NONE
        for member in group.members.values():
            if member.sync_callback is not None:
                cb, member.sync_callback = member.sync_callback, None
                self._send(
                    cb,
                    SyncGroupResponseData(
                        error_code=error,
                        assignment=member.assignment,
                        protocol_type=group.protocol_type if ok else None,
                        protocol_name=group.protocol_name if ok else None,
                    ),
                )
                # The session restarts once the member has its answer: while it waited its
                # heartbeat deadline was considered satisfied.
                self._schedule_heartbeat(group, member, now)

    def _reset_and_propagate_assignment_error(
        self, group: ClassicGroup, error: ErrorCode, now: float
    ) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error, now)

    # ================================================================ members

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, now: float, *, removal: str
    ) -> None:
        """``removeMemberAndUpdateGroup``: a parked JoinGroup is answered UNKNOWN_MEMBER_ID; a
        parked SyncGroup never is (Kafka only answers the join callback, then forgets the
        member); rebalance if needed. ``removal`` is why: ``"leave"`` or ``"expiry"``."""
        group.remove(member.member_id)
        member.heartbeat_deadline = None
        self._answer_parked(member, ErrorCode.UNKNOWN_MEMBER_ID, drop_sync=True)
        if group.is_in(State.STABLE, State.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, now)
        elif group.is_in(State.PREPARING_REBALANCE):
            self._try_complete_join(group, now, removal=removal)

    def _answer_parked(self, member: Member, code: ErrorCode, *, drop_sync: bool = False) -> None:
        if member.join_callback is not None:
            cb, member.join_callback = member.join_callback, None
            self._send(cb, JoinGroupResponseData(error_code=code, member_id=NO_MEMBER_ID))
        if member.sync_callback is not None:
            scb, member.sync_callback = member.sync_callback, None
            self._send(scb, None if drop_sync else SyncGroupResponseData(error_code=code))

    def _validate_current_member(
        self,
        group: ClassicGroup,
        member_id: str,
        group_instance_id: str | None,
        *,
        strict: bool | None = None,
    ) -> ErrorCode | None:
        """``validateCurrentMember``: a known instance id must map to ``member_id`` (else the
        caller is a fenced zombie, KIP-345), and ``member_id`` must be a member. An instance id
        the group does not know is UNKNOWN_MEMBER_ID (``strict``: always on JoinGroup; elsewhere
        since Kafka 3.0, 2.3 only checked for fencing)."""
        if strict is None:
            strict = self.flavour.unknown_instance_id_fails
            varies = True  # Heartbeat, SyncGroup, OffsetCommit: 2.3 ignored an unknown id
        else:
            varies = False
        if group_instance_id is not None:
            current = group.static_members.get(group_instance_id)
            if current is None:
                if varies:
                    self._hit(group, "unknown-instance-id")
                if strict:
                    return ErrorCode.UNKNOWN_MEMBER_ID
            elif current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _schedule_heartbeat(self, group: ClassicGroup, member: Member, now: float) -> None:
        member.heartbeat_deadline = now + member.session_timeout_ms / 1000
        self._arm(member.heartbeat_deadline, "member", group.group_id, member.member_id)

    # ================================================================ timers

    def next_deadline(self) -> float | None:
        """When :meth:`on_timer` must next be called (None: nothing is pending)."""
        while self._timers:
            deadline, _, kind, gid, mid = self._timers[0]
            if self._current_deadline(kind, gid, mid) == deadline:
                return deadline
            heapq.heappop(self._timers)  # superseded or cancelled
        return None

    def on_timer(self, now: float) -> None:
        """Fire everything due at ``now``: session and pending-member expiry, join completion
        (rebalance timeout, initial delay), sync expiry. Early or repeated calls are harmless."""
        self._run_timers(now)
        self._flush()

    def _arm(self, deadline: float, kind: str, group_id: str, member_id: str = "") -> None:
        """Remember a deadline just set. Entries are never removed when a deadline moves or is
        cleared: a popped entry counts only if it still matches the live deadline."""
        self._seq += 1
        heapq.heappush(self._timers, (deadline, self._seq, kind, group_id, member_id))

    def _current_deadline(self, kind: str, group_id: str, member_id: str) -> float | None:
        group = self._groups.get(group_id)
        if group is None:
            return None
        if kind == "join":
            return group.join_deadline
        if kind == "sync":
            return group.sync_deadline
        if kind == "pending":
            return group.pending_members.get(member_id)
        member = group.members.get(member_id)
        return member.heartbeat_deadline if member is not None else None

    def _run_timers(self, now: float) -> None:
        # Expiries can arm new deadlines, some due at once (a zero initial delay): keep popping
        # until the earliest live deadline is in the future. Each expiry clears or pushes back
        # the deadline it fired, so this ends; the bound is a safety net.
        for _ in range(1_000_000):
            deadline = RebalanceCore.next_deadline(self)  # the classic timers only
            if deadline is None or deadline > now:
                return
            _, _, kind, gid, mid = heapq.heappop(self._timers)
            group = self._groups[gid]
            if kind == "join":
                self._expire_join(group, now)
            elif kind == "sync":
                self._expire_sync(group, now)
            elif kind == "pending":
                # KIP-394: a member id handed out but never used expires after a session.
                del group.pending_members[mid]
                if group.is_in(State.PREPARING_REBALANCE):
                    self._try_complete_join(group, now, removal="expiry")
            else:
                self._expire_member(group, group.members[mid], now)
        raise LocalProtocolError("coordinator timers did not settle")  # pragma: no cover

    def _expire_member(self, group: ClassicGroup, member: Member, now: float) -> None:
        """``onExpireHeartbeat``: a member waiting in a rebalance counts as alive (its deadline
        is re-armed when it gets its answer), except a new member, which expires."""
        member.heartbeat_deadline = None
        if not member.is_new and (member.is_awaiting_join or member.is_awaiting_sync):
            return
        self._remove_member_and_update_group(group, member, now, removal="expiry")

    def _expire_sync(self, group: ClassicGroup, now: float) -> None:
        """``onExpirePendingSync``: members that got their JoinGroup answer but never sent
        SyncGroup within the rebalance timeout are removed, and the group rebalances."""
        group.sync_deadline = None
        if group.sync_generation != group.generation_id:
            return
        if not group.is_in(State.COMPLETING_REBALANCE, State.STABLE):
            return
        if group.pending_sync_members:
            self._hit(group, "pending-sync-timeout")
            for mid in sorted(group.pending_sync_members):
                removed = group.remove(mid)
                if removed is not None:
                    removed.heartbeat_deadline = None
                    self._answer_parked(removed, ErrorCode.UNKNOWN_MEMBER_ID)
            self._prepare_rebalance(group, now)

    # ================================================================ delivery

    def _send(self, callback: Callable[[Any], None], response: object) -> None:
        self._outbox.append((callback, response))

    def _flush(self) -> None:
        """Deliver parked answers, in order, once the state is consistent. A callback that
        raises does not stop the others; the first error is re-raised wrapped."""
        if self._flushing:
            return
        self._flushing = True
        first: BaseException | None = None
        try:
            while self._outbox:
                callback, response = self._outbox.pop(0)
                try:
                    callback(response)
                except Exception as exc:  # re-raised below, wrapped
                    if first is None:
                        first = exc
        finally:
            self._flushing = False
        if first is not None:
            raise CoordinatorCallbackError(f"a respond callback raised: {first!r}") from first
