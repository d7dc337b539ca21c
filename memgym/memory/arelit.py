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

``frequencies="authors"`` takes the frequencies of the thesis authors' code instead of eq. 4.19's:
``r`` of them, evenly spaced from −π to π (−π alone for r = 1), so ``K = r`` components.
At r = 1 eq. 4.19's two frequencies, 0 and 2π, make every ``cos(ω_k t)`` 1: ``k̃^k = s`` and
the readout is ``ṽ_t`` whatever the keys and queries. The code's ±π give ``cos = (−1)^t``
instead, which cancels the cross terms of steps of unlike parity and leaves the keys and
queries a part (docs/reproduction.md measures what that does to learning). Their code
counts ``t`` over the whole stream, not per episode; with ±π alone (r ≤ 2) that is the same
model, since the offset's sign appears in ``ṽ`` and ``k̃`` alike and cancels in the readout.
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
from memgym.validation import check_choice, check_positive

__all__ = [
    "AReLiTAttention",
    "AReLiTTransformer",
    "approximate_state",
    "arelit_elements",
    "arelit_monoid",
    "cosine_table",
    "frequency_count",
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


#: ``"thesis"``: eq. 4.19's ``ω_k = 2πk / r``, k = 0 … r; ``"authors"``: their code's r frequencies on [−π, π]
FREQUENCIES = ("thesis", "authors")


def cosine_table(r: int, frequencies: str = "thesis") -> np.ndarray:
    """``cos(ω_k t)`` for ``t mod P`` (rows, ``P`` the period) and each frequency ``k`` (columns), exact.

    ``"thesis"``: ``ω_k = 2πk / r``, ``k = 0 … r``, period ``r``. ``"authors"``: ``ω_k = π (2k − (r−1)) / (r−1)``,
    ``k = 0 … r−1`` (−π alone for r = 1), period ``2 (r−1)`` (2 for r = 1). Row ``m`` holds ``cos(ω_k m)``;
    ``table[t % P]`` is ``cos(ω_k t)`` for any integer ``t``.
    """
    check_positive(r=r)
    check_choice("frequencies", frequencies, FREQUENCIES)
    if frequencies == "thesis":  # cos(2π k m / r)
        m, k = np.arange(r)[:, None], np.arange(r + 1)[None, :]
        return np.cos(2.0 * np.pi * ((k * m) % r) / r).astype(np.float32)
    # ω_k = π n_k / spacing with integer n_k, so cos(ω_k m) = cos(π j / spacing), j = m n_k mod 2·spacing
    numerators, spacing = (np.array([-1]), 1) if r == 1 else (2 * np.arange(r) - (r - 1), r - 1)
    m = np.arange(2 * spacing)[:, None]
    return np.cos(np.pi * ((m * numerators[None, :]) % (2 * spacing)) / spacing).astype(np.float32)


def frequency_count(r: int, frequencies: str = "thesis") -> int:
    """How many components ``ṽ^k, k̃^k`` AReLiT keeps: ``r + 1`` (eq. 4.19) or ``r`` (the authors' code)."""
    return cosine_table(r, frequencies).shape[1]


def arelit_elements(
    v: jax.Array, k: jax.Array, beta: jax.Array, gamma: jax.Array, steps: jax.Array, r: int,
    frequencies: str = "thesis",
) -> tuple[jax.Array, ...]:
    """Encoder ``f`` of the AReLiT monoid: the inputs of eq. 4.20–4.21 (Alg. 6 lines 10–15).

    Args:
        v, beta: values and value gates ``[..., T, d_h]``.
        k, gamma: keys and key gates ``[..., T, η d_h]``.
        steps: int ``[T]``, the step ``t`` within the episode (see :func:`episode_steps`).
        r: the approximation parameter (``r + 1`` cosine frequencies ``ω_k = 2πk / r``).
        frequencies: ``"thesis"`` (those) or ``"authors"`` (:func:`cosine_table`).

    Returns:
        ``(1-β, 1-γ, cos(ω_k t) β⊙v [..., T, K, d_h], cos(ω_k t) γ⊙k [..., T, K, η d_h], γ⊙k)`` with ``K``
        the :func:`frequency_count`, one element per step for :func:`arelit_monoid` (any leading axes, e.g. heads,
        broadcast).
    """
    table = cosine_table(r, frequencies)
    cos = jnp.asarray(table)[steps % table.shape[0]]  # [T, K]
    bv, gk = beta * v, gamma * k
    return 1.0 - beta, 1.0 - gamma, cos[:, :, None] * bv[..., :, None, :], cos[:, :, None] * gk[..., :, None, :], gk


def approximate_state(v_tilde: jax.Array, k_tilde: jax.Array, r: int, frequencies: str = "thesis") -> jax.Array:
    """AReLiT's approximation of ReLiT's state, ``C̃_t = (2/r) Σ_k ṽ_t^k ⊗ k̃_t^k`` (eq. 4.19).

    Args:
        v_tilde: ``ṽ_t^k`` stacked, ``[..., K, d_h]``, ``K`` the :func:`frequency_count` (``r + 1`` for eq. 4.19).
        k_tilde: ``k̃_t^k`` stacked, ``[..., K, η d_h]``.
        r: the approximation parameter.
        frequencies: ``"thesis"`` or ``"authors"`` (:func:`cosine_table`).

    Returns ``[..., d_h, η d_h]``, comparable with ReLiT's ``C_t`` (eq. 3.5); thesis §4.3
    measures ``‖C_t − C̃_t‖_F``. The model itself never forms this matrix: its decoder
    contracts ``k̃`` with the query first (eq. 4.22).
    """
    count = frequency_count(r, frequencies)
    if v_tilde.shape[-2] != count or k_tilde.shape[-2] != count:
        raise ValueError(
            f"v_tilde and k_tilde need {count} rows on axis -2 (r={r}, frequencies={frequencies!r}); "
            f"got shapes {tuple(v_tilde.shape)} and {tuple(k_tilde.shape)}"
        )
    return (2.0 / r) * jnp.einsum("...ki,...kj->...ij", v_tilde, k_tilde)


class AReLiTAttention(ReLiTFeatures):
    """Multi-head AReLiT self-attention (thesis Alg. 6).

    Attributes:
        r: the approximation parameter (``r + 1`` cosine frequencies ``ω_k = 2πk / r``).
        frequencies: ``"thesis"``, eq. 4.19's, or ``"authors"``, the thesis authors' code's (module docstring).
    """

    r: int = 1
    frequencies: str = "thesis"

    uses_episode_step: ClassVar[bool] = True  # cos(ω_k t) needs the step t within the episode

    def check(self) -> None:
        check_positive(r=self.r, eta=self.eta)
        check_choice("frequencies", self.frequencies, FREQUENCIES)

    def monoid(self) -> Monoid:
        return arelit_monoid()

    def initial_head_carry(self) -> tuple[jax.Array, jax.Array, jax.Array]:
        """``(V [K, d_h], K [K, η d_h], s [η d_h])``, zeros (``K`` components, :func:`frequency_count`)."""
        width, count = self.eta * self.head_dim, frequency_count(self.r, self.frequencies)
        return jnp.zeros((count, self.head_dim)), jnp.zeros((count, width)), jnp.zeros((width,))

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
        return arelit_elements(v, outer_flat(*k), beta, outer_flat(*gamma), steps, self.r, self.frequencies)

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
        frequencies: ``"thesis"`` (eq. 4.19) or ``"authors"`` (their code's; module docstring).
        chunk_size: tape chunk length of the attention scans (``None``: one chunk).
    """

    eta: int = 4
    r: int = 1
    frequencies: str = "thesis"
    chunk_size: int | None = 64

    def check(self) -> None:
        super().check()
        check_positive(eta=self.eta, r=self.r)
        check_choice("frequencies", self.frequencies, FREQUENCIES)

    def mixer(self, **module_kwargs: Any) -> AReLiTAttention:
        return AReLiTAttention(
            self.features, self.num_heads, self.head_size, self.chunk_size, eta=self.eta, r=self.r,
            frequencies=self.frequencies, **module_kwargs
        )
