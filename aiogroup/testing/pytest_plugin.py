"""The pytest plugin pytest loads by itself once aiogroup is installed (entry point ``pytest11``).

It makes the fixtures of :mod:`aiogroup.testing.fixtures` (``embedded_broker``,
``threaded_broker``, ``apache_kafka``, ``apache_kafka4``, ``kafka_broker``, ``java_peer``,
``franz_go_peer``) available to every test, with no ``pytest_plugins`` line, and registers the
markers that ``kafka_broker``'s parameters carry (``tansu``, ``kafka23``, ``kafka4``,
``kafka39``, ``docker``), so
``--strict-markers`` accepts them.

The fixtures module is registered under its own module name, which is the name pytest checks
before importing a ``pytest_plugins`` entry: a project that still lists
``pytest_plugins = ["aiogroup.testing.fixtures"]`` gets the same plugin once, not twice.
Disable the plugin with ``-p no:aiogroup``.

**SIGTERM ends the run as Ctrl-C does.** pytest runs no teardown when the process is killed
by SIGTERM (a CI job cancelled, ``timeout``, ``kill``): the session's brokers (Kafka JVMs,
Tansu) would outlive it. The plugin turns SIGTERM into a ``KeyboardInterrupt`` (pytest's
own interruption), so the fixtures stop what they started, by pid, before pytest exits. It
does so only where SIGTERM has its default action and in the main thread; a project that
handles SIGTERM itself keeps its handler.

kafka-python 3 (aiogroup's wire schemas) loads each message schema with a deprecated
``importlib.resources`` call; the plugin hides those two DeprecationWarnings (about 200 per
run) and nothing else. A ``-W`` option or the project's own ``filterwarnings`` still decide.
"""

from __future__ import annotations

import os
import signal
import threading
import warnings
from types import FrameType

import pytest

__all__ = [
    "BROKER_MARKERS",
    "MARKERS",
    "WARNING_FILTERS",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
    "pytest_unconfigure",
]

#: Markers carried by the ``kafka_broker`` fixture's parameters.
MARKERS = {
    "tansu": "needs the Tansu broker from the aiogroup[broker] extra",
    "kafka23": "runs Apache Kafka 2.3.0 with ZooKeeper on the local JVM (aiogroup.testing)",
    "kafka4": "runs Apache Kafka 4.1.1 in KRaft mode on the local JVM (aiogroup.testing)",
    "kafka39": "runs Apache Kafka 3.9.1 in KRaft mode on the local JVM (aiogroup.testing)",
    "docker": "needs a Docker engine (Apache Kafka via testcontainers)",
    "every_broker": "runs on every broker kind, whatever --aiogroup-brokers selects",
}

#: The broker kind each marker stands for (``--aiogroup-brokers`` names kinds).
BROKER_MARKERS = {
    "tansu": "tansu",
    "kafka23": "kafka23",
    "kafka4": "kafka4",
    "kafka39": "kafka39",
    "docker": "kafka",
}

#: Warnings from kafka-python's schema loader: the loader's own call, and the nested one that
#: importlib.resources makes inside it (the outer warning always names the real caller).
WARNING_FILTERS = (
    "ignore:read_text is deprecated:DeprecationWarning:kafka.protocol.schemas.load_json",
    "ignore:open_text is deprecated:DeprecationWarning:importlib.resources._legacy",
)

FIXTURES = "aiogroup.testing.fixtures"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    with warnings.catch_warnings():
        for line in WARNING_FILTERS:
            _, message, _, module = line.split(":")
            warnings.filterwarnings("ignore", message, DeprecationWarning, module)
        # Registered under its module name: a ``pytest_plugins`` entry naming it is a no-op.
        config.pluginmanager.import_plugin(FIXTURES)
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for name, description in MARKERS.items():
        if name not in known:
            config.addinivalue_line("markers", f"{name}: {description}")
    # Added first, so filters the project configures itself come later and take precedence.
    user_filters = list(config.getini("filterwarnings"))
    config.getini("filterwarnings")[:] = [*WARNING_FILTERS, *user_filters]
    if (
        threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _interrupt)
        config.stash[_HANDLER] = True


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_HANDLER, False) and signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


_HANDLER = pytest.StashKey[bool]()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM: interrupt the run as Ctrl-C does, so the fixtures' teardown runs."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends it at once
    raise KeyboardInterrupt(f"signal {signum} (SIGTERM): stopping, tearing the fixtures down")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--aiogroup-brokers",
        default=None,
        metavar="KINDS",
        help="run the tests of these broker kinds only, e.g. 'kafka4,tansu' (the embedded "
        "broker always runs; tests marked every_broker run on every kind); 'all' or unset: "
        "every kind (also $AIOGROUP_BROKERS)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the items of broker kinds ``--aiogroup-brokers`` leaves out."""
    chosen = config.getoption("--aiogroup-brokers") or os.environ.get("AIOGROUP_BROKERS")
    if not chosen or chosen.strip() == "all":
        return
    allowed = {kind.strip() for kind in chosen.split(",") if kind.strip()}
    unknown = allowed - set(BROKER_MARKERS.values()) - {"embedded"}
    if unknown:
        raise pytest.UsageError(
            f"--aiogroup-brokers: unknown kind(s) {', '.join(sorted(unknown))}; "
            f"known: embedded, {', '.join(sorted(set(BROKER_MARKERS.values())))}"
        )
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    for item in items:
        kinds = {BROKER_MARKERS[m.name] for m in item.iter_markers() if m.name in BROKER_MARKERS}
        if kinds and not kinds & allowed and item.get_closest_marker("every_broker") is None:
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
