"""Java's sampled statistics, for metrics that keep Java's semantics (sans-I/O).

Kafka's clients measure through *sensors*: each recorded value lands in the current of a few
time *samples*, and an average, a maximum or a rate combines the samples that are still recent.
:class:`Sensor` keeps the same samples with the same rules, so ``records-lag-max`` or
``fetch-rate`` read as a Java consumer's would at the same moment:

- ``SAMPLES`` samples of ``WINDOW_S`` seconds each (Java's defaults: ``metrics.num.samples=2``,
  ``metrics.sample.window.ms=30000``), in a ring of ``SAMPLES + 1``; a value recorded when the
  current sample is a window old starts the next one;
- a sample with no value recorded for ``SAMPLES * WINDOW_S`` seconds no longer counts (Java's
  ``purgeObsoleteSamples``): an average, maximum or minimum of nothing recent is ``nan``, as in
  Java, and a rate of nothing recent is 0;
- a rate divides the recent sum (or count) by the time since the oldest recent sample started,
  counting at least ``SAMPLES - 1`` whole windows (Java's ``Rate.windowSize``): 100 records in
  the first second of a consumer's life read as 100 / 31 s, not 100 / 1 s;
- totals and counts are cumulative (Java's ``CumulativeSum`` / ``CumulativeCount``).

Nothing here reads a clock: every call takes ``now`` (monotonic seconds).
"""

from __future__ import annotations

import math

__all__ = ["SAMPLES", "WINDOW_S", "Sensor"]

#: Java's ``metrics.sample.window.ms`` (30 s), in seconds.
WINDOW_S = 30.0
#: Java's ``metrics.num.samples``.
SAMPLES = 2


class _Sample:
    __slots__ = ("count", "high", "low", "start", "sum", "touched")

    def __init__(self, now: float) -> None:
        self.reset(now)

    def reset(self, now: float) -> None:
        self.start = now
        self.touched = now
        self.count = 0
        self.sum = 0.0
        self.high = -math.inf
        self.low = math.inf


class Sensor:
    """Values recorded over time: windowed average, maximum, minimum and rates as Java's
    ``Avg``, ``Max``, ``Min``, ``Rate`` (of the sum) and ``Rate(WindowedCount)`` (of the count)
    measure them, plus the cumulative ``total`` and ``count`` and the ``last`` value."""

    __slots__ = ("_current", "_n", "_samples", "_window", "count", "last", "total")

    def __init__(self, window_s: float = WINDOW_S, samples: int = SAMPLES) -> None:
        if window_s <= 0 or samples < 1:
            raise ValueError("a sensor needs a positive window and at least one sample")
        self._window = window_s
        self._n = samples
        self._samples: list[_Sample] = []
        self._current = 0
        self.total = 0.0
        self.count = 0
        self.last = math.nan

    def record(self, value: float, now: float) -> None:
        """Record one value at ``now``."""
        self.record_many(1, value, value, now, value)
        self.last = value

    def record_many(
        self, count: int, total: float, high: float, now: float, low: float = math.inf
    ) -> None:
        """Record ``count`` values at once, summing to ``total``, the largest ``high`` (and the
        smallest ``low``, if it was kept): what ``count`` calls of :meth:`record` made within
        one sample would leave (a driver may gather values cheaply and hand them over now and
        then)."""
        if count <= 0:
            return
        samples = self._samples
        if not samples:
            sample = _Sample(now)
            samples.append(sample)
        else:
            sample = samples[self._current]
            if now - sample.start >= self._window:
                sample = self._advance(now)
        sample.count += count
        sample.sum += total
        if high > sample.high:
            sample.high = high
        if low < sample.low:
            sample.low = low
        sample.touched = now
        self.total += total
        self.count += count

    def _advance(self, now: float) -> _Sample:
        # One sample more than counted: the oldest may still overlap the measured span.
        self._current = (self._current + 1) % (self._n + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now)
        return sample

    def _recent(self, now: float) -> list[_Sample]:
        """The samples that still count at ``now`` (older ones are reset, as Java purges)."""
        expiry = self._n * self._window
        for sample in self._samples:
            if now - sample.touched >= expiry:
                sample.reset(now)
        return self._samples

    # -- measures -----------------------------------------------------------------------------

    def avg(self, now: float) -> float:
        """Average of the recent values (``nan`` if none)."""
        count = 0
        total = 0.0
        for s in self._recent(now):
            count += s.count
            total += s.sum
        return total / count if count else math.nan

    def max(self, now: float) -> float:
        """Largest recent value (``nan`` if none)."""
        recent = [s.high for s in self._recent(now) if s.count]
        return max(recent) if recent else math.nan

    def min(self, now: float) -> float:
        """Smallest recent value (``nan`` if none)."""
        recent = [s.low for s in self._recent(now) if s.count]
        return min(recent) if recent else math.nan

    def rate(self, now: float) -> float:
        """Recent sum per second (Java's ``Rate()`` over a ``WindowedSum``)."""
        total = sum(s.sum for s in self._recent(now))
        return total / self._elapsed(now)

    def count_rate(self, now: float) -> float:
        """Recent values per second (Java's ``Rate(WindowedCount)``)."""
        count = sum(s.count for s in self._recent(now))
        return count / self._elapsed(now)

    def _elapsed(self, now: float) -> float:
        """Java's ``Rate.windowSize``: since the oldest recent sample began, and at least
        one window fewer than the samples."""
        samples = self._samples
        if not samples:
            samples.append(_Sample(now))
        elapsed = now - min(s.start for s in samples)
        whole = int(elapsed // self._window)
        if whole < self._n - 1:
            elapsed += (self._n - 1 - whole) * self._window
        return elapsed
