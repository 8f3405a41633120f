"""Benchmark the ownership audit on a large synthetic eager run, against plain pandas.

    .venv/bin/python bench/bench_audit.py                  # 6,000 partitions x 200 members x 500
    .venv/bin/python bench/bench_audit.py --partitions 600 --generations 50   # a quick look
    .venv/bin/python bench/bench_audit.py --sizes 3,10,30 --json-out growth.json   # growth
    .venv/bin/python bench/bench_audit.py --table 3m.json 10m.json 30m.json   # sizes run apart

Generates one JSONL file per member (eager; the group grows from half of the members to all of
them and every generation shifts the assignment, so each partition gets a new ownership interval
per generation: partitions x generations intervals), times the Spark job on local[2] (read,
every result dataset written as Parquet), then
computes the same answers with pandas in the same run, asserts they are equal and prints the
ratio. The Spark session start (JVM) is timed separately.

With ``--repeat 2`` (the default) the job then runs again in the same JVM: the first run is what a
user's ``python -m aiogroup analyze`` costs (class loading and JIT compilation included), the
second shows the steady state. Each run's JVM CPU is split by thread role (Spark's task threads,
the JIT compilers, the garbage collector, and the rest: the driver's planning, code generation and
scheduling), because on 2 cores all of them compete with the two task threads of ``local[2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TOPIC = "t"
ROUND_S = 10.0
TARGET_S = 30.0
TARGET_INTERVALS = 3_000_000
PANDAS_MB_PER_M_INTERVALS = 1100.0
# stands in for a partition list in a record until the line is JSON (see generate)
_OWNED = "\u0000owned"
_OWNED_JSON = json.dumps(_OWNED)


def _children() -> list[str]:
    """Pids of this process's children (the local Spark JVM)."""
    return subprocess.run(
        ["pgrep", "-P", str(os.getpid())], capture_output=True, text=True, check=False
    ).stdout.split()


def _cpu_ticks(stat_path: str) -> int:
    """utime + stime from a /proc stat file (fields after the parenthesised name)."""
    with open(stat_path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def jvm_cpu_s() -> float:
    """CPU seconds used so far by this process's children (the local Spark JVM), from /proc.

    On a shared machine wall time depends on the neighbours; CPU time shows the work done.
    """
    try:
        total = sum(_cpu_ticks(f"/proc/{kid}/stat") for kid in _children())
        return total / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def host_probe_s() -> float:
    """CPU seconds of a fixed pure-Python loop (about 0.2 s on a quiet host). On a shared host
    the same work takes more CPU time when the neighbours slow the cores down (caches, memory
    bandwidth), and the JVM's CPU seconds rise with it: this says how fast the cores ran."""
    began = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i * i % 7
    return time.process_time() - began


# Thread names as Linux shows them (15 characters), by role.
THREAD_ROLES = (
    ("Executor task", "tasks"),
    ("C1 CompilerThre", "JIT"),
    ("C2 CompilerThre", "JIT"),
    ("GC Thread", "GC"),
    ("VM Thread", "GC"),
)


def jvm_threads() -> dict[str, tuple[str, float]]:
    """CPU seconds so far of the child JVM's live threads: thread id -> (role, seconds), for
    the threads whose name has a role (see THREAD_ROLES)."""
    threads: dict[str, tuple[str, float]] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for kid in _children():
        try:
            tids = os.listdir(f"/proc/{kid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{kid}/task/{tid}/comm") as f:
                    comm = f.read().strip()
                ticks = _cpu_ticks(f"/proc/{kid}/task/{tid}/stat")
            except OSError:  # the thread ended meanwhile
                continue
            role = next((r for prefix, r in THREAD_ROLES if comm.startswith(prefix)), None)
            if role is not None:
                threads[f"{kid}/{tid}"] = (role, ticks / tick)
    return threads


def role_cpu(before: dict[str, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per role since ``before`` (from :func:`jvm_threads`), over the threads alive
    now: a thread that ended in between is left out (its time stays in the JVM's total, under
    "driver and the rest"), never subtracted."""
    roles = {role: 0.0 for _, role in THREAD_ROLES}
    for tid, (role, seconds) in jvm_threads().items():
        roles[role] += seconds - before.get(tid, (role, 0.0))[1]
    return roles


def generate(out: Path, partitions: int, members: int, generations: int, seed: int = 7) -> int:
    """Write the events; returns the number of ownership intervals.

    Generation ``g`` has the first ``n`` members active and gives partition ``p`` to member
    ``(p + shift) % n``, so each member's partitions are one arithmetic progression: their JSON
    list is a slice of a table of partition numbers as text, joined once and written again when
    the member revokes them. The random draws, their order and the bytes written are those of a
    record-by-record ``json.dumps`` with a list per record (compared at 3M, 10M and 30M; the test
    is ``tests/analytics/test_bench_generate.py``), in a third of its time: 30M intervals in
    about 6 s on the build machine.
    """
    rng = np.random.default_rng(seed)
    seq = [0] * members
    names = [f"m{m:03d}" for m in range(members)]
    base = 1_700_000_000.0
    intervals = 0
    out.mkdir(parents=True, exist_ok=True)
    # written as they come (a 30M-interval set is about 413 MB of JSON)
    files = [open(out / f"{name}.0000.jsonl", "w", buffering=1 << 20) for name in names]  # noqa: SIM115
    numbers = [str(p) for p in range(partitions)]

    def emit(m: int, record: dict[str, Any], owned: str | None = None) -> None:
        """One line: ``record`` as compact JSON, with ``[owned]`` for its ``_OWNED``."""
        record.update(v=1, seq=seq[m], group="bench", member=names[m], client="aiogroup")
        seq[m] += 1
        line = json.dumps(record, separators=(",", ":"))
        if owned is not None:
            line = line.replace(_OWNED_JSON, f"[{owned}]", 1)
        files[m].write(line + "\n")

    # member -> its partitions as a JSON list's inside ("" for none)
    owned_prev = [""] * members
    for g in range(1, generations + 1):
        t = base + g * ROUND_S
        # the group grows from half its members to all of them, one member every few rounds
        size = min(members, members // 2 + (g - 1) * members // (2 * max(1, generations - 1)))
        active = max(1, size)
        shift = int(rng.integers(0, active))
        for m in range(members):  # eager: everyone revokes everything first (old generation)
            if owned_prev[m]:
                jitter = float(rng.uniform(0.0, 0.05))
                emit(
                    m,
                    {
                        "type": "partitions_revoked",
                        "ts": t + jitter,
                        "generation_id": g - 1,
                        "protocol": "range",
                        "rebalance_protocol": "eager",
                        "partitions": {TOPIC: _OWNED},
                        "started": t,
                        "ended": t + jitter,
                    },
                    owned_prev[m],
                )
        for m in range(active):
            first = (m - shift) % active  # partition p goes to member (p + shift) % active
            mine = numbers[first::active]
            start = t + 0.2 + float(rng.uniform(0.0, 0.1))
            end = start + float(rng.uniform(0.0, 0.02))
            emit(m, {"type": "joined", "ts": start - 0.01, "generation_id": g, "protocol": "range"})
            owned_prev[m] = ",".join(mine)
            emit(
                m,
                {
                    "type": "partitions_assigned",
                    "ts": end,
                    "generation_id": g,
                    "protocol": "range",
                    "rebalance_protocol": "eager",
                    "partitions": {TOPIC: _OWNED},
                    "started": start,
                    "ended": end,
                },
                owned_prev[m],
            )
            emit(
                m,
                {
                    "type": "rebalance_completed",
                    "ts": end,
                    "generation_id": g,
                    "latency_s": end - t,
                },
            )
            intervals += len(mine)
    end_t = base + (generations + 1) * ROUND_S
    for m in range(members):
        if owned_prev[m]:
            emit(
                m,
                {
                    "type": "partitions_revoked",
                    "ts": end_t,
                    "generation_id": generations,
                    "protocol": "range",
                    "rebalance_protocol": "eager",
                    "partitions": {TOPIC: _OWNED},
                    "started": end_t,
                    "ended": end_t,
                },
                owned_prev[m],
            )
        emit(m, {"type": "closed", "ts": end_t + 0.1, "generation_id": generations})
    for f in files:
        f.close()
    return intervals


def generate_skewed(out: Path, hot: int, members: int = 4, seed: int = 7) -> int:
    """One partition whose history is ``hot`` intervals long: ``members`` members hand it round,
    one owner per generation (a partition that changes owner millions of times). Returns the
    number of intervals (``hot``)."""
    rng = np.random.default_rng(seed)
    names = [f"h{m}" for m in range(members)]
    files = []
    out.mkdir(parents=True, exist_ok=True)
    files = [open(out / f"{name}.0000.jsonl", "w", buffering=1 << 20) for name in names]  # noqa: SIM115
    seq = [0] * members
    base = 1_700_000_000.0
    gaps = rng.uniform(0.0, 0.05, hot)

    def emit(m: int, record: dict[str, Any]) -> None:
        record.update(v=1, seq=seq[m], group="skew", member=names[m], client="aiogroup",
                      protocol="range", rebalance_protocol="eager")
        seq[m] += 1
        files[m].write(json.dumps(record, separators=(",", ":")) + "\n")

    for g in range(1, hot + 1):
        t = base + g
        owner, previous = g % members, (g - 1) % members
        if g > 1:
            emit(previous, {"type": "partitions_revoked", "ts": t, "generation_id": g - 1,
                            "partitions": {TOPIC: [0]}, "started": t, "ended": t})
        start = t + 0.02 + float(gaps[g - 1])
        emit(owner, {"type": "partitions_assigned", "ts": start, "generation_id": g,
                     "partitions": {TOPIC: [0]}, "started": start, "ended": start})
    end_t = base + hot + 1
    emit(hot % members, {"type": "partitions_revoked", "ts": end_t, "generation_id": hot,
                         "partitions": {TOPIC: [0]}, "started": end_t, "ended": end_t})
    for m in range(members):
        emit(m, {"type": "closed", "ts": end_t + 0.1, "generation_id": hot})
    for f in files:
        f.close()
    return hot


def pandas_answers(directory: Path) -> dict[str, Any]:
    """The same answers, computed with plain pandas (eager protocol, no redundant events)."""
    frames = [pd.read_json(p, lines=True) for p in sorted(directory.glob("*.jsonl"))]
    ev = pd.concat(frames, ignore_index=True)
    pe = ev[ev["type"].isin(["partitions_assigned", "partitions_revoked"])].copy()
    pe["partition"] = pe["partitions"].map(lambda d: d[TOPIC])
    pe = pe.explode("partition").dropna(subset=["partition"])
    pe["partition"] = pe["partition"].astype(np.int64)
    pe["is_assign"] = pe["type"] == "partitions_assigned"
    pe["t"] = np.where(pe["is_assign"], pe["started"], np.maximum(pe["ended"], pe["started"]))
    pe = pe.sort_values(["member", "partition", "ts", "seq", "t"], kind="stable")
    same = (pe["member"] == pe["member"].shift()) & (pe["partition"] == pe["partition"].shift())
    prev_assign = pe["is_assign"].shift().where(same, False).astype(bool)
    eff = pe[pe["is_assign"] != prev_assign]
    nxt_same = (eff["member"] == eff["member"].shift(-1)) & (
        eff["partition"] == eff["partition"].shift(-1)
    )
    end_t = eff["t"].shift(-1).where(nxt_same)
    iv = eff.assign(end=end_t)[eff["is_assign"]]
    member_end = (
        ev.assign(e=np.fmax(ev["ts"], ev["ended"].fillna(ev["ts"]))).groupby("member")["e"].max()
    )
    iv = iv.assign(end=iv["end"].fillna(iv["member"].map(member_end)))
    iv = iv[["member", "partition", "generation_id", "t", "end"]].rename(columns={"t": "start"})
    iv["end"] = np.maximum(iv["end"], iv["start"])

    # sweep over boundaries: owner counts per segment
    s = pd.DataFrame(
        {"partition": iv["partition"], "t": iv["start"], "delta": 1, "gen": iv["generation_id"]}
    )
    e = pd.DataFrame({"partition": iv["partition"], "t": iv["end"], "delta": -1, "gen": np.nan})
    sw = pd.concat([s, e], ignore_index=True).sort_values(
        ["partition", "t", "delta"], kind="stable"
    )
    sw["owners"] = sw.groupby("partition")["delta"].cumsum()
    sw["next_t"] = sw.groupby("partition")["t"].shift(-1)
    sw["next_gen"] = sw.groupby("partition")["gen"].shift(-1)
    seg = sw[sw["next_t"].notna() & (sw["next_t"] > sw["t"])]
    gaps = seg[seg["owners"] == 0]
    unowned = gaps.assign(len=gaps["next_t"] - gaps["t"]).groupby("next_gen")["len"].sum()
    over = seg["owners"] >= 2
    episodes = int((over & ~over.shift(fill_value=False)).sum())

    # moves: owner changes between consecutive intervals (eager: charged to the new assignment)
    iv = iv.sort_values(["partition", "start", "end", "member"], kind="stable")
    prev = iv.groupby("partition")["member"].shift()
    moved = iv[prev.notna() & (prev != iv["member"])].groupby("generation_id").size()

    # minimum moves at each membership change
    ge = ev[ev["generation_id"].notna()]
    span = ge.groupby("member")["generation_id"].agg(["min", "max"])
    gens = sorted(ge["generation_id"].unique())
    sets = pd.Series({g: tuple(sorted(span.index[(span["min"] <= g) & (span["max"] >= g)]))
                      for g in gens})
    starts = [g for i, g in enumerate(sets.index) if i == 0 or sets.iloc[i] != sets.iloc[i - 1]]
    prev_owner = iv.groupby("partition")["member"].shift()
    plus = iv.groupby(["member", "generation_id"]).size()
    minus = iv.assign(p=prev_owner).dropna(subset=["p"]).groupby(["p", "generation_id"]).size()
    deltas = plus.sub(minus.rename_axis(["member", "generation_id"]), fill_value=0)
    table = deltas.unstack(fill_value=0).reindex(columns=sorted(sets.index), fill_value=0)
    held_before = table.cumsum(axis=1).shift(1, axis=1, fill_value=0)
    firsts = iv.groupby("partition")["generation_id"].min().value_counts().sort_index().cumsum()
    minimum = {}
    for g in starts:
        mem = list(sets.loc[g])
        held = held_before[g].reindex(mem, fill_value=0).to_numpy()
        n = int(firsts[firsts.index <= g].iloc[-1])
        m = len(mem)
        quota = np.full(m, n // m)
        quota[: n - (n // m) * m] += 1
        held_sorted = np.sort(held)[::-1]
        total_before = int(held_before[g].sum())
        minimum[int(g)] = (
            total_before - int(held.sum()) + int(np.maximum(held_sorted - quota, 0).sum())
        )
    return {
        "intervals": len(iv),
        "overlap_episodes": episodes,
        "unowned": {int(k): float(v) for k, v in unowned.items()},
        "moved": {int(k): int(v) for k, v in moved.items()},
        "min_moves": minimum,
    }


def spark_answers(out: Path) -> dict[str, Any]:
    frames = {
        n: pd.read_parquet(out / n)
        for n in ("unowned_by_generation", "moves_by_generation", "overlaps")
    }
    totals = pd.read_parquet(out / "unowned_by_partition", columns=["intervals"])
    u = frames["unowned_by_generation"]
    m = frames["moves_by_generation"]
    return {
        "intervals": int(totals["intervals"].sum()),
        "overlap_episodes": len(frames["overlaps"]),
        "unowned": {
            int(g): float(v)
            for g, v in zip(u["generation_id"], u["unowned_partition_s"], strict=True)
        },
        "moved": {int(g): int(v) for g, v in zip(m["generation_id"], m["moved"], strict=True) if v},
        "min_moves": {
            int(g): int(v)
            for g, v, s in zip(m["generation_id"], m["min_moves"], m["epoch_start"], strict=True)
            if s
        },
    }


def check_equal(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["intervals"] == b["intervals"], (a["intervals"], b["intervals"])
    assert a["overlap_episodes"] == b["overlap_episodes"]
    assert a["moved"] == b["moved"], "moves differ"
    assert a["min_moves"] == b["min_moves"], "minimum moves differ"
    assert a["unowned"].keys() == b["unowned"].keys(), "unowned generations differ"
    for g, v in a["unowned"].items():
        assert abs(v - b["unowned"][g]) < 1e-6 * max(1.0, v), (g, v, b["unowned"][g])


def _peak_rss_mb() -> float:
    """Peak resident memory of this process so far (the pandas run), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _memory_available_mb() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def task_memory(event_log_dir: Path, after_stage: int = -1) -> dict[str, float]:
    """From Spark's event log, over the stages after ``after_stage``: the largest peak execution
    memory of one task, the bytes all tasks spilled (memory, disk), and the last stage id."""
    peak, memory_spilled, disk_spilled, last = 0, 0, 0, after_stage
    for path in sorted(event_log_dir.rglob("*")):
        if not path.is_file():
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"SparkListenerTaskEnd"' not in line:
                    continue
                event = json.loads(line)
                stage = int(event.get("Stage ID", -1))
                if stage <= after_stage:
                    continue
                last = max(last, stage)
                metrics = event.get("Task Metrics") or {}
                peak = max(peak, int(metrics.get("Peak Execution Memory", 0)))
                memory_spilled += int(metrics.get("Memory Bytes Spilled", 0))
                disk_spilled += int(metrics.get("Disk Bytes Spilled", 0))
    return {"peak_task_memory_mb": peak / 2**20, "memory_spilled_mb": memory_spilled / 2**20,
            "disk_spilled_mb": disk_spilled / 2**20, "last_stage": last}


def sizes_table(args: argparse.Namespace) -> int:
    """Run this benchmark once per size, each in a fresh process (a cold JVM), and print how
    the cost grows (:func:`growth_table`)."""
    results = []
    for size in [float(x) for x in args.sizes.split(",")]:
        partitions = round(size * 1e6 / args.generations)
        out = Path(tempfile.mkdtemp(prefix="bench_audit_size_")) / "result.json"
        repeat = args.repeat if size < 30 else min(args.repeat, 2)
        cmd = [sys.executable, __file__, "--partitions", str(partitions), "--members",
               str(args.members), "--generations", str(args.generations), "--master",
               args.master, "--repeat", str(repeat), "--pandas", args.pandas,
               "--json-out", str(out)]
        print(f"== {size:g}M intervals: {' '.join(cmd[1:])}", flush=True)
        subprocess.run(cmd, check=True)
        results.append(json.loads(out.read_text()))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1))
    growth_table(results)
    return 0


def growth_table(results: list[dict[str, Any]]) -> None:
    """Print how the cost grows over sizes (each a ``--json-out`` report): wall and JVM CPU,
    cold and again in the same JVM (its fastest run), per million intervals, and the extra JVM
    CPU per extra million since the next smaller size: flat when the growth is linear."""
    print("\n| intervals | JSONL | cold: wall / JVM CPU | same JVM: wall / JVM CPU | "
          "per M intervals (same JVM): wall / CPU | extra JVM CPU per extra M: cold / same "
          "JVM | pandas: wall / CPU / peak RSS | load before cold / same JVM |")
    print("|---|---|---|---|---|---|---|---|")
    previous: tuple[float, float, float | None] | None = None
    for r in sorted(results, key=lambda x: x["intervals"]):
        runs = r["runs"]
        cold, warm = runs[0], (min(runs[1:], key=lambda x: x["wall_s"]) if len(runs) > 1
                               else None)
        m = r["intervals"] / 1e6
        warm_text = (f"{warm['wall_s']:.1f} s / {warm['jvm_cpu_s']:.0f} s" if warm else "-")
        per = (f"{warm['wall_s'] / m:.1f} s / {warm['jvm_cpu_s'] / m:.1f} s" if warm else
               f"{cold['wall_s'] / m:.1f} s / {cold['jvm_cpu_s'] / m:.1f} s (cold)")
        warm_cpu = warm["jvm_cpu_s"] if warm else None
        extra = "-"
        if previous is not None and m > previous[0]:
            dm = m - previous[0]
            extra = f"{(cold['jvm_cpu_s'] - previous[1]) / dm:.1f} s"
            if warm_cpu is not None and previous[2] is not None:
                extra += f" / {(warm_cpu - previous[2]) / dm:.1f} s"
        previous = (m, cold["jvm_cpu_s"], warm_cpu)
        pandas = r.get("pandas")
        pandas_text = (f"{pandas['wall_s']:.1f} s / {pandas['cpu_s']:.1f} s / "
                       f"{pandas['peak_rss_mb'] / 1024:.1f} GB" if pandas else
                       r.get("pandas_skipped", "-"))
        print(f"| {m:.1f}M | {r['jsonl_mb']:.0f} MB | "
              f"{cold['wall_s']:.1f} s / {cold['jvm_cpu_s']:.0f} s | {warm_text} | {per} | "
              f"{extra} | {pandas_text} | {_load_text(cold, warm)} |")


def _load_text(cold: dict[str, Any], warm: dict[str, Any] | None) -> str:
    """Load average before the cold run and the same-JVM one, with the host probe where the
    report has it (:func:`host_probe_s`)."""
    runs = [cold] if warm is None else [cold, warm]
    text = " / ".join(f"{r['load']:.1f}" for r in runs)
    if all("probe_s" in r for r in runs):
        text += "; probe " + " / ".join(f"{r['probe_s']:.2f} s" for r in runs)
    return text


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--partitions", type=int, default=6000)
    p.add_argument("--members", type=int, default=200)
    p.add_argument("--generations", type=int, default=500)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--keep", default=None, help="keep the generated events in this directory")
    p.add_argument("--repeat", type=int, default=2,
                   help="runs: the first in a cold JVM, the others again in the same JVM")
    p.add_argument("--sizes", default=None, metavar="M,M,...",
                   help="millions of intervals, e.g. 3,10,30: one fresh process (cold JVM) per "
                        "size, --generations kept, partitions scaled; prints the growth table")
    p.add_argument("--table", nargs="+", default=None, metavar="JSON",
                   help="instead: print the growth table from --json-out files of earlier "
                        "runs (one size each, or a --sizes list), e.g. one size per run")
    p.add_argument("--pandas", choices=["auto", "yes", "no"], default="auto",
                   help="compute the answers with pandas too (auto: up to "
                        "--pandas-max-intervals, and only with the memory it needs)")
    p.add_argument("--pandas-max-intervals", type=int, default=10_000_000)
    p.add_argument("--skew", type=int, default=None, metavar="N",
                   help="instead: one partition with an N-interval history (4 members hand it "
                        "round), run with and without the audit's window-buffer bound, and "
                        "report each run's largest task memory from Spark's event log")
    p.add_argument("--driver-memory", default=None,
                   help="local JVM heap (default: the audit's, a quarter of RAM up to 4g)")
    p.add_argument("--off-heap", default=None,
                   help="off-heap execution memory (default: the audit's)")
    p.add_argument("--json-out", default=None,
                   help="write the figures as JSON here (with --sizes: one report per size)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore", FutureWarning)
    if args.table:
        reports: list[dict[str, Any]] = []
        for path in args.table:
            loaded = json.loads(Path(path).read_text())
            reports.extend(loaded if isinstance(loaded, list) else [loaded])
        growth_table(reports)
        return 0
    if args.sizes:
        return sizes_table(args)

    work = Path(tempfile.mkdtemp(prefix="bench_audit_"))
    events = Path(args.keep) if args.keep else work / "events"
    began = time.perf_counter()
    if args.skew:
        n = generate_skewed(events, args.skew)
        shape = f"one partition, 4 members handing it round {args.skew:,} times"
    else:
        n = generate(events, args.partitions, args.members, args.generations)
        shape = f"{args.members} members, {args.generations} generations"
    size = sum(f.stat().st_size for f in events.glob("*.jsonl"))
    print(
        f"generated {n:,} ownership intervals ({size / 1e6:.0f} MB JSONL, {shape}) "
        f"in {time.perf_counter() - began:.1f} s"
    )
    report: dict[str, Any] = {"intervals": n, "jsonl_mb": size / 1e6, "runs": [],
                              "load": list(os.getloadavg())}

    from aiogroup.tools.audit.audit import WINDOW_SPILL_KEY, WINDOW_SPILL_ROWS, run_audit
    from aiogroup.tools.audit.session import build_session

    extra: dict[str, str] = {}
    log_dir = work / "eventlog"
    if args.skew:
        log_dir.mkdir()
        extra = {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{log_dir}"}
    if args.off_heap:
        extra["spark.memory.offHeap.size"] = args.off_heap
    report["memory"] = {"driver": args.driver_memory, "off_heap": args.off_heap}
    began = time.perf_counter()
    spark = build_session(args.master, log_level="ERROR", extra_conf=extra,
                          driver_memory=args.driver_memory)
    print(f"spark session ({args.master}): {time.perf_counter() - began:.1f} s")
    out = work / "out"
    times: list[float] = []
    last_stage = -1
    runs = max(1, args.repeat)
    for run in range(runs):
        bound = not args.skew or run % 2 == 1  # skew: unbounded first, then bounded
        if bound:
            spark.conf.unset(WINDOW_SPILL_KEY)  # the audit bounds it (its default)
        else:  # as Spark without the audit's bound: spill only under memory pressure (a value
            # of our own, since the audit replaces Spark's default)
            spark.conf.set(WINDOW_SPILL_KEY, str(2**31 - 2))
        load = os.getloadavg()[0]
        probe = host_probe_s()
        threads_before = jvm_threads()
        began, cpu = time.perf_counter(), jvm_cpu_s()
        result = run_audit(spark, [str(events)])
        for name, df in result.datasets.items():
            df.write.mode("overwrite").parquet(str(out / name))
        times.append(time.perf_counter() - began)
        cpu = jvm_cpu_s() - cpu
        roles = role_cpu(threads_before)
        split = ", ".join(f"{k} {v:.1f}" for k, v in roles.items())
        what = "cold JVM" if run == 0 else "same JVM again"
        figures: dict[str, Any] = {"wall_s": times[-1], "jvm_cpu_s": cpu, "load": load,
                                   "probe_s": probe, **roles}
        if args.skew:
            spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # event log written
            memory = task_memory(log_dir, last_stage)
            last_stage = int(memory["last_stage"])
            figures.update(memory, window_bound=bound)
            how = (f"bounded to {WINDOW_SPILL_ROWS:,} rows" if bound
                   else "unbounded (Spark's default)")
            print(f"  window buffer {how}: largest peak execution memory of one task "
                  f"{memory['peak_task_memory_mb']:.0f} MB; spilled "
                  f"{memory['memory_spilled_mb']:.0f} MB (memory) / "
                  f"{memory['disk_spilled_mb']:.0f} MB (disk)")
        report["runs"].append(figures)
        print(
            f"spark audit, run {run + 1} ({what}; read JSONL, all datasets to Parquet): "
            f"{times[-1]:.1f} s (JVM CPU {cpu:.1f} s: {split}, driver and the rest "
            f"{cpu - sum(roles.values()):.1f}; load average before {load:.1f}, host probe "
            f"{probe:.2f} s)"
        )
        spark.catalog.clearCache()
    spark_s = times[0]
    spark.stop()

    # pandas held about 1.1 GB per million intervals at its peak (3.2 GB for 3M): on a shared
    # machine, auto runs it only with half again that much memory available.
    need_mb = PANDAS_MB_PER_M_INTERVALS * n / 1e6
    fits = need_mb * 1.5 < _memory_available_mb()
    use_pandas = args.pandas == "yes" or (
        args.pandas == "auto" and n <= args.pandas_max_intervals and fits)
    if use_pandas:
        began, cpu = time.perf_counter(), time.process_time()
        expected = pandas_answers(events)
        pandas_s, pandas_cpu = time.perf_counter() - began, time.process_time() - cpu
        report["pandas"] = {"wall_s": pandas_s, "cpu_s": pandas_cpu, "peak_rss_mb": _peak_rss_mb()}
        print(f"pandas, same answers (intervals, overlaps, unowned, moves, minimum): "
              f"{pandas_s:.1f} s (CPU {pandas_cpu:.1f} s, peak RSS "
              f"{_peak_rss_mb() / 1024:.1f} GB; {_memory_available_mb() / 1024:.1f} GB "
              "available now)")
        got = spark_answers(out)
        check_equal(got, expected)
        print(
            f"answers equal: {got['intervals']:,} intervals, {got['overlap_episodes']} overlaps, "
            f"{sum(got['moved'].values()):,} moves (minimum {sum(got['min_moves'].values()):,}), "
            f"{sum(got['unowned'].values()):,.0f} unowned partition-seconds"
        )
        print(f"spark {spark_s:.1f} s vs pandas {pandas_s:.1f} s: ratio spark/pandas "
              f"{spark_s / pandas_s:.2f}")
    else:
        report["pandas_skipped"] = (
            "not run (--pandas no)" if args.pandas == "no" else
            f"not run: needs about {need_mb / 1024:.0f} GB, "
            f"{_memory_available_mb() / 1024:.0f} GB available"
            if n <= args.pandas_max_intervals else
            f"not run ({n / 1e6:.0f}M intervals > {args.pandas_max_intervals / 1e6:.0f}M, "
            f"about {need_mb / 1024:.0f} GB)")
        print(f"pandas: {report['pandas_skipped']}")
    if len(times) > 1 and not args.skew:
        steady = min(times[1:])
        # the target is for 3M intervals; other sizes show the figure only
        verdict = ("" if n > TARGET_INTERVALS else
                   f"{'PASS' if steady <= TARGET_S else 'MISS'}: target <= {TARGET_S:.0f} s "
                   f"for {TARGET_INTERVALS / 1e6:.0f}M intervals on local[2]; ")
        print(f"steady state (same JVM, best of runs 2-{len(times)}): {steady:.1f} s "
              f"({verdict}cold run minus steady state: {spark_s - steady:.1f} s)")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
