"""Lazy package attributes (PEP 562): names resolved from their module on first access.

A helper every room of the package uses (the library, its test tooling and its tools).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``where`` maps each public name to the
    module that defines it (``".broker"`` is relative to ``package``)."""

    def getattr_(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    def dir_() -> list[str]:
        return sorted([*vars(importlib.import_module(package)), *where])

    return getattr_, dir_
