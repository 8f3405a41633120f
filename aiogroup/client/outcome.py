"""What a group member reports of a rebalance, and where its auto-commit finds positions."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.protocol.types import TopicPartition

__all__ = ["OffsetsSource", "RebalanceOutcome"]

Partitions = frozenset[TopicPartition]


class OffsetsSource(Protocol):
    """Where auto-commit finds the consumed positions (the consumer that owns the member)."""

    def offsets_to_commit(
        self, partitions: Iterable[TopicPartition]
    ) -> Mapping[TopicPartition, int]:
        """The consumed positions of ``partitions`` that are not committed yet."""
        ...

    def offsets_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """``offsets`` were committed (any commit through this member)."""
        ...


@dataclass(frozen=True, slots=True)
class RebalanceOutcome:
    """What one completed rebalance changed for this member.

    ``assigned`` is what the ``on_partitions_assigned`` callback received (under COOPERATIVE
    only the newly added partitions, under EAGER the full assignment); ``revoked`` and ``lost``
    gather what the member gave up since the previous outcome. ``assignment`` is everything the
    member owns once the rebalance completed. ``error`` is the first exception a callback
    raised in this rebalance (also raised from the call that drives the member).
    """

    generation_id: int
    member_id: str
    protocol: RebalanceProtocol
    assigned: Partitions
    revoked: Partitions
    lost: Partitions
    assignment: Partitions
    ended: float = field(default=0.0, compare=False)
    error: BaseException | None = field(default=None, compare=False)
