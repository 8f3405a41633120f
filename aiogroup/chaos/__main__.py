"""``python -m aiogroup.chaos``: run seeded chaos scenarios and judge them (docs/chaos.md).

    python -m aiogroup.chaos --broker embedded --runs 20          # 20 runs, seeds printed
    python -m aiogroup.chaos --broker kafka23 --seed 1234         # replay one run's plan
    python -m aiogroup.chaos --broker all --runs 200 --out runs/  # the long run, every broker
    python -m aiogroup.chaos --check runs/embedded-1234           # judge a kept run again

Exit code 0 when nothing is counted against aiogroup, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

from aiogroup.chaos.brokers import BROKERS, start_broker
from aiogroup.chaos.checker import RunLog, Verdict, check, summarize
from aiogroup.chaos.member import KINDS
from aiogroup.chaos.report import markdown_table
from aiogroup.chaos.runner import EVENT_KINDS, ChaosConfig, run_once


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
        prog="python -m aiogroup.chaos",
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
    p.add_argument("--kinds", type=_csv(KINDS), default=KINDS, help="member kinds to mix")
    p.add_argument("--events", type=_csv(EVENT_KINDS), default=EVENT_KINDS, help="event kinds")
    p.add_argument("--out", type=Path, default=Path("chaos-runs"), help="where runs are written")
    p.add_argument("--keep", action="store_true", help="keep member logs of passing runs too")
    p.add_argument("--check", type=Path, metavar="RUN_DIR", help="judge a written run again")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.check is not None:
        verdict = check(RunLog.load(args.check))
        print(json.dumps(verdict.to_dict(), indent=1))
        print(verdict.summary())
        return 0 if verdict.ok else 1
    if args.runs < 1:
        print("--runs must be >= 1", file=sys.stderr)
        return 2
    base = args.seed if args.seed is not None else random.randrange(1_000_000)
    brokers = list(BROKERS) if args.broker == "all" else [args.broker]
    print(f"chaos: seeds {base}..{base + args.runs - 1} on {', '.join(brokers)}", flush=True)
    summaries = {}
    failed = False
    for name in brokers:
        verdicts: list[Verdict] = []
        started = time.monotonic()
        broker = start_broker(name)
        try:
            for i in range(args.runs):
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
                    keep=args.keep,
                )
                t0 = time.monotonic()
                verdict = run_once(config, broker)
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
        (args.out / f"summary-{name}-{base}.json").write_text(
            json.dumps(
                {"summary": summary, "runs": [v.to_dict() for v in verdicts]}, indent=1
            )
        )
    print(markdown_table(summaries))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
