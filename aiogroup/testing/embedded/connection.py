"""A client connection of the embedded broker, and what its request handlers see of the broker.

The server (:mod:`aiogroup.testing.embedded.broker`) accepts connections and reads requests; the
handlers of each API family (:mod:`~aiogroup.testing.embedded.group_apis`,
:mod:`~aiogroup.testing.embedded.data_apis`, :mod:`~aiogroup.testing.embedded.admin_apis`)
answer them. A handler is ``async (Connection, wire.Request) -> answer``, the answer being the
response's values (a dict kafka-python's response class is built from), ``None`` to send
nothing (Produce with ``acks=0``) or :data:`NEVER` for a request Kafka never answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiogroup.testing import wire
from aiogroup.testing.embedded.log import Log
from aiogroup.testing.listeners import Listener

__all__ = ["NEVER", "BrokerNode", "Connection", "Handler", "Never", "Values", "advertised_port"]

#: A response's values, by field name.
Values = dict[str, Any]


@dataclass(eq=False)
class Connection:
    """One client connection: its socket, who is on it, and its idle timer."""

    conn_id: int
    peer: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    client_id: str = ""
    member_ids: set[str] = field(default_factory=set)
    task: asyncio.Task[None] | None = None
    #: The listener this connection came in on (None: the PLAINTEXT one) and its SASL user.
    listener: Listener | None = None
    principal: str | None = None
    #: KIP-368: when (loop time) the SASL session ends (None: never), when the last
    #: re-authentication began.
    session_deadline: float | None = None
    reauth_started: float = float("-inf")
    last_io: float = 0.0
    idle_timer: asyncio.TimerHandle | None = None
    closed: asyncio.Event = field(default_factory=asyncio.Event)


class Never:
    """A handler's result for a request Kafka never answers (the connection stays muted)."""


NEVER = Never()

#: A request handler: the answer to one request on one connection.
Handler = Callable[[Connection, wire.Request], Awaitable[Values | Never | None]]


class BrokerNode(Protocol):
    """What the request handlers read from the broker (an
    :class:`~aiogroup.testing.embedded.broker.EmbeddedBroker` is one): its identity, settings
    and log, read at each request, so a setting changed on a running broker takes effect."""

    node_id: int
    host: str
    #: The PLAINTEXT listener's port.
    port: int
    cluster_id: str
    auto_create_topics: bool
    num_partitions: int
    verify_crc: bool
    log: Log
    api_versions: dict[int, tuple[int, int]]


def advertised_port(node: BrokerNode, conn: Connection) -> int:
    """The port of the listener a request came in on (Kafka answers with that endpoint)."""
    return conn.listener.port if conn.listener is not None else node.port
