"""The membership machine's configuration: :class:`MemberConfig`.

Its options shared with the driver take their defaults from, and are checked by, the one table
that defines them (:mod:`aiogroup.config`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.config import GROUP_DEFAULTS, GroupConfig, check_values
from aiogroup.errors import ConfigurationError
from aiogroup.membership.selection import select_protocol

__all__ = ["MemberConfig"]


@dataclass(frozen=True, slots=True)
class MemberConfig:
    """How a member behaves. Times in milliseconds, as Kafka's configs.

    ``assignors`` in preference order; the rebalance protocol is the highest one they all
    support (see :func:`~aiogroup.membership.selection.select_protocol`).
    """

    group_id: str
    assignors: Sequence[PartitionAssignor]
    group_instance_id: str | None = GROUP_DEFAULTS.group_instance_id
    session_timeout_ms: int = GROUP_DEFAULTS.session_timeout_ms
    rebalance_timeout_ms: int = GROUP_DEFAULTS.rebalance_timeout
    heartbeat_interval_ms: int = GROUP_DEFAULTS.heartbeat_interval_ms
    retry_backoff_ms: int = GROUP_DEFAULTS.retry_backoff_ms
    #: Cap of the exponential backoff between metadata refreshes while a subscribed topic is
    #: missing (KIP-580's ``retry.backoff.max.ms``, 1 s in Java).
    retry_backoff_max_ms: int = GROUP_DEFAULTS.retry_backoff_max_ms
    enable_auto_commit: bool = True
    rack_id: str | None = GROUP_DEFAULTS.rack_id
    protocol_type: str = "consumer"
    subscription_version: int = 3

    def __post_init__(self) -> None:
        if not self.group_id:
            raise ConfigurationError("group_id must not be empty")
        # The options shared with the driver are checked by the one table that defines them.
        check_values({f: getattr(self, f) for f in _SHARED_OPTIONS})
        if not 0 <= self.subscription_version <= 3:
            raise ConfigurationError("subscription_version must be 0..3")
        select_protocol(self.assignors)  # no common rebalance protocol: refuse now

    @classmethod
    def of(
        cls,
        config: GroupConfig,
        *,
        group_id: str,
        assignors: Sequence[PartitionAssignor],
        enable_auto_commit: bool,
    ) -> MemberConfig:
        """The machine's configuration from a driver's (already checked) options."""
        return cls(
            group_id=group_id,
            assignors=assignors,
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout,
            heartbeat_interval_ms=config.heartbeat_interval_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms,
            enable_auto_commit=enable_auto_commit,
            rack_id=config.rack_id,
        )


_SHARED_OPTIONS = (
    "group_instance_id",
    "session_timeout_ms",
    "rebalance_timeout_ms",
    "heartbeat_interval_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "rack_id",
)
