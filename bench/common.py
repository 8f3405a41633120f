"""Helpers the consumer benchmarks share: a process's RSS and a local Apache Kafka to run on.

Imported by the scripts beside it (``python bench/bench_consumer.py`` puts ``bench/`` first on
``sys.path``).
"""

from __future__ import annotations

from typing import Any

#: ``--broker`` choices: Apache Kafka 4.1.1 (KRaft) and 2.3.0 (ZooKeeper), both local JVMs.
BROKERS = ("kafka4", "kafka23")


def _status_mb(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return 0.0


def rss_mb() -> float:
    """This process's resident set now (VmRSS), MB."""
    return _status_mb("VmRSS:")


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM; ru_maxrss would keep the parent's peak across
    exec), MB."""
    return _status_mb("VmHWM:")


def start_broker(kind: str = "kafka23") -> Any:
    """A started local Apache Kafka (full JIT, 1 GB heap) of ``kind`` in :data:`BROKERS`; the
    caller stops it (``.stop()``); ``.bootstrap`` and ``.create_topic(name, partitions)``."""
    from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KAFKA_VERSION, KafkaBroker

    if kind not in BROKERS:
        raise ValueError(f"unknown broker {kind!r}: one of {', '.join(BROKERS)}")
    version = KAFKA4_VERSION if kind == "kafka4" else KAFKA_VERSION
    broker = KafkaBroker(version=version, quick_jit=False, heap_mb=1024)
    broker.start()
    return broker
