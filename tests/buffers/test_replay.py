"""TBB (monoid paper Alg. 4–5) and SBB (§4.1, eq. 23–27) replay against plain-Python references.

Every stored transition carries a unique id (its position in the collected stream), so
loss, duplication and reordering are visible directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memgym.buffers import make_replay
from memgym.buffers.segment import SegmentReplay
from memgym.buffers.tape import TapeReplay

SETTINGS = settings(max_examples=40, deadline=None)
CAPACITY = 24
ADD = 6  # transitions per add call (static shape: one compile)


def stream(seed: int, calls: int, start_rate: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """``calls`` chunks of ``ADD`` transitions (ids 0, 1, …) with random start flags."""
    rng = np.random.default_rng(seed)
    start = rng.random(calls * ADD) < start_rate
    start[0] = rng.random() < 0.8  # sometimes the stream starts mid-episode
    ids = np.arange(calls * ADD, dtype=np.int32)
    return [(ids[i * ADD : (i + 1) * ADD], start[i * ADD : (i + 1) * ADD]) for i in range(calls)]


def tape_reference(chunks, capacity: int) -> list[list[int]]:
    """Alg. 4 on Python lists: episodes oldest first; transitions outside any episode are dropped."""
    episodes: list[list[int]] = []
    for ids, start in chunks:
        while episodes and sum(map(len, episodes)) + len(ids) > capacity:
            episodes.pop(0)
        for i, b in zip(ids.tolist(), start.tolist()):
            if b:
                episodes.append([i])
            elif episodes:
                episodes[-1].append(i)
    return episodes


tape = TapeReplay(CAPACITY)
tape_add = jax.jit(tape.add)
tape_sample = jax.jit(tape.sample, static_argnums=2)


def fill_tape(chunks):
    state = tape.init(jnp.int32(0))
    for ids, start in chunks:
        state = tape_add(state, jnp.asarray(ids), jnp.asarray(start))
    return state


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.floats(0.05, 0.6))
def test_tape_keeps_whole_episodes_in_order(seed, calls, start_rate):
    chunks = stream(seed, calls, start_rate)
    state = fill_tape(chunks)
    episodes = tape_reference(chunks, CAPACITY)
    data, start, valid = tape.ordered(state)
    stored = np.asarray(data)[np.asarray(valid)].tolist()
    assert stored == [i for ep in episodes for i in ep]  # nothing lost, duplicated or reordered
    assert int(state.size) <= CAPACITY
    assert np.asarray(start)[np.asarray(valid)].tolist() == [j == 0 for ep in episodes for j in range(len(ep))]
    if episodes:
        assert bool(start[0])  # the head is always an episode start
    starts, lengths, count = tape.episodes(state)
    assert int(count) == len(episodes)
    assert np.asarray(lengths)[: len(episodes)].tolist() == [len(ep) for ep in episodes]
    n = calls * ADD
    assert int(state.added) == n
    assert int(state.size + state.evicted + state.dropped) == n


@pytest.mark.slow
@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.floats(0.05, 0.6), st.integers(1, 40))
def test_tape_sample_concatenates_whole_episodes(seed, calls, start_rate, batch_size):
    chunks = stream(seed, calls, start_rate)
    episodes = tape_reference(chunks, CAPACITY)
    if not episodes:
        return
    state = fill_tape(chunks)
    batch = tape_sample(state, jax.random.key(seed), batch_size)
    ids, start = np.asarray(batch.data), np.asarray(batch.start)
    assert ids.shape == start.shape == (batch_size,) and bool(np.all(batch.mask))
    assert start[0]
    by_first = {ep[0]: ep for ep in episodes}
    runs = np.split(ids, np.flatnonzero(start)[1:])
    for k, run in enumerate(runs):
        episode = by_first[int(run[0])]  # every run starts at a true episode start
        if k < len(runs) - 1:
            assert run.tolist() == episode  # whole episodes...
        else:
            assert run.tolist() == episode[: len(run)]  # ...except possibly the last, cut short


def test_tape_sampling_is_uniform_over_episodes():
    """Chi-square test of the draw counts (fixed seed): every episode, the newest included."""
    lengths = [1, 5, 2, 9, 3, 1, 4]
    start = np.concatenate([np.eye(1, n, 0, bool)[0] for n in lengths])
    state = TapeReplay(40).add(TapeReplay(40).init(jnp.int32(0)), jnp.arange(start.size, dtype=jnp.int32), start)
    first_ids = np.cumsum([0] + lengths[:-1])
    counts = np.zeros(len(lengths))
    sample = jax.jit(TapeReplay(40).sample, static_argnums=2)
    for i in range(400):
        batch = sample(state, jax.random.key(i), 16)
        ids = np.asarray(batch.data)[np.asarray(batch.start)]
        counts += np.array([(ids == f).sum() for f in first_ids])
    expected = counts.sum() / len(lengths)
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert counts.min() > 0
    assert chi2 < 22.46  # 99.9% quantile of chi-square with 6 degrees of freedom


@SETTINGS
@given(
    st.lists(st.sampled_from([1, 5, ADD, CAPACITY]), min_size=1, max_size=15),
    st.integers(0, 2**32 - 1),
    st.floats(0.02, 0.6),
)
def test_tape_index_matches_begin_flags(sizes, seed, start_rate):
    """The explicit episode index equals the starts recovered from the stored start flags.

    Checked after every add of a stream of variously sized chunks: full-tape chunks,
    evictions, episodes longer than the tape and streams starting mid-episode.
    """
    rng = np.random.default_rng(seed)
    start = rng.random(sum(sizes)) < start_rate
    ids = np.arange(start.size, dtype=np.int32)
    bounds = np.cumsum([0] + sizes)
    chunks = [(ids[a:b], start[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    state = tape.init(jnp.int32(0))
    for k, (chunk_ids, chunk_start) in enumerate(chunks):
        state = tape_add(state, jnp.asarray(chunk_ids), jnp.asarray(chunk_start))
        # The old way: scan the start flags of the whole ordered tape.
        _, flags, _ = tape.ordered(state)
        size = int(state.size)
        from_flags = np.flatnonzero(np.asarray(flags))
        # The index: ring positions of the stored starts, oldest first, made logical.
        count, first, head = int(state.num_episodes), int(state.first_episode), int(state.head)
        slots = (first + np.arange(count)) % CAPACITY
        from_index = (np.asarray(state.starts)[slots] - head) % CAPACITY
        assert from_index.tolist() == from_flags.tolist()
        starts, lengths, episode_count = map(np.asarray, tape.episodes(state))
        assert int(episode_count) == count
        assert starts[:count].tolist() == from_flags.tolist()
        assert lengths.tolist() == np.diff(np.append(from_flags, size)).tolist() + [0] * (CAPACITY - count)
        assert 0 <= first < CAPACITY and 0 <= head < CAPACITY and count <= size <= CAPACITY
        # And the tape still matches Alg. 4 on Python lists.
        episodes = tape_reference(chunks[: k + 1], CAPACITY)
        data, _, valid = tape.ordered(state)
        assert np.asarray(data)[np.asarray(valid)].tolist() == [i for ep in episodes for i in ep]


def test_tape_drops_transitions_without_an_episode_start():
    buf = TapeReplay(8)
    # A stream that starts mid-episode into an empty tape: dropped and counted, eagerly too.
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(4), jnp.array([0, 0, 1, 0], bool))
    assert int(state.size) == 2 and int(state.dropped) == 2
    state = buf.add(state, jnp.arange(4, 6), jnp.array([1, 0], bool))
    assert int(state.size) == 4 and int(state.dropped) == 2


def test_tape_episode_longer_than_capacity():
    buf = TapeReplay(8)
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(4), jnp.array([0, 0, 1, 0], bool))
    # Eagerly, an episode longer than the whole tape is an error (2 stored + 8 continuing).
    with pytest.raises(ValueError, match="an episode of at least 10 transitions does not fit in capacity=8"):
        buf.add(state, jnp.arange(10, 18), jnp.zeros(8, bool))
    # Under jit it cannot raise: the episode leaves nothing behind but its successor, and
    # the lost transitions are counted.
    add = jax.jit(buf.add)
    state = add(state, jnp.arange(10, 18), jnp.zeros(8, bool))
    assert int(state.size) == 0 and int(state.evicted) == 2 and int(state.dropped) == 2 + 8
    state = add(state, jnp.arange(20, 23), jnp.array([0, 1, 0], bool))
    assert int(state.dropped) == 2 + 8 + 1
    assert np.asarray(buf.ordered(state)[0])[:2].tolist() == [21, 22]
    assert int(state.size + state.evicted + state.dropped) == int(state.added)


def test_tape_episode_that_fits_only_without_the_rest_of_the_chunk():
    """A running episode of 5 continued by 1, then 5 more in the same call: 11 slots > 8."""
    buf = TapeReplay(8)
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(5), jnp.eye(1, 5, 0, bool)[0])
    chunk, flags = jnp.arange(5, 11), jnp.array([0, 1, 0, 0, 0, 0], bool)
    with pytest.raises(ValueError, match=r"at least 6 transitions does not fit in capacity=8 together with the 5"):
        buf.add(state, chunk, flags)
    state = jax.jit(buf.add)(state, chunk, flags)
    assert int(state.dropped) == 1 and int(state.evicted) == 5 and int(state.size) == 5


def test_tapes_vmap_one_per_worker():
    workers = 3
    states = jax.vmap(lambda _: tape.init(jnp.int32(0)))(jnp.arange(workers))
    add = jax.jit(jax.vmap(tape.add))
    for step in range(5):
        ids = jnp.arange(workers * ADD, dtype=jnp.int32).reshape(workers, ADD) + 100 * step
        start = jnp.zeros((workers, ADD), bool).at[:, 0].set(step % 2 == 0)
        states = add(states, ids, start)
    batch = jax.jit(tape.sample_stacked, static_argnums=2)(states, jax.random.key(0), 31)
    assert batch.data.shape == (31,)  # any batch size: episodes are drawn across the tapes
    stored = {int(i) for i in np.asarray(states.data).reshape(-1)}
    assert {int(i) for i in np.asarray(batch.data)} <= stored


# --- SBB ---------------------------------------------------------------------------------------


def segment_reference(chunks, length: int) -> list[list[tuple[int, bool]]]:
    """split + pad (eq. 23–26) on Python lists: every row ever started, oldest first."""
    rows: list[list[tuple[int, bool]]] = []
    for ids, start in chunks:
        for i, b in zip(ids.tolist(), start.tolist()):
            if b or not rows or len(rows[-1]) == length:
                rows.append([])
            rows[-1].append((i, b))
    return rows


@pytest.mark.slow
@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1, 12), st.floats(0.05, 0.6), st.sampled_from([1, 3, 4]))
def test_segments_split_and_pad(seed, calls, start_rate, length):
    chunks = stream(seed, calls, start_rate)
    rows_capacity = 10
    buf = SegmentReplay(rows_capacity, length)
    state = buf.init({"id": jnp.int32(0), "x": jnp.zeros(2)})
    add = jax.jit(buf.add)
    for ids, start in chunks:
        state = add(state, {"id": jnp.asarray(ids) + 1, "x": jnp.ones((len(ids), 2))}, jnp.asarray(start))
    rows = segment_reference(chunks, length)
    assert int(state.rows_used) == len(rows)
    kept = rows[-rows_capacity:]  # the ring overwrote the oldest rows
    first = len(rows) - len(kept)
    data, mask, start = np.asarray(state.data["id"]), np.asarray(state.mask), np.asarray(state.start)
    for k, row in enumerate(kept):
        slot = (first + k) % rows_capacity
        assert data[slot].tolist() == [i + 1 for i, _ in row] + [0] * (length - len(row))  # zero padding
        assert mask[slot].tolist() == [True] * len(row) + [False] * (length - len(row))  # masks count real steps
        assert start[slot].tolist() == [b for _, b in row] + [False] * (length - len(row))
        x = np.asarray(state.data["x"][slot])
        assert np.all(x[mask[slot]] == 1.0) and np.all(x[~mask[slot]] == 0.0)
    unused = [s for s in range(rows_capacity) if s >= len(rows)]
    assert not mask[unused].any()


def test_segment_sample_shapes_and_errors():
    buf = SegmentReplay(16, 4)
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(1, 11), jnp.array([1, 0, 0, 0, 0, 1, 0, 0, 0, 0], bool))
    batch = jax.jit(buf.sample, static_argnums=2)(state, jax.random.key(0), 12)
    assert batch.data.shape == batch.mask.shape == batch.start.shape == (3, 4)
    rows = np.asarray(batch.data)
    assert set(map(tuple, rows.tolist())) <= {(1, 2, 3, 4), (5, 0, 0, 0), (6, 7, 8, 9), (10, 0, 0, 0)}
    with pytest.raises(ValueError, match="multiple of segment_length=4"):
        buf.sample(state, jax.random.key(0), 10)


def test_segment_sampling_is_uniform_over_rows():
    buf = SegmentReplay(8, 2)
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(1, 9), jnp.array([1, 0, 1, 1, 0, 0, 1, 0], bool))
    used = int(state.rows_used)
    sample = jax.jit(buf.sample, static_argnums=2)
    counts = np.zeros(used)
    for i in range(300):
        first = np.asarray(sample(state, jax.random.key(i), 8).data)[:, 0]
        counts += np.array([(first == f).sum() for f in np.asarray(state.data)[:used, 0]])
    expected = counts.sum() / used
    assert ((counts - expected) ** 2 / expected).sum() < 18.47  # 99.9%, 4 dof (5 rows)


def test_segments_vmap_one_per_worker():
    workers, length = 3, 3
    buf = SegmentReplay(10, length)
    example = {"id": jnp.int32(0), "x": jnp.zeros(2)}
    states = jax.vmap(lambda _: buf.init(example))(jnp.arange(workers))
    add = jax.jit(jax.vmap(buf.add))
    singles = [buf.init(example) for _ in range(workers)]
    for step in range(5):
        ids = jnp.arange(workers * ADD, dtype=jnp.int32).reshape(workers, ADD) + 100 * step + 1
        data = {"id": ids, "x": jnp.ones((workers, ADD, 2))}
        start = jnp.zeros((workers, ADD), bool).at[:, 0].set(step % 2 == 0).at[1, 4].set(True)
        states = add(states, data, start)
        for w in range(workers):  # the same stream, one worker at a time, eagerly
            singles[w] = buf.add(singles[w], jax.tree.map(lambda x: x[w], data), start[w])
    for w in range(workers):
        one = jax.tree.map(lambda x: x[w], states)
        for got, want in zip(jax.tree.leaves(one), jax.tree.leaves(singles[w])):
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    sample = jax.jit(jax.vmap(buf.sample, in_axes=(0, 0, None)), static_argnums=2)
    batch = sample(states, jax.random.split(jax.random.key(0), workers), 12)
    assert batch.data["id"].shape == batch.mask.shape == batch.start.shape == (workers, 4, length)
    assert batch.data["x"].shape == (workers, 4, length, 2)
    ids, mask = np.asarray(batch.data["id"]), np.asarray(batch.mask)
    for w in range(workers):
        real = ids[w][mask[w]]
        assert real.size and set((((real - 1) % 100) // ADD).tolist()) == {w}  # each from its own buffer
        assert np.all(ids[w][~mask[w]] == 0)


def test_same_surface_and_bad_input():
    for kind in ("tape", "segment"):
        buf = make_replay(kind, 64, segment_length=4)
        state = buf.init(jnp.zeros(3))
        assert not bool(buf.can_sample(state))
        state = jax.jit(buf.add)(state, jnp.ones((5, 3)), jnp.array([1, 0, 0, 1, 0], bool))
        assert bool(buf.can_sample(state))
        batch = jax.jit(buf.sample, static_argnums=2)(state, jax.random.key(1), 8)
        assert int(batch.mask.sum()) <= 8 and batch.data.shape[-1] == 3
    with pytest.raises(ValueError, match="kind must be 'tape' or 'segment'"):
        make_replay("ring", 10)
    with pytest.raises(ValueError, match="cannot add 30 transitions"):
        tape.add(tape.init(jnp.int32(0)), jnp.arange(30), jnp.ones(30, bool))
    with pytest.raises(ValueError, match="transitions: expected shape"):
        tape.add(tape.init(jnp.int32(0)), jnp.arange(3), jnp.ones(4, bool))


# --- bad input ---------------------------------------------------------------------------------

BUFFERS = {"tape": lambda: TapeReplay(16), "segment": lambda: SegmentReplay(8, 2)}


def example_transition():
    return {"obs": jnp.zeros(3), "action": jnp.int32(0), "done": jnp.bool_(False)}


def transitions(n: int, **override):
    data = {"obs": jnp.ones((n, 3)), "action": jnp.arange(n, dtype=jnp.int32), "done": jnp.zeros(n, bool)}
    return dict(data, **override)


@pytest.mark.parametrize("capacity", [0, -3, 2.5, True])
def test_capacity_below_one(capacity):
    for make in (TapeReplay, lambda c: SegmentReplay(c, 2)):
        with pytest.raises(ValueError, match=rf"capacity must be a positive integer, got capacity={capacity!r}"):
            make(capacity)


@pytest.mark.parametrize("length", [0, -1, 1.5])
def test_segment_length_below_one(length):
    with pytest.raises(ValueError, match=rf"segment_length must be a positive integer, got segment_length={length!r}"):
        SegmentReplay(4, length)
    with pytest.raises(ValueError, match=rf"got segment_length={length!r}"):
        make_replay("segment", 64, segment_length=length)


def test_make_replay_capacity():
    for kind in ("tape", "segment"):
        with pytest.raises(ValueError, match="capacity must be a positive integer, got capacity=0"):
            make_replay(kind, 0, segment_length=4)
    with pytest.raises(ValueError, match="capacity=3 is smaller than one segment of segment_length=4"):
        make_replay("segment", 3, segment_length=4)
    with pytest.raises(ValueError, match="segment_length is required"):
        make_replay("segment", 64)
    assert make_replay("segment", 9, segment_length=4) == SegmentReplay(2, 4)


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("batch_size", [0, -4, 2.0, True])
def test_batch_size_not_positive(kind, batch_size):
    buf = BUFFERS[kind]()
    state = buf.add(buf.init(example_transition()), transitions(4), jnp.array([1, 0, 0, 0], bool))
    with pytest.raises(ValueError, match=rf"batch_size must be a positive integer, got batch_size={batch_size!r}"):
        buf.sample(state, jax.random.key(0), batch_size)
    with pytest.raises(ValueError, match=rf"batch_size={batch_size!r}"):  # under jit too (static)
        jax.jit(buf.sample, static_argnums=2)(state, jax.random.key(0), batch_size)


@pytest.mark.parametrize("kind", BUFFERS)
def test_batch_size_above_stored(kind):
    buf = BUFFERS[kind]()
    empty = buf.init(example_transition())
    with pytest.raises(ValueError, match="batch_size=2 exceeds the 0 stored transitions"):
        buf.sample(empty, jax.random.key(0), 2)
    state = buf.add(empty, transitions(2), jnp.array([1, 0], bool))
    with pytest.raises(ValueError, match="batch_size=16 exceeds the 2 stored transitions"):
        buf.sample(state, jax.random.key(0), 16)
    assert buf.sample(state, jax.random.key(0), 2).mask.sum() == 2  # exactly what is stored is fine
    # Under jit the check cannot run: the batch is filled from what is stored (repeating).
    batch = jax.jit(buf.sample, static_argnums=2)(state, jax.random.key(0), 16)
    assert batch.mask.size == 16
    assert set(np.asarray(batch.data["action"])[np.asarray(batch.mask)].tolist()) <= {0, 1}


def test_segment_batch_counts_real_transitions_not_padding():
    buf = SegmentReplay(8, 4)
    state = buf.add(buf.init(jnp.int32(0)), jnp.arange(1, 6), jnp.array([1, 0, 1, 0, 1], bool))
    assert int(state.rows_used) == 3 and int(buf.stored(state)) == 5  # 12 slots, 5 real
    assert buf.sample(state, jax.random.key(0), 4).data.shape == (1, 4)
    with pytest.raises(ValueError, match=r"batch_size=8 exceeds the 5 stored transitions \(real transitions"):
        buf.sample(state, jax.random.key(0), 8)


def test_sample_stacked_batch_size_above_stored():
    states = jax.vmap(lambda _: tape.init(jnp.int32(0)))(jnp.arange(2))
    states = jax.vmap(tape.add)(states, jnp.arange(8).reshape(2, 4), jnp.ones((2, 4), bool).at[1, 2:].set(False))
    assert tape.sample_stacked(states, jax.random.key(0), 8).data.shape == (8,)
    with pytest.raises(ValueError, match="batch_size=10 exceeds the 8 stored transitions in 2 tapes"):
        tape.sample_stacked(states, jax.random.key(0), 10)
    assert jax.jit(tape.sample_stacked, static_argnums=2)(states, jax.random.key(0), 10).data.shape == (10,)


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("jit", [False, True])
def test_mismatched_shape(kind, jit):
    buf = BUFFERS[kind]()
    add = jax.jit(buf.add) if jit else buf.add
    state = buf.init(example_transition())
    start = jnp.ones(4, bool)
    with pytest.raises(ValueError, match=r"transitions\['obs'\]: expected shape \(4, 3\).*got shape \(4, 5\)"):
        add(state, transitions(4, obs=jnp.ones((4, 5))), start)
    with pytest.raises(ValueError, match=r"transitions\['obs'\]: expected shape \(4, 3\).*got shape \(4,\)"):
        add(state, transitions(4, obs=jnp.ones(4)), start)
    with pytest.raises(ValueError, match=r"transitions\['action'\]: expected shape \(4,\).*got shape \(3,\)"):
        add(state, transitions(4, action=jnp.arange(3)), start)
    with pytest.raises(ValueError, match=r"transitions\['done'\]: expected shape \(4,\).*got shape \(4, 1\)"):
        add(state, transitions(4, done=jnp.zeros((4, 1), bool)), start)


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("jit", [False, True])
def test_mismatched_dtype(kind, jit):
    buf = BUFFERS[kind]()
    add = jax.jit(buf.add) if jit else buf.add
    state = buf.init(example_transition())
    start = jnp.ones(4, bool)
    with pytest.raises(ValueError, match=r"transitions\['action'\]: expected dtype int32 as stored, got dtype float32"):
        add(state, transitions(4, action=jnp.zeros(4)), start)
    with pytest.raises(ValueError, match=r"transitions\['obs'\]: expected dtype float32 as stored, got dtype int32"):
        add(state, transitions(4, obs=jnp.ones((4, 3), jnp.int32)), start)
    with pytest.raises(ValueError, match=r"transitions\['done'\]: expected dtype bool as stored, got dtype uint8"):
        add(state, transitions(4, done=np.zeros(4, np.uint8)), start)
    with pytest.raises(ValueError, match=r"transitions\['obs'\]: expected dtype float32 as stored, got dtype bfloat16"):
        add(state, transitions(4, obs=jnp.ones((4, 3), jnp.bfloat16)), start)


@pytest.mark.parametrize("kind", BUFFERS)
def test_dtypes_equal_after_canonicalisation_are_accepted(kind):
    """NumPy 64-bit arrays (as JAX would store them with x64 off) and weak Python-scalar results."""
    buf = BUFFERS[kind]()
    state = buf.init(example_transition())
    start = jnp.array([1, 0, 0, 0], bool)
    host = {"obs": np.ones((4, 3)), "action": np.arange(4), "done": np.zeros(4, bool)}  # float64, int64
    if not jax.config.jax_enable_x64:
        state = buf.add(state, host, start)
    weak = jax.jit(lambda s: buf.add(s, transitions(4, obs=jnp.broadcast_to(2, (4, 3))), start))(state)
    assert weak.data["obs"].dtype == jnp.float32
    with pytest.raises(ValueError, match=r"transitions\['action'\]: expected dtype int32.*float32 \(weakly typed\)"):
        jax.jit(lambda s: buf.add(s, transitions(4, action=jnp.broadcast_to(1.5, (4,))), start))(state)


@pytest.mark.parametrize("kind", BUFFERS)
@pytest.mark.parametrize("jit", [False, True])
def test_mismatched_tree_structure(kind, jit):
    buf = BUFFERS[kind]()
    add = jax.jit(buf.add) if jit else buf.add
    state = buf.init(example_transition())
    start = jnp.ones(4, bool)
    data = transitions(4)
    del data["done"]
    with pytest.raises(ValueError, match=r"tree structure.*missing fields \[\"\['done'\]\"\]"):
        add(state, data, start)
    with pytest.raises(ValueError, match=r"tree structure.*unexpected fields \[\"\['extra'\]\"\]"):
        add(state, transitions(4, extra=jnp.zeros(4)), start)
    with pytest.raises(ValueError, match="tree structure"):
        add(state, tuple(transitions(4).values()), start)
    with pytest.raises(ValueError, match="tree structure"):
        add(state, jnp.ones((4, 3)), start)


# --- TBB over many tapes: Alg. 5 across all stored episodes ---------------------------------------


def _fill_tapes(lengths_per_tape: list[list[int]], capacity: int, width: int | None = None):
    """Stacked tapes holding episodes of the given lengths; each transition's id encodes (tape, episode, step).

    Returns the buffer, the stacked states and ``{episode id: length}`` of every stored episode
    (a tape shorter than ``width``, by default the longest tape, gets one more episode so that every
    tape adds ``width`` transitions).
    """
    width = width or max(sum(lengths) for lengths in lengths_per_tape)
    ids = np.zeros((len(lengths_per_tape), width), np.int32)
    start = np.zeros((len(lengths_per_tape), width), bool)
    stored: dict[int, int] = {}
    for k, lengths in enumerate(lengths_per_tape):
        position = 0
        for e, n in enumerate(lengths + ([width - sum(lengths)] if sum(lengths) < width else [])):
            episode = k * 1_000 + e
            ids[k, position:position + n] = episode * 10_000 + np.arange(n)
            start[k, position] = True
            stored[episode] = n
            position += n
    buffer = TapeReplay(capacity)
    states = jax.vmap(lambda _: buffer.init(jnp.int32(0)))(jnp.arange(len(lengths_per_tape)))
    return buffer, jax.vmap(buffer.add)(states, jnp.asarray(ids), jnp.asarray(start)), stored


def test_tbb_samples_the_tail_of_long_episodes():
    """8 tapes of 415-step episodes, B = 1000: every step index 0 … 414 is sampled (the old split never passed 124)."""
    buffer, states, _ = _fill_tapes([[415, 415]] * 8, capacity=830)
    sample = jax.jit(buffer.sample_stacked, static_argnums=2)
    seen = np.zeros(415, bool)
    for i in range(20):
        batch = sample(states, jax.random.key(i), 1000)
        steps = np.asarray(batch.data) % 10_000
        seen[steps] = True
        start = np.asarray(batch.start)
        assert start[0] and np.array_equal(start, steps == 0)
    assert seen.all(), f"never sampled step indices {np.flatnonzero(~seen)[:10]}"


_sample_stacked = jax.jit(TapeReplay.sample_stacked, static_argnums=(0, 3))  # one compile per tape count and B


@SETTINGS
@given(
    lengths=st.lists(st.lists(st.integers(1, 12), min_size=1, max_size=6), min_size=1, max_size=5),
    batch_size=st.integers(1, 40),
    seed=st.integers(0, 2**16),
)
@pytest.mark.slow(seconds=25)
def test_tbb_stacked_rows_are_stored_transitions_of_whole_episodes(lengths, batch_size, seed):
    """Every sampled row is a stored transition; rows follow their episode step by step from its start
    (start flags exactly at episode starts), and only the last episode of the batch is cut. Every tape
    is filled to 72 transitions (the most the drawn lengths add up to: a padding episode ends each
    shorter tape), so that the shapes vary only with the number of tapes and the batch size."""
    buffer, states, stored = _fill_tapes(lengths, capacity=80, width=72)
    batch = _sample_stacked(buffer, states, jax.random.key(seed), batch_size)
    ids, start = np.asarray(batch.data), np.asarray(batch.start)
    episode_of, step = ids // 10_000, ids % 10_000
    assert all(e in stored and s < stored[e] for e, s in zip(episode_of.tolist(), step.tolist()))
    assert start[0] and np.array_equal(start, step == 0)
    for i in range(1, batch_size):
        if not start[i]:  # continues the previous row's episode
            assert episode_of[i] == episode_of[i - 1] and step[i] == step[i - 1] + 1
        else:  # the previous episode was laid down whole
            assert step[i - 1] == stored[int(episode_of[i - 1])] - 1


def test_tbb_stacked_draws_episodes_uniformly_across_tapes():
    """Each stored episode starts a batch segment equally often, whatever tape it is on and however many
    episodes that tape holds (one tape with 5 episodes, one with 2 of different lengths)."""
    buffer, states, _ = _fill_tapes([[3, 3, 3, 3, 3], [3]], capacity=15)
    sample = jax.jit(buffer.sample_stacked, static_argnums=2)
    counts: dict[int, int] = {}
    for i in range(300):
        batch = sample(states, jax.random.key(i), 3)  # the first drawn episode starts every batch
        first = int(np.asarray(batch.data)[0]) // 10_000
        counts[first] = counts.get(first, 0) + 1
    assert len(counts) == 7  # 5 + (3 and the 12-step padding episode)
    frequencies = np.array(list(counts.values())) / 300
    assert np.all(np.abs(frequencies - 1 / 7) < 0.07), counts  # 0.07 is 3.5 sd of a binomial(300, 1/7)
