"""A consumer authenticating with SASL/OAUTHBEARER: tokens refreshed, connections re-authenticated.

What it shows:

- a token provider of the usual shape: a blocking function that asks an identity provider for
  a token (OAuth 2 client credentials, RFC 6749 section 4.4) and returns it with its lifetime
  as an :class:`aiogroup.OAuthToken`. aiogroup runs it in a worker thread, calls it again at
  80-85% of each token's lifetime, and retries with backoff while the current token is valid;
- KIP-368: a broker with ``connections.max.reauth.ms`` (or expiring tokens) gives each SASL
  session a lifetime; aiogroup re-authenticates every connection before it ends, between
  requests, with the current token, so nothing is dropped;
- what the client did: ``consumer.member.transport.sasl`` (authentications,
  re-authentications, failures, the token source's calls).

Usage::

    python examples/oauth.py --bootstrap kafka:9094 --group billing --topic orders \\
        --token-url https://idp.example.com/oauth2/token --client-id billing
        # the client secret from $OAUTH_CLIENT_SECRET; security_protocol SASL_SSL
    python examples/oauth.py --demo    # Apache Kafka 4.1.1 (needs Java 17): unsecured test
                                       # tokens of 4 s, sessions of 3 s, 12 s of records

Exit status: 0 after a clean run (``--demo``: every record read, nothing refused), 1 on error.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from aiogroup import Consumer, OAuthToken
from aiogroup.errors import AiogroupError

__all__ = ["client_credentials", "demo", "main"]


def client_credentials(
    token_url: str, client_id: str, client_secret: str, scope: str | None = None
) -> Callable[[], OAuthToken]:
    """A token provider for ``sasl_oauth_token_provider``: OAuth 2 client credentials."""

    def fetch() -> OAuthToken:  # blocking: aiogroup calls it in a worker thread
        form = {"grant_type": "client_credentials", **({"scope": scope} if scope else {})}
        basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
        request = urllib.request.Request(
            token_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={"Authorization": f"Basic {basic}"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            answer: dict[str, Any] = json.load(reply)
        return OAuthToken(answer["access_token"], lifetime_ms=int(answer["expires_in"]) * 1000)

    return fetch


async def consume(
    bootstrap: str, group: str, topic: str, provider: Any, *, protocol: str, seconds: float
) -> tuple[int, Consumer]:
    """Read ``topic`` for ``seconds`` (forever if 0); the number of records read."""
    read = 0
    consumer = Consumer(
        bootstrap,
        group,
        topics=[topic],
        auto_offset_reset="earliest",
        security_protocol=protocol,
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    loop = asyncio.get_running_loop()
    async with consumer:
        end = loop.time() + seconds
        while not seconds or loop.time() < end:
            batches = await consumer.getmany(timeout_ms=200)
            read += sum(len(records) for records in batches.values())
    return read, consumer


async def demo(seconds: float = 12.0) -> int:
    """Kafka 4.1.1 with an OAUTHBEARER listener (unsecured tokens, 3 s sessions); records are
    produced while a consumer reads them through several token lifetimes."""
    from aiokafka import AIOKafkaProducer

    from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, KafkaBroker, security_config
    from aiogroup.testing.oauth import UnsecuredTokens

    settings = security_config(mechanisms=["OAUTHBEARER"], reauth_ms=3_000)
    with KafkaBroker(version=KAFKA4_VERSION, **settings) as kafka:
        kafka.create_topic("orders", 3)
        producer = AIOKafkaProducer(bootstrap_servers=kafka.bootstrap)  # the PLAINTEXT listener
        await producer.start()
        tokens = UnsecuredTokens("billing", lifetime_ms=4_000)  # stands in for an IdP

        async def produce() -> int:
            for n in range(200):
                await producer.send_and_wait("orders", b"order-%d" % n)
                await asyncio.sleep(seconds / 400)  # spread over the first half of the run
            return 200

        try:
            sent, (read, consumer) = await asyncio.gather(
                produce(),
                consume(
                    f"127.0.0.1:{kafka.ports['SASL_PLAINTEXT']}", "billing", "orders", tokens,
                    protocol="SASL_PLAINTEXT", seconds=seconds,
                ),
            )  # fmt: skip
        finally:
            await producer.stop()
    sasl = consumer.member.transport.sasl
    assert sasl is not None and sasl.token_source is not None
    print(
        f"read {read} of {sent} records in {seconds:g} s; {tokens.calls} tokens fetched, "
        f"{sasl.authentications} connections authenticated, {sasl.reauthentications} "
        f"re-authentications, {sasl.reauthentication_failures} refused"
    )
    return 0 if read == sent and sasl.reauthentication_failures == 0 else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo", action="store_true", help="run against Kafka 4.1.1")
    parser.add_argument("--bootstrap")
    parser.add_argument("--group", default="billing")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--token-url")
    parser.add_argument("--client-id")
    parser.add_argument("--scope")
    parser.add_argument("--seconds", type=float, default=0, help="stop after (0: never)")
    args = parser.parse_args(argv)
    try:
        if args.demo:
            return asyncio.run(demo())
        if not (args.bootstrap and args.token_url and args.client_id):
            parser.error("give --demo, or --bootstrap, --token-url and --client-id")
        provider = client_credentials(
            args.token_url, args.client_id, os.environ["OAUTH_CLIENT_SECRET"], args.scope
        )
        read, _ = asyncio.run(
            consume(
                args.bootstrap, args.group, args.topic, provider,
                protocol="SASL_SSL", seconds=args.seconds,
            )
        )  # fmt: skip
        print(f"read {read} records")
        return 0
    except (AiogroupError, KeyError) as exc:
        print(f"error: {exc!r}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
