"""``aiogroup.inspector`` without a broker: decoding DescribeGroups members and judging the step.

Snapshots are built from real consumer-protocol bytes (``aiogroup.protocol``), as Kafka returns
them: the metadata of the group's protocol only, and only while the group is Stable.
"""

from __future__ import annotations

import argparse
import ssl
from collections.abc import Sequence
from pathlib import Path

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import ConfigurationError
from aiogroup.inspector import (
    GroupDescription,
    GroupWatch,
    MemberMode,
    RawMember,
    Step,
    Verdict,
    assess,
    parse_group,
    protocol_of,
)
from aiogroup.protocol import (
    Assignment,
    Subscription,
    encode_assignment,
    encode_cooperative_user_data,
    encode_subscription,
)
from aiogroup.tools.group import client_options, render_describe, snapshot_json

TOPIC = "orders"


def member(
    name: str,
    assigned: Sequence[int],
    *,
    owned: Sequence[int] = (),
    generation: int = -1,
    version: int = 3,
    user_data: bytes | None = None,
    member_id: str | None = None,
) -> RawMember:
    sub = Subscription(
        topics=[TOPIC],
        user_data=user_data,
        owned_partitions={TOPIC: tuple(owned)} if owned else {},
        generation_id=generation,
    )
    return RawMember(
        member_id=member_id or f"{name}-id",
        client_id=name,
        client_host="/127.0.0.1",
        metadata=encode_subscription(sub, version),
        assignment=encode_assignment(Assignment({TOPIC: tuple(assigned)} if assigned else {})),
    )


def group(protocol: str | None, members: Sequence[RawMember], *, state: str = "Stable",
          partitions: int = 6) -> GroupDescription:
    return parse_group("g", state, "consumer", protocol, members,
                       partitions={TOPIC: partitions}, api_version=3)


def test_protocol_of_known_and_unknown_assignors() -> None:
    assert protocol_of("range") is RebalanceProtocol.EAGER
    assert protocol_of("sticky") is RebalanceProtocol.EAGER
    assert protocol_of("cooperative-sticky") is RebalanceProtocol.COOPERATIVE
    assert protocol_of("my-cooperative-thing") is RebalanceProtocol.COOPERATIVE
    assert protocol_of("my-thing") is RebalanceProtocol.EAGER


def test_eager_group_is_step_eager_and_safe_when_complete() -> None:
    g = group("range", [member("a", [0, 1, 2], generation=4), member("b", [3, 4, 5], generation=4)])
    a = assess(g)
    assert g.generation == 5  # one more than the members report holding
    assert a.step is Step.EAGER and a.verdict is Verdict.SAFE and not a.reasons
    assert set(a.modes.values()) == {MemberMode.EAGER}
    assert "do not remove range" in a.advice
    assert [m.client_id for m in g.members] == ["a", "b"]


def test_missing_member_partitions_and_double_assignment_make_it_wait() -> None:
    g = group("range", [member("a", [0, 1, 2]), member("b", [2, 3])])
    a = assess(g, expected_members=3)
    assert a.verdict is Verdict.WAIT
    text = " / ".join(a.reasons)
    assert "assigned to two members: orders[2]" in text
    assert "assigned to nobody: orders[4,5]" in text
    assert "2 of 3 members" in text


def test_rebalancing_group_waits_and_shows_nothing() -> None:
    raw = [RawMember("a-id", "a", "/h", b"", b""), RawMember("b-id", "b", "/h", b"", b"")]
    a = assess(group(None, raw, state="PreparingRebalance"))
    assert a.step is Step.UNKNOWN and a.verdict is Verdict.WAIT
    assert "rebalancing" in a.reasons[0]


def test_stable_group_without_metadata_is_tansu_and_cannot_be_judged() -> None:
    raw = [RawMember("a-id", "a", "/h", b"", b"")]
    g = group(None, raw)
    a = assess(g)
    assert not g.has_metadata
    assert a.step is Step.UNKNOWN and a.verdict is Verdict.UNKNOWN
    assert "no member metadata" in a.reasons[0]
    assert "no member metadata" in render_describe(g, a)


def test_an_empty_group_is_never_safe() -> None:
    a = assess(group(None, [], state="Empty"))
    assert a.step is Step.EMPTY and a.verdict is Verdict.WAIT
    assert "nobody is consuming" in a.reasons[0]
    a = assess(group(None, [], state="Empty"), expected_members=3)
    assert not a.safe and a.reasons[0].startswith("0 of 3 members")


def test_an_unknown_group_is_not_safe_and_says_why() -> None:
    g = group(None, [], state="Dead")
    assert not g.exists
    a = assess(g, expected_members=3)
    assert a.verdict is Verdict.UNKNOWN and "does not exist" in a.reasons[0]
    assert "check the group id" in a.advice


def test_undecodable_bytes_are_reported_per_member_not_raised() -> None:
    bad = RawMember("x-id", "x", "/h", b"\x00\x03\x00", b"\x00\x00\xff")
    g = group("range", [member("a", [0, 1, 2, 3, 4, 5]), bad])
    x = next(m for m in g.members if m.client_id == "x")
    assert x.subscription is None and x.assignment is None
    assert x.problem is not None and "metadata undecodable" in x.problem
    assert "assignment undecodable" in x.problem
    a = assess(g)
    assert a.verdict is Verdict.WAIT
    assert any(r.startswith("x: metadata undecodable") for r in a.reasons)
    snapshot_json(g, a)  # renders


def test_generation_from_user_data_when_the_subscription_has_none() -> None:
    # kafka-python writes V1 for cooperative-sticky; Java's int32 user data carries a generation
    v1 = member("a", [0, 1, 2], owned=[0, 1, 2], version=1,
                user_data=encode_cooperative_user_data(8))
    v0 = member("b", [3, 4, 5], version=0)
    g = group("cooperative-sticky", [v1, v0])
    assert g.members[0].reported_generation(g.protocol) == 8
    assert g.members[1].reported_generation(g.protocol) is None
    assert g.generation == 9
    assert group("range", [v0]).generation is None


def test_after_the_vote_moved_a_snapshot_alone_leaves_eager_members_unconfirmed() -> None:
    # bounce 2 under way: "a" restarted with [cooperative-sticky] (new); "b" and "c" still offer
    # [cooperative-sticky, range], run EAGER and so rejoined reporting no owned partitions
    g = group("cooperative-sticky", [
        member("a", [0, 1], generation=-1),
        member("b", [2, 3], generation=7),
        member("c", [4, 5], generation=7),
    ])
    a = assess(g)
    assert a.modes["a-id"] is MemberMode.NEW
    assert a.modes["b-id"] is a.modes["c-id"] is MemberMode.UNCONFIRMED
    assert a.step is Step.VOTE_MOVED and a.safe
    assert "b, c reported no owned partitions" in a.advice


def test_watch_tells_eager_members_from_what_they_held_before() -> None:
    watch = GroupWatch()
    # generation 7: all three [cooperative-sticky, range] (the vote has just moved)
    first = watch.observe(group("cooperative-sticky", [
        member("a", [0, 1], generation=6), member("b", [2, 3], generation=6),
        member("c", [4, 5], generation=6),
    ]))
    assert first.step is Step.VOTE_MOVED  # unconfirmed: cannot tell yet
    # the same generation seen again changes nothing
    assert watch.observe(watch.last).step is Step.VOTE_MOVED  # type: ignore[arg-type]
    # generation 9: "a" restarted with [cooperative-sticky]; b and c rejoined owning nothing
    second = watch.observe(group("cooperative-sticky", [
        member("a", [0, 1], generation=-1, member_id="a2-id"),
        member("b", [2, 3], generation=8), member("c", [4, 5], generation=8),
    ]))
    assert second.modes == {"a2-id": MemberMode.NEW, "b-id": MemberMode.EAGER,
                            "c-id": MemberMode.EAGER}
    assert second.step is Step.VOTE_MOVED and second.eager_members == ["b-id", "c-id"]
    assert watch.restarted == 1
    # generation 11: b restarted too; a now reports what it owns (COOPERATIVE), c still EAGER
    third = watch.observe(group("cooperative-sticky", [
        member("a", [0, 1], owned=[0, 1], generation=10, member_id="a2-id"),
        member("b", [2, 3], generation=10, member_id="b2-id"), member("c", [4, 5], generation=10),
    ]))
    assert third.modes["a2-id"] is MemberMode.COOPERATIVE
    assert third.modes["b2-id"] is MemberMode.NEW
    assert third.modes["c-id"] is MemberMode.EAGER
    # generation 13: c restarted; everyone else reports owned partitions: cooperative
    fourth = watch.observe(group("cooperative-sticky", [
        member("a", [0, 1], owned=[0, 1], generation=12, member_id="a2-id"),
        member("b", [2, 3], owned=[2, 3], generation=12, member_id="b2-id"),
        member("c", [4, 5], generation=12, member_id="c2-id"),
    ]))
    assert fourth.step is Step.COOPERATIVE and fourth.safe
    assert watch.restarted == 3


def test_watch_expects_the_largest_group_it_saw_and_keeps_the_step_while_rebalancing() -> None:
    watch = GroupWatch()
    watch.observe(group("range", [member("a", [0, 1, 2], generation=3),
                                  member("b", [3, 4, 5], generation=3)]))
    left = watch.observe(group("range", [member("a", [0, 1, 2, 3, 4, 5], generation=4)]))
    assert left.verdict is Verdict.WAIT and "1 of 2 members" in left.reasons[0]
    rebalancing = watch.observe(group(None, [RawMember("a-id", "a", "/h", b"", b"")],
                                      state="PreparingRebalance"))
    assert rebalancing.step is Step.EAGER and rebalancing.verdict is Verdict.WAIT


# --------------------------------------------------------------------------- options


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = dict(
        security_protocol="PLAINTEXT", ssl_cafile=None, ssl_certfile=None, ssl_keyfile=None,
        ssl_password=None, sasl_mechanism=None, sasl_username=None, sasl_password=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_plaintext_options() -> None:
    assert client_options(_args(), {}) == {"security_protocol": "PLAINTEXT"}


async def test_sasl_options_take_the_password_from_the_environment() -> None:
    opts = client_options(_args(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                                sasl_username="u"), {"AIOGROUP_SASL_PASSWORD": "p"})
    assert opts == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                    "sasl_plain_username": "u", "sasl_plain_password": "p"}
    from aiokafka.client import AIOKafkaClient

    client = AIOKafkaClient(bootstrap_servers="127.0.0.1:1", **opts)  # accepted as given
    assert client._sasl_plain_password == "p"
    await client.close()


def test_ssl_options_build_a_context(tmp_path: Path) -> None:
    opts = client_options(_args(security_protocol="SSL"), {})
    assert isinstance(opts["ssl_context"], ssl.SSLContext)
    with pytest.raises(ConfigurationError, match="TLS context"):
        client_options(_args(security_protocol="SSL", ssl_cafile=str(tmp_path / "none.pem")), {})


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"ssl_cafile": "ca.pem"}, "--ssl-\\* options need"),
        ({"sasl_username": "u"}, "--sasl-\\* options need"),
        ({"security_protocol": "SASL_SSL"}, "needs --sasl-mechanism"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "needs --sasl-user"),
    ],
)
def test_inconsistent_options_are_refused(kw: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        client_options(_args(**kw), {})


def _kafka_230(name: str, assigned: Sequence[int], member_id: str | None = None) -> RawMember:
    """A member as Apache Kafka 2.3.0 describes it: the assignment in both fields (KAFKA-9150)."""
    raw = member(name, assigned, member_id=member_id)
    return RawMember(raw.member_id, raw.client_id, raw.client_host, raw.assignment,
                     raw.assignment)


def test_kafka_9150_metadata_is_the_assignment_and_restarts_tell_the_step() -> None:
    watch = GroupWatch()
    eager = group("range", [_kafka_230("a", [0, 1, 2]), _kafka_230("b", [3, 4, 5])])
    assert eager.metadata_is_assignment and not eager.has_metadata and eager.has_assignments
    assert eager.generation is None and eager.topics == {TOPIC}
    assert all(m.subscription is None and m.problem is None for m in eager.members)
    first = watch.observe(eager)
    assert first.step is Step.EAGER and first.safe
    assert "KAFKA-9150" in render_describe(eager, first)
    # bounce 1 done: the vote moved; a and b still run EAGER (they have not restarted since
    # the group ran range), but nothing on the wire says so
    moved = watch.observe(group("cooperative-sticky", [
        _kafka_230("a", [0, 1, 2]), _kafka_230("b", [3, 4, 5], member_id="b2-id")]))
    assert moved.step is Step.VOTE_MOVED and moved.modes["a-id"] is MemberMode.EAGER
    assert moved.modes["b2-id"] is MemberMode.UNKNOWN
    # a restarts: b2 was running when the vote moved, so it may still offer range
    half = watch.observe(group("cooperative-sticky", [
        _kafka_230("a", [0, 1, 2], member_id="a2-id"), _kafka_230("b", [3, 4, 5], "b2-id")]))
    assert half.step is Step.VOTE_MOVED and "KAFKA-9150" in half.advice
    done = watch.observe(group("cooperative-sticky", [
        _kafka_230("a", [0, 1, 2], member_id="a2-id"), _kafka_230("b", [3, 4, 5], "b3-id")]))
    assert done.step is Step.COOPERATIVE and done.safe
    assert "judged from the restarts alone" in done.advice
    # a watch that begins after the vote moved counts only the members that join after it
    late = GroupWatch()
    assert late.observe(group("cooperative-sticky", [
        _kafka_230("a", [0, 1, 2]), _kafka_230("b", [3, 4, 5])])).step is Step.VOTE_MOVED
    assert late.observe(group("cooperative-sticky", [
        _kafka_230("a", [0, 1, 2], "a2-id"), _kafka_230("b", [3, 4, 5], "b2-id")
    ])).step is Step.COOPERATIVE
