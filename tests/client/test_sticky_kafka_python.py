"""An aiogroup ``sticky`` leader with a real kafka-python 3 ``sticky`` member (issue 16).

kafka-python writes its previous assignment after a 2-byte version; a leader that cannot read
it treats the member as owning nothing, and the member's partitions move for no reason. Here a
third member joins a group of two that own three partitions each: balance needs exactly two
moves (one from each owner to the newcomer), and the kafka-python member keeps two of its own.
"""

from __future__ import annotations

import asyncio

import pytest

from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.client import GroupMember
from aiogroup.testing import ThreadedBroker
from tests.client.helpers import FAST, until
from tests.data.record_kafka_python_sticky import KafkaPythonMember

pytestmark = [pytest.mark.peers, pytest.mark.timeout(120)]

TOPIC = "orders"


def owned(member: GroupMember) -> frozenset[tuple[str, int]]:
    return frozenset((tp.topic, tp.partition) for tp in member.assignment)


async def test_the_leader_keeps_what_the_kafka_python_member_owned(
    threaded_broker: ThreadedBroker,
) -> None:
    threaded_broker.create_topic(TOPIC, 6)
    bootstrap = threaded_broker.bootstrap
    leader_assignor = StickyAssignor()
    leader = GroupMember(bootstrap, "g", topics=[TOPIC], assignors=[leader_assignor], **FAST)
    newcomer = GroupMember(bootstrap, "g", topics=[TOPIC], assignors=["sticky"], **FAST)
    async with leader:
        await leader.wait_for_assignment(timeout=30)
        kafka_python = KafkaPythonMember(bootstrap, "g", [TOPIC], "kp")
        try:
            before = await asyncio.to_thread(kafka_python.wait_owned, lambda o: len(o) == 3)
            await until(leader, lambda: len(leader.assignment) == 3)
            assert leader.is_leader
            leader_before = owned(leader)

            async with newcomer:
                after = await asyncio.to_thread(kafka_python.wait_owned, lambda o: len(o) == 2)
                await until(leader, lambda: len(leader.assignment) == 2)
                await until(newcomer, lambda: len(newcomer.assignment) == 2)
                assert leader.is_leader
                assert after <= before, "the kafka-python member lost partitions it owned"
                assert owned(leader) <= leader_before
                # Only the newcomer's two partitions moved.
                assert leader_assignor.last_moved == 2
        finally:
            await asyncio.to_thread(kafka_python.close)
