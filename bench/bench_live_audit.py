"""How fast the live audit keeps up, and how soon it alerts: ``python bench/bench_live_audit.py``.

Starts the embedded broker and ``follow()`` (the job ``analyze --follow`` runs) on local Spark
(``local[2]``), then feeds the telemetry topic a synthetic stream as fast as one
:class:`~aiogroup.observability.telemetry_kafka.KafkaTelemetry` sends it (it is kept full
without dropping anything): ``--groups`` groups of four members, each committing and now and then
moving a partition to another member (a revocation, then the assignment), events stamped with the
wall clock (``--rate`` caps the events per second). Every ``--inject-every`` seconds a double
ownership is injected into a group of its own (two members told they own one partition, then
both keep committing every 0.5 s, as live members do).

Prints, from the ownership query's progress (``StreamingQuery.recentProgress``): its
micro-batches, the rows each read and ``processedRowsPerSecond``; the backlog (records on the
topic not yet read) sampled every second; and for each injected overlap the end-to-end delay
from the event time of the second assignment (the callback's start: when the overlap began) to
the alert (the micro-batch's end on the driver, where the alert line is printed). With the
trigger interval, the watermark delay (``--skew``), and ``/proc/loadavg`` before and after.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import threading
import time
import warnings
from typing import Any

from aiogroup.observability.telemetry_kafka import KafkaTelemetry
from aiogroup.testing import ThreadedBroker
from aiogroup.tools.audit.live import follow
from aiogroup.tools.audit.live_cli import session_for_follow

TOPIC = "telemetry"


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


class Stream:
    """The synthetic members: valid, overlap-free histories of ``groups`` groups."""

    def __init__(self, groups: int, seed: int = 7) -> None:
        self.rng = random.Random(seed)
        self.seq: dict[tuple[str, str], int] = {}
        # per group: partition -> owning member
        self.owner = {f"g{g:03d}": {p: f"m{p % 4}" for p in range(8)} for g in range(groups)}
        self.gen = dict.fromkeys(self.owner, 1)

    def _event(self, group: str, member: str, type_: str, **fields: Any) -> bytes:
        key = (group, member)
        seq = self.seq.get(key, 0)
        self.seq[key] = seq + 1
        return json.dumps({"v": 1, "type": type_, "ts": time.time(), "seq": seq, "group": group,
                           "member": member, "client": "aiogroup", **fields}).encode()

    def _parts(self, group: str, member: str, type_: str, p: int, start: float,
               end: float) -> bytes:
        return self._event(group, member, type_, generation_id=self.gen[group],
                           protocol="cooperative-sticky", rebalance_protocol="cooperative",
                           partitions={"orders": [p]}, started=start, ended=end)

    def initial(self) -> list[bytes]:
        now = time.time()
        return [self._parts(g, f"m{m}", "partitions_assigned", p, now, now)
                for g, owners in self.owner.items() for m in range(4)
                for p in owners if owners[p] == f"m{m}"]

    def next(self) -> list[bytes]:
        group = self.rng.choice(list(self.owner))
        owners = self.owner[group]
        if self.rng.random() < 0.1:  # a partition moves: revoked, then assigned elsewhere
            p = self.rng.randrange(8)
            old = owners[p]
            new = f"m{(int(old[1]) + 1) % 4}"
            self.gen[group] += 1
            t = time.time()
            owners[p] = new
            return [self._parts(group, old, "partitions_revoked", p, t, t + 0.001),
                    self._parts(group, new, "partitions_assigned", p, t + 0.002, t + 0.003)]
        member = f"m{self.rng.randrange(4)}"
        return [self._event(group, member, "offsets_committed", generation_id=self.gen[group],
                            offsets={"orders": {str(p): 1 for p, m in owners.items()
                                                if m == member}})]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="how long to feed (default 60)")
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--trigger", type=float, default=1.0, help="micro-batch interval (s)")
    ap.add_argument("--skew", type=float, default=2.0, help="watermark delay (s)")
    ap.add_argument("--inject-every", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=0.0,
                    help="events/s to offer (default 0: as fast as the sink sends)")
    ap.add_argument("--out", default="/tmp/bench-live-audit")
    args = ap.parse_args(argv)
    import shutil

    shutil.rmtree(args.out, ignore_errors=True)
    load_before = _load()
    spark = session_for_follow("local[2]", shuffle_partitions=2)
    stream = Stream(args.groups)
    with ThreadedBroker(topics={TOPIC: 3}) as broker:
        sink = KafkaTelemetry(broker.bootstrap, TOPIC, "bench", buffer_events=20_000,
                              batch_events=2000, retry_backoff_s=0.05)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            live = follow(spark, broker.bootstrap, TOPIC, args.out, skew_s=args.skew,
                          trigger_s=args.trigger)
        stop = threading.Event()
        sent = 0
        injected: dict[str, float] = {}  # group -> event time the overlap began

        def feed() -> None:
            nonlocal sent
            pending = stream.initial()
            next_inject = time.monotonic() + args.inject_every
            k = 0
            began = time.monotonic()
            next_commit = began
            while not stop.is_set():
                if sink.metrics()["buffer-records"] > 15_000 or (
                        args.rate and sent > args.rate * (time.monotonic() - began)):
                    stop.wait(0.001)  # the sink is full (nothing is dropped), or the rate
                    continue
                if injected and time.monotonic() >= next_commit:
                    # both owners of each injected partition go on committing, as live members
                    next_commit += 0.5
                    pending += [json.dumps({"v": 1, "group": g, "member": m, "client": "aiogroup",
                                            "type": "offsets_committed", "ts": time.time(),
                                            "seq": 1, "generation_id": gen,
                                            "offsets": {"orders": {"0": 1}}}).encode()
                                for g in injected for m, gen in (("A", 1), ("B", 2))]
                if time.monotonic() >= next_inject:
                    next_inject += args.inject_every
                    k += 1
                    group = f"inject-{k}"
                    t = time.time()
                    inj = {"v": 1, "group": group, "client": "aiogroup",
                           "protocol": "cooperative-sticky", "rebalance_protocol": "cooperative",
                           "partitions": {"orders": [0]}}
                    pending += [json.dumps({**inj, "type": "partitions_assigned", "ts": t,
                                            "seq": 0, "member": "A", "generation_id": 1,
                                            "started": t - 1.0, "ended": t - 0.999}).encode(),
                                json.dumps({**inj, "type": "partitions_assigned", "ts": t,
                                            "seq": 0, "member": "B", "generation_id": 2,
                                            "started": t, "ended": t + 0.001}).encode()]
                    injected[group] = t
                for line in pending:
                    sink.forward(line)
                sent += len(pending)
                pending = stream.next()

        feeder = threading.Thread(target=feed, daemon=True)
        t0 = time.monotonic()
        feeder.start()
        backlog: list[int] = []
        while time.monotonic() - t0 < args.seconds:
            live.wait(lambda _: False, 1.0)  # one sample a second (and a dead query raises)
            backlog.append(int(sink.written - sum(live.offsets(1).values())))
        stop.set()
        feeder.join()
        fed_s = time.monotonic() - t0
        written = sink.written
        # the stream stops: how long the job takes to read what is left
        drained = live.wait(lambda lv: sum(lv.offsets(1).values()) >= written, 300.0)
        drain_s = time.monotonic() - t0 - fed_s
        progress = [p for p in live.queries[1].recentProgress if p["numInputRows"] > 0]
        alerts = {a["group"]: a for a in live.alerts}
        at = {a["group"]: b.at for b in live.batches for a in b.alerts}
        delays = sorted(at[g] - t for g, t in injected.items() if g in at)
        live.stop()
        sink.close()
    spark.stop()

    rates = [p["processedRowsPerSecond"] for p in progress]
    rows = [p["numInputRows"] for p in progress]
    durations = [p["durationMs"]["triggerExecution"] / 1000 for p in progress]
    total_rows = sum(rows)
    busy = sum(durations)
    print(f"trigger {args.trigger:g} s, skew (watermark delay) {args.skew:g} s, "
          f"{args.groups} groups x 4 members, local[2], rate "
          f"{args.rate or 'as fast as the sink sends'}")
    print(f"fed {written} events in {fed_s:.1f} s ({written / fed_s:.0f}/s offered by the sink; "
          f"{sink.dropped} dropped)")
    print(f"ownership query: {len(progress)} micro-batches with data, {total_rows} rows in "
          f"{busy:.1f} s of batches = {total_rows / busy:.0f} rows/s sustained; "
          f"processedRowsPerSecond median {statistics.median(rates):.0f}, max {max(rates):.0f}; "
          f"rows per batch median {statistics.median(rows):.0f}, batch time median "
          f"{statistics.median(durations):.2f} s")
    print(f"backlog (records on the topic not yet read), sampled each second: median "
          f"{statistics.median(backlog):.0f}, max {max(backlog)}, last {backlog[-1]}; drained "
          f"{'in' if drained else 'NOT in'} {drain_s:.1f} s after the feed stopped")
    print(f"injected overlaps: {len(injected)}, alerted {len(delays)} "
          f"({sorted(set(alerts) & set(injected)) == sorted(injected)}); end-to-end delay "
          f"(event time of the overlap's start to its alert): "
          + (f"min {delays[0]:.1f} s, median {statistics.median(delays):.1f} s, max "
             f"{delays[-1]:.1f} s" if delays else "none"))
    print(f"load average before {load_before}, after {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
