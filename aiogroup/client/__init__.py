"""The asyncio side: a group member against a real broker.

- :class:`GroupMember`: join, leave, the current assignment, rebalance outcomes, commits.
- :class:`Transport`: the group coordinator's requests over aiokafka's connections.

Names are imported lazily (PEP 562), so importing one module of the package loads only that module.
"""

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
    from aiogroup.client.member import GroupMember, MemberClosedError, RebalanceOutcome
    from aiogroup.client.transport import CoordinatorUnreachableError, Transport


__all__ = [
    "CoordinatorUnreachableError",
    "GroupMember",
    "MemberClosedError",
    "RebalanceOutcome",
    "Transport",
]

_WHERE = {
    "GroupMember": "aiogroup.client.member",
    "MemberClosedError": "aiogroup.client.member",
    "RebalanceOutcome": "aiogroup.client.member",
    "CoordinatorUnreachableError": "aiogroup.client.transport",
    "Transport": "aiogroup.client.transport",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
