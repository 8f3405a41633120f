"""Rack awareness: each member of a group gets partitions with a replica in its own rack
(KIP-881) and reads them from that replica (KIP-392), even where the leader is elsewhere.

``python examples/rack_aware.py`` starts Apache Kafka 4.1.1 on this machine (three KRaft nodes
on 127.0.0.1: node *n* is a broker in rack ``r{n-1}``, with
``replica.selector.class=RackAwareReplicaSelector``; the jars come from Maven Central once, see
:mod:`aiogroup.testing.launchers.kafka`) and stops it at the end. ``--bootstrap HOST:PORT`` (or
``AIOGROUP_RACK_BOOTSTRAP``) uses a running cluster instead: it needs brokers in three racks
(the lowest broker id of each of the first three racks, by name, is used) and that selector
for the fetch part.

It creates two topics whose replicas are spread over the racks, ``orders`` (two replicas a
partition, led from another rack than the follower's) and ``clicks`` (one replica), so that
exactly one balanced assignment gives every member only partitions of its own rack; three
``Consumer`` with ``client_rack`` r0, r1 and r2 join one group one by one (default assignor
``cooperative-sticky``; ``--assignor sticky`` prints the same); it prints what each member
got and where those partitions' replicas are, then produces 100 records a partition and prints
which brokers served each member (``consumer.node_metrics``). ``--no-client-rack`` runs the
same consumers without a rack, to compare.

docs/assignors.md prints its output; the test suite runs it and compares.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from aiogroup import Consumer, TopicPartition
from aiogroup.membership.states import MemberState

RACKS = ("r0", "r1", "r2")
SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
#: Each topic's partitions, as the racks (indices into the cluster's three) of their replicas,
#: the preferred leader first. The only balanced plan that matches every partition: r0 gets
#: orders-0 and clicks-0, r1 orders-1 and clicks-1, r2 clicks-2 and clicks-3.
LAYOUT = {"orders": [[1, 0], [2, 1]], "clicks": [[0], [1], [2], [2]]}
RECORDS = 100  # per partition


@dataclass(frozen=True)
class Broker:
    node_id: int
    rack: str

    def __str__(self) -> str:
        return f"{self.node_id} ({self.rack})"


@dataclass
class Partitions:
    """Replicas (leader first) and leader of every partition of the example's topics."""

    replicas: dict[TopicPartition, list[Broker]]
    leader: dict[TopicPartition, Broker]

    def racks(self, tp: TopicPartition) -> str:
        return " ".join(b.rack for b in self.replicas[tp])


@contextlib.asynccontextmanager
async def cluster(bootstrap: str | None) -> AsyncIterator[str]:
    """A running cluster's bootstrap, or three KRaft nodes in racks r0-r2 started here."""
    if bootstrap:
        yield bootstrap
        return
    from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker

    kafka = KafkaBroker(
        version=KAFKA4_VERSION,
        brokers=3,
        racks=list(RACKS),
        config={"replica.selector.class": SELECTOR},
    )
    await asyncio.to_thread(kafka.start)
    try:
        yield kafka.bootstrap
    finally:
        await asyncio.to_thread(kafka.stop)


async def create_topics(bootstrap: str, prefix: str) -> tuple[list[Broker], Partitions]:
    """Pick a broker in each of three racks, create the topics, wait for full ISRs."""
    layout = {prefix + topic: parts for topic, parts in LAYOUT.items()}
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        found = (await admin.describe_cluster())["brokers"]
        by_rack: dict[str, Broker] = {}
        for b in sorted(found, key=lambda b: int(b["node_id"])):
            if b["rack"] is not None:
                by_rack.setdefault(b["rack"], Broker(int(b["node_id"]), b["rack"]))
        brokers = [by_rack[rack] for rack in sorted(by_rack)[:3]]
        if len(brokers) < 3:
            raise SystemExit(f"need brokers in three racks (broker.rack), found {by_rack}")
        new = []
        for topic, parts in layout.items():
            placed = {p: [brokers[r].node_id for r in racks] for p, racks in enumerate(parts)}
            new.append(NewTopic(topic, -1, -1, replica_assignments=placed))
        answer = await admin.create_topics(new)
        for topic, code, message in answer.topic_errors:
            if code:
                raise SystemExit(f"cannot create {topic}: error {code} {message} (--prefix?)")
        async with asyncio.timeout(60):
            while True:  # until every replica is in sync (then a follower may serve reads)
                described = await admin.describe_topics(list(layout))
                if all(
                    t["error_code"] == 0
                    and len(t["partitions"]) == len(layout[t["topic"]])
                    and all(len(p["isr"]) == len(p["replicas"]) for p in t["partitions"])
                    for t in described
                ):
                    break
                await asyncio.sleep(0.2)  # polling the cluster's state
    finally:
        await admin.close()
    nodes = {b.node_id: b for b in brokers}
    replicas, leader = {}, {}
    for t in described:
        for p in t["partitions"]:
            tp = TopicPartition(t["topic"], p["partition"])
            replicas[tp] = [nodes[n] for n in p["replicas"]]
            leader[tp] = nodes[p["leader"]]
    return brokers, Partitions(replicas, leader)


class Hold:
    """A rebalance listener that pauses what its consumer is given until :meth:`release`, so
    that no record is fetched before the group has settled (the counts below are then only
    the final owners' reads)."""

    def __init__(self) -> None:
        self.consumer: Consumer | None = None
        self.holding = True

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        if self.holding and self.consumer is not None:
            self.consumer.pause(*partitions)

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        pass

    def release(self) -> None:
        self.holding = False
        if self.consumer is not None:
            self.consumer.resume(*self.consumer.assignment())


def owned(consumer: Consumer) -> set[TopicPartition]:
    return set(consumer.assignment())


def settled(consumers: Sequence[Consumer], total: int) -> bool:
    """Every member stable in one generation, every partition owned by one of them (a
    cooperative group has then also handed over what its first round withheld)."""
    if any(c.member.state is not MemberState.STABLE for c in consumers):
        return False
    if len({c.member.generation_id for c in consumers}) != 1:
        return False
    loads = [len(owned(c)) for c in consumers]
    return sum(loads) == len(set().union(*(owned(c) for c in consumers))) == total


async def join(consumers: list[Consumer], consumer: Consumer, total: int) -> None:
    """Start ``consumer`` and poll the group until the rebalance it causes has settled."""
    await consumer.start()
    consumers.append(consumer)
    async with asyncio.timeout(90):
        while not settled(consumers, total):
            await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers))


async def produce(bootstrap: str, partitions: Sequence[TopicPartition]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        sent = []
        for tp in partitions:
            for i in range(RECORDS):
                value = b"%s-%d %d" % (tp.topic.encode(), tp.partition, i)
                sent.append(await producer.send(tp.topic, value, partition=tp.partition))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def read_all(consumer: Consumer) -> int:
    want, got = RECORDS * len(owned(consumer)), 0
    async with asyncio.timeout(90):
        while got < want:
            got += sum(map(len, (await consumer.getmany(timeout_ms=200)).values()))
    return got


def label(index: int, rack: str | None) -> str:
    return f"consumer {index + 1} (" + (f"client_rack {rack})" if rack else "no client_rack)")


def show_assignment(
    consumers: Sequence[Consumer], racks: Sequence[str | None], parts: Partitions
) -> None:
    for i, (consumer, rack) in enumerate(zip(consumers, racks, strict=True)):
        mine = sorted(owned(consumer))
        local = sum(rack in parts.racks(tp).split() for tp in mine)
        listed = ", ".join(f"{tp.topic}-{tp.partition} ({parts.racks(tp)})" for tp in mine)
        where = f": {local} of {len(mine)} with a replica in {rack}" if rack else ""
        print(f"  {label(i, rack)}: {listed}{where}")


def show_fetches(
    consumers: Sequence[Consumer],
    racks: Sequence[str | None],
    brokers: Sequence[Broker],
    parts: Partitions,
) -> int:
    """Print who served each member's records; return how many came from the reader's rack."""
    in_rack = 0
    for i, (consumer, rack) in enumerate(zip(consumers, racks, strict=True)):
        metrics = consumer.node_metrics
        records = {
            b: int(metrics.get(b.node_id, {}).get("records-fetched-total", 0)) for b in brokers
        }
        size = {b: metrics.get(b.node_id, {}).get("bytes-fetched-total", 0.0) for b in brokers}
        served = ", ".join(f"{n} from broker {b}" for b, n in records.items() if n)
        line = f"  {label(i, rack)}: {sum(records.values())} records: {served}"
        if rack:
            share = sum(v for b, v in size.items() if b.rack == rack) / (sum(size.values()) or 1)
            in_rack += sum(n for b, n in records.items() if b.rack == rack)
            line += f"; bytes from its own rack {share:.0%}"
            followers = [
                f"{tp.topic}-{tp.partition}"
                for tp in sorted(owned(consumer))
                if parts.leader[tp].rack != rack
            ]
            if followers and share == 1:
                line += f" ({', '.join(followers)} from the follower, not the leader)"
        print(line)
    return in_rack


async def run(bootstrap: str | None, assignor: str, with_racks: bool, prefix: str) -> None:
    group = prefix + "billing"
    async with cluster(bootstrap) as servers:
        brokers, parts = await create_topics(servers, prefix)
        print("brokers: " + ", ".join(f"{b.node_id} in {b.rack}" for b in brokers))
        for tp, replicas in sorted(parts.replicas.items()):
            on = ", ".join(map(str, replicas))
            print(
                f"  {tp.topic}-{tp.partition}: replicas on brokers {on}; leader {parts.leader[tp]}"
            )
        racks = [b.rack if with_racks else None for b in brokers]
        total = len(parts.replicas)
        topics = sorted({tp.topic for tp in parts.replicas})
        await produce(servers, sorted(parts.replicas))
        consumers: list[Consumer] = []
        holds: list[Hold] = []
        try:
            for rack in racks:
                hold = Hold()
                consumer = Consumer(
                    servers, group, topics=topics, client_rack=rack, assignors=[assignor],
                    auto_offset_reset="earliest", session_timeout_ms=10_000,
                    heartbeat_interval_ms=500, listener=hold,
                )  # fmt: skip
                hold.consumer = consumer
                holds.append(hold)
                await join(consumers, consumer, total)
            print(f"group {group}, {assignor}, three consumers joined one by one:")
            show_assignment(consumers, racks, parts)
            for hold in holds:
                hold.release()
            read = await asyncio.gather(*(read_all(c) for c in consumers))
            print(f"{sum(read)} records read, {RECORDS} a partition (KIP-392):")
            in_rack = show_fetches(consumers, racks, brokers, parts)
            if with_racks:
                print(f"in all: {in_rack} of {sum(read)} records read in the reader's rack")
        finally:
            for consumer in consumers:
                await consumer.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bootstrap",
        default=os.environ.get("AIOGROUP_RACK_BOOTSTRAP"),
        help="a running cluster with brokers in three racks (default: start Kafka 4.1.1 here)",
    )
    parser.add_argument(
        "--assignor",
        default="cooperative-sticky",
        choices=("cooperative-sticky", "sticky", "range"),
    )
    parser.add_argument(
        "--no-client-rack", action="store_true", help="the same consumers without a rack"
    )
    parser.add_argument(
        "--prefix", default="", help="before the topics' and the group's names (a second run)"
    )
    args = parser.parse_args(argv)
    asyncio.run(run(args.bootstrap, args.assignor, not args.no_client_rack, args.prefix))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
