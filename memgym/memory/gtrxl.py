"""Gated Transformer-XL (GTrXL) with a sliding-window memory of ``M`` inputs per layer.

References:

* Parisotto et al. (2020), *Stabilizing Transformers for Reinforcement
  Learning* — the GTrXL block: layer norm moved in front of each sub-layer
  ("identity map reordering") and GRU-type gates in place of residual sums.
* Dai et al. (2019), *Transformer-XL* — self-attention over a memory of past
  activations with relative positional encodings.
* The recurrent-linear-transformers thesis: Alg. 3 (Transformer-XL
  self-attention on streaming data), §2.5.2 and Fig. 2.3 (GTrXL as an
  actor-critic function approximator); Table A.2 / Table 5.1 for sizes.

Block ``l`` (one layer) maps its input ``e[T, d]`` to

    a  = RelAttn(LN(cat(sg(mem), e)))      # queries from LN(e)
    e' = gate(e, ReLU(a))
    f  = FF(LN(e'))                        # Dense -> ReLU -> Dense
    out = gate(e', ReLU(f))

with Parisotto's GRU-type gate (``x`` the residual stream, ``y`` the sub-layer):
``r = σ(W_r y + U_r x)``, ``z = σ(W_z y + U_z x − b_g)``,
``h = tanh(W_g y + U_g (r ⊙ x))``, ``gate(x, y) = (1 − z) ⊙ x + z ⊙ h``.

Window (Alg. 3): at step ``t`` each layer attends to ``S_t = cat(S_{t-1}[1:], e_t)``,
i.e. the current input and the ``M − 1`` before it — never to a position
before the current episode's start. Relative score (Dai et al. 2019, per head)

    score(i, j) = q_i·k_j + q_i·r_{i−j} + u·k_j + v·r_{i−j},   r_δ = W_R R_δ,

with sinusoidal ``R_δ`` for distances ``δ = 0 … M − 1`` and learned ``u, v``.

State of one stream: a tuple over layers of ``(mem [M, d], valid [M] bool)`` —
the last ``M`` inputs of that layer's attention and whether each belongs to the
current episode; one layer stores ``M·d`` floats (Table 5.1: ``M = 256``,
``d = 128`` → 32768). A tape is processed layer by layer; the attention is
computed in query chunks of ``chunk_size`` against a key window of
``chunk + M`` rows, so a long tape never builds a ``[T, M + T]`` matrix, and a
streaming step (``T = 1``) runs the very same code with a chunk of one.
"""

from __future__ import annotations

import functools
import math
from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from memgym.memory.validation import check_positive, check_tape, resolve_head_dim

LayerCarry = tuple[jax.Array, jax.Array]  # (mem [M, d], valid [M] bool)
Carry = tuple[LayerCarry, ...]

_MASKED = -1e30  # score of a masked key (every row keeps at least itself)


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
    rel: jax.Array,
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
        rel: projected relative encodings ``r_δ = W_R R_δ``, ``[M, H, Dh]``.
        u, w: the learned content / position biases ``[H, Dh]`` (Dai et al.'s ``u``, ``v``).
        key_ok: ``[M + P]`` bool, whether a concat row may be attended at all.
        floor: ``[P]`` int, the smallest concat index query ``t`` may attend
            (its episode's first row, or 0).
        chunk: queries per chunk.

    Query ``t`` attends concat index ``j`` iff ``t < j ≤ M + t``, ``j ≥ floor[t]``
    and ``key_ok[j]``. Returns ``[P, H, Dh]``.
    """
    memory_size, num_heads, head_dim = rel.shape
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
        by_distance = jnp.einsum("ahd,mhd->ham", qc + w, rel)  # [H, C, M]
        position = by_distance[:, rows, rel_index]  # [H, C, C + M]
        allowed = in_window & ok[None, :] & (first + key_offset[None, :] >= low[:, None])
        scores = jnp.where(allowed[None], (content + position) * scale, _MASKED)
        weights = jax.nn.softmax(scores, axis=-1)
        return jnp.einsum("hab,bhd->ahd", weights, vc)

    starts = jnp.arange(0, positions, chunk)
    out = jax.lax.map(one_chunk, starts)  # [P / C, C, H, Dh]
    return out.reshape(positions, num_heads, head_dim)


class GatingUnit(nn.Module):
    """Parisotto et al.'s GRU-type gate ``g(x, y)`` of residual stream ``x`` and sub-layer output ``y``."""

    bias: float

    @nn.compact
    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        d = x.shape[-1]
        wy = nn.Dense(3 * d, use_bias=True, name="W")(y)
        ux = nn.Dense(2 * d, use_bias=False, name="U")(x)
        wr, wz, wg = jnp.split(wy, 3, axis=-1)
        ur, uz = jnp.split(ux, 2, axis=-1)
        r = jax.nn.sigmoid(wr + ur)
        z = jax.nn.sigmoid(wz + uz - self.bias)
        h = jnp.tanh(wg + nn.Dense(d, use_bias=False, name="U_g")(r * x))
        return (1.0 - z) * x + z * h


class GTrXLBlock(nn.Module):
    """One GTrXL layer over a tape, with its sliding-window memory (see the module docstring)."""

    num_heads: int
    head_dim: int
    memory_size: int
    ff_size: int
    gate_bias: float
    chunk_size: int

    @nn.compact
    def __call__(self, e: jax.Array, start: jax.Array, carry: LayerCarry) -> tuple[jax.Array, LayerCarry]:
        steps, d = e.shape
        heads, head_dim, size = self.num_heads, self.head_dim, self.memory_size
        mem, valid = carry
        mem = jax.lax.stop_gradient(mem).astype(e.dtype)
        valid = jnp.asarray(valid, bool)

        # Concat index of the latest episode start at or before each t (0: none in the tape).
        index = jnp.arange(steps)
        floor = jax.lax.cummax(jnp.where(start, size + index, 0), axis=0)
        concat = jnp.concatenate([mem, e], axis=0)  # [M + T, d]
        concat_ok = jnp.concatenate([valid, jnp.ones((steps,), bool)])

        # Attention sub-layer.
        keys_in = nn.LayerNorm(name="attention_norm")(concat)  # queries are its last T rows

        def project(name: str) -> nn.Module:
            return nn.DenseGeneral((heads, head_dim), use_bias=False, name=name)

        q = project("query")(keys_in[size:])
        k = project("key")(keys_in)
        v = project("value")(keys_in)
        table = jnp.asarray(sinusoid_table(size, d))
        rel = project("position")(table)  # [M, H, Dh]
        u = self.param("content_bias", nn.initializers.zeros_init(), (heads, head_dim))
        w = self.param("position_bias", nn.initializers.zeros_init(), (heads, head_dim))

        chunk = min(self.chunk_size, steps)
        padded = -(-steps // chunk) * chunk
        pad = padded - steps

        def pad_rows(a: jax.Array, value: bool | int = 0) -> jax.Array:
            return jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1), constant_values=value)

        attended = windowed_relative_attention(
            pad_rows(q), pad_rows(k), pad_rows(v), rel, u, w,
            pad_rows(concat_ok, True), pad_rows(floor), chunk=chunk,
        )[:steps]
        attended = nn.DenseGeneral(d, axis=(-2, -1), name="attention_out")(attended)
        e = GatingUnit(self.gate_bias, name="attention_gate")(e, jax.nn.relu(attended))

        # Position-wise feed-forward sub-layer.
        f = nn.LayerNorm(name="feedforward_norm")(e)
        f = nn.Dense(d, name="feedforward_out")(jax.nn.relu(nn.Dense(self.ff_size, name="feedforward_in")(f)))
        out = GatingUnit(self.gate_bias, name="feedforward_gate")(e, jax.nn.relu(f))

        # New memory: the last M rows of cat(mem, inputs); rows before the tape's last episode start are stale.
        last_floor = floor[-1]
        concat_index = jnp.arange(size + steps)
        keep = concat_ok & (concat_index >= last_floor)
        return out, (concat[steps:], keep[steps:])


class GTrXL(nn.Module):
    """Gated Transformer-XL (Parisotto et al. 2020; thesis §2.5.2, Fig. 2.3, Alg. 3).

    Attributes:
        features: model width ``d`` (Table A.2: 128).
        num_layers: number of GTrXL blocks ``L``.
        num_heads: attention heads ``H``.
        head_dim: width of each head ``Dh`` (None: ``features // num_heads``).
        memory_size: ``M``, inputs kept per layer; the attention window is the
            current input and the ``M − 1`` before it (Table A.2: 128 and 256).
        ff_size: hidden width of the feed-forward sub-layer (default ``features``).
        gate_bias: ``b_g`` of the gates; positive values start near the identity map.
        chunk_size: queries per attention chunk on a tape.

    ``__call__(x [T, F], start [T] bool, carry) -> (y [T, d], carry)``: ``x`` is
    first projected to width ``d`` by a dense layer. The carry is a tuple over
    layers of ``(mem [M, d], valid [M] bool)``.
    """

    features: int
    num_layers: int = 4
    num_heads: int = 4
    head_dim: int | None = 64
    memory_size: int = 128
    ff_size: int | None = None
    gate_bias: float = 2.0
    chunk_size: int = 128

    # x[T, F] first meets the embedding kernel [F, features] (see validation.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("embed", "kernel"), 0)

    def _check_config(self) -> None:
        check_positive(
            features=self.features,
            num_layers=self.num_layers,
            memory_size=self.memory_size,
            chunk_size=self.chunk_size,
        )
        if self.ff_size is not None:
            check_positive(ff_size=self.ff_size)
        resolve_head_dim(self.features, self.num_heads, self.head_dim)

    def initialize_carry(self) -> Carry:
        """Empty memory for every layer: ``(zeros [M, d], all-False [M])``; needs no parameters."""
        self._check_config()
        layer = (jnp.zeros((self.memory_size, self.features), jnp.float32), jnp.zeros((self.memory_size,), bool))
        return tuple(layer for _ in range(self.num_layers))

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, Carry]:
        self._check_config()
        x, start = jnp.asarray(x), jnp.asarray(start, bool)
        check_tape(x, start, self)
        if len(carry) != self.num_layers:
            raise ValueError(
                f"carry must hold one (mem, valid) pair per layer; got {len(carry)} for num_layers={self.num_layers}"
            )
        e = nn.Dense(self.features, name="embed")(x)
        new_carry = []
        for layer, layer_carry in enumerate(carry):
            block = GTrXLBlock(
                num_heads=self.num_heads,
                head_dim=resolve_head_dim(self.features, self.num_heads, self.head_dim),
                memory_size=self.memory_size,
                ff_size=self.ff_size or self.features,
                gate_bias=self.gate_bias,
                chunk_size=self.chunk_size,
                name=f"layer_{layer}",
            )
            e, layer_carry = block(e, start, layer_carry)
            new_carry.append(layer_carry)
        return e, tuple(new_carry)
