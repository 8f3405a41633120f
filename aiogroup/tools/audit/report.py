"""The readable side of the audit: a stdout summary and a self-contained HTML report.

Charts are inline SVG written by hand (no plotting dependency): an ownership timeline (Gantt)
for a range of partitions, unowned time per generation, moves against the minimum, and latency
distributions. Two event sets (``--compare``) are shown side by side. :func:`render_runs_html`
lays out several runs (groups) of one audit side by side, as ``bench/bench_rolling_bounce.py``
does: a table of figures, a bar chart of unowned time and one ownership timeline per run on a
common time scale.
"""

from __future__ import annotations

import html
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

__all__ = ["AuditData", "RunView", "collect", "render_html", "render_runs_html", "runs_data",
           "summary_text"]

GANTT_DEFAULT_PARTITIONS = 24
GANTT_MAX_INTERVALS = 4000
PALETTE = [
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
    "#86bcb6", "#8cd17d", "#499894", "#d37295", "#a0cbe8", "#ffbe7d", "#bab0ac", "#79706e",
]


@dataclass
class AuditData:
    """Small, collected results of one audit (pandas DataFrames)."""

    label: str
    tolerance_s: float
    tables: dict[str, Any] = field(default_factory=dict)
    gantt: Any = None
    gantt_title: str = ""

    @property
    def violations(self) -> int:
        o = self.tables["overlaps"]
        return int(o["violation"].sum()) if len(o) else 0


def collect(
    spark: SparkSession,
    target: str,
    label: str,
    tolerance_s: float,
    gantt_topic: str | None = None,
    gantt_partitions: tuple[int, int] | None = None,
) -> AuditData:
    """Read back the written Parquet datasets; small ones whole, intervals for the timeline."""
    with warnings.catch_warnings():  # PySpark's "pandas >= 3 not fully supported" notice
        warnings.simplefilter("ignore", FutureWarning)
        return _collect(spark, target, label, tolerance_s, gantt_topic, gantt_partitions)


def _collect(
    spark: SparkSession,
    target: str,
    label: str,
    tolerance_s: float,
    gantt_topic: str | None,
    gantt_partitions: tuple[int, int] | None,
) -> AuditData:
    data = AuditData(label=label, tolerance_s=tolerance_s)
    for name in ("input_quality", "overlaps", "unowned_by_generation", "moves_by_generation",
                 "latency", "latency_histogram", "members"):
        data.tables[name] = spark.read.parquet(f"{target}/{name}").toPandas()
    per_partition = spark.read.parquet(f"{target}/unowned_by_partition")
    data.tables["totals"] = per_partition.agg(
        F.count(F.lit(1)).alias("partitions"),
        F.coalesce(F.sum("intervals"), F.lit(0)).alias("intervals"),
        F.coalesce(F.sum("unowned_s"), F.lit(0.0)).alias("unowned_s"),
        F.coalesce(F.max("max_gap_s"), F.lit(0.0)).alias("max_gap_s"),
    ).toPandas()
    data.tables["worst_partitions"] = (
        per_partition.orderBy(F.desc("unowned_s")).limit(10).toPandas()
    )
    intervals = spark.read.parquet(f"{target}/intervals")
    topic = gantt_topic
    if topic is None:
        first = intervals.select("topic").orderBy("topic").limit(1).collect()
        topic = first[0]["topic"] if first else None
    if topic is not None:
        if gantt_partitions is None:
            gantt_partitions = (0, GANTT_DEFAULT_PARTITIONS - 1)
        lo, hi = gantt_partitions
        data.gantt = (
            intervals.where((F.col("topic") == topic) & F.col("partition").between(lo, hi))
            .orderBy("start")
            .limit(GANTT_MAX_INTERVALS)
            .toPandas()
        )
        data.gantt_title = f"{topic} partitions {lo}-{hi}"
    return data


# -- text -----------------------------------------------------------------------------------


def _fmt_s(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "-"
    if math.isnan(v):
        return "-"
    if v >= 100:
        return f"{v:.0f} s"
    if v >= 1:
        return f"{v:.2f} s"
    return f"{v * 1000:.1f} ms"


def _headline(d: AuditData) -> dict[str, str]:
    t = d.tables
    totals = t["totals"].iloc[0] if len(t["totals"]) else None
    overlaps = t["overlaps"]
    moves = t["moves_by_generation"]
    quality = t["input_quality"]
    skipped = quality[quality["status"] != "ok"]["lines"].sum() if len(quality) else 0
    ok = quality[quality["status"] == "ok"]["lines"].sum() if len(quality) else 0
    reb = t["latency"][t["latency"]["metric"] == "rebalance completed"]
    return {
        "events read": f"{int(ok)} ok, {int(skipped)} skipped",
        "members": str(len(t["members"])),
        "partitions": str(int(totals["partitions"])) if totals is not None else "0",
        "ownership intervals": str(int(totals["intervals"])) if totals is not None else "0",
        "overlap violations": str(int(overlaps["violation"].sum()) if len(overlaps) else 0),
        f"overlaps within {_fmt_s(d.tolerance_s)} tolerance": str(
            int((~overlaps["violation"].astype(bool)).sum()) if len(overlaps) else 0
        ),
        "unowned partition-seconds": f"{float(totals['unowned_s']):.2f}"
        if totals is not None else "0",
        "longest gap": _fmt_s(totals["max_gap_s"]) if totals is not None else "-",
        "partitions moved / minimum": f"{int(moves['moved'].sum())} / "
        f"{int(moves['min_moves'].sum())}" if len(moves) else "0 / 0",
        "rebalance latency p50 / p99": (
            f"{_fmt_s(reb['p50_s'].median())} / {_fmt_s(reb['p99_s'].max())}"
            if len(reb) else "-"
        ),
    }


def summary_text(d: AuditData) -> str:
    lines = [f"== aiogroup ownership audit: {d.label} =="]
    for k, v in _headline(d).items():
        lines.append(f"  {k:<34} {v}")
    q = d.tables["input_quality"]
    bad = q[q["status"] != "ok"].groupby("status")["lines"].sum() if len(q) else []
    for status, n in getattr(bad, "items", list)():
        lines.append(f"  skipped ({status}): {int(n)} lines")
    o = d.tables["overlaps"]
    if len(o):
        lines.append("  overlaps:")
        for _, r in o.sort_values("duration_s", ascending=False).head(10).iterrows():
            tag = "VIOLATION" if r["violation"] else "tolerated"
            members = ", ".join(str(m) for m in r["members"])
            lines.append(f"    {tag:9} {r['topic']}-{r['partition']} {_fmt_s(r['duration_s'])}"
                         f" members {members}")
    lat = d.tables["latency"]
    if len(lat):
        lines.append("  latency (p50 / p90 / p99 / max):")
        for _, r in lat.sort_values(["client", "metric"]).iterrows():
            lines.append(f"    {r['client']:<13} {r['metric']:<22} n={int(r['count']):<6} "
                         f"{_fmt_s(r['p50_s'])} / {_fmt_s(r['p90_s'])} / {_fmt_s(r['p99_s'])}"
                         f" / {_fmt_s(r['max_s'])}")
    return "\n".join(lines)


# -- SVG ------------------------------------------------------------------------------------


def _e(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _nice_ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    ticks = []
    v = first
    while v <= hi + 1e-9:
        ticks.append(round(v, 10))
        v += step
    return ticks


def _timeline_svg(
    g: Any,
    colour: dict[str, str],
    *,
    t0: float,
    t1: float,
    width: int = 640,
    row: int = 20,
    label: str = "ownership timeline",
    overlaps: Any = None,
) -> str:
    """Ownership bars: one row per partition of ``g`` (intervals), time ``t0``..``t1`` (0 s at
    ``t0``), one colour per member; ``overlaps`` (episodes) outlined in red."""
    parts = sorted({int(p) for p in g["partition"]})
    span = max(t1 - t0, 1e-9)
    left, right, top = 44, 14, 8
    gap = 1 if row < 10 else 2
    height = top + row * len(parts) + 22
    plot_w = width - left - right
    every = max(1, math.ceil(12 / row))  # partition labels at least 12 px apart

    def x(t: float) -> float:
        return left + (min(max(t, t0), t1) - t0) / span * plot_w

    out = [f"<svg viewBox='0 0 {width} {height}' width='100%' role='img' "
           f"aria-label='{_e(label)}'>"]
    for i, p in enumerate(parts):
        y = top + i * row
        if i % 2 == 0:
            out.append(f"<rect x='{left}' y='{y}' width='{plot_w}' height='{row}' fill='#f6f6f6'/>")
        if i % every == 0:
            out.append(f"<text x='{left - 6}' y='{y + min(row, 12) + (row - min(row, 12)) / 2 - 1}'"
                       f" text-anchor='end' class='ax'>p{p}</text>")
    for tick in _nice_ticks(0.0, span):
        tx = x(t0 + tick)
        out.append(f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{top}' y2='{top + row * len(parts)}' "
                   f"stroke='#ddd'/>")
        out.append(f"<text x='{tx:.1f}' y='{top + row * len(parts) + 14}' text-anchor='middle' "
                   f"class='ax'>{tick:g} s</text>")
    index = {p: i for i, p in enumerate(parts)}
    for r in g.itertuples(index=False):
        if float(r.end) < t0 or float(r.start) > t1:
            continue
        y = top + index[int(r.partition)] * row + gap
        x0, x1 = x(float(r.start)), x(float(r.end))
        w = max(x1 - x0, 0.8)
        dash = " stroke='#333' stroke-dasharray='3,2'" if bool(r.open) else ""
        tip = (f"{r.member} owns {r.topic}-{r.partition} gen {r.generation_id}: "
               f"{float(r.start) - t0:.3f}-{float(r.end) - t0:.3f} s ({r.end_kind})")
        out.append(f"<rect x='{x0:.1f}' y='{y}' width='{w:.1f}' height='{row - 2 * gap}' "
                   f"fill='{colour[str(r.member)]}' opacity='0.85'{dash}><title>{_e(tip)}</title>"
                   f"</rect>")
    if overlaps is not None and len(overlaps):
        topic = g["topic"].iloc[0]
        sel = overlaps[(overlaps["topic"] == topic) & overlaps["partition"].isin(parts)]
        for r in sel.itertuples(index=False):
            y = top + index[int(r.partition)] * row
            x0, x1 = x(float(r.start)), x(float(r.end))
            stroke = "#d62728" if r.violation else "#ff9896"
            out.append(f"<rect x='{x0 - 1:.1f}' y='{y}' width='{max(x1 - x0, 1) + 2:.1f}' "
                       f"height='{row}' fill='none' stroke='{stroke}' stroke-width='2'>"
                       f"<title>overlap {_fmt_s(r.duration_s)}</title></rect>")
    out.append("</svg>")
    return "".join(out)


def _legend(colour: dict[str, str], limit: int = 40) -> str:
    members = list(colour)
    keys = "".join(
        f"<span class='key'><i style='background:{colour[m]}'></i>{_e(m)}</span>"
        for m in members[:limit]
    )
    more = (f" <span class='muted'>+{len(members) - limit} more</span>"
            if len(members) > limit else "")
    return f"<div class='legend'>{keys}{more}</div>"


def _colours(members: Sequence[str]) -> dict[str, str]:
    return {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(sorted(set(members)))}


def _gantt_svg(d: AuditData, width: int = 640) -> str:
    g = d.gantt
    if g is None or len(g) == 0:
        return "<p class='muted'>No ownership intervals in the chosen range.</p>"
    colour = _colours([str(m) for m in g["member"]])
    t0, t1 = float(g["start"].min()), float(g["end"].max())
    svg = _timeline_svg(g, colour, t0=t0, t1=t1, width=width, overlaps=d.tables["overlaps"])
    when = datetime.fromtimestamp(t0, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return (svg + f"<div class='muted small'>0 s = {when}; hover a bar for details</div>"
            + _legend(colour))


def _bars_svg(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float], str]],
    *,
    y_label: str,
    width: int = 640,
    height: int = 170,
    max_labels: int = 16,
) -> str:
    if not labels:
        return "<p class='muted'>Nothing to show.</p>"
    left, right, top, bottom = 56, 10, 10, 22
    plot_w, plot_h = width - left - right, height - top - bottom
    vmax = max((max(v) if len(v) else 0.0) for _, v, _ in series) or 1.0
    ticks = _nice_ticks(0.0, vmax, 4)
    vmax = max(vmax, ticks[-1])
    n, k = len(labels), len(series)
    slot = plot_w / n
    bar = max(slot * 0.8 / k, 0.5)
    out = [f"<svg viewBox='0 0 {width} {height}' width='100%' role='img'>"]
    for tick in ticks:
        ty = top + plot_h - tick / vmax * plot_h
        out.append(f"<line x1='{left}' x2='{width - right}' y1='{ty:.1f}' y2='{ty:.1f}' "
                   f"stroke='#e5e5e5'/><text x='{left - 4}' y='{ty + 4:.1f}' text-anchor='end' "
                   f"class='ax'>{tick:g}</text>")
    step = max(1, math.ceil(n / max_labels))
    for i, lab in enumerate(labels):
        for j, (name, values, col) in enumerate(series):
            v = float(values[i])
            h = v / vmax * plot_h
            bx = left + i * slot + slot * 0.1 + j * bar
            out.append(f"<rect x='{bx:.1f}' y='{top + plot_h - h:.1f}' width='{bar:.1f}' "
                       f"height='{h:.1f}' fill='{col}'><title>{_e(name)} {_e(lab)}: {v:g}"
                       f"</title></rect>")
        if i % step == 0:
            out.append(f"<text x='{left + (i + 0.5) * slot:.1f}' y='{height - bottom + 15}' "
                       f"text-anchor='middle' class='ax'>{_e(lab)}</text>")
    out.append(f"<text x='12' y='{top + plot_h / 2:.0f}' class='ax' "
               f"transform='rotate(-90 12 {top + plot_h / 2:.0f})' text-anchor='middle'>"
               f"{_e(y_label)}</text>")
    out.append("</svg>")
    if k > 1:
        out.append("<div class='legend'>" + "".join(
            f"<span class='key'><i style='background:{c}'></i>{_e(nm)}</span>"
            for nm, _, c in series) + "</div>")
    return "".join(out)


def _generation_charts(d: AuditData) -> str:
    u = d.tables["unowned_by_generation"].dropna(subset=["generation_id"])
    u = u.groupby("generation_id", as_index=False)["unowned_partition_s"].sum()
    u = u.sort_values("generation_id")
    unowned = _bars_svg(
        [str(int(g)) for g in u["generation_id"]],
        [("unowned", list(u["unowned_partition_s"]), "#e15759")],
        y_label="partition-seconds",
    )
    m = d.tables["moves_by_generation"].dropna(subset=["generation_id"])
    m = m.groupby("generation_id", as_index=False)[["moved", "min_moves"]].sum()
    m = m.sort_values("generation_id")
    moves = _bars_svg(
        [str(int(g)) for g in m["generation_id"]],
        [("moved", list(m["moved"]), "#4e79a7"), ("minimum", list(m["min_moves"]), "#bab0ac")],
        y_label="partitions",
    )
    return (f"<h3>Unowned time per generation</h3>{unowned}"
            f"<h3>Partitions moved vs. minimum, per generation</h3>{moves}")


def _latency_charts(d: AuditData) -> str:
    h = d.tables["latency_histogram"]
    if not len(h):
        return "<p class='muted'>No latency events.</p>"
    colours = {"rebalance": "#4e79a7", "assigned": "#59a14f", "revoked": "#f28e2b",
               "lost": "#e15759"}
    names = {"rebalance": "rebalance", "assigned": "assigned callback",
             "revoked": "revoked callback", "lost": "lost callback"}
    lo, hi = int(h["bucket"].min()), int(h["bucket"].max())
    buckets = list(range(lo, hi + 1))
    floor = -12  # the audit puts everything at or below 1 ms in bucket -12

    def label(b: int) -> str:
        return "≤1 ms" if b <= floor else f"{_fmt_s(10 ** (b / 4))}"

    series = []
    for metric in ("rebalance", "assigned", "revoked", "lost"):
        sel = h[h["metric"] == metric].groupby("bucket")["count"].sum()
        if len(sel):
            counts = {int(k): float(v) for k, v in sel.items()}
            series.append((names[metric], [counts.get(b, 0.0) for b in buckets],
                           colours[metric]))
    chart = _bars_svg([label(b) for b in buckets], series, y_label="count", height=190,
                      max_labels=8)
    return ("<h3>Latency distribution (quarter-decade buckets; bar = bucket start)</h3>"
            + chart)


def _table(df: Any, columns: Sequence[str], *, limit: int = 50) -> str:
    if df is None or not len(df):
        return "<p class='muted'>None.</p>"
    cols = [c for c in columns if c in df.columns]
    head = "".join(f"<th>{_e(c)}</th>" for c in cols)
    rows = []
    for _, r in df.head(limit).iterrows():
        cells = []
        for c in cols:
            v = r[c]
            if isinstance(v, float):
                v = _fmt_s(v) if c.endswith("_s") else f"{v:.3f}"
            elif hasattr(v, "tolist") and not isinstance(v, str):
                v = ", ".join(str(x) for x in v.tolist())
            cells.append(f"<td>{_e(v)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    more = (f"<p class='muted'>{len(df) - limit} more rows in Parquet.</p>"
            if len(df) > limit else "")
    return f"<div class='scroll'><table><tr>{head}</tr>{''.join(rows)}</table></div>{more}"


def _short_path(path: Any) -> str:
    text = str(path)
    return text if len(text) <= 60 else "…" + text[-59:]


def _column(d: AuditData) -> str:
    head = _headline(d)
    cards = "".join(
        f"<div class='card{' bad' if k == 'overlap violations' and v != '0' else ''}'>"
        f"<b>{_e(v)}</b><span>{_e(k)}</span></div>" for k, v in head.items()
    )
    o = d.tables["overlaps"]
    o = o.sort_values("duration_s", ascending=False) if len(o) else o
    lat = d.tables["latency"]
    lat = lat.sort_values(["client", "metric"]) if len(lat) else lat
    members = d.tables["members"]
    members = members.sort_values("member") if len(members) else members
    quality = d.tables["input_quality"]
    return f"""
<section>
  <h2>{_e(d.label)}</h2>
  <div class='cards'>{cards}</div>
  <h3>Ownership timeline: {_e(d.gantt_title)}</h3>
  {_gantt_svg(d)}
  {_generation_charts(d)}
  {_latency_charts(d)}
  <h3>Overlaps</h3>
  {_table(o, ["topic", "partition", "duration_s", "max_owners", "members", "generations",
              "violation"])}
  <h3>Latency</h3>
  {_table(lat, ["client", "metric", "count", "p50_s", "p90_s", "p99_s", "max_s"])}
  <h3>Members</h3>
  {_table(members, ["member", "client", "generations", "rebalances", "intervals",
                    "open_intervals", "owned_partition_s", "lost_events", "closed"])}
  <h3>Input</h3>
  {_table(quality.assign(source_file=quality["source_file"].map(_short_path))
          if len(quality) else quality, ["source_file", "status", "lines"])}
</section>"""


_CSS = """
body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:18px;border-bottom:2px solid #4e79a7}
h3{font-size:14px;margin:18px 0 6px;color:#444}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:32px}
.cards{display:flex;flex-wrap:wrap;gap:8px}
.card{background:#f3f6fa;border-radius:6px;padding:6px 10px;min-width:120px}
.card b{display:block;font-size:16px} .card span{font-size:11px;color:#666}
.card.bad{background:#fde2e2} .muted{color:#888} .small{font-size:11px}
.ax{font-size:11px;fill:#555}
.legend{font-size:11px;margin:4px 0} .key{margin-right:10px;white-space:nowrap}
.key i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}
table{border-collapse:collapse;font-size:12px;margin:4px 0}
td,th{border-bottom:1px solid #eee;padding:2px 8px;text-align:left;white-space:nowrap}
.scroll{overflow-x:auto;max-width:100%} section{min-width:0}
section svg{max-width:780px;display:block}
th{background:#fafafa}
"""


def render_html(sets: Sequence[AuditData]) -> str:
    """One self-contained HTML page; two sets are laid out side by side."""
    title = " vs ".join(d.label for d in sets)
    body = "".join(_column(d) for d in sets)
    return f"""<!doctype html>
<html lang='en'><head><meta charset='utf-8'><title>aiogroup audit: {_e(title)}</title>
<style>{_CSS}</style></head><body>
<h1>Rebalance ownership audit: {_e(title)}</h1>
<p class='muted'>Ownership runs from the start of the assigned callback to the end of the revoked
or lost callback. Dashed bars are still open when the member's events stop. Red outlines mark
overlaps (light red: within the {_e(_fmt_s(sets[0].tolerance_s if sets else 0))} clock-skew
tolerance).</p>
<div class='grid'>{body}</div>
</body></html>
"""


# -- several runs side by side ---------------------------------------------------------------


@dataclass
class RunView:
    """One run (a group of one audit) for :func:`render_runs_html`: its label, figures (any of
    ``unowned_s``, ``max_gap_s``, ``rebalances``, ``moved``, ``min_moves``, ``overlaps``,
    ``violations``, ``bounce_s``), its intervals and the moment its timeline starts (0 s)."""

    label: str
    figures: dict[str, Any]
    intervals: Any
    t0: float


def runs_data(
    spark: SparkSession,
    target: str,
    runs: Sequence[tuple[str, str, float | None, dict[str, Any]]],
) -> list[RunView]:
    """Read the intervals of each run's group from the audit's Parquet under ``target``.

    ``runs``: (label, group, timeline start or None for the group's first interval, figures).
    """
    groups = sorted({group for _, group, _, _ in runs})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        intervals: Any = (
            spark.read.parquet(f"{target}/intervals")
            .where(F.col("group").isin(groups))
            .select("group", "topic", "partition", "member", "generation_id", "start", "end",
                    "end_kind", "open")
            .toPandas()
        )
    views = []
    for label, group, t0, figures in runs:
        mine = intervals[intervals["group"] == group]
        start = t0 if t0 is not None else (float(mine["start"].min()) if len(mine) else 0.0)
        views.append(RunView(label, dict(figures), mine, start))
    return views


_FIGURE_COLUMNS = (
    ("unowned_s", "unowned partition-s", "{:.1f}"),
    ("stops", "partition stops", "{}"),
    ("max_gap_s", "longest gap", "{:.2f} s"),
    ("rebalances", "rebalances", "{}"),
    ("moved", "moved", "{}"),
    ("overlaps", "double ownership", "{}"),
    ("bounce_s", "bounce", "{:.1f} s"),
)


def _hbars_svg(labels: Sequence[str], values: Sequence[float], *, unit: str,
               width: int = 760) -> str:
    """Horizontal bars, one per label, the value written at the end of each."""
    left, right, row, top = 230, 70, 22, 6
    height = top + row * len(labels) + 20
    vmax = max(values, default=0.0) or 1.0
    ticks = _nice_ticks(0.0, vmax, 5)
    vmax = max(vmax, ticks[-1])
    plot_w = width - left - right
    out = [f"<svg viewBox='0 0 {width} {height}' width='100%' role='img' "
           f"aria-label='{_e(unit)}'>"]
    for tick in ticks:
        tx = left + tick / vmax * plot_w
        out.append(f"<line x1='{tx:.1f}' x2='{tx:.1f}' y1='{top}' y2='{top + row * len(labels)}'"
                   f" stroke='#e5e5e5'/><text x='{tx:.1f}' y='{top + row * len(labels) + 14}' "
                   f"text-anchor='middle' class='ax'>{tick:g}</text>")
    for i, (lab, v) in enumerate(zip(labels, values, strict=True)):
        y = top + i * row
        w = v / vmax * plot_w
        colour = "#59a14f" if "coop" in lab else "#e15759"
        out.append(f"<text x='{left - 6}' y='{y + row - 7}' text-anchor='end' class='ax'>"
                   f"{_e(lab)}</text><rect x='{left}' y='{y + 3}' width='{max(w, 0.8):.1f}' "
                   f"height='{row - 6}' fill='{colour}'><title>{_e(lab)}: {v:g} {_e(unit)}"
                   f"</title></rect><text x='{left + w + 4:.1f}' y='{y + row - 7}' class='ax'>"
                   f"{v:.1f}</text>")
    out.append("</svg>")
    return "".join(out)


def render_runs_html(runs: Sequence[RunView], *, title: str, note: str = "") -> str:
    """One self-contained page comparing runs: figures, unowned time, ownership timelines."""
    head = "".join(f"<th>{_e(name)}</th>" for _, name, _ in _FIGURE_COLUMNS)
    body = []
    for r in runs:
        cells = []
        for key, _, fmt in _FIGURE_COLUMNS:
            value = r.figures.get(key)
            cells.append(f"<td>{_e(fmt.format(value)) if value is not None else '-'}</td>")
        body.append(f"<tr><td>{_e(r.label)}</td>{''.join(cells)}</tr>")
    table = (f"<div class='scroll'><table><tr><th>run</th>{head}</tr>{''.join(body)}</table>"
             "</div>")
    bars = _hbars_svg([r.label for r in runs],
                      [float(r.figures.get("unowned_s") or 0.0) for r in runs],
                      unit="unowned partition-seconds")
    span = max((float(r.intervals["end"].max()) - r.t0 for r in runs if len(r.intervals)),
               default=1.0)
    span = min(span, max((float(r.figures.get("bounce_s") or 0.0) for r in runs),
                         default=span) * 1.15 + 2.0)
    members = sorted({str(m) for r in runs for m in r.intervals["member"]})
    colour = _colours(members)
    cards = []
    for r in runs:
        if not len(r.intervals):
            continue
        unowned = r.figures.get("unowned_s")
        sub = f"{unowned:.1f} unowned partition-s" if unowned is not None else ""
        rows = len(set(r.intervals["partition"]))
        cards.append(
            f"<div class='card-run'><h3>{_e(r.label)} <span class='muted'>{_e(sub)}</span></h3>"
            + _timeline_svg(r.intervals, colour, t0=r.t0 - 1.0, t1=r.t0 + span, width=520,
                            row=max(3, min(12, 300 // max(rows, 1))), label=r.label)
            + "</div>")
    return f"""<!doctype html>
<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>
<style>{_CSS}
.runs{{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:18px}}
.card-run h3{{margin:6px 0}}
</style></head><body>
<h1>{_e(title)}</h1>
<p class='muted'>{_e(note)}</p>
<h2>Figures per run (the generations of the bounce)</h2>
{table}
<h2>Unowned partition-seconds</h2>
<div style='max-width:820px'>{bars}</div>
<h2>Ownership during the bounce</h2>
<p class='muted'>One row per partition, one colour per member; white is a partition nobody
owns. 0 s is the first partition released by the bounce; every run on the same scale.</p>
{_legend(colour)}
<div class='runs'>{''.join(cards)}</div>
</body></html>
"""
