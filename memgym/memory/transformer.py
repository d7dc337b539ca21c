"""The gated transformer stack (GTrXL block; Parisotto et al. 2020, thesis §2.5.2, Fig. 2.3).

Per layer, on the residual stream ``h``:

    m   = ReLU(mixer(LN(h)))          # self-attention: any memory mixer
    h   = gate(h, m)                  # GRU-type gate instead of a residual sum
    f   = ReLU(FF(LN(h)))             # position-wise feed-forward, Dense -> ReLU -> Dense
    h   = gate(h, f)

with Parisotto's GRU-type gate (eq. 6–9 there; ``x`` the residual stream, ``y`` the
sub-layer output)

    r = σ(W_r y + U_r x),   z = σ(W_z y + U_z x − b_g),   ĥ = tanh(W_g y + U_g (r ⊙ x)),
    gate(x, y) = (1 − z) ⊙ x + z ⊙ ĥ.

The six matrices have no biases; ``b_g`` is a learned vector, one entry per unit, that
starts at the ``gate_bias`` given (default 2), as in the thesis authors' code.

The layer norm sits *before* each sub-layer, so an identity path runs from input to
output; ``b_g`` > 0 starts every layer close to the identity.
The mixer of layer ``l`` has its own carry; the stack's carry is the tuple of the
layers' carries.

* :class:`GRUGate` — the gate;
* :func:`gated_layer` — one layer, its sub-modules created in the calling module's scope;
* :class:`GatedTransformer` — input embedding and the loop over layers, shared by
  :class:`MonoidAttentionTransformer` (linear attention, ReLiT, AReLiT: mixers are
  :class:`~memgym.memory.attention.MultiHeadMonoidAttention`) and
  :class:`~memgym.memory.gtrxl.GTrXL` (windowed relative attention).

Mixers follow the memory-model call convention: ``mixer(x[T, d], start[T], carry) ->
(y[T, d], carry)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.attention import MultiHeadMonoidAttention, resolve_head_dim
from memgym.memory.initializers import HIDDEN
from memgym.memory.interface import check_tape
from memgym.validation import check_optional_positive, check_positive

Carry = Any


class GRUGate(nn.Module):
    """Gate ``gate(x, y)`` of a residual stream ``x[..., d]`` by a sub-layer output ``y[..., d]`` (module docstring).

    Parisotto et al.'s form: bias-free ``W`` and ``U`` matrices and a learned ``b_g[d]``. (memgym's gates once gave
    the three ``W`` projections biases: the one on ``W_z`` is a learned ``b_g`` in another guise, the ones on
    ``W_r`` and ``W_g`` are in neither GTrXL nor the thesis authors' code; docs/reproduction.md.)

    Attributes:
        gate_bias: the initial value of every entry of ``b_g``; positive values start the gate near the identity
            ``gate(x, y) = x``.
        fused: parameter layout. ``False``: one dense layer per matrix (``w_r``, ``u_r``, ``w_z``, ``u_z``,
            ``w_g``, ``u_g``). ``True`` (GTrXL's): ``W = [W_r | W_z | W_g]``, ``U = [U_r | U_z]`` and ``U_g``.
    """

    gate_bias: float = 2.0
    fused: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, y: jax.Array) -> jax.Array:
        d = x.shape[-1]

        def dense(width: int, name: str) -> nn.Dense:
            return nn.Dense(width, use_bias=False, kernel_init=HIDDEN, name=name)

        if self.fused:
            w_r, w_z, w_g = jnp.split(dense(3 * d, "W")(y), 3, axis=-1)
            u_r, u_z = jnp.split(dense(2 * d, "U")(x), 2, axis=-1)
            u_g = dense(d, "U_g")
        else:
            w_r, w_z, w_g = (dense(d, name)(y) for name in ("w_r", "w_z", "w_g"))
            u_r, u_z = (dense(d, name)(x) for name in ("u_r", "u_z"))
            u_g = dense(d, "u_g")
        b_g = self.param("b_g", nn.initializers.constant(self.gate_bias), (d,))
        r = nn.sigmoid(w_r + u_r)
        z = nn.sigmoid(w_z + u_z - b_g)
        h = jnp.tanh(w_g + u_g(r * x))
        return (1.0 - z) * x + z * h


class LayerNames(NamedTuple):
    """Names of the sub-modules of one :func:`gated_layer` (the mixer names its own)."""

    mixer_norm: str
    mixer_gate: str
    ff_norm: str
    ff_in: str
    ff_out: str
    ff_gate: str


def gated_layer(
    h: jax.Array,
    mix: Callable[[nn.LayerNorm], tuple[jax.Array, Carry]],
    names: LayerNames,
    *,
    ff_size: int,
    gate_bias: float,
    fused_gates: bool = False,
) -> tuple[jax.Array, Carry]:
    """One gated transformer layer on ``h[T, d]`` → ``(h[T, d], mixer carry)`` (module docstring).

    Call it inside a compact method: the layer's sub-modules belong to that module.
    ``mix(norm)`` runs the layer's mixer and returns ``(m[T, d], carry)``; it applies the
    layer norm ``norm`` to its input rows (``h``, and for GTrXL its memory rows too).
    """
    mixed, carry = mix(nn.LayerNorm(name=names.mixer_norm))
    h = GRUGate(gate_bias, fused_gates, name=names.mixer_gate)(h, nn.relu(mixed))
    f = nn.LayerNorm(name=names.ff_norm)(h)
    f = nn.Dense(ff_size, kernel_init=HIDDEN, name=names.ff_in)(f)
    f = nn.Dense(h.shape[-1], kernel_init=HIDDEN, name=names.ff_out)(nn.relu(f))
    return GRUGate(gate_bias, fused_gates, name=names.ff_gate)(h, nn.relu(f)), carry


class GatedTransformer(nn.Module):
    """A stack of gated transformer layers: ``x[T, F]`` → embedding ``[T, features]`` → layers → ``y[T, features]``.

    Subclasses supply :meth:`layer` and :meth:`initial_layer_carry`.

    Attributes:
        features: model width ``d`` (thesis Table A.2: 128).
        num_layers: number of layers ``L``.
        num_heads: attention heads ``H`` per layer.
        head_dim: width of each head ``d_h`` (None: ``features // num_heads``).
        ff_size: hidden width of the feed-forward sub-layer (None: ``features``).
        gate_bias: ``b_g`` of the gates; positive values start near the identity map.
    """

    features: int = 128
    num_layers: int = 4
    num_heads: int = 4
    head_dim: int | None = 64
    ff_size: int | None = None
    gate_bias: float = 2.0

    # x[T, F] first meets the embedding kernel [F, features] (see interface.input_width).
    input_kernel: ClassVar[tuple[tuple[str, ...], int]] = (("embed", "kernel"), 0)

    @property
    def head_size(self) -> int:
        """Width of one head (``head_dim``, or ``features // num_heads`` when it is None)."""
        return resolve_head_dim(self.features, self.num_heads, self.head_dim)

    def check(self) -> None:
        """Raise ``ValueError`` naming the first bad option."""
        check_positive(num_layers=self.num_layers)
        resolve_head_dim(self.features, self.num_heads, self.head_dim)
        check_optional_positive("ff_size", self.ff_size, "features")

    def initial_layer_carry(self) -> Carry:
        """The carry of one layer's mixer before any input."""
        raise NotImplementedError

    def layer(self, index: int, h: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, Carry]:
        """Layer ``index`` on ``h[T, features]`` (in this module's scope) → ``(h, carry)``."""
        raise NotImplementedError

    def initialize_carry(self) -> tuple:
        """One :meth:`initial_layer_carry` per layer; needs no parameters."""
        self.check()
        return tuple(self.initial_layer_carry() for _ in range(self.num_layers))

    @nn.compact
    def __call__(self, x: jax.Array, start: jax.Array, carry: tuple) -> tuple[jax.Array, tuple]:
        self.check()
        x, start = jnp.asarray(x), jnp.asarray(start, bool)
        check_tape(x, start, self)
        if len(carry) != self.num_layers:
            raise ValueError(f"carry must hold one entry per layer; got {len(carry)} for num_layers={self.num_layers}")
        h = nn.Dense(self.features, kernel_init=HIDDEN, name="embed")(x)
        new_carry = []
        for index, layer_carry in enumerate(carry):
            h, layer_carry = self.layer(index, h, start, layer_carry)
            new_carry.append(layer_carry)
        return h, tuple(new_carry)


class MonoidAttentionTransformer(GatedTransformer):
    """The gated transformer with multi-head monoid attention (linear attention, ReLiT, AReLiT).

    Subclasses supply :meth:`mixer` and declare ``chunk_size`` (of the mixers' scans).
    Layer ``l``'s modules are ``mixer_l``, ``ln_mix_l``, ``gate_mix_l``, ``ln_ff_l``,
    ``ff_in_l``, ``ff_out_l`` and ``gate_ff_l``.
    """

    if TYPE_CHECKING:  # a dataclass field of every subclass (declared there to keep their field order)
        chunk_size: int | None

    def mixer(self, **module_kwargs: Any) -> MultiHeadMonoidAttention:
        """The self-attention of one layer (``module_kwargs``: ``name`` or ``parent``)."""
        raise NotImplementedError

    def check(self) -> None:
        super().check()
        check_optional_positive("chunk_size", self.chunk_size, "one chunk")

    def initial_layer_carry(self) -> Carry:
        return self.mixer(parent=None).initialize_carry()

    def layer(self, index: int, h: jax.Array, start: jax.Array, carry: Carry) -> tuple[jax.Array, Carry]:
        names = LayerNames(
            f"ln_mix_{index}", f"gate_mix_{index}", f"ln_ff_{index}", f"ff_in_{index}", f"ff_out_{index}", f"gate_ff_{index}"
        )
        return gated_layer(
            h,
            lambda norm: self.mixer(name=f"mixer_{index}")(norm(h), start, carry),
            names,
            ff_size=self.ff_size or self.features,
            gate_bias=self.gate_bias,
        )
