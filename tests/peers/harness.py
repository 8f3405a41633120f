"""A mixed group of member processes (``python -m aiogroup.tools.chaos.member KIND``: aiogroup,
Java,
franz-go, ...) that a test starts and stops one at a time, judged from the members' telemetry
by the chaos checker (no double ownership, callbacks in order, no crash) and by what this module
adds: every record processed at least once, and KIP-429's "revoke only what moves".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiogroup.testing.fixtures import BrokerHandle
from aiogroup.tools.chaos.checker import RunLog, Verdict, check, holdings, read_complete_lines
from aiogroup.tools.chaos.member import CLIENT_OF

SESSION_MS = 6000
HEARTBEAT_MS = 500
#: A member's clean close after SIGTERM, bounded.
CLOSE_BOUND_S = 30.0


class MemberGroup:
    """Member processes of one group on one topic, with their telemetry in ``out``."""

    def __init__(
        self, handle: BrokerHandle, out: Path, *, partitions: int = 6, session_ms: int = SESSION_MS
    ) -> None:
        self.handle = handle
        self.out = out
        self.partitions = partitions
        #: The members' session timeout (under KIP-848 also the group's: see
        #: :meth:`consumer_group_config`).
        self.session_ms = session_ms
        tag = uuid.uuid4().hex[:8]
        self.topic = f"peers-{tag}"
        self.group = f"peers-group-{tag}"
        self.dir = out / "members"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kinds: dict[str, str] = {}
        self.leaving: set[str] = set()
        #: Members stopped by SIGSTOP now (:meth:`pause`), with when.
        self.paused: dict[str, float] = {}
        #: When each member was sent SIGTERM.
        self.stops: dict[str, float] = {}
        self.runner: list[dict[str, Any]] = []
        self.offsets: dict[str, int] = {}
        self.produced = [0] * partitions
        self.log("run_start", broker=handle.kind, topic=self.topic, group=self.group,
                 partitions=partitions, session_ms=session_ms)  # fmt: skip
        _create_topic(handle.bootstrap, self.topic, partitions)

    def log(self, type_: str, **fields: Any) -> None:
        self.runner.append({"type": type_, "t": time.time(), **fields})

    # -- members ---------------------------------------------------------------------------

    def start(
        self,
        name: str,
        kind: str,
        assignors: Sequence[str] = ("cooperative-sticky",),
        *,
        group_protocol: str = "classic",
    ) -> None:
        argv = [
            sys.executable, "-m", "aiogroup.tools.chaos.member", kind,
            "--bootstrap", self.handle.bootstrap, "--group", self.group, "--topic", self.topic,
            "--name", name, "--dir", str(self.dir), "--assignors", ",".join(assignors),
            "--session-ms", str(self.session_ms), "--heartbeat-ms", str(HEARTBEAT_MS),
            "--rebalance-ms", "10000", "--group-protocol", group_protocol,
        ]  # fmt: skip
        self.start_command(name, kind, argv)

    def start_command(self, name: str, kind: str, argv: Sequence[str]) -> None:
        """Start a member process of ``kind`` from its own command line; it must write its
        telemetry to ``self.dir`` as ``<name>.0000.jsonl``."""
        with (self.dir / f"{name}.stderr").open("wb") as err:
            self.procs[name] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
            )  # fmt: skip
        self.kinds[name] = kind
        self.log("member_start", member=name, kind=kind, client=CLIENT_OF[kind],
                 pid=self.procs[name].pid)  # fmt: skip

    def stop(self, name: str) -> int:
        """SIGTERM (a clean close), waited for; the exit code."""
        proc = self.procs[name]
        self.leaving.add(name)
        self.stops[name] = time.time()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(CLOSE_BOUND_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(10)
            self.log("member_exit", member=name, returncode=code, expected=True,
                     signal="SIGKILL", forced=True, bound=CLOSE_BOUND_S)  # fmt: skip
            return code
        self.log("member_exit", member=name, returncode=code, expected=True, signal=None)
        return code

    def kill(self, name: str) -> None:
        """SIGKILL, waited for (the runner's ``kill`` event, as the chaos runner logs it)."""
        proc = self.procs[name]
        self.leaving.add(name)
        t = time.time()
        proc.kill()
        code = proc.wait(10)
        self.log("member_exit", member=name, returncode=code, expected=True, signal="SIGKILL")
        self.log("inject", t=t, kind="kill", member=name)

    def pause(self, name: str) -> None:
        """SIGSTOP: the member stops where it is (no heartbeat, no callback) until
        :meth:`resume`; it counts as not live meanwhile."""
        os.kill(self.procs[name].pid, signal.SIGSTOP)
        self.paused[name] = time.time()

    def resume(self, name: str) -> None:
        """SIGCONT, logged as the chaos runner logs a pause (``inject`` ``stop``, start and
        end), which the checker reads as a disturbance of that member."""
        os.kill(self.procs[name].pid, signal.SIGCONT)
        started = self.paused.pop(name)
        self.log("inject", t=started, t_end=time.time(), kind="stop", member=name)

    def live(self) -> list[str]:
        """Members running, not leaving and not paused."""
        return sorted(
            n
            for n, p in self.procs.items()
            if p.poll() is None and n not in self.leaving and n not in self.paused
        )

    def close(self) -> dict[str, int]:
        """Stop every member still running; their exit codes."""
        return {name: self.stop(name) for name in self.live()}

    def close_in_turn(self) -> dict[str, int]:
        """Stop every member still running one at a time, each leaver's partitions taken over
        (:meth:`converged`) before the next stops; their exit codes. A KIP-848 group needs
        this: a Java member stopped while its assigned callback for a leaver's partitions is
        still queued revokes them at close without ever having announced them (its own
        order, not a fault of the group)."""
        codes: dict[str, int] = {}
        for name in self.live():
            codes[name] = self.stop(name)
            if self.live():
                self.wait(self.converged, f"{name}'s partitions handed over")
        return codes

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)

    def consumer_group_config(self, *, heartbeat_ms: int) -> None:
        """Make the group's KIP-848 session this group's ``session_ms`` and its heartbeat
        interval ``heartbeat_ms``: group configs (``consumer.session.timeout.ms``,
        ``consumer.heartbeat.interval.ms``) the broker sends its members, who set neither
        themselves. Before the first member joins."""
        if self.handle.embedded is not None:
            self.handle.embedded.set_group_config(
                self.group, session_timeout_ms=self.session_ms, heartbeat_interval_ms=heartbeat_ms
            )
            return
        from aiogroup.tools.chaos.brokers import set_consumer_group_config

        set_consumer_group_config(
            self.handle.bootstrap, self.group, session_ms=self.session_ms, heartbeat_ms=heartbeat_ms
        )

    # -- records ---------------------------------------------------------------------------

    def produce(self, per_partition: int) -> None:
        import confluent_kafka as ck

        producer = ck.Producer({"bootstrap.servers": self.handle.bootstrap, "linger.ms": 5})
        for p in range(self.partitions):
            for _ in range(per_partition):
                producer.produce(self.topic, value=b"peer", partition=p)
            self.produced[p] += per_partition
        assert producer.flush(30) == 0, "records not delivered"

    @contextlib.contextmanager
    def flowing(self, rate: float) -> Iterator[None]:
        """Records flowing while the block runs: ``rate`` records per second into each
        partition, from a producer thread; ``produced`` counts those delivered (flushed when
        the block ends)."""
        import confluent_kafka as ck

        producer = ck.Producer({"bootstrap.servers": self.handle.bootstrap, "linger.ms": 5})
        stop = threading.Event()

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                self.produced[msg.partition()] += 1

        def produce() -> None:
            while not stop.wait(1 / rate):  # the producer's pace
                for p in range(self.partitions):
                    producer.produce(self.topic, value=b"peer", partition=p, on_delivery=delivered)
                producer.poll(0)
            producer.flush(30)

        thread = threading.Thread(target=produce, name="peers-producer", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(60)

    # -- what the members wrote ------------------------------------------------------------

    def events(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for name in self.procs:
            path = self.dir / f"{name}.0000.jsonl"
            lines, _ = read_complete_lines(path, 0) if path.exists() else ([], 0)
            events = []
            for line in lines:
                with contextlib.suppress(ValueError):
                    events.append(json.loads(line))
            out[name] = events
        return out

    def run_log(self) -> RunLog:
        return RunLog(self.runner[0], list(self.runner), self.events())

    def owners(self) -> dict[int, list[str]]:
        """Partition -> the live members holding it now (from their callbacks)."""
        found: dict[int, list[str]] = {p: [] for p in range(self.partitions)}
        live = set(self.live())
        for name, hs in holdings(self.run_log()).items():
            if name in live:
                for h in hs:
                    if h.end == float("inf") or h.end_kind == "open":
                        found[h.partition[1]].append(name)
        return found

    def converged(self) -> bool:
        """Every partition held by exactly one live member, and each live member holds one."""
        owners = self.owners()
        holders = {names[0] for names in owners.values() if len(names) == 1}
        return all(len(n) == 1 for n in owners.values()) and holders == set(self.live())

    def unprocessed(self) -> dict[int, int]:
        """Partition -> how many produced records nobody processed yet."""
        done: dict[int, set[int]] = {p: set() for p in range(self.partitions)}
        for events in self.events().values():
            for e in events:
                if e.get("type") == "processed" and e.get("topic") == self.topic:
                    done[int(e["partition"])].update(range(int(e["first"]), int(e["last"]) + 1))
        missing = {p: len(set(range(self.produced[p])) - done[p]) for p in done}
        return {p: n for p, n in missing.items() if n}

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
        """Poll the telemetry until ``predicate`` holds; fail with the group's view after
        ``timeout`` or when a member died on its own."""
        deadline = time.monotonic() + timeout
        while not predicate():
            dead = [n for n in self.live() if self.procs[n].poll() is not None]
            if dead or time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out waiting for {what} (dead: {dead}); owners {self.owners()}; "
                    f"unprocessed {self.unprocessed()}\n" + self.stderr_tails()
                )
            time.sleep(0.1)  # the telemetry's polling pace, bounded by the deadline

    def came_back(self, name: str, since: float) -> bool:
        """``name`` reported partitions lost after ``since`` (fenced, or its session lapsed),
        then joined the group again and was given partitions (in that order)."""
        steps = iter(("partitions_lost", "joined", "partitions_assigned"))
        want = next(steps)
        for e in self.events().get(name, []):
            if float(e.get("ts", 0.0)) < since or e.get("type") != want:
                continue
            if want == "partitions_assigned" and not e.get("partitions"):
                continue
            want = next(steps, "")
            if not want:
                return True
        return False

    def stderr_tails(self) -> str:
        return "".join(
            f"--- {p.stem}:\n{p.read_text(errors='replace')[-800:]}\n"
            for p in sorted(self.dir.glob("*.stderr"))
        )

    def verdict(self) -> Verdict:
        """The checker's judgement; the runner's log is kept beside the members' telemetry
        (``runner.jsonl``: ``python -m aiogroup.tools.chaos --check OUT`` judges it again)."""
        with (self.out / "runner.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(e) + "\n" for e in self.runner)
        return check(self.run_log())

    def judge(self, codes: Mapping[str, int], clients: Collection[str] = ()) -> Verdict:
        """The end of a run without faults: every member exited 0, the checker found nothing,
        every record was processed, nothing revoked came straight back; and, given
        ``clients``, exactly those clients took part and each processed records."""
        tails = self.stderr_tails
        assert all(code == 0 for code in codes.values()), f"exit codes {codes}\n{tails()}"
        verdict = self.verdict()
        detail = "\n".join(f"{v.kind} {v.partition}: {v.detail}" for v in verdict.violations)
        assert not verdict.violations, f"{verdict.summary()}\n{detail}"
        assert not self.unprocessed()
        assert moved_without_need(self.events(), self.stops) == []
        if clients:
            assert set(verdict.members) == set(clients)
            assert all(verdict.processed.get(c, 0) > 0 for c in clients), verdict.processed
        return verdict


def _create_topic(bootstrap: str, name: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(timeout=30)


# -- KIP-429 ---------------------------------------------------------------------------------


def callbacks(events: dict[str, list[dict[str, Any]]]) -> list[tuple[float, str, str, int]]:
    """Every partition a callback gave or took: (time, member, assigned|revoked|lost, p),
    ordered by when the callback started."""
    out = []
    for name, evs in events.items():
        for e in evs:
            kind = str(e.get("type", ""))
            if kind.startswith("partitions_"):
                for ps in (e.get("partitions") or {}).values():
                    for p in ps:
                        out.append((float(e["started"]), name, kind[len("partitions_") :], int(p)))
    return sorted(out)


def moved_without_need(
    events: dict[str, list[dict[str, Any]]],
    stops: Mapping[str, float],
    members: Collection[str] | None = None,
) -> list[str]:
    """Revocations KIP-429's cooperative protocol forbids: a partition revoked from a member
    that stays, which the next assignment gives back to the same member (it did not need to
    move). A member that leaves revokes everything: what it revoked after its SIGTERM
    (``stops``) is exempt. ``members``: judge only these (all by default)."""
    seq = callbacks(events)
    wrong = []
    for i, (t, member, kind, p) in enumerate(seq):
        if kind != "revoked" or t >= stops.get(member, float("inf")):
            continue
        if members is not None and member not in members:
            continue
        after = next(((m, tt) for tt, m, k, q in seq[i + 1 :] if q == p and k == "assigned"), None)
        if after is not None and after[0] == member:
            wrong.append(f"{member} revoked {p} at {t:.3f} and got it back at {after[1]:.3f}")
    return wrong


def protocols(events: dict[str, list[dict[str, Any]]]) -> dict[str, set[str]]:
    """The rebalance protocols each member's joined events name."""
    return {
        name: {str(e.get("rebalance_protocol")) for e in evs if e.get("type") == "joined"}
        for name, evs in events.items()
    }
