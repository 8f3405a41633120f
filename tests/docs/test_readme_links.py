"""Every relative link in README.md leads somewhere.

A link to a file must name one that exists in the repository; a link with an anchor into a
``docs/`` page must name a heading of that page, both as MkDocs numbers headings (the site) and
as GitHub does (the repository view), so the link works in both places. ``mkdocs build
--strict`` checks the links between the pages of the site; README.md is not part of the site,
hence this test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

markdown = pytest.importorskip("markdown", reason="the docs extra is not installed")

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"

_FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`[^`\n]*`")
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.MULTILINE)
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)


def link_targets(text: str) -> list[str]:
    """The link and image targets of a Markdown text, outside code."""
    text = _CODE.sub("", _FENCE.sub("", text))
    return _INLINE.findall(text) + _REFERENCE.findall(text)


def mkdocs_anchors(text: str) -> set[str]:
    """Heading ids as the site has them (Python-Markdown's toc extension, as in mkdocs.yml)."""
    md = markdown.Markdown(extensions=["toc", "attr_list", "tables", "fenced_code"])
    md.convert(text)
    ids: set[str] = set()
    pending = list(md.toc_tokens)
    while pending:
        token = pending.pop()
        ids.add(token["id"])
        pending.extend(token["children"])
    return ids


def github_anchors(text: str) -> set[str]:
    """Heading ids as GitHub gives them: lower case, punctuation dropped, spaces to hyphens."""
    ids: set[str] = set()
    seen: dict[str, int] = {}
    for _level, title in _HEADING.findall(_FENCE.sub("", text)):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
        plain = re.sub(r"(\*\*|__|\*|_)(.+?)\1", r"\2", plain)
        slug = re.sub(r"[^\w\- ]", "", plain.strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        ids.add(slug if count == 0 else f"{slug}-{count}")
    return ids


def broken_links(page: Path, root: Path) -> list[str]:
    """One line per relative link of ``page`` that leads nowhere."""
    text = page.read_text(encoding="utf-8")
    problems = []
    for target in link_targets(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
            continue  # https:, mailto:: not ours to check offline
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_relative_to(root):
            problems.append(f"{target}: outside the repository")
            continue
        if not dest.exists():
            problems.append(f"{target}: {dest.relative_to(root)} does not exist")
            continue
        if not anchor:
            continue
        if dest.suffix != ".md":
            problems.append(f"{target}: an anchor into a file that is not Markdown")
            continue
        dest_text = dest.read_text(encoding="utf-8")
        where = {"GitHub": github_anchors(dest_text)}
        if dest.is_relative_to(root / "docs"):
            where["the docs site"] = mkdocs_anchors(dest_text)
        for name, anchors in where.items():
            if anchor not in anchors:
                problems.append(f"{target}: no heading #{anchor} in {dest.name} on {name}")
    return problems


def test_every_relative_link_in_the_readme_leads_somewhere() -> None:
    assert link_targets(README.read_text(encoding="utf-8")), "README.md has no links at all?"
    assert broken_links(README, ROOT) == []


def test_the_readme_stays_short() -> None:
    # The reference lives in docs/; the README keeps the pitch, the two commands, the quick
    # start, the comparison and the links (issue 16).
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < 300, f"README.md has {lines} lines: move the new material into docs/"


def test_the_checker_reports_each_kind_of_broken_link(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.md").write_text("# Page\n\n## Writing your own `thing`\n\ntext\n")
    (tmp_path / "script.py").write_text("print()\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n## Two commands\n\n"
        "[ok](docs/page.md) [ok](docs/page.md#writing-your-own-thing) [ok](#two-commands)\n"
        "[ok](script.py) [ok](https://example.org/missing) `[not a link](nowhere.md)`\n"
        "```\n[in a fence](nowhere.md)\n```\n"
        "[missing](docs/gone.md) [bad anchor](docs/page.md#nope) [self](#nowhere)\n"
        "[anchor into code](script.py#L1) [escape](../outside.md) ![image](docs/img.png)\n"
        "[ref]: docs/also-gone.md\n"
    )
    problems = broken_links(readme, tmp_path)
    assert [p.split(":")[0] for p in problems] == [
        "docs/gone.md",
        "docs/page.md#nope",
        "docs/page.md#nope",
        "#nowhere",
        "script.py#L1",
        "../outside.md",
        "docs/img.png",
        "docs/also-gone.md",
    ], problems
