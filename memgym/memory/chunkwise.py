"""Chunkwise-parallel form of gated linear attention (linear attention, ReLiT) for training on long tapes.

One head of linear attention (thesis Alg. 4) or ReLiT (Alg. 5, eq. 3.5–3.6) keeps a matrix state
``C [n, m]`` and a normaliser ``s [m]`` under the gated outer-product recurrence

    C_t = (u_t ⊗ w_t) ⊙ C_{t−1} + v_t ⊗ k_t,     s_t = w_t ⊙ s_{t−1} + k_t,
    a_t = C_t q_t / (s_t · q_t + ε),

(linear attention: ``u = w = 1``; ReLiT: ``u = 1 − β``, ``w = 1 − γ``, ``v = β ⊙ v``,
``k = γ ⊙ k``), a start flag at step ``t`` zeroing ``C_{t−1}, s_{t−1}`` first. Unrolled inside a
chunk that starts from ``(C, s)``, it gives the same outputs in attention form, with cumulative
products of the decays and no per-step state (:func:`attention_chunk`). :func:`chunkwise_attention`
runs a tape in checkpointed chunks of ``chunk_size`` steps, each in sub-chunks of
``sub_chunk_size`` steps computed in that form, so training keeps chunk-boundary states instead of
one ``n × m`` state per step. The recurrent (monoid scan) form stays the reference and the acting
path (``T = 1``). The attention form and its memory cost: docs/memory_models.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from memgym.memory.monoid import scan_in_chunks
from memgym.validation import check_positive

PyTree = Any


class GatedHead(NamedTuple):
    """One chunk of one head in the form :func:`attention_chunk` reads (``c`` steps).

    Attributes:
        q: queries ``[c, m]``.
        k: keys, gated (ReLiT: ``γ ⊙ k``) ``[c, m]``.
        v: values, gated (ReLiT: ``β ⊙ v``) ``[c, n]``.
        key_decay: ``w`` ``[c, m]`` in ``[0, 1]`` (ReLiT: ``1 − γ``), or ``None`` for no decay (linear attention).
        value_decay: ``u`` ``[c, n]`` in ``[0, 1]`` (ReLiT: ``1 − β``), or ``None`` for no decay.
    """

    q: jax.Array
    k: jax.Array
    v: jax.Array
    key_decay: jax.Array | None = None
    value_decay: jax.Array | None = None


def pairwise_decays(decay: jax.Array) -> tuple[jax.Array, jax.Array]:
    """``(P [c, c, m], P0 [c, m])``: ``P[t, j] = Π_{j<i≤t} decay_i`` (1 where ``j ≥ t``), ``P0[t] = Π_{i≤t} decay_i``."""
    length = decay.shape[0]
    later = jnp.arange(length)[:, None] > jnp.arange(length)[None, :]  # [t, j]: step t lies after step j
    factors = jnp.where(later[:, :, None], decay[:, None, :], 1.0)
    return jnp.cumprod(factors, axis=0), jnp.cumprod(decay, axis=0)


def attention_chunk(
    head: GatedHead, start: jax.Array, state: tuple[jax.Array, jax.Array], epsilon: float
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """Outputs ``a [c, n]`` and the state after one chunk, in attention form (docs/memory_models.md).

    Args:
        head: the chunk's queries, gated keys and values, and decays (:class:`GatedHead`).
        start: ``[c]`` bool, True where an episode begins (the state before it is dropped).
        state: ``(C [n, m], s [m])`` before the chunk.
        epsilon: ``ε`` of the readout's denominator.
    """
    q, k, v = head.q, head.k, head.v
    c, s = state
    length = start.shape[0]
    episode = jnp.cumsum(start)  # episodes begun within the chunk up to each step
    index = jnp.arange(length)
    linked = (episode[:, None] == episode[None, :]) & (index[:, None] >= index[None, :])  # [t, j]
    carried = episode == 0  # the incoming state still reaches step t
    if head.key_decay is None:
        scores = jnp.where(linked, q @ k.T, 0.0)
        key_pairs, key_in = None, jnp.ones_like(q)
    else:
        key_pairs, key_in = pairwise_decays(head.key_decay)
        scores = jnp.where(linked, jnp.einsum("tm,tjm,jm->tj", q, key_pairs, k), 0.0)
    key_in = jnp.where(carried[:, None], key_in, 0.0)
    if head.value_decay is None:
        intra = scores @ v
        value_in = jnp.ones_like(v)
    else:
        value_pairs, value_in = pairwise_decays(head.value_decay)
        intra = jnp.einsum("tj,tjn,jn->tn", scores, value_pairs, v)
    query_in = key_in * q  # P_{t,−1} ⊙ q_t, zero where an episode began before t
    numerator = intra + value_in * (query_in @ c.T)
    denominator = scores.sum(axis=1) + query_in @ s
    outputs = numerator / (denominator + epsilon)[:, None]

    # The state after the chunk: the last row of the same decays.
    last = linked[-1]
    key_last = jnp.where(last[:, None], k if key_pairs is None else key_pairs[-1] * k, 0.0)
    value_last = v if head.value_decay is None else value_pairs[-1] * v
    key_through, value_through = key_in[-1], value_in[-1]
    new_c = value_through[:, None] * key_through[None, :] * c + value_last.T @ key_last
    new_s = key_through * s + key_last.sum(axis=0)
    return outputs, (new_c, new_s)


def chunkwise_attention(
    features: Callable[[PyTree, jax.Array], GatedHead],
    inputs: PyTree,
    start: jax.Array,
    state: tuple[jax.Array, jax.Array],
    *,
    chunk_size: int | None,
    sub_chunk_size: int,
    epsilon: float,
) -> tuple[jax.Array, tuple[jax.Array, jax.Array]]:
    """One head over a tape in the chunkwise-parallel form (module docstring): ``(a [T, n], (C, s) out)``.

    Args:
        features: ``features(inputs [c, ...], valid [c]) -> GatedHead`` for a sub-chunk; it runs per
            sub-chunk, so features wider than ``inputs`` (ReLiT's ``η d_h`` keys) exist for one
            sub-chunk at a time. On steps that are not ``valid`` (padding) it must give zero keys and
            values and unit decays.
        inputs: per-step inputs, leaves ``[T, ...]``.
        start: ``[T]`` bool start flags.
        state: ``(C [n, m], s [m])`` before the tape.
        chunk_size: steps per checkpointed chunk (``None``: one chunk).
        sub_chunk_size: steps per sub-chunk computed in attention form.
        epsilon: ``ε`` of the readout.
    """
    check_positive(sub_chunk_size=sub_chunk_size)
    start = jnp.asarray(start, bool)
    length = start.shape[0]

    def sub_chunk(carry, xs, valid):
        chunk_inputs, chunk_start, outer_valid = xs
        outputs, carry = attention_chunk(features(chunk_inputs, valid & outer_valid), chunk_start, carry, epsilon)
        return carry, outputs

    def chunk(carry, xs, valid):
        chunk_inputs, chunk_start = xs
        outputs, carry = scan_in_chunks(sub_chunk, carry, (chunk_inputs, chunk_start, valid), sub_chunk_size)
        return carry, outputs

    if chunk_size is None or chunk_size >= length:
        return chunk(state, (inputs, start), jnp.ones(length, bool))[::-1]
    return scan_in_chunks(chunk, state, (inputs, start), chunk_size)
