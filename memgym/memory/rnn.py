"""Recurrent baselines: LSTM and GRU over a tape with episode-start resets.

* LSTM — Hochreiter & Schmidhuber (1997), *Long Short-Term Memory*.
* GRU — Cho et al. (2014), *Learning Phrase Representations using RNN
  Encoder–Decoder for Statistical Machine Translation*.

The recurrent baselines of the recurrent-linear-transformers thesis (§2.3.1; sizes
in Table A.2: LSTM d = 600, GRU d = 680). The carry is reset to the zero state
*before* any ``x[t]`` with ``start[t]`` set, so no information crosses an episode
start; one flax cell, its parameters shared by every step, is scanned over the tape.

Convention: models return ``(y, carry)`` like all of memgym.memory; flax's cells and ``nn.scan`` bodies are carry-first.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.initializers import orthogonal
from memgym.memory.interface import check_tape
from memgym.validation import check_positive

Carry = Any


class _ResettingStep(nn.Module):
    """One time step, the body ``nn.scan`` lifts over the tape (carry-first, as ``nn.scan`` requires):
    ``(carry, (x [F], start [])) -> (carry, h [features])``. Resets the carry where ``start`` is set,
    then applies the cell."""

    cell: type[nn.Module]
    features: int

    @nn.compact
    def __call__(self, carry: Carry, inputs: tuple[jax.Array, jax.Array]) -> tuple[Carry, jax.Array]:
        x, start = inputs
        carry = jax.tree.map(lambda c: jnp.where(start, jnp.zeros_like(c), c), carry)
        cell = self.cell(features=self.features, kernel_init=orthogonal(), recurrent_kernel_init=orthogonal(), name="cell")
        return cell(carry, x)


class _RecurrentBaseline(nn.Module):
    """A flax recurrent ``cell`` scanned over a tape with resets: ``(x [T, F], start [T], carry) -> (y [T, d], carry)``."""

    features: int

    cell: ClassVar[type[nn.Module]]  # the flax cell, carry-first: cell(carry, x) -> (carry, h)

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, Carry]:
        check_positive(features=self.features)
        x, start = jnp.asarray(x), jnp.asarray(start, bool)
        check_tape(x, start, self)
        steps = nn.scan(_ResettingStep, variable_broadcast="params", split_rngs={"params": False}, in_axes=0, out_axes=0)
        carry, y = steps(cell=self.cell, features=self.features, name="scan")(carry, (x, start))
        return y, carry


class LSTM(_RecurrentBaseline):
    """Long short-term memory (Hochreiter & Schmidhuber, 1997; thesis §2.3.1).

    Attributes:
        features: width ``d`` of the hidden state (thesis Table A.2 uses 600).

    State of one stream: ``(c [d], h [d])`` — cell state and hidden state,
    zeros at an episode start. ``__call__(x [T, F], start [T] bool, carry)``
    returns ``(y [T, d], carry)`` with ``y[t] = h_t``.
    """

    cell: ClassVar[type[nn.Module]] = nn.OptimizedLSTMCell
    # x[T, F] first meets the cell's input-gate kernel [F, features] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("scan", "cell", "ii", "kernel"), 0)

    def initialize_carry(self) -> tuple[jax.Array, jax.Array]:
        """The zero state ``(c, h)``, each ``[features]``; needs no parameters."""
        check_positive(features=self.features)
        zeros = jnp.zeros((self.features,), jnp.float32)
        return zeros, zeros


class GRU(_RecurrentBaseline):
    """Gated recurrent unit (Cho et al., 2014; thesis §2.3.1).

    Attributes:
        features: width ``d`` of the hidden state (thesis Table A.2 uses 680).

    State of one stream: ``h [d]``, zeros at an episode start.
    ``__call__(x [T, F], start [T] bool, carry)`` returns ``(y [T, d], carry)``
    with ``y[t] = h_t``.
    """

    cell: ClassVar[type[nn.Module]] = nn.GRUCell
    # x[T, F] first meets the cell's reset-gate kernel [F, features] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("scan", "cell", "ir", "kernel"), 0)

    def initialize_carry(self) -> jax.Array:
        """The zero hidden state ``h [features]``; needs no parameters."""
        check_positive(features=self.features)
        return jnp.zeros((self.features,), jnp.float32)
