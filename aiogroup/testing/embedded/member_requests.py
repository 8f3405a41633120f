"""A member's requests to the classic coordinator: JoinGroup, SyncGroup, Heartbeat, LeaveGroup.

:class:`MemberRequests` handles each as Kafka's ``handleJoinGroup``, ``handleSyncGroup``,
``handleHeartbeat`` and ``handleLeaveGroup`` do: a new member (KIP-394's member id round
trip), a known one, a static member's restart (KIP-345), ``group.max.size`` (KIP-389); then
the rebalance they start or complete (:mod:`~aiogroup.testing.embedded.rebalance`). The
public calls that run the timers around them and deliver the answers are
:class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`'s.
"""

from __future__ import annotations

from aiogroup.testing.embedded.group import ClassicGroup, Member, State
from aiogroup.testing.embedded.messages import (
    NO_MEMBER_ID,
    ErrorCode,
    HeartbeatRequestData,
    JoinCallback,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupMemberResponse,
    LeaveGroupRequestData,
    LeaveGroupResponseData,
    MemberIdentity,
    SyncCallback,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.rebalance import RebalanceCore

__all__ = ["MemberRequests"]


class MemberRequests(RebalanceCore):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup, rule by rule (a base class of
    :class:`~aiogroup.testing.embedded.coordinator.GroupCoordinator`)."""

    # ================================================================ JoinGroup

    def _join(self, req: JoinGroupRequestData, now: float, respond: JoinCallback) -> None:
        def fail(code: ErrorCode, member_id: str = req.member_id) -> None:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=member_id))

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return fail(ErrorCode.INVALID_SESSION_TIMEOUT)
        is_unknown = req.member_id == NO_MEMBER_ID
        group = self._groups.get(req.group_id)
        if group is None:
            # The group is created only by a member without id; a member naming an id for a
            # group we do not know is told UNKNOWN_MEMBER_ID (getOrMaybeCreateGroup).
            if not is_unknown:
                return fail(ErrorCode.UNKNOWN_MEMBER_ID)
            group = self._new_group(req.group_id, now)

        refused = not self._accept_joining_member(group, req.member_id, is_unknown)
        if refused:
            removed = group.remove(req.member_id)
            if removed is not None:
                self._answer_parked(removed, ErrorCode.UNKNOWN_MEMBER_ID)
            if not self.flavour.accept_joining_member and req.group_instance_id is not None:
                # Kafka 2.3 also drops the static mapping of the instance id it refused, even
                # when that id belongs to a member that stays (removeStaticMember).
                group.static_members.pop(req.group_instance_id, None)
            fail(ErrorCode.GROUP_MAX_SIZE_REACHED, NO_MEMBER_ID)
        elif is_unknown:
            self._new_member_join(group, req, now, respond)
        else:
            self._current_member_join(group, req, now, respond)

        if group.is_in(State.PREPARING_REBALANCE):
            if refused:
                # The Scala coordinator tries to complete the join after every JoinGroup; the
                # Java one (4.x) does not after a refusal: the join then waits for the next
                # request or its timeout.
                self._hit(group, "max-size-refusal")
                if not self.flavour.refusal_completes_join:
                    return None
            self._try_complete_join(group, now)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str, is_unknown: bool) -> bool:
        """GROUP_MAX_SIZE_REACHED rule (KIP-389; ``acceptJoiningMember`` since KAFKA-9885)."""
        max_size = self.config.group_max_size
        if max_size is None:
            return True
        newer = self._accept_joining_member_newer(group, member_id, max_size)
        # Kafka 2.3: an over-capacity group sheds known members that have not rejoined yet, and
        # a member without id is refused once the group is full; a pending (KIP-394) id is not
        # checked at all.
        member = group.members.get(member_id)
        shed = len(group.members) > max_size and member is not None and not member.is_awaiting_join
        older = not (shed or (is_unknown and len(group.members) >= max_size))
        if older != newer:
            self._hit(group, "group-max-size")
        return newer if self.flavour.accept_joining_member else older

    @staticmethod
    def _accept_joining_member_newer(group: ClassicGroup, member_id: str, max_size: int) -> bool:
        if group.is_in(State.EMPTY, State.DEAD):
            return True
        if group.is_in(State.PREPARING_REBALANCE):
            # Counting the members awaiting join (not the group size) lets the last rejoining
            # members be the ones turned away when the limit was lowered.
            member = group.members.get(member_id)
            return (member is not None and member.is_awaiting_join) or (
                group.num_awaiting_join() < max_size
            )
        return group.has(member_id) or len(group.members) < max_size

    @staticmethod
    def _rebalance_timeout(req: JoinGroupRequestData) -> int:
        # JoinGroup v0 has no rebalance timeout: the session timeout is used (KIP-62). From v1
        # Kafka takes the value as sent, -1 included.
        if req.api_version == 0 or req.rebalance_timeout_ms is None:
            return req.session_timeout_ms
        return req.rebalance_timeout_ms

    def _new_member_join(
        self, group: ClassicGroup, req: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> None:
        names = frozenset(name for name, _ in req.protocols)
        if group.is_in(State.DEAD):
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif not group.supports_protocols(req.protocol_type, names):
            code = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        else:
            code = ErrorCode.NONE
        if code != ErrorCode.NONE:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=NO_MEMBER_ID))
            return
        prefix = req.group_instance_id if req.group_instance_id is not None else req.client_id
        if req.group_instance_id is not None:
            self._hit(group, "static-member-id")
        if (
            req.group_instance_id is not None
            and self.flavour.static_member_id_from_state_time
            and not self._custom_ids
        ):
            # Kafka 2.3: instance id and the time of the group's last state change (KAFKA-8715:
            # two restarts without a state change in between get the same id). Kafka counts
            # milliseconds; we count microseconds: this broker changes state several times
            # within a millisecond, which Kafka's purgatory and network do not.
            new_member_id = f"{prefix}-{round(group.state_since * 1_000_000)}"
        else:
            new_member_id = self._id_factory(prefix)
        if req.group_instance_id is not None:
            old_member_id = group.static_members.get(req.group_instance_id)
            if old_member_id is not None:
                # KIP-345: a known static member restarted; it takes over its old identity.
                self._update_static_member_and_rebalance(
                    group, old_member_id, new_member_id, req, now, respond
                )
            else:
                self._add_member_and_rebalance(group, new_member_id, req, now, respond)
        elif req.api_version >= 4:
            # KIP-394: JoinGroup v4+ without a member id gets one to come back with; the id is
            # remembered as pending (blocking the join from completing) for a session timeout.
            group.pending_members[new_member_id] = now + req.session_timeout_ms / 1000
            self._arm(
                group.pending_members[new_member_id], "pending", group.group_id, new_member_id
            )
            self._send(
                respond,
                JoinGroupResponseData(
                    error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id
                ),
            )
        else:
            self._add_member_and_rebalance(group, new_member_id, req, now, respond)

    def _current_member_join(
        self, group: ClassicGroup, req: JoinGroupRequestData, now: float, respond: JoinCallback
    ) -> None:
        member_id = req.member_id
        names = frozenset(name for name, _ in req.protocols)

        def fail(code: ErrorCode) -> None:
            self._send(respond, JoinGroupResponseData(error_code=code, member_id=member_id))

        if group.is_in(State.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(req.protocol_type, names):
            return fail(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if member_id in group.pending_members:
            if req.group_instance_id is not None:
                # Kafka throws IllegalStateException here (a pending member is never static),
                # which reaches the client as UNKNOWN_SERVER_ERROR.
                return fail(ErrorCode.UNKNOWN_SERVER_ERROR)
            return self._add_member_and_rebalance(group, member_id, req, now, respond)
        error = self._validate_current_member(group, member_id, req.group_instance_id, strict=True)
        if error is not None:
            return fail(error)
        member = group.members[member_id]
        if group.is_in(State.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_in(State.COMPLETING_REBALANCE):
            if member.matches(req.protocols):
                # Same metadata: the member probably lost our JoinGroup answer; answer again.
                self._send(respond, self._join_result(group, member, with_members=None))
            else:
                self._update_member_and_rebalance(group, member, req, now, respond)
        elif group.is_in(State.STABLE):
            if group.is_leader(member_id) or not member.matches(req.protocols):
                # The leader's rejoin always rebalances: it is how it signals changes that its
                # metadata does not show (e.g. new partitions).
                self._update_member_and_rebalance(group, member, req, now, respond)
            else:
                self._send(respond, self._join_result(group, member, with_members=False))
        else:
            fail(ErrorCode.UNKNOWN_MEMBER_ID)

    def _add_member_and_rebalance(
        self,
        group: ClassicGroup,
        member_id: str,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=req.group_instance_id,
            client_id=req.client_id,
            client_host=req.client_host,
            rebalance_timeout_ms=self._rebalance_timeout(req),
            session_timeout_ms=req.session_timeout_ms,
            protocol_type=req.protocol_type,
            protocols=tuple(req.protocols),
            is_new=True,
        )
        # The initial delay is extended by a newcomer: before 4.0 only while the group never
        # formed (generation 0); 4.x whenever this rebalance started from Empty.
        if group.is_in(State.PREPARING_REBALANCE) and group.join_is_initial:
            if group.generation_id != 0:
                self._hit(group, "initial-delay")
            if group.generation_id == 0 or self.flavour.initial_delay_4x:
                group.new_member_added = True
        group.add(member, respond)
        # A new member has no id to heartbeat with yet: it expires on the new-member join
        # timeout instead (KAFKA-7610), so a client that gave up cannot hold the rebalance.
        member.heartbeat_deadline = now + self.config.new_member_join_timeout_ms / 1000
        self._arm(member.heartbeat_deadline, "member", group.group_id, member_id)
        self._maybe_prepare_rebalance(group, now)

    def _update_member(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequestData,
        respond: JoinCallback | None,
    ) -> None:
        member.protocols = tuple(req.protocols)
        member.rebalance_timeout_ms = self._rebalance_timeout(req)
        member.session_timeout_ms = req.session_timeout_ms
        if respond is not None:
            if member.join_callback is not None:
                # Kafka drops a superseded JoinGroup: it is never answered (updateMember).
                self._send(member.join_callback, None)
            member.join_callback = respond

    def _update_member_and_rebalance(
        self,
        group: ClassicGroup,
        member: Member,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        self._update_member(group, member, req, respond)
        self._maybe_prepare_rebalance(group, now)

    def _update_static_member_and_rebalance(
        self,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        req: JoinGroupRequestData,
        now: float,
        respond: JoinCallback,
    ) -> None:
        """KIP-345 static member restart (``updateStaticMemberAndRebalance``)."""
        assert req.group_instance_id is not None
        current_leader = group.leader_id
        old = group.members[old_member_id]
        # Fence whatever the old incarnation still has parked (FENCED_INSTANCE_ID).
        if old.join_callback is not None:
            cb, old.join_callback = old.join_callback, None
            self._send(
                cb,
                JoinGroupResponseData(
                    error_code=ErrorCode.FENCED_INSTANCE_ID, member_id=old_member_id
                ),
            )
        if old.sync_callback is not None:
            scb, old.sync_callback = old.sync_callback, None
            self._send(scb, SyncGroupResponseData(error_code=ErrorCode.FENCED_INSTANCE_ID))
        member = group.replace_static_member(req.group_instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member, now)
        self._update_member(group, member, req, respond)

        older = not self.flavour.static_restart_checks_protocol
        if group.is_in(State.STABLE):
            # No rebalance unless the group's protocol would change with the new metadata
            # (KAFKA-10284); Kafka 2.3 never rebalanced here.
            same_protocol = group.select_protocol() == group.protocol_name
            if group.vote_tie_varies:
                self._hit(group, "vote-tie")
            if not same_protocol:
                self._hit(group, "static-restart-protocol")
            if same_protocol or older:
                if not older:
                    # Persisted since KAFKA-10284 (a failover keeps the new member id).
                    group.stored = group.to_stored()
                join_cb = member.join_callback
                member.join_callback = None
                if join_cb is None:  # pragma: no cover - set just above
                    return
                if req.api_version >= 9:
                    # KIP-814: tell a returning static leader it leads, but must not assign.
                    is_leader = group.is_leader(new_member_id)
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=is_leader, skip_assignment=is_leader
                        ),
                    )
                else:
                    # Before v9: report the old leader id so that a returning leader does not
                    # believe it leads and runs a pointless assignment in a Stable group.
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=False, leader=current_leader or ""
                        ),
                    )
            else:
                self._maybe_prepare_rebalance(group, now)
        elif group.is_in(State.COMPLETING_REBALANCE):
            self._hit(group, "static-restart-completing")
            if self.flavour.static_restart_in_completing_rebalances:
                # The leader may have been sent the old member id; its assignment would miss
                # the new id, so start over (KAFKA-9801).
                self._prepare_rebalance(group, now)
            else:
                # Kafka 2.3 answers at once with the current generation and the old leader
                # id; the leader's assignment (made for the old id) gives this member nothing.
                join_cb, member.join_callback = member.join_callback, None
                if join_cb is not None:
                    self._send(
                        join_cb,
                        self._join_result(
                            group, member, with_members=False, leader=current_leader or ""
                        ),
                    )
        # PreparingRebalance: the member now simply awaits the join like the others.

    # ================================================================ SyncGroup

    def _sync(self, req: SyncGroupRequestData, now: float, respond: SyncCallback) -> None:
        def fail(code: ErrorCode) -> None:
            self._send(respond, SyncGroupResponseData(error_code=code))

        if not req.group_id:
            return fail(ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return fail(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(State.DEAD):
            return fail(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_current_member(group, req.member_id, req.group_instance_id)
        if error is None and req.generation_id != group.generation_id:
            error = ErrorCode.ILLEGAL_GENERATION
        # KIP-559 (SyncGroup v5): the protocol type and name, when sent, must be the group's.
        if error is None and (
            (req.protocol_type is not None and req.protocol_type != group.protocol_type)
            or (req.protocol_name is not None and req.protocol_name != group.protocol_name)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            return fail(error)

        if group.is_in(State.EMPTY):
            fail(ErrorCode.UNKNOWN_MEMBER_ID)
        elif group.is_in(State.PREPARING_REBALANCE):
            fail(ErrorCode.REBALANCE_IN_PROGRESS)
        elif group.is_in(State.COMPLETING_REBALANCE):
            member = group.members[req.member_id]
            if member.sync_callback is not None:
                # Superseded: Kafka overwrites the parked callback, never answering it.
                self._send(member.sync_callback, None)
            member.sync_callback = respond
            self._remove_pending_sync_member(group, req.member_id)
            if group.is_leader(req.member_id):
                # The leader's assignment completes the rebalance; members it left out get an
                # empty assignment (Kafka logs a warning and does the same).
                assignment = dict(req.assignments)
                for m in group.members.values():
                    m.assignment = assignment.get(m.member_id, b"")
                group.stored = group.to_stored()
                self._propagate_assignment(group, ErrorCode.NONE, now)
                group.transition_to(State.STABLE, now)
        elif group.is_in(State.STABLE):
            self._remove_pending_sync_member(group, req.member_id)
            member = group.members[req.member_id]
            self._send(
                respond,
                SyncGroupResponseData(
                    error_code=ErrorCode.NONE,
                    assignment=member.assignment,
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                ),
            )
            self._schedule_heartbeat(group, member, now)

    # ================================================================ Heartbeat

    def _heartbeat(self, req: HeartbeatRequestData, now: float) -> ErrorCode:
        if not req.group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self._groups.get(req.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(State.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, req.member_id, req.group_instance_id)
        if error is not None:
            return error
        if req.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in(State.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(State.COMPLETING_REBALANCE):
            # A member may heartbeat between its JoinGroup answer and its SyncGroup: NONE, and
            # the session restarts (KAFKA-10134); Kafka 2.3 said REBALANCE_IN_PROGRESS and left
            # the session alone.
            self._hit(group, "heartbeat-completing")
            code = self.flavour.heartbeat_in_completing_rebalance
            if code != ErrorCode.NONE:
                return code
        self._schedule_heartbeat(group, group.members[req.member_id], now)
        if group.is_in(State.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # ================================================================ LeaveGroup

    def _leave(self, req: LeaveGroupRequestData, now: float) -> LeaveGroupResponseData:
        def result(ident: MemberIdentity, code: ErrorCode) -> LeaveGroupMemberResponse:
            return LeaveGroupMemberResponse(ident.member_id, ident.group_instance_id, code)

        if not req.group_id:
            return LeaveGroupResponseData(error_code=ErrorCode.INVALID_GROUP_ID)
        group = self._groups.get(req.group_id)
        if group is None:
            return LeaveGroupResponseData(
                error_code=ErrorCode.NONE,
                members=tuple(result(i, ErrorCode.UNKNOWN_MEMBER_ID) for i in req.members),
            )
        if group.is_in(State.DEAD):
            return LeaveGroupResponseData(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results: list[LeaveGroupMemberResponse] = []
        for ident in req.members:
            if ident.member_id == NO_MEMBER_ID:
                # Administrative removal by group.instance.id alone (KIP-345).
                current = (
                    group.static_members.get(ident.group_instance_id)
                    if ident.group_instance_id is not None
                    else None
                )
                if current is None:
                    results.append(result(ident, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_member_and_update_group(
                        group, group.members[current], now, removal="leave"
                    )
                    results.append(result(ident, ErrorCode.NONE))
            elif ident.member_id in group.pending_members:
                del group.pending_members[ident.member_id]
                self._try_complete_join(group, now, removal="leave")
                results.append(result(ident, ErrorCode.NONE))
            else:
                error = self._validate_current_member(
                    group, ident.member_id, ident.group_instance_id
                )
                if error is None:
                    member = group.members[ident.member_id]
                    self._remove_member_and_update_group(group, member, now, removal="leave")
                    results.append(result(ident, ErrorCode.NONE))
                else:
                    results.append(result(ident, error))
        return LeaveGroupResponseData(error_code=ErrorCode.NONE, members=tuple(results))
