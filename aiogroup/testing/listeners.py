"""Broker listeners, shared by the embedded broker and Apache Kafka 2.3 (``aiogroup.testing``).

A :class:`Listener` is one port with one security protocol, as in Kafka's ``listeners`` and
``listener.security.protocol.map`` settings: ``Listener("SASL_SSL")`` is a listener named
``SASL_SSL`` speaking SASL over TLS; ``Listener("CLIENTS", protocol="SSL")`` names one freely.
Port 0 picks a free port when the broker starts; brokers report them in ``broker.ports``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiogroup.client.security import SECURITY_PROTOCOLS, uses_sasl, uses_tls
from aiogroup.errors import ConfigurationError

__all__ = ["SECURITY_PROTOCOLS", "Listener"]


@dataclass
class Listener:
    """One broker listener: ``name`` (also its security protocol unless ``protocol`` is given)."""

    name: str
    port: int = 0
    protocol: str | None = None

    @property
    def security_protocol(self) -> str:
        return self.protocol or self.name

    @property
    def tls(self) -> bool:
        return uses_tls(self.security_protocol)

    @property
    def sasl(self) -> bool:
        return uses_sasl(self.security_protocol)

    def check(self) -> None:
        """Refuse an unknown security protocol (:class:`ConfigurationError`)."""
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ConfigurationError(
                f"listener {self.name}: security protocol {self.security_protocol!r} is not one "
                f"of {', '.join(SECURITY_PROTOCOLS)} (give protocol= for a custom name)"
            )
