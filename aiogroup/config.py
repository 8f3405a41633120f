"""Options, defined once: every option of a group member and a consumer, with its default, its
type, its bounds and the Java client's name for it.

Two configuration objects, one per layer, each the one place its defaults live:

- :class:`GroupConfig`: what a group member (:class:`aiogroup.GroupMember`) and the membership
  machine under it need: session, heartbeat, rebalance and request timeouts, backoffs, rack,
  static membership;
- :class:`ConsumerConfig`: a :class:`GroupConfig` plus what :class:`aiogroup.Consumer` adds
  (positions, auto-commit, fetching).

``Consumer(...)`` and ``GroupMember(...)`` take the same options as keyword arguments (aiokafka's
and Java's names) and build these objects, so a wrong value is refused once, here, before
anything connects: with a :class:`~aiogroup.errors.ConfigurationError` that names the option,
the value given, and what to change (``session_timeout_ms=500`` says it must exceed
``heartbeat_interval_ms``, which was left at its default of 3000, and which of the two to move).

This module imports nothing of the rest of the library but :mod:`aiogroup.errors`, so every
layer (the sans-I/O membership machine included) can read its defaults from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from aiogroup.errors import ConfigurationError

__all__ = [
    "DEFAULTS",
    "GROUP_DEFAULTS",
    "ConsumerConfig",
    "GroupConfig",
    "GroupProtocol",
    "IsolationLevel",
    "ResetPolicy",
    "check_values",
    "describe_options",
]

ResetPolicy = Literal["earliest", "latest", "none"]
GroupProtocol = Literal["classic", "consumer"]
IsolationLevel = Literal["read_uncommitted", "read_committed"]

#: A group member's rebalance timeout when none is given (Java's max.poll.interval.ms).
_REBALANCE_TIMEOUT_MS = 300_000
_INT = (int,)
_NUMBER = (int, float)
_STR = (str,)
_BOOL = (bool,)


def _option(
    default: Any,
    *,
    types: tuple[type, ...],
    optional: bool = False,
    minimum: float | None = None,
    choices: tuple[str, ...] = (),
    java: str = "",
    doc: str,
) -> Any:
    """A dataclass field carrying how its values are checked and documented."""
    meta = {
        "types": types,
        "optional": optional,
        "minimum": minimum,
        "choices": choices,
        "java": java,
        "doc": doc,
    }
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class GroupConfig:
    """The options of a group member (classic protocol), Java's defaults. Times in ms."""

    session_timeout_ms: int = _option(
        45_000, types=_INT, minimum=1, java="session.timeout.ms",
        doc="how long the coordinator waits for a heartbeat before it evicts the member",
    )  # fmt: skip
    heartbeat_interval_ms: int = _option(
        3_000, types=_INT, minimum=1, java="heartbeat.interval.ms",
        doc="how often the member heartbeats; below session_timeout_ms (Java advises a third)",
    )  # fmt: skip
    rebalance_timeout_ms: int | None = _option(
        _REBALANCE_TIMEOUT_MS, types=_INT, optional=True, minimum=1, java="max.poll.interval.ms",
        doc="how long the coordinator waits for every member to rejoin a rebalance (a "
            "Consumer uses max_poll_interval_ms, as Java does)",
    )  # fmt: skip
    retry_backoff_ms: int = _option(
        100, types=_INT, minimum=0, java="retry.backoff.ms",
        doc="the first wait before a failed request is retried",
    )  # fmt: skip
    retry_backoff_max_ms: int = _option(
        1_000, types=_INT, minimum=1, java="retry.backoff.max.ms",
        doc="the longest wait between retries (the backoff doubles up to it, KIP-580)",
    )  # fmt: skip
    request_timeout_ms: int = _option(
        30_000, types=_INT, minimum=1, java="request.timeout.ms",
        doc="how long a request may wait for its answer (JoinGroup gets the rebalance timeout)",
    )  # fmt: skip
    metadata_max_age_ms: int = _option(
        300_000, types=_INT, minimum=1, java="metadata.max.age.ms",
        doc="how often metadata is refreshed (a pattern subscription sees new topics then)",
    )  # fmt: skip
    close_timeout_s: float = _option(
        30.0, types=_NUMBER, minimum=0, java="(close(Duration))",
        doc="how long close() may take: the last commit, the revoke callbacks, leaving",
    )  # fmt: skip
    client_id: str = _option(
        "aiogroup", types=_STR, java="client.id",
        doc="the client id the brokers log and quotas apply to",
    )  # fmt: skip
    group_instance_id: str | None = _option(
        None, types=_STR, optional=True, java="group.instance.id",
        doc="makes the member static (KIP-345): no LeaveGroup, a restart within the session "
            "keeps its partitions",
    )  # fmt: skip
    rack_id: str | None = _option(
        None, types=_STR, optional=True, java="client.rack",
        doc="the member's rack, sent in its subscription (rack-aware assignors, KIP-881) and "
            "by a consumer in Fetch (KIP-392: fetch from a replica in that rack)",
    )  # fmt: skip
    group_protocol: GroupProtocol = _option(  # noqa: RUF009 - a field(), with metadata
        "classic", types=_STR, choices=("classic", "consumer"), java="group.protocol",
        doc="'consumer': the KIP-848 consumer group protocol (Kafka 4.0+; the broker assigns, "
            "ConsumerGroupHeartbeat); 'classic': JoinGroup/SyncGroup with a client-side "
            "assignor (KIP-429)",
    )  # fmt: skip
    group_remote_assignor: str | None = _option(
        None, types=_STR, optional=True, choices=("uniform", "range"),
        java="group.remote.assignor",
        doc="with group_protocol='consumer': the broker's assignor to use ('uniform' or "
            "'range'; None: the broker's default)",
    )  # fmt: skip

    def __post_init__(self) -> None:
        check_values(dataclasses.asdict(self))

    @property
    def rebalance_timeout(self) -> int:
        """The rebalance timeout sent in JoinGroup (ms)."""
        return self.rebalance_timeout_ms or _REBALANCE_TIMEOUT_MS


@dataclass(frozen=True)
class ConsumerConfig(GroupConfig):
    """:class:`GroupConfig` plus the options of :class:`aiogroup.Consumer`. Bytes and ms."""

    rebalance_timeout_ms: int | None = _option(
        None, types=_INT, optional=True, minimum=1, java="(max.poll.interval.ms)",
        doc="how long the coordinator waits for every member to rejoin; None: "
            "max_poll_interval_ms, as Java",
    )  # fmt: skip
    enable_auto_commit: bool = _option(
        True, types=_BOOL, java="enable.auto.commit",
        doc="commit what the application was given: on an interval, before a revocation, on "
            "close (at-least-once)",
    )  # fmt: skip
    auto_commit_interval_ms: int = _option(
        5_000, types=_INT, minimum=1, java="auto.commit.interval.ms",
        doc="how often auto-commit commits while the group is stable",
    )  # fmt: skip
    auto_offset_reset: ResetPolicy = _option(  # noqa: RUF009 - a field(), with metadata
        "latest", types=_STR, choices=("earliest", "latest", "none"), java="auto.offset.reset",
        doc="where to start without a committed offset ('none' raises "
            "NoOffsetForPartitionError)",
    )  # fmt: skip
    isolation_level: IsolationLevel = _option(  # noqa: RUF009 - a field(), with metadata
        "read_uncommitted", types=_STR, choices=("read_uncommitted", "read_committed"),
        java="isolation.level",
        doc="read_committed returns only committed transactional records",
    )  # fmt: skip
    max_poll_interval_ms: int = _option(
        300_000, types=_INT, minimum=1, java="max.poll.interval.ms",
        doc="the member leaves the group when the application asks for no records this long "
            "(KIP-62)",
    )  # fmt: skip
    max_poll_records: int | None = _option(
        None, types=_INT, optional=True, minimum=1, java="max.poll.records",
        doc="the most records one getmany() returns (None: no limit)",
    )  # fmt: skip
    fetch_max_bytes: int = _option(
        52_428_800, types=_INT, minimum=1, java="fetch.max.bytes",
        doc="the most bytes one Fetch answer may carry",
    )  # fmt: skip
    max_partition_fetch_bytes: int = _option(
        1_048_576, types=_INT, minimum=1, java="max.partition.fetch.bytes",
        doc="the most bytes per partition in one Fetch answer",
    )  # fmt: skip
    fetch_min_bytes: int = _option(
        1, types=_INT, minimum=0, java="fetch.min.bytes",
        doc="the broker waits for this many bytes (or fetch_max_wait_ms) before answering",
    )  # fmt: skip
    fetch_max_wait_ms: int = _option(
        500, types=_INT, minimum=0, java="fetch.max.wait.ms",
        doc="how long the broker may hold a Fetch waiting for fetch_min_bytes",
    )  # fmt: skip
    check_crcs: bool = _option(
        True, types=_BOOL, java="check.crcs",
        doc="check each record batch's CRC-32C",
    )  # fmt: skip
    hand_off_on_close: bool = _option(
        True, types=_BOOL,
        doc="close() called while another task reads hands the partitions off first "
            "(cooperative, dynamic members): they keep flowing until the round that moves them",
    )  # fmt: skip

    @property
    def rebalance_timeout(self) -> int:
        """Java: a member has its poll interval to finish its callbacks and rejoin."""
        return self.rebalance_timeout_ms or self.max_poll_interval_ms


_GROUP_FIELDS: Mapping[str, dataclasses.Field[Any]] = {
    f.name: f for f in dataclasses.fields(GroupConfig)
}
_FIELDS: Mapping[str, dataclasses.Field[Any]] = {
    f.name: f for f in dataclasses.fields(ConsumerConfig)
}



def _type_words(types: tuple[type, ...]) -> str:
    return " or ".join({"int": "an int", "float": "a float", "str": "a string",
                        "bool": "True or False"}[t.__name__] for t in types)  # fmt: skip


def _check_one(name: str, value: Any) -> None:
    meta = _FIELDS[name].metadata
    if value is None:
        if meta["optional"]:
            return
        raise ConfigurationError(f"{name} must be set (None is not allowed here)")
    types: tuple[type, ...] = meta["types"]
    # bool is an int to Python, never to Kafka: session_timeout_ms=True is a mistake.
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        hint = ""
        if isinstance(value, str) and value.strip().lstrip("-").isdigit() and int in types:
            hint = f" (write {name}={int(value)}, without quotes)"
        raise ConfigurationError(
            f"{name} must be {_type_words(types)}, not {type(value).__name__} {value!r}{hint}"
        )
    if meta["choices"] and value not in meta["choices"]:
        allowed = ", ".join(repr(c) for c in meta["choices"])
        raise ConfigurationError(f"{name} must be one of {allowed}, not {value!r}")
    minimum = meta["minimum"]
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{name} must be >= {minimum:g}, not {value!r}")
    if isinstance(value, str) and not meta["choices"] and not value:
        raise ConfigurationError(f"{name} must not be empty" + (
            " (use None for a dynamic member)" if name == "group_instance_id" else ""))  # fmt: skip


def _was(name: str, value: Any) -> str:
    """``name=value``, saying when that is the default (the user may never have set it)."""
    default = _FIELDS[name].default
    return f"{name}={value}" + (" (the default)" if value == default else "")


def check_values(values: Mapping[str, Any]) -> None:
    """Check every known option in ``values`` (names this module does not define are left to
    their owner), then the rules between options. Raises :class:`ConfigurationError` naming
    the option, the value and what to change."""
    for name, value in values.items():
        if name in _FIELDS:
            _check_one(name, value)
    session = values.get("session_timeout_ms")
    heartbeat = values.get("heartbeat_interval_ms")
    if isinstance(session, int) and isinstance(heartbeat, int) and heartbeat >= session:
        raise ConfigurationError(
            f"session_timeout_ms must be greater than heartbeat_interval_ms, but "
            f"{_was('session_timeout_ms', session)} and "
            f"{_was('heartbeat_interval_ms', heartbeat)}: raise session_timeout_ms above "
            f"{heartbeat}, or lower heartbeat_interval_ms to at most a third of it "
            f"({max(session // 3, 1)}), as Java advises"
        )
    protocol = values.get("group_protocol", "consumer")  # (a partial set: not this rule's)
    if values.get("group_remote_assignor") is not None and protocol != "consumer":
        raise ConfigurationError(
            f"group_remote_assignor={values['group_remote_assignor']!r} chooses the broker's "
            f"assignor of the consumer group protocol (KIP-848), but "
            f"{_was('group_protocol', protocol)}: set group_protocol='consumer', or choose "
            "the classic protocol's assignors with assignors=[...]"
        )


def describe_options() -> list[tuple[str, Any, str, str, str]]:
    """``(name, default, Java name, layer, meaning)`` for every option, in definition order
    (``docs/options.md`` is checked against it)."""
    rows = []
    for f in dataclasses.fields(ConsumerConfig):
        layer = "Consumer"
        if f.name in _GROUP_FIELDS:
            layer = "GroupMember, Consumer"
            f = _GROUP_FIELDS[f.name]  # a member's default (the Consumer's may follow another)
        rows.append((f.name, f.default, f.metadata["java"], layer, f.metadata["doc"]))
    return rows


#: Every default, as one object: ``DEFAULTS.session_timeout_ms``.
DEFAULTS = ConsumerConfig()
#: A group member's defaults (``rebalance_timeout_ms`` is set; a Consumer's follows its poll
#: interval).
GROUP_DEFAULTS = GroupConfig()
