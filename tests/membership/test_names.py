"""The machine's names: MembershipMachine, and GroupMember kept as an alias for one release."""

from __future__ import annotations

import aiogroup.client
import aiogroup.membership
import aiogroup.membership.machine
from aiogroup.membership import MembershipMachine


def test_the_old_name_is_the_same_class() -> None:
    assert aiogroup.membership.GroupMember is MembershipMachine
    assert aiogroup.membership.machine.GroupMember is MembershipMachine
    assert aiogroup.membership.machine.MembershipMachine is MembershipMachine
    assert MembershipMachine.__name__ == "MembershipMachine"
    assert {"GroupMember", "MembershipMachine"} <= set(aiogroup.membership.__all__)


def test_the_driver_keeps_its_name_and_runs_the_machine() -> None:
    from aiogroup.client import member

    assert aiogroup.client.GroupMember.__name__ == "GroupMember"
    driver: type[object] = aiogroup.client.GroupMember  # to mypy, two classes are never one
    assert driver is not MembershipMachine
    assert vars(member)["_Machine"] is MembershipMachine  # the driver's private name for it


def test_member_config_keeps_its_homes() -> None:
    from aiogroup.membership.config import MemberConfig

    assert aiogroup.membership.MemberConfig is MemberConfig
    assert aiogroup.membership.machine.MemberConfig is MemberConfig
