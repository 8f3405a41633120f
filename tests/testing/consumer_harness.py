"""Drive the embedded coordinator's KIP-848 consumer groups without sockets: a fake clock,
topics with fixed ids, and members that behave as a client does (they revoke what their
assignment lost and report what they own on their next heartbeat)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiogroup.testing.embedded.consumer_messages import (
    ConsumerGroupHeartbeatRequestData,
    ConsumerGroupHeartbeatResponseData,
    ConsumerGroupSettings,
    ConsumerGroupView,
    TopicMetadata,
)
from aiogroup.testing.embedded.coordinator import GroupCoordinator
from aiogroup.testing.embedded.rules import CoordinatorConfig

#: Short enough to keep the tests' arithmetic readable.
SESSION_MS = 10_000
INTERVAL_MS = 1_000
REBALANCE_MS = 30_000


def topic_id(name: str) -> uuid.UUID:
    """A fixed id per topic name (tests read better with stable ids)."""
    return uuid.uuid5(uuid.NAMESPACE_DNS, name)


class Harness:
    """One coordinator with a fake clock (seconds) and topics."""

    def __init__(
        self,
        topics: Mapping[str, int] | None = None,
        *,
        config: CoordinatorConfig | None = None,
        **settings: Any,
    ) -> None:
        defaults: dict[str, Any] = {
            "session_timeout_ms": SESSION_MS,
            "min_session_timeout_ms": 1000,
            "heartbeat_interval_ms": INTERVAL_MS,
            "min_heartbeat_interval_ms": 100,
        }
        defaults.update(settings)
        self.coord = GroupCoordinator(
            config or CoordinatorConfig(consumer_group=ConsumerGroupSettings(**defaults))
        )
        self.now = 100.0
        self.topics: dict[str, int] = {}
        self.set_topics(topics if topics is not None else {"t": 6})

    def set_topics(self, topics: Mapping[str, int]) -> None:
        self.topics = dict(topics)
        self.coord.update_topics(
            [TopicMetadata(n, topic_id(n), c) for n, c in topics.items()], self.now
        )

    def tick(self, seconds: float) -> None:
        self.now += seconds
        self.coord.on_timer(self.now)

    def heartbeat(self, **fields: Any) -> ConsumerGroupHeartbeatResponseData:
        fields.setdefault("group_id", "g")
        return self.coord.consumer_group_heartbeat(
            ConsumerGroupHeartbeatRequestData(**fields), self.now
        )

    def names(self, assignment: Mapping[uuid.UUID, Iterable[int]] | None) -> set[tuple[str, int]]:
        """An assignment by topic id as ``(topic name, partition)`` pairs."""
        by_id = {topic_id(n): n for n in self.topics}
        return {(by_id[t], p) for t, ps in (assignment or {}).items() for p in ps}

    def view(self, group: str = "g") -> ConsumerGroupView:
        view = self.coord.consumer_group_state(group)
        assert view is not None, f"no consumer group {group!r}"
        return view

    def member(
        self,
        member_id: str,
        topics: Sequence[str] | None = ("t",),
        *,
        group: str = "g",
        **join: Any,
    ) -> SimMember:
        return SimMember(self, member_id, group, list(topics) if topics is not None else None, join)


def ids(parts: Mapping[str, Iterable[int]]) -> list[tuple[uuid.UUID, list[int]]]:
    """Owned partitions by topic name as a heartbeat reports them (by topic id)."""
    return [(topic_id(t), sorted(ps)) for t, ps in parts.items()]


@dataclass
class SimMember:
    """A well-behaved member: it joins with epoch 0, takes the answers' epochs, and reports
    what it owns (its last assignment, once it acted on it) on every heartbeat."""

    harness: Harness
    member_id: str
    group: str
    topics: list[str] | None
    join_fields: dict[str, Any]
    epoch: int = 0
    owned: dict[uuid.UUID, tuple[int, ...]] = field(default_factory=dict)
    last: ConsumerGroupHeartbeatResponseData | None = None

    def join(self, **overrides: Any) -> ConsumerGroupHeartbeatResponseData:
        fields: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": 0,
            "rebalance_timeout_ms": REBALANCE_MS,
            "subscribed_topic_names": self.topics,
            "topic_partitions": [],
        }
        fields.update(self.join_fields)
        fields.update(overrides)
        self.owned = {}
        return self._send(fields)

    def beat(self, *, ack: bool = True, **overrides: Any) -> ConsumerGroupHeartbeatResponseData:
        """A heartbeat reporting what it owns; with ``ack`` it has acted on its last answer
        (revoked what left it, taken what was added) before."""
        fields: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": self.epoch,
            "topic_partitions": [(t, list(ps)) for t, ps in self.owned.items()],
        }
        if self.join_fields.get("instance_id") is not None:
            fields["instance_id"] = self.join_fields["instance_id"]
        fields.update(overrides)
        return self._send(fields)

    def leave(self, epoch: int = -1) -> ConsumerGroupHeartbeatResponseData:
        fields: dict[str, Any] = {
            "group_id": self.group,
            "member_id": self.member_id,
            "member_epoch": epoch,
            "instance_id": self.join_fields.get("instance_id"),
        }
        return self.harness.heartbeat(**fields)

    def _send(self, fields: dict[str, Any]) -> ConsumerGroupHeartbeatResponseData:
        response = self.harness.heartbeat(**fields)
        self.last = response
        if response.error_code == 0:
            self.epoch = response.member_epoch
            if response.assignment is not None:
                self.owned = {t: tuple(ps) for t, ps in response.assignment.items() if ps}
        return response

    @property
    def partitions(self) -> set[tuple[str, int]]:
        """What it owns, by topic name."""
        return self.harness.names(self.owned)

    def settle(self, *others: SimMember, rounds: int = 10) -> None:
        """Heartbeat ``self`` and ``others`` in turn until the group is Stable."""
        for _ in range(rounds):
            for m in (self, *others):
                m.beat()
            if self.harness.view(self.group).state == "Stable":
                return
        raise AssertionError(f"not stable: {self.harness.view(self.group)}")
