"""What an operator sees in the logs (issue 16).

With the ``aiogroup`` logger at DEBUG: a join, a rebalance (with generation, protocol, counts
assigned / revoked / lost and its duration), a commit and a leave each leave a line; a stopped
broker gives a bounded number of WARNING/ERROR lines however long it stays down (aiokafka's
client alone logged 235 ERROR lines in 8 s), and the user's own aiokafka clients still log as
they always did.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from aiogroup import Consumer
from aiogroup.client import GroupMember, reachability
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from aiogroup.testing.launchers.tansu import free_port
from tests.client.helpers import FAST

pytestmark = pytest.mark.timeout(90)

#: aiokafka's two lines while a broker is down: a reconnect attempt, a metadata refresh.
AIOKAFKA_OUTAGE_LINES = ("Unable connect to node", "Unable to update metadata")


def ours(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[logging.LogRecord]:
    """Records of the member's own loggers (not the embedded broker's) at ``level``."""
    return [
        r
        for r in caplog.records
        if r.levelno == level and r.name.startswith(("aiogroup.client", "aiogroup.membership"))
    ]


async def until(condition: Callable[[], bool], timeout: float) -> None:
    """Poll ``condition`` (it reads log records, which signal nothing) with a bound."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.05)


async def billing(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture, partitions: int
) -> GroupMember:
    """A started member of group ``billing`` that owns every partition of ``orders``, with
    every aiogroup record captured."""
    caplog.set_level(logging.DEBUG, logger="aiogroup")
    broker.create_topic("orders", partitions)
    member = await GroupMember(broker.bootstrap, "billing", topics=["orders"], **FAST).start()
    try:
        await member.wait_for_assignment(timeout=10)
    except BaseException:
        await member.close()
        raise
    return member


async def test_join_rebalance_commit_and_leave_are_logged(
    embedded_broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    async with await billing(embedded_broker, caplog, partitions=3) as m:
        member_id = m.member_id
        await m.commit({TopicPartition("orders", 0): 5})

    info = ours(caplog)
    joined = [r for r in info if r.getMessage().startswith("joined group billing")]
    assert len(joined) == 1
    assert f"as member {member_id} (generation 1, protocol cooperative-sticky, leader)" in (
        joined[0].getMessage()
    )

    rebalances = [r for r in info if r.getMessage().startswith("rebalance completed")]
    assert len(rebalances) == 2  # the join, then the revocation on close
    first, last = rebalances
    assert "generation 1, protocol cooperative-sticky" in first.getMessage()
    assert "assigned 3, revoked 0, lost 0 partitions; owns 3" in first.getMessage()
    assert (first.generation_id, first.protocol) == (1, "cooperative-sticky")  # type: ignore[attr-defined]
    assert (first.assigned, first.revoked, first.lost) == (3, 0, 0)  # type: ignore[attr-defined]
    assert 0 < first.duration_s < 10  # type: ignore[attr-defined]
    assert f"{first.duration_s:.3f} s" in first.getMessage()  # type: ignore[attr-defined]
    assert "assigned 0, revoked 3, lost 0 partitions; owns 0" in last.getMessage()

    commits = [r for r in ours(caplog, logging.DEBUG) if "committed 1 offsets" in r.getMessage()]
    assert len(commits) == 1
    left = [r for r in info if "left group billing" in r.getMessage()]
    assert len(left) == 1 and member_id in left[0].getMessage()
    assert ours(caplog, logging.WARNING) == []


@pytest.mark.parametrize("client", ["member", "consumer"])
async def test_a_stopped_broker_is_said_once_reminded_and_said_back(
    embedded_broker: EmbeddedBroker,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    client: str,
) -> None:
    """One WARNING when the broker becomes unreachable, a reminder every REMINDER_S while it
    stays away, one when it is back with how long it was gone; aiokafka's line per attempt
    (19 a second from a consumer, issue 23.5) only at DEBUG."""
    monkeypatch.setattr(reachability, "REMINDER_S", 2.0)
    caplog.set_level(logging.DEBUG)
    embedded_broker.create_topic("orders", 2)
    if client == "member":
        running: Any = GroupMember(embedded_broker.bootstrap, "billing", topics=["orders"], **FAST)
        member = running
    else:
        running = Consumer(embedded_broker.bootstrap, "billing", topics=["orders"], **FAST)
        member = running.member
    async with running:
        await member.wait_for_assignment(timeout=10)
        caplog.clear()
        await embedded_broker.stop()

        def attempts() -> int:  # at any level and logger: shown, or moved to DEBUG
            return sum(
                1 for r in caplog.records
                if any(line in r.getMessage() for line in AIOKAFKA_OUTAGE_LINES)
            )  # fmt: skip

        def said(words: str) -> list[logging.LogRecord]:
            return [r for r in loud() if words in r.getMessage()]

        def loud() -> list[logging.LogRecord]:
            return [
                r for r in caplog.records
                if r.levelno >= logging.WARNING and not r.name.startswith("aiogroup.testing")
            ]  # fmt: skip

        # Several seconds of outage (aiokafka retries every 100 ms or so), two reminders.
        await until(lambda: attempts() >= 60 and len(said("still unreachable")) >= 2, 60)
        summary = "\n".join(f"{r.name} {r.levelname} {r.getMessage()[:140]}" for r in loud())
        down = said("is unreachable")
        assert len(down) == 1, summary
        assert down[0].name == "aiogroup.client" and "127.0.0.1" in down[0].getMessage()
        assert all(not any(x in r.getMessage() for x in AIOKAFKA_OUTAGE_LINES) for r in loud())
        reminders = said("still unreachable")
        assert len(loud()) == 1 + len(reminders), summary
        await embedded_broker.start()  # same port: the member finds its group again
        await member.wait_for_assignment(timeout=30)
        await until(lambda: bool(said("reachable again")), 30)
        back = said("reachable again")
        assert len(back) == 1, summary
        assert back[0].down_s >= 4.0  # type: ignore[attr-defined]
        assert f"after {back[0].down_s:.1f} s" in back[0].getMessage()  # type: ignore[attr-defined]


async def test_the_users_own_aiokafka_clients_are_not_tamed(
    embedded_broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    from aiokafka.client import AIOKafkaClient
    from aiokafka.errors import KafkaConnectionError

    caplog.set_level(logging.WARNING)
    embedded_broker.create_topic("orders", 1)
    dead = f"127.0.0.1:{free_port()}"
    async with GroupMember(embedded_broker.bootstrap, "billing", topics=["orders"], **FAST) as m:
        await m.wait_for_assignment(timeout=10)  # the filter is installed and a member runs
        for _ in range(3):
            client = AIOKafkaClient(bootstrap_servers=dead)
            with pytest.raises(KafkaConnectionError):
                await client.bootstrap()
            await client.close()
    errors = [r for r in caplog.records if r.name == "aiokafka" and r.levelno == logging.ERROR]
    assert len(errors) == 3  # each attempt, as aiokafka logs it: nothing moved or dropped


def test_the_rate_limit_counts_what_it_kept_back(caplog: pytest.LogCaptureFixture) -> None:
    from aiogroup.client.logs import RateLimitedLog

    caplog.set_level(logging.DEBUG, logger="test.limited")
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("test.limited"), interval=30, clock=lambda: now[0])
    for t in (0.0, 1.0, 2.0, 29.0, 31.0):
        now[0] = t
        limited.warning("broker %s down", "b1")
    limited.warning("another kind")  # its own quota
    shown = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    hidden = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert shown == [
        "broker b1 down",
        "broker b1 down (3 more like this in the last 31 s not shown above DEBUG)",
        "another kind",
    ]
    assert hidden == ["broker b1 down"] * 3
