"""Linear Transformer self-attention as a memory monoid (thesis Alg. 4; monoid paper eq. 9–13).

Per head, with ``φ(z) = elu(z) + 1`` (Katharopoulos et al. 2020):

    k_t = φ(W_K x_t),  q_t = φ(W_Q x_t),  v_t = W_V x_t
    C_t = C_{t-1} + v_t ⊗ k_t          [d_h, d_h]
    s_t = s_{t-1} + k_t                [d_h]
    a_t = C_t q_t / (s_t · q_t)

The state update is the monoid ``(C, s) • (C', s') = (C + C', s + s')`` with
identity ``(0, 0)`` (eq. 10–11) and encoder ``f(x) = (v ⊗ k, k)`` (eq. 12); the
decoder reads ``a_t`` with the query (eq. 13). A stream's carry per head is the
element ``(C, s)`` itself.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.attention import EPSILON, MultiHeadMonoidAttention
from memgym.memory.chunkwise import GatedHead
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import Tape
from memgym.memory.transformer import MonoidAttentionTransformer
from memgym.validation import check_optional_positive


def additive_monoid() -> Monoid:
    """Elementwise sum over any pytree, identity zeros (monoid paper eq. 10–11)."""
    return Monoid(op=lambda a, b: jax.tree.map(jnp.add, a, b), identity=lambda like: jax.tree.map(jnp.zeros_like, like))


def feature_map(z: jax.Array) -> jax.Array:
    """``φ(z) = elu(z) + 1`` (positive)."""
    return nn.elu(z) + 1.0


class LinearAttention(MultiHeadMonoidAttention):
    """Multi-head Linear Transformer self-attention (thesis Alg. 4).

    Attributes:
        sub_chunk_size: steps per sub-chunk of the chunkwise-parallel training form
            (:mod:`memgym.memory.chunkwise`); ``None``: the recurrent scan.
    """

    sub_chunk_size: int | None = 32

    chunkwise: ClassVar[bool] = True

    def check(self) -> None:
        check_optional_positive("sub_chunk_size", self.sub_chunk_size, "the recurrent scan")

    def monoid(self) -> Monoid:
        return additive_monoid()

    def initial_head_carry(self) -> tuple[jax.Array, jax.Array]:
        """``(C [d_h, d_h], s [d_h])``, zeros."""
        return jnp.zeros((self.head_dim, self.head_dim)), jnp.zeros((self.head_dim,))

    def project(self, x: jax.Array, start: jax.Array, carry: Any) -> Tape:
        """Encoder inputs ``(v, φ(k))`` and queries ``φ(q)``, each ``[heads, T, d_h]``."""
        k = feature_map(self.heads("w_k", x))
        q = feature_map(self.heads("w_q", x))
        v = self.heads("w_v", x)
        return Tape(inputs=(v, k), queries=q)

    def encode(self, inputs: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        """Alg. 4's state increments ``(v ⊗ φ(k) [K, d_h, d_h], φ(k) [K, d_h])`` (built per chunk)."""
        v, k = inputs
        return v[..., :, None] * k[..., None, :], k

    def read(self, states: tuple[jax.Array, jax.Array], queries: jax.Array, weights: tuple = ()) -> jax.Array:
        """``a_t = C_t q_t / (s_t · q_t)`` ``[K, d_h]``."""
        c, s = states
        numerator = jnp.einsum("tij,tj->ti", c, queries)
        return numerator / (jnp.sum(s * queries, axis=-1, keepdims=True) + EPSILON)

    def gated_head(self, inputs: tuple[jax.Array, jax.Array], queries: jax.Array, valid: jax.Array) -> GatedHead:
        """Alg. 4 as (ungated) linear attention: keys ``φ(k)``, values ``v``, no decay."""
        v, k = inputs
        keep = valid[:, None]
        return GatedHead(q=queries, k=jnp.where(keep, k, 0.0), v=jnp.where(keep, v, 0.0))


class LinearAttentionTransformer(MonoidAttentionTransformer):
    """Gated transformer stack (thesis Fig. 2.3) with Linear Transformer self-attention.

    Attributes:
        chunk_size: tape chunk length of the attention scans (``None``: one chunk).
        sub_chunk_size: steps per sub-chunk of the chunkwise-parallel training form (``None``: train with
            the recurrent scan, one ``d_h × d_h`` state per step).
    """

    chunk_size: int | None = 64
    sub_chunk_size: int | None = 32

    def check(self) -> None:
        super().check()
        check_optional_positive("sub_chunk_size", self.sub_chunk_size, "the recurrent scan")

    def mixer(self, **module_kwargs: Any) -> LinearAttention:
        return LinearAttention(
            self.features, self.num_heads, self.head_size, self.chunk_size,
            sub_chunk_size=self.sub_chunk_size, **module_kwargs,
        )
