"""Hypothesis: random request sequences only ever get well-formed answers, and the group
invariants hold after every step (a stateful model of clients hammering two groups)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from aiogroup.testing.embedded.group import State
from aiogroup.testing.embedded.messages import (
    DescribedGroup,
    ErrorCode,
    JoinGroupRequestData,
    JoinGroupResponseData,
    MemberIdentity,
    OffsetFetchRequestData,
    SyncGroupResponseData,
)
from tests.testing.test_coordinator import COOP, RANGE, ROUNDROBIN, Harness, Reply

GROUPS = ("g1", "g2")
SLOTS = ("d0", "d1", "d2", "s0", "s1")  # d*: dynamic members, s*: static (instance id = slot)
PROTOCOL_CHOICES = (
    (RANGE,),
    (COOP, RANGE),
    (COOP,),
    (ROUNDROBIN, RANGE),
    (RANGE, ("range", b"other-subscription")),
)
VALID_CODES = {int(c) for c in ErrorCode}


@dataclass
class Slot:
    member_id: str = ""
    generation: int = -1


class CoordinatorMachine(RuleBasedStateMachine):
    FLAVOUR = "kafka4"

    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(initial_rebalance_delay_ms=500, group_max_size=4, flavour=self.FLAVOUR)
        self.slots = {(g, s): Slot() for g in GROUPS for s in SLOTS}
        self.join_replies: list[Reply[JoinGroupResponseData]] = []
        self.sync_replies: list[Reply[SyncGroupResponseData]] = []
        self.max_generation: dict[str, int] = {}

    # --- helpers ------------------------------------------------------------------------

    def _instance(self, slot: str) -> str | None:
        return slot if slot.startswith("s") else None

    def _track_join(self, group: str, slot: str) -> Reply[JoinGroupResponseData]:
        state = self.slots[(group, slot)]

        class Tracking(Reply[JoinGroupResponseData]):
            def __call__(self, answer: JoinGroupResponseData | None) -> None:
                super().__call__(answer)
                if answer is None:
                    return  # superseded by the slot's next JoinGroup: Kafka never answers it
                assert answer.error_code in VALID_CODES
                if answer.member_id and answer.error_code in (
                    ErrorCode.NONE,
                    ErrorCode.MEMBER_ID_REQUIRED,
                ):
                    state.member_id = answer.member_id
                    state.generation = answer.generation_id
                if answer.error_code == ErrorCode.NONE:
                    assert answer.protocol_name is not None
                    assert answer.leader
                    if answer.members:
                        ids = {m.member_id for m in answer.members}
                        assert answer.leader in ids or answer.skip_assignment is False

        reply = Tracking()
        self.join_replies.append(reply)
        return reply

    # --- rules --------------------------------------------------------------------------

    @rule(
        group=st.sampled_from(GROUPS),
        slot=st.sampled_from(SLOTS),
        use_id=st.booleans(),
        protocols=st.sampled_from(PROTOCOL_CHOICES),
        version=st.sampled_from([3, 4, 5, 8, 9]),
        session_ms=st.sampled_from([6000, 10_000]),
        rebalance_ms=st.sampled_from([6000, 20_000]),
    )
    def join(
        self,
        group: str,
        slot: str,
        use_id: bool,
        protocols: tuple[tuple[str, bytes], ...],
        version: int,
        session_ms: int,
        rebalance_ms: int,
    ) -> None:
        state = self.slots[(group, slot)]
        req_member = state.member_id if use_id else ""
        self._join_request(group, slot, req_member, protocols, version, session_ms, rebalance_ms)

    def _join_request(
        self,
        group: str,
        slot: str,
        member_id: str,
        protocols: tuple[tuple[str, bytes], ...],
        version: int,
        session_ms: int,
        rebalance_ms: int,
    ) -> None:
        reply = self._track_join(group, slot)
        self.h.coord.join_group(
            JoinGroupRequestData(
                group_id=group,
                member_id=member_id,
                protocol_type="consumer",
                protocols=list(protocols),
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                # A group instance id travels in JoinGroup v5+ only (KIP-345).
                group_instance_id=self._instance(slot) if version >= 5 else None,
                client_id=slot,
                api_version=version,
            ),
            self.h.now,
            reply,
        )

    @rule(
        group=st.sampled_from(GROUPS),
        slot=st.sampled_from(SLOTS),
        gen_delta=st.sampled_from([0, 0, 0, -1, 1]),
        assign=st.booleans(),
        check_protocol=st.booleans(),
    )
    def sync(
        self, group: str, slot: str, gen_delta: int, assign: bool, check_protocol: bool
    ) -> None:
        state = self.slots[(group, slot)]
        view = self.h.coord.group_state(group)
        assignments: list[tuple[str, bytes]] = []
        if assign and view is not None:
            assignments = [(m.member_id, m.member_id.encode()) for m in view.members][:-1]
        reply = self.h.sync(
            state.member_id,
            state.generation + gen_delta,
            assignments,
            group=group,
            instance=self._instance(slot),
            protocol_type="consumer" if check_protocol else None,
            protocol_name=(view.protocol_name if view else None) if check_protocol else None,
        )
        self.sync_replies.append(reply)

    @rule(group=st.sampled_from(GROUPS), slot=st.sampled_from(SLOTS), stale=st.booleans())
    def heartbeat(self, group: str, slot: str, stale: bool) -> None:
        state = self.slots[(group, slot)]
        code = self.h.heartbeat(
            state.member_id,
            state.generation - int(stale),
            group=group,
            instance=self._instance(slot),
        )
        assert code in VALID_CODES

    @rule(group=st.sampled_from(GROUPS), slot=st.sampled_from(SLOTS), by_instance=st.booleans())
    def leave(self, group: str, slot: str, by_instance: bool) -> None:
        state = self.slots[(group, slot)]
        member_id = "" if by_instance else state.member_id
        ident = MemberIdentity(member_id, self._instance(slot))
        for code in self.h.leave(ident, group=group):
            assert code in VALID_CODES

    @rule(group=st.sampled_from(GROUPS), slot=st.sampled_from(SLOTS), simple=st.booleans())
    def commit(self, group: str, slot: str, simple: bool) -> None:
        state = self.slots[(group, slot)]
        if simple:
            code = self.h.commit(group=group)
        else:
            code = self.h.commit(
                state.member_id, state.generation, group=group, instance=self._instance(slot)
            )
        assert code in VALID_CODES
        if code == ErrorCode.NONE:
            fetched = self.h.coord.fetch_offsets(OffsetFetchRequestData(group, [("t", 0)]))
            assert fetched.partitions[0].committed_offset == 42

    @rule(group=st.sampled_from(GROUPS))
    def converge(self, group: str) -> None:
        """Well-behaved members: everyone rejoins, then everyone syncs (leader last)."""
        view = self.h.coord.group_state(group)
        if view is not None and view.state == "PreparingRebalance":
            for m in view.members:
                if not m.awaiting_join:
                    self._join_request(
                        group,
                        m.client_id,
                        m.member_id,
                        m.protocols,
                        9,
                        m.session_timeout_ms,
                        m.rebalance_timeout_ms,
                    )
            self.h.advance(0.6)  # past the initial rebalance delay
        view = self.h.coord.group_state(group)
        if view is not None and view.state == "CompletingRebalance":
            ordered = sorted(view.members, key=lambda m: m.member_id == view.leader)
            for m in ordered:
                is_leader = m.member_id == view.leader
                assignments = [(x.member_id, x.member_id.encode()) for x in view.members]
                self.sync_replies.append(
                    self.h.sync(
                        m.member_id,
                        view.generation_id,
                        assignments if is_leader else [],
                        group=group,
                        instance=m.group_instance_id,
                    )
                )
            after = self.h.coord.group_state(group)
            assert after is not None and after.state == "Stable"
            for m in after.members:
                assert m.assignment == m.member_id.encode()

    @rule(seconds=st.sampled_from([0.0, 0.3, 2.0, 5.0, 7.0, 21.0]))
    def advance(self, seconds: float) -> None:
        self.h.advance(seconds)

    @rule()
    def failover(self) -> None:
        self.h.coord.failover(self.h.now)
        # A reload goes back to the last *stored* generation (Kafka writes the group record
        # when a rebalance completes or the group empties), so generations restart from there.
        self.max_generation = {
            gid: v.generation_id
            for gid in GROUPS
            if (v := self.h.coord.group_state(gid)) is not None
        }

    @rule(group=st.sampled_from(GROUPS))
    def delete(self, group: str) -> None:
        ((gid, code),) = self.h.coord.delete_groups([group], self.h.now)
        assert gid == group and code in VALID_CODES
        if code == ErrorCode.NONE:
            self.max_generation.pop(group, None)

    @rule()
    def describe(self) -> None:
        described: list[DescribedGroup] = self.h.coord.describe_groups(list(GROUPS))
        listed = {g.group_id: g.group_state for g in self.h.coord.list_groups()}
        for d in described:
            assert d.group_state in {s.value for s in State}
            if d.group_state != "Dead":
                assert listed[d.group_id] == d.group_state

    # --- invariants ---------------------------------------------------------------------

    @invariant()
    def group_invariants(self) -> None:
        coord: Any = self.h.coord
        for gid, group in coord._groups.items():
            members = group.members
            # The leader is a member; a group with members has one.
            if members:
                assert group.leader_id in members
            else:
                assert group.leader_id is None or group.state == State.EMPTY
            # Generations never go back (a deleted group starts over).
            assert group.generation_id >= self.max_generation.get(gid, 0)
            self.max_generation[gid] = group.generation_id
            # Empty <=> no members (Preparing may be transiently empty-handed only while a
            # join completes, which never outlives a call).
            if group.state == State.EMPTY:
                assert not members and group.protocol_name is None
            if group.state in (State.COMPLETING_REBALANCE, State.STABLE):
                assert members and group.protocol_name is not None
                # Every member supports the selected protocol; except that Kafka 2.3 let a
                # static member restart with a protocol list that would change the vote,
                # without a rebalance: in a Stable group (rule "static-restart-protocol",
                # KAFKA-10284 changed it in 2.8) and in CompletingRebalance, where it even
                # takes a list without the group's protocol (rule
                # "static-restart-completing", KAFKA-9801 changed it in 2.6): the kafka2
                # flavour keeps both.
                hits = coord.rule_hits.get(gid, set())
                kept_by_2_3 = "static-restart-protocol" in hits or (
                    self.FLAVOUR == "kafka2" and "static-restart-completing" in hits
                )
                for m in members.values():
                    if not (kept_by_2_3 and m.group_instance_id is not None):
                        m.metadata(group.protocol_name)
                    assert not m.is_awaiting_join
            if group.state == State.STABLE and self.FLAVOUR != "kafka2":
                # Stable: the leader's assignment was distributed and stored for this very
                # generation and membership; nobody still waits for it. (Kafka 2.3 did not
                # store a static member's new id, KAFKA-10284.)
                assert group.stored is not None
                assert group.stored.generation_id == group.generation_id
                assert {sm.member_id for sm in group.stored.members} == set(members)
                stored = {sm.member_id: sm.assignment for sm in group.stored.members}
                for m in members.values():
                    assert stored[m.member_id] == m.assignment and not m.is_awaiting_sync
            if group.state == State.PREPARING_REBALANCE:
                assert group.join_deadline is not None
                assert all(not m.is_awaiting_sync for m in members.values())
            assert group.pending_sync_members <= set(members)
            # Static mapping is consistent.
            for inst, mid in group.static_members.items():
                assert members[mid].group_instance_id == inst
            # Liveness: every member has a session deadline unless a parked request covers it.
            for m in members.values():
                assert (
                    m.heartbeat_deadline is not None or m.is_awaiting_join or (m.is_awaiting_sync)
                )
        assert not coord._outbox

    def teardown(self) -> None:
        # Everyone goes silent: every parked request must be answered, exactly once.
        for _ in range(40):
            self.h.advance(400.0)
        for reply in self.join_replies:
            assert len(reply.answers) == 1, reply.answers
        for sreply in self.sync_replies:
            assert len(sreply.answers) == 1, sreply.answers
            answer = sreply.answers[0]
            assert answer is None or answer.error_code in VALID_CODES
        for gid in GROUPS:
            view = self.h.coord.group_state(gid)
            assert view is None or view.state == "Empty"
        assert self.h.coord.next_deadline() is None


CoordinatorMachine.TestCase.settings = settings(
    max_examples=120, stateful_step_count=40, deadline=None
)
test_coordinator_machine = CoordinatorMachine.TestCase


class Kafka3Machine(CoordinatorMachine):
    FLAVOUR = "kafka3"


class Kafka2Machine(CoordinatorMachine):
    FLAVOUR = "kafka2"


for _machine in (Kafka3Machine, Kafka2Machine):
    _machine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_coordinator_machine_kafka3 = Kafka3Machine.TestCase
test_coordinator_machine_kafka2 = Kafka2Machine.TestCase


@pytest.mark.slow
def test_coordinator_machine_long() -> None:
    run_state_machine_as_test(
        CoordinatorMachine,
        settings=settings(max_examples=300, stateful_step_count=80, deadline=None),
    )
