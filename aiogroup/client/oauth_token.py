"""OAUTHBEARER tokens and SASL session timing, sans-I/O: no clock, no asyncio.

Everything here takes the time (``now_ms``, wall-clock milliseconds since the epoch) and the
random draws (floats in ``[0, 1)``) as arguments; the asyncio driver
(:mod:`aiogroup.client.oauth`, :mod:`aiogroup.client.reauth`) reads the clock and sleeps.

When to fetch a new token follows the Java client's defaults for OAUTHBEARER logins
(``sasl.login.refresh.*``): at 80% of the token's lifetime plus up to 5% jitter, no sooner than
60 s after the refresh before it and keeping 300 s before expiry, both ignored when together
they do not fit in what is left of the lifetime (short-lived tokens then refresh at 80-85%).
A failed fetch is retried after 100 ms, doubling up to 10 s (``sasl.login.retry.backoff.*``).

When to re-authenticate a connection (KIP-368): once the broker's SaslAuthenticate answer gives a
session lifetime, at 85-95% of it, as the Java client does.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiogroup.errors import ConfigurationError

__all__ = [
    "OAuthToken",
    "RefreshPolicy",
    "client_first_message",
    "jwt_times",
    "needs_fetch",
    "reauthentication_delay_ms",
    "refresh_at_ms",
    "resolve",
    "retry_backoff_ms",
]


@dataclass(frozen=True)
class OAuthToken:
    """A bearer token for SASL/OAUTHBEARER, as a token provider returns it.

    ``value``: the token (for Kafka's default validators a JWT). ``expires_at_ms``: when it
    expires, wall-clock milliseconds since the epoch; or ``lifetime_ms``: how long it is valid
    from the moment the provider returned it (give one or neither). Neither: read from the
    token's ``exp`` claim when it is a JWT, else unknown (the provider is then called for every
    authentication). ``extensions``: SASL extensions sent with the token (RFC 7628 section 3.1,
    KIP-342), e.g. ``{"logicalCluster": "lkc-123"}``.
    """

    value: str
    expires_at_ms: int | None = None
    lifetime_ms: int | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.value, str):
            raise ConfigurationError(f"OAuthToken.value must be a str, not {type(self.value)}")
        problem = token_problem(self.value) or extensions_problem(self.extensions)
        if problem:
            raise ConfigurationError(problem)
        if self.expires_at_ms is not None and self.lifetime_ms is not None:
            raise ConfigurationError("OAuthToken takes expires_at_ms or lifetime_ms, not both")
        if self.lifetime_ms is not None and self.lifetime_ms <= 0:
            raise ConfigurationError(f"OAuthToken.lifetime_ms must be > 0, not {self.lifetime_ms}")

    def __repr__(self) -> str:  # never print the secret
        return (
            f"OAuthToken(value=<{len(self.value)} chars>, expires_at_ms={self.expires_at_ms}, "
            f"lifetime_ms={self.lifetime_ms}, extensions={dict(self.extensions)!r})"
        )


@dataclass(frozen=True)
class Resolved:
    """A token with its times settled: ``issued_ms`` (the JWT's ``iat``, else when it was
    received) and ``expires_ms`` (None: unknown)."""

    value: str
    issued_ms: int
    expires_ms: int | None
    extensions: Mapping[str, str]

    def valid_at(self, now_ms: int) -> bool:
        return self.expires_ms is None or now_ms < self.expires_ms


#: RFC 6750's b64token: what a bearer token may hold.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: RFC 7628 section 3.1: extension keys are letters; values printable ASCII, space, tab, CR LF.
_EXT_KEY = re.compile(r"[A-Za-z]+")
_EXT_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")


def token_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as a bearer token (None: it can)."""
    if not value:
        return "the OAuth token is empty"
    if not _B64TOKEN.fullmatch(value):
        return "the OAuth token holds characters a bearer token cannot (RFC 6750 b64token)"
    return None


def extensions_problem(extensions: Mapping[str, str]) -> str | None:
    """Why ``extensions`` cannot be sent (None: they can)."""
    for key, value in extensions.items():
        if not isinstance(key, str) or not _EXT_KEY.fullmatch(key) or key == "auth":
            return f"SASL extension name {key!r}: letters only, and not 'auth' (RFC 7628)"
        if not isinstance(value, str) or not _EXT_VALUE.fullmatch(value):
            return f"SASL extension {key!r}: the value must be printable ASCII (RFC 7628)"
    return None


def jwt_times(value: str) -> tuple[int | None, int | None]:
    """``(iat, exp)`` of a JWT in milliseconds (None where absent), read without checking the
    signature; ``(None, None)`` when ``value`` is no JWT. NumericDate may be fractional."""
    parts = value.split(".")
    if len(parts) != 3:
        return None, None
    try:
        payload = parts[1] + "=" * (-len(parts[1]) % 4)
        claims: Any = json.loads(base64.urlsafe_b64decode(payload))
    except (ValueError, binascii.Error):
        return None, None
    if not isinstance(claims, dict):
        return None, None

    def ms(name: str) -> int | None:
        seconds = claims.get(name)
        if isinstance(seconds, bool) or not isinstance(seconds, int | float):
            return None
        return round(seconds * 1000)

    return ms("iat"), ms("exp")


def resolve(token: OAuthToken | str, now_ms: int) -> Resolved:
    """``token`` (what a provider returned at ``now_ms``) with its times settled.

    Raises :class:`ConfigurationError` for something that is no token."""
    if isinstance(token, str):
        token = OAuthToken(token)
    elif not isinstance(token, OAuthToken):
        raise ConfigurationError(
            f"a token provider must return a str or an aiogroup.OAuthToken, not {type(token)}"
        )
    issued, expires = jwt_times(token.value)
    if token.expires_at_ms is not None:
        expires = int(token.expires_at_ms)
    elif token.lifetime_ms is not None:
        expires = now_ms + int(token.lifetime_ms)
    if issued is None or issued > now_ms:
        issued = now_ms
    return Resolved(token.value, issued, expires, dict(token.extensions))


@dataclass(frozen=True)
class RefreshPolicy:
    """When a token is fetched again; the Java client's defaults (``sasl.login.refresh.*``,
    ``sasl.login.retry.backoff.*``)."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_ms: int = 60_000
    buffer_ms: int = 300_000
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000

    def __post_init__(self) -> None:
        if not 0.5 <= self.window_factor <= 1.0:
            raise ConfigurationError("window_factor must be within 0.5-1.0")
        if not 0 <= self.window_jitter <= 0.25:
            raise ConfigurationError("window_jitter must be within 0-0.25")
        if self.min_period_ms < 0 or self.buffer_ms < 0:
            raise ConfigurationError("min_period_ms and buffer_ms must be >= 0")
        if not 0 < self.retry_backoff_ms <= self.retry_backoff_max_ms:
            raise ConfigurationError("need 0 < retry_backoff_ms <= retry_backoff_max_ms")


def refresh_at_ms(
    token: Resolved, now_ms: int, draw: float, policy: RefreshPolicy = RefreshPolicy()
) -> int | None:
    """When to fetch the next token after ``token`` was received at ``now_ms`` (None: never,
    its expiry is unknown). ``draw`` in [0, 1) picks the jitter."""
    if token.expires_ms is None:
        return None
    if token.expires_ms <= now_ms:
        return now_ms
    lifetime = token.expires_ms - token.issued_ms
    when = token.issued_ms + round(lifetime * (policy.window_factor + policy.window_jitter * draw))
    remaining = token.expires_ms - now_ms
    if policy.min_period_ms + policy.buffer_ms <= remaining:
        when = min(when, token.expires_ms - policy.buffer_ms)
        when = max(when, now_ms + policy.min_period_ms)
    return min(max(when, now_ms), token.expires_ms)


def retry_backoff_ms(attempt: int, draw: float, policy: RefreshPolicy = RefreshPolicy()) -> int:
    """How long to wait before retry number ``attempt`` (0: the first) of a failed fetch:
    exponential from ``retry_backoff_ms`` to ``retry_backoff_max_ms``, ±20% jitter."""
    base = min(policy.retry_backoff_ms << min(attempt, 30), policy.retry_backoff_max_ms)
    return max(1, round(base * (0.8 + 0.4 * draw)))


#: KIP-368 as the Java client applies it: re-authenticate at 85-95% of the session lifetime.
REAUTH_WINDOW = (0.85, 0.95)
#: Kafka's broker treats a SaslHandshake less than 1 s after the previous re-authentication
#: began as an ordinary request (refused with ILLEGAL_SASL_STATE), not as a re-authentication.
MIN_REAUTH_INTERVAL_MS = 1_000
#: A token is not presented with less than this left (a fresh one is fetched first): the
#: session it gives must leave room for the next re-authentication after the 1 s minimum.
MIN_TOKEN_REMAINING_MS = 1_500


def reauthentication_delay_ms(session_lifetime_ms: int, draw: float) -> int | None:
    """How long after authenticating to re-authenticate a connection whose broker gave
    ``session_lifetime_ms`` (None: 0 or less, the broker does not ask for it): 85-95% of it,
    and no sooner than the broker's 1 s minimum when the session is longer than that."""
    if session_lifetime_ms <= 0:
        return None
    low, high = REAUTH_WINDOW
    delay = max(1, round(session_lifetime_ms * (low + (high - low) * draw)))
    if session_lifetime_ms > MIN_REAUTH_INTERVAL_MS:
        delay = max(delay, MIN_REAUTH_INTERVAL_MS)
    return delay


def needs_fetch(token: Resolved | None, refresh_due_ms: int | None, now_ms: int) -> bool:
    """Whether an authentication at ``now_ms`` should fetch a token before presenting one:
    there is none, its expiry is unknown (the provider is asked every time), its refresh is
    due, or it has less than :data:`MIN_TOKEN_REMAINING_MS` left."""
    if token is None or token.expires_ms is None:
        return True
    if refresh_due_ms is not None and now_ms >= refresh_due_ms:
        return True
    return token.expires_ms - now_ms < MIN_TOKEN_REMAINING_MS


def client_first_message(token: str, extensions: Mapping[str, str]) -> bytes:
    """The OAUTHBEARER client's initial response (RFC 7628 section 3.1): the GS2 header
    ``n,,``, ``auth=Bearer <token>`` and the extensions as ``key=value``, each followed by
    ``\x01``, and a final ``\x01``."""
    fields = [f"auth=Bearer {token}", *(f"{k}={v}" for k, v in extensions.items())]
    return ("n,," + "".join(f"\x01{f}" for f in fields) + "\x01\x01").encode()


#: What the client answers to the server's error challenge (RFC 7628 section 3.2.3): a lone
#: ``\x01``, after which the server fails the exchange and says why.
ERROR_ACK = b"\x01"
