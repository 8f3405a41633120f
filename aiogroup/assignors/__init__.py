"""Partition assignors: range, roundrobin, sticky (KIP-341), cooperative-sticky (KIP-429).

Write your own by subclassing :class:`PartitionAssignor`; look built-ins up by protocol name
with :func:`get_assignor`.

Names are imported lazily (PEP 562), so importing one module of the package loads only that module.
"""

from typing import TYPE_CHECKING

from aiogroup.lazy import lazy_attributes

if TYPE_CHECKING:
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

_WHERE = {
    "GroupMetadata": "aiogroup.assignors.base",
    "PartitionAssignor": "aiogroup.assignors.base",
    "RebalanceProtocol": "aiogroup.assignors.base",
    "CooperativeStickyAssignor": "aiogroup.assignors.cooperative_sticky",
    "RangeAssignor": "aiogroup.assignors.range",
    "BUILTIN_ASSIGNORS": "aiogroup.assignors.registry",
    "UnknownAssignorError": "aiogroup.assignors.registry",
    "available_assignors": "aiogroup.assignors.registry",
    "get_assignor": "aiogroup.assignors.registry",
    "register_assignor": "aiogroup.assignors.registry",
    "unregister_assignor": "aiogroup.assignors.registry",
    "RoundRobinAssignor": "aiogroup.assignors.roundrobin",
    "StickyAssignor": "aiogroup.assignors.sticky",
}

__getattr__, __dir__ = lazy_attributes(__name__, _WHERE)
