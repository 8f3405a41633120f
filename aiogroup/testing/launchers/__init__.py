"""Launchers of real brokers on this machine, every one started and stopped the same way
(:class:`~aiogroup.testing.launchers.processes.ServerProcess`: its own process group, a log
file, a deadline that reports the log's tail, stopped by pid):

* :mod:`~aiogroup.testing.launchers.kafka`: :class:`KafkaBroker`, Apache Kafka on the local JVM
  (4.x and 3.9 in KRaft mode: :mod:`~aiogroup.testing.launchers.kraft`, jars by
  :mod:`~aiogroup.testing.launchers.maven`; 2.3.0 with ZooKeeper:
  :mod:`~aiogroup.testing.launchers.kafka23`), and its command line;
* :mod:`~aiogroup.testing.launchers.tansu`: the Tansu binary of the ``broker`` extra.
"""
