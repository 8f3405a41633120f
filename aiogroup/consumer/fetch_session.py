"""KIP-227 incremental fetch sessions, one per broker (sans-I/O).

A consumer that fetches the same partitions over and over tells the broker the full list once
(a *full* fetch, epoch 0); the broker answers with a ``session_id`` and remembers the list.
Later requests (epochs 1, 2, ...) name only what changed: partitions added or whose fetch
offset, maximum bytes or leader epoch moved, and partitions to forget. The broker then answers
only for partitions with something new (records, a high watermark change, an error).

Rules followed (KIP-227, Java's ``FetchSessionHandler``):

- no session yet, or the last one failed: a full request with ``session_id`` 0, epoch 0
  (INITIAL); the broker may answer ``session_id`` 0, meaning "no session" (sessions disabled,
  cache full, or a broker that predates Fetch v7): the next request is full again;
- after a network error or an unexpected error the next request closes the old session and asks
  for a new one: the old ``session_id`` with epoch 0;
- FETCH_SESSION_ID_NOT_FOUND (70) and INVALID_FETCH_SESSION_EPOCH (71): start over (INITIAL);
- epochs grow by one per request and wrap from 2**31-1 to 1 (0 is INITIAL, -1 FINAL);
- only one request per session is in flight at a time (the fetch planner sends one request per
  broker), and the session's partition list is only updated once the broker has answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from aiogroup.protocol.types import TopicPartition

__all__ = [
    "FETCH_SESSION_ID_NOT_FOUND",
    "INVALID_FETCH_SESSION_EPOCH",
    "FetchSession",
    "PartitionFetch",
    "SessionRequest",
]

FETCH_SESSION_ID_NOT_FOUND = 70
INVALID_FETCH_SESSION_EPOCH = 71
INITIAL_EPOCH = 0
_MAX_EPOCH = 2**31 - 1


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """What the broker is asked for one partition."""

    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """The session part of one Fetch request.

    ``to_send`` goes in the request body, ``forgotten`` in ``forgotten_topics_data``;
    ``fetching`` is everything the broker will read for us (the whole session for an
    incremental request, ``to_send`` for a full one).
    """

    session_id: int
    epoch: int
    full: bool
    to_send: Mapping[TopicPartition, PartitionFetch]
    forgotten: tuple[TopicPartition, ...]
    fetching: Mapping[TopicPartition, PartitionFetch]


@dataclass(slots=True)
class FetchSession:
    """The client side of one broker's fetch session."""

    session_id: int = 0
    epoch: int = INITIAL_EPOCH
    #: What the broker's session holds, as of the last answered request.
    partitions: dict[TopicPartition, PartitionFetch] = field(default_factory=dict)

    @property
    def established(self) -> bool:
        return self.session_id != 0 and self.epoch != INITIAL_EPOCH

    def build(self, wanted: Mapping[TopicPartition, PartitionFetch]) -> SessionRequest:
        """The request that fetches exactly ``wanted`` from this broker."""
        if not self.established:
            return SessionRequest(self.session_id, INITIAL_EPOCH, True, dict(wanted), (), wanted)
        current = self.partitions
        to_send = {tp: f for tp, f in wanted.items() if current.get(tp) != f}
        forgotten = tuple(sorted(tp for tp in current if tp not in wanted))
        return SessionRequest(self.session_id, self.epoch, False, to_send, forgotten, wanted)

    def on_response(self, request: SessionRequest, error_code: int, session_id: int) -> None:
        """The broker answered ``request`` with a top-level ``error_code`` and ``session_id``."""
        if error_code in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
            self.reset()
            return
        if error_code:
            self.close_existing()
            return
        if request.full:
            if session_id:
                self.session_id = session_id
                self.epoch = 1
                self.partitions = dict(request.fetching)
            else:
                self.reset()  # the broker keeps no session for us: stay with full requests
            return
        if session_id != self.session_id:
            self.reset()  # the broker dropped the session
            return
        self.partitions = dict(request.fetching)
        self.epoch = 1 if self.epoch >= _MAX_EPOCH else self.epoch + 1

    def on_failure(self) -> None:
        """The request failed in transport (or its answer was unusable)."""
        self.close_existing()

    def reset(self) -> None:
        self.session_id = 0
        self.epoch = INITIAL_EPOCH
        self.partitions = {}

    def close_existing(self) -> None:
        """Next request: the old session id with epoch 0 (close it, open a new one)."""
        self.epoch = INITIAL_EPOCH
        self.partitions = {}
