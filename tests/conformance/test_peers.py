"""The peer harness: a wait that times out reports every peer's threads and stderr."""

from __future__ import annotations

import pytest

from aiogroup.testing.embedded.threaded import ThreadedBroker
from aiogroup.testing.fixtures import BrokerHandle

from .peers import Peers, create_topic

pytestmark = [pytest.mark.peers, pytest.mark.timeout(120)]


def test_a_timed_out_wait_shows_what_the_peers_were_doing() -> None:
    with ThreadedBroker() as broker:
        handle = BrokerHandle("embedded", broker.bootstrap, broker)
        create_topic(handle, "diag", 1)
        with Peers(handle) as peers:
            a = peers.start("kafka-python", group="g-diag", topic="diag", name="a")
            b = peers.start("confluent", group="g-diag", topic="diag", name="b")
            with pytest.raises(AssertionError) as caught:
                a.wait_for(lambda _: False, "something that never happens", timeout=3)
        text = str(caught.value)
        assert "timed out waiting for something that never happens" in text
        for peer in (a, b):
            assert f"--- {peer.name} ({peer.kind}) threads:" in text
        assert 'File "' in text  # a Python stack from the thread dump
        assert not a.diag.exists() and not b.diag.exists()  # cleaned up with the peers
