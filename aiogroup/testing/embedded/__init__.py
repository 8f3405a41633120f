"""aiogroup's embedded Kafka broker, in its own room.

* :mod:`~aiogroup.testing.embedded.broker`: :class:`EmbeddedBroker` (the asyncio server),
  :class:`ThreadedBroker` (one on its own thread), :class:`RawClient` (raw requests), and the
  command line (``python -m aiogroup.testing.embedded.broker``);
* :mod:`~aiogroup.testing.embedded.coordinator`: Apache Kafka's classic group coordinator, rule
  by rule, sans-I/O, with a flavour per Kafka version; :mod:`~aiogroup.testing.embedded.group`
  (the group and its members) and :mod:`~aiogroup.testing.embedded.hashorder` (the iteration
  order of Java's and Scala's hash maps, which decides member order);
* :mod:`~aiogroup.testing.embedded.log`: the in-memory log; :mod:`~aiogroup.testing.embedded.auth`:
  the server side of SASL; :mod:`~aiogroup.testing.embedded.faults`: fault injection.

The Kafka framing the broker and the launchers share is :mod:`aiogroup.testing.wire`.
"""
