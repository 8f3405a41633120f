"""The embedded broker's cluster and admin APIs.

ApiVersions (the versions the broker's flavour serves), CreateTopics, DeleteTopics (with the
groups' offsets of the deleted partitions, as Kafka's ``handleDeletedPartitions``),
CreatePartitions, InitProducerId (idempotent producers), and SaslHandshake / SaslAuthenticate
on a connection that needs no authentication, or has it already
(:func:`~aiogroup.testing.embedded.auth.already_authenticated`; the authentication itself is
:func:`~aiogroup.testing.embedded.auth.authenticate`'s).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from aiogroup.testing import wire
from aiogroup.testing.embedded import auth
from aiogroup.testing.embedded.connection import BrokerNode, Connection, Handler, Values
from aiogroup.testing.embedded.driver import CoordinatorDriver
from aiogroup.testing.embedded.log import valid_topic_name
from aiogroup.testing.embedded.messages import ErrorCode

__all__ = ["AdminApis", "api_versions_answer"]


def api_versions_answer(
    api_versions: Mapping[int, tuple[int, int]], error_code: int = ErrorCode.NONE
) -> Values:
    """ApiVersions' answer: the ``api_versions`` served (key -> (min, max)), and the error."""
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(api_versions.items())
        ],
        "throttle_time_ms": 0,
    }


class AdminApis:
    """The cluster and admin APIs of ``node``; DeleteTopics tells the coordinator ``driver``
    drives."""

    def __init__(self, node: BrokerNode, driver: CoordinatorDriver) -> None:
        self._node = node
        self._driver = driver
        self._producer_ids = itertools.count(1000)

    def handlers(self) -> dict[int, Handler]:
        """API key -> handler."""
        return {
            17: self.sasl_when_authenticated,
            18: self.api_versions,
            19: self.create_topics,
            20: self.delete_topics,
            22: self.init_producer_id,
            36: self.sasl_when_authenticated,
            37: self.create_partitions,
        }

    async def sasl_when_authenticated(self, conn: Connection, req: wire.Request) -> Values:
        return auth.already_authenticated(req)

    async def api_versions(self, conn: Connection, req: wire.Request) -> Values:
        return api_versions_answer(self._node.api_versions)

    async def create_topics(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        results = []
        for t in b.topics or []:
            count = t.num_partitions if t.num_partitions != -1 else self._node.num_partitions
            message: str | None = None
            if not valid_topic_name(t.name):
                error_code, message = (
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"invalid topic name {t.name!r}",
                )
            elif t.name in self._node.log.topics:
                error_code, message = (
                    ErrorCode.TOPIC_ALREADY_EXISTS,
                    f"topic {t.name!r} already exists",
                )
            elif t.assignments:
                count = len(t.assignments)
                error_code = ErrorCode.NONE
            elif count < 1:
                error_code, message = (
                    ErrorCode.INVALID_PARTITIONS,
                    "number of partitions must be >= 1",
                )
            else:
                error_code = ErrorCode.NONE
            topic_id = None
            if error_code == ErrorCode.NONE and not b.validate_only:
                topic_id = self._node.log.create_topic(t.name, count).topic_id
            results.append(
                {
                    "name": t.name,
                    "topic_id": topic_id,
                    "error_code": error_code,
                    "error_message": message,
                    "num_partitions": count if error_code == ErrorCode.NONE else -1,
                    "replication_factor": 1 if error_code == ErrorCode.NONE else -1,
                    "configs": [],
                }
            )
        return {"topics": results}

    async def delete_topics(self, conn: Connection, req: wire.Request) -> Values:
        responses = []
        for name in req.body.topic_names or []:
            topic = self._node.log.topics.get(name)
            found = self._node.log.delete_topic(name)
            if topic is not None:
                # handleDeletedPartitions: the groups' offsets for the topic go with it.
                try:
                    self._driver.coordinator.delete_partitions(
                        [(name, i) for i in range(len(topic.partitions))], self._driver.now()
                    )
                finally:
                    self._driver.rearm()
            responses.append(
                {
                    "name": name,
                    "error_code": ErrorCode.NONE if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                }
            )
        return {"responses": responses}

    async def create_partitions(self, conn: Connection, req: wire.Request) -> Values:
        b = req.body
        results = []
        for t in b.topics or []:
            topic = self._node.log.topics.get(t.name)
            message: str | None = None
            if topic is None:
                error_code, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {t.name!r}"
            elif t.count <= len(topic.partitions):
                error_code = ErrorCode.INVALID_PARTITIONS
                message = f"topic has {len(topic.partitions)} partitions; asked for {t.count}"
            else:
                error_code = ErrorCode.NONE
                if not b.validate_only:
                    self._node.log.add_partitions(t.name, t.count)
            results.append({"name": t.name, "error_code": error_code, "error_message": message})
        return {"results": results}

    async def init_producer_id(self, conn: Connection, req: wire.Request) -> Values:
        return {
            "error_code": ErrorCode.NONE,
            "producer_id": next(self._producer_ids),
            "producer_epoch": 0,
        }
