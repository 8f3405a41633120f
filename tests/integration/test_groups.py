"""Groups of member processes on a real broker: aiogroup alone, and mixed with librdkafka
(confluent-kafka) and kafka-python 3 cooperative-sticky members.

Each member runs in its own process and records its callbacks with wall-clock timestamps
(peer_proc.py). Ownership is judged from those records: a partition is never handed to a member
while another still holds it. Rebalances on Tansu are slow (every JoinGroup is held for half a
session), so the scenarios of this module run **concurrently** on one broker, each with its
own group and topic; each test waits for its scenario and reports its result. Nothing here
asserts latency or generation numbers.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import Cluster
from tests.integration.harness import (
    CONVERGE_S,
    Peer,
    converged,
    create_topics,
    double_ownership,
    ownership,
    read_events,
    start_concurrently,
    start_peer,
    unique,
    wait_until,
)

PARTITIONS = 6
Scenario = Callable[[Cluster, Path], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(fn: Scenario) -> Scenario:
    SCENARIOS[fn.__name__] = fn
    return fn


class Group:
    """A group id, a topic and the member processes of one scenario."""

    def __init__(self, cluster: Cluster, workdir: Path, name: str) -> None:
        self.cluster = cluster
        self.group = unique(name)
        self.topic = unique(f"{name}-t")
        create_topics(cluster.bootstrap, {self.topic: PARTITIONS})
        self.partitions = {(self.topic, p) for p in range(PARTITIONS)}
        self.log = workdir / f"{name}.jsonl"
        self.telemetry_dir = workdir / f"{name}-telemetry"
        self.telemetry_dir.mkdir()
        self.peers: dict[str, Peer] = {}

    def start(self, kind: str, name: str) -> Peer:
        peer = start_peer(
            kind,
            name,
            self.cluster.bootstrap,
            self.group,
            [self.topic],
            self.log,
            self.telemetry_dir,
        )
        self.peers[name] = peer
        return peer

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.log)

    def callbacks(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["event"] != "owner_check"]

    def wait_converged(self, members: list[str], what: str) -> None:
        def check() -> bool:
            errors = [e for e in self.events() if e["event"] == "error"]
            assert not errors, f"a member failed: {errors}"
            return converged(self.callbacks(), members, self.partitions)

        wait_until(check, CONVERGE_S, f"{what}: {members} to share {self.topic}")

    def stop_all(self) -> None:
        for peer in self.peers.values():
            peer.terminate()

    def stderr_of(self, name: str) -> str:
        path = self.log.with_suffix(f".{name}.stderr")
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""


@scenario
def join_one_by_one(cluster: Cluster, workdir: Path) -> None:
    """Three aiogroup members join one at a time; then one leaves."""
    g = Group(cluster, workdir, "join")
    try:
        names: list[str] = []
        for name in ("a1", "a2", "a3"):
            before = ownership(g.callbacks())
            mark = len(g.callbacks())
            g.start("aiogroup", name)
            names.append(name)
            g.wait_converged(names, f"after {name} joined")
            after = ownership(g.callbacks())
            # Cooperative: an existing member gives up only what moved to someone else.
            for e in g.callbacks()[mark:]:
                if e["event"] == "revoked" and e["who"] != name:
                    moved = {(t, p) for t, p in e["partitions"]}
                    assert moved <= before.get(e["who"], set()), e
                    assert not moved & after[e["who"]], f"{e['who']} revoked what it kept: {e}"
                assert e["event"] != "lost", f"nothing may be lost on a join: {e}"
        g.peers["a3"].terminate()
        g.wait_converged(["a1", "a2"], "after a3 left")
        assert not double_ownership(g.callbacks())
    finally:
        g.stop_all()
    problems = double_ownership(g.callbacks())
    assert not problems, problems


@scenario
def member_killed(cluster: Cluster, workdir: Path) -> None:
    """SIGKILL one member: after its session expires the survivor owns everything."""
    g = Group(cluster, workdir, "kill")
    try:
        g.start("aiogroup", "a1")
        g.wait_converged(["a1"], "a1 alone")
        g.start("aiogroup", "a2")
        g.wait_converged(["a1", "a2"], "a1 and a2")
        killed_at = time.time()
        g.peers["a2"].kill()
        g.wait_converged(["a1"], "after a2 was killed")
    finally:
        g.stop_all()
    # a2's ownership ends with its death, which its own log cannot show.
    death = {"t": killed_at, "who": "a2", "event": "closed", "partitions": []}
    problems = double_ownership(sorted([*g.callbacks(), death], key=lambda e: e["t"]))
    assert not problems, problems


@scenario
def member_paused(cluster: Cluster, workdir: Path) -> None:
    """SIGSTOP a member past its session timeout, then SIGCONT (KAFKA-7026).

    It must report its partitions lost, and never act as owner of a partition the other
    member holds: every ``owner_check`` it writes after resuming is checked against the other
    member's ownership at that moment.
    """
    g = Group(cluster, workdir, "pause")
    try:
        g.start("aiogroup", "a1")
        g.wait_converged(["a1"], "a1 alone")
        g.start("aiogroup", "a2")
        g.wait_converged(["a1", "a2"], "a1 and a2")
        held = ownership(g.callbacks())["a2"]
        assert held
        paused_at = time.time()
        g.peers["a2"].pause()
        g.wait_converged(["a1"], "a1 took over from the paused a2")
        g.peers["a2"].resume()
        wait_until(
            lambda: any(
                e["who"] == "a2" and e["event"] == "lost" and e["t"] > paused_at for e in g.events()
            ),
            CONVERGE_S,
            "a2 to report its partitions lost",
        )
        lost = next(
            e
            for e in g.events()
            if e["who"] == "a2" and e["event"] == "lost" and e["t"] > paused_at
        )
        assert {(t, p) for t, p in lost["partitions"]} == held
        g.wait_converged(["a1", "a2"], "a2 back in the group")
    finally:
        g.stop_all()
    events = g.events()
    # While paused, a2 holds nothing as far as the group is concerned; everything else in the
    # timeline must still show single ownership.
    frozen = {"t": paused_at, "who": "a2", "event": "lost", "partitions": sorted(held)}
    timeline = sorted(
        [e for e in events if e["event"] != "owner_check"] + [frozen], key=lambda e: e["t"]
    )
    problems = double_ownership(timeline)
    assert not problems, problems
    resumed = [e for e in events if e["who"] == "a2" and e["t"] > paused_at]
    a1_log = [e for e in events if e["who"] == "a1" and e["event"] != "owner_check"]
    for check in (e for e in resumed if e["event"] == "owner_check"):
        a1_owns = ownership([e for e in a1_log if e["t"] <= check["t"]]).get("a1", set())
        claimed = {(t, p) for t, p in check["partitions"]}
        assert not claimed & a1_owns, f"a2 acted as owner of a1's {claimed & a1_owns}"


def _mixed(cluster: Cluster, workdir: Path, name: str, order: list[tuple[str, str]]) -> None:
    g = Group(cluster, workdir, name)
    try:
        names: list[str] = []
        for kind, member in order:
            g.start(kind, member)
            names.append(member)
            g.wait_converged(names, f"after {member} ({kind}) joined")
        first = names[0]
        g.peers[first].terminate()
        g.wait_converged(names[1:], f"after the leader {first} left")
    finally:
        g.stop_all()
    problems = double_ownership(g.callbacks())
    assert not problems, problems
    # Every client wrote the shared telemetry schema (aiogroup.observability.telemetry and its
    # wrappers).
    for kind, name in order:
        files = list(g.telemetry_dir.glob(f"{name}.*.jsonl"))
        assert files, f"no telemetry from {name} ({kind})"
        lines = [json.loads(x) for f in files for x in f.read_text().splitlines() if x]
        assert any(e["type"] == "partitions_assigned" for e in lines), (name, lines[:3])


@scenario
def mixed_aiogroup_leads(cluster: Cluster, workdir: Path) -> None:
    _mixed(
        cluster,
        workdir,
        "mixlead",
        [("aiogroup", "aio"), ("confluent", "rdk"), ("kafka-python", "kpy")],
    )


@scenario
def mixed_aiogroup_follows(cluster: Cluster, workdir: Path) -> None:
    _mixed(
        cluster,
        workdir,
        "mixfollow",
        [("confluent", "rdk"), ("aiogroup", "aio"), ("kafka-python", "kpy")],
    )


@pytest.fixture(scope="module")
def running(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Future[None]]]:
    """Start every scenario at once (they share nothing but the broker)."""
    workdir = tmp_path_factory.mktemp(f"groups-{cluster.kind}")
    futures, threads = start_concurrently(
        {name: functools.partial(fn, cluster, workdir) for name, fn in SCENARIOS.items()}
    )
    yield futures
    for thread in threads:
        thread.join(timeout=60)


SCENARIO_TIMEOUT = 240


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.peers) if n.startswith("mixed") else n
        for n in sorted(SCENARIOS)
    ],
)
def test_scenario(running: dict[str, Future[None]], name: str) -> None:
    running[name].result(timeout=SCENARIO_TIMEOUT)
