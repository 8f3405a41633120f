"""The driver with bytes: a GroupMember over :class:`ScriptedTransport`, whose broker is a
script. Every request goes through the real encoders at a negotiated version, every answer
through the real decoders; malformed and truncated answers, unknown error codes and a broker
that goes away are scripted, not mocked at the method level (issue 24.4)."""

from __future__ import annotations

from typing import Any

import pytest

from aiogroup import GroupMember
from aiogroup.membership import MemberState
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.scripted import DecodedRequest, ScriptedTransport

pytestmark = pytest.mark.timeout(30)

TOPIC = "orders"
TP = TopicPartition


class Broker:
    """A one-member group: KIP-394's MEMBER_ID_REQUIRED first, then generation 1 with us
    as the leader; SyncGroup answers what the leader sent."""

    def __init__(self) -> None:
        self.generation = 0

    def join(self, request: DecodedRequest) -> dict[str, Any]:
        body = request.body
        if not body.member_id:
            return {"error_code": 79, "generation_id": -1, "protocol_name": None,
                    "leader": "", "member_id": "m-1", "members": []}  # fmt: skip
        self.generation += 1
        protocol = body.protocols[0]
        return {
            "error_code": 0, "generation_id": self.generation, "protocol_type": "consumer",
            "protocol_name": protocol.name, "leader": "m-1", "member_id": "m-1",
            "members": [{"member_id": "m-1", "group_instance_id": None,
                         "metadata": protocol.metadata}],
        }  # fmt: skip

    def sync(self, request: DecodedRequest) -> dict[str, Any] | bytes:
        mine = next(a.assignment for a in request.body.assignments if a.member_id == "m-1")
        return {"error_code": 0, "protocol_type": "consumer",
                "protocol_name": request.body.protocol_name, "assignment": mine}  # fmt: skip


def scripted(broker: Broker) -> ScriptedTransport:
    transport = ScriptedTransport("g", topics={TOPIC: 2})
    transport.on("JoinGroup", broker.join)
    transport.on("SyncGroup", broker.sync)
    return transport


def member(transport: ScriptedTransport) -> GroupMember:
    return GroupMember("127.0.0.1:9", "g", topics=[TOPIC], transport=transport,
                       session_timeout_ms=6_000, heartbeat_interval_ms=100,
                       retry_backoff_ms=10, close_timeout_s=3)  # fmt: skip


async def test_a_member_joins_over_bytes_at_the_negotiated_versions() -> None:
    broker = Broker()
    transport = scripted(broker)
    async with member(transport) as m:
        outcome = await m.wait_for_assignment(timeout=10)
        assert outcome.assignment == {TP(TOPIC, 0), TP(TOPIC, 1)}
        await m.commit({TP(TOPIC, 0): 5})
    joins = [r for r in transport.requests if r.api_name == "JoinGroup"]
    assert [j.body.member_id for j in joins] == ["", "m-1"]  # KIP-394
    assert all(j.api_version == 9 for j in joins)  # the highest both sides speak
    (commit,) = transport.named("OffsetCommit")
    assert commit.generation_id_or_member_epoch == 1
    assert transport.named("LeaveGroup")[0].members[0].member_id == "m-1"


@pytest.mark.parametrize(
    "answer",
    [
        b"\x00\x00\x00",  # shorter than a response header
        b"\x00\x00\x00\x05\x00\x00\x00",  # the header, then half a throttle time
        b"\x00\x00\x00\x05\x00" + b"\xff" * 40,  # garbage after the header
    ],
)
async def test_a_truncated_or_malformed_answer_is_survived(answer: bytes) -> None:
    """A SyncGroup answer that does not decode: the member treats the coordinator as lost,
    looks it up again, rejoins, and ends with its assignment; nothing raises to the user."""
    broker = Broker()
    transport = scripted(broker)
    bad = {"left": 1}

    def sync(request: DecodedRequest) -> dict[str, Any] | bytes:
        if bad["left"]:
            bad["left"] -= 1
            return answer
        return broker.sync(request)

    transport.on("SyncGroup", sync)
    async with member(transport) as m:
        outcome = await m.wait_for_assignment(timeout=10)
        assert outcome.assignment == {TP(TOPIC, 0), TP(TOPIC, 1)}
    assert len(transport.named("SyncGroup")) >= 2
    assert len(transport.named("FindCoordinator")) >= 2  # looked up again after the bad one


async def test_an_unknown_error_code_keeps_its_number() -> None:
    """A Heartbeat answered with a code no broker uses: the member rejoins (as for any error
    it cannot name) and the commit it then makes is refused with that code, never a crash."""
    broker = Broker()
    transport = scripted(broker)
    async with member(transport) as m:
        await m.wait_for_assignment(timeout=10)
        transport.on("OffsetCommit", lambda r: {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "error_code": 9999}]}]})  # fmt: skip
        from aiogroup.errors import KafkaError

        with pytest.raises(KafkaError) as info:
            await m.commit({TP(TOPIC, 0): 1})
        assert info.value.error_code == 9999
        assert m.state is MemberState.STABLE


async def test_a_broker_that_goes_away_and_comes_back() -> None:
    """Heartbeats that reach no broker: the member looks for the coordinator again and, once
    the broker answers, is back in its generation with its partitions."""
    import asyncio

    from aiogroup.errors import BrokerUnreachableError

    broker = Broker()
    transport = scripted(broker)
    down = {"on": False}

    def heartbeat(request: DecodedRequest) -> dict[str, Any]:
        if down["on"]:
            raise BrokerUnreachableError("scripted outage")
        return {"error_code": 0}

    transport.on("Heartbeat", heartbeat)
    async with member(transport) as m:
        await m.wait_for_assignment(timeout=10)
        lookups = len(transport.named("FindCoordinator"))
        down["on"] = True
        async with asyncio.timeout(10):
            while len(transport.named("FindCoordinator")) == lookups:
                await asyncio.sleep(0.01)  # polling a counter with a bound
        down["on"] = False
        outcome = await m.wait_for_assignment(timeout=10)
        assert outcome.assignment == {TP(TOPIC, 0), TP(TOPIC, 1)}
