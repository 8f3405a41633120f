"""Kubernetes probes for a service consuming with :class:`aiogroup.Consumer`, served from the
consumer's own event loop with the standard library.

The routes (``GET`` or ``HEAD``):

==============  ============================================================================
``/livez``      200 while ``consumer.health().live``; 503 when a restart would help: the
                application stopped asking for records, a rebalance is stuck in the member,
                the member stopped on a fatal error
``/readyz``     200 while ``consumer.health().ok``; 503 on any problem (a stalled partition, no
                coordinator, a broker unreachable, ...)
``/healthz``    the whole verdict as JSON (each problem's cause, since when, for how long, why);
                200 or 503 as ``/readyz``
``/metrics``    the consumer's metrics in Prometheus' text format (with ``prometheus_client``,
                ``pip install 'aiogroup[prometheus]'``; 404 without)
==============  ============================================================================

Why no web framework: the kubelet sends one small GET per probe period; a request line, the
headers, one answer and a closed connection are all it takes, and ``asyncio.start_server`` does
that on the loop the consumer already runs, with no thread and no dependency. Requests are
bounded (8 KiB of headers, 5 s to send them) and anything else is answered 400, 404 or 405.

Usage::

    python examples/health_service.py --bootstrap kafka:9092 --group billing --topic orders
    python examples/health_service.py --demo    # the embedded broker; prints the probes' answers

The probes' YAML for a pod is in ``docs/operating.md`` (Health).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import signal
import sys

from aiogroup import Consumer

__all__ = ["ProbeServer", "answer", "main"]

log = logging.getLogger("health_service")

#: Status lines of the answers this server gives.
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           503: "Service Unavailable"}  # fmt: skip
#: The most a request's line and headers may take, and how long the client may take to send them.
MAX_HEAD = 8192
HEAD_TIMEOUT_S = 5.0


def answer(consumer: Consumer, path: str) -> tuple[int, str, bytes]:
    """``(status, content type, body)`` for ``GET path`` (no network: tests call it too)."""
    route = path.split("?", 1)[0]
    if route in ("/livez", "/readyz", "/healthz"):
        health = consumer.health()
        good = health.live if route == "/livez" else health.ok
        body = json.dumps(health.as_dict(), sort_keys=True).encode() + b"\n"
        return (200 if good else 503), "application/json", body
    if route == "/metrics":
        try:
            from prometheus_client import CollectorRegistry, generate_latest
        except ImportError:
            return 404, "text/plain", b"install aiogroup[prometheus] for /metrics\n"
        from aiogroup.observability.exporters.prometheus import register

        registry = CollectorRegistry()
        register(consumer, registry)
        return 200, "text/plain; version=0.0.4", generate_latest(registry)
    return 404, "text/plain", b"not found\n"


class ProbeServer:
    """Serves :func:`answer` over HTTP/1.1 on ``host:port`` (port 0: any free port)."""

    def __init__(self, consumer: Consumer, host: str = "0.0.0.0", port: int = 8080) -> None:
        self.consumer = consumer
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> ProbeServer:
        self._server = await asyncio.start_server(self._serve, self.host, self.port, limit=MAX_HEAD)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> ProbeServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
            method, path, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ValueError):
            status, kind, body, method = 400, "text/plain", b"bad request\n", "GET"
        else:
            if method not in ("GET", "HEAD"):
                status, kind, body = 405, "text/plain", b"GET or HEAD only\n"
            else:
                status, kind, body = answer(self.consumer, path)
        head_out = (
            f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {kind}\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError):
            writer.write(head_out.encode("latin-1") + (b"" if method == "HEAD" else body))
            await writer.drain()
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, bytes]:
    """``GET path`` from a probe server: ``(status, body)`` (what a kubelet does)."""
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


async def consume(consumer: Consumer, stop: asyncio.Event) -> None:
    """The service's work: read and process until ``stop`` is set (here: count)."""
    processed = 0
    while not stop.is_set():
        batch = await consumer.getmany(timeout_ms=500, max_records=500)
        processed += sum(map(len, batch.values()))
    log.info("processed %d records", processed)


async def _serve(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer = Consumer(args.bootstrap, args.group, topics=[args.topic])
    async with consumer, ProbeServer(consumer, port=args.port) as probes:
        log.info("probes on :%d (/livez, /readyz, /healthz, /metrics)", probes.port)
        await consume(consumer, stop)
    return 0


async def _demo() -> int:
    """The embedded broker, a consumer, the probes on a free port: what each answers."""
    from aiogroup.testing import EmbeddedBroker

    async with EmbeddedBroker(topics={"orders": 3}) as broker:
        consumer = Consumer(broker.bootstrap, "billing", topics=["orders"])
        async with consumer:
            stop = asyncio.Event()
            work = asyncio.create_task(consume(consumer, stop))
            await consumer.member.wait_for_assignment(timeout=30)
            async with ProbeServer(consumer, host="127.0.0.1", port=0) as probes:
                for path in ("/livez", "/readyz", "/healthz"):
                    status, body = await get(probes.port, path)
                    print(f"GET {path} -> {status} {body.decode().strip()}")
            stop.set()
            await work
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--demo", action="store_true", help="run against an embedded broker")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return asyncio.run(_demo() if args.demo else _serve(args))


if __name__ == "__main__":
    sys.exit(main())
