"""RawClient: a bare Kafka connection for tests that drive the protocol by hand.

::

    async with RawClient(broker.bootstrap) as client:
        resp = await client.request("JoinGroup", None, {...})   # version negotiated

It works against any broker (the embedded one, Apache Kafka, Tansu): requests are encoded from
dicts and responses decoded with kafka-python's classes (:mod:`aiogroup.testing.wire`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Mapping
from typing import Any

from aiogroup.errors import ConfigurationError, RemoteProtocolError
from aiogroup.testing import wire

__all__ = ["RawClient"]


class RawClient:
    """A bare Kafka connection for tests that drive the protocol by hand.

    ``await client.request("JoinGroup", 5, {...})`` encodes the request from a dict with
    kafka-python's classes and returns the decoded response object; with ``None`` for the
    version the client negotiates it (ApiVersions, once per connection): the highest version
    both the broker and the embedded broker's codecs speak. Requests on one client are answered
    in order (one connection), so concurrent members need one client each.
    """

    def __init__(self, bootstrap: str, *, client_id: str = "aiogroup-raw") -> None:
        host, _, port = bootstrap.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._correlation = itertools.count(1)
        self._versions: dict[int, tuple[int, int]] | None = None

    async def broker_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ApiVersions answer (asked once, with v0, which every broker speaks)."""
        if self._versions is None:
            resp = await self.request("ApiVersions", 0, {})
            if resp.error_code:
                raise RemoteProtocolError(f"ApiVersions failed with error {resp.error_code}")
            self._versions = {
                int(k.api_key): (int(k.min_version), int(k.max_version)) for k in resp.api_keys
            }
        return self._versions

    async def version(self, api: str | int, at_most: int | None = None) -> int:
        """The highest version of ``api`` both sides speak, capped at ``at_most`` (for a
        caller that builds the request in the shape of older versions); ``ConfigurationError``
        if there is none."""
        api_key = api if isinstance(api, int) else wire.API_KEYS_BY_NAME[api]
        ours = wire.SUPPORTED_VERSIONS.get(api_key)
        if ours is not None and at_most is not None:
            ours = (ours[0], min(ours[1], at_most))
        theirs = (await self.broker_versions()).get(api_key)
        if ours is None or theirs is None or max(ours[0], theirs[0]) > min(ours[1], theirs[1]):
            raise ConfigurationError(
                f"no common version of {wire.API_NAMES.get(api_key, api_key)}: "
                f"ours {ours}, the broker's {theirs}"
            )
        return min(ours[1], theirs[1])

    async def connect(self) -> RawClient:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def close(self) -> None:
        self._versions = None
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def __aenter__(self) -> RawClient:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send_raw(self, data: bytes) -> None:
        if self._writer is None:
            raise ConfigurationError("RawClient is not connected")
        self._writer.write(data)
        await self._writer.drain()

    async def read_frame(self) -> bytes:
        """One response payload (without its length prefix); EOF raises IncompleteReadError."""
        if self._reader is None:
            raise ConfigurationError("RawClient is not connected")
        size = wire.frame_size(await self._reader.readexactly(4))
        return await self._reader.readexactly(size)

    async def request(
        self,
        api: str | int,
        version: int | None,
        values: Mapping[str, Any],
        timeout: float = 30.0,
        *,
        at_most: int | None = None,
    ) -> Any:
        """One request; ``version`` None negotiates it (capped at ``at_most``)."""
        api_key = api if isinstance(api, int) else wire.API_KEYS_BY_NAME[api]
        if version is None:
            version = await self.version(api_key, at_most)
        async with self._lock:
            correlation_id = next(self._correlation)
            frame = wire.encode_request(
                api_key, version, values, correlation_id=correlation_id, client_id=self.client_id
            )
            await self.send_raw(frame)
            async with asyncio.timeout(timeout):
                payload = await self.read_frame()
        response = wire.decode_response(api_key, version, payload)
        got = response.header.correlation_id
        if got != correlation_id:
            raise RemoteProtocolError(f"correlation id {got} != {correlation_id}")
        return response
