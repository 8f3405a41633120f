"""Capture what kafka-python 3's ``sticky`` assignor puts in JoinGroup, on the embedded broker.

    .venv/bin/python tests/data/record_kafka_python_sticky.py   # rewrites kafka_python_sticky.json

A real kafka-python consumer (``StickyPartitionAssignor``) subscribes to ``foo`` (3 partitions)
and ``bar`` (2). The broker's view of the group gives the exact Subscription bytes the consumer
sent at each join:

1. it joins alone (no previous assignment yet);
2. an aiogroup ``sticky`` member joins, so it rejoins owning all 5 partitions;
3. the aiogroup member leaves, so it rejoins owning what the previous round left it;
4. a topic ``one`` (1 partition) and two kafka-python members: the one left without a
   partition rejoins with an empty previous assignment.

Each vector records the bytes, the consumer protocol fields kafka-python's own decoder reads
from them, and the sticky user data decoded by kafka-python (its version, previous assignment
and generation). Waits are on the group's state, with deadlines.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiogroup.client import GroupMember
from aiogroup.testing.embedded.messages import GroupView
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker

OUT = Path(__file__).with_name("kafka_python_sticky.json")
DEADLINE_S = 60.0


class KafkaPythonMember:
    """One kafka-python consumer with the sticky assignor, polled on its own thread.

    ``owned`` is what its rebalance callbacks left it owning; :meth:`wait_owned` waits for a
    condition on it (also used by tests/client/test_sticky_kafka_python.py).
    """

    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str) -> None:
        self.owned: frozenset[tuple[str, int]] = frozenset()
        self.changed = threading.Condition()
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, args=(bootstrap, group, topics, name), daemon=True
        )
        self.thread.start()

    def _set(self, owned: frozenset[tuple[str, int]]) -> None:
        with self.changed:
            self.owned = owned
            self.changed.notify_all()

    def wait_owned(
        self, predicate: Callable[[frozenset[tuple[str, int]]], bool], timeout: float = DEADLINE_S
    ) -> frozenset[tuple[str, int]]:
        with self.changed:
            if not self.changed.wait_for(lambda: predicate(self.owned), timeout):
                raise TimeoutError(f"kafka-python member still owns {sorted(self.owned)}")
            return self.owned

    def _run(self, bootstrap: str, group: str, topics: list[str], name: str) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                member._set(member.owned - {(p.topic, p.partition) for p in revoked})

            def on_partitions_assigned(self, assigned: Any) -> None:
                member._set(member.owned | {(p.topic, p.partition) for p in assigned})

        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=name,
            partition_assignment_strategy=[StickyPartitionAssignor],
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            enable_auto_commit=False,
        )
        for topic in topics:  # know the topics before the first JoinGroup (see peer_proc.py)
            deadline = time.monotonic() + 10
            while not consumer.partitions_for_topic(topic) and time.monotonic() < deadline:
                continue
        consumer.subscribe(topics, listener=Listener())
        while not self.stop.is_set():
            consumer.poll(timeout_ms=100)
        consumer.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)


def wait_group(
    broker: ThreadedBroker, group: str, predicate: Callable[[GroupView], bool]
) -> GroupView:
    view = broker.wait_for_group(group, lambda v: v is not None and predicate(v), DEADLINE_S)
    assert view is not None
    return view


def stable(members: int, after: int = 0) -> Callable[[GroupView], bool]:
    def check(view: GroupView) -> bool:
        return (
            view.state == "Stable" and len(view.members) == members and view.generation_id > after
        )

    return check


def decoded(wire: bytes) -> dict[str, Any]:
    from kafka.coordinator.assignors.sticky.user_data import StickyAssignorUserData
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    sub = ConsumerProtocolSubscription.decode(wire)
    user_data = bytes(sub.user_data or b"")
    out: dict[str, Any] = {
        "version": sub.version,
        "topics": list(sub.topics),
        "user_data_hex": user_data.hex(),
    }
    if user_data:
        data = StickyAssignorUserData.decode(user_data)
        out["user_data_decoded"] = {
            "version": int.from_bytes(user_data[:2], "big"),
            "previous_assignment": [
                {"topic": t, "partitions": list(ps)} for t, ps in data.previous_assignment
            ],
            "generation": data.generation,
        }
    return out


def kafka_python_metadata(view: GroupView, client_id: str) -> bytes:
    (member,) = [m for m in view.members if m.client_id == client_id]
    ((name, metadata),) = member.protocols
    assert name == "sticky"
    return metadata


def vector(case: str, n: int, wire: bytes, when: str) -> dict[str, Any]:
    import kafka

    fields = decoded(wire)
    data = fields.get("user_data_decoded")
    if data is None:
        notes = f"{when}: empty user data (no previous assignment)"
    else:
        owned = sum(len(e["partitions"]) for e in data["previous_assignment"])
        notes = (
            f"{when}: int16 version {data['version']}, then a sticky v1 block with "
            f"{owned} previously owned partitions and generation {data['generation']}"
        )
    return {
        "id": f"{case}/join-metadata/{n:02d}",
        "client": f"kafka-python {kafka.__version__}",
        "assignor": "sticky",
        "message": "join-metadata",
        "hex": wire.hex(),
        "decoded": fields,
        "notes": notes,
    }


async def capture(broker: ThreadedBroker) -> list[dict[str, Any]]:
    vectors: list[dict[str, Any]] = []
    group = "kp-sticky"
    kp = KafkaPythonMember(broker.bootstrap, group, ["foo", "bar"], "kp1")
    try:
        view = await asyncio.to_thread(wait_group, broker, group, stable(1))
        vectors.append(vector("history", 1, kafka_python_metadata(view, "kp1"), "first join"))
        first = view.generation_id
        async with GroupMember(
            broker.bootstrap,
            group,
            topics=["foo", "bar"],
            assignors=["sticky"],
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            client_id="aiogroup",
        ) as member:
            view = await asyncio.to_thread(wait_group, broker, group, stable(2, first))
            await member.wait_for_assignment(DEADLINE_S)
            vectors.append(
                vector(
                    "history",
                    2,
                    kafka_python_metadata(view, "kp1"),
                    "rejoin when an aiogroup member joins",
                )
            )
            second = view.generation_id
        view = await asyncio.to_thread(wait_group, broker, group, stable(1, second))
        vectors.append(
            vector(
                "history",
                3,
                kafka_python_metadata(view, "kp1"),
                "rejoin when the aiogroup member has left",
            )
        )
    finally:
        await asyncio.to_thread(kp.close)

    group = "kp-sticky-empty"
    members = [KafkaPythonMember(broker.bootstrap, group, ["one"], f"kp{i}") for i in (1, 2)]
    try:
        view = await asyncio.to_thread(wait_group, broker, group, stable(2))
        # Ask both to rejoin: a third member comes and goes; each rejoin carries history.
        extra = KafkaPythonMember(broker.bootstrap, group, ["one"], "kp3")
        view = await asyncio.to_thread(wait_group, broker, group, stable(3, view.generation_id))
        await asyncio.to_thread(extra.close)
        view = await asyncio.to_thread(wait_group, broker, group, stable(2, view.generation_id))
        for client_id in ("kp1", "kp2"):
            wire = kafka_python_metadata(view, client_id)
            data = decoded(wire).get("user_data_decoded", {})
            if data and not data["previous_assignment"]:
                vectors.append(
                    vector("empty", 1, wire, "rejoin after a generation that gave it nothing")
                )
                break
        else:  # pragma: no cover - depends on which member the leader left empty
            raise AssertionError("no member rejoined with an empty previous assignment")
    finally:
        for m in members:
            await asyncio.to_thread(m.close)
    return vectors


def main() -> None:
    config = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)
    with ThreadedBroker(coordinator_config=config, topics={"foo": 3, "bar": 2, "one": 1}) as b:
        vectors = asyncio.run(capture(b))
    OUT.write_text(json.dumps(vectors, indent=2) + "\n")
    print(f"wrote {len(vectors)} vectors to {OUT}")


if __name__ == "__main__":
    main()
