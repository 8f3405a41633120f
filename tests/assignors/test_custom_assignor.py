"""Users can write their own assignor against the public API, and look assignors up by name.

The example assignor below is what a user would write: members advertise a capacity in their
subscription user data, and the leader hands out partitions in proportion to it. It goes through
the real consumer-protocol codecs both ways, as it would in JoinGroup and SyncGroup.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from collections.abc import Iterator, Mapping, Set
from typing import ClassVar

import pytest

from aiogroup.assignors.base import GroupMetadata, PartitionAssignor, RebalanceProtocol
from aiogroup.assignors.range import RangeAssignor
from aiogroup.assignors.registry import (
    BUILTIN_ASSIGNORS,
    UnknownAssignorError,
    available_assignors,
    get_assignor,
    register_assignor,
    unregister_assignor,
)
from aiogroup.assignors.roundrobin import RoundRobinAssignor
from aiogroup.errors import ConfigurationError
from aiogroup.protocol import (
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from aiogroup.protocol.types import (
    Assignment,
    Subscription,
    TopicPartition,
    group_by_topic,
    to_topic_partitions,
)


class CapacityAssignor(PartitionAssignor):
    """Deals partitions to members in proportion to the capacity each advertises."""

    name: ClassVar[str] = "capacity"
    version: ClassVar[int] = 1
    supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (RebalanceProtocol.EAGER,)

    def __init__(self, capacity: int = 1) -> None:
        self.capacity = capacity
        self.received: list[tuple[Assignment, GroupMetadata]] = []

    def subscription_user_data(self, topics: Set[str]) -> bytes | None:
        return struct.pack(">i", self.capacity)

    def assign(
        self,
        partitions_per_topic: Mapping[str, int],
        subscriptions: Mapping[str, Subscription],
    ) -> dict[str, Assignment]:
        capacity = {}
        for member_id, subscription in subscriptions.items():
            data = subscription.user_data or b""
            capacity[member_id] = struct.unpack(">i", data)[0] if len(data) == 4 else 1
        load = dict.fromkeys(subscriptions, 0)
        owned: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
        for topic in sorted(partitions_per_topic):
            eligible = sorted(m for m, s in subscriptions.items() if topic in s.topics)
            for partition in range(partitions_per_topic[topic]) if eligible else ():
                # Lowest load relative to capacity; member id breaks ties (deterministic).
                member = min(eligible, key=lambda m: (load[m] / max(capacity[m], 1), m))
                load[member] += 1
                owned[member].append(TopicPartition(topic, partition))
        return {m: Assignment(partitions=group_by_topic(ps)) for m, ps in owned.items()}

    def on_assignment(self, assignment: Assignment, metadata: GroupMetadata) -> None:
        self.received.append((assignment, metadata))


@pytest.fixture
def capacity_registered() -> Iterator[None]:
    register_assignor("capacity", CapacityAssignor)
    try:
        yield
    finally:
        unregister_assignor("capacity")


def test_custom_assignor_end_to_end(capacity_registered: None) -> None:
    # Each member builds its JoinGroup metadata from the assignor named in its configuration.
    members = {"m-big": 3, "m-small": 1}
    topics = {"orders", "payments"}
    wire: dict[str, bytes] = {}
    instances: dict[str, CapacityAssignor] = {}
    for member_id, capacity in members.items():
        assignor = get_assignor("capacity")
        assert isinstance(assignor, CapacityAssignor)
        assignor.capacity = capacity
        instances[member_id] = assignor
        subscription = Subscription(
            topics=sorted(topics), user_data=assignor.subscription_user_data(topics)
        )
        wire[member_id] = encode_subscription(subscription)

    # The leader decodes everyone's metadata and assigns.
    leader = get_assignor("capacity")
    decoded = {m: decode_subscription(data) for m, data in wire.items()}
    result = leader.assign({"orders": 6, "payments": 2, "unused": 4}, decoded)

    counts = {m: len(to_topic_partitions(a.partitions)) for m, a in result.items()}
    assert counts == {"m-big": 6, "m-small": 2}
    every = sorted(tp for a in result.values() for tp in to_topic_partitions(a.partitions))
    assert every == sorted({*to_topic_partitions({"orders": range(6), "payments": range(2)})})

    # SyncGroup carries each member its assignment; the member's assignor is told.
    for member_id, assignment in result.items():
        received = decode_assignment(encode_assignment(assignment))
        metadata = GroupMetadata(generation_id=4, member_id=member_id, group_id="g")
        instances[member_id].on_assignment(received, metadata)
        assert instances[member_id].received == [(assignment, metadata)]


def test_custom_cooperative_assignor_declares_protocols(capacity_registered: None) -> None:
    class CooperativeCapacity(CapacityAssignor):
        name: ClassVar[str] = "capacity-coop"
        supported_protocols: ClassVar[tuple[RebalanceProtocol, ...]] = (
            RebalanceProtocol.COOPERATIVE,
            RebalanceProtocol.EAGER,
        )

    register_assignor("capacity-coop", CooperativeCapacity)
    try:
        assignor = get_assignor("capacity-coop")
        assert RebalanceProtocol.COOPERATIVE in assignor.supported_protocols
        assert "capacity-coop" in available_assignors()
    finally:
        unregister_assignor("capacity-coop")
    assert "capacity-coop" not in available_assignors()


@pytest.mark.parametrize(
    ("name", "cls"), [("range", RangeAssignor), ("roundrobin", RoundRobinAssignor)]
)
def test_builtin_lookup(name: str, cls: type[PartitionAssignor]) -> None:
    first, second = get_assignor(name), get_assignor(name)
    assert type(first) is cls
    assert first.name == name
    assert first is not second  # per-consumer instances: sticky assignors keep state


@pytest.mark.parametrize(
    ("name", "module", "class_name"),
    [
        ("sticky", "aiogroup.assignors.sticky", "StickyAssignor"),
        (
            "cooperative-sticky",
            "aiogroup.assignors.cooperative_sticky",
            "CooperativeStickyAssignor",
        ),
    ],
)
def test_sticky_names_resolve_to_their_modules(name: str, module: str, class_name: str) -> None:
    assert BUILTIN_ASSIGNORS[name] == f"{module}:{class_name}"
    imported = pytest.importorskip(module)
    assignor = get_assignor(name)
    assert type(assignor) is getattr(imported, class_name)
    assert assignor.name == name


def test_builtins_are_listed() -> None:
    assert set(BUILTIN_ASSIGNORS) == {"range", "roundrobin", "sticky", "cooperative-sticky"}
    assert available_assignors()[:4] == sorted(BUILTIN_ASSIGNORS)
    with pytest.raises(TypeError):
        BUILTIN_ASSIGNORS["mine"] = "x:y"  # type: ignore[index]


def test_lookup_is_lazy() -> None:
    # A consumer configured with "range" never imports the sticky machinery: the registry and
    # get_assignor import only the module of the name asked for. (Counted after the package
    # __init__ files ran, so a package that re-exports classes does not make this fail.)
    code = (
        "import json, sys\n"
        "import aiogroup.assignors\n"
        "def loaded():\n"
        "    return {n for n in sys.modules if n.startswith('aiogroup.assignors.')}\n"
        "before = loaded()\n"
        "from aiogroup.assignors.registry import get_assignor\n"
        "get_assignor('range')\n"
        "mid = loaded()\n"
        "get_assignor('roundrobin')\n"
        "print(json.dumps([sorted(mid - before), sorted(loaded() - mid)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    by_range, by_roundrobin = json.loads(out.stdout)
    allowed = {"registry", "base", "range", "racks"}  # range is rack-aware (KIP-881)
    assert set(by_range) <= {f"aiogroup.assignors.{n}" for n in allowed}
    assert set(by_roundrobin) <= {"aiogroup.assignors.roundrobin"}


class TestRegistryErrors:
    def test_unknown_name(self) -> None:
        with pytest.raises(UnknownAssignorError) as info:
            get_assignor("rnage")
        assert isinstance(info.value, ConfigurationError)
        assert info.value.name == "rnage"
        assert "range" in str(info.value) and "roundrobin" in str(info.value)

    def test_non_string_name(self) -> None:
        with pytest.raises(UnknownAssignorError):
            get_assignor(None)  # type: ignore[arg-type]

    def test_builtin_cannot_be_replaced(self) -> None:
        with pytest.raises(ConfigurationError, match="built-in"):
            register_assignor("range", CapacityAssignor, replace=True)
        assert type(get_assignor("range")) is RangeAssignor

    def test_duplicate_needs_replace(self, capacity_registered: None) -> None:
        with pytest.raises(ConfigurationError, match="already registered"):
            register_assignor("capacity", CapacityAssignor)
        register_assignor("capacity", lambda: CapacityAssignor(capacity=7), replace=True)
        assignor = get_assignor("capacity")
        assert isinstance(assignor, CapacityAssignor) and assignor.capacity == 7

    @pytest.mark.parametrize("name", ["", 3])
    def test_bad_name(self, name: object) -> None:
        with pytest.raises(ConfigurationError):
            register_assignor(name, CapacityAssignor)  # type: ignore[arg-type]

    def test_not_callable(self) -> None:
        with pytest.raises(ConfigurationError, match="not callable"):
            register_assignor("x", "CapacityAssignor")  # type: ignore[arg-type]

    def test_factory_returning_wrong_type(self) -> None:
        register_assignor("wrong", lambda: object())  # type: ignore[arg-type,return-value]
        try:
            with pytest.raises(UnknownAssignorError, match="not a PartitionAssignor"):
                get_assignor("wrong")
        finally:
            unregister_assignor("wrong")

    def test_factory_raising(self) -> None:
        def broken() -> PartitionAssignor:
            raise RuntimeError("no capacity configured")

        register_assignor("broken", broken)
        try:
            with pytest.raises(UnknownAssignorError, match="no capacity configured") as info:
                get_assignor("broken")
            assert isinstance(info.value.__cause__, RuntimeError)
        finally:
            unregister_assignor("broken")

    def test_name_mismatch(self) -> None:
        # The registered name is what goes into JoinGroup; the assignor must agree with it.
        register_assignor("alias", CapacityAssignor)
        try:
            with pytest.raises(UnknownAssignorError, match="calls itself 'capacity'"):
                get_assignor("alias")
        finally:
            unregister_assignor("alias")
