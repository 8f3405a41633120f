"""``aiogroup group watch`` on a terminal: one screen redrawn in place.

When stdout is a terminal (and neither ``--json`` nor ``--plain`` is given), ``watch`` does not
append lines: it switches to the terminal's alternate screen, hides the cursor and redraws every
``--interval`` (cursor home, each line cleared to its end, the rest of the screen cleared) a
header (group, state, protocol, generation or group epoch, members, migration stage, the
next-bounce verdict), the members (client id, member id, host, the protocol each speaks, its
partitions, its lag with ``--lag``), the lag per partition (trimmed to the terminal's height)
and in total, and the rebalances seen since the watch began: when each was first seen, how long
until the group was settled again, who joined and left and which partitions moved from whom to
whom. On exit (``--until``, ``--timeout``, Ctrl-C, SIGTERM) the cursor is shown again, the
alternate screen left and the last summary line printed on the normal screen.

What moved is derived from successive snapshots (:class:`RebalanceTracker`, sans-I/O): the
owners of every partition when the group was last settled against the owners once it is settled
again. Seen from outside, a rebalance's start and end are known only to the polling interval;
a rebalance that begins and ends between two polls is seen by its new generation (or epoch)
alone; a classic cooperative rebalance shows as two (revoke, then assign), and a broker that
returns no assignments (Tansu) shows who joined and left but not what moved.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from aiogroup.errors import AiogroupError
from aiogroup.inspector import (
    Assessment,
    GroupDescription,
    GroupInspector,
    GroupWatch,
    format_partitions,
)
from aiogroup.migration import migration_status
from aiogroup.protocol.types import TopicPartition

__all__ = ["Rebalance", "RebalanceTracker", "render_screen", "watch_screen"]

#: Enter the alternate screen and hide the cursor; the reverse; redraw from the top left.
ENTER = "\x1b[?1049h\x1b[?25l"
LEAVE = "\x1b[?25h\x1b[?1049l"
HOME = "\x1b[H"
CLEAR_LINE = "\x1b[K"
CLEAR_BELOW = "\x1b[J"
#: Rebalances kept on screen.
KEEP = 8


@dataclass
class Rebalance:
    """One rebalance as seen from outside: a generation (classic) or group epoch (KIP-848)
    change, from the first snapshot that showed it to the first one settled again."""

    seen: float  # wall clock of the first snapshot showing it
    seen_mono: float
    before: int | None  # generation or group epoch when last settled (None: unknown)
    after: int | None = None
    settled_mono: float | None = None
    #: True when it began and ended between two polls (only the new generation was seen);
    #: ``gap`` is then the time between them, an upper bound of its duration.
    between_polls: bool = False
    gap: float = 0.0
    #: True when it was under way as the watch began.
    before_watch: bool = False
    joined: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)
    #: (partitions, from, to): ``-`` for nobody.
    moved: list[tuple[str, str, str]] = field(default_factory=list)
    #: False when the broker returned no assignments (what moved cannot be known).
    assignments_known: bool = True

    @property
    def duration(self) -> float | None:
        if self.settled_mono is None:
            return None
        return self.settled_mono - self.seen_mono

    def text(self, interval: float, now_mono: float) -> str:
        """One line: when, the numbers, how long, who joined and left, what moved."""
        when = time.strftime("%H:%M:%S", time.localtime(self.seen))
        numbers = f"{_n(self.before)} -> {_n(self.after)}" if self.settled_mono is not None \
            else f"{_n(self.before)} -> ?"
        if self.settled_mono is None:
            took = f"in progress {now_mono - self.seen_mono:.1f}s"
        elif self.between_polls:
            took = f"took <{self.gap:.1f}s"
        else:
            took = f"took {self.duration:.1f}s"
        if self.before_watch:
            took += " (began before the watch)"
        parts = [when, numbers, took]
        parts += [f"+{name}" for name in self.joined] + [f"-{name}" for name in self.left]
        if not self.assignments_known:
            parts.append("moved: ? (no assignments from the broker)")
        elif self.settled_mono is not None:
            parts.append("moved: " + (", ".join(f"{p} {a} -> {b}" for p, a, b in self.moved)
                                      or "nothing"))  # fmt: skip
        return "  ".join(parts)


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)


def _number(group: GroupDescription) -> int | None:
    return group.group_epoch if group.consumer_protocol else group.generation


def settled(group: GroupDescription) -> bool:
    """Whether the group is done rebalancing: Stable and, in a consumer group, every member at
    the group epoch with its target assignment reached."""
    if not group.stable:
        return False
    if not group.consumer_protocol:
        return True
    epoch = group.group_epoch
    if group.assignment_epoch is not None and epoch is not None and group.assignment_epoch != epoch:
        return False
    return all(
        (m.member_epoch is None or epoch is None or m.member_epoch == epoch)
        and (m.target is None or m.assignment == m.target)
        for m in group.members
    )


def _key(group: GroupDescription) -> Any:
    """What tells one settled group from the next: its generation (epoch) where known, else who
    its members are and what they are assigned."""
    number = _number(group)
    members = frozenset(m.member_id for m in group.members)
    if number is not None:
        return (group.group_type, number)
    return (group.group_type, members, tuple(sorted(
        (m.member_id, tuple(sorted(m.assignment or ()))) for m in group.members)))


class RebalanceTracker:
    """Rebalances from successive snapshots (sans-I/O): feed it each snapshot and the time."""

    def __init__(self, keep: int = KEEP) -> None:
        self.history: deque[Rebalance] = deque(maxlen=keep)
        self.current: Rebalance | None = None
        self.names: dict[str, str] = {}
        self._key: Any = None
        self._number: int | None = None
        self._members: frozenset[str] = frozenset()
        self._owners: dict[TopicPartition, str] = {}
        self._started = False
        self._last_mono = 0.0
        self.count = 0

    def name(self, member_id: str) -> str:
        return self.names.get(member_id, _short(member_id))

    def _learn_names(self, group: GroupDescription) -> None:
        clients = [m.client_id for m in group.members]
        for m in group.members:
            name = m.client_id or _short(m.member_id)
            if m.client_id and clients.count(m.client_id) > 1:
                name = f"{m.client_id}({m.member_id[-6:]})"
            self.names[m.member_id] = name

    def observe(self, group: GroupDescription, wall: float, mono: float) -> None:
        self._learn_names(group)
        try:
            self._observe(group, wall, mono)
        finally:
            self._last_mono = mono

    def _observe(self, group: GroupDescription, wall: float, mono: float) -> None:
        first = not self._started
        self._started = True
        is_settled = settled(group)
        key = _key(group) if is_settled else None
        if is_settled and first:
            self._settle(group, key)
            return
        if not is_settled:
            if self.current is None:
                self.current = Rebalance(wall, mono, self._number, before_watch=first)
            return
        if self.current is None and key == self._key:
            return  # nothing happened
        r = self.current or Rebalance(wall, mono, self._number, between_polls=True,
                                      gap=mono - self._last_mono)
        self.current = None
        r.after = _number(group)
        r.settled_mono = mono
        ids = frozenset(m.member_id for m in group.members)
        if not r.before_watch:
            r.joined = sorted(self.name(m) for m in ids - self._members)
            r.left = sorted(self.name(m) for m in self._members - ids)
        owners = _owners(group)
        r.assignments_known = group.has_assignments or not group.members
        if r.assignments_known and not r.before_watch:
            r.moved = self._moves(self._owners, owners)
        self.history.appendleft(r)
        self.count += 1
        self._settle(group, key)

    def _settle(self, group: GroupDescription, key: Any) -> None:
        self._key = key
        self._number = _number(group)
        self._members = frozenset(m.member_id for m in group.members)
        self._owners = _owners(group)

    def _moves(self, before: Mapping[TopicPartition, str], after: Mapping[TopicPartition, str],
               ) -> list[tuple[str, str, str]]:  # fmt: skip
        pairs: dict[tuple[str, str], set[TopicPartition]] = {}
        for tp in sorted(set(before) | set(after)):
            a, b = before.get(tp), after.get(tp)
            if a != b:
                pair = ("-" if a is None else self.name(a), "-" if b is None else self.name(b))
                pairs.setdefault(pair, set()).add(tp)
        return [(format_partitions(frozenset(tps)), a, b) for (a, b), tps in pairs.items()]


def _owners(group: GroupDescription) -> dict[TopicPartition, str]:
    return {tp: m.member_id for m in group.members for tp in (m.assignment or ())}


def _short(member_id: str) -> str:
    return member_id if len(member_id) <= 24 else member_id[:23] + "…"


# --------------------------------------------------------------------------- the screen


def render_screen(
    group: GroupDescription,
    a: Assessment,
    state: GroupWatch,
    tracker: RebalanceTracker,
    *,
    width: int,
    height: int,
    interval: float,
    now_mono: float,
    error: str | None = None,
) -> list[str]:
    """The lines of one screen, at most ``height``, each cut to ``width``."""
    from aiogroup.tools.group import (
        _assignment_text,
        _migration_text,
        _mode_text,
        _table,
        _verdict_text,
    )

    expected = state.expected_members or state.largest
    members = f"{len(group.members)}/{expected}" if expected else str(len(group.members))
    if group.consumer_protocol:
        kind = "consumer group (KIP-848)"
        numbers = f"group epoch {_n(group.group_epoch)}, assignment epoch " \
                  f"{_n(group.assignment_epoch)}"  # fmt: skip
        protocol = f"assignor {group.protocol or '-'} (the broker's)"
    else:
        kind = "classic group"
        numbers = f"generation {_n(group.generation)}"
        rp = group.rebalance_protocol
        protocol = f"{group.protocol_type or '-'} / {group.protocol or '-'}" + (
            f" ({rp.name})" if rp is not None else "")
    verdict = _verdict_text(a) + ("" if a.safe or not a.reasons else ": " + a.reasons[0])
    head = [
        f"aiogroup group watch {group.group_id}   {time.strftime('%H:%M:%S')}   "
        f"every {interval:g}s, Ctrl-C to quit",
        f"  state      {group.state}   {kind}   {protocol}",
        f"  {numbers}   members {members}"
        + (f"   {_assignment_text(group, a)}" if group.stable else ""),
        f"  migration  {_migration_text(migration_status(group))}",
        f"  next bounce {verdict}" + (f"   step {a.step.value}" if state.upgrading(a) else ""),
    ]
    lag = group.lag
    if lag is not None:
        head.append(f"  lag        {'-' if lag.total is None else lag.total} in total")
    if error:
        head.append(f"  ! {error}")
    rows: list[tuple[str, ...]] = []
    for m in group.members:
        speaks = (m.member_type or "?") if group.consumer_protocol \
            else _mode_text(a.modes.get(m.member_id))
        row: tuple[str, ...] = (tracker.name(m.member_id), _short(m.member_id),
                                m.client_host or "-", speaks, format_partitions(m.assignment))
        if lag is not None:
            row = (*row, "-" if lag.of_member(m.member_id) is None
                   else str(lag.of_member(m.member_id)))
        rows.append(row)
    member_head: tuple[str, ...] = ("MEMBER", "MEMBER ID", "HOST", "PROTOCOL", "ASSIGNED")
    if lag is not None:
        member_head = (*member_head, "LAG")
    body = ["", *_table(member_head, rows).splitlines()] if rows else ["", "  (no members)"]
    rebalances = ["", f"RECENT REBALANCES ({tracker.count} seen; times to within {interval:g}s, "
                      "as polled from outside)"]  # fmt: skip
    shown = [*([tracker.current] if tracker.current else []), *tracker.history]
    rebalances += [f"  {r.text(interval, now_mono)}" for r in shown] or ["  none yet"]
    lines = head + body
    if lag is not None and lag.partitions:
        room = height - len(lines) - len(rebalances) - 2  # the blank line and the table head
        names = {m.member_id: tracker.name(m.member_id) for m in group.members}
        prow = [(p.partition.topic, str(p.partition.partition), _num(p.committed),
                 _num(p.log_end_offset), _num(p.lag),
                 names.get(lag.owners.get(p.partition) or "", "-"))
                for p in lag.partitions]  # fmt: skip
        if room < len(prow):
            keep = max(room - 1, 0)
            more = len(prow) - keep
            prow = prow[:keep]
        else:
            more = 0
        if room > 0:
            table = _table(("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                            "MEMBER"), prow).splitlines()  # fmt: skip
            lines += ["", *table] + ([f"  ... {more} more partitions"] if more else [])
    lines += rebalances
    return [line[:width] for line in lines[:height]]


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _size(out: TextIO) -> tuple[int, int]:
    try:
        size = os.get_terminal_size(out.fileno())
    except (OSError, ValueError, AttributeError):
        size = shutil.get_terminal_size()
    return max(size.columns, 20), max(size.lines, 5)


async def watch_screen(
    inspector: GroupInspector,
    *,
    out: TextIO,
    interval: float = 1.0,
    expected_members: int | None = None,
    until: str | None = None,
    timeout: float | None = None,
    with_lag: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """``watch`` on a terminal: the group redrawn in place every ``interval``; returns the exit
    status as the line mode does. The terminal is restored however it ends."""
    from aiogroup.tools.group import EXIT_NO_GROUP, _missing_text, _summary_line

    state = GroupWatch(expected_members=expected_members)
    tracker = RebalanceTracker()
    began = clock()
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stopped: list[str] = []

    def terminate() -> None:
        stopped.append("SIGTERM")
        if task is not None:
            task.cancel()

    handlers = []
    for sig, handler in ((signal.SIGWINCH, wake.set), (signal.SIGTERM, terminate)):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, handler)
            handlers.append(sig)
    last_line = ""
    message = ""
    out.write(ENTER)
    out.flush()
    try:
        group: GroupDescription | None = None
        a: Assessment | None = None
        while True:
            error = None
            try:
                group = await (inspector.describe(with_lag=True) if with_lag
                               else inspector.describe())  # fmt: skip
            except AiogroupError as exc:  # the coordinator moved or is down: keep watching
                error = f"cannot describe the group: {exc}"
            else:
                if not group.exists:
                    message = _missing_text(group)
                    return EXIT_NO_GROUP
                a = state.observe(group)
                tracker.observe(group, time.time(), clock())
                last_line = _summary_line(group, a, state)
            if group is not None and a is not None:
                width, height = _size(out)
                lines = render_screen(group, a, state, tracker, width=width, height=height,
                                      interval=interval, now_mono=clock(), error=error)
                out.write(HOME + "\n".join(line + CLEAR_LINE for line in lines) + CLEAR_BELOW)
                out.flush()
            elif error:
                out.write(HOME + error[: _size(out)[0]] + CLEAR_LINE + CLEAR_BELOW)
                out.flush()
            if (until is not None and a is not None and a.safe
                    and (until == "safe" or a.step.value == until)):
                message = "reached: next bounce safe"
                return 0
            if timeout is not None and clock() - began >= timeout:
                message = f"timed out after {timeout:g} s"
                return 1
            wake.clear()
            with contextlib.suppress(TimeoutError):  # the polling period, or a resize
                await asyncio.wait_for(wake.wait(), interval)
    except asyncio.CancelledError:
        if stopped and task is not None:
            task.uncancel()
            return 0
        raise
    finally:
        for sig in handlers:
            loop.remove_signal_handler(sig)
        out.write(LEAVE)
        for text in (last_line, message):
            if text:
                out.write(text + "\n")
        out.flush()
