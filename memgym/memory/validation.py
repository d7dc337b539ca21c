"""Old home of the memory models' checks, split by job; the old imports work, with a ``DeprecationWarning``,
until memgym 0.3: argument checks are in :mod:`memgym.validation`, model options in
:mod:`memgym.memory.options`, tape checks in :mod:`memgym.memory.interface`, ``resolve_head_dim`` in
:mod:`memgym.memory.attention`.
"""

from __future__ import annotations

from typing import Any

from memgym.deprecation import forward


def _check_chunk_size(chunk_size: Any, name: str = "chunk_size", none_means: str = "one chunk") -> None:
    """What ``check_chunk_size`` was: ``chunk_size`` is None (``none_means``) or an integer >= 1."""
    from memgym.validation import check_optional_positive

    check_optional_positive(name, chunk_size, none_means)


#: old name -> its new dotted path
MOVED = {
    "options": "memgym.memory.options.options",
    "required_options": "memgym.memory.options.required_options",
    "option_descriptions": "memgym.memory.options.option_descriptions",
    "check_tape": "memgym.memory.interface.check_tape",
    "input_width": "memgym.memory.interface.input_width",
    "resolve_head_dim": "memgym.memory.attention.resolve_head_dim",
    "check_positive": "memgym.validation.check_positive",
    "check_flag": "memgym.validation.check_flag",
    "check_optional_positive": "memgym.validation.check_optional_positive",
    "check_chunk_size": ("memgym.validation.check_optional_positive(name, value, none_means)", lambda: _check_chunk_size),
}

__getattr__ = forward(__name__, MOVED)
