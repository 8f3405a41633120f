"""What ``import aiogroup`` and ``from aiogroup import Consumer`` load, and the deferred
``__init__`` of kafka-python and aiokafka (:func:`aiogroup.lazy.defer_package_init`): a program
that imports those packages itself, before or after aiogroup, gets the whole package, and every
class is one object whichever way it was reached.

Each check runs in a fresh interpreter (what is imported is process-wide state).
"""

from __future__ import annotations

import builtins
import importlib
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from aiogroup.lazy import defer_package_init

ROOT = Path(__file__).resolve().parents[1]


def run(code: str) -> str:
    """Run ``code`` in a fresh interpreter (this tree first on the path); its stdout."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_importing_the_consumer_loads_no_client_of_kafka_python_or_aiokafka() -> None:
    run(
        """
        import sys
        from aiogroup import Consumer
        loaded = set(sys.modules)
        for name in (
            "kafka.admin", "kafka.consumer", "kafka.producer", "kafka.protocol",
            "aiokafka.consumer", "aiokafka.producer", "aiokafka.client", "aiokafka.record",
            "aiokafka.codec", "cramjam",
            "aiogroup.client.member", "aiogroup.client.transport", "aiogroup.protocol.messages",
            "aiogroup.membership.consumer_machine", "aiogroup.membership.machine",
            "aiogroup.assignors.cooperative_sticky", "aiogroup.assignors.range",
            "aiogroup.producer", "aiogroup.observability.telemetry",
        ):
            assert name not in loaded, name
        """
    )


def test_a_classic_consumer_leaves_the_kip_848_parts_and_the_other_clients_unloaded() -> None:
    run(
        """
        import asyncio, sys
        from aiogroup import Consumer

        async def main():
            Consumer("127.0.0.1:1", "g", topics=["t"])

        asyncio.run(main())
        for name in (
            "aiogroup.membership.consumer_machine", "aiogroup.protocol.messages",
            "aiogroup.assignors.sticky", "aiogroup.assignors.roundrobin", "aiogroup.producer",
            "kafka.admin", "kafka.consumer", "aiokafka.consumer", "aiokafka.producer",
        ):
            assert name not in sys.modules, name
        assert "aiogroup.assignors.cooperative_sticky" in sys.modules  # the configured one
        """
    )


def test_after_aiogroup_the_packages_are_whole_on_first_use() -> None:
    out = run(
        """
        import importlib.metadata, sys
        import aiogroup.consumer.records, aiogroup.client.transport  # their submodules
        import aiokafka, kafka
        assert "aiokafka.consumer" not in sys.modules and "kafka.admin" not in sys.modules
        from aiokafka.structs import TopicPartition as before  # a submodule: no __init__ yet
        assert "aiokafka.consumer" not in sys.modules
        assert aiokafka.__version__ == importlib.metadata.version("aiokafka")
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
        assert "aiokafka.consumer" in sys.modules and TopicPartition is before
        assert AIOKafkaConsumer is sys.modules["aiokafka.consumer"].AIOKafkaConsumer
        assert sys.modules["aiokafka"] is aiokafka and "__getattr__" not in vars(aiokafka)
        from kafka import KafkaConsumer
        import kafka.consumer.group
        assert KafkaConsumer is kafka.consumer.group.KafkaConsumer
        assert kafka.__version__ == importlib.metadata.version("kafka-python")
        assert set(kafka.__all__) <= set(vars(kafka))
        ns = {}
        exec("from aiokafka import *", ns)
        assert ns["AIOKafkaProducer"] is AIOKafkaProducer
        print(type(AIOKafkaProducer).__name__)
        """
    )
    assert out.strip() == "type"


def test_isinstance_holds_across_both_import_paths() -> None:
    run(
        """
        import sys
        from aiogroup.consumer.records import PartitionRecords  # aiogroup first
        from aiokafka.errors import KafkaError as seen_by_aiogroup
        import aiokafka.errors
        from aiokafka import AIOKafkaClient  # runs aiokafka's __init__
        from aiokafka.errors import KafkaConnectionError
        assert aiokafka.errors.KafkaError is seen_by_aiogroup
        assert isinstance(KafkaConnectionError(), seen_by_aiogroup)
        assert AIOKafkaClient is sys.modules["aiokafka.client"].AIOKafkaClient
        from kafka.protocol.consumer import FetchRequest
        import kafka
        kafka.KafkaProducer  # runs kafka-python's __init__
        from kafka.protocol.consumer import FetchRequest as again
        assert again is FetchRequest
        """
    )


def test_packages_imported_before_aiogroup_are_left_alone() -> None:
    run(
        """
        import sys
        import aiokafka, kafka
        assert "aiokafka.consumer" in sys.modules and "kafka.admin" in sys.modules
        before = (sys.modules["aiokafka"], sys.modules["kafka"])
        from aiogroup import Consumer
        import aiogroup.consumer.records, aiogroup.client.transport
        assert (sys.modules["aiokafka"], sys.modules["kafka"]) == before
        assert "__getattr__" not in vars(aiokafka) and "__getattr__" not in vars(kafka)
        from aiokafka import AIOKafkaConsumer
        from kafka import KafkaConsumer
        """
    )


def test_the_deferred_package_keeps_kafka_pythons_logging_default() -> None:
    # kafka-python's __init__ gives its logger a NullHandler; it runs once anything asks.
    run(
        """
        import logging
        import aiogroup.client.transport
        import kafka
        kafka.KafkaConsumer
        assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("kafka").handlers)
        """
    )


# -- defer_package_init on packages of our own -------------------------------------------------


def make_package(root: Path, name: str, init: str, **modules: str) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent(init))
    for module, text in modules.items():
        (pkg / f"{module}.py").write_text(textwrap.dedent(text))


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("deferred_")]:
        del sys.modules[name]
    vars(builtins).pop("deferred_runs", None)


def runs(name: str) -> int:
    """How many times package ``name``'s __init__ started."""
    return list(vars(builtins).get("deferred_runs", [])).count(name)


def test_init_runs_once_on_first_use_and_submodules_never_run_it(packages: Path) -> None:
    make_package(
        packages,
        "deferred_a",
        """
        __version__ = "1.2"
        import builtins
        builtins.__dict__.setdefault("deferred_runs", []).append("a")
        from deferred_a.sub import Thing
        from deferred_a import sub
        ANSWER = sub.helper()
        """,
        sub="""
        from deferred_a import __version__  # as aiokafka's client.py does

        class Thing:
            pass

        def helper():
            return __version__
        """,
    )
    assert defer_package_init("deferred_a")
    assert not defer_package_init("deferred_a")  # already there: nothing changes
    deferred_a = importlib.import_module("deferred_a")
    sub = importlib.import_module("deferred_a.sub")
    assert runs("a") == 0
    assert deferred_a.__version__ == "1.2"  # a constant: no need to run it
    assert runs("a") == 0
    assert deferred_a.ANSWER == "1.2"
    assert deferred_a.Thing is sub.Thing
    assert runs("a") == 1
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = deferred_a.missing
    assert runs("a") == 1


def test_an_init_that_fails_raises_and_is_tried_again(packages: Path) -> None:
    make_package(
        packages,
        "deferred_b",
        """
        import builtins
        builtins.__dict__.setdefault("deferred_runs", []).append("b")
        if builtins.deferred_runs.count("b") == 1:
            raise RuntimeError("first time")
        VALUE = 7
        """,
    )
    assert defer_package_init("deferred_b")
    deferred_b = importlib.import_module("deferred_b")
    with pytest.raises(RuntimeError, match="first time"):
        _ = deferred_b.VALUE
    assert deferred_b.VALUE == 7 and runs("b") == 2


def test_the_packages_own_module_getattr_answers_after_its_init(packages: Path) -> None:
    make_package(
        packages,
        "deferred_c",
        """
        def __getattr__(name):
            if name == "dynamic":
                return 42
            raise AttributeError(name)
        """,
    )
    assert defer_package_init("deferred_c")
    deferred_c = importlib.import_module("deferred_c")
    assert deferred_c.dynamic == 42


def test_threads_asking_at_once_run_the_init_once(packages: Path) -> None:
    make_package(
        packages,
        "deferred_d",
        """
        import builtins, time
        builtins.__dict__.setdefault("deferred_runs", []).append("d")
        time.sleep(0.05)  # widen the window in which a second thread asks
        VALUE = "ready"
        """,
    )
    assert defer_package_init("deferred_d")
    deferred_d = importlib.import_module("deferred_d")

    seen: list[str] = []
    threads = [threading.Thread(target=lambda: seen.append(deferred_d.VALUE)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == ["ready"] * 8 and runs("d") == 1


def test_what_cannot_be_deferred_is_left_to_the_import_system(packages: Path) -> None:
    (packages / "deferred_plain.py").write_text("X = 1\n")
    assert not defer_package_init("deferred_plain")  # a module, not a package
    assert not defer_package_init("deferred_nowhere")  # not installed
    assert not defer_package_init("os.path")  # not top level
    assert not defer_package_init("sys")  # imported already
