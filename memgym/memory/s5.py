"""S5, a diagonal state space model, as a memory monoid (monoid paper App. E, eq. 62–66).

S5 (Smith et al. 2023) with the resettable scan of Lu et al. (2023). With a
diagonal complex state matrix ``Λ ∈ C^P`` (``P = state_size``), a learned
step size ``Δ ∈ R^P_{>0}`` and zero-order-hold discretisation

    Λ̄ = exp(ΛΔ),     B̄ = (Λ̄ − 1) / Λ ⊙ B           (row-wise, B ∈ C^{P×F})

the recurrence ``a_t = Λ̄ ⊙ a_{t−1} + B̄ x_t`` is the monoid over pairs
``(A, a)`` with ``A, a ∈ C^P`` (the diagonal of eq. 62's ``A`` and the state):

    H_I = (1, 0)                                          (eq. 63)
    (A, a) • (A', a') = (A' ⊙ A, A' ⊙ a + a')             (eq. 64)
    f(x_t) = (Λ̄, B̄ x_t)                                  (eq. 65)
    g(a_t) = (W_1 z + b_1) ⊙ σ(W_2 z + b_2),  z = GeLU(Re(C a_t))   (eq. 66)

with ``C ∈ C^{features×P}`` (eq. 66's ``W_c``). ``Λ`` is initialised from the
eigenvalues of HiPPO-N, the normal part of HiPPO-LegS (Smith et al. 2023,
§4.3): ``Re Λ = −1/2`` and ``Im Λ`` the ``P`` positive imaginary parts of a
``2P × 2P`` HiPPO-N matrix (one of each conjugate pair). ``Re Λ = −exp(·)`` is
kept negative by construction so ``|Λ̄| < 1`` for any parameters.

Carry: the state ``a ∈ C^P`` (complex64). The ``A`` half of an element never
influences later states (``(A, a) • (A', a')`` keeps only ``A' ⊙ a`` of the
left side), so the carry enters the scan as the element ``(1, a)``.
"""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.memory.monoid import Monoid, run_memory_monoid
from memgym.memory.validation import check_chunk_size, check_positive, check_tape

STEP_MIN = 1e-3  # range of the initial step sizes Δ (log-uniform; Smith et al. 2023 defaults)
STEP_MAX = 1e-1

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


def s5_monoid() -> Monoid:
    """The S5 memory monoid (eq. 62–64)."""
    return diagonal_linear_monoid()


def hippo_n_imaginary(state_size: int) -> np.ndarray:
    """Positive imaginary parts ``ω[P]`` of the eigenvalues ``−1/2 ± iω`` of the ``2P × 2P`` HiPPO-N matrix.

    HiPPO-N is ``−I/2 + S`` with ``S`` skew-symmetric, ``S_nk = −sqrt((n+½)(k+½))`` below the
    diagonal and ``+sqrt((n+½)(k+½))`` above it; ``−iS`` is Hermitian with eigenvalues ``±ω``.
    """
    q = np.sqrt(np.arange(2 * state_size) + 0.5)
    lower = np.tril(np.outer(q, q), -1)
    skew = lower.T - lower
    omega = np.linalg.eigvalsh(-1j * skew)  # ascending, symmetric about 0
    return omega[state_size:].astype(np.float32)


def complex_normal(std: float):
    """Initializer of the real or imaginary half of a complex matrix, each half ``N(0, std²)``."""

    def init(key: jax.Array, shape: tuple[int, ...], dtype=jnp.float32) -> jax.Array:
        return std * jax.random.normal(key, shape, dtype)

    return init


class S5(nn.Module):
    """S5 memory model: ``x[T, F]`` → ``y[T, features]``; carry ``a ∈ C^{state_size}`` (complex64).

    Attributes:
        features: output width (and width of ``Re(C a)``).
        state_size: ``P``, the number of complex state channels.
        chunk_size: tape chunk length for :func:`run_memory_monoid` (``None``: one chunk).
    """

    features: int = 128
    state_size: int = 64
    chunk_size: int | None = 256

    # x[T, F] first meets B [state_size, F] (see validation.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("b_real",), 1)

    def _check(self) -> None:
        check_positive(features=self.features, state_size=self.state_size)
        check_chunk_size(self.chunk_size)

    def initialize_carry(self) -> jax.Array:
        self._check()
        return jnp.zeros((self.state_size,), jnp.complex64)

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: jax.Array) -> tuple[jax.Array, jax.Array]:
        self._check()
        start = jnp.asarray(start, bool)
        check_tape(x, start, self)
        x = jnp.asarray(x, jnp.float32)
        length, width = x.shape
        size = self.state_size

        log_neg_real = self.param("log_neg_real", nn.initializers.constant(np.log(0.5)), (size,))
        imag = self.param("imag", lambda key, shape: jnp.asarray(hippo_n_imaginary(shape[0])), (size,))
        log_step = self.param(
            "log_step",
            lambda key, shape: jax.random.uniform(key, shape, minval=np.log(STEP_MIN), maxval=np.log(STEP_MAX)),
            (size,),
        )
        b_real = self.param("b_real", complex_normal(np.sqrt(0.5 / width)), (size, width))
        b_imag = self.param("b_imag", complex_normal(np.sqrt(0.5 / width)), (size, width))
        c_real = self.param("c_real", complex_normal(np.sqrt(0.5 / size)), (self.features, size))
        c_imag = self.param("c_imag", complex_normal(np.sqrt(0.5 / size)), (self.features, size))

        # Zero-order hold: Λ̄ = exp(ΛΔ), B̄ = (Λ̄ − 1)/Λ ⊙ B.
        lam = jax.lax.complex(-jnp.exp(log_neg_real), imag)
        lam_bar = jnp.exp(lam * jnp.exp(log_step))
        b_bar = ((lam_bar - 1.0) / lam)[:, None] * jax.lax.complex(b_real, b_imag)
        elements = (jnp.broadcast_to(lam_bar, (length, size)), x @ b_bar.T)  # f, eq. 65

        def decode(states: tuple[jax.Array, jax.Array], _: jax.Array) -> jax.Array:
            _, state = states
            return jnp.real(state) @ c_real.T - jnp.imag(state) @ c_imag.T  # Re(C a)

        readout, element = run_memory_monoid(
            s5_monoid(),
            elements,
            decode,
            x,
            start,
            (jnp.ones_like(carry), carry),
            chunk_size=self.chunk_size,
        )
        z = nn.gelu(readout)  # g, eq. 66
        y = nn.Dense(self.features, name="w_1")(z) * nn.sigmoid(nn.Dense(self.features, name="w_2")(z))
        return y, element[1]
