"""Argument checks shared by every memory model (DESIGN.md, "Errors")."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def check_positive(**values: Any) -> None:
    """Raise ``ValueError`` for the first argument that is not an integer >= 1."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {name}={value!r}")


def check_tape(x: jax.Array, start: jax.Array) -> None:
    """Validate a single-stream tape: ``x[T, F]`` and ``start[T]``."""
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D tape [T, F] of one stream (vmap for batches); got x with shape {tuple(x.shape)}")
    if start.shape != (x.shape[0],):
        raise ValueError(
            f"start must have shape [T] = ({x.shape[0]},), one begin flag per row of x; "
            f"got start with shape {tuple(start.shape)} and x with shape {tuple(x.shape)}"
        )


def resolve_head_dim(features: int, num_heads: int, head_dim: int | None) -> int:
    """The width of one attention head: ``head_dim``, or ``features // num_heads`` when it is None.

    The thesis's T-Maze models use 4 heads × 64 on a width of 128 (Table A.2), so an explicit
    ``head_dim`` need not divide anything; a derived one needs ``num_heads`` to divide ``features``.
    """
    check_positive(features=features, num_heads=num_heads)
    if head_dim is not None:
        check_positive(head_dim=head_dim)
        return head_dim
    if features % num_heads:
        raise ValueError(
            f"num_heads={num_heads} must divide features={features} when head_dim is None "
            f"(head_dim = features // num_heads); pass head_dim explicitly for another head width"
        )
    return features // num_heads
