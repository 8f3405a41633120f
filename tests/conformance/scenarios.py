"""The conformance scenarios' registry and the tools raw-protocol scenarios are written with.

A scenario is a function of a broker that returns its **outcome**: a JSON-able dict of what
was observed (error codes, generations relative to the start, the protocol chosen, who leads,
member order, what each member received), with member ids replaced by the names the scenario
gave its members, so outcomes from different brokers compare with ``==``. The conformance run
(``conftest.Conformance``) runs every scenario on every broker and compares the outcomes with
live Apache Kafka 2.3's.

Raw scenarios speak the protocol by hand through :class:`Member` (one connection each, at the
versions Kafka 2.3 speaks: :data:`V`), so that only the coordinator's rules, not the API
versions a client negotiates, decide their outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiogroup.protocol import Subscription, encode_subscription
from aiogroup.testing.embedded.client import RawClient
from aiogroup.testing.embedded.hashorder import FLAVOUR_MAPS, KeyOrder
from aiogroup.testing.fixtures import BrokerHandle

Outcome = dict[str, Any]

#: The versions raw scenarios use: the newest Kafka 2.3 speaks, which every broker here serves.
V = {
    "JoinGroup": 5,
    "SyncGroup": 3,
    "Heartbeat": 3,
    "LeaveGroup": 2,
    "OffsetCommit": 7,
    "OffsetFetch": 5,
    "DescribeGroups": 3,
    "ListGroups": 2,
    "DeleteGroups": 1,
}
SESSION_MS = 6000
MEMBER_ID_REQUIRED = 79


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Spec:
    """A registered scenario.

    ``kind`` is ``raw`` or ``peers`` (real clients in processes). ``profile`` picks the broker
    settings: ``default`` or ``limits`` (group.max.size=2, initial rebalance delay 2 s,
    connections.max.idle.ms 8 s). ``min_versions`` are API versions it needs (not applicable
    where the broker has none: Kafka 2.3 and the kafka2 flavour). ``tansu`` says why Tansu
    cannot run it (not applicable there) and ``tansu_differs`` why Tansu's outcome is expected
    to differ. ``rules`` are flavour rules the scenario exercises that the coordinator cannot
    record itself (e.g. API versions). An ``exclusive`` scenario runs alone, after the others
    of its broker: what it does touches every group (deleting a topic makes Kafka drop every
    Empty group without offsets).
    """

    name: str
    fn: Callable[[Env], Outcome]
    title: str
    kind: str = "raw"
    profile: str = "default"
    min_versions: dict[str, int] = field(default_factory=dict)
    tansu: str | None = None
    tansu_differs: str | None = None
    rules: tuple[str, ...] = ()
    exclusive: bool = False


SCENARIOS: dict[str, Spec] = {}


def scenario(
    title: str, **options: Any
) -> Callable[[Callable[[Env], Awaitable[Outcome]]], Callable[[Env], Awaitable[Outcome]]]:
    """Register an async raw-protocol scenario (run with ``asyncio.run`` in a worker thread)."""

    def register(
        fn: Callable[[Env], Awaitable[Outcome]],
    ) -> Callable[[Env], Awaitable[Outcome]]:
        def run(env: Env) -> Outcome:
            async def main() -> Outcome:
                try:
                    async with asyncio.timeout(env.timeout):
                        return await fn(env)
                finally:
                    await env.close()

            return asyncio.run(main())

        SCENARIOS[fn.__name__] = Spec(fn.__name__, run, title, **options)
        return fn

    return register


def peer_scenario(
    title: str, **options: Any
) -> Callable[[Callable[[Env], Outcome]], Callable[[Env], Outcome]]:
    """Register a scenario of real clients (a plain function, run in a worker thread)."""

    def register(fn: Callable[[Env], Outcome]) -> Callable[[Env], Outcome]:
        SCENARIOS[fn.__name__] = Spec(fn.__name__, fn, title, kind="peers", **options)
        return fn

    return register


class Env:
    """What a scenario gets: the broker, unique names, connections it need not close."""

    def __init__(self, handle: BrokerHandle, profile: str, *, slow: bool) -> None:
        self.handle = handle
        self.profile = profile
        self.slow = slow  # Tansu: every JoinGroup is held for half a session
        self.timeout = 300.0 if slow else 150.0
        self.groups: list[str] = []
        self.names: dict[str, str] = {}
        self._clients: list[RawClient] = []

    @property
    def bootstrap(self) -> str:
        return self.handle.bootstrap

    @property
    def kind(self) -> str:
        return self.handle.kind

    def group(self, prefix: str = "g") -> str:
        gid = unique(prefix)
        self.groups.append(gid)
        return gid

    def name(self, member_id: str) -> str:
        """The scenario's name for a member id ("?" for one it never saw)."""
        if not member_id:
            return ""
        return self.names.get(member_id, "?")

    def names_of(self, member_ids: Sequence[str]) -> list[str]:
        return [self.name(m) for m in member_ids]

    async def client(self, name: str = "raw") -> RawClient:
        client = await RawClient(self.bootstrap, client_id=name).connect()
        self._clients.append(client)
        return client

    async def close(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.close()

    async def topic(self, partitions: int = 2, name: str | None = None) -> str:
        """Create a topic and wait (bounded) until every partition has a leader."""
        name = name or unique("t")
        admin = await self.client("admin")
        deadline = time.monotonic() + 60
        while True:
            resp = await admin.request(
                "CreateTopics",
                None,
                {
                    "topics": [
                        {
                            "name": name,
                            "num_partitions": partitions,
                            "replication_factor": 1,
                            "assignments": [],
                            "configs": [],
                        }
                    ],
                    "timeout_ms": 10_000,
                },
            )
            code = resp.topics[0].error_code
            if code == 0:
                break
            # 36: a deleted topic of that name is still being removed (Kafka deletes lazily).
            if code != 36 or time.monotonic() > deadline:
                raise AssertionError(f"CreateTopics {name}: error {code}")
            await asyncio.sleep(0.2)  # polling the broker's deletion, bounded
        while True:
            meta = await admin.request("Metadata", None, {"topics": [{"name": name}]})
            t = meta.topics[0]
            if (
                t.error_code == 0
                and len(t.partitions) == partitions
                and all(p.leader_id >= 0 for p in t.partitions)
            ):
                return name
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {name} has no leaders")
            await asyncio.sleep(0.05)  # polling the broker's metadata, bounded

    async def delete_topic(self, name: str) -> None:
        """Delete a topic and wait (bounded) until the metadata no longer shows it."""
        admin = await self.client("admin")
        resp = await admin.request(
            "DeleteTopics", None, {"topic_names": [name], "timeout_ms": 10_000}
        )
        assert resp.responses[0].error_code == 0, resp
        deadline = time.monotonic() + 60
        while True:
            meta = await admin.request(
                "Metadata", None, {"topics": [{"name": name}], "allow_auto_topic_creation": False}
            )
            if meta.topics[0].error_code == 3:
                return
            assert time.monotonic() < deadline, f"topic {name} was not deleted"
            await asyncio.sleep(0.1)  # polling the broker's deletion, bounded

    async def describe(self, group: str, version: int = 0, **extra: Any) -> Any:
        """DescribeGroups (v0 unless the scenario looks at a later field)."""
        client = await self.client("describe")
        resp = await client.request("DescribeGroups", version, {"groups": [group], **extra})
        return resp.groups[0]

    async def wait_described(
        self, group: str, predicate: Callable[[Any], bool], what: str, timeout: float = 30.0
    ) -> Any:
        """Wait (bounded) until ``predicate(group)`` holds for the broker's view of the group:
        an object with ``group_state`` and ``members``. The embedded broker is read directly
        (a probe that is no request of the scenario's); others are asked with DescribeGroups."""
        deadline = time.monotonic() + timeout * (3 if self.slow else 1)
        while True:
            described = await self._view(group)
            if predicate(described):
                return described
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {described}")
            await asyncio.sleep(0.05)  # polling the broker's view of the group, bounded

    async def settle(
        self, group: str, predicate: Callable[[Any], bool], what: str, seconds: float = 1.0
    ) -> None:
        """Let a request that changes nothing Kafka shows reach the coordinator: on the
        embedded broker, wait (bounded) for ``predicate(GroupView)``; elsewhere (Kafka shows
        no parked request) the scenario's next step simply comes ``seconds`` later."""
        if self.handle.embedded is None:
            await asyncio.sleep(seconds)  # the scenario's pace: Kafka exposes no such state
            return
        await self.wait_described(group, predicate, what)

    async def _view(self, group: str) -> Any:
        embedded = self.handle.embedded
        if embedded is None:
            return await self.describe(group)
        view = await asyncio.to_thread(embedded.group, group)
        state = view.state if view is not None else "Dead"
        return _View(state, view.members if view is not None else ())

    async def fetch(self, group: str, topic: str, partition: int = 0) -> tuple[int, str | None]:
        client = await self.client("fetch")
        resp = await client.request(
            "OffsetFetch",
            V["OffsetFetch"],
            {"group_id": group, "topics": [{"name": topic, "partition_indexes": [partition]}]},
        )
        p = resp.topics[0].partitions[0]
        return int(p.committed_offset), p.metadata

    async def listed(self, group: str) -> str | None:
        """The protocol type ListGroups gives ``group`` (None: not listed)."""
        client = await self.client("list")
        resp = await client.request("ListGroups", V["ListGroups"], {})
        return next((g.protocol_type for g in resp.groups if g.group_id == group), None)


@dataclass(frozen=True)
class _View:
    """The part of a DescribeGroups answer the scenarios wait on."""

    group_state: str
    members: Sequence[Any]


def subscription(topics: Sequence[str] = ("t",)) -> bytes:
    return encode_subscription(Subscription(topics=list(topics)))


class Member:
    """One raw member on its own connection (``Member.create``)."""

    def __init__(
        self,
        env: Env,
        client: RawClient,
        group: str,
        name: str,
        protocols: Sequence[str],
        instance: str | None,
        session_ms: int,
        rebalance_ms: int,
    ) -> None:
        self.env = env
        self.client = client
        self.group = group
        self.name = name
        self.protocols = list(protocols)
        self.metadata = subscription()
        self.instance = instance
        self.session_ms = session_ms
        self.rebalance_ms = rebalance_ms
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.protocol: str | None = None
        self.members: list[str] = []

    @classmethod
    async def create(
        cls,
        env: Env,
        group: str,
        name: str,
        protocols: Sequence[str] = ("range",),
        *,
        instance: str | None = None,
        session_ms: int = SESSION_MS,
        rebalance_ms: int = 10_000,
    ) -> Member:
        client = await env.client(name)
        return cls(env, client, group, name, protocols, instance, session_ms, rebalance_ms)

    async def other_connection(self) -> Member:
        """The same member on a second connection (a client that reconnected)."""
        twin = await Member.create(
            self.env,
            self.group,
            self.name,
            self.protocols,
            instance=self.instance,
            session_ms=self.session_ms,
            rebalance_ms=self.rebalance_ms,
        )
        twin.member_id, twin.generation = self.member_id, self.generation
        return twin

    def _remember(self, resp: Any) -> None:
        if resp.member_id:
            self.member_id = resp.member_id
            self.env.names.setdefault(resp.member_id, self.name)
        if resp.error_code == 0:
            self.generation = resp.generation_id
            self.leader = resp.leader
            self.protocol = resp.protocol_name
            self.members = [m.member_id for m in resp.members]

    async def join_once(self, version: int | None = None, **extra: Any) -> Any:
        """One JoinGroup with the current member id (no retry)."""
        values = {
            "group_id": self.group,
            "session_timeout_ms": self.session_ms,
            "rebalance_timeout_ms": self.rebalance_ms,
            "member_id": self.member_id,
            "group_instance_id": self.instance,
            "protocol_type": "consumer",
            "protocols": [{"name": p, "metadata": self.metadata} for p in self.protocols],
            **extra,
        }
        resp = await self.client.request(
            "JoinGroup", version or V["JoinGroup"], values, timeout=self.env.timeout
        )
        self._remember(resp)
        return resp

    async def join(self, version: int | None = None, **extra: Any) -> Any:
        """JoinGroup, and once more with the id a MEMBER_ID_REQUIRED answer handed out."""
        resp = await self.join_once(version, **extra)
        if resp.error_code == MEMBER_ID_REQUIRED:
            resp = await self.join_once(version, **extra)
        return resp

    async def get_id(self) -> str:
        """KIP-394's first step only: a pending member id."""
        resp = await self.join_once()
        assert resp.error_code == MEMBER_ID_REQUIRED, resp
        return str(resp.member_id)

    async def sync(
        self,
        assignments: dict[str, bytes] | None = None,
        *,
        generation: int | None = None,
        member_id: str | None = None,
    ) -> Any:
        values = {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance,
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
        }
        return await self.client.request(
            "SyncGroup", V["SyncGroup"], values, timeout=self.env.timeout
        )

    async def sync_as_leader(self) -> Any:
        """The leader's SyncGroup: each member gets its own name as assignment."""
        return await self.sync({m: self.env.name(m).encode() for m in self.members})

    async def heartbeat(
        self, *, generation: int | None = None, member_id: str | None = None, **extra: Any
    ) -> int:
        values = {
            "group_id": self.group,
            "generation_id": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance,
            **extra,
        }
        resp = await self.client.request("Heartbeat", V["Heartbeat"], values)
        return int(resp.error_code)

    async def leave(self, member_id: str | None = None) -> int:
        values = {
            "group_id": self.group,
            "member_id": self.member_id if member_id is None else member_id,
        }
        resp = await self.client.request("LeaveGroup", V["LeaveGroup"], values)
        return int(resp.error_code)

    async def commit(
        self,
        topic: str,
        partition: int = 0,
        offset: int = 10,
        *,
        generation: int | None = None,
        member_id: str | None = None,
        metadata: str | None = "",
        group: str | None = None,
    ) -> int:
        values = {
            "group_id": group or self.group,
            "generation_id_or_member_epoch": self.generation if generation is None else generation,
            "member_id": self.member_id if member_id is None else member_id,
            "group_instance_id": self.instance,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offset,
                            "committed_metadata": metadata,
                        }
                    ],
                }
            ],
        }
        resp = await self.client.request("OffsetCommit", V["OffsetCommit"], values)
        return int(resp.topics[0].partitions[0].error_code)


async def simple_commit(env: Env, group: str, topic: str, partition: int = 0, **kw: Any) -> int:
    """An admin / manual-assignment commit: generation -1, no member."""
    m = await Member.create(env, group, "admin")
    return await m.commit(topic, partition, generation=-1, member_id="", **kw)


async def form(
    env: Env,
    group: str,
    names: Sequence[str],
    protocols: Sequence[Sequence[str]] | None = None,
    **kw: Any,
) -> list[Member]:
    """A Stable group: the first member joins alone; the others get their ids (KIP-394) and
    join one by one, each seen in DescribeGroups before the next is sent (so the coordinator
    adds them in this order); the first rejoins; all sync. Returns the members, first first."""
    lists = list(protocols) if protocols is not None else [("range",)] * len(names)
    members = [
        await Member.create(env, group, n, p, **kw) for n, p in zip(names, lists, strict=True)
    ]
    first = members[0]
    joined = await first.join()
    assert joined.error_code == 0, f"{first.name} joined with {joined.error_code}"
    synced = await first.sync_as_leader()
    assert synced.error_code == 0, f"{first.name} synced with {synced.error_code}"
    if len(members) == 1:
        return members
    for m in members[1:]:
        await m.get_id()
    parked = []
    for i, m in enumerate(members[1:], start=2):
        parked.append(asyncio.ensure_future(m.join_once()))

        def joined_so_far(described: Any, i: int = i) -> bool:
            return len(described.members) >= i

        await env.wait_described(group, joined_so_far, f"{m.name} in the group")
    joined = [await first.join_once(), *[await p for p in parked]]
    assert all(r.error_code == 0 for r in joined), [r.error_code for r in joined]
    await sync_all(members)
    return members


async def sync_all(members: Sequence[Member]) -> list[Any]:
    """Followers sync (parked until the leader's assignment), then the leader."""
    leader = next(m for m in members if m.member_id == m.leader)
    followers = [asyncio.ensure_future(m.sync()) for m in members if m is not leader]
    answers = [await leader.sync_as_leader(), *[await f for f in followers]]
    assert all(a.error_code == 0 for a in answers), [a.error_code for a in answers]
    return answers


async def rejoin_all(members: Sequence[Member]) -> list[Any]:
    """Everyone rejoins at once (a rebalance completes once all did)."""
    return list(await asyncio.gather(*(m.join_once() for m in members)))


def roles(a: Member, b: Member) -> tuple[Member, Member]:
    """(leader, follower) of a two-member group."""
    return (a, b) if a.member_id == a.leader else (b, a)


async def rebalancing(env: Env, group: str, member: Member) -> asyncio.Future[Any]:
    """``member`` rejoins (the leader's rejoin, or new metadata, starts a rebalance): its
    parked JoinGroup, once the group is PreparingRebalance."""
    parked = asyncio.ensure_future(member.join_once())
    await env.wait_described(group, lambda d: d.group_state == "PreparingRebalance", "a rebalance")
    return parked


async def answered_within(fut: asyncio.Future[Any], seconds: float) -> bool:
    """Whether ``fut`` completes within ``seconds`` (a bound on waiting for an answer that
    must not come, after the group moved on)."""
    try:
        await asyncio.wait_for(asyncio.shield(fut), seconds)
    except TimeoutError:
        return False
    return True


# --- orders -----------------------------------------------------------------------------------

#: The member orders a broker may follow, in the order they are tried (Kafka 2.3's first).
ORDER_MODELS: dict[str, type[KeyOrder]] = {
    "Scala 2.12 HashMap": FLAVOUR_MAPS["kafka2"],
    "Scala 2.13 HashMap": FLAVOUR_MAPS["kafka3"],
    "java.util.HashMap": FLAVOUR_MAPS["kafka4"],
}


def order_model(history: Sequence[tuple[str, str]], observed: Sequence[str]) -> str:
    """Which map's iteration order ``observed`` follows after the put/remove ``history``
    (``("+", id)`` / ``("-", id)``): the first model that predicts it, "join order" if only the
    insertion order does, else "another order"."""
    for name, cls in ORDER_MODELS.items():
        keys = cls()
        for op, key in history:
            (keys.put if op == "+" else keys.remove)(key)
        if list(keys) == list(observed):
            return name
    live = [k for op, k in history if op == "+" and ("-", k) not in history]
    return "join order" if list(observed) == live else "another order"


def order_models(history: Sequence[tuple[str, str]], observed: Sequence[str]) -> set[str]:
    """Every map whose iteration order ``observed`` follows after the put/remove ``history``
    (Java's and Scala 2.13's share their bucket function: on a few keys they often agree);
    else ``{"join order"}`` if only the insertion order does, ``{"another order"}`` if none."""
    found = set()
    for name, cls in ORDER_MODELS.items():
        keys = cls()
        for op, key in history:
            (keys.put if op == "+" else keys.remove)(key)
        if list(keys) == list(observed):
            found.add(name)
    if found:
        return found
    return {order_model(history, observed)}


def elapsed_class(seconds: float, delay: float) -> str:
    """A duration against a configured delay, coarse enough to be stable on a loaded host."""
    if seconds < delay * 0.5:
        return "at once"
    if seconds < delay * 1.5:
        return "after the delay"
    return "after twice the delay"
