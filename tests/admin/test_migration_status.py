"""Where a group stands between the classic and the consumer protocol (KIP-848's online
migration), told from snapshots without a broker: classic groups Kafka would or would not
convert, mixed consumer groups decoded from real ConsumerGroupDescribe v0/v1 bytes (v1's
MemberType, KIP-1099), and ``aiogroup group watch`` following a group through both
conversions."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from aiogroup.inspector import (
    GroupDescription,
    RawMember,
    Step,
    Verdict,
    assess,
    parse_consumer_group,
    parse_group,
)
from aiogroup.membership.leader import announce_hand_off_aware
from aiogroup.migration import Stage, Upgrade, migration_status
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    encode_assignment,
    encode_subscription,
)
from aiogroup.protocol.messages import ConsumerGroupDescribeResponse
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.wire import build
from aiogroup.tools.group import render_describe, snapshot_json, watch

TOPIC = "orders"
MARK = b"aiogroup:hand-off/1"
TOPIC_ID = uuid.UUID(int=1)


def classic_member(name: str, assigned: Sequence[int], *, user_data: bytes | None = None,
                   owned: Sequence[int] = ()) -> RawMember:  # fmt: skip
    sub = Subscription([TOPIC], owned_partitions={TOPIC: tuple(owned)} if owned else {},
                       generation_id=3 if owned else -1)  # fmt: skip
    return RawMember(
        member_id=f"{name}-id", client_id=name, client_host="/127.0.0.1",
        metadata=encode_subscription(sub, 3),
        assignment=encode_assignment(Assignment({TOPIC: tuple(assigned)}, user_data=user_data)),
    )  # fmt: skip


def classic(members: Sequence[RawMember], *, state: str = "Stable",
            protocol_type: str = "consumer") -> GroupDescription:  # fmt: skip
    return parse_group("g", state, protocol_type, "cooperative-sticky" if members else None,
                       members, partitions={TOPIC: 6}, api_version=5)  # fmt: skip


def consumer(
    members: Mapping[str, tuple[str, Sequence[int], Sequence[int]]],
    *,
    state: str = "Stable",
    epoch: int = 7,
    behind: Sequence[str] = (),
    version: int = 1,
) -> GroupDescription:
    """A consumer group as Kafka's ConsumerGroupDescribe answers it, encoded at ``version`` and
    decoded again: ``members`` maps a client id to (member type, assigned, target)."""

    def parts(ps: Sequence[int]) -> dict[str, Any]:
        tps = [{"topic_id": TOPIC_ID, "topic_name": TOPIC, "partitions": list(ps)}]
        return {"topic_partitions": tps if ps else []}

    values = {
        "throttle_time_ms": 0,
        "groups": [{
            "error_code": 0, "group_id": "g", "group_state": state, "group_epoch": epoch,
            "assignment_epoch": epoch, "assignor_name": "uniform", "authorized_operations": 0,
            "members": [{
                "member_id": f"{name}-id", "member_epoch": epoch - (name in behind),
                "client_id": name, "client_host": "/127.0.0.1",
                "subscribed_topic_names": [TOPIC], "assignment": parts(assigned),
                "target_assignment": parts(target),
                "member_type": {"classic": 0, "consumer": 1}[kind],
            } for name, (kind, assigned, target) in members.items()],
        }],
    }  # fmt: skip
    message = build(ConsumerGroupDescribeResponse, values, version)
    wire = bytes(message.encode())
    decoded = ConsumerGroupDescribeResponse.decode(wire, version=version)
    group = parse_consumer_group(decoded.groups[0], api_version=version)
    return GroupDescription(**{**_fields(group), "partitions": {TOPIC: 6}})


def _fields(group: GroupDescription) -> dict[str, Any]:
    return {f: getattr(group, f) for f in GroupDescription.__dataclass_fields__}


MIXED = {"c1": ("classic", [0, 1], [0, 1]), "c2": ("classic", [2, 3], [2, 3]),
         "n1": ("consumer", [4, 5], [4, 5])}  # fmt: skip


# --------------------------------------------------------------------------- classic groups


def test_a_classic_group_of_consumers_without_user_data_can_be_upgraded() -> None:
    g = classic([classic_member("a", [0, 1, 2]), classic_member("b", [3, 4, 5])])
    status = migration_status(g)
    assert status.stage is Stage.CLASSIC and status.upgrade is Upgrade.POSSIBLE
    assert status.classic_members == ("a", "b") and status.consumer_members == ()
    assert "group_protocol='consumer' converts the group" in status.advice
    assert {m.member_type for m in g.members} == {"classic"}


def test_a_custom_assignors_user_data_blocks_the_upgrade() -> None:
    """Kafka 4.1 refuses to convert while any assignment carries user data (a custom
    assignor's, which the consumer protocol would lose); the blocker says what to do."""
    g = classic([classic_member("a", [0, 1, 2], user_data=b"custom-state"),
                 classic_member("b", [3, 4, 5])])  # fmt: skip
    status = migration_status(g)
    assert status.upgrade is Upgrade.BLOCKED and len(status.blockers) == 1
    assert "1 member(s) hold an assignment carrying a custom assignor's user data (a)" in (
        status.blockers[0])
    assert "group_protocol='consumer'" in status.blockers[0]
    assert "built-in assignor" in status.blockers[0]
    text = render_describe(g, assess(g))
    assert "an upgrade to the consumer protocol would be refused" in text
    js = snapshot_json(g, assess(g))
    assert js["migration"]["upgrade"] == "blocked"
    assert [m["assignment_user_data"] for m in js["members"]] == [True, False]


def test_a_group_an_aiogroup_cooperative_leader_marks_can_be_upgraded() -> None:
    """An aiogroup cooperative-sticky leader's marks are assignment entries without partitions
    (no user data), which Kafka skips: nothing blocks, and the marks are no partitions."""
    plan = {"a-id": Assignment({TOPIC: (0, 1, 2)}), "b-id": Assignment({TOPIC: (3, 4, 5)})}
    marked = announce_hand_off_aware(plan, follow_up=True)
    raw = [classic_member(n, ()) for n in ("a", "b")]
    members = [dataclasses.replace(r, assignment=encode_assignment(marked[r.member_id]))
               for r in raw]  # fmt: skip
    assert all(MARK.decode() in decode_assignment(m.assignment).partitions for m in members)
    g = classic(members)
    status = migration_status(g)
    assert status.upgrade is Upgrade.POSSIBLE and status.blockers == ()
    assert [m.assignment for m in g.members] == [
        frozenset(TopicPartition(TOPIC, p) for p in (0, 1, 2)),
        frozenset(TopicPartition(TOPIC, p) for p in (3, 4, 5)),
    ]
    assert [m.assignment_user_data for m in g.members] == [None, None]
    assert g.topics == {TOPIC}
    js = snapshot_json(g, assess(g))
    assert js["migration"]["upgrade"] == "possible"


def test_an_older_aiogroup_leaders_marks_in_the_user_data_block_the_upgrade() -> None:
    """aiogroup 0.x leaders wrote their marks as user data, which Kafka refuses like any
    other: the blocker names them and says to move the members to a current aiogroup."""
    g = classic([classic_member("a", [0, 1, 2], user_data=MARK), classic_member("b", [3, 4, 5])])
    status = migration_status(g)
    assert status.upgrade is Upgrade.BLOCKED and len(status.blockers) == 1
    assert "older aiogroup leader's marks (a)" in status.blockers[0]
    assert "custom assignor" not in status.blockers[0]


def test_a_group_of_another_protocol_type_cannot_be_converted() -> None:
    g = classic([classic_member("a", [0])], protocol_type="connect")
    status = migration_status(g)
    assert status.upgrade is Upgrade.BLOCKED and "'connect'" in status.blockers[0]


def test_empty_groups_convert_either_way() -> None:
    for g in (classic([], state="Empty"), consumer({}, state="Empty")):
        status = migration_status(g)
        assert status.stage is Stage.UNKNOWN and status.upgrade is Upgrade.NOT_APPLICABLE
        assert "converts to whichever protocol" in status.advice


# --------------------------------------------------------------------------- consumer groups


def test_a_mixed_group_is_told_from_the_member_types() -> None:
    g = consumer(MIXED)
    assert [m.member_type for m in g.members] == ["classic", "classic", "consumer"]
    status = migration_status(g)
    assert status.stage is Stage.MIXED
    assert status.consumer_members == ("n1",) and status.classic_members == ("c1", "c2")
    assert status.summary.startswith("consumer group, 1 of 3 members on the consumer protocol, "
                                     "2 classic")  # fmt: skip
    a = assess(g, expected_members=3)
    assert a.step is Step.MIXED and a.verdict is Verdict.SAFE, a.reasons
    assert "converts back to a classic group when its last consumer-protocol" in a.advice
    text = render_describe(g, a)
    assert "ConsumerGroupDescribe v1" in text and "1 of 3 members on the consumer" in text
    assert "SPEAKS" in text and "TO REVOKE" in text
    js = snapshot_json(g, a)
    assert js["group_type"] == "consumer" and js["step"] == "mixed"
    assert js["migration"]["stage"] == "mixed" and js["migration"]["classic_members"] == ["c1",
                                                                                          "c2"]
    assert [m["member_type"] for m in js["members"]] == ["classic", "classic", "consumer"]


def test_every_member_on_the_consumer_protocol_is_the_end_of_the_upgrade() -> None:
    g = consumer({"n1": ("consumer", [0, 1, 2], [0, 1, 2]), "n2": ("consumer", [3, 4, 5],
                                                                     [3, 4, 5])})  # fmt: skip
    assert migration_status(g).stage is Stage.CONSUMER
    a = assess(g, expected_members=2)
    assert a.step is Step.CONSUMER and a.safe
    assert "classic" not in a.advice


def test_v0_does_not_tell_the_member_types() -> None:
    g = consumer(MIXED, version=0)
    assert {m.member_type for m in g.members} == {None}
    status = migration_status(g)
    assert status.stage is Stage.UNKNOWN and len(status.unknown_members) == 3
    assert assess(g).step is Step.CONSUMER  # no classic member known


@pytest.mark.parametrize(
    ("members", "kwargs", "reason"),
    [
        # c2 still owns orders[3], which its target moves to n1: a revocation is pending.
        ({**MIXED, "c2": ("classic", [2, 3], [2]), "n1": ("consumer", [4, 5], [3, 4, 5])}, {},
         "still to revoke: c2 orders[3]"),
        # n1 waits for orders[3] that c2 has already given up.
        ({**MIXED, "c2": ("classic", [2], [2]), "n1": ("consumer", [4, 5], [3, 4, 5])}, {},
         "still to receive: n1 orders[3]"),
        (MIXED, {"behind": ["c1"]}, "not reconciled to epoch 7 yet: c1"),
        (MIXED, {"state": "Reconciling"}, "the group is Reconciling"),
        ({k: v for k, v in MIXED.items() if k != "c2"}, {}, "2 of 3 members"),
    ],
)
def test_a_mixed_group_is_not_safe_until_every_member_has_reconciled(
    members: Mapping[str, tuple[str, Sequence[int], Sequence[int]]],
    kwargs: dict[str, Any],
    reason: str,
) -> None:
    a = assess(consumer(members, **kwargs), expected_members=3)
    assert a.step is Step.MIXED and a.verdict is Verdict.WAIT
    assert any(reason in r for r in a.reasons), a.reasons


# --------------------------------------------------------------------------- watching both moves


class Replay:
    """An inspector that answers snapshots from a list; asked once more, the watch should have
    stopped: it fails the test rather than loop."""

    def __init__(self, snapshots: Sequence[GroupDescription]) -> None:
        self.snapshots: Iterator[GroupDescription] = iter(snapshots)
        self.asked = 0

    async def describe(self) -> GroupDescription:
        self.asked += 1
        snapshot = next(self.snapshots, None)
        if snapshot is None:
            raise AssertionError(f"the watch went on after the last of {self.asked - 1} "
                                 "snapshots")
        return snapshot


UPGRADE = [
    classic([classic_member(n, ps, owned=ps) for n, ps in
             (("c1", [0, 1]), ("c2", [2, 3]), ("c3", [4, 5]))]),
    classic([classic_member(n, ps, owned=ps) for n, ps in (("c1", [0, 1, 4]), ("c2", [2, 3, 5]))]),
    # c3 is back on the consumer protocol: the group is converted, c1 and c2 revoke for it.
    consumer({"c1": ("classic", [0, 1, 4], [0, 1]), "c2": ("classic", [2, 3, 5], [2, 3]),
              "c3": ("consumer", [], [4, 5])}, state="Reconciling"),
    consumer({"c1": ("classic", [0, 1], [0, 1]), "c2": ("classic", [2, 3], [2, 3]),
              "c3": ("consumer", [], [4, 5])}, state="Reconciling"),
    consumer({"c1": ("classic", [0, 1], [0, 1]), "c2": ("classic", [2, 3], [2, 3]),
              "c3": ("consumer", [4, 5], [4, 5])}),
]  # fmt: skip
DOWNGRADE = [
    consumer({"c1": ("consumer", [0, 1], [0, 1]), "c2": ("classic", [2, 3], [2, 3]),
              "c3": ("classic", [4, 5], [4, 5])}),
    # c1, the last member on the consumer protocol, left: converted back, rebalancing.
    classic([classic_member("c2", []), classic_member("c3", [])], state="PreparingRebalance"),
    classic([classic_member("c2", [0, 2, 3], owned=[2, 3]),
             classic_member("c3", [1, 4, 5], owned=[4, 5])]),
    classic([classic_member(n, ps, owned=ps) for n, ps in
             (("c1", [0, 1]), ("c2", [2, 3]), ("c3", [4, 5]))]),
]  # fmt: skip


def _watch(snapshots: Sequence[GroupDescription], until: str) -> tuple[int, str, Replay]:
    out = io.StringIO()
    replay = Replay(snapshots)
    code = asyncio.run(watch(replay, out=out, interval=0, expected_members=3, until=until,  # type: ignore[arg-type]
                             timeout=None))  # fmt: skip
    return code, out.getvalue(), replay


def test_watch_tells_the_upgrade_and_waits_for_the_mixed_group_to_settle() -> None:
    code, text, replay = _watch(UPGRADE[1:], "safe")  # from c3's leave on
    assert code == 0 and replay.asked == len(UPGRADE) - 1, text
    lines = text.splitlines()
    assert "converted: classic group -> consumer group: a member joined with the consumer " \
           "protocol (KIP-848 online upgrade)" in text
    assert "next bounce: wait: the group is Reconciling" in text
    assert "still to revoke: c1 orders[4]; c2 orders[5]" in assess(UPGRADE[2]).reasons
    assert "still to receive: c3 orders[4,5]" in assess(UPGRADE[3]).reasons
    assert "1 consumer + 2 classic" in lines[-2]
    assert lines[-1] == "reached: next bounce safe"


def test_watch_until_consumer_waits_for_the_last_classic_member() -> None:
    last = consumer({n: ("consumer", ps, ps) for n, ps in
                     (("c1", [0, 1]), ("c2", [2, 3]), ("c3", [4, 5]))})  # fmt: skip
    code, text, replay = _watch([*UPGRADE, last], "consumer")
    assert code == 0 and replay.asked == len(UPGRADE) + 1, text
    code, text, replay = _watch(UPGRADE, "mixed")
    assert code == 0 and replay.asked == len(UPGRADE), text


def test_watch_tells_the_downgrade() -> None:
    code, text, replay = _watch(DOWNGRADE, "cooperative")
    assert "converted: consumer group -> classic group: the last member on the consumer " \
           "protocol left (KIP-848 online downgrade)" in text
    assert code == 0 and replay.asked == len(DOWNGRADE), text
    assert "next bounce: wait: the group is rebalancing (PreparingRebalance)" in text


def test_watch_json_names_the_group_type_and_stage() -> None:
    out = io.StringIO()
    code = asyncio.run(watch(Replay(UPGRADE), out=out, interval=0, expected_members=3,  # type: ignore[arg-type]
                             until="mixed", as_json=True))  # fmt: skip
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert code == 0
    assert [r["group_type"] for r in rows] == ["classic"] * 2 + ["consumer"] * 3
    assert [r["migration"]["stage"] for r in rows] == ["classic"] * 2 + ["mixed"] * 3
    assert [r["next_bounce"] for r in rows] == ["safe", "wait", "wait", "wait", "safe"]
