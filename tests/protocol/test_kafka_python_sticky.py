"""kafka-python 3's sticky user data: an int16 version (``00 01``) before the sticky v1 block.

The vectors in ``tests/data/kafka_python_sticky.json`` are the JoinGroup metadata a real
kafka-python 3.0.12 consumer with ``StickyPartitionAssignor`` sent to the embedded broker
(recorded by ``tests/data/record_kafka_python_sticky.py``), each with the fields kafka-python's
own decoders read from it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from aiogroup.assignors.sticky import StickyAssignor
from aiogroup.errors import CodecError, TruncatedError
from aiogroup.protocol import (
    decode_sticky_user_data,
    decode_subscription,
    encode_sticky_user_data,
    generation_from_user_data,
)
from aiogroup.protocol._reader import Reader
from aiogroup.protocol.types import Subscription

VECTORS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[1] / "data" / "kafka_python_sticky.json").read_text()
)
WITH_HISTORY = [v for v in VECTORS if "user_data_decoded" in v["decoded"]]


def _ids(vectors: list[dict[str, Any]]) -> list[str]:
    return [v["id"] for v in vectors]


def _previous(vector: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    entries = vector["decoded"]["user_data_decoded"]["previous_assignment"]
    return {e["topic"]: tuple(e["partitions"]) for e in entries}


def test_the_vectors_cover_history_and_no_history() -> None:
    assert {v["client"] for v in VECTORS} == {"kafka-python 3.0.12"}
    assert len(WITH_HISTORY) >= 2
    assert any(not v["decoded"]["user_data_hex"] for v in VECTORS)
    assert any(not _previous(v) for v in WITH_HISTORY)
    assert {v["decoded"]["user_data_decoded"]["version"] for v in WITH_HISTORY} == {1}


@pytest.mark.parametrize("vector", VECTORS, ids=_ids(VECTORS))
def test_subscription_fields(vector: dict[str, Any]) -> None:
    sub = decode_subscription(bytes.fromhex(vector["hex"]))
    assert list(sub.topics) == vector["decoded"]["topics"]
    assert (sub.user_data or b"").hex() == vector["decoded"]["user_data_hex"]


@pytest.mark.parametrize("vector", WITH_HISTORY, ids=_ids(WITH_HISTORY))
def test_sticky_user_data_is_read(vector: dict[str, Any]) -> None:
    raw = bytes.fromhex(vector["decoded"]["user_data_hex"])
    expected = vector["decoded"]["user_data_decoded"]
    data = decode_sticky_user_data(raw)
    assert dict(data.partitions) == _previous(vector)
    assert data.generation == expected["generation"]
    assert generation_from_user_data(raw, strict=True) == expected["generation"]
    # The layout is ours after the two version bytes (kafka-python sorts, as we do).
    assert raw == b"\x00\x01" + encode_sticky_user_data(data.partitions, data.generation)


@pytest.mark.parametrize("vector", WITH_HISTORY, ids=_ids(WITH_HISTORY))
def test_the_standard_layout_cannot_read_them(vector: dict[str, Any]) -> None:
    """What made the old reader fail: the prefix reads as a count of 65,536+ topics."""
    raw = bytes.fromhex(vector["decoded"]["user_data_hex"])
    with pytest.raises(CodecError):
        Reader(raw).topic_partitions("previous_assignment")


def test_a_standard_block_of_65536_topics_is_still_standard() -> None:
    """The only standard blocks that start with ``00 01``: 65,536 to 131,071 topics."""
    topics = {f"t{i}": (0,) for i in range(65_536)}
    raw = encode_sticky_user_data(topics, 7)
    assert raw[:2] == b"\x00\x01"
    data = decode_sticky_user_data(raw)
    assert len(data.partitions) == 65_536 and data.generation == 7


def test_a_truncated_kafka_python_block_is_our_error() -> None:
    raw = bytes.fromhex(WITH_HISTORY[0]["decoded"]["user_data_hex"])
    for cut in (len(raw) - 1, len(raw) - 4, 3):
        with pytest.raises(CodecError):
            decode_sticky_user_data(raw[:cut])
    with pytest.raises(TruncatedError):
        decode_sticky_user_data(b"\x00\x01\x00\x00\x00\x00")  # no generation


def test_a_sticky_leader_keeps_a_kafka_python_members_partitions() -> None:
    """The leader honours the previous assignment kafka-python sends: when a new member
    joins, only what balance requires moves (to the newcomer)."""
    vector = max(WITH_HISTORY, key=lambda v: sum(map(len, _previous(v).values())))
    previous = _previous(vector)
    owned = {(t, p) for t, ps in previous.items() for p in ps}
    counts = {t: len(ps) for t, ps in previous.items()}  # it owned every partition
    topics = sorted(counts)
    assignor = StickyAssignor()
    result = assignor.assign(
        counts,
        {
            "kafka-python": decode_subscription(bytes.fromhex(vector["hex"])),
            "newcomer": Subscription(topics),
        },
    )
    kept = {(t, p) for t, ps in result["kafka-python"].partitions.items() for p in ps}
    given = {(t, p) for t, ps in result["newcomer"].partitions.items() for p in ps}
    assert kept <= owned and len(kept) == (len(owned) + 1) // 2
    assert assignor.last_moved == len(given) == len(owned) // 2
