"""Which member gets what: members with the same (client-generated) ids join a KIP-848 group one
by one, each heartbeating until the group is Stable, then one leaves; the embedded broker must
hand out exactly the partitions Kafka 4.1.1 did, at the same group epochs.

The transcripts below were recorded on Kafka 4.1.1. They depend on Kafka's iteration orders:
the members in its ``TimelineHashMap`` then a ``java.util.HashMap``, each member's partitions
in a ``HashSet`` rebuilt from the target assignment record (see
:mod:`aiogroup.testing.embedded.server_assignors`)."""

from __future__ import annotations

import asyncio
import base64
import random
import uuid
from typing import Any

import pytest

from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.fixtures import BrokerHandle, kafka_broker  # noqa: F401

pytestmark = pytest.mark.timeout(240)

KINDS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]

Snapshot = dict[int, list[Any]]

#: (seed, assignor, topics, members) -> after each join and after member 1 left: who owns what
#: (partitions of ``t`` as ints, of ``u`` as "u<n>") and the group epoch, on Kafka 4.1.1.
CASES: list[tuple[int, str, dict[str, int], int, list[tuple[Snapshot, int]]]] = [
    (6, "uniform", {"t": 13}, 6, [
        ({0: list(range(13))}, 1),
        ({0: [0, 1, 2, 3, 4, 5, 6], 1: [7, 8, 9, 10, 11, 12]}, 2),
        ({0: [0, 1, 2, 3, 4], 1: [7, 8, 9, 10], 2: [5, 6, 11, 12]}, 3),
        ({0: [0, 1, 2, 3], 1: [7, 8, 9], 2: [5, 6, 11], 3: [4, 10, 12]}, 4),
        ({0: [0, 1, 2], 1: [7, 8, 9], 2: [5, 6, 11], 3: [4, 10], 4: [3, 12]}, 5),
        ({0: [0, 1, 2], 1: [7, 8], 2: [5, 6], 3: [4, 10], 4: [3, 12], 5: [9, 11]}, 6),
        ({0: [0, 1, 2], 2: [5, 6], 3: [4, 7, 10], 4: [3, 8, 12], 5: [9, 11]}, 7),
    ]),
    (7, "uniform", {"t": 17}, 8, [
        ({0: list(range(17))}, 1),
        ({0: list(range(9)), 1: list(range(9, 17))}, 2),
        ({0: [0, 1, 2, 3, 4, 5], 1: [9, 10, 11, 12, 13, 16], 2: [6, 7, 8, 14, 15]}, 3),
        ({0: [0, 1, 2, 3, 4], 1: [9, 10, 11, 16], 2: [6, 7, 8, 14], 3: [5, 12, 13, 15]}, 4),
        ({0: [0, 1, 2, 3], 1: [9, 10, 16], 2: [6, 7, 8], 3: [5, 12, 13, 15], 4: [4, 11, 14]}, 5),
        ({0: [0, 1, 2], 1: [9, 10, 16], 2: [6, 7, 8], 3: [5, 12, 13], 4: [4, 11, 14],
          5: [3, 15]}, 6),
        ({0: [0, 1, 2], 1: [9, 16], 2: [6, 7], 3: [5, 12, 13], 4: [4, 11, 14], 5: [3, 15],
          6: [8, 10]}, 7),
        ({0: [0, 1, 2], 1: [9, 16], 2: [6, 7], 3: [5, 12], 4: [4, 11], 5: [3, 15], 6: [8, 10],
          7: [13, 14]}, 8),
        ({0: [0, 1, 2], 2: [6, 7, 16], 3: [5, 9, 12], 4: [4, 11], 5: [3, 15], 6: [8, 10],
          7: [13, 14]}, 9),
    ]),
    (29, "uniform", {"t": 39}, 8, [
        ({0: list(range(39))}, 1),
        ({0: list(range(20)), 1: list(range(20, 39))}, 2),
        ({0: list(range(13)), 1: [20, 21, 22, 23, 24, 25, 32, 33, 34, 35, 36, 37, 38],
          2: [13, 14, 15, 16, 17, 18, 19, 26, 27, 28, 29, 30, 31]}, 3),
        ({0: list(range(10)), 1: [20, 21, 22, 32, 33, 34, 35, 36, 37, 38],
          2: [13, 14, 15, 16, 17, 18, 19, 26, 27, 28], 3: [10, 11, 12, 23, 24, 25, 29, 30, 31]}, 4),
        ({0: list(range(8)), 1: [20, 21, 32, 33, 34, 35, 36, 37],
          2: [13, 16, 17, 18, 19, 26, 27, 28], 3: [10, 11, 12, 23, 24, 25, 29, 30],
          4: [8, 9, 14, 15, 22, 31, 38]}, 5),
        ({0: list(range(7)), 1: [20, 32, 33, 34, 35, 36, 37], 2: [16, 17, 18, 19, 26, 27],
          3: [10, 11, 12, 23, 24, 25], 4: [8, 9, 14, 15, 22, 31, 38],
          5: [7, 13, 21, 28, 29, 30]}, 6),
        ({0: list(range(6)), 1: [20, 32, 33, 34, 35, 36], 2: [16, 17, 18, 19, 26],
          3: [10, 11, 23, 24, 25], 4: [8, 9, 14, 15, 22, 38], 5: [7, 13, 21, 28, 29, 30],
          6: [6, 12, 27, 31, 37]}, 7),
        ({0: list(range(5)), 1: [32, 33, 34, 35, 36], 2: [16, 17, 18, 19, 26],
          3: [10, 11, 23, 24, 25], 4: [8, 9, 14, 22, 38], 5: [7, 13, 21, 28, 29],
          6: [6, 12, 27, 31, 37], 7: [5, 15, 20, 30]}, 8),
        ({0: [0, 1, 2, 3, 4, 32], 2: [16, 17, 18, 19, 26, 35], 3: [10, 11, 23, 24, 25, 36],
          4: [8, 9, 14, 22, 38], 5: [7, 13, 21, 28, 29], 6: [6, 12, 27, 31, 37],
          7: [5, 15, 20, 30, 33, 34]}, 9),
    ]),
    (3, "range", {"t": 5, "u": 5}, 3, [
        ({0: [0, 1, 2, 3, 4, "u0", "u1", "u2", "u3", "u4"]}, 1),
        ({0: [0, 1, 2, "u0", "u1", "u2"], 1: [3, 4, "u3", "u4"]}, 2),
        ({0: [0, 1, "u0", "u1"], 1: [2, 3, "u2", "u3"], 2: [4, "u4"]}, 3),
        ({0: [0, 1, 2, "u0", "u1", "u2"], 2: [3, 4, "u3", "u4"]}, 4),
    ]),
]  # fmt: skip


def member_ids(seed: int, count: int) -> list[str]:
    """Java-consumer-like member ids, the same on every run."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        raw = bytes(rng.getrandbits(8) for _ in range(16))
        text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
        if not text.startswith("-"):
            out.append(text)
    return out


async def run(
    bootstrap: str, seed: int, assignor: str, topics: dict[str, int], count: int
) -> list[tuple[Snapshot, int]]:
    ids = member_ids(seed, count)
    group = f"assign-{seed}-{uuid.uuid4().hex[:6]}"
    out: list[tuple[Snapshot, int]] = []
    async with RawClient(bootstrap) as client:
        names = {t: f"{t}-{uuid.uuid4().hex[:6]}" for t in topics}
        for t, n in topics.items():
            await client.request("CreateTopics", 4, {
                "topics": [{"name": names[t], "num_partitions": n, "replication_factor": 1,
                            "assignments": [], "configs": []}],
                "timeout_ms": 10_000, "validate_only": False,
            })  # fmt: skip
        await until_assignable(client, list(names.values()))
        state: dict[str, tuple[int, dict[Any, list[int]]]] = {}

        async def beat(member: str, **fields: Any) -> None:
            values: dict[str, Any] = {
                "group_id": group, "member_id": member, "member_epoch": 0, "instance_id": None,
                "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
                "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None,
            }  # fmt: skip
            values.update(fields)
            r = await client.request("ConsumerGroupHeartbeat", 1, values)
            assert r.error_code == 0, (r.error_code, r.error_message)
            owned = state.get(member, (0, {}))[1]
            if r.assignment is not None:
                owned = {t.topic_id: list(t.partitions) for t in r.assignment.topic_partitions}
            state[member] = (r.member_epoch, owned)

        async def settle() -> tuple[Snapshot, int]:
            for _ in range(12):
                for member, (epoch, owned) in list(state.items()):
                    parts = [{"topic_id": t, "partitions": ps} for t, ps in owned.items() if ps]
                    await beat(member, member_epoch=epoch, topic_partitions=parts)
                values = {"group_ids": [group], "include_authorized_operations": False}
                [g] = (await client.request("ConsumerGroupDescribe", 1, values)).groups
                if g.group_state == "Stable":
                    snapshot: Snapshot = {}
                    for m in g.members:
                        mine: list[Any] = []
                        for t in sorted(m.assignment.topic_partitions, key=lambda t: t.topic_name):
                            short = t.topic_name.split("-")[0]
                            mine += [
                                p if short == "t" else f"{short}{p}" for p in sorted(t.partitions)
                            ]
                        snapshot[ids.index(m.member_id)] = mine
                    return dict(sorted(snapshot.items())), g.group_epoch
            raise AssertionError(f"{group} never Stable")

        for member in ids:
            subscription = list(names.values())
            await beat(member, rebalance_timeout_ms=30_000, server_assignor=assignor,
                       subscribed_topic_names=subscription, topic_partitions=[])  # fmt: skip
            out.append(await settle())
        await beat(ids[1], member_epoch=-1)
        del state[ids[1]]
        out.append(await settle())
    return out


async def until_assignable(client: RawClient, topics: list[str]) -> None:
    """Kafka's coordinator learns of new topics after Metadata does: probe until a member
    subscribing to them is assigned every one of them."""
    for _ in range(100):
        probe = member_ids(random.randrange(1 << 30), 1)[0]
        values = {
            "group_id": f"probe-{uuid.uuid4().hex[:6]}", "member_id": probe, "member_epoch": 0,
            "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 1000,
            "subscribed_topic_names": topics, "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": [],
        }  # fmt: skip
        r = await client.request("ConsumerGroupHeartbeat", 1, values)
        if r.assignment is not None and len(r.assignment.topic_partitions) == len(topics):
            return
        await asyncio.sleep(0.1)  # polling the broker's metadata, bounded above
    raise AssertionError(f"the coordinator never saw {topics}")


@pytest.mark.parametrize("kafka_broker", KINDS, indirect=True)
@pytest.mark.parametrize(("seed", "assignor", "topics", "count", "expected"), CASES)
async def test_the_same_members_get_the_same_partitions_as_on_kafka_411(
    kafka_broker: BrokerHandle,  # noqa: F811
    seed: int,
    assignor: str,
    topics: dict[str, int],
    count: int,
    expected: list[tuple[Snapshot, int]],
) -> None:
    assert await run(kafka_broker.bootstrap, seed, assignor, topics, count) == expected
