"""KIP-429 metrics, protocol selection and the pure delta helpers."""

from __future__ import annotations

import math

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.assignors.cooperative_sticky import CooperativeStickyAssignor
from aiogroup.assignors.range import RangeAssignor
from aiogroup.errors import ConfigurationError
from aiogroup.membership import MemberConfig, member_delta, select_protocol
from aiogroup.membership.deltas import owners_by_claims, validate_cooperative
from aiogroup.observability.metrics import (
    FAILED_REBALANCE,
    PARTITIONS_REVOKED_LATENCY,
    REBALANCE_LATENCY,
    KIP429Metrics,
    MetricsSink,
    NullMetrics,
)
from aiogroup.protocol import Assignment, Subscription

from .helpers import CoopOnly, EagerFixed, FixedAssignor, tps


def test_metrics_fresh_values_are_java_defaults() -> None:
    snap = KIP429Metrics().snapshot(5.0)
    assert snap["rebalance-total"] == 0 and snap["failed-rebalance-total"] == 0
    assert snap["last-rebalance-seconds-ago"] == -1
    assert math.isnan(snap["rebalance-latency-avg"]) and math.isnan(snap["rebalance-latency-max"])
    assert snap["rebalance-rate-per-hour"] == 0
    assert {
        "rebalance-latency-total",
        "failed-rebalance-rate-per-hour",
        "partition-revoked-latency-avg",
        "partition-assigned-latency-max",
        "partition-lost-latency-avg",
    } <= set(snap)


def test_metrics_aggregate_and_rates() -> None:
    m = KIP429Metrics(started_at=0.0, window=3600.0)
    assert isinstance(m, MetricsSink) and isinstance(NullMetrics(), MetricsSink)
    m.observe(REBALANCE_LATENCY, 1.0, 600.0)
    m.observe(REBALANCE_LATENCY, 3.0, 1200.0)
    m.observe(FAILED_REBALANCE, 1.0, 1200.0)
    m.observe(PARTITIONS_REVOKED_LATENCY, 0.002, 1200.0)
    m.observe("not-a-metric", 1.0, 1200.0)
    snap = m.snapshot(1800.0)
    assert snap["rebalance-latency-avg"] == pytest.approx(2000.0)
    assert snap["rebalance-latency-max"] == pytest.approx(3000.0)
    assert snap["rebalance-latency-total"] == pytest.approx(4000.0)
    assert snap["rebalance-total"] == 2
    assert snap["rebalance-rate-per-hour"] == pytest.approx(2 * 3600 / 1800)
    assert snap["failed-rebalance-rate-per-hour"] == pytest.approx(3600 / 1800)
    assert snap["last-rebalance-seconds-ago"] == pytest.approx(600.0)
    assert snap["partition-revoked-latency-max"] == pytest.approx(2.0)
    # Older than the window: the rate forgets, the totals do not.
    later = m.snapshot(1200.0 + 3600.0 + 1)
    assert later["rebalance-rate-per-hour"] == 0 and later["rebalance-total"] == 2


def test_metrics_rate_has_a_minimum_elapsed() -> None:
    m = KIP429Metrics(started_at=0.0)
    m.observe(REBALANCE_LATENCY, 0.1, 1.0)
    assert m.snapshot(1.0)["rebalance-rate-per-hour"] == pytest.approx(3600 / 30)
    with pytest.raises(ValueError):
        KIP429Metrics(window=0)


def test_protocol_selection() -> None:
    # [range, cooperative-sticky] runs EAGER (first bounce of the upgrade); alone: COOPERATIVE.
    assert (
        select_protocol([RangeAssignor(), CooperativeStickyAssignor()]) is RebalanceProtocol.EAGER
    )
    assert select_protocol([CooperativeStickyAssignor()]) is RebalanceProtocol.COOPERATIVE
    assert select_protocol([FixedAssignor()]) is RebalanceProtocol.COOPERATIVE
    assert select_protocol([EagerFixed(), FixedAssignor()]) is RebalanceProtocol.EAGER
    with pytest.raises(ConfigurationError):
        select_protocol([EagerFixed(), CoopOnly()])
    with pytest.raises(ConfigurationError):
        select_protocol([])
    with pytest.raises(ConfigurationError):
        select_protocol([FixedAssignor(), FixedAssignor()])
    with pytest.raises(ConfigurationError):
        MemberConfig(group_id="g", assignors=[RangeAssignor(), CoopOnly()])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"group_id": ""},
        {"heartbeat_interval_ms": 10_000, "session_timeout_ms": 10_000},
        {"rebalance_timeout_ms": 0},
        {"subscription_version": 4},
        {"group_instance_id": ""},
    ],
)
def test_bad_config_is_refused(kwargs: dict[str, object]) -> None:
    base: dict[str, object] = {"group_id": "g", "assignors": [FixedAssignor()]}
    base.update(kwargs)
    with pytest.raises(ConfigurationError):
        MemberConfig(**base)  # type: ignore[arg-type]


def test_member_delta() -> None:
    d = member_delta(tps("t-1", "t-2"), tps("t-2", "t-3"))
    assert d.added == tps("t-3") and d.revoked == tps("t-1")


def test_validate_cooperative_flags_revoke_and_assign_in_one_round() -> None:
    subs = {
        "a": Subscription(["t"], owned_partitions={"t": (0,)}, generation_id=1),
        "b": Subscription(["t"]),
    }
    owners = owners_by_claims(subs)
    bad = validate_cooperative({"a": Assignment({}), "b": Assignment({"t": (0,)})}, owners)
    assert bad == tps("t-0")
    ok = validate_cooperative({"a": Assignment({"t": (0,)}), "b": Assignment({"t": (1,)})}, owners)
    assert ok == frozenset()


def test_sans_io_core_imports_no_clock_or_io() -> None:
    import ast
    import pathlib

    import aiogroup.membership as pkg

    root = pathlib.Path(pkg.__file__).parent
    files = [*root.glob("*.py"), root.parent / "observability" / "metrics.py"]
    assert len(files) >= 8
    for path in files:
        tree = ast.parse(path.read_text())
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
        assert not names & {"asyncio", "socket", "time", "datetime", "selectors"}, path
