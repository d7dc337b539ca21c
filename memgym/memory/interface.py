"""The interface every memory model follows, and the checks of its input tape.

A memory model is a ``flax.linen.Module`` with ``initialize_carry() -> carry`` (one stream, no
parameters needed) and ``__call__(x [T, F], start [T], carry) -> (y [T, features], carry)``: one
stream's tape ``x`` with its episode-start flags. A model that knows which of its parameters first
consumes ``x`` declares it as the class attribute ``input_kernel = (path, axis)``: ``path`` the keys
from the model's ``params`` down to that array, ``axis`` its axis of length ``F``. :func:`check_tape`
then reports an ``x`` of another width by name instead of as a shape error deep inside flax. A model
whose carry enters a call without gradients (GTrXL's window) declares ``carry_passes_gradients =
False``, so that nothing cuts its tapes into pieces expecting gradients to cross them.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def input_width(model: Any) -> int | None:
    """The input feature width ``F`` that ``model``'s parameters were initialised for (its ``input_kernel``).

    ``None`` when that is unknown: the model declares no input kernel, is not bound to variables,
    is being initialised (then ``x`` defines ``F``), or lacks that parameter.
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
    equal the width its parameters were initialised for (:func:`input_width`).
    """
    if x.ndim != 2:
        raise ValueError(f"x must be a 2-D tape [T, F] of one stream (vmap for batches); got x with shape {tuple(x.shape)}")
    if start.shape != (x.shape[0],):
        raise ValueError(
            f"start must have shape [T] = ({x.shape[0]},), one start flag per row of x; "
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
