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


def check_chunk_size(chunk_size: Any) -> None:
    """``chunk_size`` is ``None`` (the whole tape in one chunk) or an integer >= 1."""
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer)) or chunk_size < 1:
            raise ValueError(
                f"chunk_size must be None (one chunk) or a positive integer; got chunk_size={chunk_size!r}"
            )


def input_width(model: Any) -> int | None:
    """The input feature width ``F`` that ``model``'s parameters were initialised for.

    A model names the parameter that first consumes ``x`` in the class attribute
    ``input_kernel = (path, axis)``: ``path`` the keys from the model's ``params`` down to
    the array, ``axis`` the axis of that array that has length ``F``. Returns ``None``
    when the answer is unknown: the model declares no input kernel, is not bound to
    variables, is being initialised (then ``x`` defines ``F``), or lacks that parameter.
    """
    spec = getattr(type(model), "input_kernel", None)
    if spec is None or getattr(model, "scope", None) is None or model.is_initializing():
        return None
    path, axis = spec
    node: Any = model.variables.get("params")
    for key in path:
        if node is None or not hasattr(node, "get"):
            return None
        node = node.get(key)
    if node is None or not hasattr(node, "shape"):
        return None
    return int(np.shape(node)[axis])


def check_tape(x: jax.Array, start: jax.Array, model: Any = None) -> None:
    """Validate a single-stream tape: ``x[T, F]`` and ``start[T]``.

    With ``model`` (the bound module, i.e. ``self`` inside ``__call__``) ``F`` must also
    equal the width its parameters were initialised for (see :func:`input_width`), so a
    wrong feature size is reported by name instead of as a parameter-shape error deep
    inside flax.
    """
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D tape [T, F] of one stream (vmap for batches); got x with shape {tuple(x.shape)}")
    if start.shape != (x.shape[0],):
        raise ValueError(
            f"start must have shape [T] = ({x.shape[0]},), one begin flag per row of x; "
            f"got start with shape {tuple(start.shape)} and x with shape {tuple(x.shape)}"
        )
    if model is not None:
        width = input_width(model)
        if width is not None and x.shape[1] != width:
            raise ValueError(
                f"x has {x.shape[1]} features (x.shape = {tuple(x.shape)}) but this {type(model).__name__} "
                f"was initialised for {width}; pass x of shape [T, {width}] or initialise the model "
                f"with {x.shape[1]}-feature inputs"
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
