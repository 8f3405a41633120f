"""What a running member tells its operator, in one room:

* :mod:`aiogroup.observability.metrics`: Java's KIP-429 consumer-coordinator metrics, the sink
  protocol the membership machine reports to, and the registry ``member.metrics`` reads;
* :mod:`aiogroup.observability.exporters`: those metrics for Prometheus and OpenTelemetry;
* :mod:`aiogroup.observability.telemetry`: rebalance telemetry as JSON Lines (the audit's
  input), with recorders for librdkafka, kafka-python and aiokafka members.

The driver's own log lines live beside it in :mod:`aiogroup.client.logs`.
"""
