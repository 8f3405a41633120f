"""The embedded broker's SASL authenticator alone, against a fake server (a ``SaslChannel``):
what it answers, what it refuses and when it closes, with no socket and no broker."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Mapping
from typing import Any

import pytest

from aiogroup.errors import TruncatedError
from aiogroup.testing import wire
from aiogroup.testing.embedded.auth import SaslChannel, authenticate
from aiogroup.testing.sasl import SaslCredentials, ScramClient

HANDSHAKE, API_VERSIONS, AUTHENTICATE, METADATA = 17, 18, 36, 3
PLAIN = b"\x00alice\x00pw"


class FakeChannel:
    """A connection that replays ``frames`` (payloads, or exceptions to raise), then ends unless
    ``eof`` is False (more may come: :meth:`send`), and records everything the authenticator
    does with it."""

    def __init__(self, *frames: bytes | BaseException, eof: bool = True) -> None:
        self.frames: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        for frame in frames:
            self.frames.put_nowait(frame)
        if eof:  # then the client goes away
            self.frames.put_nowait(asyncio.IncompleteReadError(b"", 4))
        self.answers: list[tuple[int, int, int, dict[str, Any]]] = []
        self.raw: list[bytes] = []
        self.client_ids: list[str] = []
        self.refused: list[str] = []
        self.closed = False

    @property
    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        return wire.SUPPORTED_VERSIONS

    def send(self, frame: bytes) -> None:
        self.frames.put_nowait(frame)

    async def read_frame(self) -> bytes:
        frame = await self.frames.get()
        if isinstance(frame, BaseException):
            raise frame
        return frame

    async def write(self, data: bytes) -> None:
        self.raw.append(data)

    async def answer(
        self, api_key: int, api_version: int, correlation_id: int, values: dict[str, Any]
    ) -> None:
        self.answers.append((api_key, api_version, correlation_id, values))

    def api_versions_answer(self, error_code: int) -> dict[str, Any]:
        return {"error_code": error_code, "api_keys": "ours"}

    def identify(self, client_id: str) -> None:
        self.client_ids.append(client_id)

    def refuse(self, why: str) -> None:
        self.refused.append(why)

    async def close(self) -> None:
        self.closed = True


def request(api_key: int, version: int, values: dict[str, Any], correlation_id: int = 1) -> bytes:
    """A request payload (the frame without its length prefix), from client ``c1``."""
    frame = wire.encode_request(
        api_key, version, values, correlation_id=correlation_id, client_id="c1"
    )
    return frame[4:]


def handshake(mechanism: str, version: int = 1, correlation_id: int = 1) -> bytes:
    return request(HANDSHAKE, version, {"mechanism": mechanism}, correlation_id)


def token(auth_bytes: bytes, correlation_id: int = 2) -> bytes:
    return request(AUTHENTICATE, 1, {"auth_bytes": auth_bytes}, correlation_id)


def unserved() -> bytes:
    """A request of an API key the broker does not serve (99)."""
    payload = bytearray(request(42, 0, {"groups_names": []}))
    payload[0:2] = struct.pack(">h", 99)
    return bytes(payload)


def credentials() -> SaslCredentials:
    creds = SaslCredentials()
    creds.set_plain("alice", "pw")
    creds.set_scram("alice", "pw")
    return creds


MECHANISMS = ("PLAIN", "SCRAM-SHA-256")


async def run(channel: FakeChannel, enabled: tuple[str, ...] = MECHANISMS) -> str | None:
    fake: SaslChannel = channel  # the fake is a SaslChannel
    return await authenticate(fake, enabled, credentials())


async def test_plain_in_sasl_authenticate_gives_the_user() -> None:
    channel = FakeChannel(handshake("PLAIN"), token(PLAIN))
    assert await run(channel) == "alice"
    (hs_key, hs_version, hs_id, hs), (au_key, _, au_id, au) = channel.answers
    assert (hs_key, hs_version, hs_id) == (HANDSHAKE, 1, 1)
    assert hs == {"error_code": 0, "mechanisms": list(MECHANISMS)}
    assert (au_key, au_id) == (AUTHENTICATE, 2)
    assert au["error_code"] == 0 and au["error_message"] is None
    assert channel.client_ids == ["c1", "c1"]
    assert not channel.refused and not channel.closed


async def test_scram_takes_two_round_trips() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    channel = FakeChannel(handshake("SCRAM-SHA-256"), token(client.first()), eof=False)
    # The client's final message depends on the server's first: feed it once it is answered.
    task = asyncio.create_task(run(channel))
    while len(channel.answers) < 2:
        await asyncio.sleep(0)
    server_first = channel.answers[1][3]["auth_bytes"]
    channel.send(token(client.final(server_first), correlation_id=3))
    assert await task == "alice"
    assert client.verify(channel.answers[2][3]["auth_bytes"])


async def test_api_versions_first_is_answered_with_the_servers_versions() -> None:
    channel = FakeChannel(request(API_VERSIONS, 0, {}), handshake("PLAIN", correlation_id=2))
    assert await run(channel) is None  # then the client went away
    assert channel.answers[0] == (API_VERSIONS, 0, 1, {"error_code": 0, "api_keys": "ours"})
    assert channel.answers[1][0] == HANDSHAKE
    assert not channel.refused


async def test_a_newer_api_versions_gets_kip_511s_answer_and_the_exchange_goes_on() -> None:
    newer = bytearray(request(API_VERSIONS, 3, {}, correlation_id=7))
    newer[2:4] = struct.pack(">h", 99)  # request_api_version
    channel = FakeChannel(bytes(newer), handshake("PLAIN", correlation_id=8), token(PLAIN, 9))
    assert await run(channel) == "alice"
    assert channel.answers[0] == (API_VERSIONS, 0, 7, {"error_code": 35, "api_keys": "ours"})


async def test_a_mechanism_not_enabled_is_answered_then_closed() -> None:
    channel = FakeChannel(handshake("SCRAM-SHA-512"))
    assert await run(channel) is None
    assert channel.answers[0][3] == {"error_code": 33, "mechanisms": list(MECHANISMS)}
    assert channel.refused == ["unsupported SASL mechanism 'SCRAM-SHA-512'"]
    assert channel.closed


async def test_a_wrong_password_is_answered_then_closed() -> None:
    channel = FakeChannel(handshake("PLAIN"), token(b"\x00alice\x00nope"))
    assert await run(channel) is None
    answer = channel.answers[1][3]
    assert answer["error_code"] == 58 and answer["error_message"]
    assert channel.refused == [f"SASL/PLAIN failed: {answer['error_message']}"]
    assert channel.closed


async def test_handshake_v0_tokens_travel_as_bare_frames() -> None:
    client = ScramClient("SCRAM-SHA-256", "alice", "pw")
    channel = FakeChannel(handshake("SCRAM-SHA-256", version=0), client.first(), eof=False)
    task = asyncio.create_task(run(channel))
    while not channel.raw:
        await asyncio.sleep(0)
    (size,) = struct.unpack(">i", channel.raw[0][:4])
    server_first = channel.raw[0][4:]
    assert size == len(server_first)
    channel.send(client.final(server_first))
    assert await task == "alice"
    assert [a[0] for a in channel.answers] == [HANDSHAKE]  # tokens were never SaslAuthenticate
    assert client.verify(channel.raw[1][4:])


async def test_a_refused_bare_token_closes_without_an_answer() -> None:
    channel = FakeChannel(handshake("PLAIN", version=0), b"\x00alice\x00nope")
    assert await run(channel) is None
    assert not channel.raw and channel.closed
    assert channel.refused[0].startswith("SASL/PLAIN failed")


@pytest.mark.parametrize(
    ("frames", "why"),
    [
        ((request(METADATA, 1, {"topics": None}),), "unexpected Metadata request"),
        ((token(PLAIN),), "unexpected SaslAuthenticate request"),  # before the handshake
        ((unserved(),), "during SASL authentication: "),
        ((wire.MalformedRequestError("bad", field="size", offset=0),), "bad frame"),
        ((TruncatedError("short", field="size", offset=0),), "bad frame"),
        ((b"\x00\x12",), "malformed request"),
    ],
)
async def test_anything_else_before_authentication_is_refused(
    frames: tuple[bytes | BaseException, ...], why: str
) -> None:
    channel = FakeChannel(*frames)
    assert await run(channel) is None
    assert len(channel.refused) == 1 and why in channel.refused[0]
    assert not channel.answers and not channel.closed  # the server closes it, abruptly


async def test_a_second_handshake_is_answered_illegal_sasl_state_then_closed() -> None:
    channel = FakeChannel(handshake("PLAIN"), handshake("PLAIN", correlation_id=2))
    assert await run(channel) is None
    assert channel.answers[1][3] == {"error_code": 34, "mechanisms": []}
    assert channel.refused == ["a second SaslHandshake"] and channel.closed


async def test_a_client_that_goes_away_is_not_refused() -> None:
    channel = FakeChannel(handshake("PLAIN"))
    assert await run(channel) is None
    assert not channel.refused and not channel.closed
