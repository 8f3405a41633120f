"""A consumer group's lag seen from outside, as ``kafka-consumer-groups --describe`` shows it:
per partition the committed offset, the log end offset and the lag, per member and in total
(``aiogroup group describe/watch --lag``).

The numbers are :mod:`aiogroup.observability.lag`'s (one definition for every place that
reports lag); :class:`GroupLag` and :func:`group_lag_of` are sans-I/O, :func:`read_group_lag`
asks the brokers: OffsetFetch for all the group's committed offsets (as the tool: all topics,
``require_stable`` false) and ListOffsets ``latest`` (read_uncommitted) to each partition's
leader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiogroup.errors import error_for_code
from aiogroup.observability.lag import PartitionLag, group_lag, total_lag
from aiogroup.protocol.types import TopicPartition

if TYPE_CHECKING:
    from aiogroup.client.transport import Transport
    from aiogroup.inspector import MemberDescription

__all__ = ["GroupLag", "group_lag_of", "read_group_lag"]

#: ListOffsets' timestamp for the log end offset (Kafka's ``ListOffsetsRequest.LATEST_TIMESTAMP``).
LATEST_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class GroupLag:
    """A group's lag from outside, as ``kafka-consumer-groups --describe`` shows it: per
    partition the committed offset, the log end offset and their difference
    (:func:`aiogroup.observability.lag.group_lag`), and who is assigned it.

    ``partitions`` holds every partition a member is assigned or the group has an offset
    committed for (the tool's rows), sorted; ``owners`` maps the assigned ones to their member
    id. A lag is None where the committed offset or the log end offset is unknown (the tool
    prints ``-``).
    """

    partitions: tuple[PartitionLag, ...]
    owners: Mapping[TopicPartition, str] = field(default_factory=dict)

    @property
    def total(self) -> int | None:
        """The group's lag: the sum of the known partition lags (None: none known)."""
        return total_lag(self.partitions)

    def of_member(self, member_id: str) -> int | None:
        """The sum of the known lags of the partitions ``member_id`` is assigned."""
        return total_lag(p for p in self.partitions if self.owners.get(p.partition) == member_id)

    def unowned(self) -> tuple[PartitionLag, ...]:
        """Partitions with a committed offset that no member is assigned."""
        return tuple(p for p in self.partitions if p.partition not in self.owners)


def group_lag_of(
    members: Sequence[MemberDescription],
    committed: Mapping[TopicPartition, int | None],
    log_end_offsets: Mapping[TopicPartition, int],
) -> GroupLag:
    """The lag of a group whose ``members`` are described, from its committed offsets
    (OffsetFetch; -1 or None: nothing committed) and the log end offsets (ListOffsets
    ``latest``). Pure: no I/O."""
    owners = {tp: m.member_id for m in members for tp in (m.assignment or ())}
    known = {tp: o for tp, o in committed.items() if o is not None and o >= 0}
    rows = group_lag(known, log_end_offsets, set(owners) | set(known))
    return GroupLag(tuple(rows), owners)


async def read_group_lag(
    transport: Transport, group_id: str, members: Sequence[MemberDescription]
) -> GroupLag:
    """The lag of ``group_id`` whose ``members`` were just described: every committed offset
    of the group, and the log end offset of each partition assigned or committed. A partition
    whose leader is unknown or answers an error has no log end offset (and no lag) this time."""
    committed = await committed_offsets(transport, group_id)
    wanted = {tp for m in members for tp in (m.assignment or ())} | set(committed)
    ends = await log_end_offsets(transport, wanted)
    return group_lag_of(members, committed, ends)


async def committed_offsets(
    transport: Transport, group_id: str
) -> dict[TopicPartition, int | None]:
    """Every offset ``group_id`` has committed (OffsetFetch v2-v7 with no topics: all; None
    where the answer says nothing is committed)."""
    from kafka.protocol.consumer.group import OffsetFetchRequest, OffsetFetchResponse

    from aiogroup.client.transport import COORDINATOR_ERRORS, Request

    def build(version: int) -> Any:  # v2-v7: null topics ask for all
        return OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False)

    request = Request(
        "OffsetFetch", OffsetFetchRequest, OffsetFetchResponse, build, versions=(2, 7)
    )
    r = await transport.send_to_coordinator(request)
    code = int(getattr(r, "error_code", 0) or 0)
    if code:
        if code in COORDINATOR_ERRORS:
            transport.coordinator_dead()
        raise error_for_code(code, f"OffsetFetch {group_id!r} failed")
    out: dict[TopicPartition, int | None] = {}
    for t in r.topics or ():
        for p in t.partitions or ():
            tp = TopicPartition(t.name, p.partition_index)
            if p.error_code:
                raise error_for_code(int(p.error_code), f"OffsetFetch {group_id!r} {tp}")
            offset = int(p.committed_offset)
            out[tp] = offset if offset >= 0 else None
    return out


async def log_end_offsets(
    transport: Transport, partitions: Iterable[TopicPartition]
) -> dict[TopicPartition, int]:
    """The log end offset (high watermark) of each of ``partitions``, from its leader;
    partitions whose leader is unknown or answers an error are left out."""
    from aiogroup.consumer.wire import DataPlane

    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    plane = DataPlane(transport)
    view = await plane.metadata({tp.topic for tp in wanted})
    by_leader: dict[int, dict[TopicPartition, int]] = {}
    for tp in wanted:
        if tp in view.leaders:
            by_leader.setdefault(view.leaders[tp][0], {})[tp] = LATEST_TIMESTAMP
    answers = await asyncio.gather(
        *(plane.list_offsets(node, timestamps) for node, timestamps in sorted(by_leader.items()))
    )
    return {tp: listed.offset for offsets, _ in answers for tp, listed in offsets.items()}
