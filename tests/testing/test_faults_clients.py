"""Faults injected under an unmodified librdkafka consumer (confluent-kafka)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from aiogroup.testing.embedded.messages import GroupView
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker

pytestmark = [pytest.mark.peers, pytest.mark.timeout(90)]


@pytest.fixture
def broker() -> Iterator[ThreadedBroker]:
    config = CoordinatorConfig(initial_rebalance_delay_ms=0, group_min_session_timeout_ms=1000)
    with ThreadedBroker(topics={"t": 2}, coordinator_config=config) as b:
        yield b


@pytest.fixture
def consumer(broker: ThreadedBroker) -> Iterator[Any]:
    import confluent_kafka as ck

    c = ck.Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "g",
            "client.id": "rdk",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "log_level": 0,
        }
    )
    c.subscribe(["t"])
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            c.poll(0.05)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    yield c
    stop.set()
    thread.join(10)
    c.close()


def stable(view: GroupView | None) -> bool:
    return view is not None and view.state == "Stable" and len(view.members) == 1


def test_failed_heartbeat_makes_a_real_client_rejoin(broker: ThreadedBroker, consumer: Any) -> None:
    view = broker.wait_for_group("g", stable, timeout=30)
    assert view is not None and view.leader
    # As a rebalancing broker does, answer every heartbeat with REBALANCE_IN_PROGRESS until the
    # member rejoins: librdkafka ignores the error while it is still applying an assignment, so
    # a single failed heartbeat can fall where it is (rightly) not acted on.
    broker.faults.fail("Heartbeat", 27, count=10_000, member_id=view.leader)
    rejoined = broker.wait_for_group(
        "g", lambda v: v is not None and v.generation_id > view.generation_id, 30
    )
    assert rejoined is not None
    broker.faults.clear()
    after = broker.wait_for_group(
        "g", lambda v: stable(v) and v is not None and v.generation_id > view.generation_id, 30
    )
    assert after is not None and after.leader == view.leader  # same member, new generation
    failed = broker.faults.events_of("fail")
    assert failed and {(e.api, e.member_id) for e in failed} == {("Heartbeat", view.leader)}


def test_cut_connection_is_survived_without_a_rebalance(
    broker: ThreadedBroker, consumer: Any
) -> None:
    view = broker.wait_for_group("g", stable, timeout=30)
    assert view is not None
    member = view.leader
    assert member is not None
    assert broker.faults.cut(member_id=member) >= 1
    # The client reconnects and heartbeats again as the same member, in the same generation.
    broker.run(broker.broker.wait_until(lambda: broker.broker.member_connections(member) >= 1, 30))
    again = broker.group("g")
    assert again is not None and again.generation_id == view.generation_id
    assert [m.member_id for m in again.members] == [member]
