"""examples/exactly_once.py under fire on Apache Kafka 4.1.1: three worker processes turn an
input topic into an output topic while the test SIGKILLs them at random points (seeded) and
restarts them, and pauses one (SIGSTOP) past its session while the group rebalances
cooperatively around it (a zombie), then lets it go on (SIGCONT). A ``read_committed`` reader
of the output must see every input record exactly once: no duplicate, no gap."""

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
from tests.consumer.helpers import produce, unique, wait_for

pytestmark = pytest.mark.timeout(600)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "exactly_once.py"
SEED = int(os.environ.get("AIOGROUP_EOS_SEED", "447"))
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 6, 3
WAVES, PER_WAVE = 8, 400  # records per input partition come in waves of PER_WAVE in all
SESSION_MS = 6000
BOUND_S = 120.0


class Workers:
    """The example's processes, by name; each appends its events to ``<name>.events``."""

    def __init__(self, kafka: KafkaBroker, out: Path, group: str, src: str, dst: str) -> None:
        self.kafka, self.out, self.group, self.src, self.dst = kafka, out, group, src, dst
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kills = 0

    def start(self, name: str) -> None:
        argv = [
            sys.executable, str(EXAMPLE), "--bootstrap", self.kafka.bootstrap,
            "--group", self.group, "--input", self.src, "--output", self.dst, "--name", name,
            "--events", str(self.out / f"{name}.events"), "--max-records", "50",
            "--batch-records", "4",  # Produce inside the transaction: kills leave aborted data
            "--session-ms", str(SESSION_MS), "--heartbeat-ms", "500",
            "--transaction-timeout-ms", "10000",
        ]  # fmt: skip
        with (self.out / f"{name}.stderr").open("ab") as err:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
            )  # fmt: skip

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


async def test_every_input_record_is_output_exactly_once_through_kills_and_a_zombie(
    apache_kafka4: KafkaBroker,  # noqa: F811
    tmp_path: Path,
) -> None:
    rng = random.Random(SEED)
    src, dst, group = unique("eos-in"), unique("eos-out"), unique("eos")
    apache_kafka4.create_topic(src, INPUT_PARTITIONS)
    apache_kafka4.create_topic(dst, OUTPUT_PARTITIONS)
    workers = Workers(apache_kafka4, tmp_path, group, src, dst)
    names = ["w1", "w2", "w3"]
    committed = OutputReader(apache_kafka4.bootstrap, dst, "read_committed")
    await committed.start()
    expected: list[bytes] = []
    zombie_wave = rng.randrange(2, WAVES - 2)
    zombie = ""
    paused_at = float("inf")

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

            await produce(apache_kafka4.bootstrap, src, dict.fromkeys(range(INPUT_PARTITIONS),
                          per), value=value)  # fmt: skip
            expected += [value(p, i).upper() for p in range(INPUT_PARTITIONS) for i in range(per)]
            if wave == zombie_wave:
                others_target = len(expected) - per

                def others_done(target: int = others_target) -> bool:
                    return output_count() >= target

                zombie, paused_at = await pause_a_zombie(workers, names, others_done)
                continue
            # A SIGKILL at a random point of this wave's processing, then a restart.
            victim = rng.choice(names)
            target = len(expected) - PER_WAVE + rng.randrange(0, PER_WAVE)
            await wait_for(partial(reached, target), BOUND_S, f"output reaching {target}")
            workers.kill_and_restart(victim)
        await wait_for(lambda: len(set(committed.values)) >= len(expected), BOUND_S,
                       "every record in the output")  # fmt: skip
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
    zombie_fenced = sum(e.get("reason") == "ConsumerFencedError" and e["t"] > paused_at
                        for e in workers.events(zombie))  # fmt: skip
    summary = {
        "seed": SEED, "records_in": len(expected), "records_out": len(seen),
        "duplicates": duplicates, "gaps": gaps, "strangers": strangers,
        "kills": workers.kills, "zombie": zombie, "aborted_transactions": aborted,
        "fenced_offset_commits": fenced,
        "zombie_fenced_after_sigcont": zombie_fenced,
        "read_uncommitted_records": len(uncommitted.values),
        "read_uncommitted_duplicates": len(uncommitted.values) - len(set(uncommitted.values)),
        "exit_codes": codes,
    }  # fmt: skip
    print("exactly-once:", json.dumps(summary))
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    assert (duplicates, gaps, strangers) == (0, 0, 0), summary
    assert len(seen) == len(expected)
    assert workers.kills == WAVES - 1
    assert all(code == 0 for code in codes.values()), summary


async def pause_a_zombie(
    workers: Workers, names: list[str], others_done: Any
) -> tuple[str, float]:
    """SIGSTOP a worker owning partitions; SIGCONT once the others took them over and
    processed the wave (``others_done``). Its name and when it was paused."""
    zombie: str = await wait_for(
        lambda: next((n for n in names if workers.owned(n)), None), BOUND_S,
        "a worker owning partitions",
    )  # fmt: skip
    held = workers.owned(zombie)
    paused_at = time.time()
    workers.procs[zombie].send_signal(signal.SIGSTOP)
    others = [n for n in names if n != zombie]
    await wait_for(
        lambda: any(e["type"] == "assigned" and held & set(e["partitions"])
                    and e["t"] > paused_at
                    for n in others for e in workers.events(n)),
        BOUND_S, "the group taking the zombie's partitions",
    )  # fmt: skip
    await wait_for(others_done, BOUND_S, "the others processing the wave")
    workers.procs[zombie].send_signal(signal.SIGCONT)
    return zombie, paused_at


async def wait_for_async(check: Any, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"reader not caught up within {timeout:.0f}s")
        await asyncio.sleep(0.1)  # polling a condition with a bound
