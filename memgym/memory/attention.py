"""Multi-head self-attention whose heads are memory monoids (thesis Fig. 2.2 right; monoid paper eq. 9–13).

Linear attention, ReLiT and AReLiT keep, per head, a state that a memory monoid
updates (thesis Alg. 4–6). :class:`MultiHeadMonoidAttention` is a
:class:`~memgym.memory.monoid_memory.MonoidMemory` whose parts work per head:

* ``project`` projects ``x[T, d]`` to per-head encoder inputs and queries (leaves
  ``[heads, T, ...]``, e.g. with :meth:`MultiHeadMonoidAttention.heads`);
* the heads' resettable scans run side by side under ``vmap``, each with
  ``encode`` / ``read`` / ``element_from_carry`` / ``carry_from_element`` of one head;
* ``decode`` concatenates the heads' outputs and projects them back to ``features``.

Carry: ``(heads, step)`` — ``heads`` the per-head carries (leading axis ``num_heads``),
``step`` the step ``t`` within the current episode (int32 ``[]``), shared by the heads,
for mixers whose encoder depends on it (``uses_episode_step``: AReLiT's ``cos(ω_k t)``,
eq. 4.20–4.21); ``()`` for the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from memgym.memory.chunkwise import GatedHead, chunkwise_attention
from memgym.memory.initializers import HIDDEN
from memgym.memory.monoid import Monoid
from memgym.memory.monoid_memory import MonoidMemory, Tape
from memgym.validation import check_optional_positive, check_positive

PyTree = Any
AttentionCarry = tuple[PyTree, Any]  # (per-head carries [heads, ...], episode step int32 [] or ())
EPSILON = 1e-6  # ε of the readouts a_t = C_t q_t / (s_t · q_t + ε): finite when s_t · q_t vanishes


def resolve_head_dim(features: int, num_heads: int, head_dim: int | None) -> int:
    """The width of one attention head: ``head_dim``, or ``features // num_heads`` when it is None.

    The thesis's T-Maze models use 4 heads × 64 on a width of 128 (Table A.2), so an explicit
    ``head_dim`` need not divide anything; a derived one needs ``num_heads`` to divide ``features``.
    """
    check_positive(features=features, num_heads=num_heads)
    check_optional_positive("head_dim", head_dim, "features // num_heads")
    if head_dim is not None:
        return head_dim
    if features % num_heads:
        raise ValueError(
            f"num_heads={num_heads} must divide features={features} when head_dim is None "
            f"(head_dim = features // num_heads); pass head_dim explicitly for another head width"
        )
    return features // num_heads


def episode_steps(start: jax.Array, step_in: jax.Array) -> jax.Array:
    """Step index within the episode for each tape position (int32 ``[T]``).

    ``step_in`` is the index the first tape position has if it does not start an
    episode (the carry's counter); every ``start`` restarts the count at 0.
    """
    index = jnp.arange(start.shape[0], dtype=jnp.int32)
    last_start = jax.lax.cummax(jnp.where(start, index, -1))
    return jnp.where(last_start >= 0, index - last_start, step_in + index)


class MultiHeadMonoidAttention(MonoidMemory):
    """Multi-head self-attention ``x[T, features]`` → ``y[T, features]`` with one memory monoid per head.

    Subclasses supply, for one head, ``monoid``, ``initial_head_carry``, ``encode``,
    ``read`` and (when the carry is not the whole element) ``element_from_carry`` /
    ``carry_from_element``, and ``project`` for all heads at once.

    Attributes:
        features: input and output width ``d``.
        num_heads: number of heads ``H``.
        head_dim: width ``d_h`` of a head's values.
        chunk_size: tape chunk length of the heads' scans (``None``: one chunk).
    """

    features: int
    num_heads: int
    head_dim: int
    chunk_size: int | None = 64

    if TYPE_CHECKING:  # a dataclass field of the ``chunkwise`` subclasses (declared there to keep their field order)
        sub_chunk_size: int | None

    # True: the carry keeps the step t within the episode and ``project`` reads it (see the module docstring).
    uses_episode_step: ClassVar[bool] = False
    # True: a head's state is gated linear attention (C, s) and :meth:`gated_head` gives a chunk in that
    # form, so tapes train in the chunkwise-parallel form (:mod:`memgym.memory.chunkwise`) when the
    # subclass's ``sub_chunk_size`` option is set.
    chunkwise: ClassVar[bool] = False

    def initial_head_carry(self) -> PyTree:
        """The carry of one head at an episode start (what a stream stores per head)."""
        raise NotImplementedError

    def initialize_carry(self) -> AttentionCarry:
        """``(heads, step)``: :meth:`initial_head_carry` for every head, and the step counter at 0 (or ``()``)."""
        self.check()
        heads = jax.tree.map(
            lambda leaf: jnp.broadcast_to(leaf, (self.num_heads,) + leaf.shape), self.initial_head_carry()
        )
        return heads, (jnp.zeros((), jnp.int32) if self.uses_episode_step else ())

    def scan(self, monoid: Monoid, tape: Tape, start: jax.Array, carry: AttentionCarry) -> tuple[jax.Array, AttentionCarry]:
        """Every head's scan (:meth:`MonoidMemory.scan`) under ``vmap``: readout ``[heads, T, head_dim]``."""
        heads, step = carry

        def one_head(inputs: PyTree, queries: PyTree, head_carry: PyTree) -> tuple[jax.Array, PyTree]:
            return self.head_scan(monoid, Tape(inputs, queries, tape.weights), start, head_carry)

        readout, heads = jax.vmap(one_head)(tape.inputs, tape.queries, heads)
        if self.uses_episode_step:
            step = episode_steps(start, step)[-1] + 1
        return readout, (heads, step)

    def head_scan(self, monoid: Monoid, tape: Tape, start: jax.Array, head_carry: PyTree) -> tuple[jax.Array, PyTree]:
        """One head over the tape: the chunkwise-parallel form where the mixer has one (``chunkwise``,
        ``sub_chunk_size`` set, ``T > 1``), else the monoid's scan (:meth:`MonoidMemory.scan`, the reference
        and the acting path)."""
        if not self.chunkwise or self.sub_chunk_size is None or start.shape[0] == 1:
            return MonoidMemory.scan(self, monoid, tape, start, head_carry)
        return chunkwise_attention(
            lambda xs, valid: self.gated_head(*xs, valid),
            (tape.inputs, tape.queries),
            start,
            head_carry,
            chunk_size=self.chunk_size,
            sub_chunk_size=self.sub_chunk_size,
            epsilon=EPSILON,
        )

    def gated_head(self, inputs: PyTree, queries: PyTree, valid: jax.Array) -> GatedHead:
        """A chunk of one head as gated linear attention (mixers with ``chunkwise``): encoder inputs and
        queries ``[c, ...]`` → :class:`~memgym.memory.chunkwise.GatedHead`, zero keys and values and unit
        decays where not ``valid``."""
        raise NotImplementedError

    def decode(self, readout: jax.Array, x: jax.Array) -> jax.Array:
        """Concatenate the heads' outputs ``[heads, T, head_dim]`` and project them to ``[T, features]``."""
        merged = jnp.moveaxis(readout, 0, 1).reshape(x.shape[0], self.num_heads * self.head_dim)
        return nn.Dense(self.features, kernel_init=HIDDEN, name="out")(merged)

    def heads(self, name: str, x: jax.Array, size: int | None = None) -> jax.Array:
        """Dense projection of ``x[T, d]`` to ``[heads, T, size]`` (``size`` defaults to ``head_dim``)."""
        size = self.head_dim if size is None else size
        y = nn.Dense(self.num_heads * size, use_bias=False, kernel_init=HIDDEN, name=name)(x)
        return jnp.moveaxis(y.reshape(x.shape[0], self.num_heads, size), 1, 0)
