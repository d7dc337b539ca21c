"""A memoryless baseline: a per-step MLP with the memory-model interface.

``y[t]`` depends on ``x[t]`` only — nothing is remembered between steps, so on a
task whose answer was shown earlier (the T-Maze cue, POPGym's Repeat First) an
agent built on it can do no better than guess. It exists to show that memory
matters: the same agent with a recurrent or linear-transformer model learns what
this one cannot.

It follows the interface of :mod:`memgym.memory` so every agent accepts it: the
carry is an empty tuple (a pytree with no leaves, so batching, resetting and
checkpointing it are no-ops) and ``start`` is checked but otherwise unused.
"""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.initializers import HIDDEN
from memgym.memory.interface import check_tape
from memgym.validation import check_positive


class MLP(nn.Module):
    """``num_layers`` tanh layers of width ``features``, applied to each step independently.

    Attributes:
        features: output width ``d``.
        num_layers: number of dense + tanh layers (default 1).

    State of one stream: ``()`` (nothing). ``__call__(x [T, F], start [T] bool, carry)``
    returns ``(y [T, d], ())``.
    """

    features: int
    num_layers: int = 1

    # x[T, F] first meets the first layer's kernel [F, features] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("dense_0", "kernel"), 0)

    def initialize_carry(self) -> tuple:
        """The empty state ``()``; needs no parameters."""
        check_positive(features=self.features, num_layers=self.num_layers)
        return ()

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: tuple = ()) -> tuple[jax.Array, tuple]:
        check_positive(features=self.features, num_layers=self.num_layers)
        x, start = jnp.asarray(x), jnp.asarray(start, bool)
        check_tape(x, start, self)
        y = x.astype(jnp.float32)
        for i in range(self.num_layers):
            y = jnp.tanh(nn.Dense(self.features, kernel_init=HIDDEN, name=f"dense_{i}")(y))
        return y, ()
