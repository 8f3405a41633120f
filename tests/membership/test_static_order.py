"""KIP-345: an aiogroup leader orders static members by their ``group_instance_id`` for range
and roundrobin, as Java's leader does. The instance id comes from the JoinGroup answer (a
member's metadata does not carry it); the leader used to drop it and ordered by member id."""

from __future__ import annotations

import pytest

from aiogroup.assignors.range import RangeAssignor
from aiogroup.assignors.roundrobin import RoundRobinAssignor
from aiogroup.membership.actions import RequestMetadata, SendJoinGroup, SendSyncGroup
from aiogroup.membership.events import JoinGroupCompleted, MetadataUpdated
from aiogroup.membership.machine import MemberConfig, MembershipMachine
from aiogroup.protocol import Subscription, decode_assignment, encode_subscription
from aiogroup.protocol.types import JoinGroupMember

from .helpers import Script


@pytest.mark.parametrize("assignor", [RangeAssignor, RoundRobinAssignor])
def test_the_leader_orders_static_members_by_instance_id(assignor: type) -> None:
    m = MembershipMachine(
        MemberConfig(group_id="g", assignors=[assignor()], group_instance_id="i-b",
                     enable_auto_commit=False)
    )  # fmt: skip
    script = Script(m)
    script.start()
    join = script.take(SendJoinGroup)
    metadata = encode_subscription(Subscription(["t"]))
    # Member ids sort one way (m1 < m2), instance ids the other (i-a < i-b).
    members = (
        JoinGroupMember("m1", metadata, group_instance_id="i-b"),
        JoinGroupMember("m2", metadata, group_instance_id="i-a"),
    )
    script.feed(JoinGroupCompleted(join.token, 1, "m1", "m1", join.protocols[0][0],
                                   members=members))  # fmt: skip
    if script.has(RequestMetadata):
        wanted = script.take(RequestMetadata)
        assert wanted.topics is not None and "t" in wanted.topics
        script.feed(MetadataUpdated({"t": 2}))
    sync = script.take(SendSyncGroup)
    got = {member: decode_assignment(data).partitions for member, data in sync.assignments}
    assert dict(got["m2"]) == {"t": (0,)}, got  # i-a first: Java's order
    assert dict(got["m1"]) == {"t": (1,)}, got
