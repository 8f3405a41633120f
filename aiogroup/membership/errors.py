"""Exceptions the membership layer adds to :mod:`aiogroup.errors`."""

from __future__ import annotations

from aiogroup.errors import CallbackError

__all__ = ["AssignorError", "RebalanceCallbackError"]


class RebalanceCallbackError(CallbackError):
    """A rebalance listener callback raised; the user's exception is ``__cause__``.

    Only the first exception of a rebalance is reported (KIP-429); the assignment change
    stands whatever the callbacks did. ``callback`` names the method that raised and
    ``partitions`` the partitions it was given.
    """

    def __init__(
        self, message: str, *, callback: str = "", partitions: frozenset[object] = frozenset()
    ) -> None:
        super().__init__(message)
        self.callback = callback
        self.partitions = partitions


class AssignorError(CallbackError):
    """The assignor raised in ``assign`` (leader) or ``on_assignment``; the cause is attached."""
