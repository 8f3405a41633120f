"""Kafka messages that kafka-python 3 does not ship, as kafka-python message classes.

KIP-848's ``ConsumerGroupHeartbeat`` (API 68, v0-v1) and ``ConsumerGroupDescribe`` (API 69,
v0-v1), from schema files beside this module in the format kafka-python's schema loader reads:
Kafka's wire format (field names, types, versions, nullability), written for aiogroup. The
classes encode and decode exactly as kafka-python's own (``Request.prepare`` sends them), so
the transport and the embedded broker need nothing else.
"""

from __future__ import annotations

import sys
from typing import Any

from kafka.protocol.api_message import ApiMessage

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
]

#: kafka-python's loader reads ``<name>.json`` from the package of the module it is given.
_HERE: Any = sys.modules[__name__]


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_HERE):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_HERE):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_HERE):  # type: ignore[misc,call-arg]
    pass


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_HERE):  # type: ignore[misc,call-arg]
    pass
