"""Unsecured OAUTHBEARER tokens for tests: what Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` accepts, and the embedded broker's
:class:`~aiogroup.testing.sasl.OAuthBearerServer`.

An unsecured JWS is ``base64url(header) "." base64url(claims) "."``: header ``{"alg":"none"}``,
claims ``sub`` (the principal), ``iat`` and ``exp`` (seconds since the epoch, fractions allowed),
no signature. Never use one against a production broker; they prove nothing about who you are.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field

from aiogroup.client.oauth_token import OAuthToken

__all__ = ["UnsecuredTokens", "unsecured_jws"]


def _b64(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unsecured_jws(
    subject: str, *, lifetime_ms: int | None, issued_at_ms: int | None = None
) -> str:
    """An unsigned JWT for ``subject`` valid ``lifetime_ms`` from ``issued_at_ms`` (now).
    ``lifetime_ms=None`` leaves out ``exp``, which Kafka's validator refuses (for tests of a
    refusal)."""
    issued = time.time() * 1000 if issued_at_ms is None else issued_at_ms
    claims: dict[str, object] = {"sub": subject, "iat": round(issued / 1000, 3)}
    if lifetime_ms is not None:
        claims["exp"] = round((issued + lifetime_ms) / 1000, 3)
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


@dataclass
class UnsecuredTokens:
    """A sync token provider handing out :func:`unsecured_jws` tokens of ``lifetime_ms``,
    counting its calls (``calls``) and keeping every token it made (``issued``, with expiry).
    Call it from any thread (aiogroup runs a sync provider in a worker thread)."""

    subject: str = "alice"
    lifetime_ms: int = 60_000
    calls: int = 0
    issued: list[OAuthToken] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __call__(self) -> OAuthToken:
        now = int(time.time() * 1000)
        token = OAuthToken(
            unsecured_jws(self.subject, lifetime_ms=self.lifetime_ms, issued_at_ms=now),
            expires_at_ms=now + self.lifetime_ms,
        )
        with self._lock:
            self.calls += 1
            self.issued.append(token)
        return token
