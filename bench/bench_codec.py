"""Benchmark: decode and re-encode consumer-protocol Subscriptions, aiogroup vs kafka-python 3.

2,000 V3 Subscriptions, each owning 500 partitions, as a leader of a large cooperative group
would receive them in one JoinGroup response. Both libraries decode the same bytes and re-encode
what they decoded. The script first checks that both see the same fields and write the same
bytes, then times each side and prints the ratio for three shapes of the owned partitions:
10 topics x 50 partitions (the default shape, target >= 10x), 1 x 500 and 100 x 5.

A fourth row, "varied", is the default shape with every member subscribed to its own 10 of 30
topics, so that consecutive payloads never carry the same topics array (the codec keeps the
last one it read and wrote; this row shows the cost when that never helps).

Timing: best CPU time (``time.process_time``) of ``--repeat`` runs per side, with the garbage
collector disabled for both sides (and a collection before each run), and the two libraries
run alternately, each going first every other round, so load from other processes on a shared
machine falls on both.

Run: ``.venv/bin/python bench/bench_codec.py [--members N] [--partitions P] [--repeat R]``
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from collections.abc import Callable

from aiogroup.protocol import Subscription, decode_subscription, encode_subscription

try:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
except ImportError:  # pragma: no cover
    sys.exit("kafka-python 3 is needed for the comparison: pip install kafka-python")

TARGET = 10.0
ROUND_TRIP = "decode + re-encode"
DECODE_ONLY = "decode only (results kept alive)"
#: (topics per member, topics to choose from: 0 means every member has the same ones)
SHAPES = [(10, 0), (1, 0), (100, 0), (10, 30)]


def make_payloads(
    members: int, partitions: int, topics: int, seed: int, pool: int = 0
) -> list[bytes]:
    """V3 Subscriptions owning ``partitions`` partitions spread evenly over ``topics`` topics.

    With ``pool``, each member subscribes to its own ``topics`` of ``pool`` topics.
    """
    rng = random.Random(seed)
    all_names = [f"topic-{i:03d}" for i in range(max(topics, pool))]
    per_topic = partitions // topics
    payloads = []
    for m in range(members):
        names = sorted(rng.sample(all_names, topics)) if pool else all_names[:topics]
        owned = {name: sorted(rng.sample(range(per_topic * members), per_topic)) for name in names}
        sub = Subscription(
            topics=names,
            user_data=b"",
            owned_partitions=owned,
            generation_id=m % 7,
            rack_id=f"rack-{m % 3}",
        )
        payloads.append(encode_subscription(sub, 3))
    return payloads


def ours(payloads: list[bytes]) -> list[bytes]:
    return [encode_subscription(decode_subscription(p), 3) for p in payloads]


def kafka_python(payloads: list[bytes]) -> list[bytes]:
    return [ConsumerProtocolSubscription.decode(p).encode(version=3) for p in payloads]


def decode_ours(payloads: list[bytes]) -> list[Subscription]:
    return [decode_subscription(p) for p in payloads]


def decode_kafka_python(payloads: list[bytes]) -> list[object]:
    return [ConsumerProtocolSubscription.decode(p) for p in payloads]


def fields_agree(payload: bytes) -> bool:
    mine = decode_subscription(payload)
    theirs = ConsumerProtocolSubscription.decode(payload)
    return bool(
        list(mine.topics) == list(theirs.topics)
        and mine.user_data == theirs.user_data
        and {t: list(p) for t, p in mine.owned_partitions.items()}
        == {tp.topic: list(tp.partitions) for tp in theirs.owned_partitions}
        and [tp.topic for tp in theirs.owned_partitions] == list(mine.owned_partitions)
        and mine.generation_id == theirs.generation_id
        and mine.rack_id == theirs.rack_id
        and mine.version == theirs.version
    )


def cpu_time(fn: Callable[[list[bytes]], object], arg: list[bytes]) -> float:
    """CPU time of one call, the collector off (the result is dropped after the clock stops)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        result = fn(arg)
        elapsed = time.process_time() - start
    finally:
        gc.enable()
    del result
    return elapsed


def alternating_best(
    repeat: int, pair: tuple[Callable[[list[bytes]], object], ...], arg: list[bytes]
) -> list[float]:
    """Best CPU time of each function; they take turns, each going first every other round."""
    best = [float("inf")] * len(pair)
    for r in range(repeat):
        order = range(len(pair)) if r % 2 == 0 else reversed(range(len(pair)))
        for i in order:
            best[i] = min(best[i], cpu_time(pair[i], arg))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    print(
        f"{args.members} V3 subscriptions x {args.partitions} owned partitions; "
        f"best CPU time of {args.repeat}, gc off, libraries alternating"
    )
    header = f"{'shape (topics x partitions)':28} {'aiogroup':>10} {'kafka-python':>13}  ratio"
    #: label -> {"decode + re-encode": (ours, theirs), "decode only ...": (ours, theirs)}
    rows: dict[str, dict[str, tuple[float, float]]] = {}
    for topics, pool in SHAPES:
        label = f"{topics} x {args.partitions // topics}" + (" varied" if pool else "")
        payloads = make_payloads(args.members, args.partitions, topics, seed=1, pool=pool)
        assert all(fields_agree(p) for p in payloads), f"{label}: the two decoders disagree"
        assert ours(payloads) == payloads == kafka_python(payloads), f"{label}: bytes differ"
        t_ours, t_kp = alternating_best(args.repeat, (ours, kafka_python), payloads)
        d_ours, d_kp = alternating_best(args.repeat, (decode_ours, decode_kafka_python), payloads)
        rows[label] = {ROUND_TRIP: (t_ours, t_kp), DECODE_ONLY: (d_ours, d_kp)}

    for title in (ROUND_TRIP, DECODE_ONLY):
        print(f"\n{title}:")
        print(header)
        for label, timings in rows.items():
            mine, theirs = timings[title]
            print(f"{label:28} {mine * 1e3:8.1f} ms {theirs * 1e3:10.1f} ms {theirs / mine:6.1f}x")

    default = next(iter(rows))
    mine, theirs = rows[default][ROUND_TRIP]
    ratio = theirs / mine
    verdict = "PASS" if ratio >= TARGET else "MISS"
    print(f"\n{verdict}: {ratio:.1f}x on the default shape ({default}), target >= {TARGET:g}x")


if __name__ == "__main__":
    main()
