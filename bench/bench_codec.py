"""Benchmark: decode and re-encode consumer-protocol Subscriptions, aiogroup vs kafka-python 3.

2,000 V3 Subscriptions, each owning 500 partitions (spread over 10 topics), as a leader of a
large cooperative group would receive them in one JoinGroup response. Both libraries decode the
same bytes and re-encode what they decoded; the script checks that both see the same fields and
write the same bytes, then prints the timings and the ratio.

Run: ``.venv/bin/python bench/bench_codec.py [--members N] [--partitions P] [--repeat R]``
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable

from aiogroup.protocol import Subscription, decode_subscription, encode_subscription

try:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription
except ImportError:  # pragma: no cover
    sys.exit("kafka-python 3 is needed for the comparison: pip install kafka-python")


def make_payloads(members: int, partitions: int, topics: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    names = [f"topic-{i:03d}" for i in range(topics)]
    per_topic = partitions // topics
    payloads = []
    for m in range(members):
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


def interleaved_best(
    repeat: int, fns: list[Callable[[list[bytes]], object]], arg: list[bytes]
) -> list[float]:
    """Best CPU time of each function, run in turn: on a shared machine CPU time is steadier
    than wall time, and interleaving spreads any remaining noise over all of them."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.process_time()
            fn(arg)
            best[i] = min(best[i], time.process_time() - start)
    return best


def decode_ours(payloads: list[bytes]) -> list[Subscription]:
    return [decode_subscription(p) for p in payloads]


def decode_kafka_python(payloads: list[bytes]) -> list[object]:
    return [ConsumerProtocolSubscription.decode(p) for p in payloads]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=500)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    payloads = make_payloads(args.members, args.partitions, args.topics, seed=1)
    total = sum(map(len, payloads))
    assert all(fields_agree(p) for p in payloads), "the two decoders disagree"
    assert ours(payloads) == payloads == kafka_python(payloads), "re-encoded bytes differ"

    t_ours, t_kp, dec_ours, dec_kp = interleaved_best(
        args.repeat, [ours, kafka_python, decode_ours, decode_kafka_python], payloads
    )
    print(
        f"{args.members} subscriptions x {args.partitions} owned partitions "
        f"({args.topics} topics, {total / 1e6:.1f} MB), best of {args.repeat}"
    )
    print("  decode + re-encode:")
    print(f"    aiogroup      {t_ours * 1e3:9.1f} ms")
    print(f"    kafka-python  {t_kp * 1e3:9.1f} ms")
    print(f"    ratio         {t_kp / t_ours:9.1f}x faster")
    print("  decode only (results kept alive):")
    print(f"    aiogroup      {dec_ours * 1e3:9.1f} ms")
    print(f"    kafka-python  {dec_kp * 1e3:9.1f} ms")
    print(f"    ratio         {dec_kp / dec_ours:9.1f}x faster")


if __name__ == "__main__":
    main()
