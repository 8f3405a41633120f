"""Golden vectors: bytes that librdkafka, kafka-python and aiokafka put on the wire.

Every payload must decode to exactly the fields listed next to it. Re-encoding the same fields
must give the same bytes, except where the peer did not sort (we always do, KAFKA-12898): those
differences are classified and each one must be a known peer habit, named below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiogroup.protocol import (
    Assignment,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_sticky_user_data,
    encode_subscription,
    generation_from_user_data,
)

# ../shared/vectors relative to the repository root (tests/protocol/ is two levels below it),
# following the path as given first, then with symlinks resolved.
_CANDIDATES = [
    root.parents[2].parent / "shared" / "vectors"
    for root in (Path(__file__).absolute(), Path(__file__).resolve())
]
VECTORS_DIR = next((d for d in _CANDIDATES if d.is_dir()), _CANDIDATES[0])
VECTORS_FILE = VECTORS_DIR / "consumer_protocol.json"

if not VECTORS_DIR.is_dir():  # pragma: no cover - depends on the checkout
    pytest.skip(f"golden vectors folder {VECTORS_DIR} is absent", allow_module_level=True)

VECTORS: list[dict[str, Any]] = json.loads(VECTORS_FILE.read_text())

# Ordering habits of peers that make their bytes differ from our sorted encoding.
# (client prefix, message kind) -> the differences that client is known to produce.
KNOWN_ORDERING_DIFFERENCES: dict[tuple[str, str], set[str]] = {
    # Python eager clients build the topic list from a set: order follows PYTHONHASHSEED.
    ("aiokafka", "join-metadata"): {"topics unsorted"},
    ("kafka-python", "join-metadata"): {"topics unsorted"},
    # librdkafka's cooperative-sticky assignment lists are not always sorted.
    ("librdkafka", "sync-assignment"): {"topic order unsorted", "partitions unsorted"},
    ("librdkafka", "sync-response"): {"topic order unsorted", "partitions unsorted"},
}

SUBSCRIPTIONS = [v for v in VECTORS if v["message"] == "join-metadata"]
ASSIGNMENTS = [v for v in VECTORS if v["message"] in ("sync-assignment", "sync-response")]


def _ids(vectors: list[dict[str, Any]]) -> list[str]:
    return [v["id"] for v in vectors]


def _by_topic(entries: list[dict[str, Any]]) -> dict[str, tuple[int, ...]]:
    return {e["topic"]: tuple(e["partitions"]) for e in entries}


def _client_key(vector: dict[str, Any]) -> tuple[str, str]:
    return (vector["client"].split(" ")[0], vector["message"])


def _ordering_differences(topics: list[str] | None, entries: list[dict[str, Any]]) -> set[str]:
    found = set()
    if topics is not None and topics != sorted(topics):
        found.add("topics unsorted")
    names = [e["topic"] for e in entries]
    if names != sorted(names):
        found.add("topic order unsorted")
    if any(e["partitions"] != sorted(e["partitions"]) for e in entries):
        found.add("partitions unsorted")
    return found


def _user_data(decoded: dict[str, Any]) -> bytes | None:
    if decoded["user_data_state"] == "null":
        return None
    raw = bytes.fromhex(decoded["user_data_hex"])
    assert len(raw) == decoded["user_data_len"]
    return raw


def test_vectors_cover_every_client_and_message() -> None:
    clients = {_client_key(v) for v in VECTORS}
    assert {c for c, _ in clients} == {"aiokafka", "kafka-python", "librdkafka"}
    assert {m for _, m in clients} == {"join-metadata", "sync-assignment", "sync-response"}
    assert {v["decoded"]["version"] for v in SUBSCRIPTIONS} == {0, 3}


@pytest.mark.parametrize("vector", SUBSCRIPTIONS, ids=_ids(SUBSCRIPTIONS))
def test_subscription_vector(vector: dict[str, Any]) -> None:
    wire = bytes.fromhex(vector["hex"])
    expected = vector["decoded"]
    assert expected["trailing_bytes_hex"] == ""

    sub = decode_subscription(wire)
    assert sub.version == expected["version"]
    assert list(sub.topics) == expected["topics"]
    assert sub.user_data == _user_data(expected)
    owned_entries = expected.get("owned_partitions", [])
    assert dict(sub.owned_partitions) == _by_topic(owned_entries)
    assert list(sub.owned_partitions) == [e["topic"] for e in owned_entries]
    assert sub.generation_id == expected.get("generation_id", -1)
    assert sub.rack_id == expected.get("rack_id")

    # Re-encode the listed fields at the listed version.
    ours = encode_subscription(
        Subscription(
            topics=expected["topics"],
            user_data=_user_data(expected),
            owned_partitions=_by_topic(owned_entries),
            generation_id=expected.get("generation_id", -1),
            rack_id=expected.get("rack_id"),
        ),
        version=expected["version"],
    )
    differences = _ordering_differences(expected["topics"], owned_entries)
    _check_reencoding(vector, wire, ours, differences)
    if not differences:
        assert ours == wire
    else:
        # Only the order differs: the same fields, sorted.
        again = decode_subscription(ours)
        assert list(again.topics) == sorted(expected["topics"])
        assert again == Subscription(
            topics=sorted(expected["topics"]),
            user_data=sub.user_data,
            owned_partitions={t: tuple(sorted(p)) for t, p in sorted(sub.owned_partitions.items())},
            generation_id=sub.generation_id,
            rack_id=sub.rack_id,
        )


@pytest.mark.parametrize("vector", ASSIGNMENTS, ids=_ids(ASSIGNMENTS))
def test_assignment_vector(vector: dict[str, Any]) -> None:
    wire = bytes.fromhex(vector["hex"])
    expected = vector["decoded"]
    assert expected["trailing_bytes_hex"] == ""

    assignment = decode_assignment(wire)
    assert assignment.version == expected["version"]
    entries = expected["assigned_partitions"]
    # Wire order is kept, topics and partitions alike.
    assert list(assignment.partitions) == [e["topic"] for e in entries]
    assert dict(assignment.partitions) == _by_topic(entries)
    assert assignment.user_data == _user_data(expected)

    ours = encode_assignment(
        Assignment(partitions=_by_topic(entries), user_data=_user_data(expected)),
        version=expected["version"],
    )
    differences = _ordering_differences(None, entries)
    _check_reencoding(vector, wire, ours, differences)
    if not differences:
        assert ours == wire
    else:
        again = decode_assignment(ours)
        assert list(again.partitions) == sorted(assignment.partitions)
        assert dict(again.partitions) == {
            t: tuple(sorted(p)) for t, p in assignment.partitions.items()
        }
        assert again.user_data == assignment.user_data


def _check_reencoding(
    vector: dict[str, Any], wire: bytes, ours: bytes, differences: set[str]
) -> None:
    if not differences:
        return
    allowed = KNOWN_ORDERING_DIFFERENCES.get(_client_key(vector), set())
    assert differences <= allowed, f"{vector['id']}: unexpected ordering {differences}"
    # The capture's own notes call the ordering out too.
    assert any("not sorted" in note.lower() for note in vector["notes"]), vector["notes"]
    assert ours != wire and len(ours) == len(wire)
    assert sorted(ours) == sorted(wire)  # same bytes, other order


WITH_STICKY_DATA = [v for v in VECTORS if "user_data_decoded" in v["decoded"]]


@pytest.mark.parametrize("vector", WITH_STICKY_DATA, ids=_ids(WITH_STICKY_DATA))
def test_sticky_user_data_vector(vector: dict[str, Any]) -> None:
    expected = vector["decoded"]["user_data_decoded"]
    raw = _user_data(vector["decoded"])
    assert raw is not None
    sticky = decode_sticky_user_data(raw)
    assert expected["sticky_user_data_version"] == 1
    assert dict(sticky.partitions) == _by_topic(expected["previous_assignment"])
    assert sticky.generation == expected["generation"]
    assert generation_from_user_data(raw) == expected["generation"]
    # Every peer sorted its previous assignment, so our encoder reproduces the bytes.
    assert encode_sticky_user_data(sticky.partitions, sticky.generation) == raw


def test_sticky_vectors_cover_librdkafka_and_aiokafka() -> None:
    clients = {_client_key(v)[0] for v in WITH_STICKY_DATA}
    assert clients == {"aiokafka", "librdkafka"}
    assert {v["decoded"]["user_data_decoded"]["generation"] for v in WITH_STICKY_DATA} >= {-1, 0}


@pytest.mark.parametrize(
    "vector",
    [v for v in SUBSCRIPTIONS if v["decoded"]["version"] > 0],
    ids=_ids([v for v in SUBSCRIPTIONS if v["decoded"]["version"] > 0]),
)
def test_v3_vector_read_by_an_old_reader(vector: dict[str, Any]) -> None:
    wire = bytes.fromhex(vector["hex"])
    expected = vector["decoded"]
    old = decode_subscription(wire, max_version=0)
    assert list(old.topics) == expected["topics"]
    assert old.user_data == _user_data(expected)
    assert old.owned_partitions == {}
    assert old.generation_id == -1
    assert old.rack_id is None


def test_every_known_ordering_difference_occurs() -> None:
    """The table above is not stale: each named habit shows up in the captures."""
    seen: dict[tuple[str, str], set[str]] = {}
    for v in SUBSCRIPTIONS:
        found = _ordering_differences(
            v["decoded"]["topics"], v["decoded"].get("owned_partitions", [])
        )
        seen.setdefault(_client_key(v), set()).update(found)
    for v in ASSIGNMENTS:
        found = _ordering_differences(None, v["decoded"]["assigned_partitions"])
        seen.setdefault(_client_key(v), set()).update(found)
    assert {k: s for k, s in seen.items() if s} == KNOWN_ORDERING_DIFFERENCES
