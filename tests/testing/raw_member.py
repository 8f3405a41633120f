"""A minimal group member speaking raw wire requests, for tests that need a member whose every
request is scripted (a peer that misbehaves on purpose, a protocol rule checked on the wire)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.client import RawClient

__all__ = [
    "FATAL",
    "FENCED",
    "INCONSISTENT",
    "MEMBER_ID_REQUIRED",
    "NONE",
    "REBALANCING",
    "RawMember",
]

NONE, ILLEGAL_GENERATION, INCONSISTENT = 0, 22, 23
UNKNOWN_MEMBER, REBALANCING, MEMBER_ID_REQUIRED, FENCED = 25, 27, 79, 82
FATAL = {ILLEGAL_GENERATION, INCONSISTENT, UNKNOWN_MEMBER, FENCED}


class RawMember:
    """A minimal group member: join (with the KIP-394 retry), sync, heartbeat, rejoin."""

    def __init__(
        self,
        broker: EmbeddedBroker | str,
        group: str,
        protocols: Sequence[str],
        *,
        name: str,
        instance: str | None = None,
        join_version: int = 5,
        topic: str = "t",
        partitions: int = 6,
    ) -> None:
        bootstrap = broker if isinstance(broker, str) else broker.bootstrap
        self.client = RawClient(bootstrap, client_id=name)
        self.topic = topic
        self.partitions = partitions
        self.group = group
        self.protocols = list(protocols)
        self.instance = instance
        self.join_version = join_version
        self.member_id = ""
        self.generation = -1
        self.synced_generation = -1
        self.protocol_name: str | None = None
        self.assignment = b""
        self.errors: list[int] = []
        self.rejoin = asyncio.Event()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def metadata(self) -> list[dict[str, Any]]:
        sub = encode_subscription(Subscription(topics=[self.topic]))
        return [{"name": p, "metadata": sub} for p in self.protocols]

    async def join(self) -> Any:
        while True:
            resp = await self.client.request(
                "JoinGroup",
                self.join_version,
                {
                    "group_id": self.group,
                    "session_timeout_ms": 6000,
                    "rebalance_timeout_ms": 6000,
                    "member_id": self.member_id,
                    "group_instance_id": self.instance,
                    "protocol_type": "consumer",
                    "protocols": self.metadata(),
                },
            )
            if resp.error_code == MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code == NONE:
                self.member_id = resp.member_id
                self.generation = resp.generation_id
                self.protocol_name = resp.protocol_name
            return resp

    async def sync(self, join: Any) -> int:
        assignments = []
        if join.leader == self.member_id:
            # Round-robin the 6 partitions over the members, encoded as real clients do.
            ids = sorted(m.member_id for m in join.members)
            for i, mid in enumerate(ids):
                parts = tuple(p for p in range(self.partitions) if p % len(ids) == i)
                data = encode_assignment(Assignment(partitions={self.topic: parts}))
                assignments.append({"member_id": mid, "assignment": data})
        resp = await self.client.request(
            "SyncGroup",
            3,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance,
                "assignments": assignments,
            },
        )
        if resp.error_code == NONE:
            self.assignment = bytes(resp.assignment)
            self.synced_generation = self.generation
        return int(resp.error_code)

    async def heartbeat(self) -> int:
        resp = await self.client.request(
            "Heartbeat",
            3,
            {
                "group_id": self.group,
                "generation_id": self.generation,
                "member_id": self.member_id,
                "group_instance_id": self.instance,
            },
        )
        return int(resp.error_code)

    async def run(self) -> None:
        await self.client.connect()
        while not self.stop.is_set():
            join = await self.join()
            if join.error_code != NONE:
                self.errors.append(join.error_code)
                if join.error_code in FATAL:
                    return
                continue
            code = await self.sync(join)
            if code != NONE:
                if code in FATAL:
                    self.errors.append(code)
                    return
                continue
            self.rejoin.clear()
            while not self.stop.is_set() and not self.rejoin.is_set():
                # The heartbeat timer: wake after 100 ms, or at once to stop or rejoin.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake(), 0.1)
                if self.stop.is_set() or self.rejoin.is_set():
                    break
                code = await self.heartbeat()
                if code == REBALANCING:
                    break
                if code != NONE:
                    self.errors.append(code)
                    return

    async def _wake(self) -> None:
        waits = [asyncio.ensure_future(self.stop.wait()), asyncio.ensure_future(self.rejoin.wait())]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    def start(self) -> RawMember:
        self.task = asyncio.create_task(self.run())
        return self

    async def leave(self) -> None:
        self.stop.set()
        if self.task is not None:
            await self.task
        # The batch form (v3+) where the broker has it; Kafka 2.3 speaks v0-2 only.
        version = await self.client.version("LeaveGroup")
        member = {"member_id": self.member_id, "group_instance_id": self.instance}
        values: dict[str, Any] = (
            {"group_id": self.group, "members": [member]}
            if version >= 3
            else {"group_id": self.group, "member_id": self.member_id}
        )
        await self.client.request("LeaveGroup", version, values)
        await self.client.close()

    async def close(self) -> None:
        self.stop.set()
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task
        await self.client.close()
