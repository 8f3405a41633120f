"""The live audit: Structured Streaming over a telemetry topic on the embedded broker.

Recordings (the planted set, a messy synthetic set, the two real Tansu recordings) are replayed
into a topic in two bursts, in time order, as members would write them, then one event of
another group later by more than the skew, as a live stream always brings (members go on
committing): the live job must then give the batch audit's answers on the same events: its own
intervals (Spark state) and alerts, and the nine datasets it writes. Then an injected double
ownership is caught within two micro-batches, and a hand-off whose release arrives late is not
reported.

Nothing here sleeps: every wait is for a state of the query (records read, the watermark it has
judged with), under a deadline long enough for a loaded machine, and fails naming what it was
waiting for; a query that died fails the wait with its exception.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pytest

from aiogroup.observability.telemetry_kafka import KafkaTelemetry
from aiogroup.testing import ThreadedBroker
from tests.analytics.messy import messy
from tests.analytics.synth import bad_input, planted
from tests.analytics.test_cluster import DATASETS, _read

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

DATA = Path(__file__).parent.parent / "data"
TOPIC = "telemetry"
SKEW_S = 10.0
TOLERANCE_S = 0.05


#: How long a wait may take before it is a failure rather than a slow machine. The micro-batch
#: of the first burst (half the recordings) took 13 s on 2 cores at load 4, the second burst's
#: 2.4 s, one without data 0.7 s; the sink delivers a burst in a fraction of a second.
DEADLINE_S = 180.0


def read(live: Any) -> int:
    """Records the ownership query has read, as of its last finished micro-batch (the topic is
    read from its start and nothing is deleted: the sum of its next offsets)."""
    return sum(live.offsets(1).values())


@dataclass
class Replay:
    """A running live audit fed by hand: ``send`` lines, ``settle`` until they are read,
    ``judged`` until the query has judged with a watermark."""

    live: Any
    sink: KafkaTelemetry
    sent: int = 0

    def send(self, lines: list[bytes]) -> None:
        for line in lines:
            self.sink.forward(line)
        self.sent += len(lines)
        sink = self.sink
        assert self.live.wait(lambda _: sink.written + sink.dropped >= self.sent, DEADLINE_S), (
            f"the sink delivered {sink.written} of {self.sent} records in {DEADLINE_S:g} s")
        assert (sink.written, sink.dropped) == (self.sent, 0), "the sink dropped records"

    def settle(self) -> int:
        """Wait until the ownership query has read every line sent; its last batch id."""
        assert self.live.wait(lambda live: read(live) >= self.sent, DEADLINE_S), (
            f"the ownership query read {read(self.live)} of {self.sent} records in "
            f"{DEADLINE_S:g} s")
        return int(self.live.batches[-1].batch_id)

    def judged(self, watermark: float) -> None:
        """Wait until the ownership query has read every line sent and finished a micro-batch
        at ``watermark`` or later (event time, seconds): every episode it confirms has been
        alerted, by the groups' events or their event-time timeouts."""
        self.settle()
        live = self.live
        # event times are kept in microseconds and the watermark in milliseconds, each cut
        assert live.wait(lambda lv: (lv.watermark() or 0.0) >= watermark - 0.002, DEADLINE_S), (
            f"the ownership query's watermark is {live.watermark()}, not {watermark} after "
            f"{DEADLINE_S:g} s")


def _ts(line: bytes) -> float:
    try:
        ts = json.loads(line).get("ts")
    except (ValueError, AttributeError):
        return -math.inf  # bad lines go first
    return float(ts) if isinstance(ts, int | float) else -math.inf


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("live-events")
    planted(root / "planted")
    bad_input(root / "planted" / "bad")
    messy(root / "messy", 5)
    for name in ("tansu_cooperative", "tansu_eager"):
        shutil.copytree(DATA / name, root / name)
    return root


@pytest.fixture(scope="module")
def replay(spark: Any, events: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        Replay]:
    from aiogroup.tools.audit.live import follow

    out = tmp_path_factory.mktemp("live-out")
    with ThreadedBroker(topics={TOPIC: 3}) as broker:
        sink = KafkaTelemetry(broker.bootstrap, TOPIC, "replay", retry_backoff_s=0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            live = follow(spark, broker.bootstrap, TOPIC, out, tolerance_s=TOLERANCE_S,
                          skew_s=SKEW_S, trigger_s=0.2)
        try:
            yield Replay(live, sink)
        finally:
            live.stop()
            sink.close()


@pytest.fixture(scope="module")
def replayed(replay: Replay, events: Path) -> Replay:
    """Every recording sent in two bursts split in time, and a last event of another group
    far enough later that the watermark passes everything before it; returned once the query
    has judged with that watermark (the micro-batch without data that Spark runs when the
    watermark moves: the groups' event-time timeouts)."""
    lines = sorted((line for p in sorted(events.rglob("*.jsonl"))
                    for line in p.read_bytes().splitlines(keepends=True)), key=_ts)
    real = [_ts(x) for x in lines if _ts(x) > 1e9]
    middle = sorted(real)[len(real) // 2]
    last = max(real)
    sentinel = json.dumps({"v": 1, "type": "closed", "ts": last + SKEW_S + 5, "seq": 0,
                           "group": "zz-sentinel", "member": "sentinel"}) + "\n"
    (events / "sentinel.jsonl").write_text(sentinel)
    replay.send([x for x in lines if _ts(x) < middle])
    replay.settle()
    replay.send([x for x in lines if _ts(x) >= middle] + [sentinel.encode()])
    replay.judged(last + 5)
    return replay


@pytest.fixture(scope="module")
def batch(spark: Any, events: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The batch audit of the same events, written as ``analyze`` writes it."""
    from aiogroup.tools.audit.audit import run_audit

    out = tmp_path_factory.mktemp("batch-out")
    files = sorted(str(p) for p in events.rglob("*.jsonl"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        result = run_audit(spark, files, tolerance_s=TOLERANCE_S)
        for name, df in result.datasets.items():
            df.write.parquet(str(out / name))
    return out


def test_live_alerts_are_the_batch_audits_violations(replayed: Replay, batch: Path) -> None:
    overlaps = _read(batch / "overlaps")
    violations = overlaps[overlaps["violation"]]
    expected = sorted(zip(violations["group"], violations["topic"], violations["partition"],
                          violations["start"], strict=True))
    assert len(expected) >= 3  # planted and messy overlaps, zombies included
    # The watermark has passed every episode (``replayed``): each one is alerted by now, the
    # last ones by their groups' event-time timeouts, some of them between two intervals that
    # both closed (a messy zombie, s5-g2-coop).
    got = sorted((a["group"], a["topic"], a["partition"], a["start"])
                 for a in replayed.live.alerts)
    assert got == expected, (sorted(set(got) - set(expected)), sorted(set(expected) - set(got)))
    # a 20 ms hand-off skew (planted z-1, E to F) is an overlap, not an alert
    assert any(not v for v in overlaps["violation"])


def test_live_intervals_are_the_batch_audits(replayed: Replay, batch: Path) -> None:
    live = replayed.live
    rows = [(i["group"], i["topic"], i["partition"], i["member"], i["generation_id"],
             i["start"], i["end"], i["end_kind"], i["end_gen"]) for i in live.intervals]
    for group, status in live.status.items():  # the open ones, ending at their member's last
        for topic, partition, member, start, gen, _, member_end in status["open"]:
            rows.append((group, topic, partition, member, gen, start, max(member_end, start),
                         "open", None))
    iv = _read(batch / "intervals")

    def clean(v: Any) -> Any:
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v

    expected = [tuple(clean(v) for v in r) for r in iv[[
        "group", "topic", "partition", "member", "generation_id", "start", "end", "end_kind",
        "end_gen"]].itertuples(index=False, name=None)]
    ours = [tuple(clean(v) for v in r) for r in rows]
    key = lambda r: tuple((v is None, v if v is not None else 0) for v in r)  # noqa: E731
    assert sorted(ours, key=key) == sorted(expected, key=key)
    assert len(ours) > 100


def test_the_live_datasets_are_the_batch_audits(spark: Any, replayed: Replay, batch: Path) -> None:
    from aiogroup.tools.audit.live import refresh

    out = replayed.live.out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        data = refresh(spark, out, TOPIC, tolerance_s=TOLERANCE_S)
    assert data.violations == len(replayed.live.alerts)
    for name in DATASETS:
        ours, theirs = _read(out / name), _read(batch / name)
        if name == "input_quality":  # lines per kind of problem; sources are files vs the topic
            ours, theirs = (d.groupby("status")["lines"].sum().to_dict() for d in (ours, theirs))
            assert ours == theirs
            assert set(ours) > {"ok"}
            continue
        assert list(ours.dtypes) == list(theirs.dtypes), name
        if name == "latency":
            # a mean is a sum of doubles in the order Spark reads the events (files here, the
            # topic's Parquet there): its last bit may differ (1.2053175 and
            # 1.2053174999999998); everything else, and the mean to 12 digits, is the same
            pd.testing.assert_series_equal(ours.pop("mean_s"), theirs.pop("mean_s"),
                                           check_exact=False, rtol=1e-12, atol=0.0)
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True, obj=name)


def _event(group: str, member: str, type_: str, ts: float, seq: int, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "type": type_, "ts": ts, "seq": seq, "group": group,
                       "member": member, "client": "aiogroup", **fields}).encode()


def _parts(group: str, member: str, type_: str, t: float, seq: int, gen: int,
           partitions: dict[str, list[int]]) -> bytes:
    return _event(group, member, type_, t + 0.01, seq, generation_id=gen,
                  protocol="cooperative-sticky", rebalance_protocol="cooperative",
                  partitions=partitions, started=t, ended=t + 0.01)


def _later(live: Any) -> float:
    """An event time later than anything sent so far by more than the skew."""
    return float(max(b.status[g]["watermark"] for b in live.batches for g in b.status)
                 + SKEW_S + 60)


def _overlap_in(live: Any, group: str) -> int | None:
    """The first batch whose status shows two members owning one partition of ``group`` for
    longer than the tolerance (by the events so far, confirmed or not)."""
    for b in live.batches:
        opened: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for topic, partition, _, start, _, _, end in (b.status.get(group) or {}).get("open", []):
            opened.setdefault((topic, partition), []).append((start, end))
        for spans in opened.values():
            if len(spans) >= 2 and (min(e for _, e in spans) - max(s for s, _ in spans)
                                    > TOLERANCE_S):
                return int(b.batch_id)
    return None


def test_an_injected_double_ownership_is_caught_within_two_micro_batches(
    replayed: Replay,
) -> None:
    live = replayed.live
    t0 = _later(live)
    replayed.send([_parts("inject", "A", "partitions_assigned", t0, 0, 1, {"orders": [0]}),
                   _event("inject", "A", "rebalance_completed", t0 + 0.02, 1, latency_s=0.1)])
    replayed.settle()
    assert not [a for a in live.alerts if a["group"] == "inject"]
    # B is told it owns orders-0 too, and both go on working: their commits, their clocks far
    # enough on, move the watermark past the start of the overlap in the same burst.
    on = t0 + 1 + SKEW_S + 1
    replayed.send([_parts("inject", "B", "partitions_assigned", t0 + 1, 0, 2, {"orders": [0]}),
                   _event("inject", "B", "offsets_committed", on, 1, generation_id=2,
                          offsets={"orders": {"0": 7}}),
                   _event("inject", "A", "offsets_committed", on, 2, generation_id=1,
                          offsets={"orders": {"0": 5}})])
    replayed.judged(on - SKEW_S)
    alerts = [a for a in live.alerts if a["group"] == "inject"]
    seen = _overlap_in(live, "inject")
    assert seen is not None and len(alerts) == 1, (seen, alerts)
    alert = alerts[0]
    # the batch whose events show the overlap, or the next (the watermark those events moved)
    assert seen <= alert["batch_id"] <= seen + 1, (seen, alert["batch_id"])
    assert alert["members"] == ["A", "B"] and alert["ongoing"]
    assert alert["start"] == pytest.approx(t0 + 1)


def test_a_release_that_arrives_late_is_not_an_overlap(replayed: Replay) -> None:
    live = replayed.live
    t0 = _later(live)
    replayed.send([_parts("handoff", "A", "partitions_assigned", t0, 0, 1, {"orders": [0]})])
    replayed.settle()
    # B's assignment and a later event of A's (a commit) arrive before A's revocation, which
    # ended just before B started: by what has arrived, A and B both own orders-0
    replayed.send([_parts("handoff", "B", "partitions_assigned", t0 + 1, 0, 2, {"orders": [0]}),
                   _event("handoff", "A", "offsets_committed", t0 + 1.5, 2, generation_id=1,
                          offsets={"orders": {"0": 5}}),
                   _event("handoff", "B", "offsets_committed", t0 + 1.6, 1, generation_id=2,
                          offsets={"orders": {"0": 5}})])
    replayed.judged(t0 + 1.6 - SKEW_S)
    assert _overlap_in(live, "handoff") is not None  # the overlap is there, unconfirmed
    assert not [a for a in live.alerts if a["group"] == "handoff"]
    # A's revocation, late but within the skew, then time moves on past the watermark
    replayed.send([_parts("handoff", "A", "partitions_revoked", t0 + 0.98, 1, 2,
                          {"orders": [0]})])
    replayed.settle()
    on = t0 + 1 + SKEW_S + 1
    replayed.send([_event("handoff", "B", "offsets_committed", on, 2, generation_id=2,
                          offsets={"orders": {"0": 9}})])
    replayed.judged(on - SKEW_S)
    assert not [a for a in live.alerts if a["group"] == "handoff"]
    assert [o[2] for o in live.status["handoff"]["open"]] == ["B"]
    assert [(i["member"], i["start"], i["end"]) for i in live.intervals
            if i["group"] == "handoff"] == [("A", t0, pytest.approx(t0 + 0.99))]


class _Ended:
    """A query that is no longer active, as Spark's StreamingQuery shows one."""

    def __init__(self, error: str | None) -> None:
        self.name = "aiogroup-live-ownership"
        self.isActive = False
        self.error = error

    def exception(self) -> str | None:
        return self.error


def test_a_query_that_died_fails_the_wait_with_its_exception(tmp_path: Path) -> None:
    from aiogroup.tools.audit.live import Follow
    from aiogroup.tools.audit.session import AnalyticsError

    died = Follow(cast(Any, None), tmp_path, TOLERANCE_S,
                  queries=[_Ended("[PYTHON_EXCEPTION] KeyError: 'started'")])
    with pytest.raises(AnalyticsError, match=r"aiogroup-live-ownership stopped: .*KeyError"):
        died.wait(lambda _: False, DEADLINE_S)
    # one stopped on purpose ends the wait at once, with what holds
    stopped = Follow(cast(Any, None), tmp_path, TOLERANCE_S, queries=[_Ended(None)])
    assert stopped.wait(lambda _: False, DEADLINE_S) is False
    assert stopped.wait(lambda _: True, DEADLINE_S) is True


class _Progress:
    """A query as far as its last finished micro-batch: its id and the offsets it read to."""

    def __init__(self, batch_id: int, ends: dict[str, int]) -> None:
        self.lastProgress = {"batchId": batch_id, "sources": [{"endOffset": {TOPIC: ends}}]}


def test_stopping_waits_until_what_was_judged_is_stored(tmp_path: Path) -> None:
    from aiogroup.tools.audit.live import Follow, LiveBatch

    def follow(events: _Progress, ownership: _Progress, seen: int) -> Any:
        live = Follow(cast(Any, None), tmp_path, TOLERANCE_S, queries=[events, ownership])
        live.batches.append(LiveBatch(seen, [], [], {}, 0.0))
        return live

    assert follow(_Progress(7, {"0": 10, "1": 4}), _Progress(4, {"0": 10, "1": 4}), 4).caught_up()
    # an alert of batch 5 is seen while batch 5 runs: its events are not stored yet
    assert not follow(_Progress(7, {"0": 10, "1": 4}), _Progress(4, {"0": 10, "1": 4}),
                      5).caught_up()
    # the events query is behind on one partition
    assert not follow(_Progress(7, {"0": 10, "1": 3}), _Progress(4, {"0": 10, "1": 4}),
                      4).caught_up()
