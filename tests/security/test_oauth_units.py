"""OAUTHBEARER without a broker: the timing rules, the token type, the token source's calls,
refresh and failures, the client's messages. Kafka 4.1.1 runs them for real in
``test_oauth_kafka.py``."""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from typing import Any

import pytest
from aiokafka.abc import AbstractTokenProvider

from aiogroup import GroupMember, OAuthToken
from aiogroup.client.oauth import TokenSource
from aiogroup.client.oauth_token import (
    ERROR_ACK,
    RefreshPolicy,
    Resolved,
    client_first_message,
    jwt_times,
    needs_fetch,
    reauthentication_delay_ms,
    refresh_at_ms,
    resolve,
    retry_backoff_ms,
)
from aiogroup.client.reauth import OAuthBearerExchange
from aiogroup.errors import ConfigurationError, OAuthTokenError
from aiogroup.testing.oauth import UnsecuredTokens, unsecured_jws

HOUR = 3_600_000


def token(issued: int, expires: int | None) -> Resolved:
    return Resolved("t", issued, expires, {})


# ------------------------------------------------------------------ when to refresh


def test_an_hour_long_token_is_refreshed_at_80_to_85_percent() -> None:
    assert refresh_at_ms(token(0, HOUR), 0, 0.0) == 0.80 * HOUR
    assert refresh_at_ms(token(0, HOUR), 0, 0.999999) == round(0.85 * HOUR)


def test_the_buffer_and_the_minimum_period_bound_the_refresh() -> None:
    # 10 minutes: 80% would leave 2 min, under the 5 min buffer: at 5 min before expiry.
    assert refresh_at_ms(token(0, 600_000), 0, 0.0) == 300_000
    # 6 min left: the buffer would say "now", the 60 s minimum period says in 60 s.
    assert refresh_at_ms(token(0, 360_000), 0, 0.0) == 60_000


def test_short_tokens_ignore_buffer_and_minimum_period() -> None:
    # 4 s: 60 s + 300 s do not fit in what is left, so both are ignored (as in Java).
    assert refresh_at_ms(token(0, 4_000), 0, 0.0) == 3_200
    assert refresh_at_ms(token(0, 4_000), 0, 0.5) == 3_300


def test_unknown_or_past_expiry() -> None:
    assert refresh_at_ms(token(0, None), 0, 0.5) is None
    assert refresh_at_ms(token(0, 1_000), 5_000, 0.5) == 5_000


def test_the_retry_backoff_doubles_to_its_ceiling() -> None:
    assert [retry_backoff_ms(n, 0.5) for n in range(8)] == [
        100, 200, 400, 800, 1_600, 3_200, 6_400, 10_000,
    ]  # fmt: skip
    assert retry_backoff_ms(0, 0.0) == 80 and retry_backoff_ms(0, 0.999999) == 120
    with pytest.raises(ConfigurationError):
        RefreshPolicy(window_factor=0.3)


def test_reauthentication_comes_at_85_to_95_percent_of_the_session() -> None:
    assert reauthentication_delay_ms(3_000, 0.0) == 2_550
    assert reauthentication_delay_ms(3_000, 0.999999) == 2_850
    assert reauthentication_delay_ms(0, 0.5) is None
    assert reauthentication_delay_ms(-1, 0.5) is None
    # Never within the broker's 1 s minimum between re-authentications when there is room.
    assert reauthentication_delay_ms(1_100, 0.0) == 1_000
    assert reauthentication_delay_ms(800, 0.0) == 680


def test_when_an_authentication_fetches_first() -> None:
    assert needs_fetch(None, None, 0)
    assert needs_fetch(token(0, None), None, 0)  # unknown expiry: ask every time
    assert not needs_fetch(token(0, 10_000), 8_000, 7_999)
    assert needs_fetch(token(0, 10_000), 8_000, 8_000)  # refresh due
    assert needs_fetch(token(0, 10_000), 20_000, 8_600)  # under 1.5 s left


# ------------------------------------------------------------------ the token


def test_jwt_times_are_read_from_the_claims() -> None:
    jws = unsecured_jws("alice", lifetime_ms=4_000, issued_at_ms=1_700_000_000_123)
    assert jwt_times(jws) == (1_700_000_000_123, 1_700_000_004_123)
    assert jws.endswith(".") and jws.count(".") == 2
    assert jwt_times("opaque-token") == (None, None)
    assert jwt_times("a.!!!.c") == (None, None)


def test_resolve_settles_the_expiry() -> None:
    jws = unsecured_jws("alice", lifetime_ms=4_000, issued_at_ms=1_000_000)
    assert resolve(jws, 1_000_500) == Resolved(jws, 1_000_000, 1_004_000, {})
    assert resolve(OAuthToken("x", lifetime_ms=500), 7).expires_ms == 507
    assert resolve(OAuthToken("x", expires_at_ms=99), 7).expires_ms == 99
    assert resolve("opaque", 7) == Resolved("opaque", 7, None, {})
    with pytest.raises(ConfigurationError, match=r"must return a str or an aiogroup\.OAuthToken"):
        resolve(42, 7)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"value": ""}, "empty"),
        ({"value": "two words"}, "b64token"),
        ({"value": "x", "expires_at_ms": 1, "lifetime_ms": 1}, "not both"),
        ({"value": "x", "lifetime_ms": 0}, "lifetime_ms must be > 0"),
        ({"value": "x", "extensions": {"auth": "x"}}, "not 'auth'"),
        ({"value": "x", "extensions": {"k1": "x"}}, "letters only"),
        ({"value": "x", "extensions": {"k": "\x01"}}, "printable"),
    ],
)
def test_oauth_token_refuses_what_cannot_be_sent(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OAuthToken(**kwargs)


def test_the_token_never_shows_in_its_repr() -> None:
    assert "secret" not in repr(OAuthToken("secret", lifetime_ms=5))


def test_the_client_first_message_follows_rfc_7628() -> None:
    assert client_first_message("T0k", {}) == b"n,,\x01auth=Bearer T0k\x01\x01"
    assert (
        client_first_message("T", {"logicalCluster": "lkc-1", "b": "2"})
        == b"n,,\x01auth=Bearer T\x01logicalCluster=lkc-1\x01b=2\x01\x01"
    )


async def test_the_exchange_answers_the_brokers_error_challenge() -> None:
    exchange = OAuthBearerExchange(TokenSource(lambda: OAuthToken("T", extensions={"a": "b"})))
    assert await exchange.step(None) == (b"n,,\x01auth=Bearer T\x01a=b\x01\x01", True)
    assert await exchange.step(b'{"status":"invalid_token"}') == (ERROR_ACK, True)
    done = OAuthBearerExchange(TokenSource(lambda: "T"))
    await done.step(None)
    assert await done.step(b"") is None


# ------------------------------------------------------------------ the token source


async def test_a_sync_provider_runs_in_a_worker_thread() -> None:
    threads: list[int] = []

    def provider() -> str:
        threads.append(threading.get_ident())
        return "tok"

    source = TokenSource(provider)
    assert await source.token() == "tok"
    assert threads and threads[0] != threading.get_ident()
    await source.close()


async def test_async_providers_and_token_objects() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    async def coroutine() -> OAuthToken:
        seen.append(threading.get_ident())
        return OAuthToken("a1", lifetime_ms=HOUR)

    class Callable:
        async def __call__(self) -> str:
            return "a2"

    class Aiokafka(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return "a3"

        def extensions(self) -> dict[str, str]:
            return {"traceId": "xyz"}

    class SyncObject:
        def token(self) -> str:
            seen.append(threading.get_ident())
            return "a4"

    sources = [TokenSource(p) for p in (coroutine, Callable(), Aiokafka(), SyncObject())]
    assert [await s.token() for s in sources] == ["a1", "a2", "a3", "a4"]
    assert seen[0] == loop_thread and seen[1] != loop_thread
    assert sources[2].extensions() == {"traceId": "xyz"}
    assert sources[0].expires_ms is not None
    for s in sources:
        await s.close()


async def test_an_unusable_provider_is_refused_when_the_member_is_built() -> None:
    with pytest.raises(ConfigurationError, match="sasl_oauth_token_provider must be a callable"):
        GroupMember(
            "127.0.0.1:9",
            "g",
            topics=["t"],
            security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="OAUTHBEARER",
            sasl_oauth_token_provider=42,
        )


async def test_tokens_that_cannot_be_used_raise_oauth_token_error() -> None:
    for provider, message in [
        (lambda: 42, "no usable token"),
        (lambda: OAuthToken("x", expires_at_ms=1), "expired"),
        (lambda: 1 / 0, "ZeroDivisionError"),
    ]:
        source = TokenSource(provider)
        with pytest.raises(OAuthTokenError, match=message):
            await source.token()
        assert source.stats.failures == 1
        assert isinstance(source.stats.last_error, OAuthTokenError)


async def test_tokens_are_refreshed_in_the_background_before_they_expire() -> None:
    tokens = UnsecuredTokens("alice", lifetime_ms=500)
    source = TokenSource(tokens)
    await source.token()
    async with asyncio.timeout(10):
        while source.stats.refreshes < 3:  # each within 400-425 ms of the one before
            await asyncio.sleep(0.05)
    await source.close()
    for before, after in itertools.pairwise(tokens.issued):
        assert before.expires_at_ms is not None and after.expires_at_ms is not None
        assert after.expires_at_ms - 500 < before.expires_at_ms
    assert source.stats.failures == 0


async def test_refresh_failures_are_retried_while_the_token_is_valid(
    caplog: pytest.LogCaptureFixture,
) -> None:
    good = UnsecuredTokens("alice", lifetime_ms=3_000)
    calls = 0

    def provider() -> OAuthToken:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise ConnectionError("the identity provider is down")
        return good()

    source = TokenSource(provider)
    loop = asyncio.get_running_loop()
    started = loop.time()
    first = await source.token()
    caplog.set_level(logging.WARNING, logger="aiogroup.client.oauth")
    async with asyncio.timeout(10):
        while source.stats.failures < 2:  # refresh due at 2.4-2.55 s, retried after ~0.1 s
            await asyncio.sleep(0.05)
        assert loop.time() - started < 2.9
        assert await source.token() == first  # still valid: used, the failure logged
        while loop.time() - started < 3.1:  # the token's lifetime runs out
            await asyncio.sleep(0.05)
    with pytest.raises(OAuthTokenError, match="identity provider is down") as info:
        await source.token()
    assert isinstance(info.value.__cause__, ConnectionError)
    assert "refreshing the OAuth token failed" in caplog.text
    assert "still valid, retrying" in caplog.text
    await source.close()
