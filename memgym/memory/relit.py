"""ReLiT self-attention as a memory monoid (thesis §3.1–3.3, Alg. 5, eq. 3.5–3.6, 3.9–3.11).

Per head, with ``η`` the feature-map size and ``σ`` the sigmoid:

    k_t = flatten(relu(W_p1 x) ⊗ relu(W_K x))        [η d_h]
    q_t = flatten(relu(W_p2 x) ⊗ relu(W_Q x))        [η d_h]
    v_t = W_V x,  β_t = σ(W_β x)                      [d_h]
    γ_t = flatten(σ(W_p3 x) ⊗ σ(W_γ x))              [η d_h]
    C_t = ((1-β_t) ⊗ (1-γ_t)) ⊙ C_{t-1} + (β_t ⊙ v_t) ⊗ (γ_t ⊙ k_t)     [d_h, η d_h]
    s_t = (1-γ_t) ⊙ s_{t-1} + γ_t ⊙ k_t
    a_t = C_t q_t / (s_t · q_t)

The update is a gated linear recurrence, hence the monoid on
``(u, w, C, s)`` — ``u``/``w`` the accumulated value/key decays:

    (u, w, C, s) • (u', w', C', s') = (u u', w w', (u' ⊗ w') ⊙ C + C', w' s + s')

with identity ``(1, 1, 0, 0)`` and ``f(x) = (1-β, 1-γ, (β⊙v) ⊗ (γ⊙k), γ⊙k)``.
Because the decay is an outer product, products of decays stay outer products:
the monoid stores two vectors instead of a ``[d_h, η d_h]`` decay matrix. A
stream's carry is just ``(C, s)``: ``d_h · η d_h + η d_h`` floats per head
(16640 for d_h = 64, η = 4: thesis Table 5.1).

**The thesis authors' code gates ``C`` otherwise** (``update_rule: projected_sigmoid``
of their GaLiTe layer, the ReLiT of their published T-Maze config): the write is the
same, but the state is kept with ``1 − β⊗γ`` instead of eq. 3.5's ``(1−β) ⊗ (1−γ)``,

    C_t = (1 − β_t ⊗ γ_t) ⊙ C_{t−1} + (β_t ⊙ v_t) ⊗ (γ_t ⊙ k_t),

a convex combination, per entry, of the old state and ``v_t ⊗ k_t`` (``s_t`` as eq. 3.6).
Eq. 3.5 keeps an entry only where both gates are near 0; this form, where either is. At
initialisation (``β ≈ 1/2``, ``γ = σ·σ ≈ 1/4``) eq. 3.5 keeps about 3/8 of ``C`` per step
and this form 7/8, so a cue written 64 steps back is down by about 1e-27 against 2e-4
(docs/reproduction.md measures what that does to learning). ``decay="convex"`` selects it.
Its decay has no outer-product form, so its monoid carries the ``[d_h, η d_h]`` decay
matrix, ``(D, w, C, s) • (D', w', C', s') = (D D', w w', D' ⊙ C + C', w' s + s')``, and it
trains with the recurrent scan (no chunkwise-parallel form).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.attention import EPSILON, MultiHeadMonoidAttention
from memgym.memory.chunkwise import GatedHead
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import Tape
from memgym.memory.transformer import MonoidAttentionTransformer
from memgym.validation import check_choice, check_optional_positive, check_positive

DECAYS = ("product", "convex")  # eq. 3.5's (1−β) ⊗ (1−γ); the thesis authors' code's 1 − β ⊗ γ


def relit_monoid(decay: str = "product") -> Monoid:
    """The gated recurrence of eq. 3.5–3.6 as a monoid; ``decay="convex"``: the authors' code's form
    (module docstring), whose first leaf is the whole ``[d_h, η d_h]`` decay."""
    check_choice("decay", decay, DECAYS)

    def op(a, b):
        u, w, c, s = a
        u2, w2, c2, s2 = b
        if decay == "convex":
            return u * u2, w * w2, u2 * c + c2, w2 * s + s2
        return u * u2, w * w2, u2[..., :, None] * w2[..., None, :] * c + c2, w2 * s + s2

    def identity(like):
        u, w, c, s = like
        return jnp.ones_like(u), jnp.ones_like(w), jnp.zeros_like(c), jnp.zeros_like(s)

    return Monoid(op=op, identity=identity)


def outer_flat(a: jax.Array, b: jax.Array) -> jax.Array:
    """``flatten(a ⊗ b)`` over the last axes: ``[..., η] × [..., d_h] → [..., η d_h]``."""
    return (a[..., :, None] * b[..., None, :]).reshape(a.shape[:-1] + (a.shape[-1] * b.shape[-1],))


class ReLiTFeatures(MultiHeadMonoidAttention):
    """Keys, queries, values and gates of ReLiT / AReLiT (Alg. 5 lines 4–11, Alg. 6 lines 2–9).

    Attributes:
        eta: ``η``, the size of the learned feature map (keys have width ``η d_h``).
    """

    eta: int = 4

    def check(self) -> None:
        check_positive(eta=self.eta)

    def features_of(self, x: jax.Array) -> tuple[Any, ...]:
        """``(k, q, v, β, γ)``, leaves ``[heads, T, ...]``: ``v, β`` of width ``d_h``; ``k, q, γ`` as their
        factor pairs ``(a [heads, T, η], b [heads, T, d_h])`` — the feature is ``outer_flat(a, b)``, width
        ``η d_h`` — so a tape stores ``η + d_h`` floats per step for each of them, not ``η d_h``; the
        outer products are formed per chunk (:meth:`encode`, :meth:`read`) and, in the backward pass of a
        chunked tape, recomputed.
        """
        k = (nn.relu(self.heads("w_p1", x, self.eta)), nn.relu(self.heads("w_k", x)))
        q = (nn.relu(self.heads("w_p2", x, self.eta)), nn.relu(self.heads("w_q", x)))
        v = self.heads("w_v", x)
        beta = nn.sigmoid(self.heads("w_beta", x))
        gamma = (nn.sigmoid(self.heads("w_p3", x, self.eta)), nn.sigmoid(self.heads("w_gamma", x)))
        return k, q, v, beta, gamma


class ReLiTAttention(ReLiTFeatures):
    """Multi-head ReLiT self-attention (thesis Alg. 5).

    Attributes:
        sub_chunk_size: steps per sub-chunk of the chunkwise-parallel training form
            (:mod:`memgym.memory.chunkwise`); ``None``: the recurrent scan.
        decay: how ``C`` is kept: ``"product"``, eq. 3.5's ``(1−β) ⊗ (1−γ)``, or ``"convex"``,
            the thesis authors' code's ``1 − β ⊗ γ`` (module docstring; recurrent scan only).
    """

    sub_chunk_size: int | None = 16
    decay: str = "product"

    def check(self) -> None:
        super().check()
        check_optional_positive("sub_chunk_size", self.sub_chunk_size, "the recurrent scan")
        check_choice("decay", self.decay, DECAYS)

    @property
    def chunkwise(self) -> bool:  # type: ignore[override]
        """Eq. 3.5's outer-product decay has the chunkwise-parallel form; the convex decay has not."""
        return self.decay == "product"

    def monoid(self) -> Monoid:
        return relit_monoid(self.decay)

    def initial_head_carry(self) -> tuple[jax.Array, jax.Array]:
        """``(C [d_h, η d_h], s [η d_h])``, zeros."""
        width = self.eta * self.head_dim
        return jnp.zeros((self.head_dim, width)), jnp.zeros((width,))

    def element_from_carry(self, carry: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, ...]:
        """``(1, 1, C, s)``: the decays start at the identity."""
        c, s = carry
        return jnp.ones(c.shape if self.decay == "convex" else c.shape[0]), jnp.ones(s.shape[0]), c, s

    def carry_from_element(self, element: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        return element[2], element[3]

    def project(self, x: jax.Array, start: jax.Array, carry: Any) -> Tape:
        """Encoder inputs ``(v, k, β, γ)`` and queries ``q``, leaves ``[heads, T, ...]`` (``k, γ, q`` as
        factor pairs, see :meth:`ReLiTFeatures.features_of`)."""
        k, q, v, beta, gamma = self.features_of(x)
        return Tape(inputs=(v, k, beta, gamma), queries=q)

    def encode(self, inputs: tuple[Any, ...]) -> tuple[jax.Array, ...]:
        """Eq. 3.5–3.6 inputs: ``(1−β, 1−γ, (β⊙v) ⊗ (γ⊙k), γ⊙k)`` (built per chunk); with the convex decay
        the first is ``1 − β ⊗ γ``."""
        v, k, beta, gamma = inputs
        gamma = outer_flat(*gamma)
        bv, gk = beta * v, gamma * outer_flat(*k)
        keep = 1.0 - beta[..., :, None] * gamma[..., None, :] if self.decay == "convex" else 1.0 - beta
        return keep, 1.0 - gamma, bv[..., :, None] * gk[..., None, :], gk

    def read(self, states: tuple[jax.Array, ...], queries: tuple[jax.Array, jax.Array], weights: tuple = ()) -> jax.Array:
        """``a_t = C_t q_t / (s_t · q_t)`` ``[K, d_h]`` (Alg. 5); ``q_t`` from its factor pair."""
        _, _, c, s = states
        queries = outer_flat(*queries)
        return jnp.einsum("tij,tj->ti", c, queries) / (jnp.sum(s * queries, axis=-1, keepdims=True) + EPSILON)

    def gated_head(self, inputs: tuple[Any, ...], queries: tuple[jax.Array, jax.Array], valid: jax.Array) -> GatedHead:
        """Eq. 3.5–3.6 as gated linear attention: keys ``γ ⊙ k = flatten((γ_a ⊙ k_a) ⊗ (γ_b ⊙ k_b))``, values
        ``β ⊙ v``, decays ``1 − γ`` and ``1 − β``."""
        v, (k_a, k_b), beta, (gamma_a, gamma_b) = inputs
        keep = valid[:, None]
        return GatedHead(
            q=outer_flat(*queries),
            k=jnp.where(keep, outer_flat(gamma_a * k_a, gamma_b * k_b), 0.0),
            v=jnp.where(keep, beta * v, 0.0),
            key_decay=jnp.where(keep, 1.0 - outer_flat(gamma_a, gamma_b), 1.0),
            value_decay=jnp.where(keep, 1.0 - beta, 1.0),
        )


class ReLiTTransformer(MonoidAttentionTransformer):
    """ReLiT: the gated transformer stack (thesis Fig. 2.3) with ReLiT self-attention (§3.3).

    Attributes:
        eta: ``η``, the size of the learned feature map (thesis Table A.2: 4).
        chunk_size: tape chunk length of the attention scans (``None``: one chunk).
        sub_chunk_size: steps per sub-chunk of the chunkwise-parallel training form (``None``: train with
            the recurrent scan, one ``d_h × η d_h`` state per step).
        decay: how ``C`` is kept: ``"product"``, eq. 3.5's ``(1−β) ⊗ (1−γ)``, or ``"convex"``, the thesis
            authors' code's ``1 − β ⊗ γ`` (trains with the recurrent scan; module docstring).
    """

    eta: int = 4
    chunk_size: int | None = 64
    sub_chunk_size: int | None = 16
    decay: str = "product"

    def check(self) -> None:
        super().check()
        check_positive(eta=self.eta)
        check_optional_positive("sub_chunk_size", self.sub_chunk_size, "the recurrent scan")
        check_choice("decay", self.decay, DECAYS)

    def mixer(self, **module_kwargs: Any) -> ReLiTAttention:
        return ReLiTAttention(
            self.features, self.num_heads, self.head_size, self.chunk_size, eta=self.eta,
            sub_chunk_size=self.sub_chunk_size, decay=self.decay, **module_kwargs,
        )
