"""A small script driver for the KIP-848 machine (no sockets): a member joined to a coordinator
that answers as the test says."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from aiogroup.membership import actions as act
from aiogroup.membership import events as ev
from aiogroup.membership.consumer_events import (
    ConsumerGroupHeartbeatCompleted,
    ConsumerGroupHeartbeatFailed,
    SendConsumerGroupHeartbeat,
)
from aiogroup.membership.consumer_machine import ConsumerMemberConfig, ConsumerProtocolMachine
from aiogroup.protocol import TopicPartition

A = TypeVar("A", bound=act.Action)

ORDERS = uuid.UUID(int=1)
BILLING = uuid.UUID(int=2)
IDS = {"orders": ORDERS, "billing": BILLING}
COUNTS = {"orders": 6, "billing": 3}


def of(actions: Iterable[act.Action], kind: type[A]) -> list[A]:
    return [a for a in actions if isinstance(a, kind)]


def one(actions: Iterable[act.Action], kind: type[A]) -> A:
    found = of(actions, kind)
    assert len(found) == 1, f"expected one {kind.__name__} in {list(actions)}"
    return found[0]


def parts(topic: str, *ps: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in ps)


class Script:
    """A machine, the time, and what it last asked for."""

    def __init__(self, **config: Any) -> None:
        options: dict[str, Any] = {"group_id": "g", "member_id": "m-1", **config}
        self.m = ConsumerProtocolMachine(ConsumerMemberConfig(**options))
        self.now = 100.0
        self.out: list[act.Action] = []
        self.heartbeat: SendConsumerGroupHeartbeat | None = None
        self.callbacks: act.InvokeCallbacks | None = None

    def feed(self, event: ev.Event) -> list[act.Action]:
        self.out = self.m.handle(event, self.now)
        self._note()
        return self.out

    def tick(self, seconds: float = 0.0) -> list[act.Action]:
        self.now += seconds
        self.out = self.m.handle_timer(self.now)
        self._note()
        return self.out

    def _note(self) -> None:
        for a in self.out:
            if isinstance(a, SendConsumerGroupHeartbeat):
                self.heartbeat = a
            elif isinstance(a, act.InvokeCallbacks):
                self.callbacks = a

    # -- the coordinator's side -----------------------------------------------------------

    def subscribe(self, *topics: str) -> None:
        out = self.feed(ev.SubscriptionChanged(topics=frozenset(topics)))
        find = one(out, act.FindCoordinator)
        self.feed(ev.MetadataUpdated(COUNTS, IDS))
        self.feed(ev.CoordinatorFound(find.token, 1))

    def answer(
        self,
        epoch: int,
        assignment: Mapping[uuid.UUID, Iterable[int]] | None = None,
        *,
        interval_ms: int = 5000,
    ) -> list[act.Action]:
        hb = self.heartbeat
        assert hb is not None
        given = None if assignment is None else {t: tuple(ps) for t, ps in assignment.items()}
        return self.feed(
            ConsumerGroupHeartbeatCompleted(hb.token, self.m.member_id, epoch, interval_ms, given)
        )

    def fail(self, code: int, message: str = "") -> list[act.Action]:
        hb = self.heartbeat
        assert hb is not None
        return self.feed(ConsumerGroupHeartbeatFailed(hb.token, code, message))

    def finish_callbacks(self, error: BaseException | None = None) -> list[act.Action]:
        cb = self.callbacks
        assert cb is not None
        self.callbacks = None
        return self.feed(ev.CallbacksFinished(cb.token, error))

    def joined(self, *ps: int, epoch: int = 1) -> None:
        """Subscribe to orders, join, own ``ps`` of it, acknowledged."""
        self.subscribe("orders")
        assert self.heartbeat is not None and self.heartbeat.member_epoch == 0
        self.answer(epoch, {ORDERS: ps})
        self.finish_callbacks()
        self.answer(epoch)
