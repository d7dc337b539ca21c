"""The linear transformer in the form of the monoid paper (Morad et al., *Revisiting Recurrent RL
with Memory Monoids*, eq. 9–13): one memory layer, no feature map, one MLP decoder.

    k_t = W_k x_t,   q_t = W_q x_t,   v_t = W_v x_t   (no bias, no feature map)
    C_t = C_{t−1} + v_t k_tᵀ          [d_v, d_k]     (the paper's A; eq. 9–12)
    s_t = s_{t−1} + k_t               [d_k]          (the paper's a)
    y_t = MLP(C_t q_t / den(s_t · q_t))              (eq. 13)

``C`` is oriented as in Katharopoulos et al. (2020), which makes eq. 13 well formed; the MLP is
``W_2 GeLU(W_1 z + b_1) + b_2`` of width ``features``. Keys and queries have any sign, so
``s_t · q_t`` can vanish: ``den(z) = sign(z) · max(|z|, ε)`` (:func:`safe_denominator`,
``ε = 1e−6``) keeps the readout finite and is the paper's ratio wherever ``|z| ≥ ε``.

The monoid is :func:`~memgym.memory.linear_attention.additive_monoid` (its identity is exact, so
no information crosses an episode start). Carry: ``(C [d_v, d_k], s [d_k])`` (float32).
Why this orientation and this denominator: docs/memory_models.md.
"""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.linear_attention import EPSILON, additive_monoid
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import MonoidMemory, Tape
from memgym.validation import check_optional_positive, check_positive

LinearAttentionElement = tuple[jax.Array, jax.Array]  # (C [..., d_v, d_k], s [..., d_k])


def safe_denominator(z: jax.Array, epsilon: float = EPSILON) -> jax.Array:
    """``sign(z) · max(|z|, ε)`` with ``sign(0) = +1``: ``z`` itself where ``|z| ≥ ε``, else ``±ε``.

    Never zero, so a ratio over it stays finite; keeps the sign of ``s · q`` so the readout
    is the paper's ``C q / (s · q)`` wherever that is not vanishingly small.
    """
    return jnp.where(z < 0, jnp.minimum(z, -epsilon), jnp.maximum(z, epsilon))


class LinearAttentionMonoid(MonoidMemory):
    """The monoid paper's linear transformer (eq. 9–13): ``x[T, F]`` → ``y[T, features]``;
    carry ``(C [value_size, key_size], s [key_size])``.

    Attributes:
        features: output width (and hidden width of the decoder MLP of eq. 13).
        key_size: ``d_k``, width of the keys ``W_k x`` and queries ``W_q x``.
        value_size: ``d_v``, width of the values ``W_v x`` (the readout ``C q / (s · q)``).
        chunk_size: steps per checkpointed chunk of the scan (``None``: the whole tape in one chunk).
    """

    features: int
    key_size: int = 64
    value_size: int = 64
    chunk_size: int | None = 64

    # x[T, F] first meets the key kernel W_k [F, key_size] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("w_k", "kernel"), 0)

    def check(self) -> None:
        check_positive(features=self.features, key_size=self.key_size, value_size=self.value_size)
        check_optional_positive("chunk_size", self.chunk_size, "one chunk")

    def initialize_carry(self) -> LinearAttentionElement:
        """``(C, s) = (0 [d_v, d_k], 0 [d_k])``: the identity of eq. 10."""
        self.check()
        return jnp.zeros((self.value_size, self.key_size), jnp.float32), jnp.zeros((self.key_size,), jnp.float32)

    def monoid(self) -> Monoid:
        """Eq. 9–11: elementwise sums of ``(C, s)``, identity ``(0, 0)``."""
        return additive_monoid()

    def project(self, x: jax.Array, start: jax.Array, carry: LinearAttentionElement) -> Tape:
        """Encoder inputs ``(v [T, d_v], k [T, d_k])`` and queries ``q [T, d_k]``: linear, no bias, no feature map."""
        k = nn.Dense(self.key_size, use_bias=False, name="w_k")(x)
        q = nn.Dense(self.key_size, use_bias=False, name="w_q")(x)
        v = nn.Dense(self.value_size, use_bias=False, name="w_v")(x)
        return Tape(inputs=(v, k), queries=q)

    def encode(self, inputs: tuple[jax.Array, jax.Array]) -> LinearAttentionElement:
        """``f``, eq. 12: ``(v kᵀ [K, d_v, d_k], k [K, d_k])`` (built per chunk)."""
        v, k = inputs
        return v[..., :, None] * k[..., None, :], k

    def read(self, states: LinearAttentionElement, queries: jax.Array, weights: tuple = ()) -> jax.Array:
        """The normalised readout of eq. 13, ``C_t q_t / den(s_t · q_t)`` ``[K, d_v]`` (:func:`safe_denominator`)."""
        c, s = states
        numerator = jnp.einsum("tij,tj->ti", c, queries)
        return numerator / safe_denominator(jnp.sum(s * queries, axis=-1, keepdims=True))

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """The MLP of eq. 13: ``W_2 GeLU(W_1 z + b_1) + b_2`` on the readout ``z [T, d_v]``."""
        hidden = nn.gelu(nn.Dense(self.features, name="mlp_hidden")(readout))
        return nn.Dense(self.features, name="mlp_out")(hidden)
