"""GroupMember joins, commits and leaves over TLS and SASL, on the embedded broker and Kafka 2.3.

Every case runs on both brokers (the ``secured`` fixture): the same client options, the same
outcome. The coordinator a member finds must be reached over the listener it bootstrapped
from (Kafka answers Metadata and FindCoordinator with that listener's endpoint), so a TLS
member that joins proves the whole path stayed on TLS.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup import GroupMember, TopicPartition
from tests.security.secured import PARTITIONS, TOPIC, SecuredBroker, client_options

#: (listener, SASL mechanism): every way in that the brokers offer.
WAYS_IN = [
    pytest.param("SSL", None, id="SSL"),
    pytest.param("MTLS", None, id="SSL-client-cert"),
    pytest.param("SASL_PLAINTEXT", "PLAIN", id="SASL_PLAINTEXT-PLAIN"),
    pytest.param("SASL_PLAINTEXT", "SCRAM-SHA-256", id="SASL_PLAINTEXT-SCRAM-SHA-256"),
    pytest.param("SASL_PLAINTEXT", "SCRAM-SHA-512", id="SASL_PLAINTEXT-SCRAM-SHA-512"),
    pytest.param("SASL_SSL", "PLAIN", id="SASL_SSL-PLAIN"),
    pytest.param("SASL_SSL", "SCRAM-SHA-256", id="SASL_SSL-SCRAM-SHA-256"),
    pytest.param("SASL_SSL", "SCRAM-SHA-512", id="SASL_SSL-SCRAM-SHA-512"),
    pytest.param("PLAIN_ONLY", "PLAIN", id="PLAIN_ONLY-PLAIN"),
]
ALL = frozenset(TopicPartition(TOPIC, p) for p in range(PARTITIONS))
#: Bounds for waits, never assertions on speed.
BOUND_S = 60.0


def member(broker: SecuredBroker, listener: str, group: str, **options: Any) -> GroupMember:
    return GroupMember(
        broker.address(listener),
        group,
        topics=[TOPIC],
        session_timeout_ms=6_000,
        heartbeat_interval_ms=500,
        rebalance_timeout_ms=10_000,
        request_timeout_ms=10_000,
        close_timeout_s=20,
        **options,
    )


@pytest.mark.parametrize(("listener", "mechanism"), WAYS_IN)
async def test_a_member_joins_commits_and_leaves(
    secured: SecuredBroker, listener: str, mechanism: str | None
) -> None:
    group = secured.group(f"join-{listener}-{mechanism}")
    options = client_options(secured, listener, mechanism)
    async with asyncio.timeout(BOUND_S):
        async with member(secured, listener, group, **options) as m:
            outcome = await m.wait_for_assignment()
            assert outcome.assignment == ALL
            await m.commit({tp: 7 + tp.partition for tp in ALL})
            assert await m.committed(ALL) == {tp: 7 + tp.partition for tp in ALL}
        # A second member over the same listener reads what the first committed.
        async with member(secured, listener, group, **options) as again:
            await again.wait_for_assignment()
            assert await again.committed(ALL) == {tp: 7 + tp.partition for tp in ALL}


async def test_one_group_across_listeners(secured: SecuredBroker) -> None:
    """Members of one group may come in over different listeners: TLS and SASL over TLS."""
    group = secured.group("across")
    tls = member(secured, "SSL", group, **client_options(secured, "SSL"))
    sasl = member(
        secured, "SASL_SSL", group, **client_options(secured, "SASL_SSL", "SCRAM-SHA-512")
    )
    async with asyncio.timeout(BOUND_S):
        async with tls, sasl:
            while True:
                changes = [tls.changed(), sasl.changed()]
                if len(tls.assignment) == 1 and len(sasl.assignment) == 1:
                    break
                waiters = [asyncio.ensure_future(c) for c in changes]
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            assert tls.assignment | sasl.assignment == ALL
            assert not tls.assignment & sasl.assignment
            assert tls.generation_id == sasl.generation_id
