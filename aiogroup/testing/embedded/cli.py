"""The embedded broker as a process: ``python -m aiogroup.testing.embedded``.

::

    python -m aiogroup.testing.embedded --port 9092 --topic t:3 --flavour kafka2
    python -m aiogroup.testing.embedded --group-consumer min.session.timeout.ms=1000 \\
        --group-consumer session.timeout.ms=10000      # KIP-848 groups' broker settings
    python -m aiogroup.testing.embedded --listener SASL_SSL:9094 --ssl-cert broker.pem \\
        --ssl-key broker.key --scram-user alice:secret

It stops on SIGINT, SIGTERM and SIGHUP. ``python -m aiogroup.testing.embedded.broker`` is the
same command under its older name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import logging
import signal
import ssl
from typing import Any

from aiogroup.errors import ConfigurationError
from aiogroup.testing.embedded.broker import EmbeddedBroker
from aiogroup.testing.embedded.consumer_messages import ConsumerGroupSettings
from aiogroup.testing.embedded.rules import CoordinatorConfig
from aiogroup.testing.listeners import Listener
from aiogroup.testing.sasl import MECHANISMS, SaslCredentials

__all__ = ["add_cli_arguments", "cli_security", "main"]


def _parse_topic(spec: str) -> tuple[str, int]:
    name, _, count = spec.partition(":")
    try:
        return name, int(count or "1")
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"bad topic spec {spec!r} (want NAME[:PARTITIONS])"
        ) from None


#: ``--group-consumer NAME=VALUE``: Kafka's ``group.consumer.NAME`` broker settings, each a
#: :class:`ConsumerGroupSettings` field (dots for underscores).
GROUP_CONSUMER_SETTINGS = tuple(
    f.name.replace("_", ".") for f in dataclasses.fields(ConsumerGroupSettings)
)


def _parse_group_consumer(spec: str) -> tuple[str, Any]:
    name, sep, value = spec.partition("=")
    if not sep or name not in GROUP_CONSUMER_SETTINGS:
        raise argparse.ArgumentTypeError(
            f"bad setting {spec!r} (want NAME=VALUE, NAME one of "
            f"{', '.join(GROUP_CONSUMER_SETTINGS)})"
        )
    field = name.replace(".", "_")
    if field == "assignors":
        return field, tuple(a.strip() for a in value.split(",") if a.strip())
    if field == "migration_policy":
        return field, value
    try:
        return field, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad setting {spec!r} ({name} is a number)") from None


def consumer_group_settings(specs: list[tuple[str, Any]] | None) -> ConsumerGroupSettings:
    """The ``group.consumer.*`` settings ``--group-consumer`` gave, Kafka's defaults else."""
    try:
        return ConsumerGroupSettings(**dict(specs or []))
    except ConfigurationError as exc:
        raise SystemExit(f"--group-consumer: {exc}") from None


async def _run_cli(args: argparse.Namespace) -> None:
    config = CoordinatorConfig(
        initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        group_min_session_timeout_ms=args.group_min_session_timeout_ms,
        flavour=args.flavour,
        consumer_group=consumer_group_settings(args.group_consumer),
    )
    broker = EmbeddedBroker(
        host=args.host,
        port=args.port,
        topics=dict(args.topic or []),
        auto_create_topics=not args.no_auto_create_topics,
        num_partitions=args.num_partitions,
        coordinator_config=config,
        **cli_security(args),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with broker:
        print(f"aiogroup embedded broker listening on {broker.bootstrap}", flush=True)
        for listener in broker.listeners:
            print(
                f"  {listener.name} ({listener.security_protocol}) on port {listener.port}",
                flush=True,
            )
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m aiogroup.testing.embedded",
        description="aiogroup's embedded Kafka broker",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9092)
    parser.add_argument(
        "--topic",
        action="append",
        type=_parse_topic,
        help="create NAME[:PARTITIONS] at start (repeatable)",
    )
    parser.add_argument(
        "--num-partitions", type=int, default=1, help="partitions of auto-created topics"
    )
    parser.add_argument("--no-auto-create-topics", action="store_true")
    parser.add_argument("--initial-rebalance-delay-ms", type=int, default=0)
    parser.add_argument("--group-min-session-timeout-ms", type=int, default=6000)
    parser.add_argument(
        "--flavour",
        choices=["kafka4", "kafka3", "kafka2"],
        default="kafka4",
        help="the Kafka generation whose coordinator rules to follow (kafka2: Kafka 2.3)",
    )
    parser.add_argument(
        "--group-consumer",
        action="append",
        type=_parse_group_consumer,
        metavar="NAME=VALUE",
        help="a KIP-848 broker setting group.consumer.NAME, Kafka's name and default "
        f"(repeatable; NAME: {', '.join(GROUP_CONSUMER_SETTINGS)}; assignors comma-separated)",
    )
    parser.add_argument("--log-level", default="WARNING")
    add_cli_arguments(parser)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s"
    )
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run_cli(args))


# --- TLS and SASL options ---------------------------------------------------------------------


def add_cli_arguments(parser: argparse.ArgumentParser) -> None:
    """The TLS and SASL options of ``python -m aiogroup.testing.embedded``."""
    group = parser.add_argument_group("TLS and SASL listeners (beside PLAINTEXT on --port)")
    group.add_argument(
        "--listener",
        action="append",
        default=[],
        metavar="NAME:PORT[:PROTOCOL]",
        help="add a listener, e.g. SASL_SSL:9094 or CLIENTS:9095:SSL (repeatable)",
    )
    group.add_argument("--ssl-cert", help="PEM certificate chain of the TLS listeners")
    group.add_argument("--ssl-key", help="PEM private key of --ssl-cert")
    group.add_argument("--ssl-cafile", help="PEM CAs that client certificates must chain to")
    group.add_argument(
        "--ssl-client-auth",
        choices=("none", "requested", "required"),
        default="none",
        help="ask TLS clients for a certificate (Kafka's ssl.client.auth)",
    )
    group.add_argument(
        "--plain-user", action="append", default=[], metavar="USER:PASSWORD",
        help="a SASL/PLAIN user (repeatable)",
    )  # fmt: skip
    group.add_argument(
        "--scram-user", action="append", default=[], metavar="USER:PASSWORD",
        help="a SCRAM-SHA-256 and SCRAM-SHA-512 user (repeatable)",
    )  # fmt: skip
    group.add_argument(
        "--sasl-mechanisms",
        default=",".join(MECHANISMS),
        help=f"mechanisms the SASL listeners enable (default {','.join(MECHANISMS)})",
    )


def cli_security(args: argparse.Namespace) -> dict[str, Any]:
    """EmbeddedBroker keyword arguments from :func:`add_cli_arguments`' options."""
    listeners: list[Listener] = []
    for spec in args.listener:
        parts = spec.split(":")
        if len(parts) not in (2, 3) or not parts[1].isdigit():
            raise ConfigurationError(f"bad --listener {spec!r} (want NAME:PORT[:PROTOCOL])")
        listeners.append(Listener(parts[0], int(parts[1]), parts[2] if len(parts) == 3 else None))
    context = None
    if args.ssl_cert:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=args.ssl_cafile)
        context.load_cert_chain(args.ssl_cert, args.ssl_key)
        context.verify_mode = {
            "none": ssl.CERT_NONE,
            "requested": ssl.CERT_OPTIONAL,
            "required": ssl.CERT_REQUIRED,
        }[args.ssl_client_auth]
    credentials = SaslCredentials()
    for option, store in (
        (args.plain_user, credentials.set_plain),
        (args.scram_user, credentials.set_scram),
    ):
        for spec in option:
            user, sep, password = spec.partition(":")
            if not sep or not user:
                raise ConfigurationError(f"bad user {spec!r} (want USER:PASSWORD)")
            store(user, password)
    mechanisms = [m.strip() for m in args.sasl_mechanisms.split(",") if m.strip()]
    return {
        "listeners": listeners,
        "ssl_context": context,
        "sasl_credentials": credentials,
        "sasl_mechanisms": mechanisms,
    }
