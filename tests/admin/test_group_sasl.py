"""``aiogroup group describe`` over SASL/PLAIN, against Apache Kafka 2.3 with a SASL listener:
the security options reach aiokafka's client as GroupMember's do, and a wrong password is a
clear error (exit status 2), not a hang."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator

import pytest

from aiogroup.client import GroupMember
from aiogroup.testing.launchers.kafka import KafkaBroker, Listener, kafka_available

pytestmark = [pytest.mark.kafka23, pytest.mark.timeout(240)]

JAAS = """KafkaServer {
  org.apache.kafka.common.security.plain.PlainLoginModule required
  username="admin" password="admin-secret"
  user_admin="admin-secret" user_alice="alice-secret";
};
"""


@pytest.fixture(scope="module")
def sasl_kafka() -> Iterator[KafkaBroker]:
    ok, reason = kafka_available()
    if not ok:
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"Apache Kafka 2.3 cannot run here: {reason}", pytrace=False)
        pytest.skip(f"Apache Kafka 2.3 cannot run here: {reason}")
    with KafkaBroker(listeners=[Listener("SASL_PLAINTEXT")], jaas=JAAS,
                     config={"sasl.enabled.mechanisms": "PLAIN"}) as kafka:
        yield kafka


async def _cli(*args: str, password: str) -> tuple[int, str, str]:
    env = {**os.environ, "AIOGROUP_SASL_PASSWORD": password}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup", "group", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_describe_over_sasl_plain(sasl_kafka: KafkaBroker) -> None:
    sasl_kafka.create_topic("secure", 2)
    bootstrap = f"127.0.0.1:{sasl_kafka.ports['SASL_PLAINTEXT']}"
    group_id = f"sasl-{uuid.uuid4().hex[:8]}"
    async with GroupMember(bootstrap, group_id, topics=["secure"], client_id="alice-1",
                           session_timeout_ms=10_000, heartbeat_interval_ms=500,
                           security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                           sasl_plain_username="alice",
                           sasl_plain_password="alice-secret") as member:
        await member.wait_for_assignment(timeout=60)
        args = ("describe", group_id, "--bootstrap", bootstrap,
                "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN",
                "--sasl-username", "alice", "--request-timeout-ms", "5000")
        code, out, err = await _cli(*args, password="alice-secret")
        assert code == 0, err
        assert "state        Stable" in out and "alice-1" in out
        assert "secure[2]" in out
        code, out, err = await _cli(*args, password="wrong")
    assert code == 2
    assert "aiogroup group:" in err and out == "", err
    assert "uthentication" in err, err
