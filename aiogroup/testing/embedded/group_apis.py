"""The embedded broker's group APIs: the wire side of the group coordinator.

JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups,
ListGroups, DeleteGroups and FindCoordinator, and KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe (whose groups are told the broker's topics, with their ids, before each
of those requests). :class:`GroupApis` turns kafka-python's request
objects into the coordinator's messages (:mod:`~aiogroup.testing.embedded.messages`), calls
the coordinator through its driver (:mod:`~aiogroup.testing.embedded.driver`) and turns its
answers into response values, version by version. What the coordinator leaves to the broker
is here too: OffsetCommit's unknown partitions (the broker owns the log) and the v0-2 / v1
shapes of LeaveGroup and OffsetFetch errors.
"""

from __future__ import annotations

import uuid
from typing import Any

from aiogroup.testing import wire
from aiogroup.testing.embedded.connection import (
    NEVER,
    BrokerNode,
    Connection,
    Handler,
    Never,
    Values,
    advertised_port,
)
from aiogroup.testing.embedded.consumer_messages import (
    ConsumerGroupHeartbeatRequestData,
    DescribedTopicPartitions,
    TopicMetadata,
)
from aiogroup.testing.embedded.driver import CoordinatorDriver
from aiogroup.testing.embedded.messages import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_OPERATIONS,
    ErrorCode,
    HeartbeatRequestData,
    JoinGroupRequestData,
    JoinGroupResponseData,
    LeaveGroupRequestData,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchRequestData,
    SyncGroupRequestData,
    SyncGroupResponseData,
)

__all__ = ["GroupApis"]


class GroupApis:
    """The group APIs of ``node``, answered by the coordinator ``driver`` drives."""

    def __init__(self, node: BrokerNode, driver: CoordinatorDriver) -> None:
        self._node = node
        self._driver = driver
        self._coordinator = driver.coordinator
        self._topics_version = -1

    def sync_topics(self) -> None:
        """Tell the coordinator the broker's topics if they changed since it was last told
        (Kafka's coordinator gets each new metadata image)."""
        log = self._node.log
        if log.version == self._topics_version:
            return
        self._topics_version = log.version
        topics = [TopicMetadata(t.name, t.topic_id, len(t.partitions)) for t in log.topics.values()]
        try:
            self._coordinator.update_topics(topics, self._driver.now())
        finally:
            self._driver.rearm()

    def handlers(self) -> dict[int, Handler]:
        """API key -> handler."""
        return {
            8: self.offset_commit,
            9: self.offset_fetch,
            10: self.find_coordinator,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
            15: self.describe_groups,
            16: self.list_groups,
            42: self.delete_groups,
            68: self.consumer_group_heartbeat,
            69: self.consumer_group_describe,
        }

    async def join_group(self, conn: Connection, req: wire.Request) -> Values | Never:
        b = req.body
        v = req.api_version
        data = JoinGroupRequestData(
            group_id=b.group_id,
            member_id=b.member_id or "",
            protocol_type=b.protocol_type,
            protocols=[(p.name, bytes(p.metadata or b"")) for p in (b.protocols or [])],
            session_timeout_ms=b.session_timeout_ms,
            rebalance_timeout_ms=b.rebalance_timeout_ms if v >= 1 else None,
            group_instance_id=b.group_instance_id if v >= 5 else None,
            client_id=conn.client_id,
            client_host=conn.peer,
            api_version=v,
            reason=b.reason if v >= 8 else None,
        )
        now = self._driver.now()
        resp: JoinGroupResponseData | None = await self._driver.deferred(
            lambda respond: self._coordinator.join_group(data, now, respond=respond)
        )
        if resp is None:
            return NEVER
        return {
            "error_code": resp.error_code,
            "generation_id": resp.generation_id,
            "protocol_type": resp.protocol_type,
            "protocol_name": resp.protocol_name if (resp.protocol_name or v >= 7) else "",
            "leader": resp.leader,
            "skip_assignment": resp.skip_assignment,
            "member_id": resp.member_id,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata,
                }
                for m in resp.members
            ],
        }

    async def sync_group(self, conn: Connection, req: wire.Request) -> Values | Never:
        b = req.body
        v = req.api_version
        if v >= 5 and (b.protocol_type is None or b.protocol_name is None):
            # KafkaApis: from v5 both must be present (areMandatoryProtocolTypeAndNamePresent).
            return {"error_code": ErrorCode.INCONSISTENT_GROUP_PROTOCOL, "assignment": b""}
        data = SyncGroupRequestData(
            group_id=b.group_id,
            generation_id=b.generation_id,
            member_id=b.member_id,
            assignments=[(a.member_id, bytes(a.assignment or b"")) for a in (b.assignments or [])],
            group_instance_id=b.group_instance_id if v >= 3 else None,
            protocol_type=b.protocol_type if v >= 5 else None,
            protocol_name=b.protocol_name if v >= 5 else None,
            api_version=v,
        )
        now = self._driver.now()
        resp: SyncGroupResponseData | None = await self._driver.deferred(
            lambda respond: self._coordinator.sync_group(data, now, respond=respond)
        )
        if resp is None:
            return NEVER
        return {
            "error_code": resp.error_code,
            "protocol_type": resp.protocol_type,
            "protocol_name": resp.protocol_name,
            "assignment": resp.assignment,
        }

    async def heartbeat(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        data = HeartbeatRequestData(
            group_id=b.group_id,
            generation_id=b.generation_id,
            member_id=b.member_id,
            group_instance_id=b.group_instance_id if req.api_version >= 3 else None,
        )
        try:
            resp = self._coordinator.heartbeat(data, self._driver.now())
        finally:
            self._driver.rearm()
        return {"error_code": resp.error_code}

    async def leave_group(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        if req.api_version <= 2:
            members = [MemberIdentity(member_id=b.member_id)]
        else:
            members = [
                MemberIdentity(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    reason=m.reason if req.api_version >= 5 else None,
                )
                for m in (b.members or [])
            ]
        try:
            resp = self._coordinator.leave_group(
                LeaveGroupRequestData(group_id=b.group_id, members=members), self._driver.now()
            )
        finally:
            self._driver.rearm()
        error_code = resp.error_code
        if req.api_version <= 2 and error_code == ErrorCode.NONE and resp.members:
            error_code = resp.members[0].error_code
        return {
            "error_code": error_code,
            "members": [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "error_code": m.error_code,
                }
                for m in resp.members
            ],
        }

    async def offset_commit(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        partitions = [
            OffsetCommitPartition(
                topic=t.name,
                partition=p.partition_index,
                committed_offset=p.committed_offset,
                committed_leader_epoch=p.committed_leader_epoch if req.api_version >= 6 else -1,
                committed_metadata=p.committed_metadata,
            )
            for t in (b.topics or [])
            for p in (t.partitions or [])
        ]
        # KafkaApis answers partitions it does not know UNKNOWN_TOPIC_OR_PARTITION itself; the
        # coordinator sees only the others, and not at all when none is left (so no group is
        # created by a commit that stores nothing).
        known = [
            p for p in partitions if self._node.log.partition(p.topic, p.partition) is not None
        ]
        results: dict[tuple[str, int], int] = {
            (p.topic, p.partition): int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            for p in partitions
            if self._node.log.partition(p.topic, p.partition) is None
        }
        if known:
            data = OffsetCommitRequestData(
                group_id=b.group_id,
                partitions=known,
                generation_id=b.generation_id_or_member_epoch,
                member_id=b.member_id or "",
                group_instance_id=b.group_instance_id if req.api_version >= 7 else None,
                api_version=req.api_version,
            )
            try:
                resp = self._coordinator.commit_offsets(data, self._driver.now())
            finally:
                self._driver.rearm()
            for topic, partition, error_code in resp.partitions:
                results[(topic, partition)] = error_code
        topics: dict[str, list[Values]] = {}
        for p in partitions:
            topic, partition = p.topic, p.partition
            error_code = results[(topic, partition)]
            topics.setdefault(topic, []).append(
                {"partition_index": partition, "error_code": error_code}
            )
        return {"topics": [{"name": name, "partitions": parts} for name, parts in topics.items()]}

    def _fetch_group_offsets(
        self,
        group_id: str,
        topics: list[Any] | None,
        require_stable: bool,
        member: tuple[str | None, int] = (None, -1),
    ) -> tuple[int, list[Values]]:
        wanted = (
            None
            if topics is None
            else [(t.name, int(p)) for t in topics for p in (t.partition_indexes or [])]
        )
        resp = self._coordinator.fetch_offsets(
            OffsetFetchRequestData(
                group_id=group_id,
                partitions=wanted,
                require_stable=require_stable,
                member_id=member[0],
                member_epoch=member[1],
            )
        )
        grouped: dict[str, list[Values]] = {}
        for p in resp.partitions:
            grouped.setdefault(p.topic, []).append(
                {
                    "partition_index": p.partition,
                    "committed_offset": p.committed_offset,
                    "committed_leader_epoch": p.committed_leader_epoch,
                    "metadata": p.metadata,
                    "error_code": p.error_code,
                }
            )
        return resp.error_code, [{"name": n, "partitions": ps} for n, ps in grouped.items()]

    async def offset_fetch(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        stable = bool(b.require_stable) if req.api_version >= 7 else False
        if req.api_version >= 8:
            groups = []
            for g in b.groups or []:
                member = (g.member_id, g.member_epoch) if req.api_version >= 9 else (None, -1)
                error_code, topics = self._fetch_group_offsets(g.group_id, g.topics, stable, member)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": error_code})
            return {"groups": groups}
        error_code, topics = self._fetch_group_offsets(b.group_id, b.topics, stable)
        if req.api_version == 1 and error_code != ErrorCode.NONE:
            # v1 has no top-level error: Kafka reports it on every partition.
            for t in topics:
                for p in t["partitions"]:
                    p["error_code"] = error_code
        return {"topics": topics, "error_code": error_code}

    async def describe_groups(self, conn: Connection, req: wire.Request) -> Values:
        include = bool(req.body.include_authorized_operations) if req.api_version >= 3 else False
        described = self._coordinator.describe_groups(
            list(req.body.groups or []),
            api_version=req.api_version,
            include_authorized_operations=include,
        )
        return {
            "groups": [
                {
                    "error_code": g.error_code,
                    "error_message": g.error_message,
                    "group_id": g.group_id,
                    "group_state": g.group_state,
                    "protocol_type": g.protocol_type,
                    "protocol_data": g.protocol_data,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "group_instance_id": m.group_instance_id,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "member_metadata": m.member_metadata,
                            "member_assignment": m.member_assignment,
                        }
                        for m in g.members
                    ],
                    "authorized_operations": _bits(g.authorized_operations),
                }
                for g in described
            ]
        }

    async def list_groups(self, conn: Connection, req: wire.Request) -> Values:
        states = list(req.body.states_filter or []) if req.api_version >= 4 else []
        listed = self._coordinator.list_groups(states_filter=states or None)
        return {
            "error_code": ErrorCode.NONE,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.group_state,
                }
                for g in listed
            ],
        }

    async def delete_groups(self, conn: Connection, req: wire.Request) -> Values:
        try:
            results = self._coordinator.delete_groups(
                list(req.body.groups_names or []), self._driver.now()
            )
        finally:
            self._driver.rearm()
        return {
            "throttle_time_ms": 0,
            "results": [{"group_id": g, "error_code": code} for g, code in results],
        }

    async def consumer_group_heartbeat(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        self.sync_topics()
        data = ConsumerGroupHeartbeatRequestData(
            group_id=b.group_id,
            member_id=b.member_id,
            member_epoch=b.member_epoch,
            instance_id=b.instance_id,
            rack_id=b.rack_id,
            rebalance_timeout_ms=b.rebalance_timeout_ms,
            subscribed_topic_names=(
                None if b.subscribed_topic_names is None else list(b.subscribed_topic_names)
            ),
            subscribed_topic_regex=b.subscribed_topic_regex if req.api_version >= 1 else None,
            server_assignor=b.server_assignor,
            topic_partitions=(
                None
                if b.topic_partitions is None
                else [(uuid.UUID(str(t.topic_id)), list(t.partitions)) for t in b.topic_partitions]
            ),
            client_id=conn.client_id,
            client_host=conn.peer,
            api_version=req.api_version,
        )
        try:
            resp = self._coordinator.consumer_group_heartbeat(data, self._driver.now())
        finally:
            self._driver.rearm()
        assignment = None
        if resp.assignment is not None:
            assignment = {
                "topic_partitions": [
                    {"topic_id": topic_id, "partitions": list(partitions)}
                    for topic_id, partitions in resp.assignment.items()
                ]
            }
        return {
            "throttle_time_ms": 0,
            "error_code": resp.error_code,
            "error_message": resp.error_message,
            "member_id": resp.member_id,
            "member_epoch": resp.member_epoch,
            "heartbeat_interval_ms": resp.heartbeat_interval_ms,
            "assignment": assignment,
        }

    async def consumer_group_describe(self, conn: Connection, req: wire.Request) -> Values:
        self.sync_topics()
        described = self._coordinator.consumer_group_describe(list(req.body.group_ids or []))
        # With no authorizer every group operation is allowed; not asked for: Integer.MIN_VALUE.
        include = bool(req.body.include_authorized_operations)
        operations = GROUP_OPERATIONS if include else AUTHORIZED_OPERATIONS_OMITTED

        def parts(assigned: tuple[DescribedTopicPartitions, ...]) -> Values:
            return {
                "topic_partitions": [
                    {
                        "topic_id": t.topic_id,
                        "topic_name": t.topic_name,
                        "partitions": list(t.partitions),
                    }
                    for t in assigned
                ]
            }

        return {
            "throttle_time_ms": 0,
            "groups": [
                {
                    "error_code": g.error_code,
                    "error_message": g.error_message,
                    "group_id": g.group_id,
                    "group_state": g.group_state,
                    "group_epoch": g.group_epoch,
                    "assignment_epoch": g.assignment_epoch,
                    "assignor_name": g.assignor_name,
                    "members": [
                        {
                            "member_id": m.member_id,
                            "instance_id": m.instance_id,
                            "rack_id": m.rack_id,
                            "member_epoch": m.member_epoch,
                            "client_id": m.client_id,
                            "client_host": m.client_host,
                            "subscribed_topic_names": list(m.subscribed_topic_names),
                            "subscribed_topic_regex": m.subscribed_topic_regex,
                            "assignment": parts(m.assignment),
                            "target_assignment": parts(m.target_assignment),
                            "member_type": m.member_type,
                        }
                        for m in g.members
                    ],
                    "authorized_operations": operations,
                }
                for g in described
            ],
        }

    async def find_coordinator(self, conn: Connection, req: wire.Request) -> Values:
        me = {
            "node_id": self._node.node_id,
            "host": self._node.host,
            "port": advertised_port(self._node, conn),
        }
        if req.api_version >= 4:
            return {
                "coordinators": [
                    {"key": key, **me, "error_code": ErrorCode.NONE, "error_message": None}
                    for key in (req.body.coordinator_keys or [])
                ]
            }
        return {"error_code": ErrorCode.NONE, "error_message": None, **me}


def _bits(bitfield: int) -> set[int]:
    """An int32 bitfield as the set of its bit positions (kafka-python's ``bitfield`` type)."""
    return {i for i in range(32) if (bitfield & 0xFFFFFFFF) >> i & 1}
