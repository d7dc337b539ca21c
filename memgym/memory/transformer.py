"""The gated transformer stack shared by the linear-attention models (thesis Fig. 2.3).

Per layer, on the residual stream ``h`` (Parisotto et al. 2020, thesis §2.5.2):

    m   = ReLU(mixer(LN(h)))          # multi-head self-attention (any memory mixer)
    h   = gate(h, m)                  # GRU-type gate instead of a residual sum
    f   = ReLU(FF(LN(h)))             # position-wise feed-forward
    h   = gate(h, f)

The layer norm sits *before* each sub-layer, so an identity path runs from
input to output; the gate's bias ``b_g`` (default 2) starts every layer close
to the identity. The mixer of layer ``l`` has its own carry; the stack's carry
is the tuple of the layers' carries.

Mixers follow the memory-model call convention: ``mixer(x[T, d], start[T],
carry) -> (y[T, d], carry)``. :class:`MultiHeadMonoidAttention` turns a
per-head memory monoid into such a mixer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.monoid import Monoid, run_memory_monoid
from memgym.memory.validation import check_chunk_size, check_positive, check_tape, resolve_head_dim


class GRUGate(nn.Module):
    """GRU-type gating of a residual stream ``x`` by a sub-layer output ``y`` (Parisotto et al. 2020, eq. 6–9):

    ``r = σ(W_r y + U_r x)``, ``z = σ(W_z y + U_z x − b_g)``, ``ĥ = tanh(W_g y + U_g (r ⊙ x))``,
    ``out = (1 − z) ⊙ x + z ⊙ ĥ``.
    """

    gate_bias: float = 2.0

    @nn.compact
    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        d = x.shape[-1]
        dense = lambda name, bias: nn.Dense(d, use_bias=bias, name=name)  # noqa: E731
        r = nn.sigmoid(dense("w_r", True)(y) + dense("u_r", False)(x))
        z = nn.sigmoid(dense("w_z", True)(y) + dense("u_z", False)(x) - self.gate_bias)
        h = jnp.tanh(dense("w_g", True)(y) + dense("u_g", False)(r * x))
        return (1.0 - z) * x + z * h


class MultiHeadMonoidAttention(nn.Module):
    """Multi-head self-attention whose heads are memory monoids.

    Subclasses define, per head, ``project`` (``x[T, d]`` → head-batched encoder and
    decoder inputs), ``monoid()``, ``decode`` and the carry conversions. Heads run
    side by side under ``vmap``; their outputs are concatenated and projected back to
    width ``features`` (thesis Fig. 2.2, right).
    """

    features: int
    num_heads: int
    head_dim: int
    chunk_size: int | None = 64

    def monoid(self) -> Monoid:
        raise NotImplementedError

    def head_carry(self) -> Any:
        """Carry of one head (what a stream stores between calls)."""
        raise NotImplementedError

    def project(self, x: jax.Array, start: jax.Array, extra: Any) -> tuple[Any, Any]:
        """``(encoder_inputs, decode_inputs)``, leaves shaped ``[heads, T, ...]``."""
        raise NotImplementedError

    def encode(self, inputs: Any) -> Any:
        """Encoder ``f``: one head's ``[K, ...]`` encoder inputs → monoid elements, run chunk by chunk."""
        return inputs

    def to_element(self, head_carry: Any) -> Any:
        """Monoid element holding a head's carry (one head, unbatched)."""
        raise NotImplementedError

    def from_element(self, element: Any) -> Any:
        """Inverse of :meth:`to_element`: drop what the carry need not keep."""
        raise NotImplementedError

    def decode(self, states: Any, decode_inputs: Any) -> jax.Array:
        """``[K, ...]`` states and inputs of one head → ``[K, head_dim]`` attention outputs."""
        raise NotImplementedError

    def initial_extra(self) -> Any:
        """Carry entries kept outside the monoid, shared by the heads (e.g. AReLiT's step counter)."""
        return ()

    def advance_extra(self, extra_carry: Any, start: jax.Array) -> Any:
        """The extra carry after a tape with begin flags ``start``."""
        return extra_carry

    def initialize_carry(self) -> tuple[Any, Any]:
        heads = jax.tree.map(lambda leaf: jnp.broadcast_to(leaf, (self.num_heads,) + leaf.shape), self.head_carry())
        return heads, self.initial_extra()

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: Any) -> tuple[jax.Array, Any]:
        heads_carry, extra = carry
        encoder_inputs, decode_inputs = self.project(x, start, extra)
        monoid = self.monoid()

        def one_head(head_encoder_inputs, head_inputs, head_carry):
            outputs, element = run_memory_monoid(
                monoid,
                head_encoder_inputs,
                self.decode,
                head_inputs,
                start,
                self.to_element(head_carry),
                chunk_size=self.chunk_size,
                encode=self.encode,
            )
            return outputs, self.from_element(element)

        outputs, heads_carry = jax.vmap(one_head)(encoder_inputs, decode_inputs, heads_carry)
        merged = jnp.moveaxis(outputs, 0, 1).reshape(x.shape[0], self.num_heads * self.head_dim)
        return nn.Dense(self.features, name="out")(merged), (heads_carry, self.advance_extra(extra, start))

    def heads(self, name: str, x: jax.Array, size: int | None = None) -> jax.Array:
        """Dense projection of ``x[T, d]`` to ``[heads, T, size]`` (``size`` defaults to ``head_dim``)."""
        size = self.head_dim if size is None else size
        y = nn.Dense(self.num_heads * size, use_bias=False, name=name)(x)
        return jnp.moveaxis(y.reshape(x.shape[0], self.num_heads, size), 1, 0)


class GatedTransformer(nn.Module):
    """A stack of gated transformer layers around a memory mixer (thesis Fig. 2.3).

    Subclasses implement :meth:`mixer` (the layer's self-attention). The input is
    projected to width ``features`` first; the output has width ``features``.
    """

    features: int = 128
    num_layers: int = 4
    num_heads: int = 4
    head_dim: int | None = 64
    ff_size: int | None = None
    gate_bias: float = 2.0

    # x[T, F] first meets the embedding kernel [F, features] (see validation.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("embed", "kernel"), 0)

    @property
    def head_size(self) -> int:
        """Width of one head (``head_dim``, or ``features // num_heads`` when it is None)."""
        return resolve_head_dim(self.features, self.num_heads, self.head_dim)

    def mixer(self, **module_kwargs: Any) -> MultiHeadMonoidAttention:
        """The self-attention of one layer (``module_kwargs``: ``name`` or ``parent``)."""
        raise NotImplementedError

    def _check(self) -> None:
        check_positive(num_layers=self.num_layers)
        resolve_head_dim(self.features, self.num_heads, self.head_dim)
        if self.ff_size is not None:
            check_positive(ff_size=self.ff_size)
        check_chunk_size(getattr(self, "chunk_size", None))

    def initialize_carry(self) -> tuple:
        self._check()
        return tuple(self.mixer(parent=None).initialize_carry() for _ in range(self.num_layers))

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: tuple) -> tuple[jax.Array, tuple]:
        self._check()
        start = jnp.asarray(start, bool)
        check_tape(x, start, self)
        h = nn.Dense(self.features, name="embed")(x)
        new_carry = []
        for layer in range(self.num_layers):
            mixed, layer_carry = self.mixer(name=f"mixer_{layer}")(nn.LayerNorm(name=f"ln_mix_{layer}")(h), start, carry[layer])
            h = GRUGate(self.gate_bias, name=f"gate_mix_{layer}")(h, nn.relu(mixed))
            f = nn.LayerNorm(name=f"ln_ff_{layer}")(h)
            f = nn.Dense(self.ff_size or self.features, name=f"ff_in_{layer}")(f)
            f = nn.Dense(self.features, name=f"ff_out_{layer}")(nn.relu(f))
            h = GRUGate(self.gate_bias, name=f"gate_ff_{layer}")(h, nn.relu(f))
            new_carry.append(layer_carry)
        return h, tuple(new_carry)
