"""The consumer's read path without a broker: CPU per record, deterministic enough for callgrind.

A real :class:`aiogroup.Consumer` (manual assignment, no group) reads ``--records`` records of
``--size`` bytes over ``--partitions`` partitions with ``getmany(max_records=--batch)``. Its
transport is a :class:`~aiogroup.testing.scripted.ScriptedTransport` whose Fetch answers are
cut from a prebuilt log per partition, as a broker cuts them: from the batch holding the fetch
offset, up to ``max_partition_fetch_bytes`` (so the last batch of an answer is usually cut
short), in a Fetch v12 response encoded here. Everything else is the production path: the
request is encoded, the answer's bytes are decoded by the Fetch decoder the consumer uses
(``aiogroup.consumer.wire``), the sans-I/O core buffers them, ``getmany`` hands out
:class:`~aiogroup.consumer.records.ConsumerRecord` values, the fetcher and the metrics run as
they do against a broker. Only the sockets are missing.

The log is record batches of ``--batch-records`` records (v2, built by aiokafka's
``DefaultRecordBatchBuilder``; ``--compression`` gzip or lz4 compresses them). Every record is
checked: each partition's offsets come out 0..n-1, each once, and the value bytes add up.

Prints CPU time per record (``time.process_time`` from the first ``getmany`` to the last
record, best of ``--repeat`` runs after one warm-up run, median beside it) and the load
average. ``--compare DIR`` runs the same measure with the aiogroup of another checkout (e.g.
``/work/main``) in subprocesses, the two taking turns run by run. ``--profile`` prints
cProfile's top functions for one run. Under callgrind (instruction counts repeat on a noisy
machine)::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out \\
        python bench/bench_records.py --repeat 1 --warmup 0 --records 200000
    callgrind_annotate /tmp/cg.out | head -40

    python bench/bench_records.py                          # 1M x 100 B, 12 partitions
    python bench/bench_records.py --compression lz4
    python bench/bench_records.py --compare /work/main --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aiogroup import Consumer, TopicPartition
from aiogroup.client import member as _member_module
from aiogroup.client.transport import Request
from aiogroup.testing.scripted import DecodedRequest, ScriptedTransport
from aiogroup.testing.wire import decode_request

TOPIC = "bench"
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_BASE_OFFSET = struct.Struct(">q")


# -- the log ----------------------------------------------------------------------------------


@dataclass
class PartitionLog:
    """One partition's batches, back to back, and where each starts."""

    data: bytes
    starts: list[int]  # byte position of each batch
    bases: list[int]  # its base offset
    end: int  # the log end offset


def build_batch(records: int, size: int, codec: int) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    value = bytes(i % 251 for i in range(size))
    for i in range(records):
        builder.append(i, timestamp=1_764_000_000_000 + i, key=None, value=value, headers=[])
    return bytes(builder.build())


def build_log(count: int, batch_records: int, size: int, codec: int) -> PartitionLog:
    """``count`` records: one batch template, its base offset rewritten per batch (the CRC
    covers the batch from its attributes on, not the base offset)."""
    full = build_batch(batch_records, size, codec)
    parts: list[bytes] = []
    starts: list[int] = []
    bases: list[int] = []
    pos = 0
    for base in range(0, count, batch_records):
        n = min(batch_records, count - base)
        batch = bytearray(full if n == batch_records else build_batch(n, size, codec))
        _BASE_OFFSET.pack_into(batch, 0, base)
        starts.append(pos)
        bases.append(base)
        parts.append(bytes(batch))
        pos += len(batch)
    return PartitionLog(b"".join(parts), starts, bases, count)


# -- the broker's answer ------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    b = s.encode()
    return _uvarint(len(b) + 1) + b


_PART = struct.Struct(">ihqqq")


def fetch_v12(correlation_id: int, topic: str, parts: Sequence[tuple[int, int, bytes]]) -> bytes:
    """A Fetch v12 response (header v1 and body, no length prefix): ``parts`` are
    (partition, high watermark, records)."""
    out = [struct.pack(">ib", correlation_id, 0), struct.pack(">ihi", 0, 0, 0)]
    out.append(_uvarint(2))  # one topic
    out.append(_compact_string(topic))
    out.append(_uvarint(len(parts) + 1))
    for partition, hw, records in parts:
        out.append(_PART.pack(partition, 0, hw, hw, 0))
        out.append(b"\x00")  # aborted_transactions: null
        out.append(struct.pack(">i", -1))  # preferred_read_replica
        out.append(_uvarint(len(records) + 1))
        out.append(records)
        out.append(b"\x00")  # partition tagged fields
    out.append(b"\x00")  # topic tagged fields
    out.append(b"\x00")  # top-level tagged fields
    return b"".join(out)


class LogTransport(ScriptedTransport):
    """Answers Fetch from the logs, as a broker does: from the batch holding each fetch
    offset, up to the partition's byte limit; holds a Fetch with nothing to give."""

    def __init__(self, logs: dict[int, PartitionLog]) -> None:
        super().__init__(topics={TOPIC: len(logs)})
        self.logs = logs
        self.on("Fetch", self._fetch)

    def _fetch(self, request: DecodedRequest) -> bytes:
        parts = []
        for t in request.body.topics:
            for p in t.partitions:
                log = self.logs[p.partition]
                records = b""
                if p.fetch_offset < log.end:
                    i = bisect.bisect_right(log.bases, p.fetch_offset) - 1
                    start = log.starts[i]
                    records = log.data[start : start + p.partition_max_bytes]
                parts.append((p.partition, log.end, records))
        return fetch_v12(request.correlation_id, t.topic, parts)

    async def send(
        self,
        node_id: int | None,
        request: Request,
        *,
        coordination: bool = False,
        timeout: float | None = None,
    ) -> Any:
        if request.api != "Fetch":
            return await super().send(node_id, request, coordination=coordination, timeout=timeout)
        # As ScriptedTransport does, without keeping every request.
        prepared = request.prepare(self.versions)
        header = prepared.build_request_header(1, self.client_id).encode()
        decoded = decode_request(header + prepared.encode(), self.versions)
        if all(
            p.fetch_offset >= self.logs[p.partition].end
            for t in decoded.body.topics
            for p in t.partitions
        ):
            await asyncio.sleep(0.5)  # a broker holds a Fetch with nothing for max_wait_ms
        prepared.parse_response_header(io.BytesIO(self._fetch(decoded)))
        return request.answer(prepared.decode(io.BytesIO()))


# -- one run ------------------------------------------------------------------------------------


async def consume(logs: dict[int, PartitionLog], batch: int, size: int) -> dict[str, float]:
    transport = LogTransport(logs)
    # The member builds its transport by this name: hand it ours for this one Consumer.
    namespace = vars(_member_module)
    real = namespace["Transport"]
    namespace["Transport"] = lambda *args, **kwargs: transport
    try:
        consumer = Consumer("127.0.0.1:9", None, enable_auto_commit=False)
    finally:
        namespace["Transport"] = real
    tps = [TopicPartition(TOPIC, p) for p in logs]
    expected = sum(log.end for log in logs.values())
    next_offset = dict.fromkeys(logs, 0)
    value_bytes = 0
    lists = 0
    got = 0
    await consumer.start()
    try:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        gc.collect()
        wall = time.perf_counter()
        cpu = time.process_time()
        while got < expected:
            if batch:
                out = await consumer.getmany(timeout_ms=1000, max_records=batch)
            else:  # getone(), as ``async for`` calls it
                record = await consumer.getone()
                out = {TopicPartition(record.topic, record.partition): [record]}
            for tp, records in out.items():
                p = tp.partition
                n = next_offset[p]
                if records[0].offset != n or records[-1].offset != n + len(records) - 1:
                    raise AssertionError(f"{tp}: expected offset {n}, got {records[0].offset}")
                next_offset[p] = n + len(records)
                got += len(records)
                lists += 1
                value_bytes += records[0].serialized_value_size
                value_bytes += records[-1].serialized_value_size
        cpu = time.process_time() - cpu
        wall = time.perf_counter() - wall
    finally:
        await consumer.stop()
    if next_offset != {p: log.end for p, log in logs.items()}:
        raise AssertionError(f"not every record was read: {next_offset}")
    if value_bytes != 2 * lists * size:  # the first and last record of each list
        raise AssertionError(f"value sizes {value_bytes} != {2 * lists * size}")
    return {"cpu": cpu, "wall": wall, "records": got}


# -- main ---------------------------------------------------------------------------------------


def make_logs(args: argparse.Namespace) -> dict[int, PartitionLog]:
    per = args.records // args.partitions
    extra = args.records - per * args.partitions
    codec = CODECS[args.compression]
    return {
        p: build_log(per + (1 if p < extra else 0), args.batch_records, args.size, codec)
        for p in range(args.partitions)
    }


def measure(args: argparse.Namespace) -> list[dict[str, float]]:
    logs = make_logs(args)
    runs = []
    for i in range(args.warmup + args.repeat):
        result = asyncio.run(consume(logs, args.batch, args.size))
        if i >= args.warmup:
            runs.append(result)
    return runs


def profile(args: argparse.Namespace) -> None:
    logs = make_logs(args)
    asyncio.run(consume(logs, args.batch, args.size))
    prof = cProfile.Profile()
    prof.enable()
    asyncio.run(consume(logs, args.batch, args.size))
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(40)


def child_command(args: argparse.Namespace, repeat: int) -> list[str]:
    return [
        sys.executable, os.path.abspath(__file__), "--json",
        "--records", str(args.records), "--partitions", str(args.partitions),
        "--size", str(args.size), "--batch", str(args.batch),
        "--batch-records", str(args.batch_records), "--compression", args.compression,
        "--repeat", str(repeat), "--warmup", str(args.warmup),
    ]  # fmt: skip


def run_child(args: argparse.Namespace, python_path: str) -> dict[str, float]:
    # The checkout first; whatever else PYTHONPATH held (an optional package) after it.
    inherited = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (python_path, inherited) if p))
    out = subprocess.run(
        child_command(args, 1), env=env, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise RuntimeError(f"the run with PYTHONPATH={python_path} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])[0]
    return result


def report(name: str, runs: list[dict[str, float]]) -> str:
    per = sorted(r["cpu"] / r["records"] * 1e6 for r in runs)
    walls = sorted(r["wall"] for r in runs)
    rate = runs[0]["records"] / walls[0] / 1e6
    return (
        f"{name}: CPU {per[0]:.3f} us/record best, {statistics.median(per):.3f} median "
        f"({len(per)} runs); wall best {walls[0]:.2f} s ({rate:.2f} M records/s)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500,
                        help="getmany's max_records; 0: getone() (async for) per record")
    parser.add_argument("--batch-records", type=int, default=4096, help="records per batch")
    parser.add_argument("--compression", choices=sorted(CODECS), default="none")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--compare", metavar="DIR", help="another checkout to run alongside")
    parser.add_argument("--profile", action="store_true", help="cProfile one run")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile:
        profile(args)
        return
    if args.json:
        print(json.dumps(measure(args)))
        return
    print(
        f"{args.records} records of {args.size} B, {args.partitions} partitions, batches of "
        f"{args.batch_records} ({args.compression}), getmany(max_records={args.batch}); "
        f"load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    if not args.compare:
        print(report("this checkout", measure(args)))
    else:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        mine: list[dict[str, float]] = []
        theirs: list[dict[str, float]] = []
        for _ in range(args.repeat):
            mine.append(run_child(args, here))
            theirs.append(run_child(args, os.path.abspath(args.compare)))
        print(report("this checkout", mine))
        print(report(args.compare, theirs))
        a = min(r["cpu"] / r["records"] for r in mine)
        b = min(r["cpu"] / r["records"] for r in theirs)
        print(f"CPU per record, {args.compare} / this checkout: {b / a:.2f}x")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
