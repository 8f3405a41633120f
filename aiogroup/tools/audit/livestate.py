"""The live audit's state of one consumer group, in plain Python (the streaming job keeps one per
group as Spark state, :mod:`aiogroup.tools.audit.live`).

It applies the batch audit's definitions (docs/audit.md, "Definitions") to events as they come:

* an **interval** opens at the *start* of an assigned callback for a partition the member does
  not own, and closes at the *end* of its next revoked or lost callback (an assignment of an
  owned partition and a release of an unowned one are redundant, as in the batch audit); while
  open, it ends at the member's last event;
* an **overlap episode** is a stretch with two or more owners of one partition, from a sweep
  over the partition's interval boundaries with ends before starts at equal times;
* an episode is **alerted** once the watermark (the members' latest event time less the allowed
  clock skew and lateness) shows two owners throughout more than the tolerance: an owner whose
  release is merely late, within the watermark, is never reported;
* a partition is **unowned** from its last owner's release until the next assignment;
* a **rebalance is in flight** for a member from the first sign of one (a revoked or lost
  callback, a join, an aiogroup member's state leaving ``stable``) until its completion
  (``rebalance_completed`` or ``rebalance_failed``, ``stable``, or ``closed``).

Closed intervals are kept only while a later interval could still overlap them (their end is
past the watermark), so the state stays the size of the group's current assignment.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GroupLive", "Row", "episodes"]

#: One output row: ``(kind, body)``; kinds ``interval``, ``alert``, ``status``.
Row = tuple[str, dict[str, Any]]
_RELEASES = {"partitions_revoked": "revoked", "partitions_lost": "lost"}
_SETTLED = {"rebalance_completed", "rebalance_failed", "closed"}


def _cooperative(event: Mapping[str, Any]) -> bool:
    """As the batch audit's ``_events``: a cooperative protocol, case-insensitively."""
    rp = str(event.get("rebalance_protocol") or "")
    if rp.lower() == "cooperative":
        return True
    return "cooperative" in str(event.get("protocol") or "").lower()


def _moment(e: Mapping[str, Any]) -> float:
    """When an event counts (the batch audit's ``t``): an assignment at the start of its
    callback, a release at its end (never before its start), anything else when written."""
    kind = e.get("type")
    if kind == "partitions_assigned" and e.get("started") is not None:
        return float(e["started"])
    if kind in _RELEASES and e.get("ended") is not None and e.get("started") is not None:
        return max(float(e["ended"]), float(e["started"]))
    return float(e["ts"])


def episodes(intervals: Iterable[tuple[str, float, float, Any]]) -> list[dict[str, Any]]:
    """Overlap episodes of one partition's intervals ``(member, start, end, generation)``: a
    sweep over the boundaries, ends before starts at equal times (the batch audit's
    ``_segments``). Each episode: start, end (``inf`` while open), max_owners, members and
    generations of the intervals that intersect it."""
    ivs = list(intervals)
    bounds = sorted([(s, 1) for _, s, e, _ in ivs] + [(e, -1) for _, s, e, _ in ivs])
    out: list[dict[str, Any]] = []
    owners = 0
    current: dict[str, Any] | None = None
    for i, (t, delta) in enumerate(bounds):
        owners += delta
        next_t = bounds[i + 1][0] if i + 1 < len(bounds) else None
        if next_t is None or next_t <= t:
            continue  # an empty segment
        if owners >= 2:
            if current is None:
                current = {"start": t, "end": next_t, "max_owners": owners}
                out.append(current)
            current["end"] = next_t
            current["max_owners"] = max(current["max_owners"], owners)
        else:
            current = None
    for ep in out:
        inside = [(m, g) for m, s, e, g in ivs if s < ep["end"] and e > ep["start"]]
        ep["members"] = sorted({m for m, _ in inside})
        ep["generations"] = sorted({g for _, g in inside if g is not None})
    return out


@dataclass
class GroupLive:
    """One group's live state (see the module doc); JSON in and out (:meth:`dumps`)."""

    group: str
    #: member -> {"end": last event time, "rebalancing": since (or None), "gen": generation}
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: "topic\tpartition" -> member -> [start, generation, cooperative] (the open intervals)
    owned: dict[str, dict[str, list[Any]]] = field(default_factory=dict)
    #: "topic\tpartition" -> closed intervals [member, start, end, generation] still in reach
    closed: dict[str, list[list[Any]]] = field(default_factory=dict)
    #: "topic\tpartition" -> when its last owner released it (only while nobody owns it)
    unowned: dict[str, float] = field(default_factory=dict)
    #: "topic\tpartition" -> starts of the episodes alerted
    alerted: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def loads(cls, group: str, text: str | None) -> GroupLive:
        if not text:
            return cls(group)
        raw = json.loads(text)
        return cls(group, raw["members"], raw["owned"], raw["closed"], raw["unowned"],
                   raw["alerted"])

    def dumps(self) -> str:
        return json.dumps({"members": self.members, "owned": self.owned, "closed": self.closed,
                           "unowned": self.unowned, "alerted": self.alerted},
                          separators=(",", ":"))

    def step(self, events: Iterable[Mapping[str, Any]], watermark: float,
             tolerance: float) -> tuple[list[Row], float | None]:
        """One call of the streaming job for this group: a micro-batch's events, or none (an
        event-time timeout). Applies them, judges at ``watermark``, prunes; returns the rows
        (closed intervals, alerts, then the group's status) and when the next pending episode
        would be confirmed (the timeout to set; None: nothing pending)."""
        rows, touched = self.apply(events)
        alerts, pending = self.judge(touched, watermark, tolerance)
        self.prune(watermark)
        return [*rows, *alerts, ("status", self.status(watermark))], pending

    # -- events ----------------------------------------------------------------------------

    def apply(self, events: Iterable[Mapping[str, Any]]) -> tuple[list[Row], set[str]]:
        """Apply usable events (any order: they are sorted as the batch audit pairs them, by
        member, ts, seq). Returns the closed intervals and the partitions touched."""
        rows: list[Row] = []
        touched: set[str] = set()
        ordered = sorted(events, key=lambda e: (str(e["member"]), float(e["ts"]),
                                                int(e.get("seq") or 0), _moment(e)))
        speakers = {str(e["member"]) for e in ordered}
        for e in ordered:
            member = str(e["member"])
            kind = str(e["type"])
            info = self.members.setdefault(member, {"end": -math.inf, "rebalancing": None,
                                                    "gen": None})
            ts = float(e["ts"])
            info["end"] = max(info["end"], ts, float(e.get("ended") or ts))
            gen = e.get("generation_id")
            if gen is not None:
                info["gen"] = int(gen)
            self._rebalance(info, kind, e, ts)
            if kind == "partitions_assigned":
                t = float(e["started"])
                for key in self._partitions(e):
                    touched.add(key)
                    owners = self.owned.setdefault(key, {})
                    if member not in owners:
                        owners[member] = [t, gen, _cooperative(e)]
                        self.unowned.pop(key, None)
            elif kind in _RELEASES:
                t = max(float(e["ended"]), float(e["started"]))
                for key in self._partitions(e):
                    owners = self.owned.get(key, {})
                    if member not in owners:
                        continue
                    touched.add(key)
                    start, start_gen, coop = owners.pop(member)
                    end = max(t, start)
                    self.closed.setdefault(key, []).append([member, start, end, start_gen])
                    if not owners:
                        self.owned.pop(key, None)
                        self.unowned[key] = max(end, self.unowned.get(key, -math.inf))
                    topic, partition = key.split("\t")
                    rows.append(("interval", {
                        "topic": topic, "partition": int(partition), "member": member,
                        "generation_id": start_gen, "coop": coop, "start": start, "end": end,
                        "end_kind": _RELEASES[kind], "end_gen": gen,
                        "end_coop": _cooperative(e)}))
        # an open interval lasts until its member's last event: every member that spoke
        # extends the episodes of what it owns
        touched.update(k for k, owners in self.owned.items() if speakers & owners.keys())
        return rows, touched

    @staticmethod
    def _partitions(e: Mapping[str, Any]) -> list[str]:
        parts = e.get("partitions") or {}
        if isinstance(parts, str):
            parts = json.loads(parts)
        return [f"{topic}\t{int(p)}" for topic, ps in sorted(parts.items()) for p in ps or ()
                if p is not None and 0 <= int(p) <= 2**31 - 1]

    @staticmethod
    def _rebalance(info: dict[str, Any], kind: str, e: Mapping[str, Any], ts: float) -> None:
        state = e.get("state") if kind == "state" else None
        if kind in _SETTLED or state == "stable":
            info["rebalancing"] = None
        elif info["rebalancing"] is None and (
            kind in ("joined", *_RELEASES) or (state is not None and state != "stable")
        ):
            info["rebalancing"] = float(e.get("started") or ts) if kind in _RELEASES else ts

    # -- judging ---------------------------------------------------------------------------

    def intervals_of(self, key: str) -> list[tuple[str, float, float, Any]]:
        """The partition's intervals in reach: closed ones, then open ones, which end at their
        member's last event so far (as the batch audit ends them: an owner that went silent
        is not known to own anything after its last word)."""
        out = [(m, s, e, g) for m, s, e, g in self.closed.get(key, [])]
        out += [(m, s, max(s, self.members[m]["end"]), g)
                for m, (s, g, _) in self.owned.get(key, {}).items()]
        return out

    def judge(self, keys: Iterable[str], watermark: float, tolerance: float) -> tuple[
            list[Row], float | None]:
        """Alerts for the episodes that the watermark now confirms, of ``keys`` and of every
        partition with an interval in reach (an owner now, or a closed interval an episode
        may still be waiting on: an event-time timeout brings no keys, and the episode it was
        set for may be between two intervals that both closed); the event time at which the
        next one would be confirmed (None: nothing pending)."""
        rows: list[Row] = []
        pending: float | None = None
        for key in sorted(set(keys) | set(self.owned) | set(self.closed)):
            done = self.alerted.setdefault(key, [])
            open_now = set(self.owned.get(key, {}))
            for ep in episodes(self.intervals_of(key)):
                if ep["start"] in done:
                    continue
                confirmed = min(ep["end"], watermark) - ep["start"]
                if confirmed > tolerance:
                    done.append(ep["start"])
                    topic, partition = key.split("\t")
                    rows.append(("alert", {
                        "topic": topic, "partition": int(partition), "start": ep["start"],
                        "members": ep["members"], "generations": ep["generations"],
                        "ongoing": len(open_now & set(ep["members"])) >= 2,
                        "watermark": watermark}))
                elif ep["end"] - ep["start"] > tolerance:
                    due = ep["start"] + tolerance
                    pending = due if pending is None else min(pending, due)
            if not done:
                self.alerted.pop(key, None)
        return rows, pending

    def prune(self, watermark: float) -> None:
        """Forget closed intervals no later event can overlap: ended before the watermark and
        before every open interval of their partition began (an ongoing episode keeps its
        start)."""
        for key in list(self.closed):
            opened = [o[0] for o in self.owned.get(key, {}).values()]
            reach = min([watermark, *opened])
            kept = [iv for iv in self.closed[key] if iv[2] >= reach]
            if kept:
                self.closed[key] = kept
            else:
                del self.closed[key]
            earliest = min([iv[1] for iv in kept] + opened, default=None)
            if key in self.alerted:
                self.alerted[key] = [s for s in self.alerted[key]
                                     if earliest is not None and s >= earliest]

    def status(self, watermark: float) -> dict[str, Any]:
        """What the group looks like now: partitions unowned (since when), members
        rebalancing (since when), open intervals (ending at their member's last event)."""
        def split(key: str) -> tuple[str, int]:
            topic, partition = key.split("\t")
            return topic, int(partition)

        return {
            "watermark": watermark,
            "unowned": [[*split(k), since] for k, since in sorted(self.unowned.items())],
            "rebalancing": {m: i["rebalancing"] for m, i in sorted(self.members.items())
                            if i["rebalancing"] is not None},
            "generation": max((i["gen"] for i in self.members.values() if i["gen"] is not None),
                              default=None),
            "open": [[*split(k), m, s, g, c, self.members[m]["end"]]
                     for k, owners in sorted(self.owned.items())
                     for m, (s, g, c) in sorted(owners.items())],
        }
