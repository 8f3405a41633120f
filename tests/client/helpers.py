"""Helpers shared by the client tests that run members on a broker."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypedDict

from aiogroup.client import GroupMember


class Timing(TypedDict):
    """A member's session and heartbeat options, to pass as ``**FAST``."""

    session_timeout_ms: int
    heartbeat_interval_ms: int


#: Short sessions and heartbeats: a member notices a rebalance within a fraction of a second.
FAST = Timing(session_timeout_ms=6_000, heartbeat_interval_ms=300)


async def until(member: GroupMember, condition: Callable[[], bool], timeout: float = 30) -> None:
    """Wait until ``condition()`` holds, re-checked at each change the member reports."""
    async with asyncio.timeout(timeout):
        while True:
            change = member.changed()  # taken before the check, so no change is missed
            if condition():
                return
            await change
