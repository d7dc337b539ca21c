"""Diagonal linear recurrences with complex state — the part S5 and LRU share (monoid paper App. E, eq. 62–71).

Both keep a state ``a ∈ C^P`` (``P = state_size``) with

    a_t = λ̄ ⊙ a_{t−1} + B̄ x_t,        B̄ = s ⊙ B  (row-wise, B ∈ C^{P×F}),

for a diagonal ``λ̄ ∈ C^P`` with ``|λ̄| < 1`` and a per-channel input scale ``s ∈ C^P``;
they differ in how ``λ̄`` and ``s`` are parametrised and in the decoder after the
readout ``Re(C a_t)``, ``C ∈ C^{features×P}``. As a memory monoid, on pairs ``(A, a)``
(the accumulated decay and the state):

    H_I = (1, 0)                                              (eq. 63 / 67)
    (A, a) • (A', a') = (A' ⊙ A, A' ⊙ a + a')                 (eq. 64 / 68–69)
    f(x_t) = (λ̄, B̄ x_t)                                      (eq. 65 / 70)

Carry: the state ``a ∈ C^P`` (complex64). The ``A`` half of an element never
influences later states (``(A, a) • (A', a')`` keeps only ``A' ⊙ a`` of the left
side), so the carry enters the scan as the element ``(1, a)``.
"""

from __future__ import annotations

from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import MonoidMemory, Tape
from memgym.validation import check_optional_positive, check_positive

DiagonalElement = tuple[jax.Array, jax.Array]  # (A[..., P], a[..., P]), both complex


def diagonal_linear_monoid() -> Monoid:
    """The monoid of a diagonal linear recurrence ``a_t = A_t ⊙ a_{t−1} + b_t`` (eq. 62–64 / 67–69).

    Elements ``(A, a)``: arrays of the same shape (``[P]`` unbatched), usually complex.
    ``(A, a) • (A', a') = (A' ⊙ A, A' ⊙ a + a')``, identity ``(1, 0)`` — exact, so a
    reset (left side replaced by the identity) leaves ``(A', a')`` bit for bit.
    """

    def op(left: DiagonalElement, right: DiagonalElement) -> DiagonalElement:
        (decay, state), (decay_right, state_right) = left, right
        return decay_right * decay, decay_right * state + state_right

    def identity(like: DiagonalElement) -> DiagonalElement:
        decay, state = like
        return jnp.ones_like(decay), jnp.zeros_like(state)

    return Monoid(op=op, identity=identity)


def complex_normal(std: float):
    """Initializer of the real or imaginary half of a complex matrix, each half ``N(0, std²)``."""

    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        return std * jax.random.normal(key, shape, dtype)

    return init


class DiagonalSSM(MonoidMemory):
    """A diagonal complex linear recurrence as a :class:`MonoidMemory`: ``x[T, F]`` → ``y[T, features]``.

    Subclasses supply :meth:`recurrence` (``λ̄`` and ``s``, creating their parameters)
    and :meth:`decode` (the decoder after ``Re(C a_t)``), and declare ``chunk_size``.
    Parameters here: ``b_real``, ``b_imag`` (``B``, each half ``N(0, 1/(2F))``) and
    ``c_real``, ``c_imag`` (``C``, each half ``N(0, readout_variance / P)``).

    Attributes:
        features: output width (and width of the readout ``Re(C a)``).
        state_size: ``P``, the number of complex state channels.
    """

    features: int = 128
    state_size: int = 64

    # x[T, F] first meets B [state_size, F] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("b_real",), 1)
    readout_variance = 0.5  # variance of each half of an entry of C, times P (a class constant)

    def check(self) -> None:
        check_positive(features=self.features, state_size=self.state_size)
        check_optional_positive("chunk_size", self.chunk_size, "one chunk")

    def initialize_carry(self) -> jax.Array:
        """The state ``a = 0 ∈ C^P`` (complex64)."""
        self.check()
        return jnp.zeros((self.state_size,), jnp.complex64)

    def recurrence(self) -> tuple[jax.Array, jax.Array]:
        """``(λ̄ [P], s [P])``, both complex: the per-step decay and the scale of ``B̄ = s ⊙ B``."""
        raise NotImplementedError

    def monoid(self) -> Monoid:
        return diagonal_linear_monoid()

    def project(self, x: jax.Array, start: jax.Array, carry: jax.Array) -> Tape:
        """Elements ``f(x_t) = (λ̄, B̄ x_t)`` (eq. 65 / 70) ``[T, P]`` each; read weights ``(Re C, Im C)``."""
        length, width = x.shape
        size = self.state_size
        decay, input_scale = self.recurrence()
        b_real = self.param("b_real", complex_normal(np.sqrt(0.5 / width)), (size, width))
        b_imag = self.param("b_imag", complex_normal(np.sqrt(0.5 / width)), (size, width))
        c_std = np.sqrt(self.readout_variance / size)
        c_real = self.param("c_real", complex_normal(c_std), (self.features, size))
        c_imag = self.param("c_imag", complex_normal(c_std), (self.features, size))
        b_bar = input_scale[:, None] * jax.lax.complex(b_real, b_imag)
        elements = (jnp.broadcast_to(decay, (length, size)), x @ b_bar.T)
        return Tape(inputs=elements, weights=(c_real, c_imag))

    def read(self, states: DiagonalElement, queries: tuple, weights: tuple[jax.Array, jax.Array]) -> jax.Array:
        """``Re(C a_t)`` ``[K, features]`` of the states ``a_t`` ``[K, P]``."""
        _, state = states
        c_real, c_imag = weights
        return jnp.real(state) @ c_real.T - jnp.imag(state) @ c_imag.T

    def element_from_carry(self, carry: jax.Array) -> DiagonalElement:
        return jnp.ones_like(carry), carry

    def carry_from_element(self, element: DiagonalElement) -> jax.Array:
        return element[1]
