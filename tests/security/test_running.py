"""Credentials that stop working while a member runs (embedded broker: it can cut connections).

A member joined with SCRAM; the password is rotated on the broker and the member's connections
are cut. Its reconnects are refused: the refusal reaches the user as SaslAuthenticationError
from the next call (as the Java client raises it from ``poll``), not as an endless silent retry.
The member keeps retrying, so once the broker accepts its credentials again it works on.
Before, each refused reconnect was logged at INFO as a lost coordinator and nothing reached
the user.
"""

from __future__ import annotations

import asyncio

import pytest

from aiogroup import GroupMember, TopicPartition
from aiogroup.errors import SaslAuthenticationError
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import SaslCredentials

BOUND_S = 30.0
TP = TopicPartition("rotated", 0)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
async def test_a_refused_reconnect_reaches_the_user_and_the_member_recovers(
    mechanism: str,
) -> None:
    credentials = SaslCredentials(plain={"carol": "old"}, scram={"carol": "old"})
    broker = EmbeddedBroker(
        topics={"rotated": 1},
        listeners=[Listener("SASL_PLAINTEXT")],
        sasl_credentials=credentials,
        coordinator_config=CoordinatorConfig(
            initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000
        ),
    )
    async with broker, asyncio.timeout(BOUND_S):
        member = GroupMember(
            f"127.0.0.1:{broker.ports['SASL_PLAINTEXT']}",
            "rotation",
            topics=["rotated"],
            client_id="carol-app",
            session_timeout_ms=10_000,
            heartbeat_interval_ms=200,
            request_timeout_ms=5_000,
            close_timeout_s=10,
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism=mechanism,
            sasl_plain_username="carol",
            sasl_plain_password="old",
        )
        async with member:
            assert (await member.wait_for_assignment()).assignment == {TP}
            credentials.set_plain("carol", "rotated")
            credentials.set_scram("carol", "rotated")
            assert broker.faults.cut(client_id="carol-app") >= 1

            with pytest.raises(SaslAuthenticationError, match=f"'carol' with {mechanism}"):
                while True:
                    change = member.changed()
                    await member.wait_for_assignment()  # raises the reported refusal
                    await change

            credentials.set_plain("carol", "old")
            credentials.set_scram("carol", "old")
            # Refusals reported before the fix may still be queued: each call raises one.
            for _ in range(10):
                try:
                    assert await member.committed([TP]) == {TP: None}
                    break
                except SaslAuthenticationError:
                    continue
            else:
                pytest.fail("the member did not recover once its password worked again")
            await member.commit({TP: 3})
            assert await member.committed([TP]) == {TP: 3}
