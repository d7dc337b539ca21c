"""Names renamed or moved in memgym 0.2: the old ones keep working, with a ``DeprecationWarning`` naming the new
one, until memgym 0.3 (no JAX: any package may use it)."""

from __future__ import annotations

import importlib
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
