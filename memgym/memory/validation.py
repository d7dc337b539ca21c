"""Argument checks shared by every memory model.

Every bad option or input is reported as a ``ValueError`` that names the option (or
argument) and the value given, before any parameter is created where possible.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from typing import Any

import jax
import numpy as np

from memgym.validation import check_flag, check_optional_positive, check_positive  # noqa: F401 (re-exported)


def check_chunk_size(chunk_size: Any, name: str = "chunk_size", none_means: str = "one chunk") -> None:
    """``chunk_size`` is ``None`` (the whole tape in one chunk) or an integer >= 1 (``name``: the option's name)."""
    check_optional_positive(name, chunk_size, none_means)


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


def options(cls: type) -> list[str]:
    """The options of the module class ``cls``: its dataclass fields but flax's ``parent`` and ``name``."""
    return [field.name for field in dataclasses.fields(cls) if field.name not in ("parent", "name")]


def required_options(cls: type) -> list[str]:
    """The options of ``cls`` without a default, in declaration order."""
    return [
        field.name
        for field in dataclasses.fields(cls)
        if field.name in options(cls)
        and field.default is dataclasses.MISSING
        and field.default_factory is dataclasses.MISSING
    ]


def option_descriptions(cls: type) -> dict[str, str]:
    """``{option: description}`` from the ``Attributes:`` sections of the docstrings of ``cls`` and its bases.

    An entry is a line ``name: text`` (or ``a, b: text`` for several options) at the first
    indentation under ``Attributes:``; deeper-indented lines continue it. reStructuredText
    backticks are dropped. The nearest class wins.
    """
    descriptions: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        lines = inspect.cleandoc(klass.__dict__.get("__doc__") or "").splitlines()
        if "Attributes:" not in lines:
            continue
        indent, names = None, []
        for line in lines[lines.index("Attributes:") + 1 :]:
            if not line.strip():
                continue
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            if depth < indent or depth == 0:
                break  # the section ended
            entry = re.fullmatch(r"([\w, ]+):\s+(.*)", line.strip())
            if depth == indent and entry:
                names = [name.strip() for name in entry.group(1).split(",")]
                for name in names:
                    descriptions[name] = entry.group(2)
            else:
                for name in names:
                    descriptions[name] += " " + line.strip()
    return {name: text.replace("``", "").rstrip(".") for name, text in descriptions.items()}
