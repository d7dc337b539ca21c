"""Fast and Forgetful Memory as a memory monoid (monoid paper App. E, eq. 72–76).

FFM (Morad et al. 2023) keeps ``A ∈ C^{m×c}`` (``m = memory_size`` input traces, each
seen at ``c = context_size`` frequencies) and a step count ``t``. With learned decays
``α ∈ R^m`` and frequencies ``ω ∈ R^c``, ``γ = exp(−|α| ⊕ iω) ∈ C^{m×c}`` (⊕: outer sum),
the recurrence ``A_t = γ ⊙ A_{t−1} + f(x_t)`` is the monoid over ``(A, t)``:

    H_I = (0, 0)                                                        (eq. 73)
    (A, t) • (A', t') = (A ⊙ γ^{t'} + A', t + t'),  γ^{t'} = exp(t'(−|α| ⊕ iω))   (eq. 74)
    f(x) = ([(W_1 x + b_1) ⊙ σ(W_2 x + b_2)] broadcast over the c columns, 1)   (eq. 75)
    g(A, x) = z ⊙ σ(W_4 x + b_4) + (W_5 x + b_5) ⊙ (1 − σ(W_4 x + b_4)),
        z = MLP(LN(W_3 [Re(A) ‖ Im(A)] + b_3))                           (eq. 76)

Eq. 76 as printed in the monoid paper lost its ``+``; the decoder here is FFM's gated
residual: a sigmoid gate mixes the memory readout ``z`` with a linear projection of the
input (the skip path), both of width ``features``.

Initialisation: the memory horizons ``τ_i`` (steps until a trace has decayed to 1 %)
are log-spaced over ``[1, 1024]``, i.e. ``α_i = ln(100) / τ_i``; the frequencies are
``ω_j = 2π j / c`` (``linspace`` over ``[0, 2π)``).

Because ``Re(−|α|) ≤ 0``, ``|γ^{t'}| ≤ 1`` for every ``t' ≥ 0``, so combining long
stretches in the associative scan never forms the large positive exponentials of FFM's
original closed form. The identity is exact: ``γ^0 = exp(0) = 1``.

As a :class:`~memgym.memory.monoid_memory.MonoidMemory`, ``g`` runs in two parts: the
readout ``W_3 [Re(A) ‖ Im(A)] + b_3`` per chunk, then the rest on the whole tape.

Carry: the element ``(A[m, c] complex64, t[] int32)``.
"""

from __future__ import annotations

import math
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import MonoidMemory, Tape
from memgym.validation import check_optional_positive, check_positive

HORIZON_MAX = 1024.0  # longest initial memory horizon, in steps
RESIDUAL = 0.01  # a trace has "decayed" when its magnitude falls to this fraction

FFMElement = tuple[jax.Array, jax.Array]  # (A[..., m, c] complex, t[...] int)


def ffm_monoid(alpha: jax.Array, omega: jax.Array) -> Monoid:
    """The FFM monoid (eq. 72–74) for decays ``alpha[m]`` and frequencies ``omega[c]``.

    Elements ``(A[m, c], t[])``; ``op`` takes them batched along leading axes.
    """
    rate = (-jnp.abs(alpha))[:, None] + 1j * omega[None, :]  # −|α| ⊕ iω, [m, c]

    def op(left: FFMElement, right: FFMElement) -> FFMElement:
        (memory, count), (memory_right, count_right) = left, right
        decay = jnp.exp(count_right.astype(jnp.float32)[..., None, None] * rate)
        return memory * decay + memory_right, count + count_right

    def identity(like: FFMElement) -> FFMElement:
        memory, count = like
        return jnp.zeros_like(memory), jnp.zeros_like(count)

    return Monoid(op=op, identity=identity)


def initial_decays(memory_size: int) -> np.ndarray:
    """``α[m]`` with horizons ``τ`` log-spaced over ``[1, HORIZON_MAX]``: ``exp(−α τ) = RESIDUAL``."""
    horizons = np.geomspace(1.0, HORIZON_MAX, memory_size)
    return (np.log(1.0 / RESIDUAL) / horizons).astype(np.float32)


def initial_frequencies(context_size: int) -> np.ndarray:
    """``ω[c] = 2π j / c``, ``j = 0 … c−1``."""
    return np.linspace(0.0, 2.0 * math.pi, context_size, endpoint=False).astype(np.float32)


class FFM(MonoidMemory):
    """FFM memory model: ``x[T, F]`` → ``y[T, features]``; carry ``(A[m, c] complex64, t[] int32)``.

    Attributes:
        features: output width (and width of the readout ``W_3 [Re A ‖ Im A]``).
        memory_size: ``m``, number of input traces.
        context_size: ``c``, number of frequencies per trace.
        chunk_size: steps per checkpointed chunk of the scan (``None``: the whole tape in one chunk).
    """

    features: int = 128
    memory_size: int = 32
    context_size: int = 4
    chunk_size: int | None = 256

    # x[T, F] first meets the trace kernel W_1 [F, memory_size] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("w_1", "kernel"), 0)

    def check(self) -> None:
        check_positive(features=self.features, memory_size=self.memory_size, context_size=self.context_size)
        check_optional_positive("chunk_size", self.chunk_size, "one chunk")

    def initialize_carry(self) -> FFMElement:
        self.check()
        return jnp.zeros((self.memory_size, self.context_size), jnp.complex64), jnp.zeros((), jnp.int32)

    def monoid(self) -> Monoid:
        """Eq. 72–74 with the learned decays ``α [m]`` and frequencies ``ω [c]`` (created here)."""
        alpha = self.param("alpha", lambda key, shape: jnp.asarray(initial_decays(shape[0])), (self.memory_size,))
        omega = self.param("omega", lambda key, shape: jnp.asarray(initial_frequencies(shape[0])), (self.context_size,))
        return ffm_monoid(alpha, omega)

    def project(self, x: jax.Array, start: jax.Array, carry: FFMElement) -> Tape:
        """Elements ``f(x_t)`` (eq. 75): the gated trace ``[T, m]`` on every frequency, count 1.

        Read weights: ``W_3 [2 m c, features]`` and ``b_3``.
        """
        length = x.shape[0]
        m, c = self.memory_size, self.context_size
        mix_kernel = self.param("mix_kernel", nn.initializers.lecun_normal(), (2 * m * c, self.features))
        mix_bias = self.param("mix_bias", nn.initializers.zeros, (self.features,))
        trace = nn.Dense(m, name="w_1")(x) * nn.sigmoid(nn.Dense(m, name="w_2")(x))
        elements = (
            jnp.broadcast_to(trace[:, :, None], (length, m, c)).astype(jnp.complex64),
            jnp.ones((length,), jnp.int32),
        )
        return Tape(inputs=elements, weights=(mix_kernel, mix_bias))

    def read(self, states: FFMElement, queries: tuple, weights: tuple[jax.Array, jax.Array]) -> jax.Array:
        """``W_3 [Re(A) ‖ Im(A)] + b_3`` ``[K, features]`` of the states ``A`` ``[K, m, c]``."""
        memory, _ = states
        mix_kernel, mix_bias = weights
        flat = jnp.concatenate([jnp.real(memory), jnp.imag(memory)], axis=-1).reshape(memory.shape[0], -1)
        return flat @ mix_kernel + mix_bias

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """``g``, eq. 76: a gated residual between ``z = MLP(LN(readout))`` and a projection of ``x``."""
        z = nn.LayerNorm(name="ln")(readout)
        z = nn.Dense(self.features, name="mlp_out")(nn.gelu(nn.Dense(self.features, name="mlp_hidden")(z)))
        gate = nn.sigmoid(nn.Dense(self.features, name="w_4")(x))
        skip = nn.Dense(self.features, name="skip")(x)
        return z * gate + skip * (1.0 - gate)
