"""How fast does a cooperative group converge on the embedded broker? (and on Tansu, for scale)

librdkafka consumers (confluent-kafka, cooperative-sticky, heartbeat 500 ms, session 6 s; the
embedded broker runs with group.initial.rebalance.delay.ms = 0) in threads of this process.
Two measurements per broker, repeated and reported as medians:

* ``cold join``: N members subscribe at once; time until every partition is owned by exactly
  one member and every member owns some.
* ``scale out``: one more member joins a stable group (KIP-429 two-phase rebalance: revoke,
  then assign); time until the newcomer owns partitions and the split is complete again.

Usage: ``python bench/bench_embedded_join.py [--members 3] [--partitions 12] [--rounds 5]
[--no-tansu]``. Prints absolute figures and the ratio Tansu / embedded measured in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.launchers.tansu import TansuBroker, find_tansu


class Member:
    """A librdkafka consumer polled by its own thread; its owned set is kept up to date."""

    def __init__(self, bootstrap: str, group: str, topic: str, changed: threading.Condition):
        self.owned: set[int] = set()
        self.changed = changed
        self.stop = threading.Event()
        self.consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                "enable.auto.commit": False,
                "log_level": 0,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assign(self, consumer: Any, partitions: list[Any]) -> None:
        with self.changed:
            self.owned |= {p.partition for p in partitions}
            self.changed.notify_all()

    def _revoke(self, consumer: Any, partitions: list[Any]) -> None:
        with self.changed:
            self.owned -= {p.partition for p in partitions}
            self.changed.notify_all()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.consumer.poll(0.05)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.consumer.close()


def converged(members: list[Member], partitions: int) -> bool:
    owned = [m.owned for m in members]
    flat = sorted(p for o in owned for p in o)
    return flat == list(range(partitions)) and all(owned)


def wait(cond: threading.Condition, check: Callable[[], bool], timeout: float) -> float:
    start = time.perf_counter()
    with cond:
        if not cond.wait_for(check, timeout):
            raise TimeoutError("the group did not converge")
    return time.perf_counter() - start


def one_round(bootstrap: str, members: int, partitions: int, timeout: float) -> tuple[float, float]:
    topic, group = f"bench-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    changed = threading.Condition()
    group_members: list[Member] = []
    try:
        start = time.perf_counter()
        group_members = [Member(bootstrap, group, topic, changed) for _ in range(members)]
        wait(changed, lambda: converged(group_members, partitions), timeout)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        group_members.append(Member(bootstrap, group, topic, changed))
        wait(changed, lambda: converged(group_members, partitions), timeout)
        scale = time.perf_counter() - start
        return cold, scale
    finally:
        for m in group_members:
            m.close()


@contextmanager
def embedded() -> Iterator[str]:
    config = CoordinatorConfig(initial_rebalance_delay_ms=0)
    with ThreadedBroker(coordinator_config=config) as broker:
        yield broker.bootstrap


@contextmanager
def tansu() -> Iterator[str]:
    with TansuBroker() as broker:
        yield broker.bootstrap


def measure(name: str, factory: Any, args: argparse.Namespace, timeout: float) -> dict[str, float]:
    colds, scales = [], []
    with factory() as bootstrap:
        for _ in range(args.rounds):
            cold, scale = one_round(bootstrap, args.members, args.partitions, timeout)
            colds.append(cold)
            scales.append(scale)
    result = {"cold": statistics.median(colds), "scale": statistics.median(scales)}
    print(
        f"{name:9s} cold join of {args.members}: median {result['cold']:.3f} s "
        f"(min {min(colds):.3f}, max {max(colds):.3f}); "
        f"scale-out to {args.members + 1}: median {result['scale']:.3f} s "
        f"(min {min(scales):.3f}, max {max(scales):.3f})",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--members", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tansu-rounds", type=int, default=2)
    parser.add_argument("--no-tansu", action="store_true")
    args = parser.parse_args()
    print(
        f"librdkafka {ck.libversion()[0]}, cooperative-sticky, heartbeat 500 ms, "
        f"{args.partitions} partitions",
        flush=True,
    )
    ours = measure("embedded", embedded, args, timeout=30)
    if args.no_tansu or find_tansu() is None:
        print("Tansu: skipped")
        return
    args.rounds = args.tansu_rounds
    theirs = measure("tansu", tansu, args, timeout=90)
    print(
        f"ratio tansu/embedded: cold join x{theirs['cold'] / ours['cold']:.1f}, "
        f"scale-out x{theirs['scale'] / ours['scale']:.1f}"
    )


if __name__ == "__main__":
    main()
