"""Requests: what a member sends, and which of them it waits for.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). Every request action gets a fresh token and is
stamped with the ``(member_id, generation_id)`` it is built with, so the driver never asks the
machine again and a request built for one generation is never sent as another. Of each kind
(:class:`~aiogroup.membership.states.Request`) at most one is awaited: a response is acted on
only if its token is that one (:meth:`Requests.answered`), anything else is stale (KAFKA-13406).

The token bookkeeping and the builders of FindCoordinator, OffsetCommit and the callbacks are
not specific to the classic protocol: they are :class:`Tokens`, which the KIP-848 machine
(:mod:`~aiogroup.membership.consumer_machine`) uses as they are. :class:`Requests` adds the
classic protocol's JoinGroup, SyncGroup, Heartbeat and LeaveGroup.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.membership import actions as act
from aiogroup.membership.config import MemberConfig
from aiogroup.membership.states import Request
from aiogroup.protocol import Subscription, TopicPartition, encode_subscription, group_by_topic

__all__ = ["Requests", "Tokens"]

Partitions = frozenset[TopicPartition]


class Tokens:
    """The tokens of a member's requests, and the request actions every protocol sends alike."""

    __slots__ = ("_awaited", "_last", "group_id", "group_instance_id")

    def __init__(self, group_id: str, group_instance_id: str | None) -> None:
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self._last = 0
        self._awaited: dict[Request, int] = {}

    # -- tokens --------------------------------------------------------------------------------

    def token(self) -> int:
        """A fresh token (never one given before)."""
        self._last += 1
        return self._last

    def send(self, request: Request) -> int:
        """A fresh token for a request of this kind, now the one awaited."""
        token = self._awaited[request] = self.token()
        return token

    def waiting(self, request: Request) -> bool:
        """A request of this kind is awaited."""
        return request in self._awaited

    def answered(self, request: Request, token: object) -> bool:
        """A response to a request of this kind came with ``token``: True if it is the one
        awaited (which then no longer is), False if it is stale."""
        if self._awaited.get(request) != token:
            return False
        del self._awaited[request]
        return True

    def abandon(self, *requests: Request) -> bool:
        """Await none of these any more (their answers will be stale); True if one was."""
        found = False
        for request in requests:
            found = self._awaited.pop(request, None) is not None or found
        return found

    def abandon_all(self) -> None:
        self._awaited.clear()

    # -- the actions every protocol sends ------------------------------------------------------

    def find_coordinator(self) -> act.FindCoordinator:
        return act.FindCoordinator(self.send(Request.FIND_COORDINATOR), self.group_id)

    def commit(
        self,
        member_id: str,
        generation_id: int,
        offsets: Mapping[TopicPartition, int] | None,
        *,
        during_join: bool,
        token: int | None = None,
    ) -> act.CommitOffsets:
        """OffsetCommit (many may be in flight: the commits part tracks them by token);
        ``generation_id`` is the member epoch under KIP-848. ``token``: send again under the
        token of a commit already made (a retry its caller keeps waiting for)."""
        return act.CommitOffsets(
            token=self.token() if token is None else token,
            group_id=self.group_id,
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=self.group_instance_id,
            offsets=None if offsets is None else dict(offsets),
            during_join=during_join,
        )

    def callbacks(
        self,
        protocol: RebalanceProtocol,
        member_id: str,
        generation_id: int,
        *,
        revoked: Partitions = frozenset(),
        assigned: Partitions | None = None,
        lost: Partitions = frozenset(),
    ) -> act.InvokeCallbacks:
        return act.InvokeCallbacks(
            token=self.send(Request.CALLBACKS),
            protocol=protocol,
            generation_id=generation_id,
            member_id=member_id,
            revoked=revoked,
            assigned=assigned,
            lost=lost,
        )


class Requests(Tokens):
    """The tokens of a classic member's requests and the request actions themselves."""

    __slots__ = ("config",)

    def __init__(self, config: MemberConfig) -> None:
        super().__init__(config.group_id, config.group_instance_id)
        self.config = config

    def join_group(
        self,
        member_id: str,
        generation_id: int,
        *,
        topics: frozenset[str],
        owned: Partitions,
        reason: str,
    ) -> act.SendJoinGroup:
        """JoinGroup with one protocol per assignor, in preference order, each with its
        Subscription of ``topics`` claiming ``owned`` (KIP-429: empty under EAGER)."""
        config = self.config
        owned_by_topic = group_by_topic(owned)
        protocols: list[tuple[str, bytes]] = []
        for assignor in config.assignors:
            sub = Subscription(
                topics=sorted(topics),
                user_data=assignor.subscription_user_data(topics),
                owned_partitions=owned_by_topic,
                generation_id=generation_id,
                rack_id=config.rack_id,
            )
            protocols.append((assignor.name, encode_subscription(sub, config.subscription_version)))
        return act.SendJoinGroup(
            token=self.send(Request.JOIN_GROUP),
            group_id=config.group_id,
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=config.group_instance_id,
            session_timeout_ms=config.session_timeout_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            protocol_type=config.protocol_type,
            protocols=tuple(protocols),
            reason=reason,
        )

    def sync_group(
        self,
        member_id: str,
        generation_id: int,
        protocol_name: str,
        assignments: tuple[tuple[str, bytes], ...],
    ) -> act.SendSyncGroup:
        return act.SendSyncGroup(
            token=self.send(Request.SYNC_GROUP),
            group_id=self.config.group_id,
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=self.config.group_instance_id,
            protocol_type=self.config.protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
        )

    def heartbeat(self, member_id: str, generation_id: int) -> act.SendHeartbeat:
        return act.SendHeartbeat(
            token=self.send(Request.HEARTBEAT),
            group_id=self.config.group_id,
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=self.config.group_instance_id,
        )

    def leave_group(self, member_id: str, generation_id: int, reason: str) -> act.SendLeaveGroup:
        return act.SendLeaveGroup(
            token=self.send(Request.LEAVE_GROUP),
            group_id=self.config.group_id,
            member_id=member_id,
            generation_id=generation_id,
            group_instance_id=self.config.group_instance_id,
            reason=reason,
        )
