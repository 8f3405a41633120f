"""The conformance suite: the same scenarios on every broker, each embedded flavour compared with
the live Apache Kafka of its generation (4.1.1, 3.9.1, 2.3.0).

See ``engine.py`` (the run and the table), ``scenarios.py`` (the registry and raw-protocol
tools), ``raw_scenarios.py`` and ``peer_scenarios.py`` (the scenarios). Regenerate the table in
docs/conformance.md with::

    .venv/bin/pytest tests/conformance --conformance-table docs/conformance.md
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from . import peer_scenarios, raw_scenarios  # noqa: F401 - registers the scenarios
from .engine import KINDS, LABELS, Conformance, kinds_compared, write_outcomes, write_table
from .peers import Peer, Peers, create_topic, produce, settings
from .scenarios import unique

# Other suites (tests/safety) start real-client peers with these.
__all__ = ["Peer", "Peers", "create_topic", "produce", "settings", "unique"]

_KEY = pytest.StashKey[Conformance]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--conformance-table",
        metavar="PATH",
        default=None,
        help="write the conformance table (scenario x broker) into PATH (between its markers)",
    )
    parser.addoption(
        "--conformance-outcomes",
        metavar="PATH",
        default=None,
        help="write every scenario's outcome on every broker as JSON to PATH",
    )


def get_conformance(config: pytest.Config) -> Conformance:
    if _KEY not in config.stash:
        config.stash[_KEY] = Conformance(config)
    return config.stash[_KEY]


@pytest.fixture(scope="session")
def conformance(pytestconfig: pytest.Config) -> Conformance:
    return get_conformance(pytestconfig)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note which scenario runs the selected tests need (a kind runs only those)."""
    selected: dict[str, set[str]] = {}
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        if (
            callspec is None
            or not isinstance(item, pytest.Function)
            or not item.nodeid.startswith("tests/conformance/")
        ):
            continue
        params = callspec.params
        name = params.get("name")
        if name is None:
            continue
        for kind in kinds_compared(item.originalname, params):
            selected.setdefault(kind, set()).add(name)
    get_conformance(session.config).selected = selected


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    conformance = session.config.stash.get(_KEY, None)
    path = session.config.getoption("--conformance-table", default=None)
    if conformance is not None and path:
        write_table(conformance, Path(path))
    outcomes = session.config.getoption("--conformance-outcomes", default=None)
    if conformance is not None and outcomes:
        write_outcomes(conformance, Path(outcomes))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    conformance = terminalreporter.config.stash.get(_KEY, None)
    if conformance is None or not conformance.futures:
        return
    terminalreporter.write_line("conformance runs (wall time per broker, slowest scenarios):")
    for kind in KINDS:
        seconds = conformance.run_seconds(kind)
        if seconds is None:
            continue
        results = conformance.done(kind)
        slowest = sorted(results.items(), key=lambda kv: -kv[1].seconds)[:3]
        detail = ", ".join(f"{n} {r.seconds:.1f}s" for n, r in slowest)
        terminalreporter.write_line(f"  {LABELS[kind]:17s} {seconds:6.1f}s  ({detail})")
