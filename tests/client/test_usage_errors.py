"""Mistakes a new user makes, each refused at once with a clear error of ours (issue 16).

- a misspelt option names itself and the option it most likely meant (not aiokafka's TypeError);
- a member with no topics raises NotSubscribedError from wait_for_assignment (not a hang);
- one string as the topics (``topics="orders"``) is refused, not read as topics o, r, d, ...
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aiogroup.assignors.range import AssignorInputError
from aiogroup.assignors.registry import BUILTIN_ASSIGNORS, get_assignor
from aiogroup.client import GroupMember
from aiogroup.client.options import aiokafka_client_options, check_options
from aiogroup.errors import ConfigurationError, LocalProtocolError, NotSubscribedError
from aiogroup.membership import events as ev
from aiogroup.membership.machine import GroupMember as Machine
from aiogroup.membership.machine import MemberConfig
from aiogroup.protocol.types import Subscription
from aiogroup.testing import EmbeddedBroker

pytestmark = pytest.mark.timeout(60)


# ------------------------------------------------------------------ misspelt options


@pytest.mark.parametrize(
    ("option", "meant"),
    [
        ("sesion_timeout_ms", "session_timeout_ms"),  # one of the member's own
        ("heartbeat_intervall_ms", "heartbeat_interval_ms"),
        ("security_protocl", "security_protocol"),  # one aiokafka's client takes
        ("sasl_mechanisms", "sasl_mechanism"),
    ],
)
def test_a_misspelt_option_names_the_option_it_meant(option: str, meant: str) -> None:
    misspelt: dict[str, Any] = {option: 1}
    with pytest.raises(ConfigurationError) as info:
        GroupMember("127.0.0.1:1", "g", topics=["t"], **misspelt)
    message = str(info.value)
    assert repr(option) in message
    assert f"did you mean {meant!r}" in message


@pytest.mark.parametrize(
    ("option", "meant"),
    [
        ("max_poll_record", "max_poll_records"),  # one of the consumer's own
        ("auto_offset_rest", "auto_offset_reset"),
        ("sesion_timeout_ms", "session_timeout_ms"),  # passed on to its member
        ("security_protocl", "security_protocol"),  # one aiokafka's client takes
    ],
)
def test_a_consumer_names_itself_and_the_option_it_meant(option: str, meant: str) -> None:
    from aiogroup import Consumer

    misspelt: dict[str, Any] = {option: 1}
    with pytest.raises(ConfigurationError) as info:
        Consumer("127.0.0.1:1", "g", topics=["t"], **misspelt)
    message = str(info.value)
    assert message.startswith(f"Consumer got unknown option {option!r}")
    assert f"did you mean {meant!r}" in message


def test_an_option_like_nothing_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigurationError) as info:
        GroupMember("127.0.0.1:1", "g", topics=["t"], frobnicate=True)
    message = str(info.value)
    assert "'frobnicate'" in message and "did you mean" not in message
    assert "session_timeout_ms" in message and "ssl_context" in message


def test_every_unknown_option_is_named_at_once() -> None:
    with pytest.raises(ConfigurationError, match="options 'a_b_c', 'sesion_timeout_ms'"):
        GroupMember("127.0.0.1:1", "g", topics=["t"], sesion_timeout_ms=1, a_b_c=2)


def test_options_are_checked_before_anything_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiogroup.client.member as member_module

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a transport was built before the options were checked")

    monkeypatch.setattr(member_module, "Transport", refuse)
    with pytest.raises(ConfigurationError):
        GroupMember("127.0.0.1:1", "g", topics=["t"], sesion_timeout_ms=1)


async def test_aiokafka_client_options_are_forwarded() -> None:
    forwarded = aiokafka_client_options()
    assert {"security_protocol", "ssl_context", "sasl_mechanism", "api_version"} <= forwarded
    # Set by the transport itself (or deprecated), so a user passing them is a mistake.
    assert not {"loop", "bootstrap_servers", "client_id", "request_timeout_ms"} & forwarded
    member = GroupMember("127.0.0.1:1", "g", topics=["t"], connections_max_idle_ms=1_000)
    assert member.transport._client._connections_max_idle_ms == 1_000


def test_check_options_serves_other_owners() -> None:
    with pytest.raises(ConfigurationError, match=r"^Consumer got unknown option 'fetch_max_byte'"):
        check_options(
            {"fetch_max_byte": 1}, {"fetch_max_bytes"}, own={"group_id"}, owner="Consumer"
        )
    check_options({"fetch_max_bytes": 1}, {"fetch_max_bytes"}, owner="Consumer")


# ------------------------------------------------------------------ no topics


async def test_a_member_with_no_topics_is_told_at_once(embedded_broker: EmbeddedBroker) -> None:
    async with GroupMember(embedded_broker.bootstrap, "g") as member:
        with pytest.raises(NotSubscribedError, match="not subscribed to any topics"):
            # Bounded only so that a hang fails the test instead of stalling it.
            await asyncio.wait_for(member.wait_for_assignment(), 10)


async def test_empty_topics_mean_no_subscription(embedded_broker: EmbeddedBroker) -> None:
    embedded_broker.create_topic("t", 1)
    async with GroupMember(embedded_broker.bootstrap, "g", topics=[]) as member:
        with pytest.raises(NotSubscribedError):
            await asyncio.wait_for(member.wait_for_assignment(), 10)
        await member.subscribe(["t"])
        outcome = await member.wait_for_assignment(timeout=10)
        assert {tp.topic for tp in outcome.assignment} == {"t"}
        # As in the Java consumer, subscribing to no topics unsubscribes.
        await member.subscribe([])
        with pytest.raises(NotSubscribedError):
            await asyncio.wait_for(member.wait_for_assignment(), 10)
        assert member.assignment == frozenset()


async def test_not_subscribed_before_start_either() -> None:
    member = GroupMember("127.0.0.1:1", "g")
    with pytest.raises(NotSubscribedError):
        await member.wait_for_assignment(timeout=5)


# ------------------------------------------------------------------ one string as the topics


def test_one_string_as_the_topics_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"not the string 'orders' \(write \['orders'\]"):
        GroupMember("127.0.0.1:1", "g", topics="orders")


async def test_subscribe_refuses_one_string(embedded_broker: EmbeddedBroker) -> None:
    async with GroupMember(embedded_broker.bootstrap, "g") as member:
        with pytest.raises(ConfigurationError, match="not the string 'orders'"):
            await member.subscribe("orders")
        assert member.subscription == frozenset()


def test_the_machine_refuses_one_string() -> None:
    machine = Machine(MemberConfig(group_id="g", assignors=[get_assignor("range")]))
    with pytest.raises(LocalProtocolError, match="not 'orders'"):
        machine.handle(ev.SubscriptionChanged(topics="orders"), 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(BUILTIN_ASSIGNORS))
def test_every_assignor_refuses_one_string(name: str) -> None:
    # Every topic the letters would name exists, so a letter-wise reading would assign them.
    partitions = {"abc": 2, "a": 1, "b": 1, "c": 1}
    with pytest.raises(AssignorInputError, match="must be a sequence of names, not 'abc'"):
        get_assignor(name).assign(partitions, {"m1": Subscription("abc")})
