"""``aiogroup group describe/watch --lag``: a group's lag seen from outside, as
``kafka-consumer-groups --describe`` computes it (:mod:`aiogroup.observability.lag`): per
partition the committed offset, the log end offset and the lag, per member the total of its
partitions, the group's total. Without a broker: the numbers from offsets, the text and JSON
forms, a watch that prints again when a number moves. On Kafka 4.1.1 (both protocols): the same
numbers as Kafka's own tool prints for the same group at the same moment; on the embedded
broker: the numbers the test committed and produced."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re
import sys
import uuid
from collections.abc import Iterator, Sequence

import pytest

from aiogroup import Consumer
from aiogroup.inspector import (
    GroupDescription,
    RawMember,
    assess,
    describe_group,
    group_lag_of,
    parse_group,
)
from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.tools.group import render_describe, snapshot_json, watch
from tests.conformance.peers import create_topic
from tests.consumer.helpers import produce

TOPIC = "orders"


def tp(p: int, topic: str = TOPIC) -> TopicPartition:
    return TopicPartition(topic, p)


def member(name: str, assigned: Sequence[int]) -> RawMember:
    return RawMember(
        member_id=f"{name}-id", client_id=name, client_host="/127.0.0.1",
        metadata=encode_subscription(Subscription([TOPIC]), 3),
        assignment=encode_assignment(Assignment({TOPIC: tuple(assigned)})),
    )  # fmt: skip


def group(committed: dict[TopicPartition, int | None], ends: dict[TopicPartition, int],
          ) -> GroupDescription:  # fmt: skip
    described = parse_group("g", "Stable", "consumer", "range",
                            [member("a", [0, 1]), member("b", [2, 3])],
                            partitions={TOPIC: 4}, api_version=5)  # fmt: skip
    return dataclasses.replace(described, lag=group_lag_of(described.members, committed, ends))


ENDS = {tp(0): 100, tp(1): 50, tp(2): 70, tp(3): 10, tp(0, "old"): 9}
COMMITTED: dict[TopicPartition, int | None] = {tp(0): 40, tp(1): 50, tp(2): None, tp(3): 4,
                                               tp(0, "old"): 7}  # fmt: skip


# --------------------------------------------------------------------------- without a broker


def test_the_numbers_are_kafkas_per_partition_per_member_and_in_total() -> None:
    lag = group(COMMITTED, ENDS).lag
    assert lag is not None
    rows = {p.partition: (p.committed, p.log_end_offset, p.lag) for p in lag.partitions}
    assert rows == {
        tp(0): (40, 100, 60), tp(1): (50, 50, 0),
        tp(2): (None, 70, None),  # assigned, nothing committed: '-' as the tool prints
        tp(3): (4, 10, 6),
        tp(0, "old"): (7, 9, 2),  # committed, nobody assigned (the tool's row without consumer)
    }  # fmt: skip
    assert lag.of_member("a-id") == 60 and lag.of_member("b-id") == 6
    assert lag.total == 68 and [p.partition for p in lag.unowned()] == [tp(0, "old")]
    assert lag.owners[tp(2)] == "b-id" and tp(0, "old") not in lag.owners
    # -1 from OffsetFetch is "nothing committed"; an unknown log end offset is no lag either
    other = group_lag_of(group({}, {}).members, {tp(0): -1, tp(1): 3}, {tp(0): 5})
    assert [(p.committed, p.log_end_offset, p.lag) for p in other.partitions] == [
        (None, 5, None),
        (3, None, None),
        (None, None, None),
        (None, None, None),
    ]
    assert other.total is None and other.of_member("a-id") is None


def test_describe_prints_the_lag_as_kafka_consumer_groups_does() -> None:
    g = group(COMMITTED, ENDS)
    text = render_describe(g, assess(g))
    assert "  lag          68 in total; a 60, b 6; 1 committed partition(s) no member is " \
           "assigned" in text  # fmt: skip
    table = text[text.index("TOPIC   PARTITION") :].splitlines()
    cells = [line.split() for line in table]
    assert cells[0] == ["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                        "CLIENT", "ID", "MEMBER", "ID"]  # fmt: skip
    assert cells[1:] == [
        ["old", "0", "7", "9", "2", "-", "-"],
        ["orders", "0", "40", "100", "60", "a", "a-id"],
        ["orders", "1", "50", "50", "0", "a", "a-id"],
        ["orders", "2", "-", "70", "-", "b", "b-id"],
        ["orders", "3", "4", "10", "6", "b", "b-id"],
    ]
    members = text[text.index("CLIENT ID  MEMBER ID") :].splitlines()[:3]
    assert members[0].split()[-1] == "LAG"
    assert [line.split()[-1] for line in members[1:]] == ["60", "6"]


def test_without_lag_nothing_is_said_of_it() -> None:
    g = parse_group("g", "Stable", "consumer", "range", [member("a", [0, 1])],
                    partitions={TOPIC: 2}, api_version=5)  # fmt: skip
    text = render_describe(g, assess(g))
    assert "lag" not in text.lower() and "LOG-END-OFFSET" not in text
    js = snapshot_json(g, assess(g))
    assert js["lag"] is None and js["members"][0]["lag"] is None


def test_json_carries_the_same_numbers() -> None:
    g = group(COMMITTED, ENDS)
    js = json.loads(json.dumps(snapshot_json(g, assess(g))))
    assert js["lag"]["total"] == 68
    assert js["lag"]["members"] == {"a-id": 60, "b-id": 6}
    assert {m["client_id"]: m["lag"] for m in js["members"]} == {"a": 60, "b": 6}
    assert js["lag"]["partitions"][0] == {
        "topic": "old",
        "partition": 0,
        "committed_offset": 7,
        "log_end_offset": 9,
        "lag": 2,
        "member_id": None,
    }
    assert js["lag"]["partitions"][3] == {
        "topic": TOPIC, "partition": 2, "committed_offset": None, "log_end_offset": 70,
        "lag": None, "member_id": "b-id"}  # fmt: skip


class LagReplay:
    """An inspector answering snapshots from a list, asked for the lag each time; asked once
    more, the watch should have stopped."""

    def __init__(self, snapshots: Sequence[GroupDescription]) -> None:
        self.snapshots: Iterator[GroupDescription] = iter(snapshots)
        self.asked: list[bool] = []

    async def describe(self, *, with_lag: bool = False) -> GroupDescription:
        self.asked.append(with_lag)
        snapshot = next(self.snapshots, None)
        if snapshot is None:
            raise AssertionError("the watch went on after the last snapshot")
        return snapshot


def _moved(n: int) -> GroupDescription:
    return group({**COMMITTED, tp(0): 40 + n}, ENDS)


def test_watch_asks_every_interval_and_prints_again_when_a_number_moves() -> None:
    snapshots = [_moved(0), _moved(0), _moved(10), _moved(10), _moved(60)]
    replay = LagReplay(snapshots)
    ticks = iter(range(100))
    out = io.StringIO()
    code = asyncio.run(watch(replay, out=out, interval=0, timeout=len(snapshots),  # type: ignore[arg-type]
                             with_lag=True, clock=lambda: float(next(ticks))))  # fmt: skip
    assert code == 1 and replay.asked == [True] * len(snapshots)
    text = out.getvalue()
    totals = re.findall(r"lag: (\d+) in total; a (\d+), b (\d+)", text)
    assert totals == [("68", "60", "6"), ("58", "50", "6"), ("8", "0", "6")]  # once per change
    assert re.findall(r"  lag (\d+)  ", text) == ["68", "58", "8"]  # in the summary line too
    assert text.count("LOG-END-OFFSET") == 3


def test_watch_json_carries_the_lag_of_each_snapshot() -> None:
    out = io.StringIO()
    ticks = iter(range(100))
    code = asyncio.run(watch(LagReplay([_moved(0), _moved(30)]), out=out, interval=0,  # type: ignore[arg-type]
                             timeout=2, as_json=True, with_lag=True,
                             clock=lambda: float(next(ticks))))  # fmt: skip
    assert code == 1
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [js["lag"]["total"] for js in lines] == [68, 38]
    assert [js["lag"]["members"]["a-id"] for js in lines] == [60, 30]


# --------------------------------------------------------------------------- on brokers

BROKERS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]
#: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
ROW = re.compile(r"^(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s", re.M)
PRODUCED = {0: 20, 1: 30, 2: 40, 3: 50}


def _setup(handle: BrokerHandle, tag: str) -> tuple[str, str]:
    topic, group_id = f"lag-{tag}", f"lag-{tag}"
    if handle.apache is not None:
        handle.apache.create_topic(topic, 4)
        handle.apache.run_tool(
            "kafka-configs", "--bootstrap-server", handle.bootstrap, "--alter",
            "--entity-type", "groups", "--entity-name", group_id, "--add-config",
            "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=300",
        )  # fmt: skip
    else:
        create_topic(handle, topic, 4)
        assert handle.embedded is not None
        handle.embedded.set_group_config(group_id, session_timeout_ms=6000,
                                         heartbeat_interval_ms=300)  # fmt: skip
    return topic, group_id


async def _cli(*args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup", "group", *args, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out
    return out.decode()


async def _split(consumers: Sequence[Consumer], group_id: str, bootstrap: str) -> None:
    """Until each consumer is assigned two partitions and the broker agrees (bounded)."""
    async with asyncio.timeout(90):
        while True:
            for c in consumers:
                await c.getmany(timeout_ms=100)
            mine = [c.assignment() for c in consumers]
            if all(len(a) == 2 for a in mine) and len(set().union(*mine)) == 4:
                d = await describe_group(bootstrap, group_id)
                if d.stable and assess(d, expected_members=len(consumers)).safe:
                    return


@pytest.mark.timeout(300)
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
async def test_the_lag_is_kafka_consumer_groups_lag(kafka_broker: BrokerHandle,
                                                    group_protocol: str) -> None:  # fmt: skip
    topic, group_id = _setup(kafka_broker, uuid.uuid4().hex[:8])
    b = kafka_broker.bootstrap
    await produce(b, topic, PRODUCED)
    consumers = [Consumer(b, group_id, topics=[topic], client_id=f"m{i}",
                          group_protocol="consumer" if group_protocol == "consumer" else "classic",
                          enable_auto_commit=False, auto_offset_reset="earliest",
                          session_timeout_ms=6000, heartbeat_interval_ms=300)
                 for i in (1, 2)]  # fmt: skip
    try:
        for c in consumers:
            await c.start()
        await _split(consumers, group_id, b)
        # Each member commits some offsets of its own; one assigned partition stays without.
        chosen = {0: 3, 1: 17, 2: 40}  # partition 3 uncommitted; partition 2 caught up
        for c in consumers:
            mine = {p.partition: p for p in c.assignment()}
            await c.commit({mine[p]: o for p, o in chosen.items() if p in mine})
        owners = {p.partition: c.member.member_id for c in consumers for p in c.assignment()}
        js = json.loads(await _cli("describe", group_id, "--bootstrap", b, "--lag", "--json"))
        text = await _cli("describe", group_id, "--bootstrap", b, "--lag")
        tool = None
        if kafka_broker.apache is not None:  # the same moment: nothing commits or produces
            tool = await asyncio.to_thread(kafka_broker.apache.consumer_groups, "--describe",
                                           "--group", group_id)  # fmt: skip
        still = json.loads(await _cli("describe", group_id, "--bootstrap", b, "--lag", "--json"))
        assert still["lag"] == js["lag"], "the group moved while it was described"
    finally:
        for c in consumers:
            await c.close()
    rows = {r["partition"]: (r["committed_offset"], r["log_end_offset"], r["lag"],
                             r["member_id"]) for r in js["lag"]["partitions"]}  # fmt: skip
    assert rows == {
        0: (3, 20, 17, owners[0]), 1: (17, 30, 13, owners[1]), 2: (40, 40, 0, owners[2]),
        3: (None, 50, None, owners[3]),
    }  # fmt: skip
    assert js["lag"]["total"] == 30
    per_member = {m: sum(v[2] or 0 for v in rows.values() if v[3] == m)
                  for m in set(owners.values())}  # fmt: skip
    assert js["lag"]["members"] == per_member
    assert {m["member_id"]: m["lag"] for m in js["members"]} == per_member
    assert "lag          30 in total" in text and "LOG-END-OFFSET" in text
    if tool is not None:
        described = {int(p): (cur, end, lag, consumer) for g, _, p, cur, end, lag, consumer
                     in ROW.findall(tool) if g == group_id}  # fmt: skip
        ours = {p: ("-" if c is None else str(c), str(e), "-" if lag is None else str(lag), m)
                for p, (c, e, lag, m) in rows.items()}  # fmt: skip
        assert described == ours, tool
