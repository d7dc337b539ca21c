"""Gated Transformer-XL (GTrXL) with a sliding-window memory of ``M`` inputs per layer.

References: Parisotto et al. (2020), *Stabilizing Transformers for Reinforcement Learning* (the
GTrXL block: layer norm before each sub-layer, GRU-type gates in place of residual sums); Dai et
al. (2019), *Transformer-XL* (self-attention over a memory of past activations, relative
positional encodings); the recurrent-linear-transformers thesis, Alg. 3 (Transformer-XL
self-attention on streaming data), §2.5.2 and Fig. 2.3, sizes in Tables A.2 and 5.1.

Each layer is the gated layer of :mod:`memgym.memory.transformer` around windowed relative
attention: step ``t`` attends to its input and the ``M − 1`` before it, never to a step before
its episode's start, with Dai et al.'s score ``q_i·k_j + q_i·r_{i−j} + u·k_j + v·r_{i−j}``.

Carry: a tuple over layers of :class:`WindowMemory` — the window ``mem [M, d]`` and ``valid [M]``,
plus a cache of the window's keys and values stamped with a hash of the parameters that made them
(:func:`params_stamp`). A streaming step (``T = 1``) projects only its new row; after the
parameters change, the cache is rebuilt once. Outputs equal the uncached computation
(``kv_cache=False``); a ``T = 1`` call does not differentiate the key and value kernels through
cached rows (training replays tapes, which recompute them).

The block's equations, the chunked attention and the cache in detail: docs/memory_models.md.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.deprecation import forward
from memgym.memory.batching import any_in_batch
from memgym.memory.initializers import HIDDEN
from memgym.memory.transformer import GatedTransformer, GRUGate, LayerNames, gated_layer
from memgym.validation import check_flag, check_positive


class WindowMemory(NamedTuple):
    """One GTrXL layer's carry: its memory window (the state), and the window's keys and values."""

    mem: jax.Array  # [M, d] the layer's last M attention inputs (Table 5.1's M·d floats)
    valid: jax.Array  # [M] bool: the row belongs to the current episode
    keys: jax.Array  # [M, H, Dh] cache: key projections of LN(mem) ...
    values: jax.Array  # [M, H, Dh] ... and value projections, under the parameters of `stamp`
    stamp: jax.Array  # [2] uint32: params_stamp of the parameters the cache was computed with


_MASKED = -1e30  # score of a masked key (every row keeps at least itself)

# Per-lane seeds of params_stamp.
_STAMP_SEEDS = (0x9E3779B1, 0x7F4A7C15)


def _fmix32(h: jax.Array) -> jax.Array:
    """MurmurHash3's 32-bit finaliser: every input bit affects every output bit."""
    h = h ^ (h >> 16)
    h = h * jnp.uint32(0x85EBCA6B)
    h = h ^ (h >> 13)
    h = h * jnp.uint32(0xC2B2AE35)
    return h ^ (h >> 16)


def params_stamp(tree) -> jax.Array:
    """A 64-bit hash (``[2] uint32``) of the bits of every float in ``tree`` and of their positions.

    Each lane sums ``fmix32(bits_i ^ fmix32(seed + i))`` over the flattened leaves (mod
    2^32, leaf by leaf, with its own seed), so changing any value — or moving one —
    changes the stamp except with probability about 2^-64. GTrXL compares it to tell
    whether its key/value cache was made with the parameters it is called with.
    """
    lanes = []
    for seed in _STAMP_SEEDS:
        total = jnp.uint32(seed)
        for leaf in jax.tree.leaves(tree):
            bits = jax.lax.bitcast_convert_type(jnp.asarray(leaf, jnp.float32), jnp.uint32).ravel()
            position = _fmix32(jnp.arange(bits.size, dtype=jnp.uint32) + total)
            total = _fmix32(total + jnp.sum(_fmix32(bits ^ position), dtype=jnp.uint32))
        lanes.append(total)
    return jnp.stack(lanes)


def sinusoid_table(length: int, width: int) -> np.ndarray:
    """Sinusoidal encodings ``R[δ]`` for distances ``δ = 0 … length − 1``, shape ``[length, width]``."""
    distance = np.arange(length, dtype=np.float64)[:, None]
    pairs = (width + 1) // 2
    inv_freq = 1.0 / (10000.0 ** (np.arange(pairs, dtype=np.float64) * 2.0 / width))
    angle = distance * inv_freq[None, :]
    table = np.empty((length, 2 * pairs), dtype=np.float64)
    table[:, 0::2] = np.sin(angle)
    table[:, 1::2] = np.cos(angle)
    return table[:, :width].astype(np.float32)


# Jitted on its own so un-jitted (eager) model calls compile the chunk loop once per shape.
@functools.partial(jax.jit, static_argnames="chunk")
def windowed_relative_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    table: jax.Array,
    position_kernel: jax.Array,
    u: jax.Array,
    w: jax.Array,
    key_ok: jax.Array,
    floor: jax.Array,
    chunk: int,
) -> jax.Array:
    """Sliding-window relative attention, computed chunk by chunk.

    Args:
        q: queries ``[P, H, Dh]`` for tape positions ``0 … P − 1`` (``P`` a multiple of ``chunk``).
        k, v: keys / values ``[M + P, H, Dh]`` of ``cat(mem, inputs)``; query ``t``
            sits at concat index ``M + t``.
        table: sinusoidal encodings ``R_δ`` of the distances ``δ = 0 … M − 1``, ``[M, d]``.
        position_kernel: ``W_R``, ``[d, H, Dh]``; the relative encodings are
            ``r_δ = W_R R_δ``, but the position scores are computed as
            ``((q + v) W_Rᵀ) · R_δ`` — the same sum, associated so that a query costs
            ``H·Dh·d + H·d·M`` multiply-adds instead of projecting all ``M``
            encodings (``M·d·H·Dh``) at every call.
        u, w: the learned content / position biases ``[H, Dh]`` (Dai et al.'s ``u``, ``v``).
        key_ok: ``[M + P]`` bool, whether a concat row may be attended at all.
        floor: ``[P]`` int, the smallest concat index query ``t`` may attend
            (its episode's first row, or 0).
        chunk: queries per chunk.

    Query ``t`` attends concat index ``j`` iff ``t < j ≤ M + t``, ``j ≥ floor[t]``
    and ``key_ok[j]``. Returns ``[P, H, Dh]``.
    """
    memory_size = table.shape[0]
    _, num_heads, head_dim = position_kernel.shape
    positions = q.shape[0]
    span = chunk + memory_size
    scale = 1.0 / math.sqrt(head_dim)

    # Static chunk geometry: query a (concat index c·C + M + a) vs key b (index c·C + b).
    a = np.arange(chunk)[:, None]
    b = np.arange(span)[None, :]
    distance = memory_size + a - b
    in_window = jnp.asarray((distance >= 0) & (distance < memory_size))
    rel_index = jnp.asarray(np.clip(distance, 0, memory_size - 1))
    rows = jnp.asarray(np.broadcast_to(a, distance.shape))
    key_offset = jnp.arange(span)

    @jax.checkpoint
    def one_chunk(first: jax.Array) -> jax.Array:
        qc = jax.lax.dynamic_slice_in_dim(q, first, chunk)
        kc = jax.lax.dynamic_slice_in_dim(k, first, span)
        vc = jax.lax.dynamic_slice_in_dim(v, first, span)
        ok = jax.lax.dynamic_slice_in_dim(key_ok, first, span)
        low = jax.lax.dynamic_slice_in_dim(floor, first, chunk)
        content = jnp.einsum("ahd,bhd->hab", qc + u, kc)
        back = jnp.einsum("ahd,Dhd->ahD", qc + w, position_kernel)  # [C, H, d]
        by_distance = jnp.einsum("ahD,mD->ham", back, table)  # [H, C, M]
        position = by_distance[:, rows, rel_index]  # [H, C, C + M]
        allowed = in_window & ok[None, :] & (first + key_offset[None, :] >= low[:, None])
        scores = jnp.where(allowed[None], (content + position) * scale, _MASKED)
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.einsum("hab,bhd->ahd", weights, vc)

    starts = jnp.arange(0, positions, chunk)
    out = jax.lax.map(one_chunk, starts)  # [P / C, C, H, Dh]
    return out.reshape(positions, num_heads, head_dim)


class PositionKernel(nn.Module):
    """``W_R``, the projection of the relative encodings (Dai et al. 2019), as a ``[d, H, Dh]`` kernel.

    Its parameter (``kernel``) and initial values are those of the
    ``nn.DenseGeneral((H, Dh))`` that would project the encodings; the attention uses
    the kernel directly (see :func:`windowed_relative_attention`).
    """

    num_heads: int
    head_dim: int

    @nn.compact
    def __call__(self, width: int) -> jax.Array:
        def init(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
            return HIDDEN(key, (width, self.num_heads * self.head_dim)).reshape(shape)

        return self.param("kernel", init, (width, self.num_heads, self.head_dim))


# Sub-module names inside each ``layer_l`` (the attention's own parameters sit beside them).
BLOCK_NAMES = LayerNames(
    mixer_norm="attention_norm",
    mixer_gate="attention_gate",
    ff_norm="feedforward_norm",
    ff_in="feedforward_in",
    ff_out="feedforward_out",
    ff_gate="feedforward_gate",
)


class GTrXLBlock(nn.Module):
    """One GTrXL layer over a tape, with its sliding-window memory (the block: docs/memory_models.md).

    ``__call__(e [T, d], start [T] bool, carry: WindowMemory) -> (out [T, d], carry)``.
    """

    num_heads: int
    head_dim: int
    memory_size: int
    ff_size: int
    gate_bias: float
    chunk_size: int
    kv_cache: bool = True

    @nn.compact
    def __call__(self, e: jax.Array, start: jax.Array, carry: WindowMemory) -> tuple[jax.Array, WindowMemory]:
        return gated_layer(
            e,
            lambda norm: self.attend(norm, e, start, carry),
            BLOCK_NAMES,
            ff_size=self.ff_size,
            gate_bias=self.gate_bias,
            fused_gates=True,
        )

    def attend(
        self, norm: nn.LayerNorm, e: jax.Array, start: jax.Array, carry: WindowMemory
    ) -> tuple[jax.Array, WindowMemory]:
        """Windowed relative attention of ``e[T, d]`` over ``cat(mem, e)`` → ``(a [T, d], new carry)``.

        ``norm`` is the layer's attention norm, applied to the memory rows and ``e`` alike.
        A streaming step (``T = 1``) takes the memory rows' keys and values from the
        carry's cache (module docstring); a tape computes them.
        """
        steps, d = e.shape
        heads, head_dim, size = self.num_heads, self.head_dim, self.memory_size
        mem = jax.lax.stop_gradient(carry.mem).astype(e.dtype)
        valid = jnp.asarray(carry.valid, bool)

        # Concat index of the latest episode start at or before each t (0: none in the tape).
        index = jnp.arange(steps)
        floor = jax.lax.cummax(jnp.where(start, size + index, 0), axis=0)
        concat = jnp.concatenate([mem, e], axis=0)  # [M + T, d]
        concat_ok = jnp.concatenate([valid, jnp.ones((steps,), bool)])

        def project(name: str) -> nn.Module:
            return nn.DenseGeneral((heads, head_dim), use_bias=False, kernel_init=HIDDEN, name=name)

        inputs = norm(e)
        query, key, value = project("query"), project("key"), project("value")
        q = query(inputs)
        streaming = steps == 1 and self.kv_cache
        rows_in = inputs if streaming else jnp.concatenate([norm(mem), inputs], axis=0)
        k, v = key(rows_in), value(rows_in)  # [T, H, Dh] when streaming, else [M + T, H, Dh]
        used = {name: module.variables["params"] for name, module in (("norm", norm), ("key", key), ("value", value))}
        stamp = params_stamp(used)
        if streaming:
            # Bound modules cannot be called inside lax.cond: apply unbound copies to their parameters.
            def rebuild():
                rows = norm.clone(parent=None).apply({"params": used["norm"]}, mem)
                return (key.clone(parent=None).apply({"params": used["key"]}, rows),
                        value.clone(parent=None).apply({"params": used["value"]}, rows))

            def with_new_row(kv):
                return tuple(jnp.concatenate([m.astype(e.dtype), n], axis=0) for m, n in zip(kv, (k, v)))

            stale = any_in_batch(jnp.any(carry.stamp != stamp))
            k, v = jax.lax.cond(stale, lambda _: with_new_row(rebuild()),
                                lambda _: with_new_row((carry.keys, carry.values)), None)
        table = jnp.asarray(sinusoid_table(size, d))
        position_kernel = PositionKernel(heads, head_dim, name="position")(d)  # W_R [d, H, Dh]
        u = self.param("content_bias", nn.initializers.zeros_init(), (heads, head_dim))
        w = self.param("position_bias", nn.initializers.zeros_init(), (heads, head_dim))

        chunk = min(self.chunk_size, steps)
        padded = -(-steps // chunk) * chunk
        pad = padded - steps

        def pad_rows(a: jax.Array, value: bool | int = 0) -> jax.Array:
            return jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1), constant_values=value)

        attended = windowed_relative_attention(
            pad_rows(q), pad_rows(k), pad_rows(v), table, position_kernel, u, w,
            pad_rows(concat_ok, True), pad_rows(floor), chunk=chunk,
        )[:steps]
        attended = nn.DenseGeneral(d, axis=(-2, -1), kernel_init=HIDDEN, name="attention_out")(attended)

        # New memory: the last M rows of cat(mem, inputs); rows before the tape's last episode start are stale.
        last_floor = floor[-1]
        concat_index = jnp.arange(size + steps)
        keep = concat_ok & (concat_index >= last_floor)
        cache = jax.lax.stop_gradient((k[steps:], v[steps:]))
        return attended, WindowMemory(concat[steps:], keep[steps:], *cache, stamp)


class GTrXL(GatedTransformer):
    """Gated Transformer-XL (Parisotto et al. 2020; thesis §2.5.2, Fig. 2.3, Alg. 3).

    Attributes:
        features: model width ``d`` (Table A.2: 128).
        num_layers: number of GTrXL blocks ``L``.
        num_heads: attention heads ``H``.
        head_dim: width of each head ``Dh`` (None: ``features // num_heads``).
        ff_size: hidden width of the feed-forward sub-layer (default ``features``).
        gate_bias: ``b_g`` of the gates; positive values start near the identity map.
        memory_size: ``M``, inputs kept per layer; the attention window is the
            current input and the ``M − 1`` before it (Table A.2: 128 and 256).
        chunk_size: queries per attention chunk on a tape.
        kv_cache: a streaming step (``T = 1``) reads the memory rows' keys and values
            from the carry's cache (module docstring); False recomputes them at every
            step, as a tape does (the reference, and the before in benchmarks).

    ``__call__(x [T, F], start [T] bool, carry) -> (y [T, d], carry)``: ``x`` is
    first projected to width ``d`` by a dense layer. The carry is a tuple over
    layers of :class:`WindowMemory`; layer ``l`` is the module ``layer_l``
    (a :class:`GTrXLBlock`).
    """

    # The window enters a call without gradients (Transformer-XL's stopped memory), so a tape cut into pieces
    # would not pass gradients from one piece to the rows of the one before it (see ActorCriticFields.replay_chunk_size).
    carry_passes_gradients: ClassVar[bool] = False

    features: int = dataclasses.field()  # required: no default, unlike the other gated transformers
    memory_size: int = 128
    chunk_size: int = 128
    kv_cache: bool = True

    def check(self) -> None:
        check_positive(features=self.features, memory_size=self.memory_size, chunk_size=self.chunk_size)
        check_flag(kv_cache=self.kv_cache)
        super().check()

    def initial_layer_carry(self) -> WindowMemory:
        """Empty memory: ``mem`` zeros, ``valid`` all False, an empty cache with a zero stamp."""
        cache = jnp.zeros((self.memory_size, self.num_heads, self.head_size), jnp.float32)
        return WindowMemory(jnp.zeros((self.memory_size, self.features), jnp.float32),
                            jnp.zeros((self.memory_size,), bool), cache, cache, jnp.zeros((2,), jnp.uint32))

    def layer(self, index: int, h: jax.Array, start: jax.Array, carry: WindowMemory) -> tuple[jax.Array, WindowMemory]:
        if not isinstance(carry, WindowMemory):
            raise ValueError(
                f"carry[{index}] must be a WindowMemory (mem, valid, keys, values, stamp), as initialize_carry() "
                f"returns; got {type(carry).__name__} of {len(carry) if isinstance(carry, (tuple, list)) else 1} entries"
            )
        block = GTrXLBlock(
            num_heads=self.num_heads,
            head_dim=self.head_size,
            memory_size=self.memory_size,
            ff_size=self.ff_size or self.features,
            gate_bias=self.gate_bias,
            chunk_size=self.chunk_size,
            kv_cache=self.kv_cache,
            name=f"layer_{index}",
        )
        return block(h, start, carry)


# Old names: they work, with a DeprecationWarning naming the new one, until memgym 0.3.
__getattr__ = forward(__name__, {
    "GatingUnit": ("memgym.memory.transformer.GRUGate with fused=True", lambda: functools.partial(GRUGate, fused=True)),
})
