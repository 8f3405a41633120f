"""The asyncio side: a group member against a real broker.

- :class:`GroupMember`: join, leave, the current assignment, rebalance outcomes, commits.
- :class:`Transport`: the group coordinator's requests over aiokafka's connections.
"""

from aiogroup.client.member import GroupMember, MemberClosedError, RebalanceOutcome
from aiogroup.client.transport import CoordinatorUnreachableError, Transport

__all__ = [
    "CoordinatorUnreachableError",
    "GroupMember",
    "MemberClosedError",
    "RebalanceOutcome",
    "Transport",
]
