"""Rebalance protocol selection (KIP-429 "Compatibility and Upgrade Path")."""

from __future__ import annotations

from collections.abc import Sequence

from aiogroup.assignors.base import PartitionAssignor, RebalanceProtocol
from aiogroup.errors import ConfigurationError

__all__ = ["select_protocol"]


def select_protocol(assignors: Sequence[PartitionAssignor]) -> RebalanceProtocol:
    """Return the rebalance protocol a member configured with ``assignors`` runs.

    Only the protocols every assignor supports qualify, and the highest id wins (as Java's
    ConsumerCoordinator does): ``[range, cooperative-sticky]`` runs EAGER (the first bounce of
    the KIP-429 upgrade), ``[cooperative-sticky]`` runs COOPERATIVE. No assignor, duplicate
    names, or no common protocol is a :class:`ConfigurationError`.
    """
    if not assignors:
        raise ConfigurationError("at least one assignor is required")
    names = [a.name for a in assignors]
    if len(set(names)) != len(names):
        raise ConfigurationError(f"assignor names must be unique, got {names}")
    common: set[RebalanceProtocol] | None = None
    for assignor in assignors:
        supported = {RebalanceProtocol(p) for p in assignor.supported_protocols}
        common = supported if common is None else common & supported
    if not common:
        raise ConfigurationError(
            f"assignors {names} have no rebalance protocol in common "
            "(KIP-429: every assignor must support the protocol the member runs)"
        )
    return max(common)
