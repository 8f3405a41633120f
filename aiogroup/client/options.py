"""Checking a client's keyword options before anything is built.

:class:`~aiogroup.client.GroupMember` takes its own options plus the aiokafka client options it
forwards (``security_protocol``, ``ssl_context``, ``sasl_mechanism``, ...). A misspelt name
(``sesion_timeout_ms``) would otherwise reach aiokafka's constructor and come back as a
``TypeError`` about a keyword the user never meant; instead it is refused here with a
:class:`~aiogroup.errors.ConfigurationError` naming the option and the closest valid one.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

from aiogroup.errors import ConfigurationError

__all__ = [
    "aiokafka_client_options",
    "bootstrap_addresses",
    "check_options",
    "parameter_names",
    "topic_names",
]

#: aiokafka client parameters the transport sets itself (or that are deprecated).
_SET_BY_US = frozenset({"self", "loop", "bootstrap_servers", "client_id", "request_timeout_ms"})


@cache
def aiokafka_client_options() -> frozenset[str]:
    """The options of aiokafka's ``AIOKafkaClient`` that a member forwards as they are."""
    from aiokafka.client import AIOKafkaClient

    return parameter_names(AIOKafkaClient.__init__) - _SET_BY_US


def parameter_names(function: Callable[..., Any]) -> frozenset[str]:
    """The keyword-capable parameter names of ``function`` (no ``*args`` / ``**kwargs``)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(
        p.name for p in inspect.signature(function).parameters.values() if p.kind in kinds
    )


def check_options(
    given: Mapping[str, Any],
    forwarded: Iterable[str],
    *,
    own: Iterable[str] = (),
    owner: str = "GroupMember",
) -> None:
    """Refuse every name in ``given`` that is not in ``forwarded``.

    ``own`` are the owner's own parameters: valid, but never expected in ``given`` (they are
    bound by name); they count as suggestions. Raises :class:`ConfigurationError` naming each
    unknown option and, where one is close, the valid option it most likely meant.
    """
    allowed = frozenset(forwarded)
    unknown = sorted(name for name in given if name not in allowed)
    if not unknown:
        return
    candidates = sorted(allowed | frozenset(own))
    problems = []
    guessed = True
    for name in unknown:
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6)
        guessed = guessed and bool(close)
        problems.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    plural = "s" if len(problems) > 1 else ""
    message = f"{owner} got unknown option{plural} {', '.join(problems)}"
    if not guessed:
        message += f"; valid options: {', '.join(candidates)}"
    raise ConfigurationError(message)


def topic_names(topics: Iterable[str], what: str = "topics") -> frozenset[str]:
    """``topics`` as a set of names; a bare string is refused (it would be read as its
    letters: ``"orders"`` as topics o, r, d, e, s)."""
    if isinstance(topics, str | bytes):
        raise ConfigurationError(
            f"{what} must be a collection of topic names, not the string {topics!r} "
            f"(write [{topics!r}] for one topic)"
        )
    names = frozenset(topics)
    bad = sorted(repr(t) for t in names if not isinstance(t, str) or not t)
    if bad:
        raise ConfigurationError(f"{what} must be non-empty strings, got {', '.join(bad)}")
    return names


def bootstrap_addresses(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """``bootstrap_servers`` (``"host:port,host:port"`` or a list of ``"host:port"``) as
    ``(host, port)`` pairs; the port defaults to 9092 and IPv6 hosts are written ``[::1]:9092``.

    Refuses what no broker can be reached at with a :class:`ConfigurationError` that names the
    entry and what is wrong with it (aiokafka would raise a bare ``ValueError`` when it starts).
    """
    if isinstance(servers, str):
        entries = servers.split(",")
    elif isinstance(servers, Sequence) and all(isinstance(e, str) for e in servers):
        entries = list(servers)
    else:
        raise ConfigurationError(
            f"bootstrap_servers must be 'HOST:PORT[,HOST:PORT...]' or a list of 'HOST:PORT' "
            f"strings, not {servers!r}"
        )
    out = []
    for raw in entries:
        entry = raw.strip()
        if not entry:
            if len(entries) == 1:
                raise ConfigurationError("bootstrap_servers is empty: give HOST:PORT")
            raise ConfigurationError(
                f"bootstrap_servers {servers!r} has an empty entry (a stray comma?)"
            )
        host, port_text = entry, "9092"
        if entry.startswith("["):  # [IPv6]:port
            close = entry.find("]")
            if close < 0:
                raise ConfigurationError(
                    f"bootstrap server {entry!r}: an IPv6 address needs its closing ']', "
                    "as in [::1]:9092"
                )
            host, rest = entry[1:close], entry[close + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise ConfigurationError(
                        f"bootstrap server {entry!r}: write [HOST]:PORT, as in [::1]:9092"
                    )
                port_text = rest[1:]
        elif entry.count(":") == 1:
            host, port_text = entry.split(":")
        elif entry.count(":") > 1:
            raise ConfigurationError(
                f"bootstrap server {entry!r}: write an IPv6 address in brackets, as in "
                "[::1]:9092"
            )
        if not host or any(c.isspace() for c in host) or "/" in host:
            raise ConfigurationError(
                f"bootstrap server {entry!r} has no valid host: write HOST:PORT, as in "
                "127.0.0.1:9092 (no scheme, no path)"
            )
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ConfigurationError(
                f"bootstrap server {entry!r} has port {port_text!r}, which is not a port "
                "number (1-65535): write HOST:PORT, as in 127.0.0.1:9092"
            )
        out.append((host, int(port_text)))
    return out
