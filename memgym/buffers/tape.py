"""Tape-based batching (TBB) replay: one ordered tape of transitions (monoid paper §5, App. G).

The tape ``D`` keeps transitions in the order they were collected and the episode
begin indices ``I`` (here: the begin flags stored with each transition, from which
``I`` is recovered with a static-size ``nonzero``). Storage is a ring of fixed
``capacity`` so every shape is static and :meth:`TapeReplay.add` and
:meth:`TapeReplay.sample` jit and vmap.

* ``add`` (Alg. 4, eq. 30–34): when the new transitions do not fit, whole oldest
  episodes are evicted (pop ``I[0]``, drop ``D[:I[1]]``) until they do. An
  episode may continue across ``add`` calls. Transitions that do not belong to a
  stored episode (a rollout that starts mid-episode into an empty tape, or the
  continuation of an episode longer than the whole tape) are dropped at once
  rather than kept unreachable: the head of the tape is always an episode start.
* ``sample`` (Alg. 5, eq. 35): draw stored episodes uniformly at random (i.i.d.,
  as Alg. 5 does; §5.2's prose says "without replacement", which would make the
  chance of an episode depend on the others' lengths) and concatenate them until
  exactly ``B`` transitions; only the last drawn episode can be cut short. Every
  stored episode can be drawn, the newest one included (the paper's pseudocode
  slices ``D[I[i]:I[i+1]]`` and so never reaches the last episode); the newest
  may still be running.

Several independent tapes (one per worker/environment, §5.1: "keep one D, I per
worker") are a ``jax.vmap`` of ``init``/``add``; :meth:`TapeReplay.sample_tapes`
samples a batch from all of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

PyTree = Any


@struct.dataclass
class TapeState:
    """A ring-stored tape.

    Attributes:
        data: pytree of ``[capacity, ...]`` transitions.
        begin: ``[capacity]`` bool begin flags (True at each episode's first transition).
        head: ring index of the oldest stored transition.
        size: number of stored transitions.
        added: transitions ever offered to ``add``.
        evicted: transitions removed to make room (whole episodes).
        dropped: transitions never stored because they belong to no stored episode.
    """

    data: PyTree
    begin: jax.Array
    head: jax.Array
    size: jax.Array
    added: jax.Array
    evicted: jax.Array
    dropped: jax.Array


@struct.dataclass
class Batch:
    """Sampled transitions. TBB: leaves ``[B, ...]``; SBB: ``[S, L, ...]`` (``S·L = B``).

    ``begin`` marks true episode starts (and, for TBB, the first transition of the
    batch, which is always an episode start); ``mask`` is False on padding.
    """

    data: PyTree
    begin: jax.Array
    mask: jax.Array


@dataclasses.dataclass(frozen=True)
class TapeReplay:
    """TBB replay with room for ``capacity`` transitions of one stream."""

    capacity: int

    def __post_init__(self) -> None:
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise ValueError(f"capacity must be a positive integer, got capacity={self.capacity!r}")

    def init(self, example: PyTree) -> TapeState:
        """An empty tape for transitions shaped like ``example`` (one transition, no leading axis)."""
        data = jax.tree.map(lambda x: jnp.zeros((self.capacity,) + jnp.shape(x), jnp.asarray(x).dtype), example)
        zero = jnp.zeros((), jnp.int32)
        return TapeState(data, jnp.zeros(self.capacity, bool), zero, zero, zero, zero, zero)

    # --- views ---------------------------------------------------------------------------

    def _ring(self, state: TapeState, logical: jax.Array) -> jax.Array:
        return (state.head + logical) % self.capacity

    def episodes(self, state: TapeState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Stored episodes, oldest first: ``(starts[capacity], lengths[capacity], count)``.

        ``starts`` are logical positions (0 = oldest transition); entries at and
        beyond ``count`` are padding with length 0.
        """
        logical = jnp.arange(self.capacity)
        flags = state.begin[self._ring(state, logical)] & (logical < state.size)
        (starts,) = jnp.nonzero(flags, size=self.capacity, fill_value=state.size)
        ends = jnp.concatenate([starts[1:], state.size[None]])
        return starts, ends - starts, jnp.sum(flags)

    def ordered(self, state: TapeState) -> tuple[PyTree, jax.Array, jax.Array]:
        """The tape in order: ``(data[capacity], begin[capacity], valid[capacity])``."""
        logical = jnp.arange(self.capacity)
        ring = self._ring(state, logical)
        valid = logical < state.size
        return jax.tree.map(lambda x: x[ring], state.data), state.begin[ring] & valid, valid

    def can_sample(self, state: TapeState) -> jax.Array:
        """True once at least one episode is stored."""
        return state.size > 0

    # --- Alg. 4 ---------------------------------------------------------------------------

    def add(self, state: TapeState, transitions: PyTree, begin: jax.Array) -> TapeState:
        """Append ``transitions[n]`` with begin flags ``begin[n]`` (Alg. 4, off-policy branch)."""
        begin = jnp.asarray(begin, bool)
        n = begin.shape[0] if begin.ndim == 1 else -1
        if n < 1:
            raise ValueError(f"begin must be a non-empty 1-D array of flags, got shape {begin.shape}")
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions to a tape of capacity {self.capacity}")
        for leaf in jax.tree.leaves(transitions):
            if jnp.shape(leaf)[:1] != (n,):
                raise ValueError(f"every transitions leaf needs leading size n = len(begin) = {n}, got {jnp.shape(leaf)}")

        # Evict whole oldest episodes until n more fit: the new head is the first episode
        # start at or after the first position that must go (or past the end: drop all).
        must_go = state.size + n - self.capacity
        starts, _, _ = self.episodes(state)
        cut = jnp.min(jnp.where(starts >= must_go, starts, state.size))
        cut = jnp.where(must_go > 0, cut, 0)
        head = (state.head + cut) % self.capacity
        size = state.size - cut

        # Into an empty tape, transitions before the first begin flag have no episode start.
        first_begin = jnp.where(jnp.any(begin), jnp.argmax(begin), n)
        skip = jnp.where(size == 0, first_begin, 0)
        keep = jnp.arange(n) >= skip
        ring = (head + size + jnp.arange(n) - skip) % self.capacity
        ring = jnp.where(keep, ring, self.capacity)  # out of bounds: the write is dropped
        data = jax.tree.map(lambda d, x: d.at[ring].set(jnp.asarray(x, d.dtype), mode="drop"), state.data, transitions)
        return TapeState(
            data=data,
            begin=state.begin.at[ring].set(begin, mode="drop"),
            head=head.astype(jnp.int32),
            size=(size + n - skip).astype(jnp.int32),
            added=state.added + n,
            evicted=state.evicted + cut,
            dropped=state.dropped + skip,
        )

    # --- Alg. 5 ---------------------------------------------------------------------------

    def sample(self, state: TapeState, key: jax.Array, batch_size: int) -> Batch:
        """Exactly ``batch_size`` transitions: uniformly drawn whole episodes, concatenated (eq. 35).

        Requires :meth:`can_sample`; on an empty tape the result is meaningless (all-zero data).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got batch_size={batch_size!r}")
        starts, lengths, count = self.episodes(state)
        # batch_size draws always suffice: every episode has at least one transition.
        drawn = jax.random.randint(key, (batch_size,), 0, jnp.maximum(count, 1))
        ends = jnp.cumsum(lengths[drawn])
        position = jnp.arange(batch_size)
        which = jnp.searchsorted(ends, position, side="right")
        offset = position - (ends[which] - lengths[drawn[which]])
        ring = self._ring(state, starts[drawn[which]] + offset)
        data = jax.tree.map(lambda x: x[ring], state.data)
        return Batch(data=data, begin=offset == 0, mask=jnp.ones(batch_size, bool))

    def sample_tapes(self, states: TapeState, key: jax.Array, batch_size: int) -> Batch:
        """Sample from ``k`` vmapped tapes: ``batch_size // k`` transitions from each, concatenated."""
        count = states.begin.shape[0] if states.begin.ndim == 2 else 0
        if count < 1:
            raise ValueError("sample_tapes needs a vmapped TapeState (leading axis: one tape per worker)")
        if batch_size % count:
            raise ValueError(f"batch_size={batch_size} must be a multiple of the number of tapes ({count})")
        keys = jax.random.split(key, count)
        batches = jax.vmap(lambda s, k: self.sample(s, k, batch_size // count))(states, keys)
        return jax.tree.map(lambda x: x.reshape((batch_size,) + x.shape[2:]), batches)
