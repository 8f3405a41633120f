"""The long run's table: per broker, what was injected and what the checker found."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aiogroup.tools.chaos.checker import VIOLATION_KINDS

__all__ = ["markdown_table"]

_LABELS = {
    "double_ownership": "double ownership",
    "acting_on_other": "acting on another's",
    "acting_unowned": "acting without holding",
    "stranded": "stranded",
    "crash": "crashes",
    "callback_order": "callback order",
}


_QUANTILES = ("p50", "p90", "p99", "max")
#: The clients of the member-count rows, in this order: the first three always (the long run's
#: table keeps its shape), the peers of other languages when some run had them.
_CLIENTS = ("aiogroup", "librdkafka", "kafka-python", "java", "franz-go")


def _clients(summaries: Mapping[str, Mapping[str, Any]]) -> list[str]:
    present = {c for s in summaries.values() for c, n in s.get("members", {}).items() if n}
    return [c for i, c in enumerate(_CLIENTS) if i < 3 or c in present]


def _counts(found: Mapping[str, int]) -> str:
    """``aiogroup 0; librdkafka 3, kafka-python 1`` (aiogroup first, always shown)."""
    ours = found.get("aiogroup", 0)
    others = ", ".join(f"{k} {v}" for k, v in sorted(found.items()) if k != "aiogroup" and v)
    return f"**{ours}**" + (f" ({others})" if others else "")


def _seconds(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"


def markdown_table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """A Markdown table, one column per broker (``summaries``: :func:`checker.summarize`)."""
    brokers = list(summaries)
    rows: list[tuple[str, list[str]]] = []
    rows.append(("runs", [str(summaries[b]["runs"]) for b in brokers]))
    rows.append(
        (
            "seeds",
            [
                "{}-{}".format(*summaries[b]["seeds"]) if summaries[b].get("seeds") else "-"
                for b in brokers
            ],
        )
    )
    clients = _clients(summaries)
    for what, key in (("members started", "members"), ("record batches processed", "processed")):
        rows.append(
            (
                f"{what} ({' / '.join(clients)})",
                [
                    " / ".join(str(summaries[b].get(key, {}).get(c, 0)) for c in clients)
                    for b in brokers
                ],
            )
        )
    kinds = sorted({k for b in brokers for k in summaries[b]["events"]})
    for kind in kinds:
        counts = [str(summaries[b]["events"].get(kind, 0)) for b in brokers]
        rows.append((f"events: {kind}", counts))
    for kind in VIOLATION_KINDS:
        label = _LABELS[kind] + " (aiogroup; others)"
        rows.append((label, [_counts(summaries[b]["violations"].get(kind, {})) for b in brokers]))
    rows.append(
        (
            "convergence after the last event, s (p50 / p90 / p99 / max)",
            [
                " / ".join(_seconds(summaries[b]["convergence_s"][q]) for q in _QUANTILES)
                for b in brokers
            ],
        )
    )
    rows.append(("runs not converged", [str(summaries[b]["not_converged"]) for b in brokers]))
    rows.append(
        (
            "seeds failing (aiogroup)",
            [", ".join(str(s) for s in summaries[b]["failing_seeds"]) or "none" for b in brokers],
        )
    )
    lines = ["| | " + " | ".join(brokers) + " |", "|---|" + "---|" * len(brokers)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return "\n".join(lines)
