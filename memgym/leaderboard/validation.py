"""The leaderboard's one argument check (no JAX: the any-framework tier runs without it)."""

from __future__ import annotations

import numbers
from typing import Any


def check_positive(**values: Any) -> None:
    """Raise ``ValueError`` for the first argument that is not an integer >= 1 (``bool`` is not one)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")
