"""Linear Transformer self-attention as a memory monoid (thesis Alg. 4; monoid paper eq. 9–13).

Per head, with ``φ(z) = elu(z) + 1`` (Katharopoulos et al. 2020):

    k_t = φ(W_K x_t),  q_t = φ(W_Q x_t),  v_t = W_V x_t
    C_t = C_{t-1} + v_t ⊗ k_t          [d_h, d_h]
    s_t = s_{t-1} + k_t                [d_h]
    a_t = C_t q_t / (s_t · q_t)

The state update is the monoid ``(C, s) • (C', s') = (C + C', s + s')`` with
identity ``(0, 0)`` and encoder ``f(x) = (v ⊗ k, k)``.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.monoid import Monoid
from memgym.memory.transformer import GatedTransformer, MultiHeadMonoidAttention

EPSILON = 1e-6  # keeps a_t finite when s_t · q_t underflows


def additive_monoid() -> Monoid:
    """Elementwise sum over any pytree, identity zeros (monoid paper eq. 10–11)."""
    return Monoid(op=lambda a, b: jax.tree.map(jnp.add, a, b), identity=lambda like: jax.tree.map(jnp.zeros_like, like))


def feature_map(z: jax.Array) -> jax.Array:
    """``φ(z) = elu(z) + 1`` (positive)."""
    return nn.elu(z) + 1.0


class LinearAttention(MultiHeadMonoidAttention):
    """Multi-head Linear Transformer self-attention (thesis Alg. 4)."""

    def monoid(self) -> Monoid:
        return additive_monoid()

    def head_carry(self) -> tuple[jax.Array, jax.Array]:
        return jnp.zeros((self.head_dim, self.head_dim)), jnp.zeros((self.head_dim,))

    def to_element(self, head_carry: Any) -> Any:
        return head_carry

    def from_element(self, element: Any) -> Any:
        return element

    def project(self, x, start, extra):
        k = feature_map(self.heads("w_k", x))
        q = feature_map(self.heads("w_q", x))
        v = self.heads("w_v", x)
        return (v, k), q

    def encode(self, inputs):
        """Alg. 4's state increments ``(v ⊗ φ(k), φ(k))`` (built per chunk)."""
        v, k = inputs
        return v[..., :, None] * k[..., None, :], k

    def decode(self, states, q):
        c, s = states
        numerator = jnp.einsum("tij,tj->ti", c, q)
        return numerator / (jnp.sum(s * q, axis=-1, keepdims=True) + EPSILON)


class LinearAttentionTransformer(GatedTransformer):
    """Gated transformer stack (thesis Fig. 2.3) with Linear Transformer self-attention."""

    chunk_size: int | None = 64

    def mixer(self, **module_kwargs: Any) -> LinearAttention:
        return LinearAttention(self.features, self.num_heads, self.head_size, self.chunk_size, **module_kwargs)
