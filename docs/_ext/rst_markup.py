"""Griffe extension: read aiogroup's reST-flavoured docstrings as Markdown.

aiogroup's docstrings are written to read well as plain text (``help()``, an editor's hover),
with a few reST habits: ``:class:`Name``` roles, ``Text::`` before a literal block, simple
``====  ====`` tables and lists nested by two spaces. mkdocstrings renders docstrings as
Markdown, so this extension rewrites those four habits once the package is loaded:

- a role becomes a link when the name resolves to an aiogroup object (a *optional* autoref: no
  link, and no warning, when the object is private and therefore not rendered), plain code when
  it names something outside aiogroup (``asyncio``, ``aiokafka``), and a **warning** when it
  names nothing at all, so ``mkdocs build --strict`` fails on a stale reference;
- ``Text::`` becomes ``Text:`` (the indented block after it is already Markdown code);
- a simple table becomes a Markdown table (a list when it has no header row);
- list items nested by two spaces are re-indented by four, as Python-Markdown requires.

The docstrings themselves stay as they are.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

_logger = griffe.get_logger("aiogroup.docs.rst_markup")

_ROLE = re.compile(r":(?:py:)?(class|func|meth|attr|mod|data|exc|obj):`(~?)([^`<>]+?)`")
_BORDER = re.compile(r"^ *=+( +=+)+ *$")
_ITEM = re.compile(r"^( *)[-*] ")
_FENCE = re.compile(r"^ *(```|~~~)")
_PACKAGE = "aiogroup"


class RstMarkup(griffe.Extension):
    """Rewrite the reST habits of every docstring in the package (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs: Any) -> None:
        if pkg.name != _PACKAGE:
            return
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _markdown(obj, obj.docstring.value, loader)


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_walk(member))  # type: ignore[arg-type]
    return found


def _markdown(obj: griffe.Object, text: str, loader: griffe.GriffeLoader) -> str:
    text = _ROLE.sub(lambda m: _role(obj, m, loader), text)
    text = _tables(text)
    text = _literal_markers(text)
    return _nested_lists(text)


def _role(obj: griffe.Object, match: re.Match[str], loader: griffe.GriffeLoader) -> str:
    kind, tilde, target = match.groups()
    target = target.strip()
    shown = target.rsplit(".", 1)[-1] if tilde else target
    if kind in ("func", "meth"):
        shown += "()"
    code = f"<code>{html.escape(shown)}</code>"
    path = _resolve(obj, target, loader)
    if path is None:
        where = f"{obj.filepath}:{obj.lineno}" if obj.lineno else str(obj.filepath)
        _logger.warning("%s: :%s:`%s` names nothing in %s", where, kind, target, obj.path)
        return code
    if not path.startswith(_PACKAGE + "."):
        return code  # outside aiogroup (asyncio, aiokafka): no inventory offline, plain code
    return f'<autoref identifier="{html.escape(path)}" optional>{code}</autoref>'


def _resolve(obj: griffe.Object, target: str, loader: griffe.GriffeLoader) -> str | None:
    """The canonical path ``target`` names as seen from ``obj``, or None."""
    if target.split(".", 1)[0] in ("asyncio", "aiokafka", "kafka", "confluent_kafka"):
        return target
    head, _, rest = target.partition(".")
    candidates = []
    if target.startswith(_PACKAGE + "."):
        candidates.append(target)
    try:
        base = obj.resolve(head)
    except griffe.NameResolutionError:
        pass
    else:
        candidates.append(f"{base}.{rest}" if rest else base)
    for candidate in candidates:
        try:
            found = loader.modules_collection[candidate]
        except KeyError:
            continue
        try:
            return str(found.final_target.path if found.is_alias else found.path)
        except griffe.AliasResolutionError:
            return candidate
    return None


def _literal_markers(text: str) -> str:
    out = []
    for line in text.split("\n"):
        if line.strip() == "::":
            continue
        out.append(line[:-1] if line.endswith("::") and not line.endswith(":::") else line)
    return "\n".join(out)


def _tables(text: str) -> str:
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        end = _table_end(lines, i)
        if end is None:
            out.append(lines[i])
            i += 1
            continue
        out.extend(_table(lines[i : end + 1]))
        i = end + 1
    return "\n".join(out)


def _table_end(lines: list[str], start: int) -> int | None:
    """Index of the bottom border of a simple table whose top border is ``lines[start]``."""
    if not _BORDER.match(lines[start]):
        return None
    for j in range(start + 1, len(lines)):
        if not lines[j].strip():
            return None
        if lines[j] == lines[start] and (j + 1 == len(lines) or not lines[j + 1].strip()):
            return j
    return None


def _table(block: list[str]) -> list[str]:
    border = block[0]
    spans = [m.span() for m in re.finditer(r"=+", border)]
    inner = [n for n, line in enumerate(block) if n and line == border and n != len(block) - 1]
    header_end = inner[0] if inner else 0
    rows: list[list[str]] = []
    for n, line in enumerate(block[1:-1], start=1):
        if n == header_end:
            continue
        cells = [
            line[a : (b if k < len(spans) - 1 else None)].strip() for k, (a, b) in enumerate(spans)
        ]
        if rows and not cells[0] and n != header_end + 1:
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells, strict=True)]
        else:
            rows.append(cells)
    if header_end:
        header, body = rows[0], rows[1:]
        return [
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body),
            "",
        ]
    return ["", *(f"- {row[0]}: " + " ".join(row[1:]) for row in rows), ""]


def _nested_lists(text: str) -> str:
    out = []
    in_list = in_fence = False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            out.append(line)
            continue
        if not line.strip():
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        if _ITEM.match(line) and indent == 0:
            in_list = True
        elif indent == 0:
            in_list = False
        elif in_list:
            line = " " * indent + line
        out.append(line)
    return "\n".join(out)
