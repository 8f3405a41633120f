"""Interest: the topics a member subscribes to, the metadata it knows, the topics it misses.

A part of :class:`~aiogroup.membership.machine.MembershipMachine` with its own state, usable on
its own (``tests/membership/parts/``). A subscription is a list of topics or a regular
expression matched (``fullmatch``) against the topics in metadata (KIP-70: both behave alike).
Topics the member asked metadata for and the answer lacked are refreshed with an exponential
backoff until they appear (KIP-580), each missing subscribed topic warned about once.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterable, Mapping

from aiogroup.errors import LocalProtocolError

__all__ = ["Interest"]

log = logging.getLogger("aiogroup.membership")


class Interest:
    """A member's subscription and metadata view. ``retry_backoff_ms`` and
    ``retry_backoff_max_ms`` pace the refreshes while a topic is missing; ``group_id`` names
    the group in warnings."""

    __slots__ = (
        "_backoff",
        "_cap",
        "_first",
        "_warned",
        "group_id",
        "metadata",
        "missing",
        "pattern",
        "pattern_pending",
        "refresh_at",
        "topic_ids",
        "topics",
    )

    def __init__(self, *, group_id: str, retry_backoff_ms: int, retry_backoff_max_ms: int) -> None:
        self.group_id = group_id
        self._cap = max(retry_backoff_ms, retry_backoff_max_ms) / 1000
        self._first = retry_backoff_ms / 1000 or self._cap
        #: A list subscription (None: none, or a regex).
        self.topics: frozenset[str] | None = None
        #: A regex subscription (None: none, or a list).
        self.pattern: re.Pattern[str] | None = None
        #: A regex subscription waits for metadata to know its topics.
        self.pattern_pending = False
        #: Partition counts of the topics known (None: no metadata yet).
        self.metadata: dict[str, int] | None = None
        #: Topic ids of the topics known, by id (Metadata v10+; KIP-848 assigns by id).
        self.topic_ids: dict[uuid.UUID, str] = {}
        #: Topics we asked metadata for and the last answer lacked: refreshed with backoff.
        self.missing: frozenset[str] = frozenset()
        self._warned: frozenset[str] = frozenset()
        #: When to ask for metadata again (None: no topic is missing).
        self.refresh_at: float | None = None
        self._backoff = 0.0

    @property
    def subscribed(self) -> frozenset[str]:
        """The topics subscribed to now (a regex is matched against the known metadata)."""
        if self.topics is not None:
            return self.topics
        if self.pattern is not None and self.metadata is not None:
            pat = self.pattern
            return frozenset(t for t in self.metadata if pat.fullmatch(t))
        return frozenset()

    @property
    def has_subscription(self) -> bool:
        return self.topics is not None or self.pattern is not None

    @property
    def awaits_pattern_metadata(self) -> bool:
        """A regex subscription needs metadata to know its topics (before joining)."""
        return self.pattern is not None and (self.metadata is None or self.pattern_pending)

    def subscribe(
        self, topics: frozenset[str] | None = None, pattern: re.Pattern[str] | None = None
    ) -> None:
        """Subscribe to ``topics`` or ``pattern`` (exactly one); misuse is LocalProtocolError."""
        if (topics is None) == (pattern is None):
            raise LocalProtocolError("SubscriptionChanged needs exactly one of topics or pattern")
        if topics is not None:
            if isinstance(topics, str | bytes):  # would read as its letters
                raise LocalProtocolError(f"topics must be a set of names, not {topics!r}")
            if any(not isinstance(t, str) or not t for t in topics):
                raise LocalProtocolError("topic names must be non-empty strings")
            self.topics = frozenset(topics)
            self.pattern = None
            self.pattern_pending = False
        else:
            self.topics = None
            self.pattern = pattern
            self.pattern_pending = True

    def unsubscribe(self) -> None:
        self.topics = None
        self.pattern = None

    def wanted(
        self, owned: Iterable[str], group_topics: Iterable[str] = ()
    ) -> frozenset[str] | None:
        """The topics to ask metadata for: those subscribed, those of ``owned`` partitions and
        (a leader) the group's; None: all topics (a regex subscription)."""
        if self.pattern is not None:
            return None
        topics = set(self.topics or ())
        topics.update(owned)
        topics.update(group_topics)
        return frozenset(topics)

    def update(
        self,
        partitions_per_topic: Mapping[str, int],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> dict[str, int]:
        """A metadata answer replaces the view (bad data is LocalProtocolError); the topic ids
        it names are added to those known (an id is never another topic's)."""
        try:
            self.metadata = {str(t): int(n) for t, n in partitions_per_topic.items()}
            self.topic_ids.update({uuid.UUID(str(i)): str(t) for t, i in (topic_ids or {}).items()})
        except (TypeError, ValueError) as exc:
            raise LocalProtocolError(f"bad metadata: {exc}") from None
        self.pattern_pending = False
        return self.metadata

    def track_missing(
        self, now: float, asked: frozenset[str] | None, *, unresolved: bool = False
    ) -> None:
        """Topics we ``asked`` metadata for that do not exist: refresh with backoff until they do.

        A subscribed topic created later must be assigned within seconds, not after the next
        periodic refresh (``metadata_max_age_ms``, 5 minutes): Java's metadata answers a topic
        it does not know with a retriable error and asks again after ``retry.backoff.ms``,
        backing off exponentially to ``retry.backoff.max.ms`` (KIP-580). The leader asks for
        every member's topics, so it notices too and rejoins when the topic appears (1b). Each
        missing subscribed topic is warned about once, until it appears. ``unresolved``: an
        assignment names topic ids the metadata does not know yet (KIP-848): refreshed alike.
        """
        known = self.metadata or {}
        missing = frozenset() if asked is None else frozenset(t for t in asked if t not in known)
        self.missing = missing
        subscribed = missing & (self.topics or frozenset())
        for topic in sorted(subscribed - self._warned):
            log.warning(
                "group %s: subscribed topic %r does not exist (or is not visible to this "
                "client); none of its partitions can be assigned. Checking again until it "
                "appears.",
                self.group_id,
                topic,
            )
        self._warned = subscribed
        if not missing and not unresolved:
            self.refresh_at = None
            self._backoff = 0.0
            return
        delay = min(self._backoff or self._first, self._cap)
        self.refresh_at = now + delay
        self._backoff = min(delay * 2, self._cap)

    def refresh_due(self, now: float) -> bool:
        """Time to ask for metadata again (once: the answer sets the next time)."""
        if self.refresh_at is None or now < self.refresh_at:
            return False
        self.refresh_at = None
        return True
