"""The rolling-upgrade example (examples/rolling_upgrade.py), run for real on the embedded broker
and on Apache Kafka 2.3 (both directions; its group state read with DescribeGroups at the
version the broker speaks).

Each run bounces a 3-member group twice, one member at a time (KIP-429 "Compatibility and
Upgrade Path"), and the example checks every step itself. These tests do not take its word for
it: they re-derive the expected protocols from the KIP's rules, rebuild ownership intervals from
the recorded callbacks, and check each converged assignment independently.
"""

from __future__ import annotations

import io
import itertools
import json
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pytest

from aiogroup.assignors.base import RebalanceProtocol
from aiogroup.errors import ConfigurationError
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import apache_kafka  # noqa: F401 - the fixture, found by name
from aiogroup.testing.launchers.kafka import KafkaBroker
from examples import rolling_upgrade as ru

EAGER, COOPERATIVE = RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE
TOPICS = {"orders": 4, "payments": 3}
ALL = frozenset(TopicPartition(t, p) for t, n in TOPICS.items() for p in range(n))
MEMBERS = ("member-1", "member-2", "member-3")
STEP_TIMEOUT = 20.0


def _double_owned(records: Sequence[ru.CallbackRecord]) -> list[str]:
    """Ownership intervals per partition, from the callbacks alone; any overlap is returned."""
    opened: dict[tuple[str, TopicPartition], float] = {}
    intervals: dict[TopicPartition, list[tuple[float, float, str]]] = defaultdict(list)
    last = max((r.at for r in records), default=0.0)
    for r in records:
        for tp in r.partitions:
            key = (r.owner, tp)
            if r.kind == "assigned":
                opened.setdefault(key, r.at)
            elif key in opened:
                intervals[tp].append((opened.pop(key), r.at, r.owner))
    for (owner, tp), start in opened.items():
        intervals[tp].append((start, last + 1.0, owner))
    overlaps = []
    for tp, spans in intervals.items():
        spans.sort()
        for (_, end, a), (start, _, b) in itertools.pairwise(spans):
            if start < end:
                overlaps.append(f"{tp}: {a} until {end}, {b} from {start}")
    return overlaps


def _check_run(
    report: ru.UpgradeReport, direction: str, partitions: frozenset[TopicPartition] = ALL
) -> None:
    plan = ru.PLANS[direction]
    assert report.ok, report.all_problems
    assert report.partitions == partitions

    # One member at a time: start, then left/rejoined per member per bounce.
    expected_steps = [(0, "start", None)] + [
        (bounce, event, name)
        for bounce in (1, 2)
        for name in MEMBERS
        for event in ("left", "rejoined")
    ]
    assert [(c.bounce, c.event, c.member) for c in report.checkpoints] == expected_steps

    configs: dict[str, tuple[str, ...]] = dict.fromkeys(MEMBERS, plan[0])
    for cp in report.checkpoints:
        live = dict(configs)
        if cp.event == "left":
            assert cp.member is not None
            live.pop(cp.member)
        elif cp.event == "rejoined":
            assert cp.member is not None
            configs[cp.member] = live[cp.member] = plan[cp.bounce]
        assert dict(cp.assignors) == live, cp.label

        # Converged: every partition owned, by exactly one member.
        owned = [tp for parts in cp.assignment.values() for tp in parts]
        assert sorted(owned) == sorted(partitions), cp.label
        assert cp.group_state == "Stable", cp.label

        # The vote: cooperative-sticky once every live member offers it, range before.
        everyone_offers = all("cooperative-sticky" in a for a in live.values())
        want = "cooperative-sticky" if everyone_offers else "range"
        assert cp.group_protocol == want, cp.label
        assert cp.expected_group_protocols == {want}, cp.label

        # A member runs COOPERATIVE only once range is gone from its list.
        for name, assignors in live.items():
            expected = COOPERATIVE if assignors == ru.COOPERATIVE_STICKY else EAGER
            assert cp.member_protocols[name] is expected, (cp.label, name)

    # With only cooperative members left, a member leaving makes nobody else revoke anything.
    for cp in report.checkpoints:
        if cp.event == "left" and set(cp.member_protocols.values()) == {COOPERATIVE}:
            assert cp.revoked == 0, cp.label

    records = report.ledger.records
    assert [r for r in records if r.kind == "lost"] == []
    assert _double_owned(records) == []
    assert {r.member for r in records} == set(MEMBERS)
    # Each member ran three incarnations: the original one and one per bounce.
    assert {(r.member, r.incarnation) for r in records} == {
        (m, i) for m in MEMBERS for i in (1, 2, 3)
    }


async def test_upgrade_eager_range_to_cooperative_sticky() -> None:
    out = io.StringIO()
    report = await ru.run_on_embedded_broker(
        "up", topics=TOPICS, members=3, out=out, step_timeout=STEP_TIMEOUT
    )
    _check_run(report, "up")
    protocols = [cp.group_protocol for cp in report.checkpoints]
    # start + member-1 + member-2 of bounce 1 keep range; member-3 leaving flips the vote.
    assert protocols == ["range"] * 5 + ["cooperative-sticky"] * 8
    # EAGER everywhere until bounce 2 starts, COOPERATIVE everywhere when it completes.
    for cp in report.checkpoints:
        if cp.bounce < 2:
            assert set(cp.member_protocols.values()) == {EAGER}, cp.label
    assert set(report.checkpoints[-1].member_protocols.values()) == {COOPERATIVE}
    assert set(report.checkpoints[-2].member_protocols.values()) == {COOPERATIVE}
    assert EAGER in report.checkpoints[-3].member_protocols.values()
    text = out.getvalue()
    assert "every invariant held" in text
    assert "\033[" not in text  # no colour unless asked


async def test_downgrade_cooperative_sticky_to_eager_range() -> None:
    report = await ru.run_on_embedded_broker(
        "down", topics=TOPICS, members=3, out=io.StringIO(), step_timeout=STEP_TIMEOUT
    )
    _check_run(report, "down")
    protocols = [cp.group_protocol for cp in report.checkpoints]
    # Bounce 1 keeps cooperative-sticky (everyone offers it); the first [range] member ends it.
    assert protocols == ["cooperative-sticky"] * 8 + ["range"] * 5
    assert set(report.checkpoints[0].member_protocols.values()) == {COOPERATIVE}
    bounce1_done = [cp for cp in report.checkpoints if cp.bounce == 1][-1]
    assert set(bounce1_done.member_protocols.values()) == {EAGER}


@pytest.mark.kafka23
@pytest.mark.timeout(300)
@pytest.mark.parametrize("direction", ["up", "down"])
async def test_rolling_upgrade_on_kafka_23(
    apache_kafka: KafkaBroker,  # noqa: F811
    direction: str,
) -> None:
    # The same checks on real Kafka: the probe asks DescribeGroups at the version 2.3 speaks
    # (v3; it closes the connection on v4). Fresh topics: the broker is the session's.
    suffix = uuid.uuid4().hex[:8]
    topics = {f"orders-{suffix}": 4, f"payments-{suffix}": 3}
    partitions = frozenset(TopicPartition(t, p) for t, n in topics.items() for p in range(n))
    out = io.StringIO()
    report = await ru.rolling_upgrade(
        apache_kafka.bootstrap,
        direction=direction,
        members=3,
        topics=topics,
        out=out,
        step_timeout=60,
    )
    _check_run(report, direction, partitions)
    protocols = [cp.group_protocol for cp in report.checkpoints]
    if direction == "up":
        assert protocols == ["range"] * 5 + ["cooperative-sticky"] * 8
    else:
        assert protocols == ["cooperative-sticky"] * 8 + ["range"] * 5
    assert "every invariant held" in out.getvalue()


def test_expected_group_protocols_follows_kafkas_vote() -> None:
    both, coop, rng = ru.BOTH, ru.COOPERATIVE_STICKY, ru.RANGE
    assert ru.expected_group_protocols([rng, rng, rng]) == {"range"}
    assert ru.expected_group_protocols([both, rng, rng]) == {"range"}
    assert ru.expected_group_protocols([both, both, both]) == {"cooperative-sticky"}
    assert ru.expected_group_protocols([coop, both, both]) == {"cooperative-sticky"}
    assert ru.expected_group_protocols([coop, rng]) == frozenset()  # no common protocol
    assert ru.expected_group_protocols([("range", "roundrobin"), ("roundrobin", "range")]) == {
        "range",
        "roundrobin",
    }  # a tie: the broker decides
    assert ru.expected_group_protocols([]) == frozenset()
    assert ru.member_protocol(both) is EAGER
    assert ru.member_protocol(coop) is COOPERATIVE
    assert ru.member_protocol(rng) is EAGER


def _rec(at: float, member: str, kind: str, *parts: int, incarnation: int = 1) -> ru.CallbackRecord:
    partitions = frozenset(TopicPartition("orders", p) for p in parts)
    return ru.CallbackRecord(at, member, incarnation, 1, EAGER, kind, partitions)


def test_ledger_catches_double_ownership_lost_and_foreign_revokes() -> None:
    ledger = ru.OwnershipLedger()
    ledger.record(_rec(1.0, "a", "assigned", 0, 1))
    ledger.record(_rec(2.0, "a", "revoked", 1))
    ledger.record(_rec(3.0, "b", "assigned", 1))
    assert ledger.problems == []
    ledger.record(_rec(4.0, "b", "assigned", 0))  # a still owns orders[0]
    assert len(ledger.problems) == 1 and "orders[0]" in ledger.problems[0]
    ledger.record(_rec(5.0, "c", "assigned", 3))
    ledger.record(_rec(5.5, "c", "lost", 3))
    assert ledger.problems[-1].startswith("c#1 lost orders[3]")
    assert "kicked out" in ledger.problems[-1]
    ledger.record(_rec(6.0, "b", "revoked", 2))
    assert "did not own" in ledger.problems[-1]
    # A restarted member is a new incarnation: the old one must have revoked first.
    ledger.record(_rec(7.0, "b", "assigned", 1, incarnation=2))
    assert "b#1 still owned it" in ledger.problems[-1]
    # The test's own interval check agrees.
    assert _double_owned(ledger.records) != []


class _NeverStable:
    async def snapshot(self, group_id: str) -> ru.GroupSnapshot:
        return ru.GroupSnapshot("PreparingRebalance", "range", None, 0)


async def test_a_step_that_never_converges_aborts_the_run() -> None:
    out = io.StringIO()
    async with EmbeddedBroker() as broker:
        report = await ru.rolling_upgrade(
            broker.bootstrap,
            direction="up",
            members=2,
            topics={"orders": 2},
            probe=_NeverStable(),
            out=out,
            step_timeout=1.0,
        )
        assert broker.group(report.group_id) is not None
        view = broker.group(report.group_id)
        assert view is not None and view.members == ()  # every member was closed
    assert not report.ok
    assert report.checkpoints == []
    assert any("did not converge within 1s" in p for p in report.problems)
    assert "✗" in out.getvalue()


def test_cli_on_a_broker_given_by_address(tmp_path: Path) -> None:
    # --broker HOST:PORT takes the protocol from DescribeGroups instead of the coordinator.
    argv = ["--members", "2", "--topic", "t:3", "--no-color", "--telemetry", str(tmp_path)]
    with ThreadedBroker() as broker, pytest.MonkeyPatch.context() as mp:
        out = io.StringIO()
        mp.setattr("sys.stdout", out)
        code = ru.main(["--broker", broker.bootstrap, *argv])
    assert code == 0, out.getvalue()
    assert "every invariant held" in out.getvalue()
    # One recording per member name, across its restarts, with the callbacks it ran.
    for name in ("member-1", "member-2"):
        lines = [json.loads(line) for f in tmp_path.glob(f"{name}.*.jsonl") for line in f.open()]
        assert {e["member"] for e in lines} == {name}
        assert {"joined", "partitions_assigned", "partitions_revoked"} <= {e["type"] for e in lines}


_REAL_PROBE = ru.DescribeGroupsProbe


class _LyingProbe:
    def __init__(self, bootstrap: str) -> None:
        self.inner = _REAL_PROBE(bootstrap)

    async def snapshot(self, group_id: str) -> ru.GroupSnapshot:
        real = await self.inner.snapshot(group_id)
        return ru.GroupSnapshot(real.state, "roundrobin", real.generation_id, real.members)


def test_cli_exits_non_zero_when_an_invariant_breaks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ru, "DescribeGroupsProbe", _LyingProbe)
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    with ThreadedBroker() as broker:
        code = ru.main(["--broker", broker.bootstrap, "--members", "2", "--topic", "t:2"])
    assert code == 1
    text = out.getvalue()
    assert "the broker chose roundrobin, Kafka's vote gives range" in text
    assert "every invariant held" not in text


async def test_the_function_rejects_bad_arguments() -> None:
    with pytest.raises(ConfigurationError, match="direction"):
        await ru.rolling_upgrade("127.0.0.1:9", direction="sideways")
    with pytest.raises(ConfigurationError, match="at least 2"):
        await ru.rolling_upgrade("127.0.0.1:9", members=1)


def test_cli_rejects_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        ru.main(["--members", "1"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        ru.main(["--topic", "orders:x"])
    assert "bad topic" in capsys.readouterr().err
