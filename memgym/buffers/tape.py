"""Tape-based batching (TBB) replay: one ordered tape of transitions (monoid paper §5, Alg. 4–5, App. G).

A ring of ``capacity`` transitions with start flags, in the order collected, and the
episode index ``I`` kept beside it, so every shape is static and ``add`` (O(n + log
capacity); evicts whole oldest episodes, eq. 30–34) and ``sample`` (O(B); whole episodes
drawn uniformly and concatenated to exactly ``B`` transitions, eq. 35) jit and vmap.
One tape per worker is a ``jax.vmap``; :meth:`TapeReplay.sample_stacked` draws from all
of them. The ring and index layout and the edge cases: docs/internals.md.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from memgym.validation import check_positive

PyTree = Any


def is_concrete(*values: Any) -> bool:
    """True when no leaf of ``values`` is a JAX tracer (so it can be read on the host).

    Inside ``jax.jit``, ``jax.vmap``, ``jax.lax.scan`` … the buffers' counters are
    tracers and the data-dependent checks of ``add`` and ``sample`` are skipped
    (they cannot raise there); called eagerly, the counters are concrete and the
    checks run.
    """
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(values))


def _dtype_matches(value: Any, stored: np.dtype) -> bool:
    """Whether ``value`` can be written into a ``stored`` field without a silent cast.

    Accepted: the same dtype after JAX's canonicalisation (so a NumPy ``float64`` or
    ``int64`` array matches a ``float32``/``int32`` field when 64-bit mode is off, as
    ``jnp.asarray`` would make it anyway), and weakly typed values (results of Python
    scalars) that JAX's own type promotion puts into ``stored`` (a weak ``int`` into a
    float field, a weak ``float`` into ``float16``; not a weak ``float`` into an ``int`` field).
    """
    got = jax.dtypes.canonicalize_dtype(value.dtype if hasattr(value, "dtype") else np.result_type(value))
    if got == stored:
        return True
    return bool(getattr(value, "weak_type", False)) and jnp.result_type(value, stored) == stored


def check_transitions(data: PyTree, transitions: PyTree, n: int, stored_axes: int) -> None:
    """Static check of ``transitions`` (``n`` of them) against the stored ``data`` fields.

    ``data`` leaves are ``[*storage, ...]`` with ``stored_axes`` storage axes (TBB: 1,
    SBB: 2); every ``transitions`` leaf must be ``[n, ...]`` with the same trailing shape
    and the same dtype (see :func:`_dtype_matches`), in the same tree structure. Raises
    ``ValueError`` naming the field path, the expected and the got value. Depends only on
    shapes and dtypes, so it runs under ``jit``/``vmap`` too (at trace time).
    """
    stored_paths, stored_def = jax.tree_util.tree_flatten_with_path(data)
    got_paths, got_def = jax.tree_util.tree_flatten_with_path(transitions)
    if stored_def != got_def:
        stored_names = [jax.tree_util.keystr(p) for p, _ in stored_paths]
        got_names = [jax.tree_util.keystr(p) for p, _ in got_paths]
        missing = [k for k in stored_names if k not in got_names]
        unexpected = [k for k in got_names if k not in stored_names]
        detail = (f"; missing fields {missing}" if missing else "") + (
            f"; unexpected fields {unexpected}" if unexpected else ""
        )
        raise ValueError(
            "transitions must have the tree structure of the stored data (the example given to init): "
            f"expected {stored_def}, got {got_def}{detail}"
        )
    for (path, stored), (_, leaf) in zip(stored_paths, got_paths):
        name = "transitions" + jax.tree_util.keystr(path)
        expected_shape = (n,) + tuple(stored.shape[stored_axes:])
        shape = tuple(np.shape(leaf))
        if shape != expected_shape:
            raise ValueError(
                f"{name}: expected shape {expected_shape} (n = len(start) = {n} transitions of trailing shape "
                f"{expected_shape[1:]} as stored), got shape {shape}"
            )
        if not _dtype_matches(leaf, stored.dtype):
            got = leaf.dtype if hasattr(leaf, "dtype") else np.result_type(leaf)
            weak = " (weakly typed)" if getattr(leaf, "weak_type", False) else ""
            raise ValueError(f"{name}: expected dtype {stored.dtype} as stored, got dtype {got}{weak}")


@struct.dataclass
class TapeState:
    """A ring-stored tape and its episode index.

    Attributes:
        data: pytree of ``[capacity, ...]`` transitions.
        start: ``[capacity]`` bool start flags (True at each episode's first transition).
        head: ring index of the oldest stored transition.
        size: number of stored transitions.
        added: transitions ever offered to ``add`` (int32 total, wraps after 2**31 − 1).
        evicted: transitions removed to make room (whole episodes; int32 total).
        dropped: transitions never stored because they belong to no stored episode (int32 total).
        starts: ``[capacity]`` int32 ring of episode starts (the index ``I``): the data
            ring position of each stored episode's first transition.
        first_episode: slot of ``starts`` holding the oldest stored episode.
        num_episodes: number of stored episodes (slots ``first_episode``,
            ``first_episode + 1``, … of ``starts``, modulo ``capacity``).
    """

    data: PyTree
    start: jax.Array
    head: jax.Array
    size: jax.Array
    added: jax.Array
    evicted: jax.Array
    dropped: jax.Array
    starts: jax.Array
    first_episode: jax.Array
    num_episodes: jax.Array


@struct.dataclass
class Batch:
    """Sampled transitions. TBB: leaves ``[B, ...]``; SBB: ``[S, L, ...]`` (``S·L = B``).

    ``start`` marks true episode starts (and, for TBB, the first transition of the
    batch, which is always an episode start); ``mask`` is False on padding.
    """

    data: PyTree
    start: jax.Array
    mask: jax.Array


@dataclasses.dataclass(frozen=True)
class TapeReplay:
    """TBB replay with room for ``capacity`` transitions of one stream."""

    capacity: int

    def __post_init__(self) -> None:
        check_positive(capacity=self.capacity)

    def init(self, example: PyTree) -> TapeState:
        """An empty tape for transitions shaped like ``example`` (one transition, no leading axis)."""
        data = jax.tree.map(lambda x: jnp.zeros((self.capacity,) + jnp.shape(x), jnp.asarray(x).dtype), example)
        # Distinct counters (not one shared zero), so a jitted ``add`` can donate the state.
        head, size, added, evicted, dropped, first_episode, num_episodes = (jnp.zeros((), jnp.int32) for _ in range(7))
        return TapeState(
            data=data,
            start=jnp.zeros(self.capacity, bool),
            head=head,
            size=size,
            added=added,
            evicted=evicted,
            dropped=dropped,
            starts=jnp.zeros(self.capacity, jnp.int32),
            first_episode=first_episode,
            num_episodes=num_episodes,
        )

    # --- index helpers -------------------------------------------------------------------

    def _ring(self, state: TapeState, logical: jax.Array) -> jax.Array:
        """Data ring position of logical position ``logical`` (0 = oldest stored transition)."""
        return (state.head + logical) % self.capacity

    def _episode_start(self, state: TapeState, episode: jax.Array) -> tuple[jax.Array, jax.Array]:
        """``(ring, logical)`` position of the first transition of stored episode ``episode`` (0 = oldest).

        Meaningful for ``0 <= episode < num_episodes``; other values read a stale slot
        (still a valid ring position, so gathers with it stay in bounds).
        """
        ring = state.starts[(state.first_episode + episode) % self.capacity]
        return ring, (ring - state.head) % self.capacity

    def _episode_end(self, state: TapeState, episode: jax.Array) -> jax.Array:
        """Logical end (exclusive) of stored episode ``episode``: the next one's start, or ``size`` for the newest."""
        _, following = self._episode_start(state, episode + 1)
        return jnp.where(episode + 1 < state.num_episodes, following, state.size)

    def _first_episode_at(self, state: TapeState, logical: jax.Array) -> jax.Array:
        """Number of stored episodes that start before logical position ``logical``.

        That is, the index of the first stored episode starting at or after
        ``logical`` (``num_episodes`` if there is none). Episode starts increase
        along the index, so this is a lower-bound binary search: a fixed
        ``capacity.bit_length()`` halvings of ``[lo, hi)``, each a no-op once the
        range is empty, which is enough for any ``num_episodes <= capacity``.
        """

        def halve(_, bounds):
            lo, hi = bounds
            mid = (lo + hi) // 2
            _, start = self._episode_start(state, mid)
            searching = lo < hi
            at_or_after = start >= logical
            return (
                jnp.where(searching & ~at_or_after, mid + 1, lo),
                jnp.where(searching & at_or_after, mid, hi),
            )

        lo, _ = jax.lax.fori_loop(
            0, self.capacity.bit_length(), halve, (jnp.zeros((), jnp.int32), state.num_episodes)
        )
        return lo

    # --- views ---------------------------------------------------------------------------

    def episodes(self, state: TapeState) -> tuple[jax.Array, jax.Array, jax.Array]:
        """Stored episodes, oldest first: ``(starts[capacity], lengths[capacity], count)``.

        ``starts`` are logical positions (0 = oldest transition); entries at and
        beyond ``count`` are padding (start ``size``, length 0). Read from the index.
        """
        episode = jnp.arange(self.capacity)
        _, logical = self._episode_start(state, episode)
        starts = jnp.where(episode < state.num_episodes, logical, state.size)
        ends = jnp.concatenate([starts[1:], state.size[None]])
        return starts, ends - starts, state.num_episodes

    def ordered(self, state: TapeState) -> tuple[PyTree, jax.Array, jax.Array]:
        """The tape in order: ``(data[capacity], start[capacity], valid[capacity])``."""
        logical = jnp.arange(self.capacity)
        ring = self._ring(state, logical)
        valid = logical < state.size
        return jax.tree.map(lambda x: x[ring], state.data), state.start[ring] & valid, valid

    def can_sample(self, state: TapeState) -> jax.Array:
        """True once at least one episode is stored."""
        return state.size > 0

    # --- Alg. 4 ---------------------------------------------------------------------------

    def add(self, state: TapeState, transitions: PyTree, start: jax.Array) -> TapeState:
        """Append ``transitions[n]`` with start flags ``start[n]`` (Alg. 4, off-policy branch).

        Raises ``ValueError`` (always, also under ``jit``/``vmap``: these depend only on
        shapes and dtypes) if ``start`` is not a non-empty 1-D array, ``n > capacity``, or
        ``transitions`` differs from the stored data (the ``example`` given to :meth:`init`)
        in tree structure, in a leaf's shape (``[n, *example_shape]``) or in a leaf's dtype
        (same dtype after JAX's canonicalisation; weakly typed values that JAX promotes to
        the stored dtype are accepted).

        An episode that does not fit in the tape: when the transitions that continue the
        newest stored episode need room that only evicting that episode itself can make
        (its length so far plus the transitions added after it exceed ``capacity``), the
        episode is evicted and its continuation has no stored start.

        * Called eagerly (concrete state), this raises ``ValueError`` ("an episode of at
          least N transitions does not fit in capacity=C").
        * Under ``jit``/``vmap`` it cannot raise: the continuation is dropped (not stored)
          and counted in ``state.dropped``, and so are the further transitions of that
          episode in later calls, until the next start flag. Check with
          ``state.dropped`` (``size + evicted + dropped == added`` always holds).

        Transitions added to an empty tape before the first start flag (a stream that
        starts mid-episode) are dropped and counted in ``dropped`` in both cases,
        without an error.
        """
        start = jnp.asarray(start, bool)
        n = start.shape[0] if start.ndim == 1 else -1
        if n < 1:
            raise ValueError(f"start must be a non-empty 1-D array of flags, got shape {start.shape}")
        if n > self.capacity:
            raise ValueError(f"cannot add {n} transitions to a tape of capacity={self.capacity}")
        check_transitions(state.data, transitions, n, stored_axes=1)

        # Evict whole oldest episodes until n more fit: the new head is the first episode
        # start at or after the first position that must go (or past the end: drop all).
        must_go = state.size + n - self.capacity
        evict = jnp.where(must_go > 0, self._first_episode_at(state, must_go), 0)
        _, kept_start = self._episode_start(state, evict)
        cut = jnp.where(must_go <= 0, 0, jnp.where(evict < state.num_episodes, kept_start, state.size))
        head = (state.head + cut) % self.capacity
        size = state.size - cut
        first_episode = (state.first_episode + evict) % self.capacity
        num_episodes = state.num_episodes - evict

        # Into an empty tape, transitions before the first start flag have no episode start.
        first_start = jnp.where(jnp.any(start), jnp.argmax(start), n)
        skip = jnp.where(size == 0, first_start, 0)
        if is_concrete(state.size, state.num_episodes, skip):
            self._check_episode_fits(state, n, int(skip))
        keep = jnp.arange(n) >= skip
        ring = (head + size + jnp.arange(n) - skip) % self.capacity
        dest = jnp.where(keep, ring, self.capacity)  # out of bounds: the write is dropped
        data = jax.tree.map(lambda d, x: d.at[dest].set(jnp.asarray(x, d.dtype), mode="drop"), state.data, transitions)

        # Append the chunk's episode starts to the index. The skipped prefix holds no
        # start flag, so every flagged transition is stored. ``num_episodes`` stays
        # <= ``size`` <= capacity, so the appended slots never overwrite live ones.
        new_count = jnp.sum(start, dtype=jnp.int32)
        (flagged,) = jnp.nonzero(start, size=n, fill_value=0)
        j = jnp.arange(n)
        slot = jnp.where(j < new_count, (first_episode + num_episodes + j) % self.capacity, self.capacity)
        starts = state.starts.at[slot].set(ring[flagged].astype(jnp.int32), mode="drop")

        return TapeState(
            data=data,
            start=state.start.at[dest].set(start, mode="drop"),
            head=head.astype(jnp.int32),
            size=(size + n - skip).astype(jnp.int32),
            added=state.added + n,
            evicted=(state.evicted + cut).astype(jnp.int32),
            dropped=(state.dropped + skip).astype(jnp.int32),
            starts=starts,
            first_episode=first_episode.astype(jnp.int32),
            num_episodes=(num_episodes + new_count).astype(jnp.int32),
        )

    def _check_episode_fits(self, state: TapeState, n: int, skip: int) -> None:
        """Eager half of :meth:`add`: raise if the add would drop the continuation of a stored episode."""
        if skip == 0 or int(state.size) == 0:
            return  # nothing dropped, or a stream that starts mid-episode into an empty tape
        # The evictions emptied the tape, the newest (running) episode included, and the
        # first ``skip`` transitions of this call continue it.
        _, newest = self._episode_start(state, state.num_episodes - 1)
        stored = int(state.size) - int(newest)
        length = stored + skip
        if length > self.capacity:
            why = f"an episode of at least {length} transitions does not fit in capacity={self.capacity}"
        else:
            why = (
                f"an episode of at least {length} transitions does not fit in capacity={self.capacity} "
                f"together with the {n - skip} transitions added after it in the same call "
                f"({stored + n} slots needed)"
            )
        raise ValueError(
            f"{why}: add would evict its {stored} stored transitions and drop the {skip} that continue it "
            "(under jit they are dropped and counted in TapeState.dropped); use a larger capacity"
        )

    # --- Alg. 5 ---------------------------------------------------------------------------

    def sample(self, state: TapeState, key: jax.Array, batch_size: int) -> Batch:
        """Exactly ``batch_size`` transitions: uniformly drawn whole episodes, concatenated (eq. 35).

        ``batch_size`` must be a positive Python ``int`` (``ValueError`` otherwise, also
        under ``jit``). It must not exceed the stored transitions (``state.size``):

        * called eagerly (concrete state), ``batch_size > state.size`` raises ``ValueError``
          (an empty tape included);
        * under ``jit``/``vmap`` it cannot raise and the batch is still filled: episodes are
          drawn i.i.d., so some repeat (a batch may repeat episodes at any size, only more
          so here); on an empty tape the result is meaningless (all-zero data). Check
          :meth:`can_sample` (something stored) or ``state.size >= batch_size`` yourself.

        The one-tape case of :meth:`sample_stacked`.
        """
        return self.sample_stacked(jax.tree.map(lambda x: x[None], state), key, batch_size)

    def sample_stacked(self, states: TapeState, key: jax.Array, batch_size: int) -> Batch:
        """Alg. 5 over ``k`` tapes stacked by ``jax.vmap`` (one per worker): episodes drawn from all of them.

        The ``k`` tapes together hold ``N = Σ num_episodes`` episodes; ``batch_size``
        draws pick episodes uniformly (i.i.d.) among all ``N``, whichever tape holds
        them, and lay them end to end until exactly ``batch_size`` transitions; only
        the last episode reached is cut. So every transition of every stored episode
        no longer than ``batch_size`` can be sampled, as in the paper, whatever the
        number of tapes. An episode longer than ``batch_size`` is sampled from its
        start only: its transitions from position ``batch_size`` on never reach a
        batch (use a ``batch_size`` at least the longest episode; T-Maze episodes of
        corridor length L last at least L steps).

        Errors as :meth:`sample`, with the total stored over all tapes in place of
        ``state.size``. Cost O(``batch_size`` + k): only the drawn episodes' bounds
        are read from the index.
        """
        count = states.start.shape[0] if states.start.ndim == 2 else 0
        if count < 1:
            raise ValueError("sample_stacked needs stacked TapeStates (leading axis: one tape per worker)")
        check_positive(batch_size=batch_size)
        if is_concrete(states.size):
            stored = int(np.asarray(states.size).sum())
            if batch_size > stored:
                where = "" if count == 1 else f" in {count} tapes"
                raise ValueError(f"batch_size={batch_size} exceeds the {stored} stored transitions{where}")
        episodes = states.num_episodes  # [k]
        ends = jnp.cumsum(episodes)
        # batch_size draws always suffice: every episode has at least one transition.
        drawn = jax.random.randint(key, (batch_size,), 0, jnp.maximum(ends[-1], 1))
        tape = jnp.minimum(jnp.searchsorted(ends, drawn, side="right"), count - 1)
        episode = drawn - (ends[tape] - episodes[tape])

        def start_of(index: jax.Array) -> tuple[jax.Array, jax.Array]:
            """``(ring, logical)`` start of stored episode ``index`` of each drawn tape (see ``_episode_start``)."""
            ring = states.starts[tape, (states.first_episode[tape] + index) % self.capacity]
            return ring, (ring - states.head[tape]) % self.capacity

        start_ring, start = start_of(episode)
        _, following = start_of(episode + 1)
        end = jnp.where(episode + 1 < episodes[tape], following, states.size[tape])
        lengths = end - start
        # Lay the drawn episodes end to end: the j-th begins at batch position ``first[j]``.
        # Marking those positions and counting the marks up to each position tells which
        # drawn episode every position belongs to (O(B), no search); episodes that start
        # at or past ``batch_size`` are not reached and their marks are dropped.
        first = jnp.cumsum(lengths) - lengths
        marks = jnp.zeros(batch_size, jnp.int32).at[first].set(1, mode="drop")
        which = jnp.cumsum(marks) - 1
        offset = jnp.arange(batch_size) - first[which]
        ring = (start_ring[which] + offset) % self.capacity
        data = jax.tree.map(lambda x: x[tape[which], ring], states.data)
        return Batch(data=data, start=offset == 0, mask=jnp.ones(batch_size, bool))
