"""The leaderboard's argument checks (no JAX: the any-framework tier runs without it).

:func:`check_positive` for the fields of a budget; :func:`check_number` for a
value with a range, and the ranges of the command line's numeric flags
(:data:`LIMITS`): every value is refused before anything runs, with the flag,
the value and the allowed range, rather than failing (or running forever)
somewhere inside a run.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple


def check_positive(**values: Any) -> None:
    """Raise ``ValueError`` for the first argument that is not an integer >= 1 (``bool`` is not one)."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")


class Limit(NamedTuple):
    """The allowed range of a numeric flag: ``low`` (inclusive unless ``open_low``) to ``high`` (inclusive)."""

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


# Steps count inside jit in int32 (ScoredEnv's counters, the agents' scan lengths).
MAX_TOTAL_STEPS = 2**31 - 1
STEPS = Limit(1, MAX_TOTAL_STEPS, True, "2**31-1: the JAX tier counts a cell's steps in int32")
SEEDS = Limit(1, 1000, True, "the seeds of a value train as one batch")
EVAL_EPISODES = Limit(1, 1000, True, "evaluation seeds are 2000003 + 1000*value + episode: more episodes would "
                                     "replay the next value's")
SECONDS = Limit(0, 1e6, False, "1e6 s is 11.6 days; the alarm timer overflows on huge values", open_low=True)
CPUS = Limit(0, 1024, False, open_low=True)
GPUS = Limit(0, 1024, False)

# ``memgym leaderboard check``: each call into the agent (a JAX call's compilation included) must return by then.
DEFAULT_STEP_TIMEOUT = 120.0

LIMITS = {"--steps": STEPS, "--seeds": SEEDS, "--eval-episodes": EVAL_EPISODES, "--cell-timeout": SECONDS,
          "--step-timeout": SECONDS, "--cpus-per-task": CPUS, "--gpus-per-task": GPUS}


def check_number(name: str, text: str | float, limit: Limit) -> int | float:
    """``text`` (``"1e6"`` allowed) as a number within ``limit``; ``ValueError`` naming ``name``, the value and
    the range otherwise (NaN, infinity and fractions of a whole-number flag included)."""
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
