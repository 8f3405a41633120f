"""The KIP-848 machine's own parts on their own (Target, HeartbeatFields), its state table as
data, and the translation of a Python pattern for the broker."""

from __future__ import annotations

import re
import uuid

import pytest

from aiogroup.errors import ConfigurationError
from aiogroup.membership import consumer_events as cev
from aiogroup.membership import events as ev
from aiogroup.membership.consumer_machine import _HANDLERS
from aiogroup.membership.consumer_states import (
    ACCEPTED_EVENTS,
    ANSWERS,
    CALLBACK_STATES,
    ENDED,
    HEARTBEATING,
    MEMBER,
    QUIET,
    RESPONSE_EVENTS,
    STATES,
    TRANSITIONS,
)
from aiogroup.membership.heartbeat_fields import HeartbeatFields
from aiogroup.membership.regex import to_re2
from aiogroup.membership.states import MemberState
from aiogroup.membership.target import Target
from aiogroup.protocol import TopicPartition

S = MemberState
A, B = uuid.UUID(int=10), uuid.UUID(int=11)


def test_target_names_what_metadata_knows() -> None:
    t = Target()
    assert t.resolve({}) == (frozenset(), frozenset())
    assert t.received({A: [1, 0], B: [2]})
    assert not t.received({A: (0, 1), B: (2,)})  # the same assignment again
    resolved, unresolved = t.resolve({A: "a"})
    assert resolved == {TopicPartition("a", 0), TopicPartition("a", 1)} and unresolved == {B}
    assert t.by_id([TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("x", 0)]) == {
        A: (0, 1)
    }
    t.received({})
    assert t.resolve({A: "a"}) == (frozenset(), frozenset())
    t.forget()
    assert t.partitions is None


def test_heartbeat_fields_leave_out_what_did_not_change() -> None:
    f = HeartbeatFields(rebalance_timeout_ms=300, server_assignor="uniform", rack_id="r")
    sub = (frozenset({"b", "a"}), None)
    full = f.next(subscribed=sub, owned={})
    assert full == {
        "rebalance_timeout_ms": 300, "server_assignor": "uniform", "rack_id": "r",
        "subscribed_topic_names": ("a", "b"), "subscribed_topic_regex": "", "owned": {},
    }  # fmt: skip
    assert f.next(subscribed=sub, owned={}) == {}
    assert f.unacknowledged({A: (0,)}) and not f.unacknowledged({})
    assert f.next(subscribed=sub, owned={A: (0,)}) == {"owned": {A: (0,)}}
    assert f.next(subscribed=(None, "a.*"), owned={A: (0,)}) == {
        "subscribed_topic_names": (),
        "subscribed_topic_regex": "a.*",
    }
    f.reset()
    assert f.full_next and not f.unacknowledged({B: (1,)})  # the full one carries it
    assert f.next(subscribed=(None, "a.*"), owned={A: (0,)})["rebalance_timeout_ms"] == 300


def test_the_state_table_is_data() -> None:
    assert set(_HANDLERS) == set(ACCEPTED_EVENTS) | RESPONSE_EVENTS
    assert not set(ACCEPTED_EVENTS) & RESPONSE_EVENTS
    assert cev.ConsumerGroupHeartbeatCompleted in ANSWERS and ev.JoinGroupCompleted not in ANSWERS
    assert set(TRANSITIONS) == STATES
    for state, nexts in TRANSITIONS.items():
        assert state not in nexts and nexts <= STATES
    assert all(S.CLOSED in TRANSITIONS[s] for s in STATES - {S.CLOSED})
    assert ENDED <= QUIET and not QUIET & (HEARTBEATING | CALLBACK_STATES)
    assert MEMBER <= HEARTBEATING and S.AWAITING_SYNC not in STATES


@pytest.mark.parametrize(
    ("python", "re2"),
    [
        ("orders", "orders"),
        (r"orders-\d+", r"orders\-[\d]+"),
        (r"(?i)ORD.*", "(?i)ORD.*"),
        (r"ord(ers|ering)\Z", r"ord(er(?:s|ing))\z"),
        (r"a{2,3}?b{2,}c{,4}", "a{2,3}?b{2,}c{0,4}"),
        (r"(?x) a b  # spaces and comments go", "ab"),
        (r"(?s:a.)b", "(?s:a.)b"),
        ("a b", r"a\x{20}b"),
        (r"[^a-c.]", r"[^a-c\.]"),
    ],
)
def test_patterns_both_syntaxes_read_alike(python: str, re2: str) -> None:
    assert to_re2(re.compile(python)) == re2
    assert to_re2(python) == re2


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"(a)\1", "backreference"),
        (r"(?=a)a", "lookahead"),
        (r"(?<!a)b", "lookahead or lookbehind"),
        (r"(?>a)", "atomic group"),
        (r"a++", "possessive"),
        (r"(a)?(?(1)b|c)", "conditional"),
        (r"a{1001}", "above 1000"),
        (r"(", "not a regular expression"),
    ],
)
def test_what_re2_lacks_is_refused(pattern: str, words: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(words)):
        to_re2(pattern)


def test_translated_patterns_match_topic_names_as_python_does() -> None:
    names = ["orders", "orders-1", "ORDERS", "billing.eu", "a_b", "x-y.z", "o"]
    for source in [r"ord\w*", r"(?i)orders(-\d)?", r"[a-z]+\.(eu|us)", r"\w+", r"o|x-y\.z"]:
        ours = re.compile(to_re2(source).replace(r"\z", r"\Z").replace(r"\x{20}", " "))
        python = re.compile(source)
        assert [n for n in names if ours.fullmatch(n)] == [n for n in names if python.fullmatch(n)]
