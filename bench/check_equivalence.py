"""Check that two checkouts' sticky assignors give the same assignments on seeded random groups.

A speed change to the balancer must not change what it assigns. Each seed builds a random
group (1-12 topics of 1-120 partitions, up to 40 members on random subsets, now and then a
topic that does not exist; every 10th seed up to 60 topics of up to 400 partitions and up to
200 members), assigns it fresh with ``cooperative-sticky``, then applies four changes in turn
(a member leaves, one joins, one changes its subscription, a topic grows, claims shuffled out
of order, stale generations with a claim on someone else's partition, or nothing), each time
with the previous result as the members' claims, one assignor instance throughout (so the
leader's memory of withheld partitions is used), and the eager ``sticky`` assignor on the same
claims. Everything returned (assignments, moved and withheld counts) goes into one digest per
seed; the digests of the two checkouts are compared seed by seed.

    .venv/bin/python bench/check_equivalence.py --against /tmp/main-copy --seeds 0:1000

``--against DIR`` is a directory holding another ``aiogroup`` package (``git archive <commit>
aiogroup | tar -x -C DIR``); each side runs in its own process with its package first on the
path. Exit status 1 if any seed differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import random
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.protocol import Assignment, Subscription, encode_sticky_user_data

CHANGES = ("leave", "join", "resubscribe", "grow", "shuffle", "stale", "none")


def canonical(result: Mapping[str, Assignment]) -> list[Any]:
    return sorted((m, sorted(a.partitions.items())) for m, a in result.items())


def random_group(rnd: random.Random, big: bool) -> tuple[dict[str, int], dict[str, list[str]]]:
    sizes = [3, 10, 40, 120] + ([400] if big else [])
    ppt = {
        f"t{k:02d}": rnd.randint(1, rnd.choice(sizes))
        for k in range(rnd.randint(1, 60 if big else 12))
    }
    names = sorted(ppt)
    topics: dict[str, list[str]] = {}
    for i in range(rnd.randint(1, rnd.choice([4, 12, 40] + ([200] if big else [])))):
        chosen = (
            list(names) if rnd.random() < 0.15 else rnd.sample(names, rnd.randint(1, len(names)))
        )
        if rnd.random() < 0.05:
            chosen.append("missing")
        topics[f"m{i:03d}"] = chosen
    return ppt, topics


def run_seed(seed: int) -> str:
    rnd = random.Random(seed)
    ppt, topics = random_group(rnd, seed % 10 == 0)
    assignor = CooperativeStickyAssignor()
    last = assignor.assign(ppt, {m: Subscription(ts) for m, ts in topics.items()})
    out: list[Any] = [("fresh", canonical(last), assignor.last_moved, assignor.last_withheld)]
    for step in range(4):
        change = rnd.choice(CHANGES)
        ppt_now, topics_now = dict(ppt), {m: list(ts) for m, ts in topics.items()}
        if change == "leave" and len(topics_now) > 1:
            del topics_now[rnd.choice(sorted(topics_now))]
        elif change == "join":
            topics_now[f"j{seed}-{step}"] = rnd.sample(sorted(ppt), rnd.randint(1, len(ppt)))
        elif change == "resubscribe":
            topics_now[rnd.choice(sorted(topics_now))] = rnd.sample(
                sorted(ppt), rnd.randint(1, len(ppt))
            )
        elif change == "grow":
            topic = rnd.choice(sorted(ppt_now))
            ppt_now[topic] += rnd.randint(1, 20)
        subscriptions = {}
        for m, ts in topics_now.items():
            owned = dict(last[m].partitions) if m in last else {}
            generation = step + 1
            if change == "shuffle" and owned:
                items = list(owned.items())
                rnd.shuffle(items)
                owned = {t: tuple(rnd.sample(list(p), len(p))) for t, p in items}
            if change == "stale" and owned and rnd.random() < 0.3:
                generation -= 1
                if rnd.random() < 0.5:  # also claim another member's first partition
                    other = last[rnd.choice(sorted(last))].partitions
                    for t, p in list(other.items())[:1]:
                        owned[t] = tuple(sorted(set(owned.get(t, ())) | set(p[:1])))
            subscriptions[m] = Subscription(ts, owned_partitions=owned, generation_id=generation)
        result = assignor.assign(ppt_now, subscriptions)
        out.append((change, canonical(result), assignor.last_moved, assignor.last_withheld))
        eager = {
            m: Subscription(s.topics, encode_sticky_user_data(s.owned_partitions, 1), version=0)
            for m, s in subscriptions.items()
        }
        out.append(("eager", canonical(StickyAssignor().assign(ppt_now, eager))))
        last, ppt, topics = result, ppt_now, topics_now
    return hashlib.sha256(repr(out).encode()).hexdigest()[:16]


def digests(python_path: str | None, first: int, end: int) -> dict[str, str]:
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", f"{first}:{end}"]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    result: dict[str, str] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="a directory holding another aiogroup package")
    parser.add_argument("--seeds", default="0:1000", help="first:end")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        logging.disable(logging.WARNING)  # bad claims are warned about, on purpose
        first, end = map(int, args.worker.split(":"))
        print(json.dumps({str(s): run_seed(s) for s in range(first, end)}))
        return 0
    if not args.against:
        parser.error("--against DIR is required")
    first, end = map(int, args.seeds.split(":"))
    ours, theirs = digests(None, first, end), digests(args.against, first, end)
    differ = [s for s in ours if ours[s] != theirs[s]]
    print(f"{len(ours)} seeds, {len(differ)} differ" + (f": {differ[:20]}" if differ else ""))
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
