"""``python -m aiogroup.tools.chaos``: run seeded chaos scenarios and judge them (docs/chaos.md).

    python -m aiogroup.tools.chaos --broker embedded --runs 20          # 20 runs, seeds printed
    python -m aiogroup.tools.chaos --broker kafka23 --seed 1234         # replay one run's plan
    python -m aiogroup.tools.chaos --broker all --runs 200 --out runs/  # the long run, every broker
    python -m aiogroup.tools.chaos --broker tansu --runs 50 --jobs 2    # two runs at a time
    python -m aiogroup.tools.chaos --broker kafka4 --group-protocol consumer --runs 20  # KIP-848
    python -m aiogroup.tools.chaos --check runs/embedded-1234           # judge a kept run again
    python -m aiogroup.tools.chaos --table runs/                        # the table of written runs

Exit code 0 when nothing is counted against aiogroup, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from aiogroup.tools.chaos.brokers import BROKERS, CONSUMER_PROTOCOL_BROKERS, start_broker
from aiogroup.tools.chaos.checker import RunLog, Verdict, check, summarize
from aiogroup.tools.chaos.member import (
    CONSUMER_PROTOCOL_DEFAULT_KINDS,
    CONSUMER_PROTOCOL_KINDS,
    DEFAULT_KINDS,
    KINDS,
)
from aiogroup.tools.chaos.report import markdown_table
from aiogroup.tools.chaos.runner import EVENT_KINDS, ChaosConfig, run_once


def _csv(choices: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        unknown = [x for x in items if x not in choices]
        if unknown or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)}")
        return items

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m aiogroup.tools.chaos",
        description="Seeded chaos runs of mixed consumer groups, judged by an ownership checker.",
    )
    p.add_argument("--broker", default="embedded", choices=[*BROKERS, "all"])
    p.add_argument("--runs", type=int, default=1, help="runs per broker (seeds S, S+1, ...)")
    p.add_argument("--seed", type=int, help="seed of the first run (default: random, printed)")
    p.add_argument("--members", type=int, default=4, help="members at the start (default 4)")
    p.add_argument("--duration", type=float, default=15.0, help="seconds of events per run")
    p.add_argument("--partitions", type=int, help="partitions (default: 6-16 from the seed)")
    p.add_argument("--session-ms", type=int, default=3000)
    p.add_argument("--rebalance-ms", type=int, default=10000)
    p.add_argument(
        "--kinds",
        type=_csv(KINDS),
        default=None,
        help=f"member kinds to mix (default {','.join(DEFAULT_KINDS)}; java and franz-go too; "
        f"with --group-protocol consumer: {','.join(CONSUMER_PROTOCOL_DEFAULT_KINDS)}, of "
        f"{','.join(CONSUMER_PROTOCOL_KINDS)})",
    )
    p.add_argument(
        "--group-protocol",
        choices=("classic", "consumer"),
        default="classic",
        help="consumer: KIP-848 consumer groups, on the brokers that serve them "
        f"({', '.join(CONSUMER_PROTOCOL_BROKERS)}); the group's session and heartbeat "
        "interval are set broker side",
    )
    p.add_argument("--events", type=_csv(EVENT_KINDS), default=EVENT_KINDS, help="event kinds")
    p.add_argument("--out", type=Path, default=Path("chaos-runs"), help="where runs are written")
    p.add_argument("--keep", action="store_true", help="keep member logs of passing runs too")
    p.add_argument("--check", type=Path, metavar="RUN_DIR", help="judge a written run again")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="runs at a time, each job a process with its own broker (default 1)",
    )
    p.add_argument(
        "--rejudge",
        action="store_true",
        help="with --table: judge every run kept under the dir again (the checker changed)",
    )
    p.add_argument("--shard", type=_shard, help=argparse.SUPPRESS)  # K/N: a --jobs worker
    p.add_argument(
        "--table", type=Path, metavar="OUT_DIR", help="the table of the runs written under a dir"
    )
    return p


def _shard(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError("K/N") from None
    if not 0 <= k < n:
        raise argparse.ArgumentTypeError("K/N with 0 <= K < N")
    return k, n


def load_verdicts(out: Path) -> dict[str, list[Verdict]]:
    """Every ``verdict.json`` under ``out``, by broker (runs in seed order)."""
    found: dict[str, list[Verdict]] = {}
    for path in sorted(out.glob("**/verdict.json")):
        verdict = Verdict.from_dict(json.loads(path.read_text()))
        found.setdefault(verdict.broker, []).append(verdict)
    for verdicts in found.values():
        verdicts.sort(key=lambda v: v.seed or 0)
    return found


def rejudge(out: Path) -> None:
    """Judge again every run under ``out`` whose member logs were kept (``--keep``)."""
    for path in sorted(out.glob("**/verdict.json")):
        if not (path.parent / "members").is_dir():
            continue
        old = json.loads(path.read_text())
        verdict = check(RunLog.load(path.parent))
        verdict.wall_s = old.get("wall_s")
        path.write_text(json.dumps(verdict.to_dict(), indent=1))


def table(out: Path) -> str:
    """The Markdown table of every run written under ``out`` (one column per broker)."""
    found = load_verdicts(out)
    summaries = {}
    for name in [b for b in BROKERS if b in found]:
        summary = summarize(found[name])
        seeds = [v.seed for v in found[name] if v.seed is not None]
        summary["seeds"] = [min(seeds), max(seeds)] if seeds else []
        summaries[name] = summary
    return markdown_table(summaries)


def _spawn_jobs(args: argparse.Namespace, argv: list[str], base: int) -> int:
    """Run ``--jobs`` worker processes (each ``--shard K/N``, its own broker), then print
    the table of everything they wrote. Workers are stopped by pid if the runner is."""
    skip = {"--jobs", "--seed"}
    cleaned: list[str] = []
    it = iter(argv)
    for a in it:
        if a in skip:
            next(it, None)
        elif not any(a.startswith(f"{k}=") for k in skip):
            cleaned.append(a)
    workers = []
    for k in range(args.jobs):
        cmd = [sys.executable, "-m", "aiogroup.tools.chaos", *cleaned]
        cmd += ["--seed", str(base), "--shard", f"{k}/{args.jobs}"]
        workers.append(subprocess.Popen(cmd))
    codes = []
    try:
        for w in workers:
            codes.append(w.wait())
    finally:
        for w in workers:
            if w.poll() is None:
                w.terminate()
                w.wait(60)
    print(table(args.out))
    return 1 if any(codes) else 0


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: members closed, brokers and workers stopped


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.table is not None:
        if args.rejudge:
            rejudge(args.table)
        print(table(args.table))
        return 0
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if args.check is not None:
        verdict = check(RunLog.load(args.check))
        print(json.dumps(verdict.to_dict(), indent=1))
        print(verdict.summary())
        return 0 if verdict.ok else 1
    if args.runs < 1:
        print("--runs must be >= 1", file=sys.stderr)
        return 2
    consumer = args.group_protocol == "consumer"
    if args.kinds is None:
        args.kinds = CONSUMER_PROTOCOL_DEFAULT_KINDS if consumer else DEFAULT_KINDS
    elif consumer and not set(args.kinds) <= set(CONSUMER_PROTOCOL_KINDS):
        wrong = sorted(set(args.kinds) - set(CONSUMER_PROTOCOL_KINDS))
        print(f"--group-protocol consumer: {', '.join(wrong)} speaks only the classic protocol",
              file=sys.stderr)  # fmt: skip
        return 2
    base = args.seed if args.seed is not None else random.randrange(1_000_000)
    if args.jobs > 1 and args.shard is None:
        print(f"chaos: seeds {base}..{base + args.runs - 1}, {args.jobs} jobs", flush=True)
        return _spawn_jobs(args, sys.argv[1:] if argv is None else argv, base)
    k, n = args.shard or (0, 1)
    indices = range(k, args.runs, n)
    brokers = list(BROKERS) if args.broker == "all" else [args.broker]
    if args.group_protocol == "consumer":
        if args.broker == "all":
            brokers = list(CONSUMER_PROTOCOL_BROKERS)
        wrong = [b for b in brokers if b not in CONSUMER_PROTOCOL_BROKERS]
        if wrong:
            print(f"--group-protocol consumer: {', '.join(wrong)} serves no KIP-848 group "
                  f"(use {', '.join(CONSUMER_PROTOCOL_BROKERS)})", file=sys.stderr)  # fmt: skip
            return 2
    print(f"chaos: seeds {base}..{base + args.runs - 1} on {', '.join(brokers)}", flush=True)
    summaries = {}
    failed = False
    for name in brokers:
        verdicts: list[Verdict] = []
        started = time.monotonic()
        broker = start_broker(name)
        errors = 0
        try:
            for i in indices:
                config = ChaosConfig(
                    broker=name,
                    seed=base + i,
                    out=args.out,
                    members=args.members,
                    duration=args.duration,
                    partitions=args.partitions,
                    session_ms=args.session_ms,
                    rebalance_ms=args.rebalance_ms,
                    kinds=args.kinds,
                    events=args.events,
                    group_protocol=args.group_protocol,
                    keep=args.keep,
                )
                t0 = time.monotonic()
                try:
                    verdict = run_once(config, broker)
                except Exception:  # the runner's own failure: reported, not judged
                    traceback.print_exc()
                    errors += 1
                    print(f"[{name} {i + 1}/{args.runs}] seed={base + i} runner error", flush=True)
                    if errors >= 3:  # the broker may be what broke: a fresh one
                        broker.stop()
                        broker = start_broker(name)
                        errors = 0
                    continue
                errors = 0
                verdicts.append(verdict)
                print(
                    f"[{name} {i + 1}/{args.runs}] {verdict.summary()} "
                    f"({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
                for v in verdict.against("aiogroup"):
                    print(f"    aiogroup: {v.kind} {v.partition or ''} {v.detail}", flush=True)
        finally:
            broker.stop()
        summary = summarize(verdicts)
        summary["wall_s"] = round(time.monotonic() - started, 1)
        summary["seeds"] = [base, base + args.runs - 1]
        summaries[name] = summary
        failed = failed or bool(summary["failing_seeds"])
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"summary-{name}-{base}-{k}of{n}.json").write_text(
            json.dumps({"summary": summary, "runs": [v.to_dict() for v in verdicts]}, indent=1)
        )
    print(markdown_table(summaries))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
