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
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.range import RangeAssignor
from aiogroup.assignors.sticky import StickyAssignor
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
    encode_sticky_user_data,
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


def uniform_inputs(partitions: int) -> tuple[dict[str, int], dict[str, list[str]]]:
    """500 topics x ``partitions``, 2,000 members all subscribed to every topic."""
    ppt = {f"topic-{t:04d}": partitions for t in range(500)}
    names = sorted(ppt)
    return ppt, {f"consumer-{m:05d}": names for m in range(2000)}


# -- racks (KIP-881) ----------------------------------------------------------------------------

ASSIGNORS = ("cooperative-sticky", "sticky", "range")


@dataclass(frozen=True)
class Racks:
    """How racks are laid out: ``count`` racks (0: none), ``replicas`` per partition, placed
    round-robin (partition ``i`` of the group, counting topic by topic, on racks ``i``,
    ``i+1``, ... mod ``count``) or at random (``random``, seeded); member ``m`` in rack
    ``m mod count``."""

    count: int = 0
    replicas: int = 3
    random: bool = False
    seed: int = 11

    def names(self) -> list[str]:
        return [f"rack-{r}" for r in range(self.count)]

    def of_partitions(self, ppt: Mapping[str, int]) -> dict[str, list[frozenset[str]]]:
        names = self.names()
        r = min(self.replicas, self.count)
        rnd = random.Random(self.seed)
        cache: dict[tuple[int, ...], frozenset[str]] = {}
        out: dict[str, list[frozenset[str]]] = {}
        i = 0
        for topic in sorted(ppt):
            racks = []
            for _ in range(ppt[topic]):
                if self.random:
                    key = tuple(sorted(rnd.sample(range(self.count), r)))
                else:
                    key = tuple(sorted((i + k) % self.count for k in range(r)))
                i += 1
                if key not in cache:
                    cache[key] = frozenset(names[k] for k in key)
                racks.append(cache[key])
            out[topic] = racks
        return out

    def of_members(self, members: list[str]) -> dict[str, str]:
        names = self.names()
        return {m: names[k % self.count] for k, m in enumerate(sorted(members))}


def match_count(
    result: Mapping[str, Assignment],
    member_rack: Mapping[str, str],
    partition_racks: Mapping[str, list[frozenset[str]]],
) -> tuple[int, int]:
    """(partitions on a member whose rack holds a replica, partitions assigned)."""
    matched = assigned = 0
    for m, a in result.items():
        rack = member_rack.get(m)
        for t, ps in a.partitions.items():
            assigned += len(ps)
            if rack is not None:
                of_topic = partition_racks[t]
                matched += sum(1 for p in ps if rack in of_topic[p])
    return matched, assigned


def new_assignor(name: str) -> PartitionAssignor:
    if name == "cooperative-sticky":
        return CooperativeStickyAssignor()
    if name == "sticky":
        return StickyAssignor()
    return RangeAssignor()


def run_assign(
    assignor: PartitionAssignor,
    ppt: Mapping[str, int],
    subs: Mapping[str, Subscription],
    partition_racks: Mapping[str, list[frozenset[str]]] | None,
) -> dict[str, Assignment]:
    """``assign`` without racks (what a checkout before KIP-881 has), else ``assign_partitions``
    with them."""
    if partition_racks is None:
        return assignor.assign(ppt, subs)
    call = getattr(assignor, "assign_partitions")  # noqa: B009 - absent before KIP-881
    result: dict[str, Assignment] = call(ppt, subs, partition_racks)
    return result


def moved_between(prev: Mapping[str, Assignment], now: Mapping[str, Assignment]) -> int:
    """Partitions whose owner changed from ``prev`` to ``now`` (the leaver's included)."""
    owner = {(t, p): m for m, a in prev.items() for t, ps in a.partitions.items() for p in ps}
    return sum(
        1
        for m, a in now.items()
        for t, ps in a.partitions.items()
        for p in ps
        if owner.get((t, p)) != m
    )


def run_groups(
    shape: str, repeat: int, assignor_name: str = "cooperative-sticky", racks: Racks = Racks()
) -> dict[str, Any]:
    """``general:N`` or ``uniform:N``: a fresh assignment, then one member leaving, with
    ``assignor_name``, and with racks when ``racks.count`` is set."""
    kind, n = shape.split(":")
    ppt, topics = general_inputs(int(n)) if kind == "general" else uniform_inputs(int(n))
    total = sum(ppt.values())
    member_rack = racks.of_members(list(topics)) if racks.count else {}
    partition_racks = racks.of_partitions(ppt) if racks.count else None
    sticky = assignor_name != "range"
    runs: dict[str, list[Timing]] = {"fresh": [], "leave": []}
    stats: dict[str, Any] = {}
    for r in range(repeat):
        gc.collect()
        assignor = new_assignor(assignor_name)
        subs = {m: Subscription(ts, rack_id=member_rack.get(m)) for m, ts in topics.items()}
        timing, fresh = clock(partial(run_assign, assignor, ppt, subs, partition_racks))
        runs["fresh"].append(timing)
        if r == 0:
            check_valid_complete(ppt, topics, {m: a.partitions for m, a in fresh.items()})
            sizes = loads(fresh)
            stats["fresh_spread"] = max(sizes.values()) - min(sizes.values())
            stats["fresh_violations"] = balance_violations(ppt, topics, fresh)
            if partition_racks is not None:
                stats["fresh_matched"] = match_count(fresh, member_rack, partition_racks)[0]
            if sticky:
                assert stats["fresh_violations"] == 0, "fresh: not balanced"
                assert assignor.last_moved == total  # type: ignore[attr-defined]
        gone = sorted(topics)[len(topics) // 2]
        rest = {m: ts for m, ts in topics.items() if m != gone}
        owned_subs = {
            m: Subscription(
                ts,
                encode_sticky_user_data(fresh[m].partitions, 1)
                if assignor_name == "sticky"
                else None,
                owned_partitions=fresh[m].partitions if assignor_name != "sticky" else {},
                generation_id=1,
                rack_id=member_rack.get(m),
            )
            for m, ts in rest.items()
        }
        gc.collect()
        leaver = new_assignor(assignor_name)
        timing, left = clock(partial(run_assign, leaver, ppt, owned_subs, partition_racks))
        runs["leave"].append(timing)
        if r == 0:
            withheld = getattr(leaver, "last_withheld", 0)
            if withheld == 0:
                check_valid_complete(ppt, rest, {m: a.partitions for m, a in left.items()})
            sizes = loads(left)
            stats["leave_spread"] = max(sizes.values()) - min(sizes.values())
            stats["leave_violations"] = balance_violations(ppt, rest, left)
            stats["withheld"] = withheld
            owned_by_gone = sum(map(len, fresh[gone].partitions.values()))
            stats["leaver_owned"] = owned_by_gone
            stats["moved"] = (
                leaver.last_moved  # type: ignore[attr-defined]
                if sticky
                else moved_between(fresh, left)
            )
            if partition_racks is not None:
                matched, assigned = match_count(left, member_rack, partition_racks)
                stats["leave_matched"], stats["leave_assigned"] = matched, assigned
            if withheld:
                # Cooperative: what changed owner was withheld (KIP-429); the follow-up round,
                # once it is revoked, completes the plan: its balance and match are the ones
                # that last.
                second = {
                    m: Subscription(
                        ts,
                        owned_partitions=left[m].partitions,
                        generation_id=2,
                        rack_id=member_rack.get(m),
                    )
                    for m, ts in rest.items()
                }
                follow = run_assign(leaver, ppt, second, partition_racks)
                # The follow-up round withholds nothing (the rack swaps move only partitions that
                # change hands anyway); printed as well as checked.
                stats["follow_withheld"] = getattr(leaver, "last_withheld", 0)
                assert not stats["follow_withheld"], f"withheld {stats['follow_withheld']} again"
                check_valid_complete(ppt, rest, {m: a.partitions for m, a in follow.items()})
                sizes = loads(follow)
                stats["leave_spread"] = max(sizes.values()) - min(sizes.values())
                stats["leave_violations"] = balance_violations(ppt, rest, follow)
                stats["moved"] = moved_between(fresh, follow)
                if partition_racks is not None:
                    matched, assigned = match_count(follow, member_rack, partition_racks)
                    stats["leave_matched"], stats["leave_assigned"] = matched, assigned
            if sticky and not stats.get("follow_withheld"):
                assert stats["leave_violations"] == 0, "leave: not balanced"
            if sticky and partition_racks is None:
                assert stats["moved"] == owned_by_gone, (stats["moved"], owned_by_gone)
                assert withheld == 0
        del fresh, left, owned_subs
    return {"runs": runs, "total": total, **stats}


def run_general(partitions: int, repeat: int) -> dict[str, Any]:
    return run_groups(f"general:{partitions}", repeat)


# -- running, comparing, printing ---------------------------------------------------------------


def worker(shape: str, repeat: int, assignor: str, racks: Racks) -> dict[str, Any]:
    if shape == "leader":
        return run_leader(repeat)
    return run_groups(shape, repeat, assignor, racks)


def in_process(
    python_path: str | None, shape: str, repeat: int, assignor: str, racks: Racks
) -> dict[str, Any]:
    """Run ``worker`` in a fresh process, with ``python_path`` first on the path if given."""
    env = dict(os.environ)
    if python_path:
        env["PYTHONPATH"] = python_path
    cmd = [
        sys.executable,
        os.path.abspath(__file__),
        "--worker",
        shape,
        "--repeat",
        str(repeat),
        "--assignor",
        assignor,
        "--worker-racks",
        json.dumps(asdict(racks)),
    ]
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


def quality(res: Mapping[str, Any]) -> str:
    """Balance, rack match and moves of one worker's first run."""
    total = res["total"]
    out = [
        f"max-min load fresh {res['fresh_spread']} / leave {res['leave_spread']}",
        f"balance violations {res['fresh_violations']} / {res['leave_violations']}",
    ]
    if "fresh_matched" in res:
        out.append(
            f"rack match fresh {res['fresh_matched'] / total:.2%} / leave "
            f"{res['leave_matched'] / res['leave_assigned']:.2%}"
        )
    out.append(
        f"leave moved {res['moved']} (the leaver owned {res['leaver_owned']})"
        + (
            f", withheld {res['withheld']} in the first round (balance, match and moves after "
            f"the follow-up round, which withheld {res.get('follow_withheld', 0)})"
            if res["withheld"]
            else ""
        )
    )
    return "; ".join(out)


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
            total = res["total"]
            for case in ("fresh", "leave"):
                best = min(c for c, _ in runs[case])
                per = best / (total * math.log2(total)) * 1e9
                print(f"  {case:6s} {figures(runs[case])}   {per:5.1f} ns per P log2 P")
            print(f"  {quality(res)}")
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
    parser.add_argument(
        "--assignor", choices=ASSIGNORS, default="cooperative-sticky", help="for the groups"
    )
    parser.add_argument(
        "--racks", type=int, default=0, help="racks (KIP-881); 0: no rack anywhere (default)"
    )
    parser.add_argument("--replicas", type=int, default=3, help="replicas per partition")
    parser.add_argument(
        "--rack-layout",
        choices=("round-robin", "random"),
        default="round-robin",
        help="how replicas are placed on racks",
    )
    parser.add_argument("--rack-seed", type=int, default=11, help="for --rack-layout random")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--worker-racks", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        racks = Racks(**json.loads(args.worker_racks)) if args.worker_racks else Racks()
        print(json.dumps(worker(args.worker, args.repeat, args.assignor, racks)))
        return 0
    racks = Racks(args.racks, args.replicas, args.rack_layout == "random", args.rack_seed)
    load = os.getloadavg()[0]
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cpus; load average {load:.1f}")
    print(
        f"groups: {args.assignor}; "
        + (
            f"{racks.count} racks, {racks.replicas} replicas per partition ({args.rack_layout})"
            if racks.count
            else "no racks"
        )
    )
    shapes = []
    if "leader" in args.shapes:
        shapes.append(("leader step, 1M partitions x 2,000 members, one gone", "leader"))
    if "general" in args.shapes:
        for n in map(int, args.sizes.split(",")):
            label = f"general path, {n * 500:,} partitions (500 x {n}), 2,000 members"
            shapes.append((label, f"general:{n}"))
    if "uniform" in args.shapes:
        for n in map(int, args.sizes.split(",")):
            label = f"equal subscriptions, {n * 500:,} partitions (500 x {n}), 2,000 members"
            shapes.append((label, f"uniform:{n}"))
    for label, shape in shapes:
        if args.compare:
            # Take turns, one run each, so that load from other processes falls on both.
            merged: dict[str, dict[str, Any]] = {"this": {}, "compare": {}}
            for r in range(args.repeat):
                order = [("this", None), ("compare", args.compare)]
                for who, path in order if r % 2 == 0 else reversed(order):
                    res = in_process(path, shape, 1, args.assignor, racks)
                    into = merged[who]
                    for key, value in res["runs"].items():
                        into.setdefault("runs", {}).setdefault(key, []).extend(value)
                    into.update({k: v for k, v in res.items() if k != "runs"})
            results = [("this checkout", merged["this"]), (args.compare, merged["compare"])]
            report(label, results, shape)
        else:
            report(label, [("", worker(shape, args.repeat, args.assignor, racks))], shape)
    print(f"\nload average now {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
