"""Real Apache Kafka without Docker: 4.x and 3.9 in KRaft mode, 2.3.0 with ZooKeeper.

Usage::

    with KafkaBroker(version=KAFKA4_VERSION) as kafka:   # one KRaft node on free 127.0.0.1 ports
        print(kafka.bootstrap)                          # "127.0.0.1:PORT"
        kafka.create_topic("orders", 6)
        print(kafka.consumer_groups("--describe", "--group", "g"))

    with KafkaBroker() as kafka:                        # Kafka 2.3.0 + ZooKeeper (the default)
        ...

TLS and SASL (PLAIN, SCRAM-SHA-256/512) listeners beside PLAINTEXT, on every version::

    pki = make_pki(tmp_path)                                  # aiogroup.testing.tls
    with KafkaBroker(**security_config(pki=pki, plain_users={"alice": "alice-secret"})) as kafka:
        kafka.add_scram_user("alice", "alice-secret")         # kafka-configs, then waits
        kafka.ports["SASL_SSL"]                               # SSL, SASL_PLAINTEXT, SASL_SSL

The versions: :mod:`aiogroup.testing.launchers.kraft` (3.9, 4.x: jars from Maven Central by a
pinned list
with checksums, :mod:`aiogroup.testing.launchers.maven`) and
:mod:`aiogroup.testing.launchers.kafka23` (2.3.0: the
release tarball from PyPI, ZooKeeper). Everything listens on 127.0.0.1 only and is stopped by
pid. Set ``AIOGROUP_KAFKA_CACHE`` to choose the cache directory (default
``~/.cache/aiogroup/kafka``), ``AIOGROUP_MAVEN_URL`` for a Maven mirror, ``AIOGROUP_KAFKA_KEEP=1``
to keep every run's configuration and logs (they are always kept when a start fails).

From the command line (``--help`` for more)::

    python -m aiogroup.testing.launchers.kafka --version 4.1.1 --topic orders:6
    python -m aiogroup.testing.launchers.kafka pin 4.4.0        # a new pin file (needs Maven)
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import overload

from aiogroup.errors import AiogroupError
from aiogroup.testing.launchers.kafka23 import (
    KAFKA23_SHA512,
    KAFKA23_VERSION,
    Kafka23Install,
    ensure_kafka23,
)
from aiogroup.testing.launchers.kafka_base import (
    READINESS_REQUESTS,
    TEST_CONFIG,
    KafkaBroker,
    KafkaStartError,
    KafkaUnavailableError,
    cache_dir,
    find_java,
    sasl_jaas,
    security_config,
)
from aiogroup.testing.launchers.kraft import KRaftInstall, ensure_kraft, pin_kafka, pinned_versions
from aiogroup.testing.launchers.processes import StopSignal, stop_on_signals
from aiogroup.testing.listeners import Listener

__all__ = [
    "KAFKA4_VERSION",
    "KAFKA39_VERSION",
    "KAFKA_SHA512",
    "KAFKA_VERSION",
    "READINESS_REQUESTS",
    "TEST_CONFIG",
    "KafkaBroker",
    "KafkaInstall",
    "KafkaStartError",
    "KafkaUnavailableError",
    "Listener",
    "cache_dir",
    "ensure_kafka",
    "find_java",
    "kafka_available",
    "kafka_versions",
    "main",
    "sasl_jaas",
    "security_config",
]

#: What ``KafkaBroker()`` runs without ``version=``: Kafka 2.3.0 with ZooKeeper.
KAFKA_VERSION = KAFKA23_VERSION
#: The default modern version (KRaft): the ``kafka4`` fixture's and ``apache_kafka4``'s.
KAFKA4_VERSION = "4.1.1"
#: The 3.9 line (the last with ZooKeeper; run here in KRaft mode): the ``kafka39`` fixture's.
KAFKA39_VERSION = "3.9.1"
#: Apache's published SHA-512 of kafka_2.12-2.3.0.tgz.
KAFKA_SHA512 = KAFKA23_SHA512
#: Kafka 2.3's prepared install (the name it had before KRaft).
KafkaInstall = Kafka23Install


def kafka_versions() -> list[str]:
    """Every version :class:`KafkaBroker` can start: 2.3.0 and those with a pin file."""
    return [KAFKA23_VERSION, *pinned_versions()]


@overload
def ensure_kafka(cache: Path | None = None, *, version: None = None) -> Kafka23Install: ...
@overload
def ensure_kafka(
    cache: Path | None = None, *, version: str | None = None
) -> Kafka23Install | KRaftInstall: ...
def ensure_kafka(
    cache: Path | None = None, *, version: str | None = None
) -> Kafka23Install | KRaftInstall:
    """Download (once), verify and prepare Kafka ``version`` (default 2.3.0) for this Java.

    Raises :class:`KafkaUnavailableError` with the reason when that is impossible here.
    """
    if version is None or version == KAFKA23_VERSION:
        return ensure_kafka23(cache)
    return ensure_kraft(version, cache)


def kafka_available(version: str | None = None) -> tuple[bool, str]:
    """Whether Kafka ``version`` (default 2.3.0) can run here, as ``(ok, reason)``."""
    try:
        install = ensure_kafka(version=version)
    except AiogroupError as exc:  # KafkaUnavailableError, or an unpinned version
        return False, str(exc)
    where = install.home if isinstance(install, Kafka23Install) else install.libs.parent
    return True, (
        f"Apache Kafka {version or KAFKA23_VERSION} at {where} on Java {install.java_version}"
    )


# --------------------------------------------------------------------------- command line


def parse_topic(spec: str) -> tuple[str, int]:
    """``NAME[:PARTITIONS]`` -> (name, partitions)."""
    name, _, count = spec.partition(":")
    try:
        partitions = int(count or "1")
    except ValueError:
        partitions = 0
    if not name or partitions < 1:
        raise argparse.ArgumentTypeError(
            f"bad topic {spec!r} (want NAME[:PARTITIONS], e.g. orders:6)"
        )
    return name, partitions


def _ready_line(kafka: KafkaBroker, word: str) -> str:
    pids = " ".join(f"{name}={pid}" for name, pid in kafka.pids.items())
    return f"{word} bootstrap={kafka.bootstrap} {pids} work={kafka.work}"


def _serve(args: argparse.Namespace) -> int:
    restart = threading.Event()

    def on_usr1(signum: int, frame: FrameType | None) -> None:
        restart.set()

    previous = signal.signal(signal.SIGUSR1, on_usr1)
    try:
        with stop_on_signals(), KafkaBroker(version=args.version, keep=args.keep or None) as kafka:
            for name, partitions in args.topic or []:
                kafka.create_topic(name, partitions)
            print(
                f"Apache Kafka {kafka.version} on {kafka.bootstrap}, ports {kafka.ports}; "
                "SIGTERM, SIGHUP or Ctrl-C stop it"
                + ("" if args.keep else " and remove its work folder")
                + "; SIGUSR1 restarts the broker",
                flush=True,
            )
            print(_ready_line(kafka, "ready"), flush=True)
            while True:
                if restart.wait(1.0):  # an idle wait; signals interrupt it
                    restart.clear()
                    kafka.restart_broker()
                    print(_ready_line(kafka, "restarted"), flush=True)
    except StopSignal as stop:
        # Whoever read our lines may be gone (its pipe closed): stopping is what matters.
        with contextlib.suppress(OSError):
            print(f"{stop}: stopped", flush=True)
        return 0
    except KeyboardInterrupt:
        return 0
    except AiogroupError as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        return 1
    finally:
        signal.signal(signal.SIGUSR1, previous)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pin"]:
        pin = argparse.ArgumentParser(
            prog="python -m aiogroup.testing.launchers.kafka pin",
            description="Write the pinned jar list of a Kafka release (needs Maven: mvn "
            "dependency:list resolves kafka_2.13 and kafka-tools; each jar is checked against "
            "the repository's .sha1 and pinned by SHA-256).",
        )
        pin.add_argument("version", help="e.g. 4.4.0")
        pin.add_argument("--mvn", default="mvn", help="the Maven command (default: mvn)")
        args = pin.parse_args(argv[1:])
        try:
            path = pin_kafka(args.version, mvn=args.mvn)
        except AiogroupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {path}")
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m aiogroup.testing.launchers.kafka",
        description="Run one real Apache Kafka broker on 127.0.0.1 until SIGTERM, SIGHUP or "
        "Ctrl-C (then everything it started is stopped and its work folder removed). It prints "
        "a line 'ready bootstrap=HOST:PORT kafka=PID ... work=DIR' once clients can use it; "
        "SIGUSR1 restarts the broker (same ports and data) and prints 'restarted ...'. "
        "'pin VERSION' writes a new pinned jar list instead.",
    )
    parser.add_argument(
        "--version",
        default=KAFKA23_VERSION,
        choices=kafka_versions(),
        help=f"the Kafka version (default {KAFKA23_VERSION}, with ZooKeeper; others in KRaft mode)",
    )
    parser.add_argument(
        "--topic", action="append", type=parse_topic, help="create NAME[:PARTITIONS] (repeatable)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the work folder (configuration, data, logs)"
    )
    return _serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
