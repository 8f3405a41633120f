"""Issue 26's "Done when": a KIP-848 consumer group of aiogroup ``Consumer``s, Java
``KafkaConsumer``s and librdkafka consumers (``group.protocol=consumer`` everywhere) on Apache
Kafka 4.1.1 and on the embedded broker (its ``kafka4`` flavour), with records flowing while
members join, leave cleanly, are killed (SIGKILL) and are paused past the session (SIGSTOP,
then SIGCONT: each comes back fenced, reports its partitions lost and rejoins); at the end the
members stop one at a time, each leaver's partitions taken over before the next stops. Judged
from the members' telemetry by the chaos checker (no partition held by two members at once,
nobody acting on a partition it does not hold, callbacks in order, no crash) and by the harness
(every record processed at least once, nothing revoked that came straight back).

One kind of finding is the peers' own and expected: Java's and librdkafka's KIP-848 consumers
have no client-side session rule (KAFKA-7026), so a peer paused past the session holds what
it owned until the coordinator's answer after SIGCONT fences it, while the broker has given
it to another member; a Java peer has processed records of such a partition in that window.
The checker counts that window against the peer, as the chaos suite does; the test accepts
exactly those (a paused peer, blamed, within its pause and the lost callback that ends it)
and nothing else. aiogroup's member stops acting at its session deadline.

The group's session and heartbeat interval are the broker's under KIP-848: set as the group's
``consumer.session.timeout.ms`` and ``consumer.heartbeat.interval.ms`` before anyone joins (the
test broker allows them that low: ``group.consumer.min.*``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.tools.chaos.checker import Violation

from .harness import MemberGroup, moved_without_need

pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.peers, pytest.mark.timeout(300)]

CONSUMER = "consumer"
#: The group's session (the members are told the same: aiogroup's KAFKA-7026 rule) and pace.
SESSION_MS = 4000
HEARTBEAT_MS = 300
#: Records per second into each partition while the group changes.
RATE = 10


@pytest.mark.parametrize(
    "kafka_broker",
    [
        pytest.param("embedded", id="embedded"),
        pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
    ],
    indirect=True,
)
def test_aiogroup_java_and_librdkafka_share_a_consumer_group_through_joins_leaves_kills_and_pauses(
    kafka_broker: BrokerHandle, java_peer: list[str], tmp_path: Path
) -> None:
    g = MemberGroup(kafka_broker, tmp_path, session_ms=SESSION_MS)
    g.consumer_group_config(heartbeat_ms=HEARTBEAT_MS)

    def start(name: str, kind: str) -> None:
        g.start(name, kind, group_protocol=CONSUMER)

    paused = ("a1", "j2", "r2")
    try:
        with g.flowing(RATE):
            for name, kind in (("a1", "aiogroup-consumer"), ("j1", "java"), ("r1", "librdkafka")):
                start(name, kind)
            g.wait(g.converged, "a1, j1 and r1 sharing the partitions")
            start("a2", "aiogroup-consumer")
            g.wait(g.converged, "a2 joining")
            assert g.stop("j1") == 0
            g.wait(g.converged, "j1's partitions handed over after its clean close")
            g.kill("r1")
            g.wait(g.converged, "r1's partitions handed over once the broker expired it")
            start("j2", "java")
            start("r2", "librdkafka")
            g.wait(g.converged, "j2 and r2 joining")
            for name in paused:
                g.pause(name)
            since = min(g.paused.values())
            g.wait(g.converged, "a2 holding every partition once the paused members expired")
            for name in paused:
                g.resume(name)
            g.wait(
                lambda: g.converged() and all(g.came_back(n, since) for n in paused),
                "the paused members fenced, lost, rejoined and given partitions again",
            )
        g.wait(lambda: not g.unprocessed(), "every record processed")
        codes = g.close_in_turn()
    finally:
        g.kill_all()
    assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n{g.stderr_tails()}"
    verdict = g.verdict()
    windows = zombie_windows(g.runner, g.events(), {"j2", "r2"})
    unexpected = [v for v in verdict.violations if not in_own_window(v, windows)]
    detail = "\n".join(f"{v.kind} {v.partition}: {v.detail}" for v in verdict.violations)
    assert not unexpected, f"{verdict.summary()}\n{detail}"
    assert not verdict.against("aiogroup")
    assert not g.unprocessed()
    assert moved_without_need(g.events(), g.stops) == []
    clients = {"aiogroup", "java", "librdkafka"}
    assert set(verdict.members) == clients
    assert all(verdict.processed.get(c, 0) > 0 for c in clients), verdict.processed


def zombie_windows(
    runner: list[dict[str, Any]], events: Mapping[str, list[dict[str, Any]]], peers: set[str]
) -> dict[str, tuple[str, float, float]]:
    """For each paused peer: (its client, when it was paused, when the first lost callback after
    its resume ended): the window in which it may still act on what the broker gave away."""
    out: dict[str, tuple[str, float, float]] = {}
    for e in runner:
        name = e.get("member")
        if e.get("type") != "inject" or e.get("kind") != "stop" or name not in peers:
            continue
        lost = [
            float(x.get("ended") or x["ts"])
            for x in events[name]
            if x.get("type") == "partitions_lost" and float(x["ts"]) >= float(e["t_end"])
        ]
        client = str(next(x["client"] for x in events[name] if x.get("client")))
        out[name] = (client, float(e["t"]), min(lost, default=float(e["t_end"])))
    return out


def in_own_window(v: Violation, windows: Mapping[str, tuple[str, float, float]]) -> bool:
    """``v`` is a paused peer's own: blamed on it, about it, within its window."""
    for name in v.members:
        if name not in windows:
            continue
        client, start, end = windows[name]
        if v.blame == client and v.kind in ("double_ownership", "acting_on_other"):
            return v.start is not None and v.end is not None and start <= v.start <= v.end <= end
    return False
