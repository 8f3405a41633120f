"""The brokers a chaos run can use, behind one small interface.

* ``embedded``: aiogroup's own broker (:class:`aiogroup.testing.ThreadedBroker`) in the
  runner's process: restarts (``broker.restart()``), connection cuts (``broker.faults.cut``)
  and the coordinator's view of the group (state, generation, leader, members; a KIP-848
  group's epochs and each member's epoch and assignment) as truth.
* ``kafka23``, ``kafka4``: Apache Kafka 2.3.0 with ZooKeeper, or 4.1.1 (KRaft), on the local JVM
  (:class:`aiogroup.testing.launchers.kafka.KafkaBroker`), behind a
  :class:`~aiogroup.tools.chaos.proxy.CuttingProxy` that the broker advertises, so connections can
  be cut; restarts with ``KafkaBroker.restart_broker()``; truth from DescribeGroups (on 4.x,
  ConsumerGroupDescribe for a KIP-848 group) and the Scala coordinator's lines in
  ``server.log`` (Kafka 2.3: rebalances with their reason, members removed, generations).
* ``tansu``: the Tansu binary (``aiogroup[broker]``) behind the proxy. No restarts: its storage
  is in memory, so a restarted Tansu is a new, empty cluster (topics and offsets gone), not a
  restart. Its known deviations from Kafka (docs/brokers.md) are marked by the checker.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiogroup.protocol import decode_assignment
from aiogroup.testing import wire
from aiogroup.testing.launchers.tansu import free_port
from aiogroup.tools.chaos.checker import read_complete_lines
from aiogroup.tools.chaos.proxy import CuttingProxy

if TYPE_CHECKING:
    from aiogroup.testing.launchers.kafka import KafkaBroker

__all__ = [
    "BROKERS",
    "CONSUMER_PROTOCOL_BROKERS",
    "ChaosBroker",
    "set_consumer_group_config",
    "start_broker",
]

BROKERS = ("embedded", "kafka23", "kafka4", "tansu")
#: The brokers whose coordinator serves KIP-848 consumer groups (``--group-protocol consumer``).
CONSUMER_PROTOCOL_BROKERS = ("embedded", "kafka4")


class ChaosBroker(Protocol):
    kind: str
    #: What members connect to.
    bootstrap: str
    can_restart: bool
    can_cut: bool
    #: The group protocols its coordinator serves: ``"classic"``, and ``"consumer"`` (KIP-848).
    group_protocols: tuple[str, ...]

    def create_topic(self, name: str, partitions: int) -> None: ...

    def restart(self) -> None:
        """Restart the broker (blocking; topics, groups and offsets survive)."""

    def cut(self, client_id: str) -> int:
        """Close every connection of ``client_id``; how many."""

    def truth(self, group: str) -> list[dict[str, Any]]:
        """What the broker says about ``group`` that changed since the last call."""

    def set_consumer_group_config(self, group: str, *, session_ms: int, heartbeat_ms: int) -> None:
        """A KIP-848 group's session and heartbeat interval (its group configs)."""

    def stop(self) -> None: ...


class _Snapshots:
    """Turns repeated snapshots into change events."""

    def __init__(self) -> None:
        self._last: dict[str, Any] | None = None

    def changed(self, snapshot: dict[str, Any] | None) -> list[dict[str, Any]]:
        if snapshot is None or snapshot == self._last:
            return []
        self._last = snapshot
        return [{"type": "group", **snapshot}]


class EmbeddedChaosBroker:
    kind = "embedded"
    can_restart = True
    can_cut = True
    #: Its ``kafka4`` flavour serves KIP-848 consumer groups, as Kafka 4.x does.
    group_protocols: tuple[str, ...] = ("classic", "consumer")

    def __init__(self) -> None:
        from aiogroup.testing import ThreadedBroker
        from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
        from aiogroup.testing.embedded.rules import CoordinatorConfig

        # Short sessions, for classic groups and (as the KRaft test brokers allow) KIP-848 ones.
        config = CoordinatorConfig(
            initial_rebalance_delay_ms=0,
            group_min_session_timeout_ms=1000,
            consumer_group=ConsumerGroupSettings(
                min_session_timeout_ms=1000, min_heartbeat_interval_ms=100
            ),
        )
        self.threaded = ThreadedBroker(coordinator_config=config).start()
        self.bootstrap = self.threaded.bootstrap
        self._snapshots: dict[str, _Snapshots] = {}

    def create_topic(self, name: str, partitions: int) -> None:
        self.threaded.create_topic(name, partitions)

    def restart(self) -> None:
        self.threaded.restart()

    def cut(self, client_id: str) -> int:
        return self.threaded.faults.cut(client_id=client_id)

    def truth(self, group: str) -> list[dict[str, Any]]:
        try:
            view = self.threaded.group(group)
            consumer = self.threaded.consumer_group(group) if view is None else None
        except Exception:  # restarting: no view now
            return []
        snap = None
        if consumer is not None:  # a KIP-848 consumer group
            snap = {
                "state": consumer.state,
                "group_epoch": consumer.group_epoch,
                "assignment_epoch": consumer.assignment_epoch,
                "members": sorted(
                    [m.member_id, m.client_id, m.member_epoch, sorted(p for _, p in m.assigned)]
                    for m in consumer.members
                ),
            }
        elif view is not None:
            snap = {
                "state": view.state,
                "generation": view.generation_id,
                "leader": view.leader,
                "members": sorted(
                    [m.member_id, m.client_id, _assigned(m.assignment)] for m in view.members
                ),
            }
        return self._snapshots.setdefault(group, _Snapshots()).changed(snap)

    def set_consumer_group_config(self, group: str, *, session_ms: int, heartbeat_ms: int) -> None:
        self.threaded.set_group_config(
            group, session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms
        )

    def stop(self) -> None:
        self.threaded.stop()


def _assigned(data: bytes | None) -> list[int]:
    if not data:
        return []
    try:
        return sorted(p for ps in decode_assignment(data).partitions.values() for p in ps)
    except Exception:
        return []


#: IncrementalAlterConfigs (KIP-339) resource type of a group's configs (KIP-848), and SET.
_GROUP_RESOURCE, _SET = 32, 0


def set_consumer_group_config(
    bootstrap: str, group: str, *, session_ms: int, heartbeat_ms: int
) -> None:
    """Give a KIP-848 consumer group its own ``consumer.session.timeout.ms`` and
    ``consumer.heartbeat.interval.ms`` on an Apache Kafka 4.x broker (what ``kafka-configs
    --alter --entity-type groups`` sends: IncrementalAlterConfigs v0 of the group resource,
    without a JVM). The broker bounds them by its ``group.consumer.min/max.*`` settings; a
    refusal raises ``RuntimeError`` with the broker's message. The members read them from
    their next heartbeat answers: set them before the first member joins."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse

    host, _, port = bootstrap.rpartition(":")
    configs = {"consumer.session.timeout.ms": session_ms,
               "consumer.heartbeat.interval.ms": heartbeat_ms}  # fmt: skip
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=_GROUP_RESOURCE,
        resource_name=group,
        configs=[
            IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                name=name, config_operation=_SET, value=str(value)
            )
            for name, value in configs.items()
        ],
    )
    request = IncrementalAlterConfigsRequest(version=0, resources=[resource], validate_only=False)
    request.with_header(correlation_id=1, client_id="aiogroup-chaos-config")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.settimeout(10)
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = wire.frame_size(wire.recv_exactly(sock, 4))
        response = IncrementalAlterConfigsResponse.decode(
            wire.recv_exactly(sock, size), version=0, header=True
        )
    for r in response.responses:
        if r.error_code:
            raise RuntimeError(
                f"consumer group configs of {group!r} refused: error {r.error_code} "
                f"({r.error_message})"
            )


def _describe(host: str, port: int, group: str) -> dict[str, Any] | None:
    """DescribeGroups v0 (every broker here speaks it): state and members, or None."""
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.settimeout(2)
            r = wire.blocking_request(
                sock, "DescribeGroups", 0, {"groups": [group]}, client_id="aiogroup-chaos-truth"
            )
    except Exception:
        return None
    if not r.groups:
        return None
    g = r.groups[0]
    return {
        "state": g.group_state,
        "error_code": int(g.error_code),
        "members": sorted(
            [m.member_id, m.client_id, _assigned(m.member_assignment)] for m in g.members
        ),
    }


#: DescribeGroups' answer for a group the coordinator has no classic group of.
_GROUP_ID_NOT_FOUND = 69


def _describe_consumer_group(host: str, port: int, group: str) -> dict[str, Any] | None:
    """ConsumerGroupDescribe v0 (KIP-848): the group's state and epochs, each member's epoch
    and assignment; None when unanswered or unknown."""
    from aiogroup.inspector import parse_consumer_group
    from aiogroup.protocol.messages import (
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
    )

    request = ConsumerGroupDescribeRequest(
        version=0, group_ids=[group], include_authorized_operations=False
    )
    request.with_header(correlation_id=1, client_id="aiogroup-chaos-truth")
    try:
        with socket.create_connection((host, port), timeout=2) as sock:
            sock.settimeout(2)
            sock.sendall(bytes(request.encode(header=True, framed=True)))
            size = wire.frame_size(wire.recv_exactly(sock, 4))
            response = ConsumerGroupDescribeResponse.decode(
                wire.recv_exactly(sock, size), version=0, header=True
            )
    except Exception:
        return None
    groups = list(response.groups or ())
    if len(groups) != 1 or groups[0].error_code:
        return None
    g = parse_consumer_group(groups[0])
    return {
        "state": g.state,
        "group_epoch": g.group_epoch,
        "assignment_epoch": g.assignment_epoch,
        "members": sorted(
            [m.member_id, m.client_id, m.member_epoch, sorted(p.partition for p in assigned)]
            for m in g.members
            for assigned in [m.assignment or ()]
        ),
    }


#: The Scala coordinator's INFO lines (Kafka 2.x) that tell what happened to a group.
_KAFKA_LINES = [
    (
        re.compile(
            r"Preparing to rebalance group (?P<group>\S+) in state (?P<state>\S+) with old "
            r"generation (?P<generation>\d+) .*\(reason: (?P<reason>.*)\)"
        ),
        "rebalance",
    ),
    (re.compile(r"Stabilized group (?P<group>\S+) generation (?P<generation>\d+)"), "stabilized"),
    (
        re.compile(r"Member (?P<member>\S+) in group (?P<group>\S+) has failed, removing it"),
        "member_failed",
    ),
    (
        re.compile(r"Member (?P<member>\S+) in group (?P<group>\S+) has left, removing it"),
        "member_left",
    ),
    (re.compile(r"Group (?P<group>\S+) with generation (?P<generation>\d+) is now empty"), "empty"),
    (
        re.compile(
            r"Assignment received from leader for group (?P<group>\S+) for generation "
            r"(?P<generation>\d+)"
        ),
        "assignment",
    ),
    (
        re.compile(
            r"Loading group metadata for (?P<group>\S+) with generation "
            r"(?P<generation>\d+)"
        ),
        "loaded",
    ),
]


class _ServerLog:
    """New coordinator lines of Kafka's server.log about one group, parsed."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0

    def read(self, group: str) -> list[dict[str, Any]]:
        if self.path is None:
            return []
        lines, self.offset = read_complete_lines(self.path, self.offset)
        out: list[dict[str, Any]] = []
        for raw in lines:
            if group not in raw:
                continue
            event: dict[str, Any] = {"type": "coordinator", "line": raw[:400]}
            for pattern, what in _KAFKA_LINES:
                match = pattern.search(raw)
                if match and match.group("group") == group:
                    event["what"] = what
                    event.update(
                        {
                            k: int(v) if k == "generation" else v
                            for k, v in match.groupdict().items()
                            if k != "group"
                        }
                    )
                    break
            out.append(event)
        return out


class ApacheKafkaChaosBroker:
    """Apache Kafka on the local JVM: 2.3.0 (``kind`` ``kafka23``) or 4.x (``kafka4``)."""

    can_restart = True
    can_cut = True

    def __init__(self, shared: KafkaBroker | None = None, *, version: str | None = None) -> None:
        """Our own Kafka ``version`` (default 2.3.0) behind the proxy; or, with ``shared``, a
        broker someone else runs (a test session's): members connect to it directly, and the
        runner neither restarts it nor cuts connections."""
        from aiogroup.testing.launchers.kafka import KAFKA_VERSION, KafkaBroker

        version = shared.version if shared is not None else (version or KAFKA_VERSION)
        self.kind = "kafka23" if version.startswith("2.") else "kafka4"
        #: Kafka 4.x serves KIP-848 consumer groups by default.
        self.group_protocols: tuple[str, ...] = (
            ("classic",) if self.kind == "kafka23" else ("classic", "consumer")
        )

        self.proxy: CuttingProxy | None = None
        if shared is not None:
            self.kafka = shared
            self.can_restart = self.can_cut = False
            self._owned = False
        else:
            real = free_port()
            self.proxy = CuttingProxy("127.0.0.1", real).start()
            self.kafka = KafkaBroker(
                version=version,
                config={"advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.proxy.port}"},
            )
            self.kafka.listeners[0].port = real
            try:
                self.kafka.start()
            except BaseException:
                self.proxy.stop()
                raise
            self._owned = True
        self.bootstrap = self.proxy.address if self.proxy is not None else self.kafka.bootstrap
        self._snapshots: dict[str, _Snapshots] = {}
        self._logs: dict[str, _ServerLog] = {}
        self._lock = threading.Lock()

    def create_topic(self, name: str, partitions: int) -> None:
        self.kafka.create_topic(name, partitions)

    def restart(self) -> None:
        if not self.can_restart:
            raise NotImplementedError("a shared Kafka is not restarted by the chaos runner")
        self.kafka.restart_broker()

    def cut(self, client_id: str) -> int:
        if self.proxy is None:
            raise NotImplementedError("no proxy in front of a shared Kafka")
        return self.proxy.cut(client_id)

    def truth(self, group: str) -> list[dict[str, Any]]:
        with self._lock:
            log = self._logs.setdefault(group, _ServerLog(self.kafka.log_file))
            out = log.read(group)
        snapshot = _describe(self.kafka.host, self.kafka.port, group)
        if "consumer" in self.group_protocols and (
            snapshot is None or snapshot["error_code"] == _GROUP_ID_NOT_FOUND
        ):
            # A KIP-848 group is no classic group: DescribeGroups does not know it.
            snapshot = _describe_consumer_group(self.kafka.host, self.kafka.port, group)
        out += self._snapshots.setdefault(group, _Snapshots()).changed(snapshot)
        return out

    def set_consumer_group_config(self, group: str, *, session_ms: int, heartbeat_ms: int) -> None:
        set_consumer_group_config(
            self.kafka.bootstrap, group, session_ms=session_ms, heartbeat_ms=heartbeat_ms
        )

    def stop(self) -> None:
        if not self._owned:
            return
        try:
            self.kafka.stop()
        finally:
            if self.proxy is not None:
                self.proxy.stop()


class TansuChaosBroker:
    kind = "tansu"
    can_restart = False
    can_cut = True
    group_protocols: tuple[str, ...] = ("classic",)

    def __init__(self) -> None:
        from aiogroup.testing.launchers.tansu import TansuBroker

        real = free_port()
        self.proxy = CuttingProxy("127.0.0.1", real).start()
        try:
            self.tansu = TansuBroker(real, advertised_port=self.proxy.port).start()
        except BaseException:
            self.proxy.stop()
            raise
        self.bootstrap = self.proxy.address
        self._snapshots: dict[str, _Snapshots] = {}

    def create_topic(self, name: str, partitions: int) -> None:
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.tansu.bootstrap, request_timeout_ms=10_000)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()

    def restart(self) -> None:
        raise NotImplementedError("Tansu keeps everything in memory: no restart")

    def cut(self, client_id: str) -> int:
        return self.proxy.cut(client_id)

    def truth(self, group: str) -> list[dict[str, Any]]:
        return self._snapshots.setdefault(group, _Snapshots()).changed(
            _describe(self.tansu.host, self.tansu.port, group)
        )

    def set_consumer_group_config(self, group: str, *, session_ms: int, heartbeat_ms: int) -> None:
        raise NotImplementedError("Tansu does not serve KIP-848 consumer groups")

    def stop(self) -> None:
        try:
            self.tansu.stop()
        finally:
            self.proxy.stop()


def start_broker(kind: str) -> ChaosBroker:
    """Start a broker of ``kind`` (one of :data:`BROKERS`)."""
    if kind == "embedded":
        return EmbeddedChaosBroker()
    if kind == "kafka23":
        return ApacheKafkaChaosBroker()
    if kind == "kafka4":
        from aiogroup.testing.launchers.kafka import KAFKA4_VERSION

        return ApacheKafkaChaosBroker(version=KAFKA4_VERSION)
    if kind == "tansu":
        return TansuChaosBroker()
    raise ValueError(f"unknown broker {kind!r}; expected one of {BROKERS}")


@contextlib.contextmanager
def running(kind: str) -> Any:
    broker = start_broker(kind)
    try:
        yield broker
    finally:
        broker.stop()
