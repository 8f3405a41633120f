"""Benchmark the leader's whole step at scale, and the general balancer at several sizes.

Shapes (pick with ``--shapes``; default: both):

- ``leader``: 2,000 members, 500 topics x 2,000 partitions (1M), equal subscriptions. Every
  member owns what a fresh cooperative-sticky assignment gave it (500 partitions, V3
  Subscriptions at generation 1) and one member is gone. The leader's step, phase by phase:
  decode the 1,999 Subscriptions, ``CooperativeStickyAssignor.assign``, ``leader_plan``
  (KIP-429 2a-2f), encode the 1,999 Assignments; then the same step through the sans-I/O
  ``GroupMember`` (``JoinGroupCompleted`` in, ``SendSyncGroup`` out), which is what a leader
  really runs. Checked on the output: every partition assigned once and only to a subscriber,
  loads within one of each other, moves equal to the minimum, nothing withheld, and the same
  bytes on every run (a digest is printed).
- ``general``: 2,000 members each subscribed to a random 30-70% of 500 topics (seeded), at
  250, 500, 1,000 and 2,000 partitions per topic (125k to 1M): a fresh assignment, then one
  member leaving. Checked: valid and complete, no balance violation (no partition could move
  to an eligible member with 2+ fewer), fresh moves = all partitions, leaving moves = what the
  leaver owned (the minimum), nothing withheld. The last column divides CPU time by
  P log2 P, to show the growth.

CPU time (``time.process_time``) and wall time are printed for each; each figure is the best
of ``--repeat`` runs, with the median beside it. The machine is shared: CPU time is what this
process used, wall time also shows the load.

``--compare DIR`` also runs every measurement with the aiogroup found in ``DIR`` (another
checkout, e.g. ``/work/main``), in separate processes that take turns with this one, and
prints both (for the leader step the digests must agree).

    .venv/bin/python bench/bench_leader.py                       # both shapes, ~2 minutes
    .venv/bin/python bench/bench_leader.py --shapes leader --repeat 5
    .venv/bin/python bench/bench_leader.py --compare /work/main --repeat 3
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.membership import (
    CoordinatorFound,
    FindCoordinator,
    GroupMember,
    JoinGroupCompleted,
    JoinGroupMember,
    MemberConfig,
    MetadataUpdated,
    SendJoinGroup,
    SendSyncGroup,
    SubscriptionChanged,
)
from aiogroup.membership.deltas import leader_plan
from aiogroup.membership.machine import _announce_hand_off_aware
from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_assignors import balance_violations, loads, min_moves_uniform

Timing = tuple[float, float]  # (cpu, wall) seconds
SIZES = (250, 500, 1000, 2000)


def clock(fn: Callable[[], Any]) -> tuple[Timing, Any]:
    c0, w0 = time.process_time(), time.perf_counter()
    result = fn()
    return (time.process_time() - c0, time.perf_counter() - w0), result


# -- checks -------------------------------------------------------------------------------------


def check_valid_complete(
    ppt: Mapping[str, int],
    topics: Mapping[str, list[str]],
    result: Mapping[str, Mapping[str, Any]],
) -> None:
    """Each partition of a subscribed topic assigned exactly once, only to a subscriber."""
    seen: dict[str, set[int]] = {}
    count: dict[str, int] = {}
    for member, parts in result.items():
        mine = set(topics[member])
        for t, ps in parts.items():
            assert t in mine, f"{member} got {t} without subscribing"
            seen.setdefault(t, set()).update(ps)
            count[t] = count.get(t, 0) + len(ps)
    wanted = {t for ts in topics.values() for t in ts if ppt.get(t, 0) > 0}
    for t in wanted:
        assert count.get(t) == len(seen.get(t, ())) == ppt[t], f"{t}: not each partition once"
        assert seen[t] == set(range(ppt[t])), f"{t}: partitions that do not exist"


def digest(pairs: tuple[tuple[str, bytes], ...]) -> str:
    h = hashlib.sha256()
    for member_id, data in pairs:
        h.update(member_id.encode())
        h.update(data)
    return h.hexdigest()[:16]


# -- the leader step ----------------------------------------------------------------------------


def leader_inputs() -> tuple[dict[str, int], dict[str, bytes], str]:
    """1M partitions, 2,000 members owning a fresh assignment; the middle member is gone."""
    ppt = {f"topic-{t:04d}": 2000 for t in range(500)}
    names = sorted(ppt)
    members = [f"consumer-{m:05d}" for m in range(2000)]
    assignor = CooperativeStickyAssignor()
    fresh = assignor.assign(ppt, {m: Subscription(names) for m in members})
    gone = members[len(members) // 2]
    user_data = assignor.subscription_user_data(set(names))
    payloads = {
        m: encode_subscription(Subscription(names, user_data, fresh[m].partitions, 1), 3)
        for m in members
        if m != gone
    }
    return ppt, payloads, gone


def leader_phases(ppt: dict[str, int], payloads: dict[str, bytes]) -> dict[str, Any]:
    """The four phases, called as GroupMember._leader_assign calls them."""
    members = sorted(payloads)
    out: dict[str, Any] = {}
    out["decode"], subs = clock(lambda: {m: decode_subscription(b) for m, b in payloads.items()})
    assignor = CooperativeStickyAssignor()
    out["assign"], raw = clock(lambda: assignor.assign(ppt, subs))

    def plan() -> tuple[dict[str, Assignment], Any]:
        assignments = {m: raw.get(m, Assignment()) for m in members}
        result, lplan = leader_plan(assignments, subs, ppt, cooperative=True)
        # A cooperative leader announces that it withholds for a hand-off, as GroupMember does.
        return _announce_hand_off_aware(result), lplan

    out["leader_plan"], (result, lplan) = clock(plan)
    out["encode"], encoded = clock(
        lambda: tuple((m, encode_assignment(result[m], min(3, subs[m].version))) for m in members)
    )
    out["moved"], out["withheld"] = assignor.last_moved, len(lplan.withheld)
    out["digest"] = digest(encoded)
    out["result"] = {m: a.partitions for m, a in result.items()}
    out["topics"] = {m: list(s.topics) for m, s in subs.items()}
    out["owned"] = [sum(map(len, s.owned_partitions.values())) for s in subs.values()]
    return out


def leader_machine(ppt: dict[str, int], payloads: dict[str, bytes]) -> tuple[Timing, str]:
    """The same step through the sans-I/O GroupMember: JoinGroupCompleted to SendSyncGroup."""
    leader_id = min(payloads)
    machine = GroupMember(
        MemberConfig(
            group_id="bench",
            assignors=[CooperativeStickyAssignor()],
            enable_auto_commit=False,
        )
    )
    now = 0.0
    machine.handle(MetadataUpdated(ppt), now)
    acts = machine.handle(SubscriptionChanged(topics=frozenset(ppt)), now)
    find = next(a for a in acts if isinstance(a, FindCoordinator))
    acts = machine.handle(CoordinatorFound(find.token, 1, "127.0.0.1", 9092), now)
    join = next(a for a in acts if isinstance(a, SendJoinGroup))
    members = tuple(JoinGroupMember(m, md) for m, md in payloads.items())
    event = JoinGroupCompleted(
        join.token, 2, leader_id, leader_id, "cooperative-sticky", members=members
    )
    timing, acts = clock(lambda: machine.handle(event, now))
    sync = next(a for a in acts if isinstance(a, SendSyncGroup))
    return timing, digest(sync.assignments)


def run_leader(repeat: int) -> dict[str, Any]:
    """One process's measurements of the leader step (``repeat`` runs each)."""
    ppt, payloads, _ = leader_inputs()
    runs: dict[str, list[Timing]] = {}
    digests: set[str] = set()
    checked = False
    for _ in range(repeat):
        gc.collect()
        phases = leader_phases(ppt, payloads)
        for name in ("decode", "assign", "leader_plan", "encode"):
            runs.setdefault(name, []).append(phases[name])
        digests.add(phases["digest"])
        if not checked:
            total = sum(ppt.values())
            check_valid_complete(ppt, phases["topics"], phases["result"])
            sizes = [sum(map(len, p.values())) for p in phases["result"].values()]
            assert max(sizes) - min(sizes) <= 1, "loads differ by more than one"
            assert phases["moved"] == min_moves_uniform(total, phases["owned"]), phases["moved"]
            assert phases["withheld"] == 0
            checked = True
        del phases
        gc.collect()
        timing, machine_digest = leader_machine(ppt, payloads)
        runs.setdefault("machine", []).append(timing)
        digests.add(machine_digest)
    assert len(digests) == 1, f"runs disagree: {digests}"
    return {"runs": runs, "digest": digests.pop(), "moved": 500}


# -- the general path ---------------------------------------------------------------------------


def general_inputs(partitions: int, seed: int = 7) -> tuple[dict[str, int], dict[str, list[str]]]:
    rnd = random.Random(seed)
    ppt = {f"topic-{t:04d}": partitions for t in range(500)}
    names = sorted(ppt)
    topics = {
        f"consumer-{m:05d}": sorted(rnd.sample(names, round(len(names) * rnd.uniform(0.3, 0.7))))
        for m in range(2000)
    }
    return ppt, topics


def run_general(partitions: int, repeat: int) -> dict[str, Any]:
    ppt, topics = general_inputs(partitions)
    total = sum(ppt.values())
    runs: dict[str, list[Timing]] = {"fresh": [], "leave": []}
    for r in range(repeat):
        gc.collect()
        assignor = CooperativeStickyAssignor()
        subs = {m: Subscription(ts) for m, ts in topics.items()}
        timing, fresh = clock(partial(assignor.assign, ppt, subs))
        runs["fresh"].append(timing)
        if r == 0:
            parts = {m: a.partitions for m, a in fresh.items()}
            check_valid_complete(ppt, topics, parts)
            assert balance_violations(ppt, topics, fresh) == 0, "fresh: not balanced"
            assert assignor.last_moved == total and assignor.last_withheld == 0
        gone = sorted(topics)[len(topics) // 2]
        rest = {m: ts for m, ts in topics.items() if m != gone}
        owned_subs = {
            m: Subscription(ts, owned_partitions=fresh[m].partitions, generation_id=1)
            for m, ts in rest.items()
        }
        del fresh
        gc.collect()
        leaver = CooperativeStickyAssignor()
        timing, left = clock(partial(leaver.assign, ppt, owned_subs))
        runs["leave"].append(timing)
        if r == 0:
            check_valid_complete(ppt, rest, {m: a.partitions for m, a in left.items()})
            assert balance_violations(ppt, rest, left) == 0, "leave: not balanced"
            owned_by_gone = total - sum(
                loads({m: Assignment(s.owned_partitions) for m, s in owned_subs.items()}).values()
            )
            assert leaver.last_moved == owned_by_gone, (leaver.last_moved, owned_by_gone)
            assert leaver.last_withheld == 0
        del left, owned_subs
    return {"runs": runs}


# -- running, comparing, printing ---------------------------------------------------------------


def worker(shape: str, repeat: int) -> dict[str, Any]:
    if shape == "leader":
        return run_leader(repeat)
    return run_general(int(shape.split(":")[1]), repeat)


def in_process(python_path: str | None, shape: str, repeat: int) -> dict[str, Any]:
    """Run ``worker`` in a fresh process, with ``python_path`` first on the path if given."""
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", shape, "--repeat", str(repeat)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise SystemExit(f"{shape} under {python_path or 'this checkout'} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def figures(timings: list[Timing]) -> str:
    cpu = [c for c, _ in timings]
    wall = [w for _, w in timings]
    return (
        f"{min(cpu) * 1000:8.0f} ms cpu (median {statistics.median(cpu) * 1000:.0f}), "
        f"{min(wall) * 1000:6.0f} ms wall"
    )


def report(label: str, results: list[tuple[str, dict[str, Any]]], shape: str) -> None:
    for who, res in results:
        runs = res["runs"]
        tag = f"{label} [{who}]" if len(results) > 1 else label
        print(f"\n== {tag}")
        if shape == "leader":
            total_cpu = sum(min(c for c, _ in runs[p]) for p in runs if p != "machine")
            for name in ("decode", "assign", "leader_plan", "encode"):
                print(f"  {name:22s} {figures(runs[name])}")
            print(f"  {'four phases (sum)':22s} {total_cpu * 1000:8.0f} ms cpu")
            print(f"  {'GroupMember step':22s} {figures(runs['machine'])}")
            print(
                f"  output digest {res['digest']}, moved {res['moved']} (the minimum), withheld 0"
            )
        else:
            total = int(shape.split(":")[1]) * 500
            for case in ("fresh", "leave"):
                best = min(c for c, _ in runs[case])
                per = best / (total * math.log2(total)) * 1e9
                print(f"  {case:6s} {figures(runs[case])}   {per:5.1f} ns per P log2 P")
    if len(results) == 2 and shape == "leader":
        a, b = results[0][1], results[1][1]
        assert a["digest"] == b["digest"], f"outputs differ: {a['digest']} vs {b['digest']}"
        print("  same output bytes in both")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="leader,general")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="partitions per topic")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--compare", metavar="DIR", help="another checkout to run alongside")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker, args.repeat)))
        return 0
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cpus; load average {load:.1f}")
    shapes = []
    if "leader" in args.shapes:
        shapes.append(("leader step, 1M partitions x 2,000 members, one gone", "leader"))
    if "general" in args.shapes:
        for n in map(int, args.sizes.split(",")):
            label = f"general path, {n * 500:,} partitions (500 x {n}), 2,000 members"
            shapes.append((label, f"general:{n}"))
    for label, shape in shapes:
        if args.compare:
            # Take turns, one run each, so that load from other processes falls on both.
            merged: dict[str, dict[str, Any]] = {"this": {}, "compare": {}}
            for r in range(args.repeat):
                order = [("this", None), ("compare", args.compare)]
                for who, path in order if r % 2 == 0 else reversed(order):
                    res = in_process(path, shape, 1)
                    into = merged[who]
                    for key, value in res["runs"].items():
                        into.setdefault("runs", {}).setdefault(key, []).extend(value)
                    into.update({k: v for k, v in res.items() if k != "runs"})
            results = [("this checkout", merged["this"]), (args.compare, merged["compare"])]
            report(label, results, shape)
        else:
            report(label, [("", worker(shape, args.repeat))], shape)
    print(f"\nload average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
