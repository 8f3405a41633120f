"""The layout shows the architecture (issue 24): the library never imports the test tooling or
the tools; the test tooling never imports the tools; no room imports another room's private
names; no module grows past the size that hides its parts."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "aiogroup"

#: Files allowed past LIMIT lines, each with the reason it stays whole.
LIMIT = 1_000
EXCEPTIONS: dict[str, str] = {
    # The state table's handlers, one per event, around one state: the parts that own state of
    # their own live beside it (liveness, leader, leaving, commits, ownership, interest,
    # requests); splitting the handlers from the table they route would scatter one machine.
    "aiogroup/membership/machine.py": "the classic machine's event handlers",
}


def modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def room(module: str) -> str:
    """``aiogroup.client.member`` -> ``aiogroup.client``; top-level modules are rooms too, and
    ``python -m aiogroup`` (``aiogroup.__main__``) belongs to the tools it starts."""
    if module == "aiogroup.__main__":
        return "aiogroup.tools"
    parts = module.split(".")
    return ".".join(parts[:2])


def imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import in ``path`` (name None for ``import x``)."""
    tree = ast.parse(path.read_text(), str(path))
    out: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((alias.name, None) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.extend((node.module, alias.name) for alias in node.names)
    return out


def test_the_library_never_imports_testing_or_tools() -> None:
    bad = []
    for name, path in modules().items():
        if room(name) in ("aiogroup.testing", "aiogroup.tools"):
            continue
        for module, _ in imports(path):
            if module.startswith(("aiogroup.testing", "aiogroup.tools")):
                bad.append(f"{name} imports {module}")
    assert bad == []


def test_the_test_tooling_never_imports_the_tools() -> None:
    bad = [
        f"{name} imports {module}"
        for name, path in modules().items()
        if name.startswith("aiogroup.testing")
        for module, _ in imports(path)
        if module.startswith("aiogroup.tools")
    ]
    assert bad == []


def test_no_private_names_across_rooms() -> None:
    bad = []
    for name, path in modules().items():
        for module, imported in imports(path):
            if not module.startswith("aiogroup") or room(module) == room(name):
                continue
            private_module = any(p.startswith("_") for p in module.split(".")[1:])
            private_name = (
                imported is not None and imported.startswith("_") and not imported.endswith("__")
            )
            if private_module or private_name:
                bad.append(f"{name} imports {module}:{imported}")
    assert bad == []


def test_no_module_hides_its_parts() -> None:
    big = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text().splitlines())) > LIMIT
    }
    assert {k: v for k, v in big.items() if k not in EXCEPTIONS} == {}


#: The sans-I/O core: it takes ``now`` and returns actions; it never reads a clock, never
#: touches a socket and never imports asyncio (h11/aioquic style).
SANS_IO = (
    "aiogroup.protocol",
    "aiogroup.assignors",
    "aiogroup.membership",
    "aiogroup.config",
    "aiogroup.errors",
    "aiogroup.observability.metrics",
    "aiogroup.observability.stats",
    "aiogroup.observability.registry",
    "aiogroup.observability.lag",
    "aiogroup.observability.health",
    "aiogroup.consumer.state",
    "aiogroup.consumer.fetch_session",
    "aiogroup.client.reachability",
    "aiogroup.testing.embedded.coordinator",
    "aiogroup.testing.embedded.group",
    "aiogroup.testing.embedded.hashorder",
    "aiogroup.testing.embedded.consumer_admin",
    "aiogroup.testing.embedded.consumer_classic",
    "aiogroup.testing.embedded.consumer_group",
    "aiogroup.testing.embedded.consumer_messages",
    "aiogroup.testing.embedded.consumer_requests",
    "aiogroup.testing.embedded.server_assignors",
)
FORBIDDEN = {"asyncio", "socket", "time", "datetime", "selectors", "threading"}


def test_the_sans_io_core_reads_no_clock_and_does_no_io() -> None:
    checked, bad = 0, []
    for name, path in modules().items():
        if not any(name == core or name.startswith(core + ".") for core in SANS_IO):
            continue
        checked += 1
        for module, _ in imports(path):
            if module.split(".")[0] in FORBIDDEN:
                bad.append(f"{name} imports {module}")
    assert checked >= 30 and bad == []
