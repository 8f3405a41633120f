"""The transport: version negotiation and the aiokafka adapter (no broker), then Tansu."""

from __future__ import annotations

import asyncio
import io
import struct
import time
import uuid
from collections.abc import Iterator

import pytest
from kafka.protocol.consumer.group import HeartbeatRequest, HeartbeatResponse, JoinGroupRequest

from aiogroup.client.transport import (
    API_VERSIONS,
    CoordinatorUnreachableError,
    Request,
    Transport,
    UnsupportedApiVersionError,
)
from aiogroup.errors import BrokerUnreachableError, LocalProtocolError, MemberIdRequiredError
from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.protocol.types import TopicPartition

HEARTBEAT_KEY = HeartbeatRequest.API_KEY


def _heartbeat_request() -> Request:
    return Request(
        "Heartbeat",
        HeartbeatRequest,
        HeartbeatResponse,
        lambda v: HeartbeatRequest(
            group_id="g", generation_id=3, member_id="m", group_instance_id=None
        ),
    )


@pytest.mark.parametrize(
    ("broker", "expected"),
    [((0, 4), 4), ((0, 2), 2), ((0, 9), API_VERSIONS["Heartbeat"][1]), ((1, 1), 1)],
)
def test_version_is_the_highest_both_sides_speak(broker: tuple[int, int], expected: int) -> None:
    prepared = _heartbeat_request().prepare({HEARTBEAT_KEY: broker})
    assert expected == prepared.API_VERSION
    # The body is what kafka-python encodes at that version, and decodes back.
    decoded = HeartbeatRequest.decode(prepared.encode(), version=expected)
    assert (decoded.group_id, decoded.generation_id, decoded.member_id) == ("g", 3, "m")


def test_no_common_version_is_a_configuration_error() -> None:
    with pytest.raises(UnsupportedApiVersionError):
        _heartbeat_request().prepare({HEARTBEAT_KEY: (5, 7)})
    with pytest.raises(UnsupportedApiVersionError):
        _heartbeat_request().prepare({})


def test_header_is_flexible_exactly_on_flexible_versions() -> None:
    for version, flexible in [(3, False), (4, True)]:
        prepared = _heartbeat_request().prepare({HEARTBEAT_KEY: (0, version)})
        header = prepared.build_request_header(correlation_id=42, client_id="c").encode()
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", header)
        assert (api_key, api_version, correlation_id) == (HEARTBEAT_KEY, version, 42)
        # client_id is a non-compact string in every header version; v2 adds empty tags.
        assert header[8:11] == b"\x00\x01c"
        assert header[11:] == (b"\x00" if flexible else b"")


def test_response_round_trip_through_the_adapter() -> None:
    prepared = _heartbeat_request().prepare({HEARTBEAT_KEY: (0, 4)})
    response = HeartbeatResponse(throttle_time_ms=0, error_code=27, version=4)
    response.with_header(correlation_id=7)
    frame = bytes(response.encode(header=True))
    header = prepared.parse_response_header(io.BytesIO(frame))
    assert header.correlation_id == 7
    assert prepared.RESPONSE_TYPE.decode(io.BytesIO(b"")).error_code == 27


@pytest.mark.parametrize(
    "garbage", [b"", b"\x00\x00", b"\x00\x00\x00\x07", b"\x00\x00\x00\x07\xff"]
)
def test_undecodable_response_is_kept_as_a_failure_not_raised_in_the_reader(
    garbage: bytes,
) -> None:
    prepared = _heartbeat_request().prepare({HEARTBEAT_KEY: (0, 4)})
    prepared.parse_response_header(io.BytesIO(garbage))  # must not raise into aiokafka's reader
    failed = prepared.RESPONSE_TYPE.decode(io.BytesIO(b""))
    assert not hasattr(failed, "error_code")


def test_unencodable_request_is_a_local_protocol_error() -> None:
    bad = Request(
        "Heartbeat",
        HeartbeatRequest,
        HeartbeatResponse,
        lambda v: HeartbeatRequest(group_id="g", generation_id="x", member_id="m"),
    )
    with pytest.raises(LocalProtocolError):
        bad.prepare({HEARTBEAT_KEY: (0, 4)})


def test_an_api_we_know_no_versions_of_is_our_error_not_an_unreachable_broker() -> None:
    unknown = Request("Nope", HeartbeatRequest, HeartbeatResponse, lambda v: None)
    with pytest.raises(LocalProtocolError, match="no versions of Nope"):
        unknown.prepare({12: (0, 4)})


def test_static_membership_needs_join_group_v5() -> None:
    from kafka.protocol.consumer.group import JoinGroupResponse

    def build(version: int) -> JoinGroupRequest:
        raise UnsupportedApiVersionError("static membership (KIP-345) needs JoinGroup v5+")

    request = Request("JoinGroup", JoinGroupRequest, JoinGroupResponse, build)
    with pytest.raises(UnsupportedApiVersionError):
        request.prepare({JoinGroupRequest.API_KEY: (0, 4)})


# --------------------------------------------------------------------------- against Tansu


@pytest.fixture(scope="module")
def tansu() -> Iterator[str]:
    from aiogroup.testing.launchers.tansu import TansuBroker, find_tansu

    if find_tansu() is None:
        pytest.skip("Tansu is not installed (pip install 'aiogroup[broker]')")
    with TansuBroker() as broker:
        yield broker.bootstrap


def _topic(bootstrap: str, partitions: int) -> str:
    from tests.integration.harness import create_topics, unique

    name = unique("tt")
    create_topics(bootstrap, {name: partitions})
    return name


@pytest.mark.tansu
async def test_join_sync_heartbeat_commit_fetch_leave_on_tansu(tansu: str) -> None:
    topic = _topic(tansu, 3)
    transport = Transport(tansu, f"g-{uuid.uuid4().hex[:8]}", request_timeout_ms=10_000)
    await transport.start()
    try:
        assert await transport.partitions_per_topic([topic, "no-such-topic"]) == {topic: 3}
        subscription = encode_subscription(Subscription(topics=[topic]))
        join = dict(
            group_instance_id=None,
            session_timeout_ms=6000,
            rebalance_timeout_ms=6000,
            protocols=[("range", subscription)],
        )
        # KIP-394: the first JoinGroup without a member id is answered MEMBER_ID_REQUIRED.
        first = await transport.join_group(member_id="", **join)  # type: ignore[arg-type]
        assert first.error_code == MemberIdRequiredError.code
        assert first.member_id
        joined = await transport.join_group(member_id=first.member_id, **join)  # type: ignore[arg-type]
        assert joined.error_code == 0
        assert joined.leader == joined.member_id == first.member_id
        assert [m.member_id for m in joined.members] == [first.member_id]
        assert joined.members[0].metadata == subscription

        assignment = encode_assignment(Assignment({topic: (0, 1, 2)}))
        synced = await transport.sync_group(
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            protocol_name=joined.protocol_name,
            assignments={joined.member_id: assignment},
        )
        assert (synced.error_code, synced.assignment) == (0, assignment)
        ids = dict(generation_id=joined.generation_id, member_id=joined.member_id)
        assert await transport.heartbeat(group_instance_id=None, **ids) == 0  # type: ignore[arg-type]

        offsets = {TopicPartition(topic, 0): 17, TopicPartition(topic, 2): 5}
        committed = await transport.offset_commit(offsets, group_instance_id=None, **ids)  # type: ignore[arg-type]
        assert committed.error_code == 0 and set(committed.errors) == set(offsets)
        fetched = await transport.offset_fetch([*offsets, TopicPartition(topic, 1)])
        assert fetched.error_code == 0
        assert {tp: c.offset for tp, c in fetched.offsets.items()} == {
            **offsets,
            TopicPartition(topic, 1): -1,
        }
        assert await transport.leave_group(member_id=joined.member_id) == 0
        # Gone from the group: a heartbeat with the old ids is refused.
        assert await transport.heartbeat(group_instance_id=None, **ids) != 0  # type: ignore[arg-type]
    finally:
        await transport.close()


@pytest.mark.tansu
async def test_lost_broker_raises_retriable_error_within_the_bound() -> None:
    from aiogroup.testing.launchers.tansu import TansuBroker, find_tansu

    if find_tansu() is None:
        pytest.skip("Tansu is not installed")
    broker = TansuBroker().start()
    transport = Transport(broker.bootstrap, "g-lost", request_timeout_ms=2_000)
    try:
        await transport.start()
        assert await transport.find_coordinator() is not None
        broker.stop()
        started = time.monotonic()
        with pytest.raises(CoordinatorUnreachableError):
            await transport.heartbeat(generation_id=0, member_id="m", group_instance_id=None)
        assert transport.coordinator_id is None  # forgotten: the next call rediscovers
        with pytest.raises(BrokerUnreachableError):  # no broker answers the lookup
            await asyncio.wait_for(transport.find_coordinator(), 30)
        assert time.monotonic() - started < 30
    finally:
        broker.stop()
        await transport.close()


async def test_bootstrap_failure_is_retriable_and_bounded() -> None:
    from aiogroup.testing.launchers.tansu import free_port

    transport = Transport(f"127.0.0.1:{free_port()}", "g", request_timeout_ms=1_000)
    with pytest.raises(BrokerUnreachableError) as info:
        await asyncio.wait_for(transport.start(), 30)
    assert not isinstance(info.value, CoordinatorUnreachableError)  # no coordinator involved
    await transport.close()
