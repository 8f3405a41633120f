"""Target: the assignment a KIP-848 coordinator gives a member, by topic id, and what of it the
member can name.

A part of :class:`~aiogroup.membership.consumer_machine.ConsumerProtocolMachine` with its own
state, usable on its own (``tests/membership/parts/``). The coordinator names topics by id
(KIP-516); the member knows topic names and ids from Metadata v10+. A target partition of a
topic whose id the metadata does not know yet is *unresolved*: the member reconciles what it
can name and asks for metadata again until it can name the rest (or the coordinator takes it
away), as Java's consumer does. Owned partitions go back to the coordinator by id, the id the
member resolved them from.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

from aiogroup.protocol import TopicPartition

__all__ = ["Target"]

Partitions = frozenset[TopicPartition]


class Target:
    """The member's target assignment (the coordinator's last word) and the ids of the topics
    it resolved."""

    __slots__ = ("_ids", "partitions")

    def __init__(self) -> None:
        #: The last assignment the coordinator gave, by topic id (None: none since joining).
        self.partitions: dict[uuid.UUID, frozenset[int]] | None = None
        #: Topic name -> the id it was resolved from (to acknowledge by id).
        self._ids: dict[str, uuid.UUID] = {}

    def received(self, assignment: Mapping[uuid.UUID, Iterable[int]]) -> bool:
        """The coordinator gave this assignment; True if it differs from the last one."""
        new = {topic: frozenset(ps) for topic, ps in assignment.items() if ps}
        changed = new != self.partitions
        self.partitions = new
        return changed

    def resolve(self, names: Mapping[uuid.UUID, str]) -> tuple[Partitions, frozenset[uuid.UUID]]:
        """``(partitions it names, ids it cannot name yet)`` with the topic names ``names``
        knows by id."""
        resolved: set[TopicPartition] = set()
        unresolved: set[uuid.UUID] = set()
        for topic_id, partitions in (self.partitions or {}).items():
            name = names.get(topic_id)
            if name is None:
                unresolved.add(topic_id)
                continue
            self._ids[name] = topic_id
            resolved.update(TopicPartition(name, p) for p in partitions)
        return frozenset(resolved), frozenset(unresolved)

    def by_id(self, partitions: Iterable[TopicPartition]) -> dict[uuid.UUID, tuple[int, ...]]:
        """``partitions`` (all resolved from a target) by topic id, as the coordinator names
        them; partitions of a topic never resolved are left out."""
        out: dict[uuid.UUID, list[int]] = {}
        for tp in partitions:
            topic_id = self._ids.get(tp.topic)
            if topic_id is not None:
                out.setdefault(topic_id, []).append(tp.partition)
        return {topic_id: tuple(sorted(ps)) for topic_id, ps in sorted(out.items())}

    def forget(self) -> None:
        """Fenced, or left: the next join starts from no target."""
        self.partitions = None
