"""Segment-based batching (SBB) replay (monoid paper §4.1, eq. 23–27).

Episodes are split into fragments of at most ``L`` transitions (``split``, eq. 23),
each zero-padded on the right to a segment of exactly ``L`` with a mask of its real
transitions (``pad``, eq. 25), and the segments are stacked as rows of a dataset
(eq. 26–27). Rows are sampled uniformly.

The rows live in a ring of ``capacity`` rows, oldest overwritten first. A fragment
grows across :meth:`SegmentReplay.add` calls when an episode continues (the row
being filled is sampleable already, with its mask covering what is there). The
surface matches :class:`~memgym.buffers.tape.TapeReplay` (``init``, ``add``,
``sample``, ``sample_stacked``, ``can_sample``) so an agent switches between TBB and SBB by config:
``sample(state, key, B)`` returns ``B // L`` segments, ``[B // L, L, ...]``.

Episodes longer than the buffer are not an error here (unlike TBB): every fragment
is a row of its own, and the ring simply overwrites the oldest rows, those of the
same episode included. Asking for more transitions than are stored is an error
when ``sample`` runs eagerly; under ``jit`` rows repeat (see :meth:`SegmentReplay.sample`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from memgym.buffers.tape import Batch, check_transitions, is_concrete
from memgym.validation import check_positive

PyTree = Any


@struct.dataclass
class SegmentState:
    """Rows of zero-padded segments.

    Attributes:
        data: pytree of ``[capacity, L, ...]``.
        start: ``[capacity, L]`` bool, True where a transition starts an episode.
        mask: ``[capacity, L]`` bool, True on real transitions (eq. 25's ``m``).
        row: the row being filled; col: how many transitions it holds (0 … L).
        rows_used: rows ever started (the number of sampleable rows is ``min(capacity, rows_used)``).
        added: transitions ever added.
    """

    data: PyTree
    start: jax.Array
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
        check_positive(capacity=self.capacity, segment_length=self.segment_length)

    def init(self, example: PyTree) -> SegmentState:
        """An empty dataset for transitions shaped like ``example`` (one transition)."""
        shape = (self.capacity, self.segment_length)
        data = jax.tree.map(lambda x: jnp.zeros(shape + jnp.shape(x), jnp.asarray(x).dtype), example)
        # Distinct counters (not one shared zero), so a jitted ``add`` can donate the state.
        row, col, rows_used, added = (jnp.zeros((), jnp.int32) for _ in range(4))
        return SegmentState(data, jnp.zeros(shape, bool), jnp.zeros(shape, bool), row, col, rows_used, added)

    def can_sample(self, state: SegmentState) -> jax.Array:
        """True once at least one row (so at least one transition) is stored."""
        return state.rows_used > 0

    def stored(self, state: SegmentState) -> jax.Array:
        """Real (unpadded) transitions stored now: the ``True`` entries of ``state.mask``."""
        return jnp.sum(state.mask, dtype=jnp.int32)

    def add(self, state: SegmentState, transitions: PyTree, start: jax.Array) -> SegmentState:
        """Split ``transitions[n]`` (start flags ``start[n]``) into the rows (eq. 23–27).

        Raises ``ValueError`` (always, also under ``jit``/``vmap``: these depend only on
        shapes and dtypes) if ``start`` is not a non-empty 1-D array, ``n > capacity``
        (rows), or ``transitions`` differs from the stored data (the ``example`` given to
        :meth:`init`) in tree structure, in a leaf's shape (``[n, *example_shape]``) or
        in a leaf's dtype (same dtype after JAX's canonicalisation; weakly typed values
        that JAX promotes to the stored dtype are accepted).
        """
        start = jnp.asarray(start, bool)
        if start.ndim != 1 or start.shape[0] < 1:
            raise ValueError(f"start must be a non-empty 1-D array of flags, got shape {start.shape}")
        n, length = start.shape[0], self.segment_length
        if n > self.capacity:
            raise ValueError(
                f"cannot add {n} transitions at once to capacity={self.capacity} rows (they could open {n} rows)"
            )
        check_transitions(state.data, transitions, n, stored_axes=2)

        # Steps since the fragment's anchor: the last start flag, or (continuing the episode of
        # the row being filled) a virtual anchor ``col`` steps before this call.
        t = jnp.arange(n)
        anchor = jax.lax.cummax(jnp.where(start, t, -state.col - 1))
        anchor = jnp.where(anchor < 0, -state.col, anchor)
        since = t - anchor
        col = since % length
        opens = col == 0  # this transition opens a row (the current one if it is still empty)
        row = (state.row + jnp.cumsum(opens) - (state.col == 0)) % self.capacity

        # Clear each opened row, then write the transitions into their cells.
        cleared = jnp.where(opens, row, self.capacity)  # out of bounds: no-op
        data = jax.tree.map(lambda d: d.at[cleared].set(jnp.zeros((), d.dtype), mode="drop"), state.data)
        start_rows = state.start.at[cleared].set(False, mode="drop")
        mask_rows = state.mask.at[cleared].set(False, mode="drop")
        data = jax.tree.map(lambda d, x: d.at[row, col].set(jnp.asarray(x, d.dtype)), data, transitions)
        return SegmentState(
            data=data,
            start=start_rows.at[row, col].set(start),
            mask=mask_rows.at[row, col].set(True),
            row=row[-1].astype(jnp.int32),
            col=(col[-1] + 1).astype(jnp.int32),
            rows_used=state.rows_used + jnp.sum(opens, dtype=jnp.int32),
            added=state.added + n,
        )

    def sample(self, state: SegmentState, key: jax.Array, batch_size: int) -> Batch:
        """``batch_size // L`` rows drawn uniformly (with replacement): leaves ``[B // L, L, ...]``.

        ``batch_size`` must be a positive Python ``int`` and a multiple of ``L``
        (``ValueError`` otherwise, also under ``jit``). It must not exceed the real
        (unpadded) transitions stored, :meth:`stored` (the ``True`` entries of
        ``state.mask``, not ``rows × L``: a batch is meant to carry ``batch_size``
        transitions, and padding carries none):

        * called eagerly (concrete state), ``batch_size > stored(state)`` raises
          ``ValueError`` (an empty buffer included);
        * under ``jit``/``vmap`` it cannot raise: the rows are still drawn with
          replacement, so more of them repeat; on an empty buffer every row is all
          padding (``mask`` False). Check :meth:`can_sample` or ``stored(state)`` yourself.
        """
        self._check_batch_size(batch_size)
        if is_concrete(state.mask) and batch_size > int(self.stored(state)):
            raise ValueError(
                f"batch_size={batch_size} exceeds the {int(self.stored(state))} stored transitions "
                f"(real transitions, padding not counted; {min(int(state.rows_used), self.capacity)} rows "
                f"of segment_length={self.segment_length})"
            )
        available = jnp.maximum(jnp.minimum(state.rows_used, self.capacity), 1)
        rows = jax.random.randint(key, (batch_size // self.segment_length,), 0, available)
        return Batch(
            data=jax.tree.map(lambda x: x[rows], state.data), start=state.start[rows], mask=state.mask[rows]
        )

    def sample_stacked(self, states: SegmentState, key: jax.Array, batch_size: int) -> Batch:
        """``batch_size // L`` rows drawn uniformly from the union of ``k`` stacked replays' rows.

        ``states`` has a leading axis of ``k`` replays (``jax.vmap`` of :meth:`init` and
        :meth:`add`, e.g. one per environment); the stored rows of all of them form one
        dataset (monoid paper eq. 26–27), so ``batch_size`` need only be a multiple of
        ``L``. Leaves ``[B // L, L, ...]``, as :meth:`sample`. Eagerly, ``batch_size``
        above the real transitions stored in all replays together raises ``ValueError``;
        under ``jit`` rows repeat (see :meth:`sample`).
        """
        if states.start.ndim != 3:
            raise ValueError("sample_stacked needs stacked SegmentStates (leading axis: one replay each)")
        self._check_batch_size(batch_size)
        if is_concrete(states.mask) and batch_size > int(jnp.sum(states.mask)):
            raise ValueError(
                f"batch_size={batch_size} exceeds the {int(jnp.sum(states.mask))} stored transitions "
                f"of the {states.start.shape[0]} replays (real transitions, padding not counted)"
            )
        rows = jnp.minimum(states.rows_used, self.capacity)  # sampleable rows of each replay
        ends = jnp.cumsum(rows)
        drawn = jax.random.randint(key, (batch_size // self.segment_length,), 0, jnp.maximum(ends[-1], 1))
        replay = jnp.searchsorted(ends, drawn, side="right")
        row = drawn - (ends[replay] - rows[replay])
        take = lambda x: x[replay, row]  # noqa: E731
        return Batch(data=jax.tree.map(take, states.data), start=take(states.start), mask=take(states.mask))

    def _check_batch_size(self, batch_size: int) -> None:
        check_positive(batch_size=batch_size)
        if batch_size % self.segment_length:
            raise ValueError(
                f"batch_size={batch_size} must be a multiple of segment_length={self.segment_length} "
                "(a batch is batch_size // segment_length segments)"
            )
