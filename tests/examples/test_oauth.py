"""examples/oauth.py, run as printed: its demo on Apache Kafka 4.1.1 (OAUTHBEARER, 4 s tokens,
3 s sessions), and its client-credentials provider against a local token endpoint."""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from aiogroup.testing.launchers.kafka import KAFKA4_VERSION, kafka_available
from examples import oauth

SCRIPT = Path(oauth.__file__)


@pytest.mark.kafka4
@pytest.mark.timeout(240)
def test_the_demo_reads_everything_through_refreshes_and_reauthentications() -> None:
    ok, reason = kafka_available(KAFKA4_VERSION)
    if not ok:
        if os.environ.get("AIOGROUP_REQUIRE_KAFKA") == "1":
            pytest.fail(f"Kafka {KAFKA4_VERSION}: {reason}", pytrace=False)
        pytest.skip(reason)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--demo"], capture_output=True, text=True, timeout=230
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    found = re.search(
        r"read 200 of 200 records in 12 s; (\d+) tokens fetched, (\d+) connections "
        r"authenticated, (\d+) re-authentications, 0 refused",
        out.stdout,
    )
    assert found, out.stdout
    tokens, connections, reauths = map(int, found.groups())
    assert tokens >= 3 and connections <= 3 and reauths >= 4  # bootstrap, group, fetches


def test_the_client_credentials_provider_asks_the_token_endpoint() -> None:
    asked: list[tuple[str, str]] = []

    class Endpoint(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"])).decode()
            asked.append((self.headers["Authorization"], body))
            reply = json.dumps({"access_token": "eyJ.abc.", "expires_in": 300}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Endpoint)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/token"
        token = oauth.client_credentials(url, "billing", "s3cret", "kafka")()
    finally:
        server.shutdown()
        thread.join()
    assert token.value == "eyJ.abc." and token.lifetime_ms == 300_000
    assert asked == [("Basic YmlsbGluZzpzM2NyZXQ=", "grant_type=client_credentials&scope=kafka")]
