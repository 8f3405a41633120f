"""KIP-896: the request versions Kafka 4.0 removed, refused alike by live Kafka 4.1.1 and the
embedded broker's ``kafka4`` flavour; the version tables of ``aiogroup.testing.wire`` checked
against the live brokers' ApiVersions answers.

A removed version is not advertised, and a request in it closes the connection without an
answer (4.1.1 logs ``UnsupportedVersionException ... Closing socket``); the same API one
version up is answered. An ApiVersions version the broker does not know is answered
UNSUPPORTED_VERSION in a v0 answer that lists what it serves (KIP-511), and the connection
stays open. Kafka 3.9.1 still serves every removed version; the ``kafka3`` flavour serves none
of them (the embedded broker does not speak them), which ``test_kafka3_flavour_lacks_...``
states.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from aiogroup.testing import wire
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import session_kafka
from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KAFKA39_VERSION

pytestmark = [pytest.mark.timeout(300), pytest.mark.every_broker]

UNSUPPORTED_VERSION = 35

#: A request body per API that has removed versions (any version encodes it; the broker
#: decides by the header's version before it reads the body).
BODIES: dict[str, dict[str, Any]] = {
    "Fetch": {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1000,
        "topics": [
            {
                "topic": "kip896",
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}],
            }
        ],
    },
    "ListOffsets": {
        "replica_id": -1,
        "topics": [
            {
                "name": "kip896",
                "partitions": [{"partition_index": 0, "timestamp": -1, "max_num_offsets": 1}],
            }
        ],
    },
    "OffsetCommit": {
        "group_id": "kip896",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "topics": [
            {
                "name": "kip896",
                "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}
                ],
            }
        ],
    },
    "OffsetFetch": {
        "group_id": "kip896",
        "topics": [{"name": "kip896", "partition_indexes": [0]}],
    },
    "CreateTopics": {"topics": [], "timeout_ms": 1000, "validate_only": False},
    "DeleteTopics": {"topic_names": [], "timeout_ms": 1000},
}

REMOVED = [
    (wire.API_NAMES[key], version)
    for key, (lo, hi) in sorted(wire.KIP_896_REMOVED.items())
    for version in range(lo, hi + 1)
]


@pytest.fixture(scope="module")
def embedded_kafka4() -> Iterator[str]:
    with ThreadedBroker(coordinator_config=CoordinatorConfig(flavour="kafka4")) as broker:
        yield broker.bootstrap


def _bootstrap(request: pytest.FixtureRequest, broker: str) -> str:
    if broker == "embedded-kafka4":
        return str(request.getfixturevalue("embedded_kafka4"))
    return session_kafka(request.config, KAFKA4_VERSION).bootstrap


BROKERS = [
    pytest.param("kafka4", marks=pytest.mark.kafka4, id="kafka4"),
    pytest.param("embedded-kafka4", id="embedded-kafka4"),
]


@contextlib.contextmanager
def _connect(bootstrap: str) -> Iterator[socket.socket]:
    host, _, port = bootstrap.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        yield sock


def _advertised(bootstrap: str) -> dict[int, tuple[int, int]]:
    with _connect(bootstrap) as sock:
        answer = wire.blocking_request(sock, "ApiVersions", 0, {})
    assert answer.error_code == 0
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}


def _closes(bootstrap: str, api: str, version: int) -> bool:
    """Whether the broker closes the connection on ``api`` at ``version`` without answering."""
    frame = wire.encode_request(wire.API_KEYS_BY_NAME[api], version, BODIES[api], correlation_id=7)
    with _connect(bootstrap) as sock:
        sock.sendall(frame)
        try:
            wire.recv_exactly(sock, 4)
        except ConnectionError:
            return True
    return False


@pytest.mark.parametrize(("api", "version"), REMOVED, ids=[f"{a}-v{v}" for a, v in REMOVED])
@pytest.mark.parametrize("broker", BROKERS)
def test_kafka4_refuses_the_versions_kip896_removed(
    request: pytest.FixtureRequest, broker: str, api: str, version: int
) -> None:
    bootstrap = _bootstrap(request, broker)
    key = wire.API_KEYS_BY_NAME[api]
    lowest, _ = _advertised(bootstrap)[key]
    assert lowest == wire.KIP_896_REMOVED[key][1] + 1  # not advertised; the next one is
    assert _closes(bootstrap, api, version)
    assert not _closes(bootstrap, api, lowest)  # the API itself is served


@pytest.mark.parametrize("broker", BROKERS)
def test_kafka4_answers_an_unknown_api_versions_version(
    request: pytest.FixtureRequest, broker: str
) -> None:
    # Written as a newer client writes it: a flexible (v2) header (see tests/security).
    bootstrap = _bootstrap(request, broker)
    body = {"client_software_name": "aiogroup", "client_software_version": "1"}
    frame = wire.encode_request(18, 3, body, correlation_id=1)
    with _connect(bootstrap) as sock:
        sock.sendall(frame[:6] + (99).to_bytes(2, "big") + frame[8:])
        size = wire.frame_size(wire.recv_exactly(sock, 4))
        answer = wire.decode_response(18, 0, wire.recv_exactly(sock, size))
        assert answer.error_code == UNSUPPORTED_VERSION
        listed = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in answer.api_keys}
        assert listed == {18: wire.KAFKA_41_VERSIONS[18]}
        again = wire.blocking_request(sock, "ApiVersions", 0, {}, correlation_id=2)
        assert again.error_code == 0


@pytest.mark.parametrize("broker", BROKERS)
def test_kafka4_flavour_serves_what_4_1_1_serves(
    request: pytest.FixtureRequest, broker: str
) -> None:
    """The live broker advertises ``wire.KAFKA_41_VERSIONS`` for the embedded broker's APIs;
    the flavour advertises ``versions_for("kafka4")``, each range inside 4.1.1's."""
    advertised = _advertised(_bootstrap(request, broker))
    if broker == "kafka4":
        assert {k: advertised[k] for k in wire.SUPPORTED_VERSIONS} == wire.KAFKA_41_VERSIONS
        return
    assert advertised == wire.versions_for("kafka4")
    for key, (lo, hi) in advertised.items():
        theirs = wire.KAFKA_41_VERSIONS[key]
        assert theirs[0] <= lo <= hi <= theirs[1], wire.API_NAMES[key]


@pytest.mark.kafka39
def test_kafka3_flavour_lacks_what_3_9_still_serves(request: pytest.FixtureRequest) -> None:
    """Kafka 3.9.1 advertises ``wire.KAFKA_39_VERSIONS`` (every version KIP-896 later removed
    included); the ``kafka3`` flavour serves 3.9.1's versions only where the embedded broker
    speaks them, which is none of the removed ones: a known gap, stated here."""
    live = session_kafka(request.config, KAFKA39_VERSION)
    advertised = _advertised(live.bootstrap)
    assert {k: advertised[k] for k in wire.SUPPORTED_VERSIONS} == wire.KAFKA_39_VERSIONS
    flavour = wire.versions_for("kafka3")
    for key, (lo, hi) in wire.KIP_896_REMOVED.items():
        assert advertised[key][0] <= lo and hi < flavour[key][0], wire.API_NAMES[key]
