"""Segment-based batching (SBB) replay (monoid paper §4.1, eq. 23–27).

Episodes are split into fragments of at most ``L`` transitions (``split``, eq. 23),
each zero-padded on the right to a segment of exactly ``L`` with a mask of its real
transitions (``pad``, eq. 25), and the segments are stacked as rows of a dataset
(eq. 26–27). Rows are sampled uniformly.

The rows live in a ring of ``capacity`` rows, oldest overwritten first. A fragment
grows across :meth:`SegmentReplay.add` calls when an episode continues (the row
being filled is sampleable already, with its mask covering what is there). The
surface matches :class:`~memgym.buffers.tape.TapeReplay` (``init``, ``add``,
``sample``, ``can_sample``) so an agent switches between TBB and SBB by config:
``sample(state, key, B)`` returns ``B // L`` segments, ``[B // L, L, ...]``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from memgym.buffers.tape import Batch

PyTree = Any


@struct.dataclass
class SegmentState:
    """Rows of zero-padded segments.

    Attributes:
        data: pytree of ``[capacity, L, ...]``.
        begin: ``[capacity, L]`` bool, True where a transition starts an episode.
        mask: ``[capacity, L]`` bool, True on real transitions (eq. 25's ``m``).
        row: the row being filled; col: how many transitions it holds (0 … L).
        rows_used: rows ever started (the number of sampleable rows is ``min(capacity, rows_used)``).
        added: transitions ever added.
    """

    data: PyTree
    begin: jax.Array
    mask: jax.Array
    row: jax.Array
    col: jax.Array
    rows_used: jax.Array
    added: jax.Array


@dataclasses.dataclass(frozen=True)
class SegmentReplay:
    """SBB replay: ``capacity`` rows of ``segment_length`` transitions."""

    capacity: int
    segment_length: int

    def __post_init__(self) -> None:
        for name in ("capacity", "segment_length"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {name}={value!r}")

    def init(self, example: PyTree) -> SegmentState:
        """An empty dataset for transitions shaped like ``example`` (one transition)."""
        shape = (self.capacity, self.segment_length)
        data = jax.tree.map(lambda x: jnp.zeros(shape + jnp.shape(x), jnp.asarray(x).dtype), example)
        # Distinct counters (not one shared zero), so a jitted ``add`` can donate the state.
        row, col, rows_used, added = (jnp.zeros((), jnp.int32) for _ in range(4))
        return SegmentState(data, jnp.zeros(shape, bool), jnp.zeros(shape, bool), row, col, rows_used, added)

    def can_sample(self, state: SegmentState) -> jax.Array:
        return state.rows_used > 0

    def add(self, state: SegmentState, transitions: PyTree, begin: jax.Array) -> SegmentState:
        """Split ``transitions[n]`` (begin flags ``begin[n]``) into the rows (eq. 23–27)."""
        begin = jnp.asarray(begin, bool)
        if begin.ndim != 1 or begin.shape[0] < 1:
            raise ValueError(f"begin must be a non-empty 1-D array of flags, got shape {begin.shape}")
        n, length = begin.shape[0], self.segment_length
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions at once to {self.capacity} rows (they could open {n} rows)")
        for leaf in jax.tree.leaves(transitions):
            if jnp.shape(leaf)[:1] != (n,):
                raise ValueError(f"every transitions leaf needs leading size n = len(begin) = {n}, got {jnp.shape(leaf)}")

        # Steps since the fragment's anchor: the last begin flag, or (continuing the episode of
        # the row being filled) a virtual anchor ``col`` steps before this call.
        t = jnp.arange(n)
        anchor = jax.lax.cummax(jnp.where(begin, t, -state.col - 1))
        anchor = jnp.where(anchor < 0, -state.col, anchor)
        since = t - anchor
        col = since % length
        opens = col == 0  # this transition opens a row (the current one if it is still empty)
        row = (state.row + jnp.cumsum(opens) - (state.col == 0)) % self.capacity

        # Clear each opened row, then write the transitions into their cells.
        cleared = jnp.where(opens, row, self.capacity)  # out of bounds: no-op
        data = jax.tree.map(lambda d: d.at[cleared].set(jnp.zeros((), d.dtype), mode="drop"), state.data)
        begin_rows = state.begin.at[cleared].set(False, mode="drop")
        mask_rows = state.mask.at[cleared].set(False, mode="drop")
        data = jax.tree.map(lambda d, x: d.at[row, col].set(jnp.asarray(x, d.dtype)), data, transitions)
        return SegmentState(
            data=data,
            begin=begin_rows.at[row, col].set(begin),
            mask=mask_rows.at[row, col].set(True),
            row=row[-1].astype(jnp.int32),
            col=(col[-1] + 1).astype(jnp.int32),
            rows_used=state.rows_used + jnp.sum(opens, dtype=jnp.int32),
            added=state.added + n,
        )

    def sample(self, state: SegmentState, key: jax.Array, batch_size: int) -> Batch:
        """``batch_size // L`` rows drawn uniformly (with replacement): leaves ``[B // L, L, ...]``."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got batch_size={batch_size!r}")
        if batch_size % self.segment_length:
            raise ValueError(
                f"batch_size={batch_size} must be a multiple of segment_length={self.segment_length} "
                "(a batch is batch_size // segment_length segments)"
            )
        available = jnp.maximum(jnp.minimum(state.rows_used, self.capacity), 1)
        rows = jax.random.randint(key, (batch_size // self.segment_length,), 0, available)
        return Batch(
            data=jax.tree.map(lambda x: x[rows], state.data), begin=state.begin[rows], mask=state.mask[rows]
        )
