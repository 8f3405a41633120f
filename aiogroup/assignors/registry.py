"""Look assignors up by their protocol name.

The built-in names are the ones Java, librdkafka and kafka-python use in
``partition.assignment.strategy``: ``range``, ``roundrobin``, ``sticky`` and
``cooperative-sticky``. Modules are imported only when their name is asked for, so a consumer
configured with ``range`` never loads the sticky machinery.

Users can add their own assignor under a new name::

    register_assignor("mine", MyAssignor)
    assignor = get_assignor("mine")

:func:`get_assignor` returns a new instance on every call: sticky assignors keep per-member
state in ``on_assignment``, so two consumers must not share one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType

from aiogroup.assignors.base import PartitionAssignor
from aiogroup.errors import ConfigurationError, UnknownAssignorError

__all__ = [
    "BUILTIN_ASSIGNORS",
    "UnknownAssignorError",
    "available_assignors",
    "get_assignor",
    "register_assignor",
    "unregister_assignor",
]

#: Built-in protocol name -> ``"module:ClassName"``, imported lazily by :func:`get_assignor`.
BUILTIN_ASSIGNORS: Mapping[str, str] = MappingProxyType(
    {
        "range": "aiogroup.assignors.range:RangeAssignor",
        "roundrobin": "aiogroup.assignors.roundrobin:RoundRobinAssignor",
        "sticky": "aiogroup.assignors.sticky:StickyAssignor",
        "cooperative-sticky": "aiogroup.assignors.cooperative_sticky:CooperativeStickyAssignor",
    }
)

AssignorFactory = Callable[[], PartitionAssignor]

_custom: dict[str, AssignorFactory] = {}


def available_assignors() -> list[str]:
    """Every name :func:`get_assignor` may resolve: built-ins then user-registered, sorted."""
    return sorted(BUILTIN_ASSIGNORS) + sorted(n for n in _custom if n not in BUILTIN_ASSIGNORS)


def register_assignor(name: str, factory: AssignorFactory, *, replace: bool = False) -> None:
    """Make ``get_assignor(name)`` return ``factory()`` (usually ``factory`` is the class).

    Refuses (``ConfigurationError``) an empty name, a name already registered unless
    ``replace``, and, even with ``replace``, a built-in name: the built-in names are the
    protocol names every other client in the group expects to mean Java's algorithm.
    """
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"assignor name must be a non-empty str, not {name!r}")
    if name in BUILTIN_ASSIGNORS:
        raise ConfigurationError(f"{name!r} is a built-in assignor name and cannot be replaced")
    if name in _custom and not replace:
        raise ConfigurationError(f"an assignor is already registered as {name!r}")
    if not callable(factory):
        raise ConfigurationError(f"assignor factory for {name!r} is not callable: {factory!r}")
    _custom[name] = factory


def unregister_assignor(name: str) -> None:
    """Forget a user-registered assignor (no error if it is not registered)."""
    _custom.pop(name, None)


def _load_builtin(name: str, target: str) -> PartitionAssignor:
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UnknownAssignorError(
            f"assignor {name!r} is not available: cannot import {module_name} ({exc})",
            name=name,
        ) from exc
    cls = getattr(module, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, PartitionAssignor)):
        raise UnknownAssignorError(
            f"assignor {name!r} is not available: {target} is not a PartitionAssignor", name=name
        )
    return cls()


def get_assignor(name: str) -> PartitionAssignor:
    """A new instance of the assignor registered as ``name``.

    Raises :class:`UnknownAssignorError` (a ``ConfigurationError``) for an unknown name, a
    built-in whose module cannot be imported, or a factory that does not produce a
    :class:`PartitionAssignor` whose ``name`` is ``name``.
    """
    target = BUILTIN_ASSIGNORS.get(name) if isinstance(name, str) else None
    if target is not None:
        assignor = _load_builtin(name, target)
    elif isinstance(name, str) and name in _custom:
        factory = _custom[name]
        try:
            assignor = factory()
        except Exception as exc:
            raise UnknownAssignorError(
                f"assignor factory for {name!r} failed: {exc!r}", name=name
            ) from exc
    else:
        known = ", ".join(available_assignors())
        raise UnknownAssignorError(
            f"unknown assignor {name!r}; known assignors: {known}", name=str(name)
        )
    if not isinstance(assignor, PartitionAssignor):
        raise UnknownAssignorError(
            f"assignor factory for {name!r} returned {assignor!r}, not a PartitionAssignor",
            name=name,
        )
    if getattr(assignor, "name", None) != name:
        raise UnknownAssignorError(
            f"assignor registered as {name!r} calls itself {getattr(assignor, 'name', None)!r}; "
            "the name is the protocol name put in JoinGroup, so they must match",
            name=name,
        )
    return assignor
