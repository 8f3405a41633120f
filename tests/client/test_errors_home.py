"""Every error a user can meet is importable from ``aiogroup.errors`` (and ``aiogroup``), is
documented, and a wrong option names the option, the value and what to change (issue 23.3)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import pytest

import aiogroup
import aiogroup.errors
from aiogroup import Consumer, GroupMember
from aiogroup.client.options import bootstrap_addresses
from aiogroup.config import DEFAULTS, GROUP_DEFAULTS, ConsumerConfig, describe_options
from aiogroup.errors import (
    AiogroupError,
    BrokerUnreachableError,
    ConfigurationError,
    CoordinatorUnreachableError,
)

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: Tooling rooms whose own errors are about that tool (not what a library user meets).
_TOOLING = ("aiogroup.testing", "aiogroup.tools.chaos", "aiogroup.tools.audit")


def _library_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(aiogroup.__path__, "aiogroup."):
        if info.name.startswith(_TOOLING) or info.name.endswith("__main__"):
            continue
        names.append(info.name)
    return names


def test_every_library_exception_lives_in_aiogroup_errors() -> None:
    homeless = []
    for name in _library_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, AiogroupError)
                and value.__module__ == name
                and name != "aiogroup.errors"
            ):
                homeless.append(f"{name}.{attr}")
    assert homeless == [], f"define these in aiogroup.errors: {homeless}"


def test_every_error_is_importable_from_aiogroup_too() -> None:
    for name in aiogroup.errors.__all__:
        if name == "error_for_code":
            continue
        assert getattr(aiogroup, name) is getattr(aiogroup.errors, name)
        assert name in aiogroup.__all__


def test_every_error_is_documented() -> None:
    text = (DOCS / "errors.md").read_text()
    missing = [
        n for n in aiogroup.errors.__all__ if n != "error_for_code" and f"`{n}`" not in text
    ]
    assert missing == [], f"docs/errors.md does not describe {missing}"


def test_old_import_paths_name_the_same_classes() -> None:
    from aiogroup.assignors.range import AssignorInputError
    from aiogroup.assignors.registry import UnknownAssignorError
    from aiogroup.client import CoordinatorUnreachableError as FromClient
    from aiogroup.client.member import MemberClosedError
    from aiogroup.consumer.errors import ConsumerStoppedError, RecordDeserializationError
    from aiogroup.membership.errors import RebalanceCallbackError

    assert FromClient is CoordinatorUnreachableError
    for cls in (
        AssignorInputError,
        UnknownAssignorError,
        MemberClosedError,
        ConsumerStoppedError,
        RecordDeserializationError,
        RebalanceCallbackError,
    ):
        assert cls.__module__ == "aiogroup.errors"


# ------------------------------------------------------------------ bootstrap servers


@pytest.mark.parametrize(
    ("servers", "words"),
    [
        ("127.0.0.1:50889x", "port '50889x'"),
        ("127.0.0.1:0", "port '0'"),
        ("127.0.0.1:70000", "port '70000'"),
        ("kafka://127.0.0.1:9092", "IPv6"),  # two colons: not HOST:PORT
        ("127.0.0.1:9092,", "empty entry"),
        ("", "empty"),
        (":9092", "no valid host"),
        ("[::1:9092", "closing ']'"),
        (["127.0.0.1:9092", 9093], "list of 'HOST:PORT'"),
    ],
)
def test_a_malformed_bootstrap_is_refused_at_once(servers: Any, words: str) -> None:
    for build in (
        lambda: Consumer(servers, "g", topics=["t"]),
        lambda: GroupMember(servers, "g", topics=["t"]),
    ):
        with pytest.raises(ConfigurationError, match=re.escape(words)):
            build()


def test_good_bootstrap_forms() -> None:
    assert bootstrap_addresses("a:1, b:2") == [("a", 1), ("b", 2)]
    assert bootstrap_addresses(["[::1]:9093", "host"]) == [("::1", 9093), ("host", 9092)]


async def test_an_unreachable_bootstrap_is_not_called_a_coordinator() -> None:
    consumer = Consumer("127.0.0.1:1", "g", topics=["t"], request_timeout_ms=2_000)
    with pytest.raises(BrokerUnreachableError) as info:
        await consumer.start()
    assert not isinstance(info.value, CoordinatorUnreachableError)
    assert "bootstrap" in str(info.value) and "127.0.0.1:1" in str(info.value)
    await consumer.close()


# ------------------------------------------------------------------ option values


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"max_poll_records": "500"}, "max_poll_records must be an int, not str '500' "
                                       "(write max_poll_records=500"),
        ({"session_timeout_ms": True}, "session_timeout_ms must be an int, not bool"),
        ({"max_poll_records": 0}, "max_poll_records must be >= 1, not 0"),
        ({"auto_offset_reset": "earlist"}, "auto_offset_reset must be one of 'earliest'"),
        ({"fetch_max_wait_ms": -1}, "fetch_max_wait_ms must be >= 0"),
        ({"close_timeout_s": "5"}, "close_timeout_s must be an int or a float"),
        ({"group_instance_id": ""}, "use None for a dynamic member"),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_option_and_the_fix(options: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(words)):
        Consumer("127.0.0.1:9092", "g", topics=["t"], **options)


def test_a_short_session_names_both_values_and_which_to_change() -> None:
    with pytest.raises(ConfigurationError) as info:
        Consumer("127.0.0.1:9092", "g", topics=["t"], session_timeout_ms=500)
    message = str(info.value)
    assert "session_timeout_ms=500" in message
    assert "heartbeat_interval_ms=3000 (the default)" in message
    assert "raise session_timeout_ms above 3000" in message
    assert "lower heartbeat_interval_ms to at most a third of it (166)" in message
    with pytest.raises(ConfigurationError, match=r"heartbeat_interval_ms=9000(?! \()"):
        GroupMember("127.0.0.1:9092", "g", heartbeat_interval_ms=9000, session_timeout_ms=6000)


def test_defaults_are_defined_once() -> None:
    """The signatures read their defaults from the one table (aiogroup.config)."""
    consumer = inspect.signature(Consumer.__init__).parameters
    member = inspect.signature(GroupMember.__init__).parameters
    for name, default, _, layer, _ in describe_options():
        if name == "rack_id":
            assert consumer["client_rack"].default == default
            assert member["rack_id"].default == default
            continue
        assert consumer[name].default == getattr(DEFAULTS, name), name
        if "GroupMember" in layer:
            assert member[name].default == getattr(GROUP_DEFAULTS, name), name
            assert default == getattr(GROUP_DEFAULTS, name)


async def test_the_consumer_passes_its_config_down() -> None:
    consumer = Consumer("127.0.0.1:9092", "g", topics=["t"], session_timeout_ms=7_000,
                        max_poll_interval_ms=60_000)  # fmt: skip
    assert isinstance(consumer.config, ConsumerConfig)
    assert consumer.member.config is consumer.config
    assert consumer.config.rebalance_timeout == 60_000  # Java: the poll interval
    with pytest.raises(ConfigurationError, match="not both"):
        GroupMember("127.0.0.1:9092", "g", config=consumer.config, session_timeout_ms=6_000)


def test_docs_list_every_option() -> None:
    text = (DOCS / "options.md").read_text()
    for name, default, java, _, _ in describe_options():
        row = next((line for line in text.splitlines() if line.startswith(f"| `{name}`")), None)
        assert row is not None, f"docs/options.md has no row for {name}"
        assert f"`{default!r}`" in row, f"docs/options.md: {name}'s default is {default!r}"
        if java:
            assert java in row
