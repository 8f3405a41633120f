"""TLS and SASL at the transport boundary: option checks, and why a connection failed.

aiokafka owns the connections, TLS and SASL, but when one fails during bootstrap or on a later
connect it logs the cause and reports only "Unable to bootstrap" or "node not ready", which
would read as a retriable network problem. A wrong password or an untrusted certificate never
goes away by retrying, so on those failure paths :func:`diagnose` opens one connection with the
same settings, sees the real cause and turns it into an
:class:`~aiogroup.errors.AuthenticationError` that says what failed and which setting to change.
It costs nothing while connections succeed.

The rules follow the Java client: any failed TLS handshake is an SSL authentication failure
(``SslAuthenticationException``), and SASL errors come from the broker's error codes
(UNSUPPORTED_SASL_MECHANISM 33, ILLEGAL_SASL_STATE 34, SASL_AUTHENTICATION_FAILED 58, KIP-152).
Three refusals that the broker only shows by closing the connection are recognised too: a
plaintext client on a TLS listener (the port completes a TLS handshake), a client without a
certificate on a listener that requires one (a TLS 1.2 handshake without one is refused), and
a client without SASL on a SASL listener (the broker closes at the first request after
ApiVersions and answers a SaslHandshake with its mechanisms).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiogroup.errors import (
    AuthenticationError,
    ConfigurationError,
    IllegalSaslStateError,
    SaslAuthenticationError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
)

__all__ = [
    "SECURITY_PROTOCOLS",
    "SecurityOptions",
    "diagnose",
    "security_options",
    "uses_sasl",
    "uses_tls",
]

log = logging.getLogger(__name__)

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def uses_tls(protocol: str) -> bool:
    """Whether ``security_protocol`` runs over TLS (SSL, SASL_SSL)."""
    return protocol in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    """Whether ``security_protocol`` authenticates with SASL (SASL_PLAINTEXT, SASL_SSL)."""
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")


SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
#: Mechanisms that need ``sasl_plain_username`` and ``sasl_plain_password``.
_PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: aiokafka's connection options that concern security (they go to every connection).
_CONNECTION_KEYS = (
    "security_protocol",
    "ssl_context",
    "sasl_mechanism",
    "sasl_plain_username",
    "sasl_plain_password",
    "sasl_kerberos_service_name",
    "sasl_kerberos_domain_name",
    "sasl_oauth_token_provider",
)


@dataclass(frozen=True)
class SecurityOptions:
    """The security settings of one client, as aiokafka takes them."""

    options: Mapping[str, Any]

    @property
    def protocol(self) -> str:
        return str(self.options.get("security_protocol", "PLAINTEXT"))

    @property
    def tls(self) -> bool:
        return uses_tls(self.protocol)

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.protocol)

    @property
    def mechanism(self) -> str:
        return str(self.options.get("sasl_mechanism", "PLAIN"))

    @property
    def who(self) -> str:
        """``'alice' with SCRAM-SHA-256`` (or the mechanism alone when it has no user name)."""
        user = self.options.get("sasl_plain_username")
        return f"{user!r} with {self.mechanism}" if user is not None else self.mechanism


def security_options(client_options: dict[str, Any]) -> SecurityOptions:
    """Check the security options among ``client_options`` (updated in place) and keep them.

    Refuses, as :class:`ConfigurationError`, what aiokafka would refuse with ``ValueError`` or
    fail on later (a SCRAM mechanism without a password). ``security_protocol`` SSL or SASL_SSL
    without ``ssl_context`` gets ``ssl.create_default_context()``: the system's CAs and
    hostname verification, as the Java client and librdkafka do by default.
    """
    protocol = client_options.get("security_protocol", "PLAINTEXT")
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigurationError(
            f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not {protocol!r}"
        )
    context = client_options.get("ssl_context")
    if context is not None and not isinstance(context, ssl.SSLContext):
        raise ConfigurationError(f"ssl_context must be an ssl.SSLContext, not {type(context)}")
    if uses_tls(protocol) and context is None:
        client_options["ssl_context"] = ssl.create_default_context()
    if uses_sasl(protocol):
        mechanism = client_options.get("sasl_mechanism", "PLAIN")
        if mechanism not in SASL_MECHANISMS:
            raise ConfigurationError(
                f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {mechanism!r}"
            )
        if mechanism in _PASSWORD_MECHANISMS:
            for key in ("sasl_plain_username", "sasl_plain_password"):
                if not isinstance(client_options.get(key), str):
                    raise ConfigurationError(f"sasl_mechanism {mechanism} needs {key} (a str)")
        elif mechanism == "OAUTHBEARER":
            provider = client_options.get("sasl_oauth_token_provider")
            if provider is None:
                raise ConfigurationError(
                    "sasl_mechanism OAUTHBEARER needs sasl_oauth_token_provider"
                )
            from aiogroup.client.oauth import token_source

            # A callable (sync or async) or an object with token(): refreshed before expiry.
            client_options["sasl_oauth_token_provider"] = token_source(provider)
        elif mechanism == "GSSAPI" and importlib.util.find_spec("gssapi") is None:
            raise ConfigurationError("sasl_mechanism GSSAPI needs the gssapi package")
    return SecurityOptions({k: client_options[k] for k in _CONNECTION_KEYS if k in client_options})


def _message(exc: BaseException) -> str:
    """The broker's or library's words, without aiokafka's ``[Error N] Name:`` prefix."""
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return ""


def classify(
    exc: BaseException, security: SecurityOptions, where: str
) -> AuthenticationError | None:
    """The authentication failure ``exc`` (raised while connecting to ``where``) shows, if any."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = getattr(exc, "verify_message", None) or exc.strerror or str(exc)
        return SslAuthenticationError(
            f"TLS handshake with {where} failed: certificate verify failed: {reason} (the "
            "broker's certificate must be signed by a CA that ssl_context trusts and name the "
            "host connected to)"
        )
    if isinstance(exc, ssl.SSLError):
        return SslAuthenticationError(
            f"TLS handshake with {where} failed: {exc} (does the listener require a client "
            "certificate, ssl.client.auth=required? Or do its TLS versions and ciphers differ "
            "from ssl_context's?)"
        )
    if security.tls and isinstance(
        exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError
    ):
        return SslAuthenticationError(
            f"TLS handshake with {where} failed: the broker closed the connection ({exc!r}); "
            f"is {where} a TLS listener (security_protocol {security.protocol})?"
        )
    errno = getattr(exc, "errno", None)
    if errno == SaslAuthenticationError.code:
        told = _message(exc) or "no reason given"
        return SaslAuthenticationError(
            f"SASL authentication as {security.who} at {where} failed: {told}"
        )
    if errno == UnsupportedSaslMechanismError.code:
        told = _message(exc)
        return UnsupportedSaslMechanismError(
            f"the listener at {where} does not enable SASL mechanism {security.mechanism}"
            + (f": {told}" if told and not told.startswith("<") else "")
        )
    if errno == IllegalSaslStateError.code:
        return IllegalSaslStateError(
            f"the broker at {where} did not expect SASL ({security.protocol}): it is probably a "
            "PLAINTEXT or SSL listener; use security_protocol PLAINTEXT or SSL there, or the "
            "SASL listener's port"
        )
    if security.sasl and security.mechanism.startswith("SCRAM-") and isinstance(exc, ValueError):
        # aiokafka's SCRAM client raises ValueError when the server's proof or nonce is wrong.
        return SaslAuthenticationError(
            f"SASL authentication as {security.who} at {where} failed: the broker's SCRAM "
            f"answer does not check out ({exc})"
        )
    return None


async def diagnose(
    host: str, port: int, security: SecurityOptions, *, client_id: str, timeout: float
) -> AuthenticationError | None:
    """Connect to ``host:port`` as aiokafka would; the authentication failure seen, if any.

    Bounded by ``timeout``; ``None`` when the connection works or fails for another reason
    (refused, timed out, ...), which stays the caller's retriable error.
    """
    try:
        async with asyncio.timeout(max(timeout, 0.001)):
            return await _diagnose(host, port, security, client_id, max(timeout, 0.001))
    except TimeoutError:
        return None


async def _connect(
    host: str, port: int, security: SecurityOptions, client_id: str, timeout: float
) -> Any:
    from aiogroup.client.reauth import ReauthConnection

    # aiogroup's connection: its OAUTHBEARER exchange reports a refused token as a refusal.
    conn = ReauthConnection(
        host,
        port,
        client_id=client_id,
        request_timeout_ms=max(int(timeout * 1000), 1),
        **security.options,
    )
    await conn.connect()
    return conn


async def _diagnose(
    host: str, port: int, security: SecurityOptions, client_id: str, timeout: float
) -> AuthenticationError | None:
    from aiokafka.errors import KafkaConnectionError
    from aiokafka.protocol.admin import SaslHandShakeRequest
    from aiokafka.protocol.metadata import MetadataRequest

    where = f"{host}:{port}"
    try:
        conn = await _connect(host, port, security, client_id, timeout)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # aiokafka and ssl raise many kinds; we look for a few
        found = classify(exc, security, where)
        if found is None and not security.tls:
            # A plaintext connection that a TLS listener closed: does the port speak TLS?
            if (await _tls_probe(host, port)).startswith(("ok", "alert")):
                found = SslAuthenticationError(
                    f"the listener at {where} expects TLS but security_protocol is "
                    f"{security.protocol}: use {'SASL_SSL' if security.sasl else 'SSL'} (with "
                    "an ssl_context), or a plaintext listener's port"
                )
        elif found is None and isinstance(exc, KafkaConnectionError):
            # Our TLS handshake passed and the broker closed at the first request: under TLS
            # 1.3 that is how a listener demanding a client certificate refuses one. Without
            # a certificate, TLS 1.2 is refused in the handshake itself.
            probe = await _tls_probe(host, port)
            if probe != "ok" and "PROTOCOL_VERSION" not in probe:
                found = SslAuthenticationError(
                    f"the broker at {where} closed the connection after the TLS handshake and "
                    "refuses TLS without a client certificate: the listener requires a client "
                    "certificate it trusts (ssl.client.auth=required); load one into "
                    "ssl_context with load_cert_chain()"
                )
        if found is None:
            log.debug("connection to %s failed for a reason other than security: %r", where, exc)
        return found
    try:
        await conn.send(MetadataRequest([]))
        return None
    except Exception as exc:
        found = classify(exc, security, where)
        if found is not None or security.sasl:
            return found
    finally:
        conn.close()
    # ApiVersions passed, the next request closed the connection: a SASL listener waiting for
    # SaslHandshake does that. Ask it for its mechanisms (any other listener answers 34).
    conn = await _connect(host, port, security, client_id, timeout)
    try:
        answer = await conn.send(SaslHandShakeRequest("PLAIN"))
    except Exception as exc:
        log.debug("%s is no SASL listener either: %r", where, exc)
        return None
    finally:
        conn.close()
    if answer.error_code not in (0, UnsupportedSaslMechanismError.code):
        return None
    offered = ", ".join(answer.enabled_mechanisms) or "none"
    return SaslAuthenticationError(
        f"the listener at {where} requires SASL authentication (mechanisms: {offered}) but "
        f"security_protocol is {security.protocol}: use "
        f"{'SASL_SSL' if security.tls else 'SASL_PLAINTEXT'} with sasl_mechanism and "
        "credentials"
    )


async def _tls_probe(host: str, port: int) -> str:
    """How a bare TLS 1.2 handshake with ``host:port`` ends (certificates not checked):
    ``"ok"``, ``"alert <reason>"`` (the server refused in TLS terms) or ``"failed"`` (closed,
    reset: no TLS there, or a TLS server that aborts a refused handshake, as asyncio's does)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        _, writer = await asyncio.open_connection(host, port, ssl=context)
    except ssl.SSLError as exc:
        reason = exc.reason or ""
        return f"alert {reason}" if "ALERT" in reason else "failed"
    except OSError:
        return "failed"
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return "ok"
