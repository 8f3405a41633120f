"""Modules that moved, still importable under their old names for one release.

``import aiogroup.metrics`` (or any module under an old name, ``python -m aiogroup.chaos``
included) gives the module at its new home, the same object, with a ``DeprecationWarning``
naming the new one. The table is :data:`MOVED`; docs/design.md lists it for users.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import CodeType, ModuleType

__all__ = ["MOVED", "install"]

#: Old module name -> new module name (a package moves with everything under it).
MOVED: dict[str, str] = {
    "aiogroup.metrics": "aiogroup.observability.metrics",
    "aiogroup.telemetry": "aiogroup.observability.telemetry",
    "aiogroup.exporters": "aiogroup.observability.exporters",
    "aiogroup.listener": "aiogroup.client.callbacks",
    "aiogroup.admin": "aiogroup.inspector",
    "aiogroup.group_cli": "aiogroup.tools.group",
    "aiogroup.demo": "aiogroup.tools.demo",
    "aiogroup.chaos": "aiogroup.tools.chaos",
    "aiogroup.analytics": "aiogroup.tools.audit",
    "aiogroup.testing.broker": "aiogroup.testing.embedded.broker",
    "aiogroup.testing.coordinator": "aiogroup.testing.embedded.coordinator",
    "aiogroup.testing.faults": "aiogroup.testing.embedded.faults",
    "aiogroup.testing.kafka": "aiogroup.testing.launchers.kafka",
    "aiogroup.testing.tansu": "aiogroup.testing.launchers.tansu",
    "aiogroup.testing.processes": "aiogroup.testing.launchers.processes",
}


def new_name(name: str) -> str | None:
    """Where the module ``name`` lives now (None: it did not move)."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{self.old} moved to {self.new}; the old name goes away in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module at its new home is already executed

    # ``python -m`` under an old name runs the new module's code.
    def get_code(self, fullname: str) -> CodeType | None:
        spec = importlib.util.find_spec(self.new)
        loader = spec.loader if spec is not None else None
        get_code = getattr(loader, "get_code", None)
        return None if get_code is None else get_code(self.new)

    def is_package(self, fullname: str) -> bool:
        spec = importlib.util.find_spec(self.new)
        return spec is not None and spec.submodule_search_locations is not None


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        loader = _AliasLoader(fullname, new)
        return importlib.util.spec_from_loader(
            fullname, loader, is_package=loader.is_package(fullname)
        )


def install() -> None:
    """Put the alias finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())
