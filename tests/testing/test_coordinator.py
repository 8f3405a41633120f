"""The embedded broker's classic group coordinator, driven with a fake clock.

Each rule names the Kafka source it comes from (``GroupCoordinator.scala`` /
``GroupMetadataManager.java`` classic handling, and their tests).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pytest

from aiogroup.errors import CallbackError, ConfigurationError, LocalProtocolError
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.group import ClassicGroup, State
from aiogroup.testing.embedded.hashorder import JavaMap, java_string_hash
from aiogroup.testing.embedded.messages import (
    ErrorCode,
    GroupView,
    HeartbeatRequestData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchRequestData,
    SyncGroupRequestData,
    SyncGroupResponseData,
)
from aiogroup.testing.embedded.rebalance import CoordinatorCallbackError
from aiogroup.testing.embedded.rules import CoordinatorConfig

T = TypeVar("T")

RANGE = ("range", b"range-meta")
ROUNDROBIN = ("roundrobin", b"rr-meta")
COOP = ("cooperative-sticky", b"coop-meta")


# ------------------------------------------------------------------------------ harness


@dataclass
class Reply(Generic[T]):
    """Collects what a ``respond`` callback received (``None``: Kafka never answers it)."""

    answers: list[T | None] = field(default_factory=list)

    def __call__(self, answer: T | None) -> None:
        self.answers.append(answer)

    @property
    def done(self) -> bool:
        return bool(self.answers)

    @property
    def value(self) -> T:
        assert len(self.answers) == 1, f"expected exactly one answer, got {self.answers}"
        answer = self.answers[0]
        assert answer is not None, "never answered"
        return answer


class Harness:
    """Drives the coordinator like the server does, with a fake clock (seconds)."""

    def __init__(self, **config: Any) -> None:
        counter = itertools.count(1)
        self.coord = GroupCoordinator(
            CoordinatorConfig(**config),
            id_factory=lambda prefix: f"{prefix}-{next(counter)}",
        )
        self.now = 100.0

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.coord.on_timer(self.now)

    def view(self, group: str = "g") -> GroupView:
        v = self.coord.group_state(group)
        assert v is not None
        return v

    def join(
        self,
        member_id: str = "",
        protocols: Sequence[tuple[str, bytes]] = (RANGE,),
        *,
        group: str = "g",
        instance: str | None = None,
        client: str = "c",
        session_ms: int = 10_000,
        rebalance_ms: int = 30_000,
        version: int = 9,
        protocol_type: str = "consumer",
    ) -> Reply[JoinGroupResponseData]:
        reply: Reply[JoinGroupResponseData] = Reply()
        self.coord.join_group(
            JoinGroupRequestData(
                group_id=group,
                member_id=member_id,
                protocol_type=protocol_type,
                protocols=list(protocols),
                session_timeout_ms=session_ms,
                rebalance_timeout_ms=rebalance_ms,
                group_instance_id=instance,
                client_id=client,
                client_host="/127.0.0.1",
                api_version=version,
            ),
            self.now,
            reply,
        )
        return reply

    def join_new(self, client: str = "c", **kw: Any) -> tuple[str, Reply[JoinGroupResponseData]]:
        """A v4+ dynamic member's KIP-394 dance: get an id, then join with it."""
        first = self.join(client=client, **kw)
        assert first.value.error_code == ErrorCode.MEMBER_ID_REQUIRED, first.value
        member_id = first.value.member_id
        return member_id, self.join(member_id, client=client, **kw)

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: Sequence[tuple[str, bytes]] = (),
        *,
        group: str = "g",
        instance: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> Reply[SyncGroupResponseData]:
        reply: Reply[SyncGroupResponseData] = Reply()
        self.coord.sync_group(
            SyncGroupRequestData(
                group_id=group,
                generation_id=generation,
                member_id=member_id,
                assignments=list(assignments),
                group_instance_id=instance,
                protocol_type=protocol_type,
                protocol_name=protocol_name,
            ),
            self.now,
            reply,
        )
        return reply

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> int:
        req = HeartbeatRequestData(group, generation, member_id, instance)
        return self.coord.heartbeat(req, self.now).error_code

    def leave(self, *idents: MemberIdentity, group: str = "g") -> list[int]:
        resp = self.coord.leave_group(LeaveGroupRequestData(group, list(idents)), self.now)
        assert resp.error_code == ErrorCode.NONE
        return [m.error_code for m in resp.members]

    def commit(
        self,
        member_id: str = "",
        generation: int = -1,
        *,
        group: str = "g",
        instance: str | None = None,
        offset: int = 42,
        metadata: str | None = "meta",
    ) -> int:
        resp = self.coord.commit_offsets(
            OffsetCommitRequestData(
                group_id=group,
                partitions=[OffsetCommitPartition("t", 0, offset, 7, metadata)],
                generation_id=generation,
                member_id=member_id,
                group_instance_id=instance,
            ),
            self.now,
        )
        ((_, _, code),) = resp.partitions
        return code

    def rejoin_all(self, group: str = "g") -> dict[str, Reply[JoinGroupResponseData]]:
        """Every member not already parked in JoinGroup rejoins with its current protocols."""
        return {
            m.member_id: self.join(
                m.member_id,
                protocols=m.protocols,
                group=group,
                instance=m.group_instance_id,
                session_ms=m.session_timeout_ms,
                rebalance_ms=m.rebalance_timeout_ms,
            )
            for m in self.view(group).members
            if not m.awaiting_join
        }

    def sync_all(self, group: str = "g") -> tuple[list[str], int]:
        """Followers sync (parked), then the leader sends each member its id as assignment."""
        v = self.view(group)
        assert v.state == "CompletingRebalance", v
        ids = [m.member_id for m in v.members]
        replies = {
            m.member_id: self.sync(
                m.member_id, v.generation_id, group=group, instance=m.group_instance_id
            )
            for m in v.members
            if m.member_id != v.leader
        }
        for r in replies.values():
            assert not r.done  # a follower waits for the leader
        assert v.leader is not None
        leader = next(m for m in v.members if m.member_id == v.leader)
        replies[v.leader] = self.sync(
            v.leader,
            v.generation_id,
            [(i, i.encode()) for i in ids],
            group=group,
            instance=leader.group_instance_id,
        )
        for mid, r in replies.items():
            assert r.value.error_code == ErrorCode.NONE
            assert r.value.assignment == mid.encode()
        assert self.view(group).state == "Stable"
        return ids, v.generation_id

    def form_group(
        self, n: int, protocols: Sequence[tuple[str, bytes]] = (RANGE,), **kw: Any
    ) -> tuple[list[str], int]:
        """n dynamic members join one by one, everyone rejoins, everyone syncs."""
        for i in range(n):
            self.join_new(client=f"c{i}", protocols=protocols, **kw)
        if self.view().state == "PreparingRebalance":
            self.rejoin_all()
        return self.sync_all()


def committed(h: Harness, group: str) -> int:
    resp = h.coord.fetch_offsets(OffsetFetchRequestData(group, [("t", 0)]))
    return resp.partitions[0].committed_offset


# ------------------------------------------------------------------------------ config


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ConfigurationError):
        CoordinatorConfig(initial_rebalance_delay_ms=-1)
    with pytest.raises(ConfigurationError):
        CoordinatorConfig(group_min_session_timeout_ms=10, group_max_session_timeout_ms=5)
    with pytest.raises(ConfigurationError):
        CoordinatorConfig(group_max_size=0)


# ------------------------------------------------------------------------------ state diagram


def test_illegal_transition_is_our_bug() -> None:
    # validPreviousStates: Stable is reachable only from CompletingRebalance.
    group = ClassicGroup("g")
    with pytest.raises(LocalProtocolError):
        group.transition_to(State.STABLE, 0.0)
    with pytest.raises(LocalProtocolError):
        group.transition_to(State.COMPLETING_REBALANCE, 0.0)
    group.transition_to(State.PREPARING_REBALANCE, 0.0)
    group.transition_to(State.COMPLETING_REBALANCE, 0.0)
    with pytest.raises(LocalProtocolError):
        group.transition_to(State.EMPTY, 0.0)


def test_full_state_diagram() -> None:
    h = Harness()
    states: list[str] = []

    def record() -> None:
        v = h.coord.group_state("g")
        states.append(v.state if v else "-")

    a, ra = h.join_new("a")
    record()  # a alone: the zero initial delay completed the join at once
    assert ra.value.error_code == ErrorCode.NONE and ra.value.generation_id == 1
    assert ra.value.leader == a and [m.member_id for m in ra.value.members] == [a]
    sa = h.sync(a, 1, [(a, b"A")])
    record()
    assert sa.value.assignment == b"A"
    b, rb = h.join_new("b")  # Stable -> PreparingRebalance
    record()
    assert not rb.done
    assert h.heartbeat(a, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    ra2 = h.join(a)  # everyone rejoined -> CompletingRebalance
    record()
    assert ra2.value.generation_id == rb.value.generation_id == 2
    assert h.leave(MemberIdentity(b)) == [ErrorCode.NONE]  # Completing -> Preparing
    record()
    assert h.leave(MemberIdentity(a)) == [ErrorCode.NONE]  # last one out -> Empty
    record()
    assert h.view().generation_id == 3
    assert h.coord.delete_groups(["g"], h.now) == [("g", ErrorCode.NONE)]  # Empty -> Dead
    record()
    assert states == [
        "CompletingRebalance",
        "Stable",
        "PreparingRebalance",
        "CompletingRebalance",
        "PreparingRebalance",
        "Empty",
        "-",
    ]
    assert h.coord.describe_groups(["g"])[0].group_state == "Dead"


def test_member_id_required_only_from_v4() -> None:
    h = Harness()
    # KIP-394: v3 joins straight away with a coordinator-made id.
    r3 = h.join(version=3, client="old")
    assert r3.value.error_code == ErrorCode.NONE and r3.value.member_id.startswith("old-")
    h2 = Harness()
    r4 = h2.join(version=4, client="new")
    assert r4.value.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert r4.value.member_id.startswith("new-")
    assert h2.view().members == () and h2.view().pending_members == (r4.value.member_id,)


def test_static_member_never_gets_member_id_required() -> None:
    h = Harness()
    r = h.join(instance="i1", version=9)
    assert r.value.error_code == ErrorCode.NONE and r.value.member_id.startswith("i1-")


def test_pending_member_holds_the_join_until_it_joins_or_expires() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    first = h.join(client="late")  # pending (MEMBER_ID_REQUIRED)
    pending = first.value.member_id
    ra, rb = h.join(a), h.join(b)  # Stable leader rejoins -> rebalance
    assert not ra.done and not rb.done  # the pending member blocks completion
    h.advance(9.0)
    assert not ra.done
    h.advance(1.0)  # the pending member's session (10 s) expired: the join completes
    assert ra.value.generation_id == gen + 1 and rb.done
    assert pending not in h.view().pending_members


def test_pending_member_joining_completes_rebalance() -> None:
    h = Harness()
    (a,), gen = h.form_group(1)
    first = h.join(client="n")
    ra = h.join(a)  # leader rejoin; the pending member holds completion
    assert not ra.done
    rn = h.join(first.value.member_id, client="n")
    assert ra.value.generation_id == rn.value.generation_id == gen + 1
    assert {m.member_id for m in ra.value.members} == {a, first.value.member_id}


# ------------------------------------------------------------------------------ protocol vote


def test_vote_two_against_one() -> None:
    # ClassicGroup.selectProtocol: each member votes for its first choice among the protocols
    # all support; [roundrobin, range] vs 2 x [range, roundrobin] -> range, 2 votes to 1.
    h = Harness()
    h.join_new("x", protocols=[ROUNDROBIN, RANGE])
    h.join_new("y", protocols=[RANGE, ROUNDROBIN])
    h.join_new("z", protocols=[RANGE, ROUNDROBIN])
    replies = h.rejoin_all()
    (r,) = replies.values()
    assert r.value.protocol_name == "range"
    h2 = Harness()
    h2.join_new("x", protocols=[ROUNDROBIN, RANGE])
    h2.join_new("y", protocols=[ROUNDROBIN, RANGE])
    h2.join_new("z", protocols=[RANGE, ROUNDROBIN])
    (r2,) = h2.rejoin_all().values()
    assert r2.value.protocol_name == "roundrobin"


# Expected winners verified with JDK 17: a HashMap filled with these names, then
# entrySet().stream().max(comparingInt(getValue)) as ClassicGroup.selectProtocol does.
@pytest.mark.parametrize(
    ("first", "second", "winner"),
    [
        (ROUNDROBIN, RANGE, "range"),
        (RANGE, ROUNDROBIN, "range"),
        (COOP, RANGE, "range"),
        (RANGE, COOP, "range"),
    ],
)
def test_vote_tie_break_follows_java_hashmap_order(
    first: tuple[str, bytes], second: tuple[str, bytes], winner: str
) -> None:
    h = Harness()
    h.join_new("x", protocols=[first, second])
    h.join_new("y", protocols=[second, first])
    (r,) = h.rejoin_all().values()
    assert r.value.protocol_name == winner


def test_java_hash_helpers() -> None:
    # Values from java.lang.String.hashCode / HashMap iteration on JDK 17.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("roundrobin") == -128548644 & 0xFFFFFFFF
    assert list(JavaMap(["sticky", "roundrobin", "range", "cooperative-sticky"])) == [
        "sticky",
        "range",
        "roundrobin",
        "cooperative-sticky",
    ]


def test_range_only_member_joins_cooperative_group() -> None:
    # supportsProtocols: a newcomer is accepted if one of its protocols is supported by every
    # member; the vote then falls back to that common protocol.
    h = Harness()
    (a, b), gen = h.form_group(2, protocols=[COOP, RANGE])
    assert h.view().protocol_name == "cooperative-sticky"
    c, rc = h.join_new("c", protocols=[RANGE])
    assert not rc.done
    replies = h.rejoin_all()
    assert set(replies) == {a, b}
    assert rc.value.protocol_name == "range" and rc.value.generation_id == gen + 1
    assert {m.member_id for m in h.view().members} == {a, b, c}


def test_inconsistent_protocols_and_type() -> None:
    h = Harness()
    h.form_group(1, protocols=[RANGE])
    r = h.join(protocols=[ROUNDROBIN])
    assert r.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert r.value.member_id == ""
    r = h.join(protocols=[RANGE], protocol_type="connect")
    assert r.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    # An empty group accepts an empty protocol list? No: Kafka requires a type and protocols.
    h2 = Harness()
    assert h2.join(protocols=[]).value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h2.join(protocol_type="").value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_existing_member_switching_to_unsupported_protocol_is_rejected() -> None:
    h = Harness()
    (a, _b), gen = h.form_group(2, protocols=[RANGE])
    r = h.join(a, protocols=[COOP])
    assert r.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.view().state == "Stable" and h.view().generation_id == gen


def test_empty_group_accepts_any_protocol_again() -> None:
    h = Harness()
    (a,), _ = h.form_group(1, protocols=[RANGE])
    h.leave(MemberIdentity(a))
    assert h.view().state == "Empty" and h.view().protocol_name is None
    _, r = h.join_new("n", protocols=[ROUNDROBIN], protocol_type="other")
    assert r.value.protocol_name == "roundrobin" and r.value.protocol_type == "other"


def test_rolling_upgrade_to_cooperative_sticky() -> None:
    # range -> [cooperative-sticky, range] -> [cooperative-sticky], one member at a time, each
    # restart an in-place rejoin with new metadata: every step converges, nobody is kicked out.
    h = Harness()
    ids, gen = h.form_group(3, protocols=[RANGE])
    expected = ["range", "range", "cooperative-sticky"]  # after each member of phase 1
    for phase, protocols in enumerate(([COOP, RANGE], [COOP])):
        for i, mid in enumerate(ids):
            r = h.join(mid, protocols=protocols)
            assert not r.done
            others = h.rejoin_all()
            assert r.value.error_code == ErrorCode.NONE, (phase, i, r.value)
            assert r.value.generation_id == gen + 1
            gen += 1
            if phase == 0:
                assert r.value.protocol_name == expected[i]
            else:
                assert r.value.protocol_name == "cooperative-sticky"
            assert set(others) | {mid} == set(ids)
            assert sorted(h.sync_all()[0]) == sorted(ids)


def test_rolling_upgrade_with_restarts() -> None:
    # The same upgrade when each consumer restarts: LeaveGroup, then a fresh JoinGroup.
    h = Harness()
    ids, _ = h.form_group(2, protocols=[RANGE])
    steps = [
        ([COOP, RANGE], "range"),  # the other member is still range-only
        ([COOP, RANGE], "cooperative-sticky"),  # both vote cooperative-sticky first
        ([COOP], "cooperative-sticky"),
        ([COOP], "cooperative-sticky"),
    ]
    for step, (protocols, want) in enumerate(steps):
        i = step % 2
        h.leave(MemberIdentity(ids[i]))
        new, r = h.join_new(f"up{step}", protocols=protocols)
        assert not r.done  # the other member must rejoin first
        h.rejoin_all()
        assert r.value.error_code == ErrorCode.NONE and r.value.protocol_name == want
        ids[i] = new
        h.sync_all()
        assert sorted(m.member_id for m in h.view().members) == sorted(ids)


# ------------------------------------------------------------------------------ joins


def test_follower_rejoin_in_stable_with_same_metadata_is_free() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    follower = b if h.view().leader == a else a
    r = h.join(follower)
    assert r.value.error_code == ErrorCode.NONE and r.value.generation_id == gen
    assert r.value.members == () and h.view().state == "Stable"


def test_leader_rejoin_in_stable_triggers_rebalance() -> None:
    h = Harness()
    (_a, _b), gen = h.form_group(2)
    leader = h.view().leader
    assert leader is not None
    r = h.join(leader)
    assert not r.done and h.view().state == "PreparingRebalance"
    h.rejoin_all()
    assert r.value.generation_id == gen + 1 and len(r.value.members) == 2


def test_changed_metadata_in_stable_triggers_rebalance() -> None:
    h = Harness()
    (a, b), _gen = h.form_group(2)
    follower = b if h.view().leader == a else a
    r = h.join(follower, protocols=[("range", b"new-subscription")])
    assert not r.done and h.view().state == "PreparingRebalance"


def test_rejoin_in_completing_rebalance_returns_same_generation() -> None:
    # The member lost its JoinGroup answer: same metadata -> the same answer again.
    h = Harness()
    a, ra = h.join_new("a")
    again = h.join(a)
    assert again.value.generation_id == ra.value.generation_id
    assert again.value.members == ra.value.members  # still the leader's view
    assert h.view().state == "CompletingRebalance"
    # Changed metadata instead: rebalance.
    h.join(a, protocols=[("range", b"other")])
    assert h.view().generation_id == ra.value.generation_id + 1


def test_unknown_member_id_join() -> None:
    h = Harness()
    assert h.join("ghost").value.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # no such group
    h.form_group(1)
    assert h.join("ghost").value.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_invalid_session_timeout_and_group_id() -> None:
    h = Harness(group_min_session_timeout_ms=6000, group_max_session_timeout_ms=60_000)
    assert h.join(session_ms=5999).value.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(session_ms=60_001).value.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join(session_ms=6000).value.error_code == ErrorCode.MEMBER_ID_REQUIRED
    assert h.join(group="").value.error_code == ErrorCode.INVALID_GROUP_ID
    assert h.coord.group_state("") is None


def test_group_max_size() -> None:
    h = Harness(group_max_size=2)
    (a, b), _ = h.form_group(2)
    # acceptJoiningMember runs before KIP-394's MEMBER_ID_REQUIRED: a full Stable group turns
    # the newcomer away at once.
    r = h.join(client="c")
    assert r.value.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED and r.value.member_id == ""
    assert {m.member_id for m in h.view().members} == {a, b}
    # During a rebalance the limit counts members awaiting join.
    h.join(a)
    assert h.join(client="d").value.error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_initial_rebalance_delay_extends_up_to_rebalance_timeout() -> None:
    # InitialDelayedJoin: wait the delay; each new member extends it by the delay, capped by
    # the rebalance timeout.
    h = Harness(initial_rebalance_delay_ms=3000)
    _, ra = h.join_new("a", rebalance_ms=5000)
    h.advance(2.0)
    _, rb = h.join_new("b", rebalance_ms=5000)
    h.advance(1.0)  # first delay over, but a member arrived: wait min(3 s, 2 s left) more
    assert not ra.done
    h.advance(1.9)
    assert not ra.done
    h.advance(0.1)
    assert ra.value.generation_id == rb.value.generation_id == 1
    assert len(ra.value.members) == 2


def test_initial_delay_without_newcomers() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    _, ra = h.join_new("a")
    h.advance(2.999)
    assert not ra.done
    h.advance(0.001)
    assert ra.value.generation_id == 1


# ------------------------------------------------------------------------------ sync


def test_sync_errors() -> None:
    h = Harness()
    assert h.sync("x", 0).value.error_code == ErrorCode.UNKNOWN_MEMBER_ID  # no group
    assert h.sync("x", 0, group="").value.error_code == ErrorCode.INVALID_GROUP_ID
    (a, _b), gen = h.form_group(2)
    assert h.sync("x", gen).value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync(a, gen - 1).value.error_code == ErrorCode.ILLEGAL_GENERATION
    # KIP-559: SyncGroup v5's protocol type and name must match the group's.
    bad_type = h.sync(a, gen, protocol_type="connect")
    assert bad_type.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    bad_name = h.sync(a, gen, protocol_type="consumer", protocol_name="roundrobin")
    assert bad_name.value.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    ok = h.sync(a, gen, protocol_type="consumer", protocol_name="range")
    assert ok.value.error_code == ErrorCode.NONE and ok.value.assignment == a.encode()
    assert ok.value.protocol_name == "range" and ok.value.protocol_type == "consumer"
    h.join(h.view().leader or "")  # -> PreparingRebalance
    assert h.sync(a, gen).value.error_code == ErrorCode.REBALANCE_IN_PROGRESS


def test_member_missing_from_leader_assignment_gets_empty_one() -> None:
    h = Harness()
    h.join_new("a")
    h.join_new("b")
    h.rejoin_all()
    v = h.view()
    follower = next(m.member_id for m in v.members if m.member_id != v.leader)
    rf = h.sync(follower, v.generation_id)
    assert not rf.done
    rl = h.sync(v.leader or "", v.generation_id, [(v.leader or "", b"L"), ("stranger", b"S")])
    assert rl.value.assignment == b"L"
    assert rf.value.error_code == ErrorCode.NONE and rf.value.assignment == b""


def test_leave_during_completing_rebalance_restarts_rebalance() -> None:
    h = Harness()
    h.join_new("a")
    h.join_new("b")
    h.join_new("c")
    h.rejoin_all()
    v = h.view()
    followers = [m.member_id for m in v.members if m.member_id != v.leader]
    parked = h.sync(followers[0], v.generation_id)
    h.leave(MemberIdentity(followers[1]))
    # The parked follower is told to rejoin (resetAndPropagateAssignmentError).
    assert parked.value.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.view().state == "PreparingRebalance"


def test_members_that_never_sync_are_removed() -> None:
    # KAFKA-12890 / DelayedSync: after the JoinGroup answers, every member must sync within the
    # rebalance timeout.
    h = Harness()
    h.join_new("a", rebalance_ms=20_000)
    h.join_new("b", rebalance_ms=20_000)
    h.rejoin_all()
    v = h.view()
    follower = next(m.member_id for m in v.members if m.member_id != v.leader)
    h.sync(v.leader or "", v.generation_id, [])
    for _ in range(4):  # both keep their sessions alive; the follower never syncs
        h.advance(4.0)
        assert h.heartbeat(v.leader or "", v.generation_id) == ErrorCode.NONE
        assert h.heartbeat(follower, v.generation_id) == ErrorCode.NONE
    h.advance(4.0)  # 20 s: the follower never synced
    assert follower not in {m.member_id for m in h.view().members}
    assert h.view().state == "PreparingRebalance"


# ------------------------------------------------------------------------------ timeouts


def test_session_timeout_expires_silent_member() -> None:
    h = Harness()
    (a, _b), gen = h.form_group(2, session_ms=10_000)
    for _ in range(3):
        h.advance(3.0)
        assert h.heartbeat(a, gen) == ErrorCode.NONE
    assert len(h.view().members) == 2
    h.advance(1.0)  # b's 10 s session is over
    assert {m.member_id for m in h.view().members} == {a}
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    assert h.view().state == "PreparingRebalance"
    r = h.join(a)
    assert r.value.generation_id == gen + 1 and [m.member_id for m in r.value.members] == [a]
    assert h.coord.next_deadline() is not None


def test_session_expiry_at_exact_deadline_and_next_deadline() -> None:
    h = Harness()
    (_a,), gen = h.form_group(1, session_ms=10_000)
    deadline = h.coord.next_deadline()
    assert deadline == pytest.approx(h.now + 10.0)
    h.advance(9.999)
    assert h.view().members
    h.advance(0.001)
    assert h.view().state == "Empty" and h.view().generation_id == gen + 1
    assert h.coord.next_deadline() is None


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2, session_ms=60_000, rebalance_ms=30_000)
    leader = h.view().leader or ""
    other = b if leader == a else a
    r = h.join(leader, session_ms=60_000, rebalance_ms=30_000)
    h.advance(29.0)
    assert not r.done and h.heartbeat(other, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(1.0)
    assert r.value.generation_id == gen + 1
    assert [m.member_id for m in r.value.members] == [leader]
    assert h.heartbeat(other, gen) == ErrorCode.UNKNOWN_MEMBER_ID


def test_member_awaiting_join_does_not_expire_on_session() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2, session_ms=10_000, rebalance_ms=60_000)
    leader = h.view().leader or ""
    other = b if leader == a else a
    r = h.join(leader, session_ms=10_000, rebalance_ms=60_000)
    for _ in range(10):
        h.advance(5.0)
        h.heartbeat(other, gen)
    assert not r.done and leader in {m.member_id for m in h.view().members}
    h.join(other, session_ms=10_000, rebalance_ms=60_000)
    assert r.value.error_code == ErrorCode.NONE


def test_new_member_join_times_out() -> None:
    # A new member parked in JoinGroup expires after new_member_join_timeout (5 min in Kafka).
    h = Harness(new_member_join_timeout_ms=40_000)
    (a,), gen = h.form_group(1, session_ms=60_000, rebalance_ms=120_000)
    _, rn = h.join_new("n", session_ms=60_000, rebalance_ms=120_000)
    h.advance(20.0)
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(20.0)
    assert rn.value.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert [m.member_id for m in h.view().members] == [a]


# ------------------------------------------------------------------------------ heartbeat


def test_heartbeat_errors() -> None:
    h = Harness()
    assert h.heartbeat("x", 1) == ErrorCode.UNKNOWN_MEMBER_ID  # no group
    assert h.heartbeat("x", 1, group="") == ErrorCode.INVALID_GROUP_ID
    a, ra = h.join_new("a")
    gen = ra.value.generation_id
    # CompletingRebalance: a heartbeat between JoinGroup and SyncGroup is fine.
    assert h.heartbeat(a, gen) == ErrorCode.NONE
    assert h.heartbeat(a, gen + 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("ghost", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    h.sync(a, gen, [(a, b"x")])
    assert h.heartbeat(a, gen) == ErrorCode.NONE
    h.join_new("b")
    assert h.heartbeat(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS


# ------------------------------------------------------------------------------ static members


def form_static_group(h: Harness, instances: Sequence[str]) -> tuple[dict[str, str], int]:
    ids = {}
    for inst in instances:
        r = h.join(instance=inst, client=inst)
        ids[inst] = r.value.member_id if r.done else ""
    if h.view().state == "PreparingRebalance":
        h.rejoin_all()
    for m in h.view().members:
        assert m.group_instance_id is not None
        ids[m.group_instance_id] = m.member_id
    _, gen = h.sync_all()
    return ids, gen


@pytest.mark.parametrize("version", [8, 9])
def test_static_restart_without_rebalance_fences_zombie(version: int) -> None:
    h = Harness()
    ids, gen = form_static_group(h, ["i1", "i2"])
    leader = h.view().leader
    follower_inst = next(i for i, m in ids.items() if m != leader)
    old = ids[follower_inst]
    r = h.join(instance=follower_inst, client=follower_inst, version=version)
    new = r.value.member_id
    assert r.value.error_code == ErrorCode.NONE and new != old
    assert r.value.generation_id == gen and h.view().state == "Stable"  # no rebalance
    s = h.sync(new, gen, instance=follower_inst)
    assert s.value.assignment == old.encode()  # it inherits the old member's assignment
    # The zombie (old member id, same instance id) is fenced everywhere.
    assert h.heartbeat(old, gen, instance=follower_inst) == ErrorCode.FENCED_INSTANCE_ID
    assert h.sync(old, gen, instance=follower_inst).value.error_code == (
        ErrorCode.FENCED_INSTANCE_ID
    )
    assert h.commit(old, gen, instance=follower_inst) == ErrorCode.FENCED_INSTANCE_ID
    assert h.join(old, instance=follower_inst).value.error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.leave(MemberIdentity(old, follower_inst)) == [ErrorCode.FENCED_INSTANCE_ID]
    assert h.heartbeat(new, gen, instance=follower_inst) == ErrorCode.NONE
    # Without the instance id the old id is simply unknown.
    assert h.heartbeat(old, gen) == ErrorCode.UNKNOWN_MEMBER_ID


@pytest.mark.parametrize(("version", "skip"), [(8, False), (9, True)])
def test_static_leader_restart(version: int, skip: bool) -> None:
    h = Harness()
    ids, gen = form_static_group(h, ["i1", "i2"])
    leader = h.view().leader
    inst = next(i for i, m in ids.items() if m == leader)
    r = h.join(instance=inst, client=inst, version=version)
    assert r.value.generation_id == gen and h.view().state == "Stable"
    if skip:
        # KIP-814: the new id is the leader, told to skip the assignment, with the members.
        assert r.value.leader == r.value.member_id and r.value.skip_assignment
        assert len(r.value.members) == 2
    else:
        # Before v9 the old leader id is reported so the restarted leader does not assign.
        assert r.value.leader == leader and not r.value.skip_assignment
        assert r.value.members == ()
    assert h.view().leader == r.value.member_id


def test_static_restart_with_new_protocol_rebalances() -> None:
    h = Harness()
    _ids, gen = form_static_group(h, ["i1"])
    r = h.join(instance="i1", protocols=[ROUNDROBIN, RANGE])
    # Its vote now selects roundrobin: the group's protocol would change, so it rebalances.
    assert r.value.generation_id == gen + 1
    assert r.value.protocol_name == "roundrobin"


def test_static_restart_fences_parked_join() -> None:
    h = Harness()
    ids, _gen = form_static_group(h, ["i1", "i2"])
    h.join_new("dyn")  # rebalance starts; i1's old incarnation rejoins and is parked
    parked = h.join(ids["i1"], instance="i1")
    assert not parked.done
    replacement = h.join(instance="i1")
    assert parked.value.error_code == ErrorCode.FENCED_INSTANCE_ID
    h.rejoin_all()
    assert replacement.value.error_code == ErrorCode.NONE


def test_static_restart_during_completing_rebalance_rebalances() -> None:
    h = Harness()
    ids, _gen = form_static_group(h, ["i1", "i2"])
    h.join(h.view().leader or "", instance=next(i for i, m in ids.items() if m == h.view().leader))
    h.rejoin_all()
    assert h.view().state == "CompletingRebalance"
    h.join(instance="i2")
    assert h.view().state == "PreparingRebalance"


def test_static_member_survives_rebalance_without_rejoining_until_session_timeout() -> None:
    h = Harness()
    ids, gen = form_static_group(h, ["i1", "i2"])
    leader_inst = next(i for i, m in ids.items() if m == h.view().leader)
    other = "i2" if leader_inst == "i1" else "i1"
    r = h.join(ids[leader_inst], instance=leader_inst)
    for _ in range(5):  # the other one heartbeats but never rejoins
        h.advance(5.0)
        assert h.heartbeat(ids[other], gen, instance=other) == ErrorCode.REBALANCE_IN_PROGRESS
    assert not r.done
    h.advance(5.0)  # 30 s rebalance timeout: a dynamic member would be dropped, not a static one
    assert r.value.error_code == ErrorCode.NONE
    new_gen = r.value.generation_id
    assert ids[other] in {m.member_id for m in h.view().members}
    h.sync(ids[leader_inst], new_gen, [], instance=leader_inst)
    h.advance(5.0)
    assert h.heartbeat(ids[leader_inst], new_gen, instance=leader_inst) == ErrorCode.NONE
    h.advance(5.0)  # the static member's session (10 s from the join completion) is over
    assert ids[other] not in {m.member_id for m in h.view().members}


def test_leave_by_instance_id() -> None:
    h = Harness()
    _ids, _gen = form_static_group(h, ["i1", "i2"])
    assert h.leave(MemberIdentity("", "i1"), MemberIdentity("", "nope")) == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_MEMBER_ID,
    ]
    assert [m.group_instance_id for m in h.view().members] == ["i2"]
    assert h.view().state == "PreparingRebalance"


def test_leave_unknown_group_and_pending_member() -> None:
    h = Harness()
    assert h.leave(MemberIdentity("x"), group="nope") == [ErrorCode.UNKNOWN_MEMBER_ID]
    first = h.join()
    assert h.leave(MemberIdentity(first.value.member_id)) == [ErrorCode.NONE]
    assert h.view().pending_members == ()
    assert h.leave(MemberIdentity("ghost")) == [ErrorCode.UNKNOWN_MEMBER_ID]


# ------------------------------------------------------------------------------ offsets


def test_commit_rules() -> None:
    h = Harness()
    # A nonexistent group: generation >= 0 is a commit from an older life.
    assert h.commit("m", 1, group="fresh") == ErrorCode.ILLEGAL_GENERATION
    # Simple (admin / assign()) commits create an Empty group.
    assert h.commit(group="simple") == ErrorCode.NONE
    assert h.view("simple").state == "Empty"
    a, ra = h.join_new("a")
    gen = ra.value.generation_id
    # CompletingRebalance: the member must sync first.
    assert h.commit(a, gen) == ErrorCode.REBALANCE_IN_PROGRESS
    h.sync(a, gen, [(a, b"x")])
    assert h.commit(a, gen) == ErrorCode.NONE
    assert h.commit(a, gen - 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.commit(a, gen + 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.commit("ghost", gen) == ErrorCode.UNKNOWN_MEMBER_ID
    # A simple commit into a group with members is refused.
    assert h.commit() == ErrorCode.UNKNOWN_MEMBER_ID
    h.join_new("b")  # PreparingRebalance: the current generation may still commit (KIP-429)
    assert h.view().state == "PreparingRebalance"
    assert h.commit(a, gen, offset=50) == ErrorCode.NONE


def test_commit_keeps_metadata_and_fetch_returns_it() -> None:
    h = Harness()
    assert h.commit(offset=10, metadata="hello") == ErrorCode.NONE
    resp = h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0), ("t", 1)]))
    p0, p1 = resp.partitions
    assert (p0.committed_offset, p0.committed_leader_epoch, p0.metadata) == (10, 7, "hello")
    assert (p1.committed_offset, p1.metadata) == (-1, "")
    assert [p.partition for p in h.coord.fetch_offsets(OffsetFetchRequestData("g")).partitions] == [
        0
    ]
    missing = h.coord.fetch_offsets(OffsetFetchRequestData("nope", [("t", 0)]))
    assert missing.error_code == ErrorCode.NONE and missing.partitions[0].committed_offset == -1
    assert h.commit(metadata=None) == ErrorCode.NONE
    resp = h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)]))
    assert resp.partitions[0].metadata == ""


def test_commit_metadata_too_large() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    assert h.commit(metadata="12345", offset=9) == ErrorCode.OFFSET_METADATA_TOO_LARGE
    assert (
        h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)]))
        .partitions[0]
        .committed_offset
        == -1
    )


def test_commit_refreshes_session() -> None:
    h = Harness()
    (a,), gen = h.form_group(1, session_ms=10_000)
    for _ in range(4):
        h.advance(6.0)
        assert h.commit(a, gen) == ErrorCode.NONE
    assert h.view().state == "Stable"


# ------------------------------------------------------------------------------ admin


def test_describe_groups() -> None:
    h = Harness()
    a, ra = h.join_new("a")
    (d,) = h.coord.describe_groups(["g"])
    # Not Stable: no protocol, member metadata or assignment shown (GroupMetadata.summary).
    assert d.group_state == "CompletingRebalance" and d.protocol_data == ""
    assert d.members[0].member_metadata == b"" and d.members[0].member_assignment == b""
    h.sync(a, ra.value.generation_id, [(a, b"ASSIGN")])
    (d,) = h.coord.describe_groups(["g"])
    assert (d.group_state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    m = d.members[0]
    assert (m.member_id, m.client_id, m.member_metadata, m.member_assignment) == (
        a,
        "a",
        b"range-meta",
        b"ASSIGN",
    )
    old, new = h.coord.describe_groups(["nope"]), h.coord.describe_groups(["nope"], api_version=6)
    assert (old[0].error_code, old[0].group_state) == (ErrorCode.NONE, "Dead")
    assert new[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert (old[0].error_message, new[0].error_message) == (None, "Group nope not found.")


def test_list_and_delete_groups() -> None:
    h = Harness()
    h.join_new("a", group="busy")
    h.commit(group="idle")
    listed = {(g.group_id, g.group_state, g.protocol_type) for g in h.coord.list_groups()}
    assert listed == {("busy", "CompletingRebalance", "consumer"), ("idle", "Empty", "")}
    assert [g.group_id for g in h.coord.list_groups(["empty"])] == ["idle"]
    assert [g.group_id for g in h.coord.list_groups(["COMPLETINGREBALANCE"])] == ["busy"]
    assert h.coord.delete_groups(["busy", "idle", "nope"], h.now) == [
        ("busy", ErrorCode.NON_EMPTY_GROUP),
        ("idle", ErrorCode.NONE),
        ("nope", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert h.coord.fetch_offsets(OffsetFetchRequestData("idle")).partitions == ()


# ------------------------------------------------------------------------------ failover


def test_failover_reloads_stable_group_and_offsets() -> None:
    h = Harness()
    (a, b), gen = h.form_group(2)
    assert h.commit(a, gen, offset=77) == ErrorCode.NONE
    h.commit(group="simple", offset=5)
    h.coord.failover(h.now)
    v = h.view()
    assert (v.state, v.generation_id, v.protocol_name) == ("Stable", gen, "range")
    assert {m.member_id for m in v.members} == {a, b}
    # Members carry on with their generation: no rebalance after a coordinator move.
    assert h.heartbeat(a, gen) == ErrorCode.NONE
    assert h.sync(b, gen).value.assignment == b.encode()
    assert (
        h.coord.fetch_offsets(OffsetFetchRequestData("g", [("t", 0)]))
        .partitions[0]
        .committed_offset
        == 77
    )
    assert h.view("simple").state == "Empty"


def test_failover_loses_rebalance_in_progress() -> None:
    h = Harness()
    (_a, _b), gen = h.form_group(2)
    leader = h.view().leader or ""
    parked = h.join(leader)
    assert h.view().state == "PreparingRebalance"
    h.coord.failover(h.now)
    assert parked.value.error_code == ErrorCode.NOT_COORDINATOR
    assert h.view().state == "Stable" and h.view().generation_id == gen
    # A group that never completed a rebalance and has no offsets is gone.
    h.join(group="young")
    h.coord.failover(h.now)
    assert h.coord.group_state("young") is None


def test_failover_members_expire_if_they_do_not_come_back() -> None:
    h = Harness()
    (_a,), _gen = h.form_group(1, session_ms=10_000)
    h.coord.failover(h.now)
    h.advance(10.0)
    assert h.view().state == "Empty"


# ------------------------------------------------------------------------------ callbacks


def test_callback_errors_are_wrapped_and_state_is_kept() -> None:
    h = Harness()

    def boom(_: object) -> None:
        raise RuntimeError("client gone")

    with pytest.raises(CoordinatorCallbackError) as info:
        h.coord.join_group(
            JoinGroupRequestData("g", "", "consumer", [RANGE], 10_000, api_version=3), h.now, boom
        )
    assert isinstance(info.value, CallbackError)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert h.view().state == "CompletingRebalance" and len(h.view().members) == 1


def test_reentrant_callback() -> None:
    h = Harness()
    seen: list[int] = []

    def respond(resp: JoinGroupResponseData | None) -> None:
        assert resp is not None
        seen.append(resp.error_code)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            h.coord.join_group(
                JoinGroupRequestData("g", resp.member_id, "consumer", [RANGE], 10_000),
                h.now,
                respond,
            )

    h.coord.join_group(JoinGroupRequestData("g", "", "consumer", [RANGE], 10_000), h.now, respond)
    assert seen == [ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.NONE]


def test_superseded_join_is_never_answered() -> None:
    # updateMember overwrites the parked callback: Kafka never answers the first JoinGroup
    # (the callback gets None: "send nothing").
    h = Harness()
    (_a, _b), _gen = h.form_group(2)
    leader = h.view().leader or ""
    first = h.join(leader)
    second = h.join(leader)
    assert first.answers == [None]
    h.rejoin_all()
    assert second.value is not None and second.value.error_code == ErrorCode.NONE
    assert first.answers == [None]


def test_commit_request_type_smoke() -> None:
    # Offsets for several partitions keep request order in the answer.
    h = Harness()
    resp = h.coord.commit_offsets(
        OffsetCommitRequestData(
            "g", [OffsetCommitPartition("b", 1, 1), OffsetCommitPartition("a", 0, 2)]
        ),
        h.now,
    )
    assert resp.partitions == (("b", 1, 0), ("a", 0, 0))


def test_pending_member_with_instance_id_is_a_server_error() -> None:
    # Kafka throws IllegalStateException (UNKNOWN_SERVER_ERROR on the wire): a pending member
    # id is only ever handed to a dynamic member.
    h = Harness()
    first = h.join()
    r = h.join(first.value.member_id, instance="i1")
    assert r.value.error_code == ErrorCode.UNKNOWN_SERVER_ERROR


def test_join_v0_uses_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    h.join(version=0, session_ms=12_000, rebalance_ms=-1)
    (m,) = h.view().members
    assert (m.session_timeout_ms, m.rebalance_timeout_ms) == (12_000, 12_000)


def test_failover_over_capacity_group_rebalances() -> None:
    h = Harness()
    h.form_group(2)
    h.coord.config = CoordinatorConfig(group_max_size=1)
    h.coord.failover(h.now)
    assert h.view().state == "PreparingRebalance"


def test_superseded_sync_is_never_answered() -> None:
    h = Harness()
    h.join_new("a")
    h.join_new("b")
    h.rejoin_all()
    v = h.view()
    follower = next(m.member_id for m in v.members if m.member_id != v.leader)
    first = h.sync(follower, v.generation_id)
    second = h.sync(follower, v.generation_id)
    assert first.answers == [None]
    h.sync(v.leader or "", v.generation_id, [(follower, b"F")])
    assert second.value is not None and second.value.assignment == b"F"


def test_rebalance_with_only_absent_static_members_waits_for_their_sessions() -> None:
    # onCompleteJoin: if nobody rejoined (only static members are left) the join is retried
    # after another rebalance timeout; their sessions decide.
    h = Harness()
    ids, gen = form_static_group(h, ["i1"])
    h.join_new("dyn", rebalance_ms=1000)  # a dynamic newcomer that then leaves
    dyn = next(m.member_id for m in h.view().members if m.group_instance_id is None)
    h.leave(MemberIdentity(dyn))
    assert h.view().state == "PreparingRebalance"
    for _ in range(6):  # the static member heartbeats but never rejoins
        h.advance(5.0)
        assert h.heartbeat(ids["i1"], gen, instance="i1") == ErrorCode.REBALANCE_IN_PROGRESS
    # 30 s rebalance timeout passed: nobody rejoined, the static member is kept, and the join
    # waits another rebalance timeout.
    assert h.view().state == "PreparingRebalance" and len(h.view().members) == 1
    h.advance(10.0)  # it went silent: its session expires and the group empties
    assert h.view().state == "Empty" and h.view().generation_id == gen + 1


def test_java_hashmap_order_across_a_resize() -> None:
    # 14 keys push a HashMap from 16 to 32 buckets; order printed by JDK 17's HashMap.keySet().
    keys = [f"proto-{i}" for i in range(14)]
    java = "9,5,6,7,8,11,10,13,12,1,2,3,4,0"
    assert list(JavaMap(keys)) == [f"proto-{i}" for i in java.split(",")]


def test_static_restart_fences_parked_sync() -> None:
    # The old incarnation waits in SyncGroup for the leader; its replacement fences it, and
    # since the group is CompletingRebalance a new rebalance starts.
    h = Harness()
    ids, _ = form_static_group(h, ["i1", "i2"])
    leader_inst = next(i for i, m in ids.items() if m == h.view().leader)
    other = "i2" if leader_inst == "i1" else "i1"
    h.join(ids[leader_inst], instance=leader_inst)
    h.rejoin_all()
    gen = h.view().generation_id
    parked = h.sync(ids[other], gen, instance=other)
    assert not parked.done
    h.join(instance=other)
    assert parked.value.error_code == ErrorCode.FENCED_INSTANCE_ID
    assert h.view().state == "PreparingRebalance"


def test_leaving_member_with_parked_sync_is_never_answered() -> None:
    # removeMemberAndUpdateGroup answers only a parked JoinGroup; the SyncGroup of a member
    # that left is forgotten (None: the server sends nothing), the others must rejoin.
    h = Harness()
    h.join_new("a")
    h.join_new("b")
    h.rejoin_all()
    v = h.view()
    follower = next(m.member_id for m in v.members if m.member_id != v.leader)
    parked = h.sync(follower, v.generation_id)
    assert h.leave(MemberIdentity(follower)) == [ErrorCode.NONE]
    assert parked.answers == [None]
    assert h.view().state == "PreparingRebalance"


def test_absent_static_leader_hands_leadership_to_a_member_that_rejoined() -> None:
    h = Harness()
    ids, gen = form_static_group(h, ["i1", "i2"])
    leader_inst = next(i for i, m in ids.items() if m == h.view().leader)
    other = "i2" if leader_inst == "i1" else "i1"
    r = h.join(ids[other], instance=other, protocols=[("range", b"changed")])
    for _ in range(6):  # the static leader heartbeats but does not rejoin
        h.advance(5.0)
        h.heartbeat(ids[leader_inst], gen, instance=leader_inst)
    assert r.value.leader == ids[other] and r.value.generation_id == gen + 1
    assert ids[leader_inst] in {m.member_id for m in h.view().members}


def test_default_member_ids_are_client_id_dash_uuid() -> None:
    coord = GroupCoordinator()
    reply: Reply[JoinGroupResponseData] = Reply()
    coord.join_group(
        JoinGroupRequestData("g", "", "consumer", [RANGE], 10_000, client_id="app"), 0.0, reply
    )
    prefix, _, rest = reply.value.member_id.partition("-")
    assert prefix == "app" and len(rest) == 36 and rest.count("-") == 4
