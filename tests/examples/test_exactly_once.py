"""examples/exactly_once.py under fire on Apache Kafka 4.1.1: three worker processes turn an
input topic into an output topic while the test SIGKILLs them at random points (seeded) and
restarts them, and pauses one (SIGSTOP) in the middle of a transaction, its output records
written and its offsets not sent, past its session while the group rebalances cooperatively
around it and the others process its partitions (a zombie), then lets it go on (SIGCONT): its
offset commit must be refused (``ConsumerFencedError``) and its transaction aborted. A
``read_committed`` reader of the output must see every input record exactly once: no
duplicate, no gap.

The zombie pauses itself (``--pause-file``: the example stops itself with SIGSTOP at that point
of its next transaction), so the pause lands inside a transaction every run; a SIGSTOP sent
from here when the worker reports it is inside one would race the commit."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from aiogroup import Consumer, TopicPartition
from aiogroup.config import IsolationLevel
from aiogroup.testing.fixtures import apache_kafka4  # noqa: F401 - the session fixture, by name
from aiogroup.testing.launchers.kafka import KafkaBroker
from aiogroup.tools.chaos.brokers import set_consumer_group_config
from tests.consumer.helpers import produce, unique, wait_for

pytestmark = pytest.mark.timeout(600)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "exactly_once.py"
SEED = int(os.environ.get("AIOGROUP_EOS_SEED", "447"))
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 6, 3
WAVES, PER_WAVE = 8, 400  # records per input partition come in waves of PER_WAVE in all
SESSION_MS, HEARTBEAT_MS = 6000, 500
BOUND_S = 120.0
#: Longer than the zombie's pause (bounded below), so that the transaction coordinator does
#: not abort the paused transaction itself: what stops the zombie must be the group's fencing.
TRANSACTION_TIMEOUT_MS = 90_000


class Workers:
    """The example's processes, by name; each appends its events to ``<name>.events``."""

    def __init__(self, kafka: KafkaBroker, out: Path, group: str, src: str, dst: str,
                 protocol: str = "classic") -> None:
        self.kafka, self.out, self.group, self.src, self.dst = kafka, out, group, src, dst
        self.protocol = protocol
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.starts: dict[str, int] = {}
        self.kills = 0

    def start(self, name: str) -> None:
        argv = [
            sys.executable, str(EXAMPLE), "--bootstrap", self.kafka.bootstrap,
            "--group", self.group, "--input", self.src, "--output", self.dst, "--name", name,
            "--events", str(self.out / f"{name}.events"), "--max-records", "50",
            "--batch-records", "4",  # Produce inside the transaction: kills leave aborted data
            "--group-protocol", self.protocol,
            "--session-ms", str(SESSION_MS), "--heartbeat-ms", str(HEARTBEAT_MS),
            "--transaction-timeout-ms", str(TRANSACTION_TIMEOUT_MS),
            "--pause-file", str(self.pause_file(name)),
        ]  # fmt: skip
        self.starts[name] = self.starts.get(name, 0) + 1
        with (self.out / f"{name}.stderr").open("ab") as err:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
            )  # fmt: skip

    def pause_file(self, name: str) -> Path:
        return self.out / f"{name}.pause"

    def stopped(self, name: str) -> bool:
        """Whether the process is stopped (state T in /proc/<pid>/stat)."""
        stat = Path(f"/proc/{self.procs[name].pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "T"

    def kill_and_restart(self, name: str) -> None:
        proc = self.procs[name]
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self.kills += 1
        self.start(name)

    def events(self, name: str) -> list[dict[str, Any]]:
        path = self.out / f"{name}.events"
        if not path.exists():
            return []
        lines = path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def owned(self, name: str) -> set[int]:
        mine: set[int] = set()
        for e in self.events(name):
            if e["type"] == "started":
                mine = set()
            elif e["type"] == "assigned":
                mine |= set(e["partitions"])
            elif e["type"] in ("revoked", "lost"):
                mine -= set(e["partitions"])
        return mine

    def all_started(self) -> bool:
        """Whether every process got as far as its ``started`` event (its SIGTERM handler is
        in place): a SIGTERM during a restarted worker's start-up would kill it (-15)."""
        return all(
            sum(e["type"] == "started" for e in self.events(name)) == starts
            for name, starts in self.starts.items()
        )

    def not_started(self) -> str:
        """For a failure message: each process short of its ``started`` event, whether it
        runs (and its state), its stack (SIGUSR1: the example's faulthandler) and the end of
        its stderr."""
        out = []
        for name, starts in self.starts.items():
            seen = sum(e["type"] == "started" for e in self.events(name))
            if seen == starts:
                continue
            proc = self.procs[name]
            stat = Path(f"/proc/{proc.pid}/stat")
            state = stat.read_text().rsplit(")", 1)[1].split()[0] if stat.exists() else "gone"
            err = self.out / f"{name}.stderr"
            if proc.poll() is None:
                size = err.stat().st_size
                proc.send_signal(signal.SIGUSR1)
                deadline = time.monotonic() + 10
                while err.stat().st_size == size and time.monotonic() < deadline:
                    time.sleep(0.1)  # a poll for the dump, bounded, in a failure path
            out.append(f"{name}: {seen} of {starts} started, pid {proc.pid} "
                       f"(rc {proc.poll()}, state {state}):\n"
                       + err.read_text(errors="replace")[-4000:])  # fmt: skip
        return "\n".join(out)

    def stop_all(self) -> dict[str, int]:
        codes = {}
        for proc in self.procs.values():
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                codes[name] = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                codes[name] = proc.wait(10)
        return codes


class OutputReader:
    """Reads the output topic in the background (``isolation_level``), keeping every value."""

    def __init__(self, bootstrap: str, topic: str, isolation_level: IsolationLevel) -> None:
        self.consumer = Consumer(
            bootstrap, unique("reader"), topics=[topic], auto_offset_reset="earliest",
            isolation_level=isolation_level, enable_auto_commit=False, fetch_max_wait_ms=100,
        )  # fmt: skip
        self.values: list[bytes] = []
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.consumer.start()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        while True:
            batch = await self.consumer.getmany(timeout_ms=200)
            for records in batch.values():
                self.values.extend(r.value for r in records)

    async def caught_up(self, topic: str) -> bool:
        tps = [TopicPartition(topic, p) for p in range(OUTPUT_PARTITIONS)]
        if set(tps) - self.consumer.assignment():
            return False
        ends = await self.consumer.end_offsets(tps)
        return all([await self.consumer.position(tp) >= ends[tp] for tp in tps])

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.consumer.close()


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
async def test_every_input_record_is_output_exactly_once_through_kills_and_a_zombie(
    apache_kafka4: KafkaBroker,  # noqa: F811
    tmp_path: Path,
    protocol: str,
) -> None:
    """The classic protocol (cooperative-sticky: the generation fences) and KIP-848's (the
    broker assigns; the member epoch fences, the session and heartbeat being the group's)."""
    rng = random.Random(SEED)
    src, dst, group = unique("eos-in"), unique("eos-out"), unique("eos")
    apache_kafka4.create_topic(src, INPUT_PARTITIONS)
    apache_kafka4.create_topic(dst, OUTPUT_PARTITIONS)
    if protocol == "consumer":  # before the first member joins
        set_consumer_group_config(apache_kafka4.bootstrap, group, session_ms=SESSION_MS,
                                  heartbeat_ms=HEARTBEAT_MS)  # fmt: skip
    workers = Workers(apache_kafka4, tmp_path, group, src, dst, protocol)
    names = ["w1", "w2", "w3"]
    committed = OutputReader(apache_kafka4.bootstrap, dst, "read_committed")
    await committed.start()
    expected: list[bytes] = []
    zombie_wave = rng.randrange(2, WAVES - 2)
    zombie = ""
    pause: dict[str, Any] = {}

    def output_count() -> int:
        return len(committed.values)

    def reached(target: int) -> bool:
        return output_count() >= target

    try:
        for name in names:
            workers.start(name)
        for wave in range(WAVES):
            per = PER_WAVE // INPUT_PARTITIONS

            def value(p: int, i: int, wave: int = wave) -> bytes:
                return b"w%d-p%d-%04d" % (wave, p, i)

            if wave == zombie_wave:  # armed before the wave: it pauses on its next records
                zombie = await arm_a_zombie(workers, names)
            await produce(apache_kafka4.bootstrap, src, dict.fromkeys(range(INPUT_PARTITIONS),
                          per), value=value)  # fmt: skip
            expected += [value(p, i).upper() for p in range(INPUT_PARTITIONS) for i in range(per)]
            if wave == zombie_wave:
                ends = await committed.consumer.end_offsets(
                    [TopicPartition(src, p) for p in range(INPUT_PARTITIONS)]
                )
                pause = await zombie_round(
                    workers, names, zombie, {tp.partition: o for tp, o in ends.items()}
                )
                continue
            # A SIGKILL at a random point of this wave's processing, then a restart.
            victim = rng.choice(names)
            target = len(expected) - PER_WAVE + rng.randrange(0, PER_WAVE)
            await wait_for(partial(reached, target), BOUND_S, f"output reaching {target}")
            workers.kill_and_restart(victim)
        await wait_for(lambda: len(set(committed.values)) >= len(expected), BOUND_S,
                       "every record in the output")  # fmt: skip
        try:
            await wait_for(workers.all_started, BOUND_S, "every worker started")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{workers.not_started()}") from None
        codes = workers.stop_all()
        await wait_for_async(lambda: committed.caught_up(dst), BOUND_S)
    finally:
        for proc in workers.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        await committed.close()

    uncommitted = OutputReader(apache_kafka4.bootstrap, dst, "read_uncommitted")
    await uncommitted.start()
    try:
        await wait_for_async(lambda: uncommitted.caught_up(dst), BOUND_S)
    finally:
        await uncommitted.close()

    seen = committed.values
    want = set(expected)
    duplicates = len(seen) - len(set(seen))
    gaps = len(want - set(seen))
    strangers = len(set(seen) - want)
    events = [e for n in names for e in workers.events(n)]
    aborted = sum(e["type"] == "aborted" for e in events)
    fenced = sum(e.get("reason") == "ConsumerFencedError" for e in events)
    zombie_fenced = sum(e.get("reason") == "ConsumerFencedError" and e["t"] > pause["at"]
                        for e in workers.events(zombie))  # fmt: skip
    summary = {
        "protocol": protocol, "seed": SEED, "records_in": len(expected), "records_out": len(seen),
        "duplicates": duplicates, "gaps": gaps, "strangers": strangers,
        "kills": workers.kills, "zombie": zombie, "aborted_transactions": aborted,
        "fenced_offset_commits": fenced,
        "zombie_fenced_after_sigcont": zombie_fenced,
        "zombie_paused_s": round(pause["seconds"], 1),
        "zombie_transaction_end": pause["end"],
        "read_uncommitted_records": len(uncommitted.values),
        "read_uncommitted_duplicates": len(uncommitted.values) - len(set(uncommitted.values)),
        "exit_codes": codes,
    }  # fmt: skip
    print("exactly-once:", json.dumps(summary))
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert (duplicates, gaps, strangers) == (0, 0, 0), summary
    assert len(seen) == len(expected)
    assert workers.kills == WAVES - 1
    # The zombie path ran: the paused transaction ended in the group's refusal, not a commit.
    assert pause["end"] == {"type": "aborted", "reason": "ConsumerFencedError"}, summary
    assert zombie_fenced >= 1, summary
    assert all(code == 0 for code in codes.values()), summary


async def arm_a_zombie(workers: Workers, names: list[str]) -> str:
    """Pick a worker owning partitions and ask it to pause in its next transaction."""
    zombie: str = await wait_for(
        lambda: next((n for n in names if workers.owned(n)), None), BOUND_S,
        "a worker owning partitions",
    )  # fmt: skip
    workers.pause_file(zombie).touch()
    return zombie


async def zombie_round(
    workers: Workers, names: list[str], zombie: str, ends: dict[int, int]
) -> dict[str, Any]:
    """Wait for ``zombie`` to stop itself inside a transaction (records written, offsets not
    sent), for the others to take its partitions over and commit every input partition up to
    ``ends``, then SIGCONT it and wait for the end of its paused transaction. When it paused,
    for how long, and how that transaction ended."""

    def paused() -> dict[str, Any] | None:
        event = next((e for e in workers.events(zombie) if e["type"] == "paused"), None)
        return event if event is not None and workers.stopped(zombie) else None

    event = await wait_for(paused, BOUND_S, "the zombie stopped inside a transaction")
    paused_at = event["t"]
    held = {int(p) for p in event["offsets"]}
    others = [n for n in names if n != zombie]
    await wait_for(
        lambda: any(e["type"] == "assigned" and held & set(e["partitions"])
                    and e["t"] > paused_at
                    for n in others for e in workers.events(n)),
        BOUND_S, "the group taking the zombie's partitions",
    )  # fmt: skip

    def others_done() -> bool:
        done: dict[int, int] = {}
        for n in others:
            for e in workers.events(n):
                if e["type"] == "committed":
                    for p, o in e["offsets"].items():
                        done[int(p)] = max(done.get(int(p), 0), o)
        return all(done.get(p, 0) >= end for p, end in ends.items())

    # Not through the read_committed reader: the zombie's open transaction holds the output's
    # last stable offset until it ends.
    await wait_for(others_done, BOUND_S, "the others committing every input partition")
    seconds = time.time() - paused_at
    assert seconds * 1000 < TRANSACTION_TIMEOUT_MS  # the coordinator did not abort it itself
    assert workers.stopped(zombie)
    workers.procs[zombie].send_signal(signal.SIGCONT)

    def end() -> dict[str, Any] | None:
        after = [e for e in workers.events(zombie) if e["t"] > paused_at]
        return next((e for e in after if e["type"] in ("committed", "aborted", "fenced",
                                                        "started")), None)  # fmt: skip

    ended = await wait_for(end, BOUND_S, "the end of the zombie's paused transaction")
    return {
        "at": paused_at,
        "seconds": seconds,
        "end": {k: ended[k] for k in ("type", "reason") if k in ended},
    }


async def wait_for_async(check: Any, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"reader not caught up within {timeout:.0f}s")
        await asyncio.sleep(0.1)  # polling a condition with a bound
