"""``aiogroup group describe`` on a live broker while a group moves to the consumer protocol
(KIP-848's online upgrade): a classic group whose leader runs a custom assignor writing
assignment user data is told blocked, and the broker indeed refuses the consumer-protocol member
with the reason; a group an aiogroup cooperative-sticky leader marks (entries, not user data) is
told upgradable and converted, and its mixed members are told apart by the protocol they speak
(ConsumerGroupDescribe v1's MemberType, as the broker answers it)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib.util
import json
import sys
import uuid
from collections.abc import Callable, Mapping

import pytest

from aiogroup import Consumer
from aiogroup.assignors.range import RangeAssignor
from aiogroup.errors import KafkaError
from aiogroup.inspector import GroupDescription, assess, describe_group
from aiogroup.migration import Stage, Upgrade, migration_status
from aiogroup.protocol import Assignment, Subscription
from aiogroup.testing.fixtures import BrokerHandle
from tests.conformance.peers import create_topic

pytestmark = [pytest.mark.timeout(180)]

EMBEDDED_MIXED = importlib.util.find_spec("aiogroup.testing.embedded.consumer_classic") is not None
BROKERS = [
    pytest.param("embedded", id="embedded", marks=pytest.mark.skipif(
        not EMBEDDED_MIXED, reason="the embedded broker has no mixed groups (no online upgrade "
                                   "of a classic group; branch embedded848 adds them)")),
    pytest.param("kafka4", id="kafka4", marks=pytest.mark.kafka4),
]  # fmt: skip


def _setup(handle: BrokerHandle, tag: str) -> tuple[str, str]:
    topic, group = f"orders-{tag}", f"migration-{tag}"
    if handle.apache is not None:
        handle.apache.create_topic(topic, 4)
        handle.apache.run_tool(
            "kafka-configs", "--bootstrap-server", handle.bootstrap, "--alter",
            "--entity-type", "groups", "--entity-name", group, "--add-config",
            "consumer.session.timeout.ms=6000,consumer.heartbeat.interval.ms=300",
        )  # fmt: skip
    else:
        create_topic(handle, topic, 4)
        setter = getattr(handle.embedded, "set_group_config", None)
        assert setter is not None
        setter(group, session_timeout_ms=6000, heartbeat_interval_ms=300)
    return topic, group


async def _until(bootstrap: str, group: str, ok: Callable[[GroupDescription], bool],
                 what: str) -> GroupDescription:  # fmt: skip
    async with asyncio.timeout(60):
        while True:
            d = await describe_group(bootstrap, group)
            if ok(d):
                return d
            await asyncio.sleep(0.2)  # polling the coordinator, bounded by the timeout
    raise AssertionError(what)  # unreachable: the timeout raises


async def _cli(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "aiogroup", "group", *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def _complete(n: int) -> Callable[[GroupDescription], bool]:
    return lambda d: len(d.members) == n and assess(d, expected_members=n).safe


class StatefulRange(RangeAssignor):
    """A custom assignor as users write them: range, with state of its own in each
    assignment's user data (which the consumer protocol has nowhere to keep)."""

    name = "stateful-range"

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription], *,
               group_instance_ids: Mapping[str, str | None] | None = None,
               ) -> dict[str, Assignment]:  # fmt: skip
        plan = super().assign(partitions_per_topic, subscriptions,
                              group_instance_ids=group_instance_ids)  # fmt: skip
        return {m: dataclasses.replace(a, user_data=b"custom-state") for m, a in plan.items()}


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
async def test_a_custom_assignors_user_data_is_told_blocked_and_the_broker_refuses(
    kafka_broker: BrokerHandle,
) -> None:
    topic, group = _setup(kafka_broker, uuid.uuid4().hex[:8])
    b = kafka_broker.bootstrap
    async with Consumer(b, group, topics=[topic], client_id="custom", session_timeout_ms=6000,
                        heartbeat_interval_ms=300, assignors=[StatefulRange()]):  # fmt: skip
        d = await _until(b, group, _complete(1), "the classic member assigned")
        assert [m.assignment_user_data for m in d.members] == [b"custom-state"]
        status = migration_status(d)
        assert status.upgrade is Upgrade.BLOCKED and "(custom)" in status.blockers[0]
        assert "custom assignor's user data" in status.blockers[0]
        code, text = await _cli("describe", group, "--bootstrap", b, "--json")
        assert code == 0 and json.loads(text)["migration"]["upgrade"] == "blocked"
        joiner = Consumer(b, group, topics=[topic], client_id="new", group_protocol="consumer",
                          session_timeout_ms=6000)  # fmt: skip
        await joiner.start()
        with pytest.raises(KafkaError) as refused:
            async with asyncio.timeout(60):
                while True:
                    await joiner.getmany(timeout_ms=200)
        with contextlib.suppress(KafkaError):  # the fatal error is raised from every call
            await joiner.close()
        assert refused.value.error_code == 69
        assert "custom assignor's user data" in str(refused.value)
        d = await describe_group(b, group)
        assert d.group_type == "classic" and [m.client_id for m in d.members] == ["custom"]


@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
async def test_a_mixed_group_is_described_member_by_member(kafka_broker: BrokerHandle) -> None:
    topic, group = _setup(kafka_broker, uuid.uuid4().hex[:8])
    b = kafka_broker.bootstrap
    # The default cooperative-sticky: its leader marks the assignments (entries, no user data).
    classic = [Consumer(b, group, topics=[topic], client_id=f"classic-{i}",
                        session_timeout_ms=6000, heartbeat_interval_ms=300)
               for i in (1, 2)]  # fmt: skip
    joiner = Consumer(b, group, topics=[topic], client_id="consumer-1", group_protocol="consumer",
                      session_timeout_ms=6000)  # fmt: skip
    try:
        for c in classic:
            await c.start()
        d = await _until(b, group, _complete(2), "two classic members assigned")
        assert d.protocol == "cooperative-sticky"
        assert [m.assignment_user_data for m in d.members] == [None, None]
        assert migration_status(d).upgrade is Upgrade.POSSIBLE and not migration_status(d).blockers
        code, text = await _cli("describe", group, "--bootstrap", b, "--json")
        assert code == 0 and json.loads(text)["migration"]["upgrade"] == "possible"
        await joiner.start()
        d = await _until(b, group, lambda d: d.consumer_protocol and _complete(3)(d),
                         "the group converted, all three assigned")  # fmt: skip
        assert {m.client_id: m.member_type for m in d.members} == {
            "classic-1": "classic", "classic-2": "classic", "consumer-1": "consumer"}
        assert migration_status(d).stage is Stage.MIXED
        code, text = await _cli("describe", group, "--bootstrap", b)
        assert code == 0
        assert "1 of 3 members on the consumer protocol, 2 classic" in text
        assert "a consumer group with classic members" in text and "SPEAKS" in text
        code, text = await _cli("describe", group, "--bootstrap", b, "--json")
        js = json.loads(text)
        assert js["group_type"] == "consumer" and js["step"] == "mixed"
        assert js["next_bounce"] == "safe" and js["migration"]["stage"] == "mixed"
        assert sorted(m["member_type"] for m in js["members"]) == ["classic", "classic",
                                                                     "consumer"]  # fmt: skip
        # The last consumer-protocol member leaves: a classic group again (the downgrade).
        await joiner.close()
        d = await _until(b, group, lambda d: not d.consumer_protocol and _complete(2)(d),
                         "converted back, both classic members assigned")  # fmt: skip
        assert migration_status(d).stage is Stage.CLASSIC
    finally:
        await joiner.close()
        for c in classic:
            await c.close()
