"""Manual assignment (Java's ``KafkaConsumer.assign``, aiokafka's ``AIOKafkaConsumer.assign``):
the application names the partitions; no group membership, no coordinator for reading.

:class:`ManualAssignment` holds what decides a :class:`~aiogroup.consumer.Consumer`'s partitions
and keeps the two ways apart, as Java's ``SubscriptionState`` does: a subscription (the group
assigns) or a manual assignment (the application does), never both until ``unsubscribe()``.

Offsets of a manually assigned consumer go to its group's coordinator only when it has a group
id, as a *simple* (standalone) member: OffsetCommit with generation -1 and an empty member id,
which Kafka accepts for a group with no members (Java's commits under ``assign``). Without a
group id the positions come from ``auto_offset_reset`` and commits are refused
(:class:`~aiogroup.errors.GroupIdRequiredError`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence

from aiogroup.client.member import GroupMember
from aiogroup.errors import (
    CoordinatorUnreachableError,
    GroupIdRequiredError,
    IllegalStateError,
    RetriableError,
    error_for_code,
)
from aiogroup.protocol.types import TopicPartition

__all__ = ["ManualAssignment"]

log = logging.getLogger("aiogroup.consumer")

Partitions = frozenset[TopicPartition]


class ManualAssignment:
    """Which way the consumer's partitions are decided, the manual set, and its offsets."""

    def __init__(self, member: GroupMember, group_id: str | None) -> None:
        self._member = member
        self.group_id = group_id
        #: The partitions given to :meth:`assign`; None: not manually assigned.
        self.partitions: Partitions | None = None

    @property
    def active(self) -> bool:
        """The consumer reads what :meth:`assign` gave (an empty set too, until unassigned)."""
        return self.partitions is not None

    def check_subscribe(self) -> None:
        """Refuse a subscription on a manually assigned consumer, or one without a group."""
        if self.active:
            raise IllegalStateError(
                "subscribe() and assign() are mutually exclusive: this consumer has a manual "
                "assignment; call unsubscribe() (or assign([])) first"
            )
        if self.group_id is None:
            raise GroupIdRequiredError(
                "subscribing needs a consumer group: give Consumer(bootstrap, group_id, ...) "
                "(a consumer without group_id can only assign() partitions)"
            )

    def check_rebalance(self) -> None:
        if self.active or self.group_id is None:
            raise IllegalStateError(
                "enforce_rebalance() needs a group subscription: this consumer "
                + ("has a manual assignment" if self.active else "has no group_id")
            )

    def check_assign(self, subscribed: bool) -> None:
        if subscribed:
            raise IllegalStateError(
                "subscribe() and assign() are mutually exclusive: this consumer is subscribed "
                "to topics or a pattern; call unsubscribe() first"
            )

    def assign(self, partitions: Iterable[TopicPartition]) -> tuple[Partitions, Partitions]:
        """Replace the manual set; returns ``(added, removed)``. An empty set unassigns."""
        wanted = frozenset(partitions)
        for tp in wanted:
            if not isinstance(tp, tuple) or len(tp) != 2:
                raise TypeError("partitions must be TopicPartition instances")
        before = self.partitions or frozenset()
        self.partitions = wanted or None  # assign([]) is unsubscribe(), as in Java
        return wanted - before, before - wanted

    def require_group(self, what: str) -> None:
        if self.group_id is None:
            raise GroupIdRequiredError(
                f"{what} needs a consumer group to keep offsets in: give "
                "Consumer(bootstrap, group_id, ...); without one, positions start at "
                "auto_offset_reset and are not stored"
            )

    async def committed(
        self, partitions: Sequence[TopicPartition]
    ) -> Mapping[TopicPartition, int | None]:
        """The group's committed offsets; none at all without a group id (the fetcher then
        applies ``auto_offset_reset``)."""
        if self.group_id is None:
            return dict.fromkeys(partitions)
        return await self._member.committed(partitions)

    async def commit(self, offsets: Mapping[TopicPartition, int], timeout: float) -> None:
        """OffsetCommit as a simple member (generation -1, no member id), retried while the
        coordinator moves or loads, within ``timeout`` seconds."""
        self.require_group("commit()")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        backoff = max(self._member.retry_backoff_ms / 1000, 0.01)
        transport = self._member.transport
        while True:
            error: Exception | None = None
            try:
                result = await asyncio.wait_for(
                    transport.offset_commit(
                        offsets,
                        generation_id=-1,
                        member_id="",
                        group_instance_id=None,
                        coordination=False,
                    ),
                    max(deadline - loop.time(), 0.0),
                )
                code = result.error_code
                if code:
                    error = error_for_code(code, f"OffsetCommit of {len(offsets)} offsets failed")
            except RetriableError as exc:
                error = exc
            except TimeoutError:
                raise CoordinatorUnreachableError(
                    f"OffsetCommit: no answer within {timeout:g} s"
                ) from None
            if error is None:
                return
            if not isinstance(error, RetriableError) or loop.time() + backoff >= deadline:
                raise error
            log.debug("group %s: standalone OffsetCommit: %s; retrying", self.group_id, error)
            await asyncio.sleep(backoff)  # retry backoff
            backoff = min(backoff * 2, 1.0)
