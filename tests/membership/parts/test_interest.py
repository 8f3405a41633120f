"""Interest on its own: the subscription, the metadata view and the missing-topic backoff."""

from __future__ import annotations

import logging
import re
from typing import cast

import pytest

from aiogroup.errors import LocalProtocolError
from aiogroup.membership.interest import Interest


def interest(backoff_ms: int = 100, max_ms: int = 1_000) -> Interest:
    return Interest(group_id="g", retry_backoff_ms=backoff_ms, retry_backoff_max_ms=max_ms)


def test_a_list_subscription() -> None:
    i = interest()
    assert not i.has_subscription and i.subscribed == frozenset()
    i.subscribe(topics=frozenset({"a", "b"}))
    assert i.has_subscription and i.subscribed == {"a", "b"}
    assert not i.awaits_pattern_metadata
    assert i.wanted(["c"], ["d"]) == {"a", "b", "c", "d"}
    i.unsubscribe()
    assert not i.has_subscription


def test_a_regex_subscription_matches_the_metadata() -> None:
    i = interest()
    i.subscribe(pattern=re.compile(r"orders-.*"))
    assert i.awaits_pattern_metadata and i.subscribed == frozenset()
    assert i.wanted(["x"]) is None  # all topics
    i.update({"orders-eu": 3, "orders": 1, "orders-us": 2})
    assert not i.awaits_pattern_metadata
    assert i.subscribed == {"orders-eu", "orders-us"}  # fullmatch
    i.subscribe(pattern=re.compile(r"orders"))
    assert i.awaits_pattern_metadata  # a new pattern waits for fresh metadata


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"topics": frozenset({"a"}), "pattern": re.compile("a")},
        {"topics": "orders"},
        {"topics": frozenset({""})},
    ],
)
def test_misuse(kw: dict[str, object]) -> None:
    with pytest.raises(LocalProtocolError):
        interest().subscribe(**kw)  # type: ignore[arg-type]


def test_bad_metadata() -> None:
    with pytest.raises(LocalProtocolError):
        interest().update(cast("dict[str, int]", {"a": "many"}))  # a count that is not one


def test_missing_topics_back_off_exponentially_and_warn_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="aiogroup.membership")
    i = interest(backoff_ms=100, max_ms=1_000)
    i.subscribe(topics=frozenset({"t", "late"}))
    now, delays = 0.0, []
    for _ in range(6):
        i.update({"t": 1})
        i.track_missing(now, i.wanted([]))
        assert i.refresh_at is not None and not i.refresh_due(i.refresh_at - 0.01)
        delays.append(round(i.refresh_at - now, 3))
        now = i.refresh_at
        assert i.refresh_due(now) and i.refresh_at is None
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert i.missing == {"late"} and caplog.text.count("'late' does not exist") == 1
    i.update({"t": 1, "late": 2})
    i.track_missing(now, i.wanted([]))
    assert i.missing == frozenset() and i.refresh_at is None
    i.update({"t": 1})
    i.track_missing(now, i.wanted([]))
    assert i.refresh_at == pytest.approx(now + 0.1)  # starts over
    assert caplog.text.count("'late' does not exist") == 2


def test_missing_topics_not_subscribed_are_refreshed_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    i = interest()
    i.subscribe(topics=frozenset({"t"}))
    i.update({"t": 1})
    i.track_missing(0.0, i.wanted([], ["other"]))  # a leader asks for the group's topics
    assert i.missing == {"other"} and i.refresh_at == 0.1
    assert "does not exist" not in caplog.text
    i.track_missing(0.0, None)  # a regex asks for every topic: nothing is missing
    assert i.missing == frozenset() and i.refresh_at is None
