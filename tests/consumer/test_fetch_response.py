"""The Fetch response reader against kafka-python's schema-driven encoder, v4-v12 (sans-I/O)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse

from aiogroup.client.transport import _decode_response
from aiogroup.consumer.fetch_response import FetchResponseDecoder, decode_fetch_response
from aiogroup.consumer.state import FetchedPartition
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing.wire import encode_response

from .batches import batch

RECORDS = batch([(b"k", b"v"), (None, b"value")], 7)


def answer(version: int) -> dict[str, Any]:
    def part(index: int, records: bytes | None, aborted: list[dict[str, int]] | None) -> Any:
        return {
            "partition_index": index, "error_code": 1 if records is None else 0,
            "high_watermark": 1000 + index, "last_stable_offset": 900 + index,
            "log_start_offset": 5 + index, "aborted_transactions": aborted,
            "preferred_read_replica": 2, "records": records,
            # v12's tagged fields (KIP-595, KIP-951): skipped, not read.
            "current_leader": {"leader_id": 3, "leader_epoch": 9},
        }  # fmt: skip

    return {
        "throttle_time_ms": 12, "error_code": 0, "session_id": 77,
        "responses": [
            {"topic": "orders", "partitions": [
                part(0, RECORDS, None),
                part(1, None, None),
                part(2, b"", [{"producer_id": 4, "first_offset": 11},
                              {"producer_id": 5, "first_offset": 12}]),
            ]},
            {"topic": "ünïcode", "partitions": [part(3, RECORDS + RECORDS[:20], [])]},
            {"topic": "empty", "partitions": []},
        ],
    }  # fmt: skip


@pytest.mark.parametrize("version", range(4, 13))
def test_every_field_as_kafka_python_reads_it(version: int) -> None:
    data = encode_response(1, version, 42, answer(version))[4:]
    ours = decode_fetch_response(data, version)
    theirs = FetchResponse.decode(data, version=version, header=True)
    expected = [
        FetchedPartition(
            tp=TopicPartition(t.topic, p.partition_index),
            error_code=p.error_code,
            high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset if version >= 5 else -1,
            aborted_transactions=(
                [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
                if p.aborted_transactions
                else None
            ),
            records=p.records,
            preferred_read_replica=p.preferred_read_replica if version >= 11 else -1,
        )
        for t in theirs.responses
        for p in t.partitions
    ]
    assert list(ours.partitions) == expected
    assert ours.partitions[0].records == RECORDS
    assert ours.partitions[1].records is None
    assert ours.partitions[2].aborted_transactions == [(4, 11), (5, 12)]
    assert ours.partitions[3].tp == TopicPartition("ünïcode", 3)
    assert (ours.error_code, ours.session_id) == ((0, 77) if version >= 7 else (0, 0))


@pytest.mark.parametrize("version", [4, 11, 12])
def test_cut_short_or_overlong_answers_are_refused(version: int) -> None:
    data = encode_response(1, version, 42, answer(version))[4:]
    for cut in (len(data) - 1, len(data) // 2, 10, 5):
        with pytest.raises(Exception):  # noqa: B017 (the transport wraps any of them)
            decode_fetch_response(data[:cut], version)
    with pytest.raises(ValueError, match="left after"):
        decode_fetch_response(data + b"\x00", version)


@pytest.mark.parametrize("version", [11, 12])
def test_a_short_answer_decodes_through_the_transport(version: int) -> None:
    """An empty answer (an incremental session with nothing new: 17 bytes at v12) is shorter
    than the transport's header peek: the decoder must say where its header ends, or the body
    read after the peek is empty and the answer undecodable."""
    tags = b"\x00" if version >= 12 else b""
    topics = b"\x01" if version >= 12 else (0).to_bytes(4, "big")
    data = (7).to_bytes(4, "big") + tags + bytes(4) + bytes(2) + (9).to_bytes(4, "big")
    data += topics + tags
    assert len(data) < 64
    response = _decode_response(FetchResponseDecoder, data, version)
    assert (response.error_code, response.session_id, response.partitions) == (0, 9, [])
