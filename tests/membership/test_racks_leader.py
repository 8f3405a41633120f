"""KIP-881 on the classic leader: when some member has a rack, the machine asks the driver for
the partitions' replica racks (``RequestMetadata(racks=True)``), and hands what
``MetadataUpdated.partition_racks`` carries to the assignor (``run_assignor``); without a
racked member it asks for none (they cost a pass over every replica)."""

from __future__ import annotations

from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.membership import (
    MemberConfig,
    MembershipMachine,
    MetadataUpdated,
    SendJoinGroup,
    SendSyncGroup,
    SyncGroupCompleted,
)
from aiogroup.membership.actions import RequestMetadata
from aiogroup.protocol import Subscription, decode_assignment
from aiogroup.protocol.consumer import encode_subscription

from .helpers import Script, leader_join

A, B = frozenset({"a"}), frozenset({"b"})


def leader(rack: str | None) -> Script:
    cfg = MemberConfig(
        group_id="g",
        assignors=[CooperativeStickyAssignor()],
        enable_auto_commit=False,
        rack_id=rack,
    )
    script = Script(MembershipMachine(cfg))
    script.start(frozenset({"t"}))
    join = script.take(SendJoinGroup)
    script.clear()  # the member's own metadata request: not the leader's
    script.pending.append(join)
    return script


def sync_of(script: Script) -> dict[str, dict[str, tuple[int, ...]]]:
    sync = script.take(SendSyncGroup)
    out: dict[str, dict[str, tuple[int, ...]]] = {}
    for m, data in sync.assignments:
        parts = decode_assignment(data).partitions
        out[m] = {t: tuple(ps) for t, ps in parts.items() if t == "t"}  # not the hand-off mark
    return out


def test_a_leader_with_racked_members_assigns_rack_matched() -> None:
    script = leader("a")
    members = {
        "m1": encode_subscription(Subscription(["t"], rack_id="a"), 3),
        "m2": encode_subscription(Subscription(["t"], rack_id="b"), 3),
    }
    leader_join(script, members)
    ask = script.take(RequestMetadata)
    assert ask.racks and ask.topics is not None and "t" in ask.topics
    # Partitions 0 and 2 have their replicas in rack a, 1 and 3 in rack b.
    script.feed(MetadataUpdated({"t": 4}, partition_racks={"t": [A, B, A, B]}))
    assert sync_of(script) == {"m1": {"t": (0, 2)}, "m2": {"t": (1, 3)}}


def test_an_answer_without_racks_is_not_used_while_racks_are_awaited() -> None:
    script = leader("a")
    members = {
        "m1": encode_subscription(Subscription(["t"], rack_id="a"), 3),
        "m2": encode_subscription(Subscription(["t"], rack_id="b"), 3),
    }
    leader_join(script, members)
    script.take(RequestMetadata)
    script.feed(MetadataUpdated({"t": 4}))  # an answer to an older request
    assert not script.has(SendSyncGroup)
    script.feed(MetadataUpdated({"t": 4}, partition_racks={"t": [B, A, B, A]}))
    assert sync_of(script) == {"m1": {"t": (1, 3)}, "m2": {"t": (0, 2)}}


def test_no_racked_member_no_racks_asked() -> None:
    script = leader(None)
    members = {m: encode_subscription(Subscription(["t"]), 3) for m in ("m1", "m2")}
    leader_join(script, members)
    ask = script.take(RequestMetadata)
    assert not ask.racks
    script.feed(MetadataUpdated({"t": 4}))
    assert sync_of(script) == {"m1": {"t": (0, 1)}, "m2": {"t": (2, 3)}}


def test_the_leader_rejoins_when_the_racks_of_its_partitions_change() -> None:
    """Java's leader rejoins when a partition's replica racks change (KAFKA-14867: its
    metadata snapshot holds them); the same counts with the same racks, or an answer without
    racks, change nothing."""
    script = leader("a")
    members = {
        "m1": encode_subscription(Subscription(["t"], rack_id="a"), 3),
        "m2": encode_subscription(Subscription(["t"], rack_id="b"), 3),
    }
    leader_join(script, members)
    script.take(RequestMetadata)
    script.feed(MetadataUpdated({"t": 4}, partition_racks={"t": [A, B, A, B]}))
    sync = script.take(SendSyncGroup)
    mine = dict(sync.assignments)["m1"]
    script.feed(SyncGroupCompleted(sync.token, mine))
    script.finish_callbacks()
    script.clear()
    script.feed(MetadataUpdated({"t": 4}, partition_racks={"t": [A, B, A, B]}))
    script.feed(MetadataUpdated({"t": 4}))  # not asked for racks: says nothing about them
    assert not script.has(SendJoinGroup)
    # A replica of partition 1 moved from rack b to rack a.
    script.feed(MetadataUpdated({"t": 4}, partition_racks={"t": [A, A, A, B]}))
    assert script.has(SendJoinGroup)
