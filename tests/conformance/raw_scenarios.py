"""Raw-protocol scenarios: each rule of the classic coordinator driven by hand on one connection
per member, its outcome recorded (see ``scenarios.py``). Kafka's code for each rule is cited
where the embedded broker implements it (``aiogroup/testing/embedded/``: ``coordinator.py``,
``member_requests.py``, ``rebalance.py``; what differs per Kafka version: ``rules.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiogroup.testing import wire

from .scenarios import (
    ORDER_MODELS,
    Env,
    Member,
    Outcome,
    V,
    answered_within,
    elapsed_class,
    form,
    order_models,
    rebalancing,
    rejoin_all,
    roles,
    scenario,
    simple_commit,
    subscription,
    sync_all,
)

NO_VOTE = "no protocol vote (Tansu keeps the first member's first protocol)"
WEAK_STATIC = "weak static membership (no FENCED_INSTANCE_ID, ids given back)"
NO_LIMITS = "has no group.max.size, initial rebalance delay or connections.max.idle.ms setting"
NO_PREPARING = "DescribeGroups never shows PreparingRebalance, which the scenario waits for"


# --- joining ---------------------------------------------------------------------------------


@scenario(
    "JoinGroup, SyncGroup, Heartbeat of one member; DescribeGroups and ListGroups",
    tansu_differs=(
        "generations start at 0; DescribeGroups has no protocol or metadata (broker.md, Tansu 6-7)"
    ),
)
async def join_and_sync_basics(env: Env) -> Outcome:
    group = env.group()
    a = await Member.create(env, group, "a")
    first = await a.join_once()
    second = await a.join_once()
    synced = await a.sync({a.member_id: b"A"})
    described = await env.describe(group)
    (member,) = described.members
    return {
        "first join": first.error_code,
        "second join": [second.error_code, second.generation_id, env.name(second.leader)],
        "protocol": second.protocol_name,
        "leader's members": env.names_of([m.member_id for m in second.members]),
        "sync": [synced.error_code, bytes(synced.assignment).decode()],
        "heartbeat": await a.heartbeat(),
        "described": [described.group_state, described.protocol_type, described.protocol_data],
        "described member metadata": (
            "the assignment"
            if bytes(member.member_metadata) == b"A"
            else "the subscription"
            if bytes(member.member_metadata) == a.metadata
            else "other"
        ),
        "listed": await env.listed(group),
    }


@scenario(
    "KIP-394: JoinGroup v4+ without id gets MEMBER_ID_REQUIRED; v3 joins at once",
    tansu_differs="MEMBER_ID_REQUIRED on JoinGroup v3 too; generations start at 0",
)
async def member_id_required(env: Env) -> Outcome:
    group, old = env.group(), env.group()
    a = await Member.create(env, group, "a")
    first = await a.join_once(version=4)
    then = await a.join_once(version=4)
    b = await Member.create(env, old, "b")
    v3 = await b.join_once(version=3)
    return {
        "v4 first": [first.error_code, bool(first.member_id)],
        "v4 with the id": [then.error_code, then.generation_id],
        "v3": [v3.error_code, v3.generation_id],
    }


@scenario(
    "JoinGroup errors: group id, session timeout bounds, unknown member, protocols",
    tansu_differs="see the outcome: several join errors are not Kafka's",
)
async def join_errors(env: Env) -> Outcome:
    group = env.group()
    (existing,) = await form(env, group, ["x"])

    async def code(name: str, request: Callable[[Member], Awaitable[Any]], **kw: Any) -> Any:
        m = await Member.create(env, kw.pop("group", env.group()), name, **kw)
        try:
            resp = await request(m)
        except asyncio.IncompleteReadError:
            return "connection closed"
        return resp if isinstance(resp, int) else int(resp.error_code)

    async def made_up(m: Member) -> Any:
        m.member_id = "made-up"
        return await m.join_once()

    return {
        "empty group id": await code("a", Member.join_once, group=""),
        "session below the minimum": await code("a", Member.join_once, session_ms=500),
        "session above the maximum": await code("a", Member.join_once, session_ms=1_800_001),
        "unknown member, new group": await code("a", made_up),
        "unknown member, existing group": await code("a", made_up, group=group),
        "no protocol type": await code("a", lambda m: m.join_once(protocol_type="")),
        "no protocols": await code("a", Member.join_once, protocols=()),
        "heartbeat, unknown group": await code(
            "a", lambda m: m.heartbeat(generation=1, member_id="made-up")
        ),
        "leave, unknown group": await code("a", lambda m: m.leave(member_id="made-up")),
        "sync, unknown group": await code("a", lambda m: m.sync(generation=1, member_id="x")),
        "existing member still fine": await existing.heartbeat(),
    }


@scenario(
    "INCONSISTENT_GROUP_PROTOCOL: disjoint protocols, another protocol type",
    tansu_differs="a member of another protocol type is accepted",
)
async def inconsistent_protocols(env: Env) -> Outcome:
    group = env.group()
    await form(env, group, ["a"])
    b = await Member.create(env, group, "b", ["roundrobin"])
    c = await Member.create(env, group, "c")
    return {
        "disjoint": (await b.join()).error_code,
        "other type": (await c.join(protocol_type="connect")).error_code,
        "state": (await env.describe(group)).group_state,
    }


@scenario("The protocol vote: most votes among the protocols every member supports", tansu=NO_VOTE)
async def vote_majority(env: Env) -> Outcome:
    group = env.group()
    members = await form(
        env,
        group,
        ["rr", "r1", "r2"],
        [("roundrobin", "range"), ("range", "roundrobin"), ("range", "roundrobin")],
    )
    return {"protocol": members[0].protocol, "described": (await env.describe(group)).protocol_data}


@scenario("Vote tie 1-1: range vs sticky (each version's hash map decides)", tansu=NO_VOTE)
async def vote_tie_two(env: Env) -> Outcome:
    group = env.group()
    members = await form(env, group, ["a", "b"], [("range", "sticky"), ("sticky", "range")])
    return {"protocol": members[0].protocol}


@scenario("Vote tie 4-way between four protocols", tansu=NO_VOTE)
async def vote_tie_four(env: Env) -> Outcome:
    names = ["range", "roundrobin", "sticky", "cooperative-sticky"]
    group = env.group()
    lists = [names[i:] + names[:i] for i in range(4)]
    members = await form(env, group, ["a", "b", "c", "d"], lists)
    return {"protocol": members[0].protocol}


@scenario("Vote tie 5-way (past Scala's Map4: a hash trie in 2.x)", tansu=NO_VOTE)
async def vote_tie_five(env: Env) -> Outcome:
    names = ["range", "roundrobin", "sticky", "cooperative-sticky", "custom"]
    group = env.group()
    lists = [names[i:] + names[:i] for i in range(5)]
    members = await form(env, group, ["a", "b", "c", "d", "e"], lists)
    return {"protocol": members[0].protocol}


@scenario(
    "Member order in the leader's JoinGroup answer and DescribeGroups; the next leaders",
    tansu="members are not kept in a hash map (nothing to compare)",
)
async def member_order_and_next_leaders(env: Env) -> Outcome:
    # Each group's member ids are random, and often two maps happen to agree on a group's
    # order (Java's and Scala 2.13's share their bucket function, and agree on about two
    # groups' leaders in three): then another group is formed, until one model alone explains
    # each order in every group so far (a bound of 30 groups leaves ~1e-5 undecided).
    explained: dict[str, set[str]] = {}
    for _ in range(30):
        for key, models in (await _orders_and_leaders(env)).items():
            explained[key] = explained.get(key, models) & models
        if all(len(models) <= 1 for models in explained.values()):
            break
    return {
        key: next(iter(models)) if len(models) == 1 else sorted(models) or "no one order"
        for key, models in explained.items()
    }


async def _orders_and_leaders(env: Env) -> dict[str, set[str]]:
    """Eight members; the leader leaves five times. The maps whose order the first answer's
    member list and DescribeGroups follow, and those whose order predicts each next leader
    (the first key once the leader is removed)."""
    group = env.group()
    names = [f"m{i}" for i in range(8)]
    members = await form(env, group, names)
    history = [("+", m.member_id) for m in members]
    leader_list = members[0].members
    described = [m.member_id for m in (await env.describe(group)).members]
    leaders = []
    live = list(members)
    for _ in range(5):
        leader = next(m for m in live if m.member_id == m.leader)
        assert await leader.leave() == 0
        history.append(("-", leader.member_id))
        live.remove(leader)
        answers = await rejoin_all(live)
        leaders.append(answers[0].leader)
        await sync_all(live)
    next_leaders = set()
    for name, cls in ORDER_MODELS.items():
        keys = cls()
        predicted = []
        for op, key in history:
            (keys.put if op == "+" else keys.remove)(key)
            if op == "-":
                predicted.append(next(iter(keys)))
        if predicted == leaders:
            next_leaders.add(name)
    return {
        "leader's member list": order_models(history[:8], leader_list),
        "DescribeGroups members": order_models(history[:8], described),
        "next leaders": next_leaders or {"another order"},
    }


# --- rejoining, heartbeats, sync ---------------------------------------------------------------


@scenario(
    "Rejoins: same metadata in CompletingRebalance and Stable; the leader's rejoin",
    tansu=NO_PREPARING,
)
async def rejoins(env: Env) -> Outcome:
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    gen = a.generation
    out: Outcome = {}
    follower = b if b.member_id != b.leader else a
    leader = a if follower is b else b
    again = await follower.join_once()
    out["follower, Stable, same metadata"] = [again.error_code, again.generation_id - gen]
    rejoin_leader = await rebalancing(env, group, leader)
    answers = [await follower.join_once(), await rejoin_leader]
    out["leader's rejoin"] = [answers[1].error_code, answers[1].generation_id - gen]
    completing = await follower.join_once()  # CompletingRebalance, same metadata
    out["follower, CompletingRebalance, same metadata"] = [
        completing.error_code,
        completing.generation_id - gen,
        len(completing.members),
    ]
    leader_again = await leader.join_once()
    out["leader, CompletingRebalance, same metadata"] = [
        leader_again.error_code,
        leader_again.generation_id - gen,
        len(leader_again.members),
    ]
    return out


@scenario("Heartbeat answers in each state, for stale and unknown members", tansu=NO_PREPARING)
async def heartbeat_states(env: Env) -> Outcome:
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    out: Outcome = {"Stable": await a.heartbeat()}
    out["wrong generation"] = await a.heartbeat(generation=a.generation + 5)
    out["unknown member"] = await a.heartbeat(member_id="made-up")
    leader, follower = roles(a, b)
    parked = await rebalancing(env, group, leader)
    out["PreparingRebalance"] = await follower.heartbeat()
    await follower.join_once()
    await parked
    out["CompletingRebalance"] = await follower.heartbeat()
    await sync_all([a, b])
    for m in (a, b):
        assert await m.leave() == 0
    await env.wait_described(group, lambda d: d.group_state == "Empty", "the group to empty")
    out["Empty"] = await a.heartbeat()
    return out


@scenario(
    "SyncGroup errors; a member left out of the assignment gets an empty one", tansu=NO_PREPARING
)
async def sync_rules(env: Env) -> Outcome:
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    out: Outcome = {
        "wrong generation": (await a.sync(generation=a.generation + 1)).error_code,
        "unknown member": (await a.sync(member_id="made-up")).error_code,
    }
    stable = await b.sync()
    out["Stable: the current assignment"] = [stable.error_code, bytes(stable.assignment).decode()]
    leader, follower = roles(a, b)
    parked = await rebalancing(env, group, leader)
    out["PreparingRebalance"] = (await follower.sync()).error_code
    await follower.join_once()
    await parked
    waiting = asyncio.ensure_future(follower.sync())
    left_out = await leader.sync({leader.member_id: b"L"})
    got = await waiting
    out["left out of the assignment"] = [got.error_code, bytes(got.assignment).decode()]
    out["leader"] = [left_out.error_code, bytes(left_out.assignment).decode()]
    return out


@scenario(
    "LeaveGroup v0-2: leaving, leaving twice, the others rebalance, the group empties",
    tansu_differs="a second LeaveGroup, and one for an unknown member, are accepted",
)
async def leave_rules(env: Env) -> Outcome:
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    out: Outcome = {"leave": await b.leave(), "leave again": await b.leave()}
    out["the other's heartbeat"] = await a.heartbeat()
    out["unknown member"] = await a.leave(member_id="made-up")
    answer = await a.join_once()
    out["rejoin alone"] = [answer.error_code, answer.generation_id - b.generation]
    await a.sync_as_leader()
    out["last leaves"] = await a.leave()
    await env.wait_described(group, lambda d: d.group_state == "Empty", "Empty")
    out["state"] = (await env.describe(group)).group_state
    return out


@scenario(
    "A JoinGroup superseded by the same member's next one is never answered", tansu=NO_PREPARING
)
async def superseded_join(env: Env) -> Outcome:
    # The follower rejoins with new metadata (a rebalance) and again from a second connection
    # (a client that gave up on the first); the leader never rejoins, so the rebalance ends on
    # its timeout (2 s), long after both JoinGroups arrived.
    group = env.group()
    a, b = await form(env, group, ["a", "b"], rebalance_ms=2000)
    leader, follower = roles(a, b)
    follower.metadata = subscription(["t", "u"])
    first = await rebalancing(env, group, follower)
    twin = await follower.other_connection()
    twin.metadata = follower.metadata
    got = await twin.join_once()
    return {
        "second": [
            got.error_code,
            got.generation_id - leader.generation,
            env.names_of([m.member_id for m in got.members]),
        ],
        "leader dropped": await leader.heartbeat(),
        "first answered": await answered_within(first, 2.0),
    }


@scenario(
    "The SyncGroup of a member that leaves while it waits is never answered", tansu=NO_PREPARING
)
async def leaver_sync(env: Env) -> Outcome:
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    leader, follower = roles(a, b)
    parked_join = await rebalancing(env, group, leader)
    await follower.join_once()
    await parked_join
    waiting = asyncio.ensure_future(follower.sync())
    await env.settle(
        group, lambda d: any(m.awaiting_sync for m in d.members), "the SyncGroup to park"
    )
    twin = await follower.other_connection()
    out: Outcome = {"leave": await twin.leave()}
    out["leader's sync"] = (await leader.sync_as_leader()).error_code
    again = await leader.join_once()
    out["leader alone"] = [again.error_code, len(again.members)]
    await leader.sync_as_leader()
    out["the leaver's sync answered"] = await answered_within(waiting, 2.0)
    return out


# --- offsets -----------------------------------------------------------------------------------


@scenario("OffsetCommit and the generation: members, strangers, each state", tansu=NO_PREPARING)
async def commit_rules(env: Env) -> Outcome:
    topic = await env.topic(1)
    group = env.group()
    out: Outcome = {"simple commit, new group": await simple_commit(env, group, topic)}
    out["listed as"] = await env.listed(group)
    g2 = env.group()
    a, b = await form(env, g2, ["a", "b"])
    out["member"] = await a.commit(topic)
    out["wrong generation"] = await a.commit(topic, generation=a.generation + 3)
    out["unknown member"] = await a.commit(topic, member_id="made-up")
    out["simple commit, Stable group"] = await simple_commit(env, g2, topic)
    out["generation 5, unknown group"] = await a.commit(topic, group=env.group())
    leader, follower = roles(a, b)
    parked = await rebalancing(env, g2, leader)
    out["PreparingRebalance"] = await follower.commit(topic)
    old = follower.generation
    await follower.join_once()
    await parked
    out["CompletingRebalance"] = await follower.commit(topic)
    out["CompletingRebalance, old generation"] = await follower.commit(topic, generation=old)
    out["CompletingRebalance, stranger"] = await follower.commit(topic, member_id="made-up")
    return out


@scenario(
    "OffsetCommit to an unknown topic or partition: error 3, no group created",
    tansu_differs="a commit to a partition beyond the topic's count is accepted",
)
async def commit_unknown_partitions(env: Env) -> Outcome:
    topic = await env.topic(2)
    out: Outcome = {}
    for label, (t, p) in {
        "unknown topic": ("no-such-topic", 0),
        "partition 2 of 2": (topic, 2),
    }.items():
        group = env.group()
        out[label] = await simple_commit(env, group, t, p)
        out[f"{label}: group"] = (await env.describe(group)).group_state
        out[f"{label}: listed"] = await env.listed(group)
        out[f"{label}: fetched"] = (await env.fetch(group, t, p))[0]
    return out


@scenario(
    "Commit metadata size: offset.metadata.max.bytes counts UTF-16 code units",
    tansu_differs="commit metadata is not kept (broker.md, Tansu 6)",
)
async def commit_metadata_size(env: Env) -> Outcome:
    topic = await env.topic(1)
    group = env.group()
    out: Outcome = {}
    cases = {
        "4096 x é (8192 UTF-8 bytes)": "é" * 4096,
        "2048 x 😀 (4096 UTF-16 units)": "😀" * 2048,
        "2049 x 😀": "😀" * 2049,
        "4097 x a": "a" * 4097,
        "null": None,
        "text": "hello",
    }
    for label, metadata in cases.items():
        code = await simple_commit(env, group, topic, metadata=metadata)
        out[label] = [code, (await env.fetch(group, topic))[1] == (metadata or "")]
    return out


@scenario(
    "Committed offsets of a deleted topic are gone when it is created again",
    exclusive=True,
    tansu_differs="a group left without offsets stays (Empty)",
)
async def offsets_after_topic_deletion(env: Env) -> Outcome:
    topic = await env.topic(1)
    kept = await env.topic(1)
    group, other = env.group(), env.group()
    await simple_commit(env, group, topic, offset=7)
    await simple_commit(env, other, topic, offset=8)
    await simple_commit(env, other, kept, offset=9)
    out: Outcome = {"before": (await env.fetch(group, topic))[0]}
    await env.delete_topic(topic)
    await env.topic(1, name=topic)
    out["after"] = (await env.fetch(group, topic))[0]
    out["group"] = (await env.describe(group)).group_state
    out["other group, deleted topic"] = (await env.fetch(other, topic))[0]
    out["other group, other topic"] = (await env.fetch(other, kept))[0]
    out["other group"] = (await env.describe(other)).group_state
    return out


@scenario(
    "OffsetFetch of a group that never committed; DeleteGroups",
    tansu_differs="DeleteGroups answers 0 for non-empty and unknown groups",
)
async def fetch_and_delete_groups(env: Env) -> Outcome:
    topic = await env.topic(1)
    out: Outcome = {"unknown group": list(await env.fetch(env.group(), topic))}
    empty, busy = env.group(), env.group()
    await simple_commit(env, empty, topic, offset=3)
    await form(env, busy, ["a"])
    admin = await env.client("admin")
    unknown = env.group()
    resp = await admin.request(
        "DeleteGroups", V["DeleteGroups"], {"groups_names": [empty, busy, unknown]}
    )
    # One result per group (Kafka 2.3 lists them in its map's order: matched by id here).
    codes = {r.group_id: r.error_code for r in resp.results}
    out["deleted"] = {"empty": codes[empty], "busy": codes[busy], "unknown": codes[unknown]}
    out["offsets of the deleted group"] = (await env.fetch(empty, topic))[0]
    return out


# --- DescribeGroups -------------------------------------------------------------------------


@scenario(
    "DescribeGroups in each state; authorized operations asked for or not", tansu=NO_PREPARING
)
async def describe_states(env: Env) -> Outcome:
    topic = await env.topic(1)
    out: Outcome = {}
    unknown = await env.describe(env.group(), version=3)
    out["unknown"] = [unknown.error_code, unknown.group_state, len(unknown.members)]
    empty = env.group()
    await simple_commit(env, empty, topic)
    d = await env.describe(empty, version=3)
    out["commit only"] = [d.group_state, d.protocol_type, d.protocol_data]
    group = env.group()
    a, b = await form(env, group, ["a", "b"])
    d = await env.describe(group, version=3)
    out["Stable"] = [d.group_state, d.protocol_data, len(d.members)]
    # kafka-python decodes the bitfield to a set of bits, and -2^31 ("not provided") to None.
    ops = d.authorized_operations
    out["authorized operations, not asked"] = None if ops is None else sorted(ops)
    asked = await env.describe(group, version=3, include_authorized_operations=True)
    out["authorized operations, asked"] = sorted(asked.authorized_operations or ())
    leader, _ = roles(a, b)
    parked = await rebalancing(env, group, leader)
    d = await env.describe(group, version=3)
    out["PreparingRebalance"] = [
        d.protocol_data,
        sorted(bytes(m.member_metadata) for m in d.members) == [b"", b""],
    ]
    other = b if leader is a else a
    await other.join_once()
    await parked
    d = await env.describe(group, version=3)
    out["CompletingRebalance"] = [d.group_state, d.protocol_data]
    return out


# --- static membership (KIP-345) -------------------------------------------------------------


@scenario(
    "A static member restarts in a Stable group: no rebalance, the old id is fenced",
    tansu=WEAK_STATIC,
)
async def static_restart_stable(env: Env) -> Outcome:
    g = env.group()
    s1 = await Member.create(env, g, "s1", instance="s1")
    s2 = await Member.create(env, g, "s2", instance="s2")
    members = await _form_static(env, g, [s1, s2])
    leader = next(m for m in members if m.member_id == m.leader)
    follower = next(m for m in members if m is not leader)
    old_id, gen = follower.member_id, follower.generation
    restarted = await Member.create(env, g, "s-new", instance=follower.instance)
    answer = await restarted.join_once()
    out: Outcome = {
        "restart": [
            answer.error_code,
            answer.generation_id - gen,
            "old leader" if answer.leader == leader.member_id else env.name(answer.leader),
            answer.member_id == old_id,
            len(answer.members),
        ],
        "leader's heartbeat": await leader.heartbeat(),
        "old id: heartbeat": await follower.heartbeat(member_id=old_id),
        "old id: sync": (await follower.sync(member_id=old_id)).error_code,
        "old id: commit": await follower.commit(await env.topic(1), member_id=old_id),
        "old id: join": (await follower.join_once()).error_code,
        "new id: sync": (await restarted.sync()).error_code,
    }
    return out


async def _form_static(env: Env, group: str, members: list[Member]) -> list[Member]:
    """Like ``form`` for members that may be static (they need no KIP-394 id)."""
    first, *others = members
    await first.join()
    await first.sync_as_leader()
    parked = [asyncio.ensure_future(m.join()) for m in others]
    await env.wait_described(group, lambda d: len(d.members) == len(members), "members")
    await first.join_once()
    for p in parked:
        await p
    await sync_all(members)
    return members


@scenario("A static member restarts while CompletingRebalance", tansu=WEAK_STATIC)
async def static_restart_completing(env: Env) -> Outcome:
    g = env.group()
    s1 = await Member.create(env, g, "s1", instance="s1")
    s2 = await Member.create(env, g, "s2", instance="s2")
    members = await _form_static(env, g, [s1, s2])
    leader = next(m for m in members if m.member_id == m.leader)
    follower = next(m for m in members if m is not leader)
    gen = leader.generation
    parked = await rebalancing(env, g, leader)
    await follower.join_once()
    await parked  # CompletingRebalance now
    restarted = await Member.create(env, g, "s-new", instance=follower.instance)
    join = asyncio.ensure_future(restarted.join_once())
    # Kafka 2.3 answers at once; later versions park it until the rebalance ends.
    out: Outcome = {"answered at once": await answered_within(join, 3.0)}
    lsync = await leader.sync_as_leader()
    out["leader's sync"] = lsync.error_code
    if lsync.error_code == 27:  # the restart started a new rebalance: the leader rejoins
        await leader.join_once()
    answer = await join
    out["restart"] = [answer.error_code, answer.generation_id - gen]
    if lsync.error_code == 27:
        await leader.sync_as_leader()
    synced = await restarted.sync()
    out["restarted member's assignment"] = [synced.error_code, bytes(synced.assignment).decode()]
    return out


@scenario("A static member restarts with a protocol list that changes the vote", tansu=WEAK_STATIC)
async def static_restart_changes_vote(env: Env) -> Outcome:
    g = env.group()
    (s1,) = await _form_static(env, g, [await Member.create(env, g, "s1", instance="s1")])
    restarted = await Member.create(env, g, "s-new", ["sticky", "range"], instance="s1")
    answer = await restarted.join_once()
    return {
        "restart": [answer.error_code, answer.generation_id - s1.generation, answer.protocol_name],
        "described": (await env.describe(g)).protocol_data,
    }


@scenario("Static member ids: two restarts in a row", tansu=WEAK_STATIC)
async def static_member_ids(env: Env) -> Outcome:
    g = env.group()
    (s1,) = await _form_static(env, g, [await Member.create(env, g, "s1", instance="s1")])
    first = await Member.create(env, g, "first", instance="s1")
    a1 = await first.join_once()
    second = await Member.create(env, g, "second", instance="s1")
    a2 = await second.join_once()
    return {
        "ids start with the instance id": all(x.member_id.startswith("s1-") for x in (a1, a2)),
        "second restart got the first restart's id": a1.member_id == a2.member_id,
        "first restart's heartbeat": await first.heartbeat(),
        "original's heartbeat": await s1.heartbeat(),
    }


@scenario("Requests naming a group.instance.id the group does not know", tansu=WEAK_STATIC)
async def unknown_instance_id(env: Env) -> Outcome:
    topic = await env.topic(1)
    g = env.group()
    (a,) = await form(env, g, ["a"])
    return {
        "heartbeat": await a.heartbeat(group_instance_id="never-seen"),
        "commit": await _commit_with_instance(a, topic, "never-seen"),
        "sync": (
            await a.client.request(
                "SyncGroup",
                V["SyncGroup"],
                {
                    "group_id": g,
                    "generation_id": a.generation,
                    "member_id": a.member_id,
                    "group_instance_id": "never-seen",
                    "assignments": [],
                },
            )
        ).error_code,
        "join": (await a.join_once(group_instance_id="never-seen")).error_code,
    }


async def _commit_with_instance(m: Member, topic: str, instance: str) -> int:
    saved, m.instance = m.instance, instance
    try:
        return await m.commit(topic)
    finally:
        m.instance = saved


@scenario("A pending (KIP-394) member id joining with an instance id", tansu=WEAK_STATIC)
async def pending_member_with_instance_id(env: Env) -> Outcome:
    g = env.group()
    a = await Member.create(env, g, "a")
    await a.get_id()
    return {"join": (await a.join_once(group_instance_id="late")).error_code}


# --- timeouts ------------------------------------------------------------------------------------


@scenario("A member that never sends SyncGroup (rebalance timeout 3 s)", tansu=NO_PREPARING)
async def member_never_syncs(env: Env) -> Outcome:
    g = env.group()
    a, b = await form(env, g, ["a", "b"], rebalance_ms=3000)
    leader, follower = roles(a, b)
    gen = leader.generation
    parked = await rebalancing(env, g, leader)
    await follower.join_once()
    await parked
    await leader.sync_as_leader()  # Stable; the follower never syncs
    codes, leader_codes = [], []
    for _ in range(10):  # 5 s: past the 3 s rebalance timeout; both keep their sessions
        await asyncio.sleep(0.5)  # the heartbeat interval (time passing is the stimulus)
        codes.append(await follower.heartbeat())
        leader_codes.append(await leader.heartbeat())
    return {
        "follower's heartbeats": _runs(codes),
        "leader's heartbeats": _runs(leader_codes),
        "leader's generation": leader.generation - gen,
    }


def _runs(codes: list[int]) -> list[int]:
    """The codes with repeats collapsed (how many heartbeats fit a timeout varies)."""
    return [c for i, c in enumerate(codes) if i == 0 or codes[i - 1] != c]


@scenario(
    "A member that stops heartbeating is removed after its session (3 s)",
    tansu_differs="sessions expire lazily (broker.md, Tansu 4)",
)
async def session_expiry(env: Env) -> Outcome:
    g = env.group()
    a, b = await form(env, g, ["a", "b"], session_ms=3000)
    started = time.monotonic()
    codes = []
    while True:  # a heartbeats; b is silent
        code = await a.heartbeat()
        codes.append(code)
        if code != 0 or time.monotonic() - started > 30:
            break
        await asyncio.sleep(0.3)  # the heartbeat interval
    answer = await a.join_once()
    return {
        "a's heartbeat": code,
        "expired after": elapsed_class(time.monotonic() - started, 3.0),
        "a alone": [answer.error_code, env.names_of([m.member_id for m in answer.members])],
        "b's heartbeat": await b.heartbeat(),
    }


@scenario(
    "Rebalance timeout: a dynamic member that does not rejoin is dropped, a static one kept",
    tansu=NO_PREPARING,
)
async def rebalance_timeout(env: Env) -> Outcome:
    out: Outcome = {}
    for label, instances in (("dynamic", (None, None)), ("static", ("st1", "st2"))):
        g = env.group()
        members = await _form_static(
            env,
            g,
            [
                await Member.create(env, g, n, instance=i, rebalance_ms=2000)
                for n, i in zip(("a", "b"), instances, strict=True)
            ],
        )
        leader = next(m for m in members if m.member_id == m.leader)
        follower = next(m for m in members if m is not leader)
        gen = leader.generation
        parked = await rebalancing(env, g, leader)
        beats: list[int] = []
        while not beats or beats[-1] == 27:  # the follower only heartbeats, until it is over
            beats.append(await follower.heartbeat())
            await asyncio.sleep(0.3)  # the heartbeat interval
        answer = await parked
        out[label] = {
            "leader": [answer.error_code, answer.generation_id - gen, len(answer.members)],
            "follower's heartbeats": _runs(beats),
        }
    return out


@scenario(
    "JoinGroup v1+ with rebalance_timeout_ms -1 is taken as sent",
    tansu_differs="MEMBER_ID_REQUIRED on JoinGroup v1 too",
)
async def rebalance_timeout_minus_one(env: Env) -> Outcome:
    g = env.group()
    a = await Member.create(env, g, "a", rebalance_ms=-1)
    first = await a.join_once(version=1)
    # From 3.0 the wait for a's SyncGroup is bounded by its rebalance timeout: -1 ms, over at
    # once on the broker's timer, which a SyncGroup sent right away can still beat on a live
    # Kafka (CI saw both on 4.1.1 and 3.9.1). The SyncGroup comes later, as from a client
    # slower than -1 ms: what is compared is the rule, not that race.
    await env.settle(g, lambda _view: True, "a's join", seconds=0.5)
    synced = await a.sync_as_leader()
    b = await Member.create(env, g, "b", rebalance_ms=-1)
    second = await b.join_once(version=1)
    return {
        "a": [first.error_code, first.generation_id],
        "a's sync": synced.error_code,
        "b": [second.error_code, second.generation_id, len(second.members)],
        "a's heartbeat": await a.heartbeat(),
    }


# --- limits (the "limits" profile: group.max.size 2, initial delay 2 s, idle close 8 s) ---------


@scenario(
    "group.max.size 2: a newcomer while the leader rebalances (rebalance timeout 6 s)",
    profile="limits",
    tansu=NO_LIMITS,
)
async def group_max_size(env: Env) -> Outcome:
    g = env.group()
    a, b = await form(env, g, ["a", "b"], rebalance_ms=6000)
    leader, follower = roles(a, b)
    gen = leader.generation
    parked = await rebalancing(env, g, leader)
    c = await Member.create(env, g, "c", rebalance_ms=6000)
    newcomer = asyncio.ensure_future(c.join_once(version=3))
    # Kafka 2.3 refuses it at once; later versions park it with the rebalance.
    out: Outcome = {"newcomer answered at once": await answered_within(newcomer, 3.0)}
    rejoin = await follower.join_once()
    refused = time.monotonic()
    out["follower's rejoin"] = rejoin.error_code
    got = await parked
    # 3.x completes the join as it turns the follower away; 4.x waits for its timeout (6 s
    # after the rebalance began, about 3 s after the refusal).
    waited = time.monotonic() - refused
    out["leader answered"] = "at once" if waited < 1.5 else "on the rebalance timeout"
    out["leader"] = [got.error_code, got.generation_id - gen, len(got.members)]
    answer = await newcomer
    out["newcomer"] = answer.error_code
    return out


@scenario(
    "Initial rebalance delay (2 s): a pending member leaves during it",
    profile="limits",
    tansu=NO_LIMITS,
)
async def initial_delay_pending_leaves(env: Env) -> Outcome:
    g = env.group()
    a = await Member.create(env, g, "a")
    p = await Member.create(env, g, "p")
    started = time.monotonic()
    join = asyncio.ensure_future(a.join_once(version=3))
    pending = await p.get_id()
    assert await p.leave(member_id=pending) == 0
    answer = await join
    return {
        "a answered": elapsed_class(time.monotonic() - started, 2.0),
        "a": [answer.error_code, answer.generation_id],
    }


@scenario(
    "Initial rebalance delay (2 s): a pending member's session (1 s) expires during it",
    profile="limits",
    tansu=NO_LIMITS,
)
async def initial_delay_pending_expires(env: Env) -> Outcome:
    g = env.group()
    a = await Member.create(env, g, "a")
    p = await Member.create(env, g, "p", session_ms=1000)
    started = time.monotonic()
    join = asyncio.ensure_future(a.join_once(version=3))
    await p.get_id()  # then silent: the pending id expires after its session
    answer = await join
    waited = time.monotonic() - started
    return {
        # 4.x completes the join when the pending id expires (1 s); 3.x waits for the delay.
        "a answered": "when the pending id expired" if waited < 1.7 else "after the delay",
        "a": [answer.error_code, answer.generation_id],
    }


@scenario(
    "Initial rebalance delay (2 s) after the group emptied: a newcomer during it",
    profile="limits",
    tansu=NO_LIMITS,
)
async def initial_delay_after_empty(env: Env) -> Outcome:
    g = env.group()
    first = await Member.create(env, g, "first")
    await first.join_once(version=3)
    await first.sync_as_leader()
    await first.leave()
    await env.wait_described(g, lambda d: d.group_state == "Empty", "Empty")
    a = await Member.create(env, g, "a")
    b = await Member.create(env, g, "b")
    started = time.monotonic()
    join_a = asyncio.ensure_future(a.join_once(version=3))
    await asyncio.sleep(1.0)  # the newcomer comes 1 s into the delay (the scenario's timing)
    join_b = asyncio.ensure_future(b.join_once(version=3))
    answers = [await join_a, await join_b]
    return {
        "answered": elapsed_class(time.monotonic() - started, 2.0),
        "generation": answers[0].generation_id - first.generation,
        "members": len(answers[0].members or answers[1].members),
    }


@scenario(
    "connections.max.idle.ms (8 s): an idle connection is closed", profile="limits", tansu=NO_LIMITS
)
async def idle_connection(env: Env) -> Outcome:
    client = await env.client("idle")
    assert (await client.request("ApiVersions", 0, {})).error_code == 0
    started = time.monotonic()
    try:
        async with asyncio.timeout(40):
            await client.read_frame()  # nothing was asked: only the close can end this
        closed = "answered?"
    except asyncio.IncompleteReadError:
        closed = "closed"
    except TimeoutError:
        closed = "still open after 40 s"
    return {"idle connection": closed, "after": elapsed_class(time.monotonic() - started, 8.0)}


# --- API versions ---------------------------------------------------------------------------------


@scenario(
    "SyncGroup v5 without protocol type or name (KIP-559)",
    min_versions={"SyncGroup": 5},
    tansu_differs="a SyncGroup v5 without protocol type or name is accepted",
)
async def sync_v5_without_protocol(env: Env) -> Outcome:
    g = env.group()
    (a,) = await form(env, g, ["a"])
    out: Outcome = {}
    for missing in ("protocol_type", "protocol_name"):
        values: dict[str, Any] = {
            "group_id": g,
            "generation_id": a.generation,
            "member_id": a.member_id,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [],
        }
        values[missing] = None
        out[f"no {missing}"] = (await a.client.request("SyncGroup", 5, values)).error_code
    return out


@scenario(
    "DescribeGroups v4 (a version Kafka 2.3 does not have)",
    rules=("api-versions",),
    tansu_differs="serves DescribeGroups v4 (a newer broker than 2.3)",
)
async def describe_groups_v4(env: Env) -> Outcome:
    client = await env.client("v4")
    versions = await client.broker_versions()
    try:
        resp = await client.request("DescribeGroups", 4, {"groups": [env.group()]}, timeout=10)
        result = f"answered ({resp.groups[0].group_state})"
    except asyncio.IncompleteReadError:
        result = "connection closed"
    return {"DescribeGroups v4": result, "advertised": list(versions.get(15, ()))}


@scenario(
    "ApiVersions in a version the broker does not serve (KIP-511)",
    rules=("api-versions-refusal",),
    tansu_differs="answers in another version's encoding than KIP-511's v0",
)
async def api_versions_unsupported(env: Env) -> Outcome:
    client = await env.client("future")
    # As a client newer than the broker writes it: a flexible (v2) header (tests/security).
    body = {"client_software_name": "aiogroup", "client_software_version": "1"}
    frame = wire.encode_request(18, 3, body, correlation_id=1)
    await client.send_raw(frame[:6] + (99).to_bytes(2, "big") + frame[8:])
    try:
        answer = wire.decode_response(18, 0, await client.read_frame())
    except wire.MalformedRequestError:
        out: Outcome = {"answer": "not an ApiVersions v0 answer"}
    else:
        listed = (wire.API_NAMES.get(k.api_key, str(k.api_key)) for k in answer.api_keys)
        out = {"error": answer.error_code, "listed": sorted(listed)}
    out["then ApiVersions v0"] = (await client.request("ApiVersions", 0, {})).error_code
    return out
