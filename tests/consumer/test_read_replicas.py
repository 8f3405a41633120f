"""KIP-392: fetching from the preferred read replica a leader names, and going back to it.

The rules (:mod:`aiogroup.consumer.replicas`) on the sans-I/O core with ``now`` given; the
asyncio driver over a scripted data plane (one replica lost, the leader takes over, the
replica named again after its lease); the wire: ``rack_id`` sent, ``preferred_read_replica``
read (broker 0 included) from bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

import pytest

from aiogroup.consumer.fetch_session import PartitionFetch, SessionRequest
from aiogroup.consumer.fetcher import Fetcher
from aiogroup.consumer.replicas import ReadReplicas
from aiogroup.consumer.state import (
    ConsumerState,
    FetchConfig,
    FetchedPartition,
    FetchedResponse,
    FetchPlan,
)
from aiogroup.consumer.wire import ClusterView, DataPlane, ListedOffset
from aiogroup.errors import BrokerUnreachableError
from aiogroup.observability.registry import MetricsRegistry
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.scripted import ScriptedTransport

from .batches import batch

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
LEADER, LOCAL, OTHER = 0, 2, 1


def ready(max_age_ms: int = 10_000) -> ConsumerState:
    s = ConsumerState(FetchConfig(auto_offset_reset="earliest", metadata_max_age_ms=max_age_ms))
    s.add([A, B])
    s.on_metadata({A: (LEADER, 5), B: (LEADER, 5)}, brokers=[0, 1, 2])
    s.take_committed_lookups(0.0)
    s.on_committed({A: 0, B: 0})
    return s


def respond(
    s: ConsumerState,
    plan: FetchPlan,
    parts: Mapping[TopicPartition, bytes | int],
    now: float,
    preferred: Mapping[TopicPartition, int] | None = None,
    session_id: int = 0,
) -> int:
    """Answer ``plan``: bytes are records, an int an error code; ``preferred`` replicas."""
    out = []
    for tp, value in parts.items():
        prefer = (preferred or {}).get(tp, -1)
        if isinstance(value, int):
            out.append(FetchedPartition(tp, value, preferred_read_replica=prefer))
        else:
            out.append(
                FetchedPartition(
                    tp, 0, high_watermark=100, last_stable_offset=100,
                    records=value or None, preferred_read_replica=prefer,
                )
            )  # fmt: skip
    return s.on_fetch_response(plan, FetchedResponse(0, session_id, out), now)


def nodes(plans: list[FetchPlan]) -> dict[int, set[TopicPartition]]:
    return {p.node_id: set(p.session.fetching) for p in plans}


def test_lease_is_inclusive_not_extended_and_the_leader_clears_it() -> None:
    r = ReadReplicas(10.0)
    assert r.select(A, LEADER, 0.0) == LEADER
    assert r.on_preferred(A, LOCAL, LEADER, 1.0)
    assert not r.on_preferred(A, LOCAL, LEADER, 5.0)  # same replica: lease kept at 11.0
    assert r.select(A, LEADER, 11.0) == LOCAL
    assert r.select(A, LEADER, 11.001) == LEADER and len(r) == 0
    assert not r.on_preferred(A, -1, LEADER, 12.0)
    assert r.on_preferred(A, OTHER, LEADER, 12.0) and r.on_preferred(A, LEADER, LEADER, 13.0)
    assert r.select(A, LEADER, 13.0) == LEADER
    r.on_preferred(A, LOCAL, LEADER, 14.0)
    assert r.select(A, LEADER, 14.0, brokers={0, 1}) == LEADER  # gone from the metadata
    assert r.get(A, 14.0) is None


def test_the_leader_names_a_replica_and_the_partition_moves_session_and_all() -> None:
    s = ready()
    (plan,) = s.plan(0.0)
    assert plan.node_id == LEADER
    respond(s, plan, {A: b"", B: b""}, 0.1, preferred={A: LOCAL}, session_id=7)
    plans = nodes(s.plan(0.2))
    assert plans == {LOCAL: {A}, LEADER: {B}}
    # The leader's session forgets A; the replica's starts full with A alone.
    s2 = ready()
    (p0,) = s2.plan(0.0)
    respond(s2, p0, {A: b"", B: b""}, 0.1, preferred={A: LOCAL}, session_id=7)
    by_node = {p.node_id: p for p in s2.plan(0.2)}
    assert by_node[LEADER].session.forgotten == (A,) and not by_node[LEADER].session.full
    assert by_node[LOCAL].session.full and set(by_node[LOCAL].session.to_send) == {A}
    assert by_node[LOCAL].session.to_send[A] == PartitionFetch(0, 1_048_576, 5)
    respond(s2, by_node[LOCAL], {A: batch([b"x", b"y"], 0)}, 0.3)
    assert [r.value for r in s2.collect(10, 0.3)[A]] == [b"x", b"y"]


@pytest.mark.parametrize("code", [6, 9])  # NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE
def test_a_leader_error_from_the_replica_sends_the_partition_back_to_the_leader(
    code: int,
) -> None:
    s = ready()
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.1, preferred={A: LOCAL})
    by_node = {p.node_id: p for p in s.plan(0.2)}
    respond(s, by_node[LEADER], {B: b""}, 0.3)
    respond(s, by_node[LOCAL], {A: code}, 0.3)
    assert s.replicas.get(A, 0.3) is None and s.metadata_needed
    s.on_metadata({A: (LEADER, 5), B: (LEADER, 5)}, brokers=[0, 1, 2])
    assert nodes(s.plan(1.0)) == {LEADER: {A, B}}


def test_out_of_range_on_the_replica_asks_the_leader_instead_of_resetting() -> None:
    s = ready()
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.1, preferred={A: LOCAL})
    by_node = {p.node_id: p for p in s.plan(0.2)}
    respond(s, by_node[LEADER], {B: b""}, 0.3)
    respond(s, by_node[LOCAL], {A: 1}, 0.3)  # OFFSET_OUT_OF_RANGE
    st = s.get(A)
    assert st is not None and st.reset is None and st.fetch_offset == 0
    (plan,) = s.plan(0.3)
    assert plan.node_id == LEADER and plan.session.fetching[A].fetch_offset == 0
    # From the leader, out of range is out of range: the reset policy applies.
    respond(s, plan, {A: 1, B: b""}, 0.4)
    assert st.reset == "earliest"


def test_a_transport_failure_to_the_replica_sends_its_partitions_to_the_leader() -> None:
    s = ready()
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.1, preferred={A: LOCAL, B: LOCAL})
    (replica_plan,) = s.plan(0.2)
    assert replica_plan.node_id == LOCAL
    s.on_fetch_failed(replica_plan, 0.3, "connection refused")
    assert len(s.replicas) == 0
    assert nodes(s.plan(0.31)) == {LEADER: {A, B}}  # the leader is not backed off


def test_the_lease_ends_then_the_leader_is_asked_again() -> None:
    s = ready(max_age_ms=1_000)
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.5, preferred={A: LOCAL})
    by_node = {p.node_id: p for p in s.plan(1.0)}
    respond(s, by_node[LEADER], {B: b""}, 1.5)
    respond(s, by_node[LOCAL], {A: b""}, 1.5)
    assert nodes(s.plan(1.5)) == {LOCAL: {A}, LEADER: {B}}  # still valid at 0.5 + 1.0
    s = ready(max_age_ms=1_000)
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.5, preferred={A: LOCAL})
    by_node = {p.node_id: p for p in s.plan(1.0)}
    respond(s, by_node[LEADER], {B: b""}, 1.5)
    respond(s, by_node[LOCAL], {A: b""}, 1.5)
    assert nodes(s.plan(1.51)) == {LEADER: {A, B}}  # 1.51 > 0.5 + 1.0


def test_a_replica_gone_from_the_metadata_is_not_fetched_from() -> None:
    s = ready()
    (plan,) = s.plan(0.0)
    respond(s, plan, {A: b"", B: b""}, 0.1, preferred={A: LOCAL})
    s.on_metadata({A: (LEADER, 5), B: (LEADER, 5)}, brokers=[0, 1])
    assert nodes(s.plan(0.2)) == {LEADER: {A, B}}


# -- the driver ----------------------------------------------------------------------------


class ReplicaPlane:
    """Leader 0 names replica 2 for A; replica 2 serves records until it is "stopped"."""

    def __init__(self) -> None:
        self.sent: list[int] = []
        self.replica_up = True
        self.log = [f"r{i}".encode() for i in range(9)]

    @property
    def request_timeout(self) -> float:
        return 30.0

    async def metadata(self, topics: Iterable[str]) -> ClusterView:
        return ClusterView({A: (LEADER, 5)}, {A.topic: 1}, frozenset({0, 1, 2}))

    async def list_offsets(
        self,
        node_id: int,
        timestamps: Mapping[TopicPartition, int],
        *,
        isolation_level: int = 0,
        leader_epochs: Mapping[TopicPartition, int] | None = None,
    ) -> tuple[dict[TopicPartition, ListedOffset], dict[TopicPartition, int]]:
        return {tp: ListedOffset(0, -1) for tp in timestamps}, {}

    async def fetch(self, plan: FetchPlan) -> FetchedResponse:
        self.sent.append(plan.node_id)
        offset = plan.session.fetching[A].fetch_offset
        if plan.node_id == LOCAL and not self.replica_up:
            raise BrokerUnreachableError("replica 2 is down")
        if offset >= len(self.log):
            await asyncio.Event().wait()  # caught up: a long poll
        if plan.node_id == LEADER and self.replica_up:
            part = FetchedPartition(A, 0, 9, 9, preferred_read_replica=LOCAL)
        else:
            records = batch(self.log[offset : offset + 3], offset)
            part = FetchedPartition(A, 0, 9, 9, records=records)
            if plan.node_id == LOCAL and offset + 3 >= 6:
                self.replica_up = False  # it goes down after serving up to offset 6
        return FetchedResponse(0, 0, [part])


async def test_the_driver_reads_from_the_replica_falls_back_and_counts_per_node() -> None:
    plane = ReplicaPlane()
    state = ConsumerState(FetchConfig(auto_offset_reset="earliest"))
    registry = MetricsRegistry()

    async def committed(parts: object) -> dict[TopicPartition, int | None]:
        return {A: None}

    fetcher = Fetcher(state, plane, committed, metrics=registry)  # type: ignore[arg-type]
    state.add([A])
    fetcher.start()
    got: list[bytes] = []
    try:
        async with asyncio.timeout(10):
            while len(got) < 9:
                waiter = fetcher.data_waiter()
                if not state.has_records():
                    await waiter
                got.extend(r.value for r in state.collect(100, 0.0).get(A, []))
    finally:
        await fetcher.stop()
    assert got == plane.log  # each record once, in order
    # leader (names 2), replica twice (0-2, 3-5), replica down, leader serves 6-8.
    assert plane.sent[:5] == [LEADER, LOCAL, LOCAL, LOCAL, LEADER]
    metrics = registry.node_metrics()
    assert metrics[LOCAL]["records-fetched-total"] == 6
    assert metrics[LEADER]["records-fetched-total"] == 3
    assert metrics[LEADER]["fetch-total"] == 2  # the failed fetch to 2 is not an answer
    assert metrics[LOCAL]["bytes-fetched-total"] > 0


# -- the wire ------------------------------------------------------------------------------


@pytest.mark.parametrize("preferred", [0, 2, -1])
async def test_rack_id_goes_out_and_the_preferred_replica_comes_back(preferred: int) -> None:
    transport = ScriptedTransport(topics={"t": 1})
    transport.on(
        "Fetch",
        lambda request: {
            "throttle_time_ms": 0, "error_code": 0, "session_id": 0,
            "responses": [{"topic": "t", "partitions": [{
                "partition_index": 0, "error_code": 0, "high_watermark": 4,
                "last_stable_offset": 4, "log_start_offset": 0,
                "aborted_transactions": None, "preferred_read_replica": preferred,
                "records": None,
            }]}],
        },
    )  # fmt: skip
    plane = DataPlane(transport, client_rack="r2")
    fetch = {A: PartitionFetch(0, 1000, 5)}
    plan = FetchPlan(1, SessionRequest(0, 0, True, fetch, (), fetch), {A: 0}, 1000, 1, 0, 0)
    response = await plane.fetch(plan)
    (body,) = transport.named("Fetch")
    assert body.rack_id == "r2"
    assert response.partitions[0].preferred_read_replica == preferred
