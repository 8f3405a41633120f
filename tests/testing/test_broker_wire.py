"""Wire-level behaviour of the embedded broker: headers, ApiVersions, and bad input.

Bad input (malformed frames, unknown API keys, huge length prefixes, truncated requests) must
close only the offending connection, be recorded in ``broker.faults.events`` and never disturb
the server or other connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import uuid
from collections.abc import AsyncIterator

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from aiogroup.testing import wire
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def broker() -> AsyncIterator[EmbeddedBroker]:
    async with EmbeddedBroker(topics={"t": 2}) as b:
        yield b


async def closed_by_peer(reader: asyncio.StreamReader, timeout: float = 5.0) -> bool:
    """True once the server has closed the connection (EOF or reset), bounded."""
    try:
        async with asyncio.timeout(timeout):
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    return True
    except (ConnectionResetError, BrokenPipeError):
        return True


async def still_serving(broker: EmbeddedBroker, other: RawClient) -> None:
    """The server and an unrelated, already-open connection both still answer."""
    resp = await other.request("ApiVersions", 3, {"client_software_name": "t"})
    assert resp.error_code == 0
    async with RawClient(broker.bootstrap) as fresh:
        meta = await fresh.request("Metadata", 12, {"topics": None})
        assert [t.name for t in meta.topics] == ["t"]


BAD_INPUTS = {
    "huge length prefix": struct.pack(">i", 0x7FFFFFFF),
    "negative length prefix": struct.pack(">i", -5),
    "unknown api key": struct.pack(">ihhih", 10, 999, 0, 7, -1),
    "unserved api key": struct.pack(">ihhih", 10, 4, 0, 7, -1),  # LeaderAndIsr
    "unsupported version": struct.pack(">ihhih", 10, 11, 42, 7, -1),
    "header too short": struct.pack(">i", 3) + b"\x00\x03\x00",
    "garbage body": struct.pack(">ihhih", 14, 3, 12, 7, -1) + b"\xff\xff\xff\xff",
    "bad utf-8": struct.pack(">ihhih", 13, 11, 0, 7, 2) + b"\xff\xfe" + b"\x00",
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
async def test_bad_frame_closes_only_that_connection(broker: EmbeddedBroker, name: str) -> None:
    async with RawClient(broker.bootstrap, client_id="bystander") as other:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        writer.write(BAD_INPUTS[name])
        await writer.drain()
        assert await closed_by_peer(reader)
        writer.close()
        closed = broker.faults.events_of("closed")
        assert len(closed) == 1, broker.faults.events
        await still_serving(broker, other)


async def test_truncated_request_is_logged_and_closed(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap) as other:
        reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
        frame = wire.encode_request(3, 12, {"topics": None}, correlation_id=1)
        writer.write(frame[:-3])  # announces more bytes than it sends
        await writer.drain()
        writer.write_eof()
        assert await closed_by_peer(reader)
        writer.close()
        (event,) = broker.faults.events_of("closed")
        assert "truncated request" in event.detail
        await still_serving(broker, other)


async def test_huge_length_is_refused_before_allocation(broker: EmbeddedBroker) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", broker.port)
    writer.write(struct.pack(">i", 200 * 1024 * 1024))
    await writer.drain()
    # The server does not wait for 200 MiB: it refuses on the prefix alone.
    assert await closed_by_peer(reader)
    writer.close()
    (event,) = broker.faults.events_of("closed")
    assert "frame size" in event.detail


async def test_frame_limit_is_configurable() -> None:
    async with EmbeddedBroker(max_frame_bytes=64) as small:
        async with RawClient(small.bootstrap) as client:
            with pytest.raises((asyncio.IncompleteReadError, ConnectionError)):
                await client.request("CreateTopics", 7, {"topics": [{"name": "x" * 100}]})
        assert small.faults.events_of("closed")


async def test_api_versions_v3_uses_response_header_v0(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap) as client:
        frame = wire.encode_request(18, 3, {"client_software_name": "x"}, correlation_id=77)
        await client.send_raw(frame)
        payload = await client.read_frame()
    # KIP-511: correlation id, then the body at once (no tagged-field byte of header v1).
    correlation_id, error_code = struct.unpack_from(">ih", payload, 0)
    assert (correlation_id, error_code) == (77, 0)
    body = ApiVersionsResponse.decode(payload[4:], version=3)
    advertised = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert advertised == wire.SUPPORTED_VERSIONS


async def test_unknown_api_versions_version_gets_v0_error_and_its_own_versions(
    broker: EmbeddedBroker,
) -> None:
    async with RawClient(broker.bootstrap) as client:
        # A future ApiVersions version: header v2 layout, body we cannot know.
        await client.send_raw(struct.pack(">ihhih", 11, 18, 99, 5, -1) + b"\x00")
        payload = await client.read_frame()
        body = ApiVersionsResponse.decode(payload[4:], version=0)
        assert struct.unpack_from(">i", payload, 0)[0] == 5
        assert body.error_code == 35  # UNSUPPORTED_VERSION
        # Kafka 2.4+ lists only ApiVersions' own versions (KIP-511; live 3.9.1 and 4.1.1).
        listed = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert listed == {18: wire.SUPPORTED_VERSIONS[18]}
        # The connection stays usable, as KIP-511 intends (the client retries with v0).
        again = await client.request("ApiVersions", 0, {})
        assert again.error_code == 0


async def test_flexible_and_legacy_headers_round_trip(broker: EmbeddedBroker) -> None:
    async with RawClient(broker.bootstrap) as client:
        for version in (0, 1, 8, 9, 12):  # v9+ flexible: request header v2, response header v1
            meta = await client.request("Metadata", version, {"topics": [{"name": "t"}]})
            assert meta.topics[0].name == "t"
            assert [p.partition_index for p in meta.topics[0].partitions] == [0, 1]
            assert meta.brokers[0].port == broker.port


async def test_decode_request_never_leaks_low_level_errors() -> None:
    frame = wire.encode_request(11, 5, {"group_id": "g", "protocols": []})[4:]
    for cut in range(len(frame)):
        with contextlib.suppress(wire.MalformedRequestError):
            wire.decode_request(frame[:cut])


async def test_metadata_auto_creation_rules() -> None:
    async with (
        EmbeddedBroker(auto_create_topics=False, num_partitions=3) as off,
        RawClient(off.bootstrap) as client,
    ):
        meta = await client.request("Metadata", 12, {"topics": [{"name": "x"}]})
        assert meta.topics[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    async with EmbeddedBroker(num_partitions=3) as on, RawClient(on.bootstrap) as client:
        refused = await client.request(
            "Metadata", 12, {"topics": [{"name": "x"}], "allow_auto_topic_creation": False}
        )
        assert refused.topics[0].error_code == 3
        bad = await client.request("Metadata", 12, {"topics": [{"name": "bad name!"}]})
        assert bad.topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION
        made = await client.request("Metadata", 12, {"topics": [{"name": "x"}]})
        assert made.topics[0].error_code == 0 and len(made.topics[0].partitions) == 3
        assert made.topics[0].topic_id == on.log.topics["x"].topic_id
        everything = await client.request("Metadata", 0, {"topics": []})  # v0: [] means all
        assert [t.name for t in everything.topics] == ["x"]
        none = await client.request("Metadata", 1, {"topics": []})  # v1+: [] means none
        assert none.topics == []


async def test_metadata_by_topic_id() -> None:
    """v12+ (KIP-516): topics asked for by id, as a KIP-848 member (librdkafka) resolves the
    ids of its assignment; an unknown id is UNKNOWN_TOPIC_ID with no name and creates nothing."""
    async with EmbeddedBroker(topics={"t": 2}) as b, RawClient(b.bootstrap) as client:
        known = b.log.topics["t"].topic_id
        unknown = uuid.uuid4()
        meta = await client.request(
            "Metadata", 12, {"topics": [{"name": None, "topic_id": i} for i in (known, unknown)]}
        )
        found, missing = meta.topics
        assert (found.error_code, found.name, found.topic_id) == (0, "t", known)
        assert [p.partition_index for p in found.partitions] == [0, 1]
        assert (missing.error_code, missing.name, missing.topic_id) == (100, None, unknown)
        assert list(b.log.topics) == ["t"]
        by_name = await client.request("Metadata", 12, {"topics": [{"name": "t"}]})
        assert by_name.topics[0].topic_id == known
