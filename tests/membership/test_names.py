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
    from aiogroup.client.machines import make_machine
    from aiogroup.config import GroupConfig
    from aiogroup.observability.metrics import NullMetrics

    driver: type[object] = aiogroup.client.GroupMember
    assert driver.__name__ == "GroupMember" and driver is not MembershipMachine
    machine = make_machine(GroupConfig(), "g", None, enable_auto_commit=False,
                           metrics=NullMetrics())  # fmt: skip
    assert type(machine) is MembershipMachine


def test_member_config_keeps_its_homes() -> None:
    from aiogroup.membership.config import MemberConfig

    assert aiogroup.membership.MemberConfig is MemberConfig
    assert aiogroup.membership.machine.MemberConfig is MemberConfig
