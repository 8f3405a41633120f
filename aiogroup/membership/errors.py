"""The membership layer's exceptions; they live in :mod:`aiogroup.errors`."""

from __future__ import annotations

from aiogroup.errors import AssignorError, RebalanceCallbackError

__all__ = ["AssignorError", "RebalanceCallbackError"]
