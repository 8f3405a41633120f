"""What a :class:`~aiogroup.Consumer` measures: its part of the member's metrics registry, its
lag, and its part of the health signal.

The rules live in :mod:`aiogroup.observability` (sans-I/O): the sampled stats, lag and lead,
the health causes. This module feeds them from the consumer's core
(:class:`~aiogroup.consumer.state.ConsumerState`) at the few moments that cost nothing on the
path of a record: the application's calls are timed with a few additions each
(:class:`~aiogroup.observability.registry.PollTimes`), and everything else is handed to the
registry when the consumer yields to the event loop anyway (every 256 records handed out, or
before it waits for records), or when someone reads the metrics or the health.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiogroup.consumer.state import ConsumerState
from aiogroup.observability.health import Cause, Limits, poll_problem, stall_problems
from aiogroup.observability.lag import end_offset, lag, lead
from aiogroup.observability.registry import MetricsRegistry, PollTimes
from aiogroup.protocol.types import TopicPartition

__all__ = ["ConsumerMeters"]

Problems = list[tuple[Cause, float, str, frozenset[TopicPartition]]]


class ConsumerMeters:
    """The consumer's observations, on their way to ``registry``."""

    def __init__(self, state: ConsumerState, registry: MetricsRegistry) -> None:
        self.state = state
        self.registry = registry
        #: Timed at the start and end of every getmany/getone (the consumer calls it).
        self.polls = PollTimes()

    def flush(self, records: int, now: float) -> None:
        """Hand over ``records`` handed out since the last flush, the calls timed, and the
        lag and lead of each partition read since (recorded as Java records them when
        ``poll()`` returns a partition's records)."""
        registry = self.registry
        registry.record_consumed(records, now)
        registry.record_polls(self.polls, now)
        read_committed = self.state.config.read_committed
        for st in self.state.take_moved(now):
            position = st.position
            if position is None or st.reset is not None:
                continue
            end = end_offset(st.high_watermark, st.last_stable_offset, read_committed)
            registry.record_position(
                st.tp, position, lag(end, position), lead(st.log_start_offset, position), now
            )

    def current_lag(self, tp: TopicPartition) -> int | None:
        """Java's ``currentLag``: the end of ``tp`` as the last Fetch answer gave it (the last
        stable offset under read_committed) minus the position; None while either is unknown."""
        st = self.state.get(tp)
        if st is None:
            return None
        end = end_offset(st.high_watermark, st.last_stable_offset, self.state.config.read_committed)
        return lag(end, self.state.position(tp))

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """``partitions`` left the consumer: their per-partition metrics go."""
        self.registry.forget(partitions)

    def problems(self, limits: Limits, now: float, *, last_poll: float, polling: bool) -> Problems:
        """Stalled partitions, and an application that stopped asking for records."""
        return stall_problems(self.state.stalls(now), limits, now) + poll_problem(
            last_poll, polling, limits, now
        )
