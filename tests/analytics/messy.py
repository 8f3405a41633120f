"""Random but realistic-and-messy rebalance telemetry for audit equivalence checks.

``messy(directory, seed)`` writes 2-3 consumer groups (one JSONL file per member, written with
tests/analytics/synth.py's Recorder) and returns ``directory``. Everything is deterministic per
seed, and group / member names carry the seed (``s<seed>-...``) so that sets written for
different seeds can be audited together.

What the simulation plants, besides ordinary eager ("range") and cooperative
("cooperative-sticky", KIP-429 two-round) hand-offs:

* redundant ``partitions_assigned`` for partitions already owned (eager members that skip their
  revoke, re-listed / duplicated cooperative assignments);
* revokes of partitions not owned (extra partitions in a revoke, duplicated revoke events);
* zombies: a member stops heartbeating, its partitions go to others, and it keeps processing
  until a late ``partitions_lost`` (large overlaps); some lost events come before the
  reassignment instead (gaps);
* tiny clock-skewed overlaps (1-45 ms) between a revoke's end and the new owner's assign start;
* gaps: time between revoke and assign, partitions left out of an assignment for a generation;
* late joiners, early leavers (graceful / crash / vanish), a zombie that rejoins with a new
  member_id;
* files that end with partitions still owned (open intervals), with or without ``closed``;
* ``generation_id`` None on some partition events, ``rebalance_protocol`` missing on some;
* identical timestamps (shared join / assign / close moments, back-to-back hand-offs where the
  revoke ends exactly when the assign starts, zero-length callbacks);
* empty partition maps, duplicate partitions inside one list, callback errors;
* ``joined``, ``rebalance_completed`` (latency_s), ``rebalance_failed``, ``offsets_committed``,
  ``processed`` (topic, partition, first, last) and ``closed`` events;
* occasionally a truncated last line (a crashed writer) and a member split over two files.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from tests.analytics.synth import COOP, EAGER, Recorder

TOPIC_NAMES = ["orders", "payments", "clicks", "audit", "events", "billing"]
FAIL_REASONS = ["REBALANCE_IN_PROGRESS", "ILLEGAL_GENERATION", "UNKNOWN_MEMBER_ID",
                "CoordinatorNotAvailable", "timed out waiting for SyncGroup"]

TP = tuple[str, int]


class _Buffer:
    """Events collected out of order; emitted per member in time order (seq follows ts)."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, str, tuple[Any, ...], dict[str, Any]]] = []

    def add(self, ts: float, method: str, *args: Any, **kwargs: Any) -> None:
        self.items.append((ts, len(self.items), method, args, kwargs))

    def replay(self, r: Recorder) -> None:
        for _, _, method, args, kwargs in sorted(self.items, key=lambda x: (x[0], x[1])):
            getattr(r, method)(*args, **kwargs)


class _Group:
    def __init__(self, rng: random.Random, buf: _Buffer, seed: int, gi: int, protocol: str) -> None:
        self.rng = rng
        self.buf = buf
        self.name = f"s{seed}-g{gi}-{'coop' if protocol == COOP else 'eager'}"
        self.protocol = protocol
        self.coop = protocol == COOP
        topics = rng.sample(TOPIC_NAMES, rng.randint(1, 3))
        self.parts: list[TP] = [(t, p) for t in topics for p in range(rng.randint(1, 12))]
        n_members = rng.randint(2, 7)
        self.pending = [f"s{seed}-g{gi}-m{k}" for k in range(n_members)]
        self.active: list[str] = []
        self.holds: dict[str, set[TP]] = {}
        self.mgen: dict[str, int | None] = {}
        self.incarnation: dict[str, int] = {}
        self.offsets: dict[TP, int] = {tp: rng.randint(0, 1000) for tp in self.parts}
        self.gen = rng.randint(0, 4)
        # a cooperative round may take two generations: stay within 3-12 generations
        self.n_gens = rng.randint(3, 11) if self.coop else rng.randint(3, 12)
        self.first_gen = self.gen
        base = rng.choice([0.0, rng.uniform(100.0, 5000.0), 1.7e9 + rng.uniform(0.0, 1e8)])
        self.t = round(base, 3)
        self.hi = self.t
        self.zombies: list[str] = []  # crashed members that may rejoin later

    # ------------------------------------------------------------------ primitives
    def r6(self, x: float) -> float:
        return round(x, 6)

    def cb(self) -> float:
        """A callback duration: usually short, sometimes zero, sometimes slow."""
        x = self.rng.random()
        if x < 0.1:
            return 0.0
        if x < 0.85:
            return self.rng.uniform(0.0002, 0.05)
        return self.rng.uniform(0.2, 3.0)

    def member_id(self, m: str) -> str:
        return f"{m}-id-{self.incarnation.get(m, 0)}"

    def ev(self, m: str, type_: str, ts: float, **fields: Any) -> None:
        ts = self.r6(ts)
        self.hi = max(self.hi, ts)
        self.buf.add(ts, "event", self.name, m, type_, ts, member_id=self.member_id(m), **fields)

    def pmap(self, tps: set[TP]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for t, p in sorted(tps):
            out.setdefault(t, []).append(p)
        for ps in out.values():
            if self.rng.random() < 0.04:
                ps.append(self.rng.choice(ps))  # a partition listed twice
            if self.rng.random() < 0.2:
                self.rng.shuffle(ps)
        return out

    def pev(self, m: str, kind: str, gen: int | None, tps: set[TP], started: float,
            ended: float) -> None:
        """A partition event (ts = ended), with the odd None generation / missing field."""
        started, ended = self.r6(started), self.r6(ended)
        if self.rng.random() < 0.07:
            gen = None
        fields: dict[str, Any] = {
            "generation_id": gen,
            "protocol": self.protocol,
            "partitions": self.pmap(tps),
            "started": started,
            "ended": ended,
        }
        if self.rng.random() < 0.85:
            fields["rebalance_protocol"] = "cooperative" if self.coop else "eager"
        if self.rng.random() < 0.04:
            fields["error"] = "RuntimeError('callback failed')"
        self.hi = max(self.hi, ended)
        self.buf.add(ended, "event", self.name, m, f"partitions_{kind}", ended,
                     member_id=self.member_id(m), **fields)

    def rebalance_done(self, m: str, gen: int, ts: float, began: float) -> None:
        ts = self.r6(ts)
        self.ev(m, "rebalance_completed", ts, generation_id=gen,
                latency_s=round(ts - began + self.rng.uniform(0.0, 0.2), 6))

    def maybe_failed(self, m: str, ts: float) -> None:
        if self.rng.random() < 0.08:
            gen = self.rng.choice([self.mgen.get(m), None])
            self.ev(m, "rebalance_failed", ts, generation_id=gen,
                    reason=self.rng.choice(FAIL_REASONS),
                    latency_s=round(self.rng.uniform(0.01, 5.0), 6))

    def join(self, m: str, gen: int, ts: float) -> None:
        self.ev(m, "joined", ts, generation_id=gen, protocol=self.protocol)
        self.mgen[m] = gen

    def owners(self) -> dict[TP, set[str]]:
        own: dict[TP, set[str]] = {}
        for m, tps in self.holds.items():
            for tp in tps:
                own.setdefault(tp, set()).add(m)
        return own

    # ------------------------------------------------------------------ assignment
    def target(self, members: list[str]) -> dict[str, set[TP]]:
        """Eager: range assignor per topic. Cooperative: sticky balanced. Sometimes a partition
        is left out for a generation (a gap)."""
        members = sorted(members)
        out: dict[str, set[TP]] = {m: set() for m in members}
        parts = list(self.parts)
        if len(parts) > 1 and self.rng.random() < 0.12:
            parts.remove(self.rng.choice(parts))
        if not self.coop:
            topics: dict[str, list[int]] = {}
            for t, p in parts:
                topics.setdefault(t, []).append(p)
            for t, ps in topics.items():
                base, extra = divmod(len(ps), len(members))
                i = 0
                for k, m in enumerate(members):
                    n = base + (1 if k < extra else 0)
                    out[m] |= {(t, p) for p in ps[i:i + n]}
                    i += n
            return out
        base, extra = divmod(len(parts), len(members))
        pset = set(parts)
        order = sorted(members, key=lambda m: (-len(self.holds.get(m, set()) & pset), m))
        quota = {m: base + (1 if k < extra else 0) for k, m in enumerate(order)}
        taken: set[TP] = set()
        for m in order:
            keep = sorted(self.holds.get(m, set()) & pset - taken)[: quota[m]]
            out[m] = set(keep)
            taken |= out[m]
        free = [tp for tp in parts if tp not in taken]
        self.rng.shuffle(free)
        for m in order:
            while len(out[m]) < quota[m] and free:
                out[m].add(free.pop())
        return out

    # ------------------------------------------------------------------ life cycle
    def steady(self, until: float) -> None:
        """Processing and commits between rebalances."""
        for m in self.active:
            tps = sorted(self.holds.get(m, set()))
            if not tps:
                continue
            t = self.t
            for tp in self.rng.sample(tps, min(len(tps), self.rng.randint(1, 3))):
                t = self.rng.uniform(t, until)
                first = self.offsets[tp]
                last = first + self.rng.randint(0, 50)
                self.offsets[tp] = last + 1
                self.ev(m, "processed", t, generation_id=self.mgen.get(m), topic=tp[0],
                        partition=tp[1], first=first, last=last)
            if self.rng.random() < 0.7:
                t = self.rng.uniform(t, until)
                offsets: dict[str, dict[str, int]] = {}
                for tp in tps:
                    offsets.setdefault(tp[0], {})[str(tp[1])] = self.offsets[tp]
                self.ev(m, "offsets_committed", t, generation_id=self.mgen.get(m), offsets=offsets)

    def crash(self, m: str, reassigned_at: float) -> None:
        """m stops heartbeating. Zombie: keeps processing and learns of the loss late (an
        overlap), or early (a gap); or it simply vanishes (an open interval)."""
        rng = self.rng
        tps = set(self.holds.get(m, set()))
        x = rng.random()
        if x < 0.7 and tps:
            t = self.t
            lost_at = (reassigned_at + rng.uniform(0.3, 8.0)) if rng.random() < 0.65 else (
                self.t + rng.uniform(0.0, max(0.001, reassigned_at - self.t) * 0.8))
            for tp in rng.sample(sorted(tps), min(2, len(tps))):
                t = rng.uniform(t, lost_at)
                first = self.offsets[tp]
                self.ev(m, "processed", t, generation_id=self.mgen.get(m), topic=tp[0],
                        partition=tp[1], first=first, last=first + rng.randint(0, 9))
            d = self.cb()
            self.pev(m, "lost", self.mgen.get(m), tps, lost_at, lost_at + d)
            if rng.random() < 0.5:
                self.ev(m, "closed", lost_at + d + rng.uniform(0.0, 0.5),
                        generation_id=self.mgen.get(m))
            else:
                self.zombies.append(m)
        # else: vanish, the file just ends (open intervals, maybe a truncated line)
        self.holds[m] = set()
        self.active.remove(m)

    def leave(self, m: str, ts: float) -> float:
        """Graceful leave: revoke everything (in its last generation), then close."""
        started = ts + self.rng.uniform(0.0, 0.05)
        ended = started + self.cb()
        self.pev(m, "revoked", self.mgen.get(m), set(self.holds.get(m, set())), started, ended)
        self.ev(m, "closed", ended + self.rng.choice([0.0, 0.001, self.rng.uniform(0.0, 0.3)]),
                generation_id=self.mgen.get(m))
        self.holds[m] = set()
        self.active.remove(m)
        return ended

    def changes(self, first: bool) -> tuple[list[str], list[str], list[str]]:
        """(joiners, graceful leavers, crashers) for this round."""
        rng = self.rng
        if first:
            n = rng.randint(1, min(3, len(self.pending)))
            return [self.pending.pop(0) for _ in range(n)], [], []
        joiners: list[str] = []
        remaining = self.first_gen + self.n_gens - 1 - self.gen  # rounds left, at most
        if self.pending and (rng.random() < 0.4 or len(self.pending) >= remaining):
            joiners.append(self.pending.pop(0))
            if len(self.pending) >= remaining:  # everyone joins before the end
                joiners += self.pending
                self.pending = []
        if self.zombies and rng.random() < 0.3:
            z = self.zombies.pop(0)
            self.incarnation[z] = self.incarnation.get(z, 0) + 1
            joiners.append(z)
        leavers: list[str] = []
        crashers: list[str] = []
        if len(self.active) + len(joiners) >= 2 and rng.random() < 0.35:
            m = rng.choice(self.active)
            (crashers if rng.random() < 0.4 else leavers).append(m)
        if not joiners and not leavers and not crashers:
            # a rebalance with no membership change (metadata change, rejoin after an error)
            pass
        return joiners, leavers, crashers

    def eager_round(self, first: bool) -> None:
        rng = self.rng
        joiners, leavers, crashers = self.changes(first)
        T = self.t
        G = self.gen + (0 if first else 1)
        continuing = [m for m in self.active if m not in leavers and m not in crashers]
        participants = continuing + joiners
        J = T + rng.uniform(0.2, 1.5)
        A = J + rng.uniform(0.05, 0.5)
        shared_assign = rng.random() < 0.5
        tgt = self.target(participants)
        for m in crashers:
            self.crash(m, A)
        # revokes (old generation) of everyone still here
        handoff = rng.random()
        for m in list(self.active):
            self.maybe_failed(m, T + rng.uniform(-0.5, 0.0))
            if m in leavers:
                self.leave(m, T)
                continue
            held = set(self.holds.get(m, set()))
            if not first and held and rng.random() < 0.15:
                continue  # skips its revoke: keeps (and is re-assigned) what it had
            started = T + rng.uniform(0.0, 0.1)
            ended = started + self.cb()
            moving = any(tp not in tgt.get(m, set()) for tp in held)
            if handoff < 0.25:
                ended = max(started, A)  # back-to-back: revoke ends exactly at assign start
            elif handoff < 0.5 and moving:
                ended = A + rng.uniform(0.001, 0.045)  # tiny skewed overlap
            extra = set()
            if rng.random() < 0.1:
                extra = {rng.choice(self.parts)} - held  # revoke of a partition not owned
            self.pev(m, "revoked", self.mgen.get(m), held | extra, started, ended)
            if rng.random() < 0.05:
                self.pev(m, "revoked", self.mgen.get(m), held, ended, ended + self.cb())
            self.holds[m] = set()
        shared_join = rng.random() < 0.6
        for m in participants:
            self.join(m, G, J if shared_join else J + rng.uniform(-0.1, 0.1))
            if m not in self.active:
                self.active.append(m)
        for m in participants:
            started = A if shared_assign else A + rng.uniform(0.0, 0.05)
            ended = started + self.cb()
            self.pev(m, "assigned", G, tgt[m], started, ended)
            if rng.random() < 0.05:  # duplicated assigned event: all already owned
                self.pev(m, "assigned", G, tgt[m], ended, ended + self.cb())
            self.holds[m] = set(self.holds.get(m, set())) | tgt[m]
            self.rebalance_done(m, G, ended + rng.choice([0.0, 0.0002]), T)
        self.gen = G

    def coop_round(self, first: bool) -> None:
        rng = self.rng
        joiners, leavers, crashers = self.changes(first)
        T = self.t
        G = self.gen + (0 if first else 1)
        continuing = [m for m in self.active if m not in leavers and m not in crashers]
        participants = continuing + joiners
        J = T + rng.uniform(0.2, 1.5)
        A1 = J + rng.uniform(0.05, 0.5)
        for m in crashers:
            self.crash(m, A1)
        for m in leavers:
            self.maybe_failed(m, T - rng.uniform(0.0, 0.5))
            self.leave(m, T)
        tgt = self.target(participants)
        own = self.owners()
        shared_join = rng.random() < 0.6
        for m in participants:
            self.join(m, G, J if shared_join else J + rng.uniform(-0.1, 0.1))
            if m not in self.active:
                self.active.append(m)
                self.holds.setdefault(m, set())
        revoke = {m: self.holds[m] - tgt[m] for m in participants}
        revoked_all = set().union(*revoke.values()) if revoke else set()
        rev_end: dict[TP, float] = {}
        round2 = any(revoke.values())
        for m in participants:
            self.maybe_failed(m, J - rng.uniform(0.0, 0.3))
            t0 = A1 + rng.uniform(0.0, 0.05)
            if revoke[m] or rng.random() < 0.05:
                extra = set()
                if rng.random() < 0.12:
                    extra = {rng.choice(self.parts)} - self.holds[m]  # not owned
                ended = t0 + self.cb()
                self.pev(m, "revoked", G, revoke[m] | extra, t0, ended)
                for tp in revoke[m]:
                    rev_end[tp] = ended
                self.holds[m] -= revoke[m]
                t0 = ended
            # incremental assignment of partitions nobody holds any more
            new = {tp for tp in tgt[m] - self.holds[m]
                   if tp not in revoked_all and not (own.get(tp, set()) - {m} - set(leavers)
                                                     - set(crashers))}
            if rng.random() < 0.12 and self.holds[m]:
                new |= {rng.choice(sorted(self.holds[m]))}  # re-listed: already owned
            if new or rng.random() < 0.7:
                ended = t0 + self.cb()
                self.pev(m, "assigned", G, new, t0, ended)
                self.holds[m] |= new
                if not round2:
                    self.rebalance_done(m, G, ended, T)
        if round2:
            G2 = G + 1
            J2 = max([*rev_end.values(), A1]) + rng.uniform(0.01, 0.5)
            A2 = J2 + rng.uniform(0.02, 0.3)
            for m in participants:
                self.join(m, G2, J2)
            skew = rng.random() < 0.4
            for m in participants:
                new = tgt[m] - self.holds[m]
                started = A2 + rng.uniform(0.0, 0.02)
                if skew and new:
                    latest = max((rev_end.get(tp, 0.0) for tp in new), default=0.0)
                    if latest:
                        started = latest - rng.uniform(0.001, 0.045)  # tiny skewed overlap
                if new or rng.random() < 0.5:
                    ended = started + self.cb()
                    self.pev(m, "assigned", G2, new, started, ended)
                    if rng.random() < 0.04:
                        self.pev(m, "assigned", G2, new, ended, ended)  # duplicated
                    self.holds[m] |= new
                    self.rebalance_done(m, G2, ended, T)
                else:
                    self.rebalance_done(m, G2, A2 + rng.uniform(0.0, 0.05), T)
            G = G2
        self.gen = G

    def finish(self) -> None:
        rng = self.rng
        T = self.t
        shared_close = T + rng.uniform(0.5, 2.0)
        for m in list(self.active):
            x = rng.random()
            if x < 0.4:
                ended = self.leave(m, T)
                del ended
            elif x < 0.6:
                # closed without revoking: intervals stay open
                self.ev(m, "closed", shared_close, generation_id=self.mgen.get(m))
                self.active.remove(m)
            else:
                pass  # the file just ends (open intervals)

    def run(self) -> None:
        rng = self.rng
        first = True
        while first or self.gen < self.first_gen + self.n_gens - 1:
            if self.coop:
                self.coop_round(first)
            else:
                self.eager_round(first)
            first = False
            self.t = max(self.t, self.hi) + rng.uniform(0.01, 1.0)
            until = self.t + rng.uniform(3.0, 40.0)
            self.steady(until)
            self.t = round(until + rng.uniform(0.0, 2.0), 3)
            if not self.active:
                break
        self.finish()


def messy(directory: Path, seed: int) -> Path:
    """Write a messy event set for ``seed`` into ``directory`` (one file per member)."""
    rng = random.Random(seed)
    directory = Path(directory)
    buf = _Buffer()
    n_groups = rng.randint(2, 3)
    protocols = [EAGER, COOP] + [rng.choice([EAGER, COOP]) for _ in range(n_groups - 2)]
    rng.shuffle(protocols)
    for gi, protocol in enumerate(protocols):
        _Group(rng, buf, seed, gi, protocol).run()
    r = Recorder(directory)
    buf.replay(r)
    r.write()
    _postprocess(directory, rng)
    return directory


def _postprocess(directory: Path, rng: random.Random) -> None:
    """Occasionally: a truncated last line (crashed writer); a member split over two files."""
    files = sorted(directory.glob("*.0000.jsonl"))
    if files and rng.random() < 0.5:
        f = rng.choice(files)
        lines = f.read_text().splitlines()
        cut = json.dumps({"v": 1, "type": "processed", "ts": 1.0, "group": "x", "member": "x"})
        f.write_text("\n".join(lines) + "\n" + cut[: rng.randint(5, len(cut) - 5)] + "\n")
    if files and rng.random() < 0.5:
        f = rng.choice(files)
        lines = f.read_text().splitlines()
        if len(lines) > 3:
            k = rng.randint(1, len(lines) - 1)
            f.write_text("\n".join(lines[:k]) + "\n")
            f.with_name(f.name.replace(".0000.", ".0001.")).write_text("\n".join(lines[k:]) + "\n")

