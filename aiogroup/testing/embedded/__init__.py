"""aiogroup's embedded Kafka broker, in its own room.

The server and its tools:

* :mod:`~aiogroup.testing.embedded.broker`: :class:`EmbeddedBroker`, the asyncio server
  (listeners, connections, framing, fault injection, dispatch);
  :mod:`~aiogroup.testing.embedded.threaded`: :class:`ThreadedBroker` (one on its own thread);
  :mod:`~aiogroup.testing.embedded.client`: :class:`RawClient` (raw requests);
  :mod:`~aiogroup.testing.embedded.cli`: the command line (``python -m aiogroup.testing.embedded``);
* the requests, one handler class per API family, composed by the server:
  :mod:`~aiogroup.testing.embedded.group_apis` (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
  offsets, DescribeGroups, ...; the coordinator's event-loop side is
  :mod:`~aiogroup.testing.embedded.driver`), :mod:`~aiogroup.testing.embedded.data_apis`
  (Produce, Fetch, ListOffsets, Metadata), :mod:`~aiogroup.testing.embedded.admin_apis`
  (ApiVersions, topics, InitProducerId); :mod:`~aiogroup.testing.embedded.connection` is what
  they share;
* :mod:`~aiogroup.testing.embedded.auth`: the server side of SASL, behind a small interface the
  server implements (:class:`~aiogroup.testing.embedded.auth.SaslChannel`);
  :mod:`~aiogroup.testing.embedded.faults`: fault injection;
  :mod:`~aiogroup.testing.embedded.log`: the in-memory log.

The coordinator, sans-I/O:

* :mod:`~aiogroup.testing.embedded.coordinator`: Apache Kafka's classic group coordinator, rule
  by rule, with a flavour per Kafka version; its layers
  :mod:`~aiogroup.testing.embedded.member_requests` (JoinGroup, SyncGroup, Heartbeat,
  LeaveGroup) and :mod:`~aiogroup.testing.embedded.rebalance` (the transitions, timers and
  answer delivery they share); :mod:`~aiogroup.testing.embedded.messages` (its requests,
  answers and error codes); :mod:`~aiogroup.testing.embedded.rules` (its settings, and what
  differs per flavour);
* :mod:`~aiogroup.testing.embedded.group` (the group and its members) and
  :mod:`~aiogroup.testing.embedded.hashorder` (the iteration order of Java's and Scala's hash
  maps, which decides member order).

The Kafka framing the broker and the launchers share is :mod:`aiogroup.testing.wire`.
"""
