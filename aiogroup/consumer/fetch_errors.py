"""The Fetch and ListOffsets error codes the consumer's core handles, in Kafka's words."""

from __future__ import annotations

__all__ = [
    "FENCED_LEADER_EPOCH",
    "KAFKA_STORAGE_ERROR",
    "LEADER_ERRORS",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "OFFSET_NOT_AVAILABLE",
    "OFFSET_OUT_OF_RANGE",
    "REPLICA_NOT_AVAILABLE",
    "TOPIC_AUTHORIZATION_FAILED",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_ID",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "error_words",
]

# Partition errors that mean "ask the metadata who leads this partition now".
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
REPLICA_NOT_AVAILABLE = 9
KAFKA_STORAGE_ERROR = 56
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
OFFSET_NOT_AVAILABLE = 78
UNKNOWN_TOPIC_ID = 100
OFFSET_OUT_OF_RANGE = 1
TOPIC_AUTHORIZATION_FAILED = 29
LEADER_ERRORS = frozenset(
    {
        UNKNOWN_TOPIC_OR_PARTITION,
        LEADER_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER,
        REPLICA_NOT_AVAILABLE,
        KAFKA_STORAGE_ERROR,
        FENCED_LEADER_EPOCH,
        UNKNOWN_LEADER_EPOCH,
        OFFSET_NOT_AVAILABLE,
        UNKNOWN_TOPIC_ID,
    }
)


#: Kafka's names of the error codes the core handles (kafka-python's for the rest).
_ERROR_NAMES = {
    UNKNOWN_TOPIC_OR_PARTITION: "UNKNOWN_TOPIC_OR_PARTITION",
    LEADER_NOT_AVAILABLE: "LEADER_NOT_AVAILABLE",
    NOT_LEADER_OR_FOLLOWER: "NOT_LEADER_OR_FOLLOWER",
    REPLICA_NOT_AVAILABLE: "REPLICA_NOT_AVAILABLE",
    KAFKA_STORAGE_ERROR: "KAFKA_STORAGE_ERROR",
    FENCED_LEADER_EPOCH: "FENCED_LEADER_EPOCH",
    UNKNOWN_LEADER_EPOCH: "UNKNOWN_LEADER_EPOCH",
    OFFSET_NOT_AVAILABLE: "OFFSET_NOT_AVAILABLE",
    UNKNOWN_TOPIC_ID: "UNKNOWN_TOPIC_ID",
    OFFSET_OUT_OF_RANGE: "OFFSET_OUT_OF_RANGE",
    TOPIC_AUTHORIZATION_FAILED: "TOPIC_AUTHORIZATION_FAILED",
}


def error_words(code: int) -> str:
    """``NOT_LEADER_OR_FOLLOWER (error 6)``: a broker error code in Kafka's words."""
    name = _ERROR_NAMES.get(code)
    if name is None:
        from kafka.errors import for_code

        name = str(getattr(for_code(code), "message", "")) or "UNKNOWN"
    return f"{name} (error {code})"
