"""Lag as Kafka's own tool reports it: ``kafka-consumer-groups --describe`` of live Kafka 4.1.1
against ``consumer.current_lag``, the ``records-lag`` metrics and the group lag of
:mod:`aiogroup.observability.lag`, for the same group at the same moment (the positions just
committed, no record produced since, so the high watermark of the last Fetch is the log end
offset the tool lists)."""

from __future__ import annotations

import asyncio
import re

import pytest

from aiogroup import Consumer
from aiogroup.observability.lag import group_lag, total_lag
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.launchers.kafka import KafkaBroker

from .helpers import produce, read_until, unique

pytestmark = [pytest.mark.kafka4, pytest.mark.timeout(300)]

#: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s", re.M)


def described(out: str, group: str) -> dict[int, tuple[int, int, int]]:
    """``{partition: (current offset, log end offset, lag)}`` from the tool's table."""
    return {
        int(p): (int(cur), int(end), int(lag))
        for g, _, p, cur, end, lag in ROW.findall(out)
        if g == group
    }


async def test_lag_is_what_kafka_consumer_groups_says(apache_kafka4: KafkaBroker) -> None:
    kafka = apache_kafka4
    topic, group = unique("lag"), unique("g")
    kafka.create_topic(topic, 3)
    await produce(kafka.bootstrap, topic, {0: 30, 1: 50, 2: 70})
    tps = [TopicPartition(topic, p) for p in range(3)]
    async with Consumer(
        kafka.bootstrap, group, topics=[topic], auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=10_000, heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
    ) as c:  # fmt: skip
        # Some records read, and every partition fetched (its high watermark known).
        records = await read_until(
            c,
            lambda rs: len(rs) >= 45 and all(c.highwater(tp) is not None for tp in tps),
            max_records=15,
        )
        await c.commit()  # committed == position, for every partition
        positions = {tp: await c.position(tp) for tp in tps}
        ours = {tp: c.current_lag(tp) for tp in tps}
        metrics = c.partition_metrics
        out = await asyncio.to_thread(kafka.consumer_groups, "--describe", "--group", group)
        assert ours == {tp: c.current_lag(tp) for tp in tps}  # nothing moved meanwhile
    tool = described(out, group)
    assert set(tool) == {0, 1, 2}, out
    assert {p: end for p, (_, end, _) in tool.items()} == {0: 30, 1: 50, 2: 70}
    for tp in tps:
        current, _, lag = tool[tp.partition]
        assert current == positions[tp]
        assert ours[tp] == lag, out  # the consumer's lag is the tool's
    assert sum(tool[p][2] for p in range(3)) == 150 - len(records)
    # records-lag, recorded when the application was given records: the same numbers
    for tp, values in metrics.items():
        assert values["records-lag"] == tool[tp.partition][2]
    # The group's lag from committed offsets and log end offsets, as an inspector computes it
    rows = group_lag(
        {tp: tool[tp.partition][0] for tp in tps}, {tp: tool[tp.partition][1] for tp in tps}
    )
    assert [r.lag for r in rows] == [tool[p][2] for p in range(3)]
    assert total_lag(rows) == sum(v for v in ours.values() if v is not None)
