"""Old import paths of names that moved: they keep working, with a ``DeprecationWarning``, until memgym 0.3."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def forward(old_module: str, new_modules: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``old_module`` that hands out each name of ``new_modules`` (name -> the module
    it moved to) from its new module, warning with the new path."""

    def __getattr__(name: str) -> Any:
        if name not in new_modules:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        new = new_modules[name]
        warnings.warn(f"{old_module}.{name} moved to {new}.{name}; import it from {new} (the old path stops "
                      f"working in memgym 0.3)", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)

    return __getattr__
