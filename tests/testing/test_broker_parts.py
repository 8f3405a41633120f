"""The embedded broker's parts without its server: the API families against a fake node (what
the handlers read of the broker), the coordinator's driver, and the broker reading its settings
live."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from aiogroup.testing import wire
from aiogroup.testing.embedded.admin_apis import AdminApis, api_versions_answer
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.connection import BrokerNode, Connection
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.data_apis import DataApis
from aiogroup.testing.embedded.driver import CoordinatorDriver
from aiogroup.testing.embedded.group_apis import GroupApis
from aiogroup.testing.embedded.log import Log, valid_topic_name
from aiogroup.testing.embedded.messages import ErrorCode, OffsetFetchRequestData
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.listeners import Listener


@dataclass
class FakeNode:
    """A broker as its handlers see it (:class:`BrokerNode`), and nothing else."""

    node_id: int = 7
    host: str = "broker.test"
    port: int = 9092
    cluster_id: str = "fake"
    auto_create_topics: bool = True
    num_partitions: int = 2
    verify_crc: bool = True
    log: Log = field(default_factory=Log)
    api_versions: dict[int, tuple[int, int]] = field(
        default_factory=lambda: dict(wire.SUPPORTED_VERSIONS)
    )


def connection(listener: Listener | None = None) -> Connection:
    return Connection(1, "/127.0.0.1", cast(Any, None), cast(Any, None), listener=listener)


def request(api_key: int, version: int, values: dict[str, Any]) -> wire.Request:
    return wire.decode_request(wire.encode_request(api_key, version, values)[4:])


def changes() -> tuple[list[int], Any]:
    seen: list[int] = []
    return seen, lambda: seen.append(1)


async def test_metadata_reads_the_nodes_settings_as_it_answers() -> None:
    node = FakeNode()
    _, on_change = changes()
    apis = DataApis(node, on_change)
    handle = apis.handlers()[3]
    meta = await handle(connection(), request(3, 12, {"topics": [{"name": "a"}]}))
    assert isinstance(meta, dict)
    assert meta["brokers"] == [{"node_id": 7, "host": "broker.test", "port": 9092, "rack": None}]
    assert meta["cluster_id"] == "fake" and len(meta["topics"][0]["partitions"]) == 2
    node.auto_create_topics = False  # taken into account at the next request
    meta = await handle(connection(), request(3, 12, {"topics": [{"name": "b"}]}))
    assert isinstance(meta, dict)
    assert meta["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert "b" not in node.log.topics


async def test_the_endpoint_advertised_is_the_listener_the_request_came_in_on() -> None:
    node = FakeNode()
    coordinator = GroupCoordinator(CoordinatorConfig())
    groups = GroupApis(node, CoordinatorDriver(coordinator, on_change=lambda: None))
    sasl = Listener("SASL_PLAINTEXT", 9094)
    found = await groups.handlers()[10](connection(sasl), request(10, 3, {"key": "g"}))
    assert isinstance(found, dict) and (found["host"], found["port"]) == ("broker.test", 9094)
    found = await groups.handlers()[10](connection(), request(10, 3, {"key": "g"}))
    assert isinstance(found, dict) and found["port"] == 9092


async def test_each_family_serves_its_apis_and_together_they_serve_every_one() -> None:
    node = FakeNode()
    driver = CoordinatorDriver(GroupCoordinator(), on_change=lambda: None)
    families = [
        DataApis(node, lambda: None).handlers(),
        GroupApis(node, driver).handlers(),
        AdminApis(node, driver).handlers(),
    ]
    assert set(families[0]) == {0, 1, 2, 3}  # Produce, Fetch, ListOffsets, Metadata
    keys = [key for family in families for key in family]
    assert len(keys) == len(set(keys))  # no API in two families
    assert set(keys) == set(wire.SUPPORTED_VERSIONS)


async def test_api_versions_answer_lists_the_versions_served() -> None:
    node = FakeNode(api_versions={18: (0, 3), 11: (0, 5)})
    apis = AdminApis(node, CoordinatorDriver(GroupCoordinator(), on_change=lambda: None))
    answer = await apis.handlers()[18](connection(), request(18, 0, {}))
    assert answer == api_versions_answer(node.api_versions)
    assert answer["api_keys"] == [
        {"api_key": 11, "min_version": 0, "max_version": 5},
        {"api_key": 18, "min_version": 0, "max_version": 3},
    ]
    assert api_versions_answer({}, ErrorCode.UNSUPPORTED_VERSION)["error_code"] == 35


async def test_delete_topics_drops_the_groups_offsets_through_the_driver() -> None:
    node = FakeNode()
    node.log.create_topic("t", 2)
    coordinator = GroupCoordinator()
    seen, on_change = changes()
    driver = CoordinatorDriver(coordinator, on_change)
    groups, admin = GroupApis(node, driver).handlers(), AdminApis(node, driver).handlers()
    commit = {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "topics": [{"name": "t", "partitions": [{"partition_index": 1, "committed_offset": 5}]}],
    }  # fmt: skip
    await groups[8](connection(), request(8, 8, commit))
    deleted = await admin[20](connection(), request(20, 5, {"topic_names": ["t"]}))
    assert isinstance(deleted, dict) and deleted["responses"][0]["error_code"] == 0
    # Empty and without offsets: 4.x (the default flavour) keeps it for its periodic cleanup.
    view = coordinator.group_state("g")
    assert view is not None and view.state == "Empty"
    assert (
        coordinator.fetch_offsets(OffsetFetchRequestData("g", [("t", 1)]))
        .partitions[0]
        .committed_offset
        == -1
    )
    assert len(seen) == 2  # each coordinator call woke the watchers


async def test_the_driver_arms_its_timer_only_while_started() -> None:
    config = CoordinatorConfig(group_min_session_timeout_ms=10)
    coordinator = GroupCoordinator(config)
    seen, on_change = changes()
    driver = CoordinatorDriver(coordinator, on_change)
    join = {
        "group_id": "g", "member_id": "", "protocol_type": "consumer", "session_timeout_ms": 50,
        "rebalance_timeout_ms": 50, "protocols": [{"name": "range", "metadata": b""}],
    }  # fmt: skip
    groups = GroupApis(FakeNode(), driver).handlers()
    answer = await groups[11](connection(), request(11, 4, join))
    assert isinstance(answer, dict) and answer["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    view = coordinator.group_state("g")
    assert view is not None and view.pending_members  # pending for 50 ms
    await asyncio.sleep(0.15)
    view = coordinator.group_state("g")
    assert view is not None and view.pending_members  # not started: no timer ran
    driver.start(asyncio.get_running_loop())
    driver.rearm()
    await asyncio.sleep(0.05)  # the deadline passed already: the timer fires at once
    view = coordinator.group_state("g")
    assert view is not None and not view.pending_members
    driver.stop()
    assert seen  # rearm always wakes the watchers


async def test_a_running_broker_reads_a_changed_setting_at_the_next_request() -> None:
    async with EmbeddedBroker() as broker, RawClient(broker.bootstrap) as client:
        meta = await client.request("Metadata", 12, {"topics": [{"name": "a"}]})
        assert meta.topics[0].error_code == 0
        broker.auto_create_topics = False
        meta = await client.request("Metadata", 12, {"topics": [{"name": "b"}]})
        assert meta.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize(
    ("name", "valid"),
    [("t", True), ("a.b_c-9", True), ("x" * 249, True), ("x" * 250, False), ("", False),
     (".", False), ("..", False), ("a b", False), ("a/b", False), (None, False)],
)  # fmt: skip
def test_topic_names_follow_kafkas_rule(name: str | None, valid: bool) -> None:
    assert valid_topic_name(name) is valid


def test_the_embedded_broker_is_a_broker_node() -> None:
    node: BrokerNode = EmbeddedBroker()  # what the handlers may read of it
    assert node.port == 0 and node.log.topics == {}
