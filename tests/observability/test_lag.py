"""Lag and lead as Kafka defines them: one definition for the consumer and for a group seen
from outside."""

from __future__ import annotations

from aiogroup.observability.lag import PartitionLag, end_offset, group_lag, lag, lead, total_lag
from aiogroup.protocol.types import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))


def test_the_end_is_the_last_stable_offset_under_read_committed() -> None:
    assert end_offset(100, 90, read_committed=False) == 100
    assert end_offset(100, 90, read_committed=True) == 90
    assert end_offset(None, 90, read_committed=False) is None
    assert end_offset(100, None, read_committed=True) is None
    assert end_offset(-1, -1, read_committed=False) is None  # Kafka's "unknown"


def test_lag_and_lead() -> None:
    assert lag(100, 60) == 40
    assert lag(100, 100) == 0
    assert lag(None, 60) is None and lag(100, None) is None
    assert lag(100, -1) is None  # no committed offset (OffsetFetch's -1)
    assert lead(20, 60) == 40
    assert lead(None, 60) is None and lead(-1, 60) is None and lead(20, None) is None


def test_a_group_as_kafka_consumer_groups_describes_it() -> None:
    rows = group_lag({A: 10, B: None}, {A: 25, B: 7, C: 3})
    assert rows == [
        PartitionLag(A, 10, 25, 15),
        PartitionLag(B, None, 7, None),  # nothing committed: LAG "-"
        PartitionLag(C, None, 3, None),
    ]
    assert total_lag(rows) == 15
    assert group_lag({A: 10}, {A: 25, B: 7}, partitions=[B]) == [PartitionLag(B, None, 7, None)]
    assert total_lag(group_lag({A: None}, {})) is None
