"""group_protocol="consumer" refused where it cannot run, before anything connects."""

from __future__ import annotations

import re

import pytest

from aiogroup import Consumer, GroupMember
from aiogroup.client.member import new_member_id
from aiogroup.errors import ConfigurationError
from aiogroup.membership.consumer_machine import ConsumerProtocolMachine
from aiogroup.membership.machine import MembershipMachine


async def test_the_protocol_chooses_the_machine_once() -> None:
    classic = GroupMember("127.0.0.1:9", "g", topics=["t"])
    assert isinstance(classic._machine, MembershipMachine)
    assert classic.group_protocol == "classic"
    member = GroupMember(
        "127.0.0.1:9", "g", topics=["t"], group_protocol="consumer", group_remote_assignor="range"
    )
    assert isinstance(member._machine, ConsumerProtocolMachine)
    assert member.protocol_name == "range" and member.member_id  # KIP-1082: known at once
    c = Consumer("127.0.0.1:9", "g", topics=["t"], group_protocol="consumer")
    assert c.config.group_protocol == "consumer"
    assert c.member.member_id != member.member_id


def test_member_ids_are_kafka_uuids() -> None:
    ids = {new_member_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(len(i) == 22 and not i.startswith("-") and re.fullmatch(r"[\w-]+", i) for i in ids)


@pytest.mark.parametrize("cls", [GroupMember, Consumer])
def test_assignors_under_the_consumer_protocol_name_the_remote_assignor(cls: type) -> None:
    with pytest.raises(ConfigurationError, match="group_remote_assignor"):
        cls("127.0.0.1:9", "g", topics=["t"], assignors=["range"], group_protocol="consumer")


@pytest.mark.parametrize("cls", [GroupMember, Consumer])
async def test_a_pattern_re2_reads_otherwise_is_refused(cls: type) -> None:
    with pytest.raises(ConfigurationError, match="backreference"):
        cls("127.0.0.1:9", "g", pattern=r"(a)\1", group_protocol="consumer")
    cls("127.0.0.1:9", "g", pattern=r"(a)\1")  # the classic protocol matches it itself


def test_a_remote_assignor_needs_the_consumer_protocol() -> None:
    with pytest.raises(ConfigurationError, match="group_protocol='consumer'"):
        GroupMember("127.0.0.1:9", "g", topics=["t"], group_remote_assignor="uniform")
    with pytest.raises(ConfigurationError, match="one of 'uniform', 'range'"):
        GroupMember("127.0.0.1:9", "g", group_protocol="consumer", group_remote_assignor="x")
