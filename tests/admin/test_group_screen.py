"""``aiogroup group watch`` on a terminal: one screen redrawn in place (aiogroup/tools/
group_screen.py). The tool runs as a subprocess whose stdout and stderr are the slave side of a
pseudo-terminal with a set window size; what it writes to the master side is fed to pyte (a VT
emulator) and the test reads the screen: the members and their partitions, the lag equal to what
was produced minus what was committed, a member joining and leaving seen as rebalances with what
moved, and the terminal restored (cursor shown, alternate screen left) after SIGINT. On the
embedded broker and Kafka 4.1.1, a classic group and a KIP-848 one. Without a broker: the
rebalance tracker from snapshots, and the line mode kept when stdout is not a terminal.

``AIOGROUP_WATCH_CAPTURE=PREFIX`` writes the last screen of each run to
PREFIX-BROKER-PROTOCOL.txt (docs/rolling-upgrade.md's capture)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import uuid
from collections.abc import Callable, Sequence

import pyte
import pytest

from aiogroup import Consumer
from aiogroup.inspector import GroupDescription, RawMember, format_partitions, parse_group
from aiogroup.protocol import Assignment, Subscription, encode_assignment, encode_subscription
from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.tools.group_screen import ENTER, LEAVE, RebalanceTracker
from tests.admin.test_group_lag import BROKERS, PRODUCED, _setup, _split
from tests.consumer.helpers import produce

ROWS, COLS = 40, 150
CHOSEN = {0: 3, 1: 17, 2: 40}  # committed; partition 3 has nothing committed


# --------------------------------------------------------------------------- without a broker


def _member(name: str, assigned: Sequence[int], generation: int) -> RawMember:
    sub = Subscription(["t"], generation_id=generation)
    return RawMember(member_id=f"{name}-id", client_id=name, client_host="/127.0.0.1",
                     metadata=encode_subscription(sub, 3),
                     assignment=encode_assignment(Assignment({"t": tuple(assigned)})))  # fmt: skip


def test_the_tracker_tells_each_rebalance_how_long_and_what_moved() -> None:
    def stable(gen: int, **members: Sequence[int]) -> GroupDescription:
        return parse_group("g", "Stable", "consumer", "cooperative-sticky",
                           [_member(n, ps, gen - 1) for n, ps in members.items()],
                           partitions={"t": 4})  # fmt: skip

    t = RebalanceTracker()
    t.observe(stable(5, a=[0, 1], b=[2, 3]), 100.0, 10.0)
    assert t.count == 0 and t.current is None
    t.observe(parse_group("g", "PreparingRebalance", "consumer", None, []), 101.0, 11.0)
    assert t.current is not None and "in progress" in t.current.text(1.0, 11.5)
    t.observe(stable(6, a=[0, 1], b=[3], c=[2]), 103.5, 13.5)
    r = t.history[0]
    assert (r.before, r.after, r.duration, r.joined, r.left) == (5, 6, 2.5, ["c"], [])
    assert r.moved == [("t[2]", "b", "c")]
    assert "5 -> 6  took 2.5s  +c  moved: t[2] b -> c" in r.text(1.0, 14.0)
    # one that began and ended between two polls: seen by its generation alone
    t.observe(stable(7, a=[0, 1, 2], b=[3]), 104.5, 14.5)
    r = t.history[0]
    assert r.between_polls and r.left == ["c"] and r.moved == [("t[2]", "c", "a")]
    assert "took <1.0s" in r.text(1.0, 15.0) and r.gap == 1.0
    t.observe(stable(7, a=[0, 1, 2], b=[3]), 105.5, 15.5)
    assert t.count == 2


def test_a_consumer_group_settles_when_every_member_reached_its_target() -> None:
    from aiogroup.inspector import MemberDescription
    from aiogroup.protocol.types import TopicPartition as TP

    def cg(epoch: int, assigned: dict[str, set[int]], target: dict[str, set[int]],
           member_epoch: int) -> GroupDescription:  # fmt: skip
        members = tuple(MemberDescription(
            f"{n}-id", n, "/h", None, None, frozenset(TP("t", p) for p in ps),
            member_epoch=member_epoch, member_type="consumer",
            target=frozenset(TP("t", p) for p in target[n])) for n, ps in assigned.items())
        base = parse_group("g", "Stable", "consumer", "uniform", [])
        return dataclasses.replace(base, members=members, group_type="consumer",
                                   group_epoch=epoch, assignment_epoch=epoch)  # fmt: skip

    t = RebalanceTracker()
    t.observe(cg(3, {"a": {0, 1}}, {"a": {0, 1}}, 3), 0.0, 0.0)
    t.observe(cg(4, {"a": {0, 1}, "b": set()}, {"a": {0}, "b": {1}}, 3), 1.0, 1.0)
    assert t.current is not None and t.count == 0  # a must still revoke 1
    t.observe(cg(4, {"a": {0}, "b": {1}}, {"a": {0}, "b": {1}}, 4), 2.0, 2.0)
    r = t.history[0]
    assert (r.before, r.after, r.duration, r.joined, r.moved) == (3, 4, 1.0, ["b"],
                                                                  [("t[1]", "a", "b")])  # fmt: skip


def test_the_partition_table_is_trimmed_to_the_terminal() -> None:
    from aiogroup.inspector import GroupWatch
    from aiogroup.tools.group_screen import render_screen
    from tests.admin.test_group_lag import COMMITTED, ENDS, group

    g = group(COMMITTED, ENDS)  # five partition rows
    state, tracker = GroupWatch(), RebalanceTracker()
    a = state.observe(g)
    tracker.observe(g, 0.0, 0.0)

    def screen(width: int, height: int) -> list[str]:
        return render_screen(g, a, state, tracker, width=width, height=height, interval=1.0,
                             now_mono=0.0)  # fmt: skip

    full = screen(200, 60)
    assert "  orders  3          4               10              6    b" in full
    assert "RECENT REBALANCES (0 seen; times to within 1s, as polled from outside)" in full
    assert "  lag        68 in total" in full and "  none yet" in full
    short = screen(30, len(full) - 3)
    assert len(short) == len(full) - 3 and all(len(line) <= 30 for line in short)
    assert "  ... 4 more partitions" in short and short[-1] == "  none yet"


def test_not_a_terminal_keeps_the_lines() -> None:
    """A pipe, ``--json`` or ``--plain`` keep the line output scripts read."""
    import io

    from aiogroup.tools.group import _parser, _screen_wanted

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    def wanted(*extra: str, out: io.StringIO) -> bool:
        args = _parser().parse_args(["watch", "g", "-b", "h:1", *extra])
        return _screen_wanted(args, out)

    os.environ.setdefault("TERM", "xterm")
    assert wanted(out=Tty()) and not wanted(out=io.StringIO())
    assert not wanted("--json", out=Tty()) and not wanted("--plain", out=Tty())


def test_the_screen_is_left_however_the_watch_ends() -> None:
    """--until reached and a group that does not exist: the alternate screen is left, the
    cursor shown, and the last word printed on the normal screen."""
    import io

    from aiogroup.tools.group import EXIT_NO_GROUP
    from aiogroup.tools.group_screen import watch_screen
    from tests.admin.test_group_lag import COMMITTED, ENDS, LagReplay, group

    out = io.StringIO()
    code = asyncio.run(watch_screen(LagReplay([group(COMMITTED, ENDS)]), out=out,  # type: ignore[arg-type]
                                    interval=0, until="safe", with_lag=True))  # fmt: skip
    text = out.getvalue()
    assert code == 0 and text.startswith(ENTER) and "RECENT REBALANCES" in text
    after = text[text.rindex(LEAVE) + len(LEAVE):].splitlines()
    assert "lag 68" in after[0] and after[1] == "reached: next bounce safe"
    gone = parse_group("g", "Dead", "", None, [])
    out = io.StringIO()
    code = asyncio.run(watch_screen(LagReplay([gone]), out=out))  # type: ignore[arg-type]
    assert code == EXIT_NO_GROUP and out.getvalue().startswith(ENTER)
    assert "does not exist" in out.getvalue().split(LEAVE)[-1]


# --------------------------------------------------------------------------- under a pty


class PtyWatch:
    """``aiogroup group watch`` with a pseudo-terminal for stdout and stderr, its screen read
    through pyte."""

    def __init__(self, args: Sequence[str]) -> None:
        self.args = list(args)
        self.screen = pyte.Screen(COLS, ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        self.changed = asyncio.Event()
        self.closed = False
        self.proc: asyncio.subprocess.Process | None = None
        self.master = -1

    async def start(self) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLS, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color"}
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "aiogroup", "group", "watch", *self.args,
            stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=env,
            start_new_session=True)  # fmt: skip
        os.close(slave)
        os.set_blocking(self.master, False)
        asyncio.get_running_loop().add_reader(self.master, self._read)

    def _read(self) -> None:
        try:
            data = os.read(self.master, 65536)
        except BlockingIOError:
            return
        except OSError:  # EIO: the child closed its side
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
            self.closed = True
        else:
            self.raw += data
            self.stream.feed(data)
        self.changed.set()

    @property
    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    async def until(self, what: str, ok: Callable[[str], bool], timeout: float = 90) -> str:
        """The screen once ``ok`` holds for it (polled on every write, up to ``timeout``)."""
        try:
            async with asyncio.timeout(timeout):
                while not ok(self.text):
                    assert not self.closed, f"watch exited waiting for {what}:\n{self.text}"
                    self.changed.clear()
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"no {what} on the screen:\n{self.text}") from None
        return self.text

    async def stop(self, sig: signal.Signals = signal.SIGINT) -> int:
        """Send ``sig`` (Ctrl-C by default) and wait for the exit and the pty's end."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(sig)
        code = await asyncio.wait_for(self.proc.wait(), 30)
        async with asyncio.timeout(10):
            while not self.closed:
                self.changed.clear()
                await self.changed.wait()
        return code

    def close(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
        if self.master >= 0:
            with contextlib.suppress(ValueError, OSError):
                asyncio.get_running_loop().remove_reader(self.master)
            os.close(self.master)
            self.master = -1


def _lag_rows(screen: str, topic: str) -> dict[int, tuple[str, str, str, str]]:
    rows = re.findall(rf"^  {re.escape(topic)}\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$",
                      screen, re.M)  # fmt: skip
    return {int(p): (c, e, lag, m) for p, c, e, lag, m in rows}


def _member_rows(screen: str) -> dict[str, tuple[str, str]]:
    """Client id: (assigned, lag)."""
    found = re.findall(r"^  (m\d)\s+\S+\s+\S+\s+\S+\s+(\S+(?: \S+\[[\d,]+\])*)\s+(\S+)\s*$",
                       screen, re.M)  # fmt: skip
    return {m: (assigned, lag) for m, assigned, lag in found}


def _rebalances(screen: str) -> list[str]:
    return screen[screen.index("RECENT REBALANCES"):].splitlines()[1:]


@pytest.mark.timeout(400)
@pytest.mark.parametrize("group_protocol", ["classic", "consumer"])
@pytest.mark.parametrize("kafka_broker", BROKERS, indirect=True)
async def test_watch_redraws_the_group_on_a_terminal(kafka_broker: BrokerHandle,
                                                     group_protocol: str) -> None:  # fmt: skip
    topic, group_id = _setup(kafka_broker, "scr" + uuid.uuid4().hex[:6])
    b = kafka_broker.bootstrap
    await produce(b, topic, PRODUCED)

    def consumer(name: str) -> Consumer:
        return Consumer(b, group_id, topics=[topic], client_id=name,
                        group_protocol="consumer" if group_protocol == "consumer" else "classic",
                        enable_auto_commit=False,
                        auto_offset_reset="earliest", session_timeout_ms=6000,
                        heartbeat_interval_ms=300)  # fmt: skip

    consumers = [consumer("m1"), consumer("m2")]
    running: list[Consumer] = []

    async def poll() -> None:  # the members at work, as an application's loop
        while True:
            for c in list(running):
                with contextlib.suppress(Exception):
                    await c.getmany(timeout_ms=50)
            await asyncio.sleep(0.05)  # the application's own pace, not synchronisation

    tool = PtyWatch([group_id, "--bootstrap", b, "--lag", "--interval", "0.3"])
    poller: asyncio.Task[None] | None = None
    try:
        for c in consumers:
            await c.start()
        await _split(consumers, group_id, b)
        for c in consumers:
            mine = {p.partition: p for p in c.assignment()}
            await c.commit({mine[p]: o for p, o in CHOSEN.items() if p in mine})
        running += consumers
        poller = asyncio.create_task(poll())
        owners = {p.partition: c for c in consumers for p in c.assignment()}
        await tool.start()

        # members, their partitions, the lag: produced minus committed
        expected = {p: (str(CHOSEN[p]) if p in CHOSEN else "-", str(n),
                        str(n - CHOSEN[p]) if p in CHOSEN else "-", owners[p].client_id)
                    for p, n in PRODUCED.items()}  # fmt: skip
        screen = await tool.until("lag table", lambda s: _lag_rows(s, topic) == expected)
        members = _member_rows(screen)
        for c in consumers:
            lag = sum(PRODUCED[p.partition] - CHOSEN[p.partition]
                      for p in c.assignment() if p.partition in CHOSEN)  # fmt: skip
            assert members[c.client_id] == (format_partitions(frozenset(c.assignment())),
                                            str(lag)), screen  # fmt: skip
        assert "lag        30 in total" in screen
        assert ("consumer group (KIP-848)" if group_protocol == "consumer" else "classic group") \
            in screen  # fmt: skip
        assert "members 2/2" in screen

        # a member joins: a rebalance with what moved to it
        m3 = consumer("m3")
        await m3.start()
        running.append(m3)

        def joined(s: str) -> bool:
            lines = " ".join(_rebalances(s))
            return "+m3" in lines and "-> m3" in lines and "m3" in _member_rows(s) \
                and _member_rows(s)["m3"][0] not in ("-", "?") \
                and "in progress" not in lines  # fmt: skip

        screen = await tool.until("m3's join", joined)
        moved_to = re.search(r"(\S+\[[\d,]+\]) (m[12]|-) -> m3", screen)
        assert moved_to is not None, screen
        assert "members 3/3" in screen

        # it leaves: what it held goes back
        running.remove(m3)
        await m3.close()

        def left(s: str) -> bool:
            lines = " ".join(_rebalances(s))
            rows = _lag_rows(s, topic)
            return "-m3" in lines and "m3 -> m" in lines and "in progress" not in lines \
                and len(rows) == 4 and all(r[3] in ("m1", "m2") for r in rows.values())

        screen = await tool.until("m3's leave", left)
        assert "members 2/3" in screen  # the largest group seen is expected back
        capture = os.environ.get("AIOGROUP_WATCH_CAPTURE")
        if capture:  # a file per run: FILE-BROKER-PROTOCOL.txt
            with open(f"{capture}-{kafka_broker.kind}-{group_protocol}.txt", "w") as f:
                f.write(screen + "\n")

        # Ctrl-C: the terminal restored
        assert tool.screen.cursor.hidden and (1049 << 5) in tool.screen.mode
        code = await tool.stop()
        assert code == 0, tool.raw[-2000:]
        raw = bytes(tool.raw)
        assert raw.count(ENTER.encode()) == 1 and raw.rindex(LEAVE.encode()) > raw.rindex(b"\x1b[H")
        assert not tool.screen.cursor.hidden and (1049 << 5) not in tool.screen.mode
        assert b"Traceback" not in raw
    finally:
        tool.close()
        if poller is not None:
            poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await poller
        for c in consumers:
            await c.close()


@pytest.mark.timeout(200)
@pytest.mark.parametrize("kafka_broker", BROKERS[:1], indirect=True)
async def test_sigterm_restores_the_terminal(kafka_broker: BrokerHandle) -> None:
    topic, group_id = _setup(kafka_broker, "term" + uuid.uuid4().hex[:6])
    c = Consumer(kafka_broker.bootstrap, group_id, topics=[topic], client_id="m1",
                 session_timeout_ms=6000, heartbeat_interval_ms=300)  # fmt: skip
    tool = PtyWatch([group_id, "--bootstrap", kafka_broker.bootstrap, "--interval", "0.3"])
    try:
        await c.start()
        await tool.start()
        await tool.until("the member", lambda s: "m1" in _member_rows_any(s))
        assert await tool.stop(signal.SIGTERM) == 0
        assert not tool.screen.cursor.hidden and (1049 << 5) not in tool.screen.mode
    finally:
        tool.close()
        await c.close()


def _member_rows_any(screen: str) -> list[str]:
    return re.findall(r"^  (m\d) ", screen, re.M)
