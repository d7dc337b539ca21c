"""Names renamed or moved in memgym 0.2: the old ones keep working, with a ``DeprecationWarning`` naming the new
one, until memgym 0.3 (no JAX: any package may use it)."""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

#: What an old name became: the dotted path of a name (``"memgym.memory.options.options"``), or
#: ``(what to write instead, a function that builds the old object from it)``.
Replacement = str | tuple[str, Callable[[], Any]]


def forward(old_module: str, moved: Mapping[str, Replacement]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old_module`` that hands out each old name of ``moved`` from its new home,
    warning with the new name."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        new = moved[name]
        text = new if isinstance(new, str) else new[0]
        warnings.warn(f"{old_module}.{name} is now {text}; the old name stops working in memgym 0.3",
                      DeprecationWarning, stacklevel=2)
        if isinstance(new, str):
            module, _, attribute = new.rpartition(".")
            return getattr(importlib.import_module(module), attribute)
        return new[1]()

    return __getattr__


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a moved module's old dotted path: the module at its new path, under both names."""

    def __init__(self, moved: Mapping[str, str]) -> None:
        self.moved = dict(moved)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(fullname, self) if fullname in self.moved else None

    def create_module(self, spec: Any) -> Any:
        new = self.moved[spec.name]
        # stacklevel 2: the import statement's line (warnings skips the frames of the import machinery)
        warnings.warn(f"{spec.name} is now {new}; the old path stops working in memgym 0.3", DeprecationWarning,
                      stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        """Nothing to run: the module ran under its new path."""


def forward_modules(moved: Mapping[str, str]) -> None:
    """Keep each old dotted module path of ``moved`` importable (``import``, ``from … import``) as the module at its
    new path, warning with the new path on the first import. Calling it again (a reloaded package) adds nothing
    twice: the paths join the one finder already installed."""
    finder = next((f for f in sys.meta_path if isinstance(f, _MovedModules)), None)
    if finder is None:
        sys.meta_path.insert(0, _MovedModules(moved))
    else:
        finder.moved.update(moved)
