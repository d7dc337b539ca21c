"""AReLiT self-attention as a memory monoid (thesis §4.1–4.2, Alg. 6, eq. 4.19–4.22).

AReLiT replaces ReLiT's ``[d_h, η d_h]`` state ``C_t`` by ``r + 1`` pairs of
vectors whose outer products approximate it (eq. 4.19):

    C̃_t = (2/r) Σ_{k=0..r} ṽ_t^k ⊗ k̃_t^k,           ω_k = 2πk / r
    ṽ_t^k = (1-β_t) ⊙ ṽ_{t-1}^k + cos(ω_k t) β_t ⊙ v_t          (eq. 4.20)
    k̃_t^k = (1-γ_t) ⊙ k̃_{t-1}^k + cos(ω_k t) γ_t ⊙ k_t          (eq. 4.21)
    s_t   = (1-γ_t) ⊙ s_{t-1} + γ_t ⊙ k_t
    a_t   = Σ_k ṽ_t^k (k̃_t^k · q_t) / (2r (s_t · q_t))          (Alg. 6 lines 16–18)

Keys, queries, values and gates are ReLiT's (:class:`ReLiTFeatures`). ``t`` is
the step within the current episode (0 at an episode start); ``cos(ω_k t)`` is
computed from the integer ``t mod r`` so that it is exact however long an
episode runs. The normaliser follows Alg. 6 (``1 / (2r)``); eq. 4.19 scales
``C̃`` by ``2/r`` instead, so ``a_t`` here is ``C̃_t q_t / (s_t · q_t)`` divided
by 4 for every ``r`` — a constant factor the output projection absorbs.
:func:`approximate_state` builds ``C̃_t`` itself (eq. 4.19), for analysis and
tests; the model never materialises it.

Monoid on ``(u, w, V, K, s)``: ``u``/``w`` the accumulated value/key decays,
``V [r+1, d_h]``, ``K [r+1, η d_h]``:

    (u, w, V, K, s) • (u', w', V', K', s') = (u u', w w', u' V + V', w' K + K', w' s + s')

A stream's carry per head is ``(V, K, s)``: ``(r+1)(d_h + η d_h) + η d_h``
floats (896 for d_h = 64, η = 4, r = 1: thesis Table 5.1), plus the episode step
``t`` (int32), shared by the heads (``uses_episode_step``, see :mod:`memgym.memory.attention`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from memgym.memory.attention import EPSILON, episode_steps
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import Tape
from memgym.memory.relit import ReLiTFeatures, outer_flat
from memgym.memory.transformer import MonoidAttentionTransformer
from memgym.validation import check_positive

__all__ = [
    "AReLiTAttention",
    "AReLiTTransformer",
    "approximate_state",
    "arelit_elements",
    "arelit_monoid",
    "cosine_table",
]


def arelit_monoid() -> Monoid:
    """The vector recurrences of eq. 4.20–4.21 and s_t as one monoid (see module docstring)."""

    def op(a, b):
        u, w, v, k, s = a
        u2, w2, v2, k2, s2 = b
        return u * u2, w * w2, u2[..., None, :] * v + v2, w2[..., None, :] * k + k2, w2 * s + s2

    def identity(like):
        u, w, v, k, s = like
        return jnp.ones_like(u), jnp.ones_like(w), jnp.zeros_like(v), jnp.zeros_like(k), jnp.zeros_like(s)

    return Monoid(op=op, identity=identity)


def cosine_table(r: int) -> np.ndarray:
    """``cos(2π k m / r)`` for ``m = 0 … r-1`` (rows) and ``k = 0 … r`` (columns), exact per entry."""
    m = np.arange(r)[:, None]
    k = np.arange(r + 1)[None, :]
    return np.cos(2.0 * np.pi * ((k * m) % r) / r).astype(np.float32)


def arelit_elements(
    v: jax.Array, k: jax.Array, beta: jax.Array, gamma: jax.Array, steps: jax.Array, r: int
) -> tuple[jax.Array, ...]:
    """Encoder ``f`` of the AReLiT monoid: the inputs of eq. 4.20–4.21 (Alg. 6 lines 10–15).

    Args:
        v, beta: values and value gates ``[..., T, d_h]``.
        k, gamma: keys and key gates ``[..., T, η d_h]``.
        steps: int ``[T]``, the step ``t`` within the episode (see :func:`episode_steps`).
        r: the approximation parameter (``r + 1`` cosine frequencies ``ω_k = 2πk / r``).

    Returns:
        ``(1-β, 1-γ, cos(ω_k t) β⊙v [..., T, r+1, d_h], cos(ω_k t) γ⊙k [..., T, r+1, η d_h], γ⊙k)``,
        one element per step for :func:`arelit_monoid` (any leading axes, e.g. heads, broadcast).
    """
    check_positive(r=r)
    cos = jnp.asarray(cosine_table(r))[steps % r]  # [T, r+1]
    bv, gk = beta * v, gamma * k
    return 1.0 - beta, 1.0 - gamma, cos[:, :, None] * bv[..., :, None, :], cos[:, :, None] * gk[..., :, None, :], gk


def approximate_state(v_tilde: jax.Array, k_tilde: jax.Array, r: int) -> jax.Array:
    """AReLiT's approximation of ReLiT's state, ``C̃_t = (2/r) Σ_{k=0..r} ṽ_t^k ⊗ k̃_t^k`` (eq. 4.19).

    Args:
        v_tilde: ``ṽ_t^0 … ṽ_t^r`` stacked, ``[..., r+1, d_h]``.
        k_tilde: ``k̃_t^0 … k̃_t^r`` stacked, ``[..., r+1, η d_h]``.
        r: the approximation parameter.

    Returns ``[..., d_h, η d_h]``, comparable with ReLiT's ``C_t`` (eq. 3.5); thesis §4.3
    measures ``‖C_t − C̃_t‖_F``. The model itself never forms this matrix: its decoder
    contracts ``k̃`` with the query first (eq. 4.22).
    """
    check_positive(r=r)
    if v_tilde.shape[-2] != r + 1 or k_tilde.shape[-2] != r + 1:
        raise ValueError(
            f"v_tilde and k_tilde need r + 1 = {r + 1} rows on axis -2; "
            f"got shapes {tuple(v_tilde.shape)} and {tuple(k_tilde.shape)}"
        )
    return (2.0 / r) * jnp.einsum("...ki,...kj->...ij", v_tilde, k_tilde)


class AReLiTAttention(ReLiTFeatures):
    """Multi-head AReLiT self-attention (thesis Alg. 6).

    Attributes:
        r: the approximation parameter (``r + 1`` cosine frequencies ``ω_k = 2πk / r``).
    """

    r: int = 1

    uses_episode_step: ClassVar[bool] = True  # cos(ω_k t) needs the step t within the episode

    def check(self) -> None:
        check_positive(r=self.r, eta=self.eta)

    def monoid(self) -> Monoid:
        return arelit_monoid()

    def initial_head_carry(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(V [r+1, d_h], K [r+1, η d_h], s [η d_h])``, zeros."""
        width = self.eta * self.head_dim
        return jnp.zeros((self.r + 1, self.head_dim)), jnp.zeros((self.r + 1, width)), jnp.zeros((width,))

    def element_from_carry(self, carry: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        """``(1, 1, V, K, s)``: the decays start at the identity."""
        v, k, s = carry
        return jnp.ones(v.shape[-1]), jnp.ones(k.shape[-1]), v, k, s

    def carry_from_element(self, element: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        return element[2:]

    def project(self, x: jax.Array, start: jax.Array, carry: Any) -> Tape:
        """Encoder inputs ``(v, k, β, γ, t)`` and queries ``q``, leaves ``[heads, T, ...]``.

        ``t`` is the step within the episode (:func:`episode_steps` from the carry's step).
        """
        _, step = carry
        k, q, v, beta, gamma = self.features_of(x)
        steps = jnp.broadcast_to(episode_steps(start, step), (self.num_heads, x.shape[0]))
        return Tape(inputs=(v, k, beta, gamma, steps), queries=q)

    def encode(self, inputs: tuple[Any, ...]) -> tuple[jax.Array, ...]:
        """Eq. 4.20–4.21 inputs of one head (built per chunk from the factor pairs of ``k`` and ``γ``),
        see :func:`arelit_elements`."""
        v, k, beta, gamma, steps = inputs
        return arelit_elements(v, outer_flat(*k), beta, outer_flat(*gamma), steps, self.r)

    def read(self, states: tuple[jax.Array, ...], queries: tuple[jax.Array, jax.Array], weights: tuple = ()) -> jax.Array:
        """``a_t = Σ_k ṽ_t^k (k̃_t^k · q_t) / (2r (s_t · q_t))`` ``[K, d_h]`` (Alg. 6 lines 16–18); ``q_t``
        from its factor pair."""
        _, _, v, k, s = states
        queries = outer_flat(*queries)
        numerator = jnp.einsum("tki,tk->ti", v, jnp.einsum("tkj,tj->tk", k, queries))
        return numerator / (2.0 * self.r * jnp.sum(s * queries, axis=-1, keepdims=True) + EPSILON)


class AReLiTTransformer(MonoidAttentionTransformer):
    """AReLiT: the gated transformer stack (thesis Fig. 2.3) with AReLiT self-attention (§4.2).

    Attributes:
        eta: ``η``, the size of the learned feature map (thesis Table A.2: 4).
        r: the approximation parameter (``r + 1`` cosine frequencies).
        chunk_size: tape chunk length of the attention scans (``None``: one chunk).
    """

    eta: int = 4
    r: int = 1
    chunk_size: int | None = 64

    def check(self) -> None:
        super().check()
        check_positive(eta=self.eta, r=self.r)

    def mixer(self, **module_kwargs: Any) -> AReLiTAttention:
        return AReLiTAttention(
            self.features, self.num_heads, self.head_size, self.chunk_size, eta=self.eta, r=self.r, **module_kwargs
        )
