"""A subscribed topic that does not exist yet (issue 16).

The member must say so once (a WARNING naming the topic), keep asking for metadata with backoff
while it is missing, and be assigned the topic within seconds of its creation, as the Java
consumer is; not after the periodic refresh (``metadata_max_age_ms``, 5 minutes by default).
"""

from __future__ import annotations

import logging

import pytest

from aiogroup.client import GroupMember
from aiogroup.membership import MemberState
from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from tests.client.helpers import FAST, until
from tests.membership.helpers import Script, member, tps

pytestmark = pytest.mark.timeout(60)


def warnings_about(caplog: pytest.LogCaptureFixture, topic: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.levelno == logging.WARNING
        and r.name.startswith("aiogroup.")
        and f"topic {topic!r} does not exist" in r.getMessage()
    ]


async def test_a_topic_created_later_is_assigned_within_seconds(
    embedded_broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="aiogroup")
    embedded_broker.create_topic("present", 1)
    async with GroupMember(
        embedded_broker.bootstrap, "g", topics=["present", "late"], **FAST
    ) as member:
        outcome = await member.wait_for_assignment(timeout=10)
        assert outcome.assignment == {TopicPartition("present", 0)}
        # The member keeps asking while "late" is missing: three more Metadata requests.
        asked = embedded_broker.faults.delay("Metadata", 0.0, count=3)
        await embedded_broker.wait_until(lambda: asked.remaining == 0, timeout=10)
        assert len(warnings_about(caplog, "late")) == 1  # once, not once per answer
        assert warnings_about(caplog, "present") == []

        embedded_broker.create_topic("late", 3)
        await until(member, lambda: len(member.assignment) == 4, timeout=10)
        outcome = await member.wait_for_assignment(timeout=10)
        assert len(outcome.assignment) == 4 and member.state is MemberState.STABLE
    assert len(warnings_about(caplog, "late")) == 1


def test_the_machine_refreshes_with_exponential_backoff_then_stops(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="aiogroup.membership")
    m = member(retry_backoff_ms=100, retry_backoff_max_ms=1_000)
    s = Script(m, now=100.0)
    s.stable(tps("t-0"), topics=frozenset({"t", "late"}))
    refreshes = []
    now = 100.0
    for _ in range(6):  # each answer still lacks "late"
        s.feed(ev.MetadataUpdated({"t": 1}))
        deadline = m.next_deadline()
        assert deadline is not None
        refreshes.append(round(m._metadata_refresh_at - now, 3))  # type: ignore[operator]
        now = m._metadata_refresh_at  # type: ignore[assignment]
        s.timer(now)
        request = s.take(act.RequestMetadata)
        assert request.topics is not None and "late" in request.topics
        s.clear()
    assert refreshes == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert m.missing_topics == {"late"}
    assert len(warnings_about(caplog, "late")) == 1

    s.feed(ev.MetadataUpdated({"t": 1, "late": 2}))
    assert m.missing_topics == frozenset()
    assert m._metadata_refresh_at is None
    # Deleted again later: a new warning, and refreshing starts over from the first backoff.
    s.feed(ev.MetadataUpdated({"t": 1}))
    assert len(warnings_about(caplog, "late")) == 2
    assert m._metadata_refresh_at == pytest.approx(s.now + 0.1)


async def test_the_backoff_cap_is_an_option_of_the_member_and_the_consumer() -> None:
    from aiogroup import Consumer

    m = GroupMember("127.0.0.1:9", "g", topics=["t"], retry_backoff_max_ms=250)
    c = Consumer("127.0.0.1:9", "g", topics=["t"], retry_backoff_max_ms=250)
    assert m._machine.config.retry_backoff_max_ms == 250
    assert c.member._machine.config.retry_backoff_max_ms == 250
