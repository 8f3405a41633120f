"""Throw-away TLS material for tests: a CA, a broker certificate and a client certificate.

:func:`make_pki` writes, into a folder, everything a TLS test needs for both brokers:

* PEM files (``ca.pem``, ``broker.pem`` + ``broker.key``, ``client.pem`` + ``client.key``) for
  Python's ``ssl`` (the client side, and the embedded broker's server side);
* the same broker key and chain as a PKCS#12 keystore (``broker.p12``) and the CA as a JKS
  truststore (``truststore.jks``) for Apache Kafka 2.3, which reads no PEM (KIP-651 came in 2.7).

Keys are ECDSA P-256 (fast to make); the broker certificate names ``127.0.0.1`` and
``localhost``, so hostname verification stays on. Making a set takes milliseconds and needs no
JVM: the ``cryptography`` package (a ``dev`` dependency) does the work, and the JKS truststore is
written here (a cert-only JKS is a small, documented format; keytool would cost a JVM start).

From the command line, ``python -m aiogroup.testing.tls DIR`` writes a set into ``DIR`` and
prints the paths.

Usage::

    pki = make_pki(tmp_path)
    client_context = pki.client_context()                    # trusts the test CA
    server_context = pki.server_context()                    # for EmbeddedBroker(ssl_context=)
    kafka_config = pki.kafka_config(client_auth="required")  # for KafkaBroker(config=)
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import ssl
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiogroup.errors import ConfigurationError

__all__ = ["Pki", "make_pki", "write_jks_truststore"]

#: The password of the generated keystore, key and truststore (test material only).
DEFAULT_PASSWORD = "aiogroup-test"


@dataclass(frozen=True)
class Pki:
    """Paths of a generated CA, broker and client certificate set (see :func:`make_pki`)."""

    directory: Path
    ca_cert: Path
    broker_cert: Path
    broker_key: Path
    client_cert: Path
    client_key: Path
    keystore: Path
    truststore: Path
    password: str

    def client_context(self, *, client_cert: bool = False) -> ssl.SSLContext:
        """A client context that trusts only this CA (hostname checked); ``client_cert`` also
        presents the client certificate (for ``ssl.client.auth=required``)."""
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_cert))
        if client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def server_context(self, *, require_client_cert: bool = False) -> ssl.SSLContext:
        """A server context with the broker certificate (for the embedded broker)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(self.ca_cert))
        context.load_cert_chain(str(self.broker_cert), str(self.broker_key))
        context.verify_mode = ssl.CERT_REQUIRED if require_client_cert else ssl.CERT_NONE
        return context

    def kafka_config(self, *, client_auth: str = "none") -> dict[str, str]:
        """Apache Kafka's ``ssl.*`` broker settings for this material.

        ``client_auth`` is Kafka's ``ssl.client.auth`` (``none``, ``requested``, ``required``).
        """
        if client_auth not in ("none", "requested", "required"):
            raise ConfigurationError(
                f"ssl.client.auth must be none, requested or required, not {client_auth!r}"
            )
        return {
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(self.keystore),
            "ssl.keystore.password": self.password,
            "ssl.key.password": self.password,
            "ssl.truststore.type": "JKS",
            "ssl.truststore.location": str(self.truststore),
            "ssl.truststore.password": self.password,
            "ssl.client.auth": client_auth,
        }


def _require_cryptography() -> Any:
    try:
        import cryptography  # noqa: F401
    except ImportError as exc:  # pragma: no cover - dev dependency
        raise ConfigurationError(
            "making test certificates needs the 'cryptography' package (pip install "
            "'aiogroup[dev]' or pip install cryptography)"
        ) from exc


def make_pki(
    directory: Path | str,
    *,
    hosts: Sequence[str] = ("127.0.0.1", "localhost"),
    ca_name: str = "aiogroup test CA",
    password: str = DEFAULT_PASSWORD,
    days: int = 30,
) -> Pki:
    """Make a CA, a broker certificate for ``hosts`` and a client certificate in ``directory``.

    ``hosts`` go into the broker certificate's subjectAltName (IP addresses as IP entries).
    Two calls give two unrelated CAs: a client trusting one rejects the other's broker.
    """
    _require_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import pkcs12
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=days)

    def name(common_name: str) -> Any:
        return x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "aiogroup tests"),
                x509.NameAttribute(NameOID.COMMON_NAME, common_name),
            ]
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(name(ca_name))
        .issuer_name(name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(common_name: str, usage: Any, alt_names: Sequence[Any]) -> tuple[Any, Any]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
            )
        )
        if alt_names:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), False)
        return key, builder.sign(ca_key, hashes.SHA256())

    alt: list[Any] = []
    for host in hosts:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt.append(x509.DNSName(host))
    broker_key, broker_cert = leaf(
        hosts[0] if hosts else "broker", ExtendedKeyUsageOID.SERVER_AUTH, alt
    )
    client_key, client_cert = leaf("aiogroup-client", ExtendedKeyUsageOID.CLIENT_AUTH, [])

    pem = serialization.Encoding.PEM
    plain_key = serialization.PrivateFormat.PKCS8

    def write(path: Path, data: bytes, private: bool = False) -> Path:
        path.write_bytes(data)
        if private:
            path.chmod(0o600)
        return path

    ca_path = write(folder / "ca.pem", ca_cert.public_bytes(pem))
    # The chain file carries the CA after the leaf, as servers send it.
    broker_cert_path = write(
        folder / "broker.pem", broker_cert.public_bytes(pem) + ca_cert.public_bytes(pem)
    )
    none = serialization.NoEncryption()
    broker_key_path = write(
        folder / "broker.key", broker_key.private_bytes(pem, plain_key, none), private=True
    )
    client_cert_path = write(folder / "client.pem", client_cert.public_bytes(pem))
    client_key_path = write(
        folder / "client.key", client_key.private_bytes(pem, plain_key, none), private=True
    )
    keystore = write(
        folder / "broker.p12",
        pkcs12.serialize_key_and_certificates(
            b"broker",
            broker_key,
            broker_cert,
            [ca_cert],
            serialization.BestAvailableEncryption(password.encode()),
        ),
        private=True,
    )
    ca_der = ca_cert.public_bytes(serialization.Encoding.DER)
    truststore = write_jks_truststore(folder / "truststore.jks", [("ca", ca_der)], password)
    return Pki(
        directory=folder,
        ca_cert=ca_path,
        broker_cert=broker_cert_path,
        broker_key=broker_key_path,
        client_cert=client_cert_path,
        client_key=client_key_path,
        keystore=keystore,
        truststore=truststore,
        password=password,
    )


def _java_utf(text: str) -> bytes:
    """Java's ``DataOutput.writeUTF``: a 2-byte length, then modified UTF-8."""
    data = bytearray()
    for ch in text:
        code = ord(ch)
        if 0 < code < 0x80:
            data.append(code)
        elif code < 0x800:  # also U+0000, as two bytes
            data += bytes((0xC0 | code >> 6, 0x80 | code & 0x3F))
        elif code < 0x10000:
            data += bytes((0xE0 | code >> 12, 0x80 | code >> 6 & 0x3F, 0x80 | code & 0x3F))
        else:  # a surrogate pair, each half as three bytes
            code -= 0x10000
            for half in (0xD800 | code >> 10, 0xDC00 | code & 0x3FF):
                data += bytes((0xE0 | half >> 12, 0x80 | half >> 6 & 0x3F, 0x80 | half & 0x3F))
    if len(data) > 0xFFFF:
        raise ConfigurationError("a JKS alias must encode to at most 65535 bytes")
    return struct.pack(">H", len(data)) + bytes(data)


def write_jks_truststore(
    path: Path | str, certificates: Sequence[tuple[str, bytes]], password: str
) -> Path:
    """Write a JKS keystore holding only trusted certificates (``(alias, DER bytes)`` pairs).

    The format (version 2): magic ``FEEDFEED``, version, entry count, then per entry tag 2
    (trusted certificate), alias, creation time in ms, ``X.509``, the DER length and bytes;
    last a SHA-1 over the password as UTF-16BE, the salt ``Mighty Aphrodite`` and everything
    before it. Java reads it as ``ssl.truststore.type=JKS``.
    """
    out = bytearray(struct.pack(">III", 0xFEEDFEED, 2, len(certificates)))
    now_ms = int(time.time() * 1000)
    for alias, der in certificates:
        out += struct.pack(">I", 2) + _java_utf(alias.lower()) + struct.pack(">q", now_ms)
        out += _java_utf("X.509") + struct.pack(">I", len(der)) + der
    digest = hashlib.sha1(password.encode("utf-16-be") + b"Mighty Aphrodite" + bytes(out))
    target = Path(path)
    target.write_bytes(bytes(out) + digest.digest())
    return target


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m aiogroup.testing.tls DIR [--host H ...]``: write a set, print the paths."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m aiogroup.testing.tls",
        description="write a test CA, broker and client certificates (PEM, PKCS#12, JKS)",
    )
    parser.add_argument("directory")
    parser.add_argument(
        "--host",
        action="append",
        help="a name or IP address for the broker certificate (default 127.0.0.1 and localhost)",
    )
    parser.add_argument("--password", default=DEFAULT_PASSWORD)
    args = parser.parse_args(argv)
    pki = make_pki(
        args.directory, hosts=args.host or ("127.0.0.1", "localhost"), password=args.password
    )
    for name in ("ca_cert", "broker_cert", "broker_key", "client_cert", "client_key"):
        print(f"{name:12} {getattr(pki, name)}")
    print(f"{'keystore':12} {pki.keystore} (PKCS12, password {pki.password})")
    print(f"{'truststore':12} {pki.truststore} (JKS, password {pki.password})")


if __name__ == "__main__":
    main()
