"""S5, a diagonal state space model, as a memory monoid (monoid paper App. E, eq. 62–66).

S5 (Smith et al. 2023) with the resettable scan of Lu et al. (2023): a
:class:`~memgym.memory.diagonal_ssm.DiagonalSSM` with a diagonal complex state
matrix ``Λ ∈ C^P`` (``P = state_size``), a learned step size ``Δ ∈ R^P_{>0}`` and
zero-order-hold discretisation

    Λ̄ = exp(ΛΔ),     B̄ = (Λ̄ − 1) / Λ ⊙ B           (row-wise, B ∈ C^{P×F})

so the recurrence ``a_t = Λ̄ ⊙ a_{t−1} + B̄ x_t`` is the monoid over pairs
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

Carry: the state ``a ∈ C^P`` (complex64).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.deprecation import forward
from memgym.memory.diagonal_ssm import DiagonalSSM

__all__ = ["S5", "hippo_n_imaginary"]

STEP_MIN = 1e-3  # range of the initial step sizes Δ (log-uniform; Smith et al. 2023 defaults)
STEP_MAX = 1e-1


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


class S5(DiagonalSSM):
    """S5 memory model: ``x[T, F]`` → ``y[T, features]``; carry ``a ∈ C^{state_size}`` (complex64).

    Attributes:
        features: output width (and width of ``Re(C a)``).
        state_size: ``P``, the number of complex state channels.
        chunk_size: steps per checkpointed chunk of the scan (``None``: the whole tape in one chunk).
    """

    chunk_size: int | None = 256

    def recurrence(self) -> tuple[jax.Array, jax.Array]:
        """Zero-order hold: ``Λ̄ = exp(ΛΔ)`` and the scale ``(Λ̄ − 1)/Λ`` of ``B̄``."""
        size = self.state_size
        log_neg_real = self.param("log_neg_real", nn.initializers.constant(np.log(0.5)), (size,))
        imag = self.param("imag", lambda key, shape: jnp.asarray(hippo_n_imaginary(shape[0])), (size,))
        log_step = self.param(
            "log_step",
            lambda key, shape: jax.random.uniform(key, shape, minval=np.log(STEP_MIN), maxval=np.log(STEP_MAX)),
            (size,),
        )
        lam = jax.lax.complex(-jnp.exp(log_neg_real), imag)
        lam_bar = jnp.exp(lam * jnp.exp(log_step))
        return lam_bar, (lam_bar - 1.0) / lam

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """``g``, eq. 66: ``(W_1 z + b_1) ⊙ σ(W_2 z + b_2)``, ``z = GeLU(Re(C a_t))``."""
        z = nn.gelu(readout)
        return nn.Dense(self.features, name="w_1")(z) * nn.sigmoid(nn.Dense(self.features, name="w_2")(z))


# Old names: they work, with a DeprecationWarning naming the new one, until memgym 0.3.
__getattr__ = forward(__name__, {
    "s5_monoid": "memgym.memory.diagonal_ssm.diagonal_linear_monoid",  # S5's monoid (eq. 62–64) is that one
    "complex_normal": "memgym.memory.diagonal_ssm.complex_normal",
    "diagonal_linear_monoid": "memgym.memory.diagonal_ssm.diagonal_linear_monoid",
})
