"""Argument checks, one module for all of memgym (no JAX: the environments-only install uses it).

Every check raises ``ValueError`` naming the argument, the value given and what is
allowed, before anything is built or run. ``bool`` is never accepted as a number.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import Any, NamedTuple


def is_int(value: Any) -> bool:
    """Whether ``value`` is an integer (Python or NumPy; ``bool`` is not one here)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and type(value).__name__ != "bool_"


def check_int(name: str, value: Any, low: int | None = None, high: int | None = None, why: str = "") -> int:
    """``value`` as a Python ``int`` within ``[low, high]`` (either bound may be open: None)."""
    inside = is_int(value) and (low is None or value >= low) and (high is None or value <= high)
    if not inside:
        if low == 1 and high is None:
            allowed = "a positive integer"
        elif high is None:
            allowed = "an integer" + ("" if low is None else f" >= {low}")
        elif low is None:
            allowed = f"an integer <= {high}"
        else:
            allowed = f"an integer in [{low}, {high}]"
        raise ValueError(f"{name} must be {allowed}{f' ({why})' if why else ''}, got {name}={value!r}")
    return int(value)


def check_positive(**values: Any) -> None:
    """Every keyword argument is an integer >= 1."""
    for name, value in values.items():
        check_int(name, value, low=1)


def check_real(name: str, value: Any, low: float = -math.inf, high: float = math.inf, *,
               include_low: bool = True, include_high: bool = True) -> float:
    """``value`` as a finite ``float`` within the interval from ``low`` to ``high`` (bounds inclusive by default)."""
    number = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    inside = number and (low <= value if include_low else low < value) and (value <= high if include_high else value < high)
    if not inside:
        bounds = f"{'[' if include_low else '('}{low:g}, {high:g}{']' if include_high else ')'}"
        raise ValueError(f"{name} must be a number in {bounds}, got {name}={value!r}")
    return float(value)


def check_flag(**values: Any) -> None:
    """Every keyword argument is ``True`` or ``False``."""
    for name, value in values.items():
        if not (isinstance(value, bool) or type(value).__name__ == "bool_"):
            raise ValueError(f"{name} must be True or False, got {name}={value!r}")


def check_choice(name: str, value: Any, choices: Iterable[Any]) -> Any:
    """``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {name}={value!r}")
    return value


def check_optional_positive(name: str, value: Any, none_means: str) -> None:
    """``value`` is None (which means ``none_means``) or an integer >= 1."""
    if value is not None and not (is_int(value) and value >= 1):
        raise ValueError(f"{name} must be None ({none_means}) or a positive integer, got {name}={value!r}")


class Limit(NamedTuple):
    """The allowed range of a numeric command-line flag: ``low`` (inclusive unless ``open_low``) to ``high``."""

    low: float
    high: float
    integer: bool
    why: str = ""
    open_low: bool = False

    def describe(self) -> str:
        if self.integer:
            text = f"[{self.low:,}, {self.high:,}]"
        else:
            text = f"{'(' if self.open_low else '['}{self.low:g}, {self.high:g}]"
        return f"allowed: {text}" + (f"; {self.why}" if self.why else "")


def check_number(name: str, text: str | float, limit: Limit) -> int | float:
    """``text`` (``"1e6"`` allowed) as a number within ``limit``; NaN, infinity and fractions of a
    whole-number flag are refused with the flag, the value and the range."""
    value: int | float | None
    try:
        value = int(text)  # exact, however long
        shown = str(value)
    except (TypeError, ValueError):
        shown = repr(text)
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = None
    if isinstance(value, float) and limit.integer and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not limit.integer:
        value = float(value)
    shown = f"{name.lstrip('-').replace('-', '_')}={shown}"
    if limit.integer:
        least = "a positive integer" if limit.low == 1 else f"an integer >= {limit.low:,}"
    else:
        least = f"a number {'>' if limit.open_low else '>='} {limit.low:g}"
    if value is None or (isinstance(value, float) and (limit.integer or not math.isfinite(value))) \
            or not (limit.low < value if limit.open_low else limit.low <= value):
        if isinstance(value, float) and value == math.inf:
            raise ValueError(f"{name} must be at most {limit.high:g}, got {shown} ({limit.describe()})")
        raise ValueError(f"{name} must be {least}, got {shown} ({limit.describe()})")
    if value > limit.high:
        high = f"{limit.high:,}" if limit.integer else f"{limit.high:g}"
        raise ValueError(f"{name} must be at most {high}, got {shown} ({limit.describe()})")
    return value
