"""The OAUTHBEARER token source: calls the user's token provider and refreshes before expiry.

``sasl_oauth_token_provider`` may be

- a callable, sync or async, returning a ``str`` or an :class:`~aiogroup.OAuthToken`
  (a sync one runs in a worker thread: a provider that does blocking HTTP never stalls the
  event loop);
- an object with a ``token()`` method, sync or async (aiokafka's
  :class:`~aiokafka.abc.AbstractTokenProvider`), and optionally ``extensions()``.

:class:`TokenSource` wraps it. It keeps the current token, hands it to every authentication
(connects and KIP-368 re-authentications) and, when the token's expiry is known, fetches the next
one in the background at the time :func:`~aiogroup.client.oauth_token.refresh_at_ms` gives. A
failed refresh is logged and retried with backoff while the current token is still valid; once
it has expired, an authentication calls the provider itself and raises
:class:`~aiogroup.errors.OAuthTokenError` if that fails. A token whose expiry is unknown is
fetched again for every authentication (aiokafka's behaviour).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiokafka.abc import AbstractTokenProvider

from aiogroup.client.oauth_token import (
    OAuthToken,
    RefreshPolicy,
    Resolved,
    needs_fetch,
    refresh_at_ms,
    resolve,
    retry_backoff_ms,
)
from aiogroup.errors import ConfigurationError, OAuthTokenError

__all__ = ["TokenSource", "TokenStats", "token_source"]

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TokenStats:
    """What the token source did: ``provider_calls`` (every call, failed or not), ``refreshes``
    (background fetches that succeeded), ``failures`` and the ``last_error``."""

    provider_calls: int = 0
    refreshes: int = 0
    failures: int = 0
    last_error: OAuthTokenError | None = None


class TokenSource(AbstractTokenProvider):  # type: ignore[misc]  # aiokafka is untyped
    """What aiokafka's connections call for a token (an ``AbstractTokenProvider``)."""

    def __init__(
        self,
        provider: Any,
        *,
        policy: RefreshPolicy | None = None,
        clock: Callable[[], int] = _now_ms,
        rng: random.Random | None = None,
    ) -> None:
        self._call = _caller(provider)
        self.provider = provider
        self.policy = policy or RefreshPolicy()
        self._clock = clock
        self._rng = rng or random.Random()
        self._current: Resolved | None = None
        #: When the current token is to be replaced (None: never, its expiry is unknown).
        self._refresh_due_ms: int | None = None
        self._lock: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self.stats = TokenStats()

    # ------------------------------------------------------------------ aiokafka's interface

    async def token(self) -> str:
        """The token for an authentication: the current one, or a fresh one when there is
        none, its expiry is unknown, its refresh is due or it has less than 1.5 s left
        (:func:`~aiogroup.client.oauth_token.needs_fetch`). If that fetch fails the current
        token is still used while valid; else raises :class:`OAuthTokenError`."""
        current = self._current
        if needs_fetch(current, self._refresh_due_ms, self._clock()):
            try:
                current = await self._fetch(reason="needed for an authentication")
            except OAuthTokenError as exc:
                if current is None or not current.valid_at(self._clock()):
                    raise
                log.warning("fetching a fresh OAuth token failed, using the current one: %s", exc)
        assert current is not None
        self._start_refresher()
        return current.value

    def extensions(self) -> dict[str, str]:
        """The SASL extensions of the current token (aiokafka asks right after ``token()``)."""
        return dict(self._current.extensions) if self._current is not None else {}

    # ------------------------------------------------------------------ lifecycle

    async def close(self) -> None:
        """Stop refreshing (the transport closes it)."""
        task, self._task = self._task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def expires_ms(self) -> int | None:
        """When the current token expires (None: none yet, or unknown)."""
        return None if self._current is None else self._current.expires_ms

    # ------------------------------------------------------------------ the work

    async def _fetch(self, *, reason: str) -> Resolved:
        if self._lock is None:
            self._lock = asyncio.Lock()
        started = self._current
        async with self._lock:
            if self._current is not started and self._current is not None:
                return self._current  # another caller fetched while we waited
            self.stats.provider_calls += 1
            try:
                raw = await self._call()
                now = self._clock()
                fresh = resolve(raw, now)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                error = _token_error(exc, reason)
                self.stats.failures += 1
                self.stats.last_error = error
                raise error from exc
            if not fresh.valid_at(now):
                error = OAuthTokenError(
                    f"the OAuth token provider returned a token that expired at "
                    f"{fresh.expires_ms} ms, before now ({now} ms); {reason}"
                )
                self.stats.failures += 1
                self.stats.last_error = error
                raise error
            self._current = fresh
            self._refresh_due_ms = refresh_at_ms(fresh, now, self._rng.random(), self.policy)
            log.debug("OAuth token fetched (%s), expires at %s", reason, fresh.expires_ms)
            return fresh

    def _start_refresher(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._refresh_loop(), name="aiogroup-oauth-refresh"
            )

    async def _refresh_loop(self) -> None:
        attempt = 0
        while True:
            current = self._current
            if current is None or current.expires_ms is None:
                return
            now = self._clock()
            if attempt == 0:
                if self._refresh_due_ms is None:
                    return
                wait_ms = self._refresh_due_ms - now
            else:
                wait_ms = retry_backoff_ms(attempt - 1, self._rng.random(), self.policy)
            await asyncio.sleep(max(wait_ms, 0) / 1000)  # the timer: the driver's job
            if self._current is not current:  # an authentication fetched one meanwhile
                attempt = 0
                continue
            try:
                await self._fetch(reason="a scheduled refresh")
            except OAuthTokenError as exc:
                attempt += 1
                still = self._current is not None and self._current.valid_at(self._clock())
                log.warning(
                    "refreshing the OAuth token failed (attempt %d); %s: %s",
                    attempt,
                    "the current token is still valid, retrying"
                    if still
                    else "the current token has expired, retrying",
                    exc,
                )
                continue
            attempt = 0
            self.stats.refreshes += 1


def _token_error(exc: BaseException, reason: str) -> OAuthTokenError:
    if isinstance(exc, OAuthTokenError):
        return exc
    if isinstance(exc, ConfigurationError):
        return OAuthTokenError(f"the OAuth token provider returned no usable token: {exc}")
    return OAuthTokenError(f"the OAuth token provider failed ({reason}): {exc!r}")


def _caller(provider: Any) -> Callable[[], Any]:
    """A coroutine function calling ``provider`` the way its shape asks for."""
    method = getattr(provider, "token", None)
    if callable(method):
        has_extensions = callable(getattr(provider, "extensions", None))

        async def from_object() -> Any:
            value = await _invoke(method)
            if has_extensions and isinstance(value, str):
                extensions = provider.extensions()
                if inspect.isawaitable(extensions):
                    extensions = await extensions
                return OAuthToken(value, extensions=dict(extensions or {}))
            return value

        return from_object
    if callable(provider):
        return lambda: _invoke(provider)
    raise ConfigurationError(
        "sasl_oauth_token_provider must be a callable (sync or async) returning a str or an "
        "aiogroup.OAuthToken, or an object with a token() method (aiokafka's "
        f"AbstractTokenProvider), not {type(provider)}"
    )


async def _invoke(function: Callable[[], Any]) -> Any:
    """Call ``function``: a coroutine function on the loop, anything else in a thread."""
    if inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - an object with an async __call__
    ):
        return await function()
    value = await asyncio.to_thread(function)
    if inspect.isawaitable(value):
        value = await value
    return value


def token_source(provider: Any) -> TokenSource:
    """The :class:`TokenSource` for ``sasl_oauth_token_provider`` (one given as it is kept)."""
    return provider if isinstance(provider, TokenSource) else TokenSource(provider)
