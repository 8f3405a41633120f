"""KIP-392: which replica each partition is fetched from (sans-I/O, no clock: ``now`` given).

A consumer with a rack (``client_rack``) sends it in every Fetch (v11+, ``rack_id``). A leader
whose broker has a ``replica.selector.class`` (``RackAwareReplicaSelector``) may answer a
partition with no records and a ``preferred_read_replica`` (a broker id, -1 for none): the
consumer then fetches that partition from that replica, a follower in its own rack, until
something says otherwise. The rules, as Java's consumer has them (``AbstractFetch.
selectReadReplica``, ``SubscriptionState``'s preferred read replica):

- the preferred replica lasts ``metadata_max_age_ms`` from when it was named (still valid at
  that instant, gone after); then the partition is fetched from its leader again, which may
  name a replica again: that is how a consumer returns to a replica that came back, or leaves
  one the selector no longer picks;
- naming the replica already in use does not extend its lease; naming the leader itself (or -1)
  changes nothing;
- it is dropped, and the next fetch goes to the leader, when the replica is not among the
  brokers of the last metadata, when a Fetch to it fails in transport, when it answers the
  partition with a leader error (NOT_LEADER_OR_FOLLOWER, REPLICA_NOT_AVAILABLE, ...) and when
  it answers OFFSET_OUT_OF_RANGE (a follower may be behind the leader: the leader decides
  whether the offset is really out of range, so no offset reset follows that answer).

KIP-227 fetch sessions are per broker (:mod:`aiogroup.consumer.fetch_session`): a partition
that moves to a replica leaves the leader's session (``forgotten``) and joins the replica's.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from aiogroup.protocol.types import TopicPartition

__all__ = ["ReadReplica", "ReadReplicas"]


@dataclass(frozen=True, slots=True)
class ReadReplica:
    """A partition's preferred read replica, valid up to ``expires_at`` (included)."""

    node_id: int
    expires_at: float


class ReadReplicas:
    """The preferred read replica of each partition that has one (see the module)."""

    def __init__(self, max_age_s: float) -> None:
        self.max_age_s = max_age_s
        self._replicas: dict[TopicPartition, ReadReplica] = {}

    def __len__(self) -> int:
        return len(self._replicas)

    def get(self, tp: TopicPartition, now: float) -> int | None:
        """``tp``'s preferred replica, None if it has none or its lease ended (then dropped)."""
        replica = self._replicas.get(tp)
        if replica is None:
            return None
        if now > replica.expires_at:
            del self._replicas[tp]
            return None
        return replica.node_id

    def select(
        self,
        tp: TopicPartition,
        leader: int,
        now: float,
        brokers: Collection[int] | None = None,
    ) -> int:
        """The node to fetch ``tp`` from: its preferred replica while that is valid and among
        ``brokers`` (the last metadata's; None: not known, not checked), else ``leader``."""
        node = self.get(tp, now)
        if node is None:
            return leader
        if brokers is not None and node not in brokers:
            del self._replicas[tp]  # gone from the metadata (stopped, fenced): the leader
            return leader
        return node

    def on_preferred(self, tp: TopicPartition, node_id: int, leader: int, now: float) -> bool:
        """A Fetch answer named ``node_id`` as ``tp``'s preferred read replica. True if the
        partition is to be fetched from another node from now on."""
        if node_id < 0:
            return False
        if node_id == leader:
            return self.clear(tp) is not None
        current = self._replicas.get(tp)
        if current is not None and current.node_id == node_id and now <= current.expires_at:
            return False  # the same replica again: the lease is not extended (as Java)
        self._replicas[tp] = ReadReplica(node_id, now + self.max_age_s)
        return True

    def clear(self, tp: TopicPartition) -> int | None:
        """Fetch ``tp`` from its leader again; the replica dropped, if it had one."""
        replica = self._replicas.pop(tp, None)
        return None if replica is None else replica.node_id

    def clear_all(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._replicas.pop(tp, None)

    def snapshot(self) -> dict[TopicPartition, ReadReplica]:
        """Every preferred replica held, expired or not (for tests and logs)."""
        return dict(self._replicas)
