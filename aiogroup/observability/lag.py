"""Consumer lag and lead, as Kafka defines them (sans-I/O: offsets in, numbers out).

One definition serves every place that reports lag, so they agree:

- a running consumer (:meth:`aiogroup.Consumer.current_lag`, the ``records-lag`` metrics): the
  end of the partition as the last Fetch answer gave it, minus the consumer's *position*, as
  Java's ``SubscriptionState.partitionLag`` (KIP-98: under ``read_committed`` the end is the
  last stable offset, not the high watermark); ``records-lead`` is the position minus the log
  start offset (KIP-223);
- a group seen from outside (what ``kafka-consumer-groups --describe`` prints, and what the
  group inspector can print with it): the log end offset (ListOffsets ``latest``) minus the
  *committed* offset, per partition, with no lag where either is unknown (:func:`group_lag`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from aiogroup.protocol.types import TopicPartition

__all__ = ["PartitionLag", "end_offset", "group_lag", "lag", "lead", "total_lag"]


def end_offset(
    high_watermark: int | None, last_stable_offset: int | None, read_committed: bool
) -> int | None:
    """Where a consumer's lag is measured to: the last stable offset under
    ``read_committed`` (records past it cannot be read yet, KIP-98), else the high watermark;
    None while unknown."""
    end = last_stable_offset if read_committed else high_watermark
    return None if end is None or end < 0 else end


def lag(end: int | None, offset: int | None) -> int | None:
    """Records between ``offset`` (a position or a committed offset) and ``end``; None when
    either is unknown (Java's ``currentLag`` is empty then, the Kafka tool prints ``-``)."""
    if end is None or offset is None or offset < 0:
        return None
    return end - offset


def lead(log_start_offset: int | None, position: int | None) -> int | None:
    """Records between the start of the log and ``position`` (KIP-223's ``records-lead``): how
    close the consumer is to losing records to retention; None when either is unknown."""
    if log_start_offset is None or log_start_offset < 0 or position is None:
        return None
    return position - log_start_offset


@dataclass(frozen=True, slots=True)
class PartitionLag:
    """One partition of a group's lag, as ``kafka-consumer-groups --describe`` shows it."""

    partition: TopicPartition
    committed: int | None
    log_end_offset: int | None
    lag: int | None


def group_lag(
    committed: Mapping[TopicPartition, int | None],
    log_end_offsets: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition] | None = None,
) -> list[PartitionLag]:
    """Each partition's committed offset, log end offset and lag, sorted (every partition of
    either mapping unless ``partitions`` names them). An inspector asks OffsetFetch for
    ``committed`` and ListOffsets (``latest``) for ``log_end_offsets``, then calls this."""
    wanted = set(committed) | set(log_end_offsets) if partitions is None else set(partitions)
    out = []
    for tp in sorted(wanted):
        offset = committed.get(tp)
        end = log_end_offsets.get(tp)
        out.append(PartitionLag(tp, offset, end, lag(end, offset)))
    return out


def total_lag(lags: Iterable[PartitionLag]) -> int | None:
    """The sum of the known lags (None if none is known)."""
    known = [entry.lag for entry in lags if entry.lag is not None]
    return sum(known) if known else None
