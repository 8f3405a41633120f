"""Partition assignors: range, roundrobin, sticky (KIP-341), cooperative-sticky (KIP-429).

Write your own by subclassing :class:`PartitionAssignor`; look built-ins up by protocol name
with :func:`get_assignor`.
"""

from aiogroup.assignors.base import GroupMetadata, PartitionAssignor, RebalanceProtocol
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.range import RangeAssignor
from aiogroup.assignors.registry import (
    BUILTIN_ASSIGNORS,
    UnknownAssignorError,
    available_assignors,
    get_assignor,
    register_assignor,
    unregister_assignor,
)
from aiogroup.assignors.roundrobin import RoundRobinAssignor
from aiogroup.assignors.sticky import StickyAssignor

__all__ = [
    "BUILTIN_ASSIGNORS",
    "CooperativeStickyAssignor",
    "GroupMetadata",
    "PartitionAssignor",
    "RangeAssignor",
    "RebalanceProtocol",
    "RoundRobinAssignor",
    "StickyAssignor",
    "UnknownAssignorError",
    "available_assignors",
    "get_assignor",
    "register_assignor",
    "unregister_assignor",
]
