"""examples/health_service.py over real HTTP: the probes follow the consumer's health (an
application that stops asking for records fails /livez, then passes again), the metrics are
served, and what is not a probe is refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from aiogroup import Consumer
from aiogroup.testing import EmbeddedBroker
from examples import health_service
from examples.health_service import ProbeServer, get

pytestmark = pytest.mark.timeout(120)


async def raw(port: int, request: bytes) -> int:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    status = int((await reader.read()).split(b" ", 2)[1])
    writer.close()
    return status


async def test_the_probes_follow_the_consumers_health(embedded_broker: EmbeddedBroker) -> None:
    embedded_broker.create_topic("orders", 2)
    async with Consumer(
        embedded_broker.bootstrap, "billing", topics=["orders"],
        session_timeout_ms=2000, heartbeat_interval_ms=200, max_poll_interval_ms=1500,
    ) as consumer:  # fmt: skip
        await consumer.getmany(timeout_ms=50)
        await consumer.member.wait_for_assignment(timeout=30)
        async with ProbeServer(consumer, host="127.0.0.1", port=0) as probes:
            assert (await get(probes.port, "/livez"))[0] == 200
            assert (await get(probes.port, "/readyz"))[0] == 200
            status, body = await get(probes.port, "/healthz")
            assert status == 200 and json.loads(body)["status"] == "ok"
            status, body = await get(probes.port, "/metrics")
            assert status == 200 and b"kafka_consumer_coordinator_assigned_partitions{" in body
            # The application stops asking for records: liveness fails, with the reason.
            loop = asyncio.get_running_loop()
            bound = loop.time() + 30
            while (reply := await get(probes.port, "/livez"))[0] == 200:
                assert loop.time() < bound, "liveness never failed"
                await asyncio.sleep(0.1)  # the kubelet's probe period
            status, body = reply
            verdict = json.loads(body)
            assert status == 503 and verdict["live"] is False
            assert [p["cause"] for p in verdict["problems"]] == ["not_polling"]
            assert (await get(probes.port, "/readyz"))[0] == 503
            # It asks again: it rejoins, and the probes pass.
            while (await get(probes.port, "/readyz"))[0] != 200:
                assert loop.time() < bound + 30, "never ready again"
                await consumer.getmany(timeout_ms=100)
            assert (await get(probes.port, "/livez"))[0] == 200
            assert (await get(probes.port, "/nope"))[0] == 404
            assert await raw(probes.port, b"POST /livez HTTP/1.1\r\n\r\n") == 405
            assert await raw(probes.port, b"nonsense\r\n\r\n") == 400


def test_the_demo_prints_what_each_probe_answers() -> None:
    out = subprocess.run(
        [sys.executable, str(Path(health_service.__file__)), "--demo"],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("GET ")]
    paths = [line.split(" -> ")[0] for line in lines]
    assert paths == ["GET /livez", "GET /readyz", "GET /healthz"]
    assert all(" -> 200 " in line for line in lines)
