"""The side-by-side report of several runs (``render_runs_html``), from hand-made intervals: no
Spark needed. It is what ``bench/bench_rolling_bounce.py`` writes."""

from __future__ import annotations

import re

import pandas as pd

from aiogroup.tools.audit.report import RunView, render_runs_html


def _intervals(owners: dict[int, list[tuple[str, float, float]]]) -> pd.DataFrame:
    rows = [
        {"group": "g", "topic": "t", "partition": p, "member": m, "generation_id": 1,
         "start": 1000.0 + a, "end": 1000.0 + b, "end_kind": "revoked", "open": False}
        for p, spans in owners.items() for m, a, b in spans
    ]
    return pd.DataFrame(rows)


def test_runs_side_by_side() -> None:
    eager = _intervals({p: [("m1", 0, 5), ("m2", 6, 10)] for p in range(4)})
    coop = _intervals({0: [("m1", 0, 5), ("m2", 5.2, 10)], 1: [("m1", 0, 10)],
                       2: [("m3", 0, 10)], 3: [("m3", 0, 10)]})
    html = render_runs_html(
        [RunView("aiogroup-eager (embedded)", {"unowned_s": 4.0, "stops": 4, "bounce_s": 6.0},
                 eager, 1000.0),
         RunView("aiogroup-coop (embedded)", {"unowned_s": 0.2, "stops": 1, "bounce_s": 5.2},
                 coop, 1000.0)],
        title="Rolling bounce", note="heartbeat 1000 ms")
    assert html.count("<svg") == 3  # the bar chart and one timeline per run
    assert "<script" not in html and "http" not in html
    # one bar per run, proportional to its unowned time
    bars = re.findall(r"<rect x='230' y='[\d.]+' width='([\d.]+)'", html)
    assert len(bars) == 2 and float(bars[0]) > 10 * float(bars[1])
    # every interval drawn (8 + 5), each member in the legend once
    assert html.count("owns t-") == 13
    for member in ("m1", "m2", "m3"):
        assert html.count(f"</i>{member}</span>") == 1
    # the figures table, with a dash for figures a run does not have
    assert "<td>4.0</td>" in html and "<td>0.2</td>" in html and "<td>-</td>" in html


def test_a_run_without_intervals_still_renders() -> None:
    empty = _intervals({})
    html = render_runs_html([RunView("nothing", {}, empty.reindex(columns=[
        "group", "topic", "partition", "member", "generation_id", "start", "end", "end_kind",
        "open"]), 0.0)], title="t")
    assert html.count("<svg") == 1
