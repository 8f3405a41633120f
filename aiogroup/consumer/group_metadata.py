"""``Consumer.group_metadata()``: who the consumer is in its group, for a transaction (KIP-447).

A transactional producer commits a consumer's offsets inside its transaction
(``send_offsets_to_transaction``). With the consumer's generation, member id and instance id in
the TxnOffsetCommit (v3+), the group coordinator refuses the commit of a member that is no
longer in the group (a zombie: paused past its session, its partitions moved), so its
transaction aborts instead of committing output for records another member processes too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiogroup.client.member import GroupMember

__all__ = ["ConsumerGroupMetadata", "group_metadata_of"]


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """Java's ``ConsumerGroupMetadata``: the group, the generation (under the KIP-848 consumer
    protocol, the member epoch), the member id and the static instance id (None: dynamic).
    Outside a generation, ``generation_id`` is -1 and ``member_id`` is ""."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def group_metadata_of(member: GroupMember) -> ConsumerGroupMetadata:
    """The metadata of ``member`` now."""
    return ConsumerGroupMetadata(
        group_id=member.group_id,
        generation_id=member.generation_id,
        member_id=member.member_id,
        group_instance_id=member.group_instance_id,
    )
