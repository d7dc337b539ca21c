"""memgym 0.1's ``memgym.agents.training``, split by job in 0.2: :mod:`memgym.agents.run` (the training loops),
:mod:`memgym.agents.checkpoints`, :mod:`memgym.agents.logs`. Old imports warn until 0.3."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

_MOVED = {"train_tmaze": "run", "train_gymnasium": "run", "TMAZE_IDS": "run", "save_checkpoint": "checkpoints",
          "load_checkpoint": "checkpoints", "plot_learning_curve": "logs", "STAT_KEYS": "logs"}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        module = f"memgym.agents.{_MOVED[name]}"
        warnings.warn(f"memgym.agents.training.{name} is now {module}.{name}; the old import stops working in "
                      "memgym 0.3", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(module), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
