"""``aiogroup group describe|watch`` on a KIP-848 consumer group (Kafka 4.x): DescribeGroups
calls such a group Dead with no members, which used to read as "does not exist"; the inspector
asks ConsumerGroupDescribe and shows the members, their epochs and assignment (issue 25.4)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid

import pytest

from aiogroup.inspector import Step, assess, describe_group
from aiogroup.testing.fixtures import apache_kafka4  # noqa: F401 - the session fixture, by name
from aiogroup.testing.launchers.kafka import KafkaBroker
from aiogroup.testing.peers import peer_command

pytestmark = [pytest.mark.timeout(180), pytest.mark.kafka4, pytest.mark.peers]

PARTITIONS = 4


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup", "group", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_consumer_group_of_java_members_is_seen_as_it_is(
    apache_kafka4: KafkaBroker,  # noqa: F811
    java_peer: list[str],
) -> None:
    tag = uuid.uuid4().hex[:8]
    topic, group = f"orders-{tag}", f"kip848-{tag}"
    apache_kafka4.create_topic(topic, PARTITIONS)
    peers = [
        subprocess.Popen(
            peer_command("java", bootstrap=apache_kafka4.bootstrap, group=group, topic=topic,
                         name=f"java-{i}", protocol="consumer"),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i in range(2)
    ]
    try:
        # The group exists once a member's first heartbeat reached the coordinator; before
        # that the command would rightly say it does not (exit 3).
        async with asyncio.timeout(60):
            while not (await describe_group(apache_kafka4.bootstrap, group)).consumer_protocol:
                await asyncio.sleep(0.2)  # polling the coordinator with a bound
        code, text, err = await _cli(
            "watch", group, "--bootstrap", apache_kafka4.bootstrap, "--members", "2",
            "--until", "safe", "--interval", "0.3", "--timeout", "90",
        )  # fmt: skip
        assert code == 0, (text, err)
        assert "does not exist" not in text and "reached: next bounce safe" in text
        d = await describe_group(apache_kafka4.bootstrap, group)
        assert d.consumer_protocol and d.stable and d.protocol == "uniform"
        assert sorted(m.client_id for m in d.members) == ["java-0", "java-1"]
        assigned = [tp for m in d.members for tp in sorted(m.assignment or ())]
        assert sorted(tp.partition for tp in assigned) == list(range(PARTITIONS))
        assert all(m.member_epoch == d.group_epoch for m in d.members)
        a = assess(d, expected_members=2)
        assert a.step is Step.CONSUMER and a.safe
        code, text, err = await _cli("describe", group, "--bootstrap", apache_kafka4.bootstrap)
        assert code == 0, err
        assert "KIP-848" in text and "java-0" in text and "java-1" in text
        assert f"group epoch {d.group_epoch}" in text
    finally:
        for p in peers:
            p.terminate()
        for p in peers:
            p.wait(30)
