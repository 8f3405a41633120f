"""Lazy package attributes (PEP 562), and dependencies whose package ``__init__`` waits.

- :func:`lazy_attributes`: a package's names resolved from their module on first access. A
  helper every room of the package uses (the library, its test tooling and its tools).
- :func:`defer_package_init`: a dependency's package registered without running its
  ``__init__`` until something asks it for a name the ``__init__`` defines. aiogroup needs
  kafka-python's schema modules and aiokafka's transport and record reader, not their clients,
  which every ``import kafka.protocol...`` or ``import aiokafka.record...`` would otherwise load
  (kafka-python's ``__init__`` brings its admin, consumer, producer and network clients,
  aiokafka's its consumer and producer: about 10 MB of RSS).
"""

from __future__ import annotations

import _thread
import importlib
import importlib.util
import re
import sys
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

__all__ = ["defer_package_init", "lazy_attributes"]


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


# ``__version__ = "0.14.0"``: a dunder given a plain string literal, at the left margin.
_CONSTANT = re.compile(r"""^(__[a-z]+__) *= *(?:"([^"\\\n]*)"|'([^'\\\n]*)') *(?:#.*)?$""", re.M)


def defer_package_init(name: str) -> bool:
    """Put the top-level package ``name`` in ``sys.modules`` without running its
    ``__init__`` yet. True if it did; False if ``name`` was already imported (or is being
    imported), is not installed, or is not a plain source package (then nothing changes).

    The module registered is the package's own module object (its real ``__spec__``,
    ``__path__``, ``__file__`` and loader), so its submodules import as usual and nothing
    else runs. The ``__init__`` runs into that same object, once, the first time anyone asks
    the package for a name that is neither a submodule nor already set: ``import kafka;
    kafka.KafkaConsumer``, ``from aiokafka import AIOKafkaProducer``, ``from kafka import *``,
    ``aiokafka.__all__``. So a program that imports the package itself, before or after
    aiogroup, gets the whole package, and every class is the same object whichever way it was
    reached. Until then:

    - a submodule asked for by name is imported and returned (``from aiokafka import
      errors`` inside aiokafka, ``kafka.protocol``): what the import system does for a
      submodule the ``__init__`` has not imported;
    - the ``__init__``'s dunder string constants (``__version__ = "0.14.0"``, read from its
      source) are set at once: the package's own modules import them from the package while
      it is being loaded (aiokafka's ``client.py``: ``from aiokafka import __version__``),
      and running the ``__init__`` there would import that half-loaded module again.
    """
    if name in sys.modules or "." in name:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    loader = spec.loader if spec is not None else None
    if (
        spec is None
        or loader is None
        or spec.submodule_search_locations is None
        or not spec.has_location
        or not str(spec.origin).endswith("__init__.py")
        or not hasattr(loader, "get_source")
        or not hasattr(loader, "exec_module")
    ):
        return False
    try:
        source = loader.get_source(name)
    except (ImportError, OSError):
        return False
    if source is None:
        return False
    module = importlib.util.module_from_spec(spec)
    for match in _CONSTANT.finditer(source):
        setattr(module, match[1], match[2] if match[2] is not None else match[3])
    module.__getattr__ = _InitOnDemand(module, loader)  # type: ignore[method-assign]
    if name in sys.modules:  # imported meanwhile (another thread): keep that one
        return False
    sys.modules[name] = module
    return True


class _InitOnDemand:
    """A deferred package's ``__getattr__``: runs the package's ``__init__`` on demand."""

    def __init__(self, module: ModuleType, loader: Any) -> None:
        self._module = module
        self._loader = loader
        self._lock = _thread.RLock()
        self._running: int | None = None  # the thread running the __init__

    def __call__(self, attr: str) -> Any:
        module = self._module
        package = module.__name__
        if not (attr.startswith("__") and attr.endswith("__")):
            submodule = f"{package}.{attr}"
            if submodule in sys.modules or importlib.util.find_spec(submodule) is not None:
                return importlib.import_module(submodule)
        if self._running == _thread.get_ident():
            # Asked by the __init__ itself (or what it imports) while it runs: what a package
            # being imported says for a name it has not defined yet.
            raise AttributeError(
                f"partially initialized module {package!r} has no attribute {attr!r}"
            )
        with self._lock:  # another thread running it: wait for it to finish
            if vars(module).get("__getattr__") is self:
                self._running = _thread.get_ident()
                try:
                    self._loader.exec_module(module)
                finally:
                    self._running = None
                if vars(module).get("__getattr__") is self:  # the __init__ defines none
                    del module.__getattr__
        try:
            return vars(module)[attr]
        except KeyError:
            pass
        getattr_ = vars(module).get("__getattr__")
        if getattr_ is not None and getattr_ is not self:
            return getattr_(attr)  # the package's own (PEP 562)
        raise AttributeError(f"module {package!r} has no attribute {attr!r}")
