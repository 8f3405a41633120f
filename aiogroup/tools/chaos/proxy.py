"""A TCP proxy in front of one broker that can cut a client's connections.

The embedded broker cuts connections itself (``broker.faults.cut``); Apache Kafka and Tansu
cannot. For them the chaos runner puts this proxy between the members and the broker and makes
the broker advertise the proxy's address, so every connection a member opens (bootstrap,
coordinator, fetch) passes through it. The proxy reads the ``client_id`` of the first request
on each connection (request header v1+: api_key, api_version, correlation_id, then a nullable
int16-length string) and :meth:`CuttingProxy.cut` closes both sides of that client's
connections at once, as a network failure would.

It runs its own event loop in a daemon thread; every method is called from any other thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from aiogroup.testing.loop_thread import start_loop_thread, stop_loop_thread

__all__ = ["CuttingProxy", "client_id_of"]

log = logging.getLogger(__name__)

#: Size (4) + api_key (2) + api_version (2) + correlation_id (4) + client_id length (2).
_HEADER = 14
_PUMP_BYTES = 65536


def client_id_of(frame_start: bytes) -> str | None:
    """The client id of a Kafka request that starts with ``frame_start`` (size prefix included),
    or None if more bytes are needed. An absent (null) client id is ``""``."""
    if len(frame_start) < _HEADER:
        return None
    (length,) = struct.unpack_from(">h", frame_start, 12)
    if length < 0:
        return ""
    if len(frame_start) < _HEADER + length:
        return None
    return frame_start[_HEADER : _HEADER + length].decode("utf-8", "replace")


@dataclass(eq=False)
class _Pair:
    conn_id: int
    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter | None = None
    client_id: str | None = None
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None and not writer.transport.is_closing():
                writer.transport.abort()


class CuttingProxy:
    """Forward ``127.0.0.1:port`` to ``upstream_host:upstream_port``; cut clients on demand."""

    def __init__(self, upstream_host: str, upstream_port: int, *, port: int = 0) -> None:
        self.upstream_host = upstream_host
        self.upstream_port = upstream_port
        self.host = "127.0.0.1"
        self.port = port
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._pairs: dict[int, _Pair] = {}
        self._ids = itertools.count(1)
        #: Connections cut so far, by client id.
        self.cuts: dict[str, int] = {}

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> CuttingProxy:
        if self._thread is not None:
            return self
        async def boot() -> asyncio.Server:
            return await asyncio.start_server(
                self._accept, self.host, self.port, reuse_address=True
            )

        self._loop, self._thread, server = start_loop_thread(
            boot, name="aiogroup-chaos-proxy", timeout=10
        )
        self._server = server
        self.port = int(server.sockets[0].getsockname()[1])
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def close() -> None:
            if self._server is not None:
                self._server.close()
            for pair in list(self._pairs.values()):
                pair.abort()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), loop).result(10)
        stop_loop_thread(loop, thread, 10)
        self._loop = self._thread = None

    def __enter__(self) -> CuttingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ cutting

    def cut(self, client_id: str) -> int:
        """Close every connection whose first request named ``client_id``; how many."""
        return self._call(lambda: self._cut(lambda p: p.client_id == client_id, client_id))

    def cut_all(self) -> int:
        """Close every connection through the proxy; how many."""
        return self._call(lambda: self._cut(lambda p: True, "*"))

    def connections(self, client_id: str | None = None) -> int:
        """Open connections (of ``client_id``, or all)."""
        return self._call(
            lambda: sum(
                1 for p in self._pairs.values() if client_id is None or p.client_id == client_id
            )
        )

    def _call(self, fn: Callable[[], int]) -> int:
        loop = self._loop
        if loop is None:
            raise RuntimeError("the proxy is not running")

        async def run() -> int:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(10)

    def _cut(self, which: Callable[[_Pair], bool], label: str) -> int:
        victims = [p for p in self._pairs.values() if which(p)]
        for pair in victims:
            pair.abort()
            for task in pair.tasks:
                task.cancel()
        self.cuts[label] = self.cuts.get(label, 0) + len(victims)
        return len(victims)

    # ------------------------------------------------------------------ forwarding

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        pair = _Pair(next(self._ids), writer)
        self._pairs[pair.conn_id] = pair
        try:
            try:
                up_reader, up_writer = await asyncio.wait_for(
                    asyncio.open_connection(self.upstream_host, self.upstream_port), 10
                )
            except (OSError, TimeoutError):
                return  # the broker is down: the client sees its connection close
            pair.upstream = up_writer
            inbound = asyncio.ensure_future(self._pump(reader, up_writer, pair, sniff=True))
            outbound = asyncio.ensure_future(self._pump(up_reader, writer, pair, sniff=False))
            pair.tasks = [inbound, outbound]
            await asyncio.wait(pair.tasks, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pass
        finally:
            for task in pair.tasks:
                task.cancel()
            pair.abort()
            self._pairs.pop(pair.conn_id, None)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pair: _Pair,
        *,
        sniff: bool,
    ) -> None:
        head = b""
        with contextlib.suppress(OSError, asyncio.CancelledError, ConnectionError):
            while True:
                data = await reader.read(_PUMP_BYTES)
                if not data:
                    return
                if sniff and pair.client_id is None:
                    head += data
                    pair.client_id = client_id_of(head)
                    if len(head) > 4096 and pair.client_id is None:
                        pair.client_id = ""
                writer.write(data)
                await writer.drain()
