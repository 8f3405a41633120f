"""KIP-227 fetch sessions, client side (sans-I/O)."""

from __future__ import annotations

from aiogroup.consumer.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    FetchSession,
    PartitionFetch,
)
from aiogroup.protocol.types import TopicPartition

A, B, C = (TopicPartition("t", i) for i in range(3))


def f(offset: int, epoch: int = 0) -> PartitionFetch:
    return PartitionFetch(offset, 1 << 20, epoch)


def test_first_request_is_full_and_asks_for_a_session() -> None:
    s = FetchSession()
    r = s.build({A: f(0), B: f(0)})
    assert (r.session_id, r.epoch, r.full) == (0, 0, True)
    assert r.to_send == {A: f(0), B: f(0)} and r.forgotten == ()
    s.on_response(r, 0, 42)
    assert s.established and (s.session_id, s.epoch) == (42, 1)


def test_incremental_requests_send_only_changes_and_forget_the_rest() -> None:
    s = FetchSession()
    s.on_response(s.build({A: f(0), B: f(0), C: f(5)}), 0, 42)
    r = s.build({A: f(10), B: f(0)})  # A moved, B unchanged, C not wanted any more
    assert (r.session_id, r.epoch, r.full) == (42, 1, False)
    assert r.to_send == {A: f(10)} and r.forgotten == (C,)
    assert dict(r.fetching) == {A: f(10), B: f(0)}
    s.on_response(r, 0, 42)
    assert s.epoch == 2 and s.partitions == {A: f(10), B: f(0)}
    r = s.build({A: f(10), B: f(0, epoch=3)})  # a new leader epoch is a change too
    assert r.to_send == {B: f(0, epoch=3)} and r.forgotten == ()


def test_no_session_from_the_broker_means_full_requests() -> None:
    s = FetchSession()
    for _ in range(3):
        r = s.build({A: f(0)})
        assert r.full and (r.session_id, r.epoch) == (0, 0)
        s.on_response(r, 0, 0)
        assert not s.established


def test_session_errors_start_over() -> None:
    for code in (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH):
        s = FetchSession()
        s.on_response(s.build({A: f(0)}), 0, 42)
        r = s.build({A: f(1)})
        s.on_response(r, code, 0)
        r = s.build({A: f(1)})
        assert r.full and (r.session_id, r.epoch) == (0, 0)


def test_a_failure_closes_the_old_session_and_opens_a_new_one() -> None:
    s = FetchSession()
    s.on_response(s.build({A: f(0)}), 0, 42)
    s.build({A: f(1)})
    s.on_failure()
    r = s.build({A: f(1)})
    assert r.full and (r.session_id, r.epoch) == (42, 0) and r.to_send == {A: f(1)}
    s.on_response(r, 0, 43)
    assert (s.session_id, s.epoch) == (43, 1)


def test_other_errors_and_a_changed_session_id_reset() -> None:
    s = FetchSession()
    s.on_response(s.build({A: f(0)}), 0, 42)
    s.on_response(s.build({A: f(1)}), 0, 7)  # the broker answers for another session
    assert not s.established and s.session_id == 0
    s.on_response(s.build({A: f(1)}), 0, 42)
    s.on_response(s.build({A: f(2)}), 3, 42)  # an unexpected top-level error
    r = s.build({A: f(2)})
    assert r.full and r.session_id == 42 and r.epoch == 0


def test_epoch_wraps_to_one() -> None:
    s = FetchSession()
    s.on_response(s.build({A: f(0)}), 0, 42)
    s.epoch = 2**31 - 1
    s.on_response(s.build({A: f(1)}), 0, 42)
    assert s.epoch == 1
