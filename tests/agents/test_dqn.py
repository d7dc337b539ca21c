"""Recurrent double DQN (monoid paper §5.3, Alg. 1–2) on the pure-JAX T-Maze.

Small configs only: every test compiles a whole training loop on the CPU.
"""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.agents import make_train
from memgym.agents.dqn import DQNConfig, DQNTrainer, markov_tape
from memgym.buffers.tape import Batch
from memgym.envs.tmaze_jax import TMazeJax, tmaze_params

ENV = TMazeJax()
PARAMS = tmaze_params(corridor_length=3, max_episode_steps=20)
GRU = dict(memory="gru", memory_config=json.dumps({"features": 16}))
FFM = dict(memory="ffm", memory_config=json.dumps({"features": 16, "memory_size": 4, "context_size": 2}))
TINY = dict(
    total_steps=320, num_envs=4, steps_per_update=2, batch_size=32, buffer_size=256, segment_length=4,
    learning_starts=24, head_width=16,
)
METRICS = {"episodes", "successes", "return_sum", "length_sum", "loss", "q_mean", "epsilon", "env_steps", "learning"}


def check_metrics(metrics, shape):
    assert set(metrics) == METRICS
    for name, value in metrics.items():
        value = np.asarray(value)
        assert value.shape == shape, name
        assert np.all(np.isfinite(value.astype(np.float64))), name


@pytest.mark.parametrize(
    "batching, memory", [("segment", GRU), ("tape", FFM)], ids=["sbb-gru", "tbb-ffm"]
)
@pytest.mark.slow
def test_runs_and_learns_nothing_nonfinite(batching, memory):
    config = DQNConfig(batching=batching, **memory, **TINY)
    trainer = DQNTrainer(config, ENV, PARAMS)
    run = jax.jit(trainer.run, static_argnums=2)
    state = jax.jit(trainer.init)(jax.random.key(0), PARAMS)
    state, metrics = run(state, PARAMS, 6)
    check_metrics(metrics, (6,))
    steps = config.num_envs * config.steps_per_update
    np.testing.assert_array_equal(metrics["env_steps"], steps * np.arange(1, 7))
    learning = np.asarray(metrics["learning"])
    np.testing.assert_array_equal(learning, steps * np.arange(1, 7) >= config.learning_starts)
    assert np.all(np.asarray(metrics["loss"])[learning] > 0) and np.all(np.asarray(metrics["loss"])[~learning] == 0)
    assert float(metrics["epsilon"][0]) == pytest.approx(config.epsilon_start)
    # Parameters moved only once learning began; the target trails the online network.
    moved = jax.tree.leaves(jax.tree.map(lambda a, b: jnp.any(a != b), state.params, state.learner.target_params))
    assert any(bool(m) for m in moved)
    assert np.all(np.asarray(state.learner.replay.added) == 6 * config.steps_per_update)

    state, more = run(state, PARAMS, 6)  # the run continues from the state
    assert int(more["env_steps"][0]) == 7 * steps
    carry = jax.tree.map(lambda x: x[0], state.carry)
    action, _ = trainer.act(state.params, carry, state.obs[0], state.start[0], jax.random.key(1))
    assert action.shape == () and 0 <= int(action) < trainer.spec.num_actions


@pytest.mark.slow(seconds=12)
@pytest.mark.parametrize("memory", [GRU, FFM], ids=["gru", "ffm"])
def test_markov_states_match_step_by_step(memory):
    """``Q(s_t)`` and ``Q(s'_t)`` from one tape pass equal a plain loop over
    ``o_first … o_t`` and ``o_first … o_t, o'_t`` of each episode fragment."""
    trainer = DQNTrainer(DQNConfig(**memory, **TINY), ENV, PARAMS)
    params = trainer.init_params(jax.random.key(0))
    rng = np.random.default_rng(0)
    # Fragments of lengths 3, 1, 4, 2 (the last cut by the batch end); the first fragment
    # has no start flag, as an SBB segment that starts mid-episode.
    lengths = [3, 1, 4, 2]
    obs, next_obs, start = [], [], []
    for i, n in enumerate(lengths):
        episode = rng.normal(size=(n + 1, trainer.spec.obs_size)).astype(np.float32)
        obs.append(episode[:-1])
        next_obs.append(episode[1:])  # o'_t = o_{t+1}; the last one is the final observation
        start.append(np.arange(n) == 0 if i else np.zeros(n, bool))
    obs, next_obs, start = map(np.concatenate, (obs, next_obs, start))

    q, q_next = jax.jit(trainer.markov_q)(params, obs, next_obs, start)

    step = jax.jit(trainer.q_values)
    fragment_start = np.flatnonzero(start | (np.arange(len(start)) == 0))
    for t in range(len(start)):
        first = fragment_start[fragment_start <= t].max()
        carry = trainer.initialize_carry()
        for k in range(first, t + 1):
            q_t, carry = step(params, carry, obs[k], k == first)
        q_after, _ = step(params, carry, next_obs[t], False)
        np.testing.assert_allclose(q[t], q_t, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(q_next[t], q_after, rtol=1e-4, atol=1e-5)

    # Alg. 1 read literally — the memory over next_obs with the same start flags — loses
    # each fragment's first observation, so it disagrees.
    naive, _ = trainer.network.apply(params, next_obs, jnp.asarray(start).at[0].set(True), trainer.initialize_carry())
    assert not np.allclose(naive, q_next, atol=1e-3)


def test_markov_tape_layout():
    obs = jnp.arange(5.0)[:, None]
    next_obs = 10 + jnp.arange(5.0)[:, None]
    start = jnp.array([True, False, True, False, False])
    tape_obs, tape_start, state_index, next_index = markov_tape(obs, next_obs, start)
    np.testing.assert_array_equal(tape_obs[:7, 0], [0, 10, 11, 2, 12, 13, 14])
    np.testing.assert_array_equal(tape_start, [1, 0, 0, 1, 0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(state_index, [0, 1, 3, 4, 5])
    np.testing.assert_array_equal(next_index, [1, 2, 4, 5, 6])


def test_segment_loss_ignores_padding():
    config = DQNConfig(batching="segment", **GRU, **TINY)
    trainer = DQNTrainer(config, ENV, PARAMS)
    params = trainer.init_params(jax.random.key(0))
    rng = np.random.default_rng(1)
    segments, length = 3, config.segment_length
    data = dict(
        obs=rng.normal(size=(segments, length, trainer.spec.obs_size)).astype(np.float32),
        action=rng.integers(0, 4, (segments, length)).astype(np.int32),
        reward=rng.normal(size=(segments, length)).astype(np.float32),
        next_obs=rng.normal(size=(segments, length, trainer.spec.obs_size)).astype(np.float32),
        terminated=np.zeros((segments, length), bool),
    )
    mask = np.ones((segments, length), bool)
    mask[1, 2:] = mask[2, 1:] = False
    start = np.zeros((segments, length), bool)
    start[:, 0] = True
    noisy = jax.tree.map(np.copy, data)
    for leaf in ("obs", "next_obs"):
        noisy[leaf][~mask] = 100.0
    noisy["reward"][~mask] = 1e6
    loss = jax.jit(trainer.loss)
    clean = loss(params, params, Batch(data, start, mask))
    dirty = loss(params, params, Batch(noisy, start, mask))
    np.testing.assert_allclose(clean[0], dirty[0], rtol=1e-6)
    np.testing.assert_allclose(clean[1]["q_mean"], dirty[1]["q_mean"], rtol=1e-6)


# Extended: TBB DQN learning the T-Maze runs in CI as tests/agents/test_learning.py's (this repeats it vmapped over
# corridor lengths, which CI tests with A2C in tests/agents/test_actor_critic.py).
@pytest.mark.slow(seconds=56)
@pytest.mark.extended
def test_learns_tmaze_with_tbb_vmapped_over_corridor_lengths():
    """One compiled ``jit(vmap(train))`` call trains two seeds on corridors of length 2 and 4.

    Success beyond 0.5 needs the cue, which only an episode's first observation shows.
    """
    config = DQNConfig(
        memory="gru", memory_config=json.dumps({"features": 32}), batching="tape", total_steps=12_000, num_envs=8,
        steps_per_update=1, batch_size=128, buffer_size=8_000, learning_starts=500, learning_rate=1e-3,
        target_rate=0.99, epsilon_fraction=0.3, head_width=64,
    )
    lengths = np.array([2, 4])
    params = tmaze_params(corridor_length=lengths, max_episode_steps=20)
    state, metrics = jax.jit(jax.vmap(make_train(config)))(jax.random.split(jax.random.key(0), 2), params)
    check_metrics(metrics, (2, config.num_updates))
    assert np.all(np.asarray(state.env_state.position).max(axis=1) <= lengths - 1)

    tail = config.num_updates // 5
    episodes = np.sum(metrics["episodes"][:, -tail:], axis=1)
    success = np.sum(metrics["successes"][:, -tail:], axis=1) / episodes
    assert np.all(episodes > 100), episodes
    assert np.all(success > 0.8), success


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(batching="sequence"), "batching"),
        (dict(num_envs=0), "num_envs"),
        (dict(batch_size=-8), "batch_size"),
        (dict(learning_rate=0.0), "learning_rate"),
        (dict(gamma=1.5), "gamma"),
        (dict(target_rate=-0.1), "target_rate"),
        (dict(epsilon_end=2.0), "epsilon_end"),
        (dict(epsilon_fraction=0.0), "epsilon_fraction"),
        (dict(learning_starts=-1), "learning_starts"),
        (dict(total_steps=4), "total_steps"),
        (dict(batching="segment", batch_size=36, segment_length=8), "batch_size"),
        (dict(buffer_size=4), "buffer_size"),
        (dict(batching="segment", buffer_size=16, segment_length=8), "buffer_size"),
        (dict(memory="no-such-memory"), "memory"),
        (dict(memory_config="{not json"), "memory_config"),
    ],
)
def test_bad_config_raises(overrides, field):
    fields = dict(GRU, **TINY)
    fields.update(overrides)
    with pytest.raises(ValueError, match=field):
        DQNConfig(**fields)


def test_default_config_is_valid():
    for batching in ("tape", "segment"):
        config = DQNConfig(batching=batching)
        assert config.num_updates == config.total_steps // config.num_envs
        assert dataclasses.replace(config, total_steps=8).num_updates == 1
