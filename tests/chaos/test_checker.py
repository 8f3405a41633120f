"""The chaos checker on hand-built logs: each kind of violation is found and attributed to the
right client, clean logs pass, and known Tansu deviations are marked, never counted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiogroup.tools.chaos.checker import RunLog, Verdict, check, holdings, summarize
from aiogroup.tools.chaos.report import markdown_table

TOPIC = "t"
T0 = 1000.0


class Log:
    """A run under construction: members' telemetry and the runner's events, at T0 + t."""

    def __init__(self, partitions: int = 2, *, broker: str = "embedded") -> None:
        self.meta: dict[str, Any] = {
            "type": "run_start",
            "t": T0,
            "broker": broker,
            "seed": 7,
            "topic": TOPIC,
            "partitions": partitions,
            "session_ms": 3000,
            "rebalance_ms": 10000,
        }
        self.runner: list[dict[str, Any]] = [self.meta]
        self.members: dict[str, list[dict[str, Any]]] = {}
        self.clients: dict[str, str] = {}

    def member(self, name: str, client: str) -> Log:
        self.members[name] = []
        self.clients[name] = client
        kind = "aiogroup" if client == "aiogroup" else client
        self.runner.append(
            {"type": "member_start", "t": T0, "member": name, "kind": kind, "client": client}
        )
        return self

    def emit(self, name: str, t: float, type_: str, **fields: Any) -> Log:
        events = self.members[name]
        events.append(
            {
                "type": type_,
                "ts": T0 + t,
                "seq": len(events),
                "pid": 1,
                "member": name,
                "client": self.clients[name],
                "member_id": f"{name}-id",
                **fields,
            }
        )
        return self

    def joined(self, name: str, t: float, gen: int, *, leader: bool = False) -> Log:
        return self.emit(name, t, "joined", generation_id=gen, leader=leader)

    def assigned(self, name: str, t: float, gen: int, *parts: int) -> Log:
        self.emit(
            name, t, "partitions_assigned", generation_id=gen, partitions={TOPIC: list(parts)}
        )
        if self.clients[name] == "aiogroup":
            self.acting(name, t, gen)
        return self

    def released(self, name: str, t: float, gen: int, *parts: int, lost: bool = False) -> Log:
        kind = "partitions_lost" if lost else "partitions_revoked"
        if self.clients[name] == "aiogroup" and not lost:
            self.acting(name, t, gen, reason="rebalance", drop=parts)
        return self.emit(name, t, kind, generation_id=gen, partitions={TOPIC: list(parts)})

    def acting(
        self,
        name: str,
        t: float,
        gen: int,
        *,
        reason: str = "rebalance",
        drop: tuple[int, ...] = (),
        at: float | None = None,
    ) -> Log:
        """The aiogroup member's acting set: every partition assigned so far and not dropped."""
        held: set[int] = set()
        for e in self.members[name]:
            if e["type"] == "partitions_assigned":
                held |= set(e["partitions"].get(TOPIC, []))
            elif e["type"] in ("partitions_revoked", "partitions_lost"):
                held -= set(e["partitions"].get(TOPIC, []))
        held -= set(drop)
        parts = {} if reason == "lapse" else {TOPIC: sorted(held)}
        extra = {} if at is None else {"at": T0 + at}
        return self.emit(
            name, t, "acting", generation_id=gen, partitions=parts, reason=reason, **extra
        )

    def leader_round(self, name: str, t: float, gen: int) -> Log:
        return self.emit(name, t, "leader_round", generation_id=gen)

    def processed(self, name: str, t: float, part: int) -> Log:
        return self.emit(name, t, "processed", topic=TOPIC, partition=part, first=0, last=1)

    def committed(self, name: str, t: float, part: int, gen: int) -> Log:
        return self.emit(
            name,
            t,
            "offsets_committed",
            generation_id=gen,
            offsets={TOPIC: {str(part): 5}},
            started=T0 + t,
        )

    def closed(self, name: str, t: float) -> Log:
        return self.emit(name, t, "closed")

    def run(self, type_: str, t: float, **fields: Any) -> Log:
        self.runner.append({"type": type_, "t": T0 + t, **fields})
        return self

    def finish(self, settle_at: float = 60.0) -> RunLog:
        self.run("group_formed", 1.0, converged=True)
        self.run("events_done", 10.0)
        self.run("settle_end", settle_at, converged=True)
        return RunLog(dict(self.meta), list(self.runner), dict(self.members), [])


def clean_handover() -> Log:
    """a (aiogroup, leader) and b (librdkafka): b joins, a revokes p1, b gets it."""
    log = Log().member("a", "aiogroup").member("b", "librdkafka")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.processed("a", 2, 0).committed("a", 2, 1, 0)
    log.joined("a", 5, 1, leader=True).joined("b", 5, 1).leader_round("a", 5, 1)
    log.released("a", 5.1, 1, 1).assigned("a", 5.1, 1)
    log.joined("a", 6, 2, leader=True).joined("b", 6, 2).leader_round("a", 6, 2)
    log.assigned("b", 6.1, 2, 1).processed("b", 7, 1).committed("b", 7, 1, 2)
    log.processed("a", 7, 0)
    return log


def test_a_clean_handover_passes_and_converges() -> None:
    verdict = check(clean_handover().finish())
    assert verdict.violations == []
    assert verdict.ok
    assert verdict.converged
    # Nothing injected: from the group's forming (1) to the last change (b's assignment, 6.1).
    assert verdict.convergence_s == pytest.approx(5.1)
    assert verdict.processed == {"aiogroup": 2, "librdkafka": 1}
    assert verdict.members == {"aiogroup": 1, "librdkafka": 1}


def test_convergence_time_is_from_the_last_event_to_the_last_change() -> None:
    log = clean_handover()
    log.run("inject", 8.0, kind="stop", member="b", t_end=T0 + 9.0)
    log.released("b", 12.0, 3, 1).assigned("a", 14.5, 3, 1)
    verdict = check(log.finish())
    assert verdict.converged
    assert verdict.convergence_s == pytest.approx(14.5 - 9.0)


def test_double_ownership_is_blamed_on_the_member_that_kept_a_partition_it_lost() -> None:
    log = Log().member("a", "aiogroup").member("k", "kafka-python")
    log.joined("k", 1, 0).assigned("k", 1, 0, 0, 1)
    log.joined("a", 5, 1, leader=True).leader_round("a", 5, 1).assigned("a", 5.5, 1, 0, 1)
    log.released("k", 8, 1, 0, 1, lost=True)  # told late: held 0 and 1 until 8
    verdict = check(log.finish())
    doubles = verdict.of("double_ownership")
    assert [v.partition for v in doubles] == ["t:0", "t:1"]
    assert {v.blame for v in doubles} == {"kafka-python"}
    assert all(v.members == ("k", "a") and v.start == T0 + 5.5 and v.end == T0 + 8 for v in doubles)
    assert verdict.ok  # nothing against aiogroup
    assert verdict.against("kafka-python") == doubles


def test_double_ownership_from_a_leader_that_gave_away_an_unrevoked_partition() -> None:
    """The earlier holder revoked in time for its own part, undisturbed: the leader of the
    generation in which the later holder got the partition is at fault (KIP-429)."""
    log = Log().member("a", "aiogroup").member("r", "librdkafka")
    log.joined("r", 1, 0).assigned("r", 1, 0, 0, 1)
    log.joined("a", 5, 1, leader=True).joined("r", 5, 1).leader_round("a", 5, 1)
    log.assigned("a", 5.2, 1, 0)  # given to a while r still owns it
    log.released("r", 6, 1, 0)
    verdict = check(log.finish())
    (double,) = verdict.of("double_ownership")
    assert double.blame == "aiogroup"
    assert double.against_aiogroup
    assert "leader a" in double.detail
    assert not verdict.ok


def test_a_revocation_delayed_by_a_pause_is_blamed_on_the_paused_member() -> None:
    log = Log().member("a", "aiogroup").member("r", "librdkafka")
    log.joined("r", 1, 0).assigned("r", 1, 0, 0, 1)
    log.joined("a", 5, 1, leader=True).joined("r", 5, 1).leader_round("a", 5, 1)
    log.run("inject", 4.0, kind="stop", member="r", t_end=T0 + 9.0)
    log.assigned("a", 5.2, 1, 0)
    log.released("r", 9.1, 1, 0)
    verdict = check(log.finish())
    (double,) = verdict.of("double_ownership")
    assert double.blame == "librdkafka"
    assert verdict.ok


def test_a_lapse_ends_an_aiogroup_holding_so_a_takeover_after_it_is_no_overlap() -> None:
    """KAFKA-7026: from its session deadline the aiogroup member acts on nothing; the lost
    callback it runs later tells the application only."""
    log = Log().member("a", "aiogroup").member("r", "librdkafka")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.acting("a", 9, 0, reason="lapse", at=4.0)  # paused; deadline at 4, noticed at 9
    log.joined("r", 5, 1).assigned("r", 5, 1, 0, 1)
    log.released("a", 9.5, 0, 0, 1, lost=True)
    verdict = check(log.finish())
    assert verdict.of("double_ownership") == []
    assert verdict.ok
    (ha, hb) = holdings(log.finish())["a"]
    assert ha.end_kind == hb.end_kind == "lapse"


def test_acting_on_a_partition_another_member_holds_is_found_and_blamed_on_the_actor() -> None:
    log = clean_handover()
    log.committed("b", 8, 0, 2)  # a holds t:0; b never held it
    verdict = check(log.finish())
    kinds = sorted(v.kind for v in verdict.violations)
    assert kinds == ["acting_on_other", "acting_unowned"]
    assert all(v.blame == "librdkafka" for v in verdict.violations)
    (other,) = verdict.of("acting_on_other")
    assert other.members == ("b", "a")
    assert verdict.ok


def test_acting_without_holding_after_a_lapse_counts_against_aiogroup() -> None:
    log = Log().member("a", "aiogroup")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.acting("a", 5, 0, reason="lapse", at=4.0)
    log.committed("a", 6, 0, 0)
    log.committed("a", 6.5, 0, 0)  # one episode, counted twice
    log.acting("a", 7, 0, reason="proof")
    verdict = check(log.finish())
    (unowned,) = verdict.of("acting_unowned")
    assert unowned.blame == "aiogroup"
    assert unowned.count == 2
    assert not verdict.ok


def test_a_partition_nobody_holds_after_a_quiet_group_is_stranded_on_the_leader() -> None:
    log = Log(partitions=3).member("a", "aiogroup").member("k", "kafka-python")
    log.joined("a", 1, 0).joined("k", 1, 0, leader=False)
    log.joined("k", 1, 0).leader_round("k", 1, 0)
    log.assigned("a", 1, 0, 0).assigned("k", 1, 0, 1)  # t:2 given to nobody
    verdict = check(log.finish(settle_at=60.0))
    (stranded,) = verdict.of("stranded")
    assert stranded.partition == "t:2"
    assert stranded.blame == "kafka-python"
    assert not verdict.converged
    assert verdict.ok


def test_a_partition_still_being_handed_out_is_waiting_not_stranded() -> None:
    log = Log(partitions=3).member("a", "aiogroup")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.leader_round("a", 55, 1)  # the group changed 5 s before the end: within the bound
    verdict = check(log.finish(settle_at=60.0))
    assert verdict.of("stranded") == []
    assert verdict.waiting == ["t:2"]
    assert not verdict.converged


def test_stranded_partitions_of_an_aiogroup_leader_count_against_aiogroup() -> None:
    log = Log(partitions=3).member("a", "aiogroup").member("r", "librdkafka")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).joined("r", 1, 0)
    log.assigned("a", 1, 0, 0).assigned("r", 1, 0, 1)
    verdict = check(log.finish(settle_at=60.0))
    (stranded,) = verdict.of("stranded")
    assert stranded.blame == "aiogroup"
    assert not verdict.ok


def test_crashes_exit_codes_errors_and_hung_closes_by_client() -> None:
    log = clean_handover().member("k", "kafka-python")
    log.run("member_exit", 20, member="k", returncode=1, expected=False)
    log.run(
        "member_exit",
        62,
        member="b",
        returncode=-9,
        expected=True,
        signal="SIGKILL",
        forced=True,
        bound=20.0,
    )
    log.emit("a", 30, "error", where="main", error="RuntimeError('boom')")
    log.emit("a", 31, "partitions_revoked", generation_id=2, partitions={}, error="ValueError()")
    verdict = check(log.finish())
    crashes = verdict.of("crash")
    assert sorted(v.blame for v in crashes) == [
        "aiogroup",
        "aiogroup",
        "kafka-python",
        "librdkafka",
    ]
    assert not verdict.ok


def test_a_sigkill_by_the_runner_is_no_crash_and_ends_the_holding() -> None:
    log = clean_handover()
    log.run("inject", 8, kind="kill", member="b")
    log.run("member_exit", 8, member="b", returncode=-9, expected=True, signal="SIGKILL")
    log.assigned("a", 12, 3, 1)
    verdict = check(log.finish())
    assert verdict.violations == []
    (hb,) = holdings(log.finish())["b"]
    assert hb.end == T0 + 8 and hb.end_kind == "killed"


def test_callback_order_a_partition_assigned_twice() -> None:
    log = clean_handover()
    log.emit("b", 8, "partitions_assigned", generation_id=2, partitions={TOPIC: [1]})
    verdict = check(log.finish())
    (order,) = verdict.of("callback_order")
    assert order.blame == "librdkafka"
    assert "already owned" in order.detail


def test_tansu_taking_back_an_expired_member_is_its_deviation_not_aiogroup() -> None:
    """Tansu accepts a JoinGroup with an expired member id (brokers.md, deviation 6): the
    aiogroup member rejoins claiming what it held before its lapse; the same log on the
    embedded broker counts against aiogroup."""

    def build(broker: str) -> RunLog:
        log = Log(broker=broker).member("a", "aiogroup").member("r", "librdkafka")
        log.joined("a", 1, 0).assigned("a", 1, 0, 0)
        log.joined("r", 1, 0).assigned("r", 1, 0, 1)
        log.acting("a", 6, 0, reason="lapse", at=4.0)
        log.joined("r", 5, 1).assigned("r", 5, 1, 0)  # r gets t:0 in a generation without a
        log.joined("r", 7, 2).joined("a", 7, 2)
        log.acting("a", 7, 2)  # back in, still claiming t:0
        log.released("a", 7.1, 2, 0)
        log.released("r", 9, 3, 0)
        log.assigned("a", 9.5, 3, 0)
        return log.finish()

    tansu = check(build("tansu"))
    (double,) = tansu.of("double_ownership")
    assert double.deviation is not None and "deviation 6" in double.deviation
    assert tansu.ok
    embedded = check(build("embedded"))
    assert not embedded.ok


def test_verdicts_round_trip_and_summaries_count_by_client(tmp_path: Path) -> None:
    bad = check(_leader_fault().finish())
    good = check(clean_handover().finish())
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps(bad.to_dict()))
    back = Verdict.from_dict(json.loads(path.read_text()))
    assert back.violations == bad.violations and back.ok == bad.ok
    summary = summarize([back, good])
    assert summary["runs"] == 2
    assert summary["violations"]["double_ownership"] == {"aiogroup": 1}
    assert summary["failing_seeds"] == [7]
    table = markdown_table({"embedded": summary})
    assert "| double ownership (aiogroup; others) | **1** |" in table
    assert "| members started (aiogroup / librdkafka / kafka-python) | 2 / 2 / 0 |" in table
    peers = markdown_table({"kafka4": {**summary, "members": {"aiogroup": 2, "java": 1}}})
    assert "| members started (aiogroup / librdkafka / kafka-python / java) | 2 / 0 / 0 / 1 |" in (
        peers
    )


def _leader_fault() -> Log:
    log = Log().member("a", "aiogroup").member("r", "librdkafka")
    log.joined("r", 1, 0).assigned("r", 1, 0, 0, 1)
    log.joined("a", 5, 1, leader=True).joined("r", 5, 1).leader_round("a", 5, 1)
    log.assigned("a", 5.2, 1, 0)
    log.released("r", 6, 1, 0)
    return log


def test_a_run_written_to_disk_is_judged_the_same(tmp_path: Path) -> None:
    run = _leader_fault().finish()
    (tmp_path / "members").mkdir()
    (tmp_path / "runner.jsonl").write_text("".join(json.dumps(e) + "\n" for e in run.runner))
    for name, events in run.members.items():
        lines = "".join(json.dumps(e) + "\n" for e in events) + '{"cut short'
        (tmp_path / "members" / f"{name}.0000.jsonl").write_text(lines)
    assert check(RunLog.load(tmp_path)).violations == check(run).violations


def test_a_revocation_after_a_lapse_may_commit_what_it_revokes() -> None:
    """An aiogroup member lapses, the sync answer then revokes t:0: its revoked callback may
    commit t:0 (nobody else can have it before the callback ends); a commit after the
    callback is acting without holding."""
    log = Log().member("a", "aiogroup")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.acting("a", 5, 0, reason="lapse", at=4.0)
    log.joined("a", 6, 1, leader=True).leader_round("a", 6, 1)
    log.emit("a", 6.1, "acting", generation_id=1, partitions={TOPIC: [1]}, reason="proof")
    log.committed("a", 6.15, 0, 1)  # inside the callback below
    log.emit(
        "a",
        6.2,
        "partitions_revoked",
        generation_id=1,
        partitions={TOPIC: [0]},
        started=T0 + 6.1,
        ended=T0 + 6.2,
    )
    log.member("b", "librdkafka").joined("b", 7, 2).assigned("b", 7, 2, 0)
    assert check(log.finish()).violations == []
    log.committed("a", 6.5, 0, 1)  # after it: t:0 is not the member's any more
    (late,) = check(log.finish()).violations
    assert late.kind == "acting_unowned" and late.blame == "aiogroup"


def test_a_commit_in_a_revocation_read_after_a_pause_is_acting_on_another() -> None:
    """The sync answer that revokes t:0 is read after a pause; b owns t:0 by then: a commit
    of t:0 inside that revocation is acting on b's partition (a zombie commit)."""
    log = Log().member("a", "aiogroup").member("b", "kafka-python")
    log.joined("a", 1, 0, leader=True).leader_round("a", 1, 0).assigned("a", 1, 0, 0, 1)
    log.joined("b", 6, 2).assigned("b", 6, 2, 0, 1)
    log.acting("a", 8, 0, reason="lapse", at=4.0)
    log.committed("a", 8.05, 0, 1)
    log.emit(
        "a",
        8.1,
        "partitions_revoked",
        generation_id=1,
        partitions={TOPIC: [0]},
        started=T0 + 8.0,
        ended=T0 + 8.1,
    )
    verdict = check(log.finish())
    assert verdict.of("double_ownership") == []
    (other,) = verdict.violations
    assert other.kind == "acting_on_other" and other.blame == "aiogroup"
    assert other.members == ("a", "b")


def test_tansu_completing_a_rebalance_without_a_paused_member_is_its_deviation() -> None:
    """Tansu holds JoinGroups for half a session and ignores the rebalance timeout
    (brokers.md, deviation 2): it completes a generation without a paused member and hands
    its partitions out before that member's session deadline. Kafka waits for it (or for its
    session to expire)."""

    def build(broker: str) -> RunLog:
        log = Log(broker=broker).member("a", "aiogroup").member("r", "librdkafka")
        log.joined("a", 1, 0).assigned("a", 1, 0, 0)
        log.joined("r", 1, 0).assigned("r", 1, 0, 1)
        log.run("inject", 5.0, kind="stop", member="a", t_end=T0 + 10.0)
        log.joined("r", 6, 1).assigned("r", 6, 1, 0)  # a's session runs until 7
        log.acting("a", 10, 0, reason="lapse", at=7.0)
        log.released("a", 10.5, 0, 0, lost=True)
        return log.finish()

    tansu = check(build("tansu"))
    (double,) = tansu.of("double_ownership")
    assert double.blame == "aiogroup"
    assert double.deviation is not None and "deviation 2" in double.deviation
    assert tansu.ok
    assert not check(build("embedded")).ok


def test_a_member_left_out_of_a_generation_that_keeps_its_partitions_is_at_fault() -> None:
    """The leader's round of generation 1 has no assignment for k (it was expired); k never
    called lost and still holds t:0 when the leader gives it to a in generation 2: k's fault,
    not the leader's. On Tansu, which took k back under its expired id, a deviation."""

    def build(broker: str) -> RunLog:
        log = Log(broker=broker).member("a", "aiogroup").member("k", "kafka-python")
        log.joined("k", 1, 0).assigned("k", 1, 0, 0, 1)
        log.joined("a", 1, 0, leader=True)
        log.emit("a", 5, "leader_round", generation_id=1, assignments={"a-id": {TOPIC: [0, 1]}})
        log.joined("k", 6, 2).joined("a", 6, 2, leader=True)
        log.emit(
            "a",
            6,
            "leader_round",
            generation_id=2,
            assignments={"a-id": {TOPIC: [0, 1]}, "k-id": {}},
        )
        log.assigned("a", 6.1, 2, 0, 1)
        log.released("k", 7, 2, 0, 1)
        return log.finish()

    embedded = check(build("embedded"))
    doubles = embedded.of("double_ownership")
    assert len(doubles) == 2
    assert all(v.blame == "kafka-python" and "formed without it" in v.detail for v in doubles)
    assert embedded.ok
    tansu = check(build("tansu"))
    assert all(v.deviation is not None for v in tansu.of("double_ownership"))


def test_acting_on_an_old_claim_is_the_claimant_not_the_leader() -> None:
    """The leader's round of generation 2 gives t:0 to r; a acts on t:0 in generation 2 from
    an old claim (before its sync answer revokes it): a's fault, not the leader's."""
    log = Log().member("a", "aiogroup").member("r", "librdkafka").member("l", "kafka-python")
    log.joined("a", 1, 0).assigned("a", 1, 0, 0)
    log.joined("r", 1, 0).assigned("r", 1, 0, 1)
    log.joined("l", 1, 0)
    log.acting("a", 4.5, 0, reason="lapse", at=4.0)  # paused; r gets t:0 meanwhile
    log.joined("r", 5, 1).assigned("r", 5, 1, 0)
    log.joined("a", 6, 2).joined("r", 6, 2).joined("l", 6, 2)
    log.emit(
        "l", 6, "leader_round", generation_id=2, assignments={"r-id": {TOPIC: [0, 1]}, "a-id": {}}
    )
    log.acting("a", 6.1, 2)  # still claiming t:0
    log.released("a", 6.2, 2, 0)
    verdict = check(log.finish())
    (double,) = verdict.of("double_ownership")
    assert double.members == ("r", "a")
    assert double.blame == "aiogroup" and "old claim" in double.detail
    assert not verdict.ok
