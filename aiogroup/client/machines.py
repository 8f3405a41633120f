"""The membership machine a group member runs: the classic protocol's (KIP-429) or the consumer
protocol's (KIP-848), chosen once from the member's options; and what either refuses before
anything connects."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Sequence

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.config import GroupConfig
from aiogroup.errors import ConfigurationError
from aiogroup.membership.interface import Machine
from aiogroup.membership.machine import MemberConfig, MembershipMachine
from aiogroup.membership.regex import to_re2
from aiogroup.observability.metrics import MetricsSink

__all__ = [
    "DEFAULT_ASSIGNORS",
    "check_subscription",
    "make_machine",
    "new_member_id",
    "resolve_assignor",
]

#: The assignors of a classic member when none are given (the consumer protocol has none:
#: the broker assigns, see ``group_remote_assignor``).
DEFAULT_ASSIGNORS: tuple[str, ...] = ("cooperative-sticky",)


def new_member_id() -> str:
    """A member id for KIP-848's ConsumerGroupHeartbeat v1, which the client generates
    (KIP-1082): 16 random bytes written as Kafka writes a Uuid (URL-safe base64, unpadded)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):  # as Kafka's Uuid.randomUuid, never a leading dash
            return text


def check_subscription(
    config: GroupConfig,
    assignors: Sequence[PartitionAssignor | str] | None,
    pattern: str | re.Pattern[str] | None,
) -> None:
    """Refuse what the group protocol cannot run, before anything connects: assignors under
    the consumer protocol (the broker assigns), a pattern RE2/J reads otherwise than Python."""
    if config.group_protocol != "consumer":
        return
    if assignors is not None:
        raise ConfigurationError(
            "assignors= chooses the client-side assignors of the classic protocol; with "
            "group_protocol='consumer' the broker assigns: choose its assignor with "
            "group_remote_assignor='uniform' or 'range' (None: the broker's default)"
        )
    if pattern is not None:
        to_re2(pattern)


def resolve_assignor(assignor: PartitionAssignor | str) -> PartitionAssignor:
    """An assignor instance, or the registered assignor of that protocol name."""
    if isinstance(assignor, PartitionAssignor):
        return assignor
    from aiogroup.assignors.registry import get_assignor

    return get_assignor(assignor)


def make_machine(
    config: GroupConfig,
    group_id: str,
    assignors: Sequence[PartitionAssignor | str] | None,
    *,
    enable_auto_commit: bool,
    metrics: MetricsSink,
) -> Machine:
    """The machine of ``config.group_protocol`` (the one place it is chosen)."""
    if config.group_protocol == "consumer":
        # KIP-848's machine (and its messages) load only for a member that speaks it.
        from aiogroup.membership.consumer_machine import (
            ConsumerMemberConfig,
            ConsumerProtocolMachine,
        )

        return ConsumerProtocolMachine(
            ConsumerMemberConfig.of(
                config,
                group_id=group_id,
                member_id=new_member_id(),  # KIP-1082: the client's, for its whole life
                enable_auto_commit=enable_auto_commit,
            ),
            metrics=metrics,
        )
    chosen = DEFAULT_ASSIGNORS if assignors is None else assignors
    return MembershipMachine(
        MemberConfig.of(
            config,
            group_id=group_id,
            assignors=[resolve_assignor(a) for a in chosen],
            enable_auto_commit=enable_auto_commit,
        ),
        metrics=metrics,
    )
