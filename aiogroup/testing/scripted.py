"""A transport whose broker is a script: the driver tested with bytes, no sockets.

:class:`ScriptedTransport` is a :class:`~aiogroup.client.transport.Transport` (give it to
``GroupMember(..., transport=...)``) that sends nothing over a network. Every request still
takes the real path: its version is chosen against the versions the script's broker
advertises, it is encoded to bytes, and those bytes are decoded as a broker would decode them;
the script's answer is encoded to bytes at that version (or given as raw bytes: truncated,
malformed, an error code no broker uses) and decoded by the request as a real answer is. So a
test can say "answer this SyncGroup with these 7 bytes" and watch the member cope, as httpcore
tests its connections against a mock backend.

    transport = ScriptedTransport("billing", topics={"orders": 2})
    transport.on("JoinGroup", lambda request: {...})     # a dict: the response's fields
    transport.on("SyncGroup", lambda request: b"\\x00\\x00\\x00\\x07\\x00")  # raw bytes
    async with GroupMember("127.0.0.1:9", "billing", topics=["orders"],
                           transport=transport) as member:
        ...
    transport.requests        # every request as the broker decoded it, in order

Unscripted APIs get sensible answers: FindCoordinator names node 0, Metadata lists
``topics``, Heartbeat, LeaveGroup and OffsetCommit succeed, OffsetFetch finds nothing
committed. A handler may raise :class:`~aiogroup.errors.BrokerUnreachableError` to play a
broker that went away.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping
from typing import Any

from aiogroup.client.transport import Request, Transport
from aiogroup.testing.wire import (
    API_KEYS_BY_NAME,
    SUPPORTED_VERSIONS,
    decode_request,
    encode_response,
)
from aiogroup.testing.wire import Request as DecodedRequest

__all__ = ["Answer", "DecodedRequest", "ScriptedTransport"]

#: What a handler returns: the response's fields (encoded at the request's version), or the
#: raw bytes of the answer after its length prefix (response header and body).
Answer = Mapping[str, Any] | bytes
Handler = Callable[[DecodedRequest], Answer]


class ScriptedTransport(Transport):
    """A transport answering from handlers per API, through the real encoders (see module)."""

    def __init__(
        self,
        group_id: str = "g",
        *,
        topics: Mapping[str, int] | None = None,
        versions: Mapping[int, tuple[int, int]] | None = None,
        client_id: str = "aiogroup",
        request_timeout_ms: int = 30_000,
    ) -> None:
        # The underlying client is built (for the group APIs' bookkeeping) but never started.
        super().__init__(
            "127.0.0.1:9", group_id, client_id=client_id, request_timeout_ms=request_timeout_ms
        )
        #: Partition counts the default Metadata answer lists.
        self.topics = dict(topics or {})
        #: The API versions the scripted broker advertises (default: every one aiogroup's
        #: embedded broker serves).
        self.versions = dict(versions or SUPPORTED_VERSIONS)
        #: Every request sent, as the broker decoded it.
        self.requests: list[DecodedRequest] = []
        self._handlers: dict[str, Handler] = {**_DEFAULTS, "Metadata": self._metadata}
        self._correlation = 0

    def on(self, api: str, handler: Handler) -> None:
        """Answer requests of ``api`` (``"JoinGroup"``, ...) with ``handler(request)``."""
        if api not in API_KEYS_BY_NAME:
            raise ValueError(f"unknown API {api!r}")
        self._handlers[api] = handler

    def named(self, api: str) -> list[Any]:
        """The decoded bodies of the requests of ``api`` sent so far."""
        return [r.body for r in self.requests if r.api_name == api]

    # -- the seam ------------------------------------------------------------------------

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def any_node(self) -> int:
        return 0

    def address(self, node_id: int) -> str | None:
        return f"scripted:{node_id}"

    async def refresh_metadata(self) -> None:
        pass

    async def send(
        self,
        node_id: int | None,
        request: Request,
        *,
        coordination: bool = False,
        timeout: float | None = None,
    ) -> Any:
        self._correlation += 1
        prepared = request.prepare(self.versions)
        header = prepared.build_request_header(self._correlation, self.client_id).encode()
        decoded = decode_request(header + prepared.encode(), self.versions)
        self.requests.append(decoded)
        handler = self._handlers.get(request.api)
        if handler is None:
            raise AssertionError(f"the script has no answer for {request.api}")
        answer = handler(decoded)
        if not isinstance(answer, bytes):
            framed = encode_response(
                decoded.api_key, decoded.api_version, decoded.correlation_id, answer
            )
            answer = framed[4:]
        prepared.parse_response_header(io.BytesIO(answer))
        return request.answer(prepared.decode(io.BytesIO()))

    def _metadata(self, request: DecodedRequest) -> Answer:
        return {
            "brokers": [{"node_id": 0, "host": "scripted", "port": 0}],
            "controller_id": 0,
            "topics": [
                {
                    "error_code": 0,
                    "name": name,
                    "partitions": [
                        {"error_code": 0, "partition_index": p, "leader_id": 0,
                         "replica_nodes": [0], "isr_nodes": [0]}
                        for p in range(count)
                    ],
                }
                for name, count in sorted(self.topics.items())
            ],
        }  # fmt: skip


def _find_coordinator(request: DecodedRequest) -> Answer:
    if request.api_version >= 4:
        keys = request.body.coordinator_keys
        return {"coordinators": [{"key": k, "node_id": 0, "host": "scripted", "port": 0,
                                  "error_code": 0} for k in keys]}  # fmt: skip
    return {"error_code": 0, "node_id": 0, "host": "scripted", "port": 0}


def _offset_commit(request: DecodedRequest) -> Answer:
    return {"topics": [{"name": t.name, "partitions": [
        {"partition_index": p.partition_index, "error_code": 0} for p in t.partitions]}
        for t in request.body.topics]}  # fmt: skip


def _offset_fetch(request: DecodedRequest) -> Answer:
    return {"error_code": 0, "topics": [{"name": t.name, "partitions": [
        {"partition_index": p, "committed_offset": -1, "metadata": "", "error_code": 0}
        for p in t.partition_indexes]} for t in request.body.topics or ()]}  # fmt: skip


_DEFAULTS: dict[str, Handler] = {
    "FindCoordinator": _find_coordinator,
    "Heartbeat": lambda request: {"error_code": 0},
    "LeaveGroup": lambda request: {"error_code": 0, "members": []},
    "OffsetCommit": _offset_commit,
    "OffsetFetch": _offset_fetch,
}
