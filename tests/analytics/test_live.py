"""The live audit: Structured Streaming over a telemetry topic on the embedded broker.

Recordings (the planted set, a messy synthetic set, the two real Tansu recordings) are replayed
into a topic in two bursts, in time order, as members would write them; the live job must then
give the batch audit's answers on the same events: its own intervals (Spark state) and alerts,
and the nine datasets it writes. Then an injected double ownership is caught within two
micro-batches, and a hand-off whose release arrives late is not reported.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def rows_read(live: Any) -> int:
    """Records the ownership query has read so far."""
    return sum(int(p["numInputRows"]) for p in live.queries[1].recentProgress)


@dataclass
class Replay:
    """A running live audit fed by hand: ``send`` lines, ``settle`` until they are judged."""

    live: Any
    sink: KafkaTelemetry
    sent: int = 0

    def send(self, lines: list[bytes]) -> None:
        for line in lines:
            self.sink.forward(line)
        self.sent += len(lines)
        assert self.live.wait(lambda _: self.sink.written == self.sent, 60), "not delivered"

    def settle(self) -> int:
        """Wait until the ownership query has read every line sent; the last batch id."""
        assert self.live.wait(lambda live: rows_read(live) >= self.sent, 180), (
            rows_read(self.live), self.sent)
        return int(self.live.batches[-1].batch_id)


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
    far enough later that the watermark passes everything before it."""
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
    replay.settle()
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
    # The last episodes are confirmed once the watermark passes them (the sentinel's batch).
    assert replayed.live.wait(lambda live: len(live.alerts) >= len(expected), 120)
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
        pd.testing.assert_frame_equal(ours, theirs, check_exact=True, obj=name)


def _event(group: str, member: str, type_: str, ts: float, seq: int, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "type": type_, "ts": ts, "seq": seq, "group": group,
                       "member": member, "client": "aiogroup", **fields}).encode()


def _parts(group: str, member: str, type_: str, t: float, seq: int, gen: int,
           partitions: dict[str, list[int]]) -> bytes:
    return _event(group, member, type_, t + 0.01, seq, generation_id=gen,
                  protocol="cooperative-sticky", rebalance_protocol="cooperative",
                  partitions=partitions, started=t, ended=t + 0.01)


def _open_in(live: Any, group: str, member: str) -> int | None:
    """The first batch whose status shows ``member`` owning something in ``group``."""
    for b in live.batches:
        status = b.status.get(group)
        if status and any(o[2] == member for o in status["open"]):
            return int(b.batch_id)
    return None


def test_an_injected_double_ownership_is_caught_within_two_micro_batches(
    replayed: Replay,
) -> None:
    live = replayed.live
    t0 = max(b.status[g]["watermark"] for b in live.batches for g in b.status) + SKEW_S + 60
    # A owns orders-0; B is then told it owns it too, and A's next event (a commit, its clock
    # far enough on) moves the watermark past the overlap in the same burst.
    replayed.send([_parts("inject", "A", "partitions_assigned", t0, 0, 1, {"orders": [0]}),
                   _event("inject", "A", "rebalance_completed", t0 + 0.02, 1, latency_s=0.1)])
    replayed.settle()
    assert not [a for a in live.alerts if a["group"] == "inject"]
    replayed.send([_parts("inject", "B", "partitions_assigned", t0 + 1, 0, 2, {"orders": [0]}),
                   _event("inject", "A", "offsets_committed", t0 + 1 + SKEW_S + 1, 2,
                          generation_id=1, offsets={"orders": {"0": 5}})])
    replayed.settle()
    assert live.wait(lambda lv: any(a["group"] == "inject" for a in lv.alerts), 60)
    seen = _open_in(live, "inject", "B")
    alert = next(a for a in live.alerts if a["group"] == "inject")
    assert seen is not None
    assert alert["batch_id"] - seen <= 1, (seen, alert["batch_id"])  # this batch or the next
    assert alert["members"] == ["A", "B"] and alert["ongoing"]
    assert alert["start"] == pytest.approx(t0 + 1)


def test_a_release_that_arrives_late_is_not_an_overlap(replayed: Replay) -> None:
    live = replayed.live
    t0 = max(b.status[g]["watermark"] for b in live.batches for g in b.status) + SKEW_S + 60
    replayed.send([_parts("handoff", "A", "partitions_assigned", t0, 0, 1, {"orders": [0]})])
    replayed.settle()
    # B's assignment arrives before A's revocation, which ended just before B started
    replayed.send([_parts("handoff", "B", "partitions_assigned", t0 + 1, 0, 2, {"orders": [0]})])
    first = replayed.settle()
    replayed.send([_parts("handoff", "A", "partitions_revoked", t0 + 0.98, 1, 2,
                          {"orders": [0]})])
    replayed.settle()
    # then time moves on past the watermark, in the batch after next
    replayed.send([_event("handoff", "B", "offsets_committed", t0 + 1 + SKEW_S + 1, 1,
                          generation_id=2, offsets={"orders": {"0": 5}})])
    last = replayed.settle()
    assert live.wait(lambda lv: lv.batches[-1].batch_id > last, 60)  # a batch past the watermark
    assert first < last
    assert not [a for a in live.alerts if a["group"] == "handoff"]
    status = live.status["handoff"]
    assert [o[2] for o in status["open"]] == ["B"]
