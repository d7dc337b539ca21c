"""The Linear Recurrent Unit as a memory monoid (monoid paper App. E, eq. 67–71).

LRU (Orvieto et al. 2023): a diagonal complex recurrence
``a_t = λ ⊙ a_{t−1} + γ ⊙ (B x_t)`` with ``λ, a ∈ C^P`` (``P = state_size``;
a :class:`~memgym.memory.diagonal_ssm.DiagonalSSM`),

    λ = exp(−exp(ν) + i exp(θ))          (exponential parametrisation, always |λ| < 1)
    γ = exp(γ_log),  γ_log initialised to log sqrt(1 − |λ|²)   (normalisation)

and ``B ∈ C^{P×F}``. As a monoid it is the same as S5 (eq. 67–69):

    H_I = (1, 0),   (A, a) • (A', a') = (A' ⊙ A, A' ⊙ a + a')
    f(x_t) = (λ, γ ⊙ B x_t)                                         (eq. 70)
    g(a_t, x_t) = MLP([Re(C a_t) ‖ x_t])                            (eq. 71)

with ``C ∈ C^{features×P}``. Eq. 71 writes ``MLP(a)``; feeding ``x_t`` as well is the
LRU block's skip term ``D x_t`` folded into the MLP's first layer.

Initialisation ("ring init"): ``|λ|`` uniform on the ring ``r_min ≤ |λ| ≤ r_max`` (in
area), phase uniform in ``[0, max_phase]``. Orvieto et al. use ``r_min = 0.9``,
``r_max = 0.999``, ``max_phase = π/10`` for long-range sequence benchmarks; the defaults
here (``0.4``, ``0.99``, ``2π``) suit RL, where many features should react fast
(``|λ| = 0.4`` keeps 40% per step) and a few should hold a cue for hundreds of
steps, at any oscillation frequency.

Carry: the state ``a ∈ C^P`` (complex64); it enters the scan as the element ``(1, a)``.
"""

from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.deprecation import forward
from memgym.memory.diagonal_ssm import DiagonalSSM
from memgym.validation import check_real


def _uniform_open_closed(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Uniform samples in ``(0, 1]`` (never 0, so their logarithm is finite)."""
    return 1.0 - jax.random.uniform(key, shape)


class LRU(DiagonalSSM):
    """LRU memory model: ``x[T, F]`` → ``y[T, features]``; carry ``a ∈ C^{state_size}`` (complex64).

    Attributes:
        features: output width (and width of ``Re(C a)`` and the MLP's hidden layer).
        state_size: ``P``, the number of complex state channels.
        r_min, r_max: ring of the initial ``|λ|``, ``0 ≤ r_min < r_max < 1``.
        max_phase: initial phases of ``λ`` are uniform in ``[0, max_phase]`` (> 0).
        chunk_size: steps per checkpointed chunk of the scan (``None``: the whole tape in one chunk).
    """

    r_min: float = 0.4
    r_max: float = 0.99
    max_phase: float = 2 * math.pi
    chunk_size: int | None = 256

    readout_variance = 1.0  # each half of an entry of C ~ N(0, 1/P)

    def check(self) -> None:
        super().check()
        check_real("r_max", self.r_max, 0.0, 1.0, include_low=False, include_high=False)
        check_real("r_min", self.r_min, 0.0, self.r_max, include_high=False)
        check_real("max_phase", self.max_phase, 0.0, include_low=False)

    def recurrence(self) -> tuple[jax.Array, jax.Array]:
        """``λ = exp(−exp(ν) + i exp(θ))`` and the normalisation ``γ = exp(γ_log)`` (ring init)."""

        def nu_init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
            # |λ|² uniform on [r_min², r_max²]; ν = log(−log|λ|).
            radius_sq = _uniform_open_closed(key, shape) * (self.r_max**2 - self.r_min**2) + self.r_min**2
            return jnp.log(-0.5 * jnp.log(radius_sq))

        def theta_init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
            return jnp.log(self.max_phase * _uniform_open_closed(key, shape))

        nu_log = self.param("nu_log", nu_init, (self.state_size,))
        theta_log = self.param("theta_log", theta_init, (self.state_size,))
        gamma_log = self.param("gamma_log", lambda key, nu: 0.5 * jnp.log1p(-jnp.exp(-2.0 * jnp.exp(nu))), nu_log)
        lam = jnp.exp(jax.lax.complex(-jnp.exp(nu_log), jnp.exp(theta_log)))
        return lam, jnp.exp(gamma_log)

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """``g``, eq. 71: ``MLP([Re(C a_t) ‖ x_t])``."""
        hidden = nn.gelu(nn.Dense(self.features, name="mlp_hidden")(jnp.concatenate([readout, x], axis=-1)))
        return nn.Dense(self.features, name="mlp_out")(hidden)


# Old names: they work, with a DeprecationWarning naming the new one, until memgym 0.3.
__getattr__ = forward(__name__, {
    "lru_monoid": "memgym.memory.diagonal_ssm.diagonal_linear_monoid",  # LRU's monoid (eq. 67–69) is that one
})
