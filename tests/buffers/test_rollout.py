"""On-policy rollouts: replay inputs, bootstrapping, and the flattened tape's stream separation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from memgym.buffers.rollout import (
    Rollout,
    advantages,
    flat_advantages,
    flatten,
    next_values,
    replay_inputs,
    stream_flags,
)
from memgym.memory.returns import generalized_advantage_reference

E, T, OBS = 3, 17, 4


def random_rollout(seed: int) -> tuple[Rollout, np.ndarray]:
    rng = np.random.default_rng(seed)
    end = rng.random((E, T)) < 0.15
    terminated = end & (rng.random((E, T)) < 0.5)
    truncated = end & ~terminated
    begin = np.zeros((E, T), bool)
    begin[:, 1:] = end[:, :-1]
    rollout = Rollout(
        obs=jnp.asarray(rng.normal(size=(E, T, OBS)), jnp.float32),
        begin=jnp.asarray(begin),
        action=jnp.asarray(rng.integers(0, 4, (E, T))),
        reward=jnp.asarray(rng.normal(size=(E, T)), jnp.float32),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated),
        value=jnp.zeros((E, T)),
        log_prob=jnp.zeros((E, T)),
        final_value=jnp.asarray(np.where(truncated, rng.normal(size=(E, T)), 0.0), jnp.float32),
        carry=jnp.zeros((E, 2)),
        next_obs=jnp.asarray(rng.normal(size=(E, OBS)), jnp.float32),
        next_begin=jnp.asarray(end[:, -1]),
    )
    values = rng.normal(size=(E, T + 1)).astype(np.float32)
    return rollout, values


def test_replay_inputs_append_the_next_observation():
    rollout, _ = random_rollout(0)
    obs, begin = replay_inputs(rollout)
    assert obs.shape == (E, T + 1, OBS) and begin.shape == (E, T + 1)
    np.testing.assert_array_equal(obs[:, -1], rollout.next_obs)
    np.testing.assert_array_equal(begin[:, :-1], rollout.begin)


def test_next_values_bootstrap_from_final_value_on_truncation():
    rollout, values = random_rollout(1)
    nv = np.asarray(next_values(rollout, jnp.asarray(values)))
    trunc = np.asarray(rollout.truncated)
    np.testing.assert_array_equal(nv[trunc], np.asarray(rollout.final_value)[trunc])
    np.testing.assert_array_equal(nv[~trunc], values[:, 1:][~trunc])
    with pytest.raises(ValueError, match=r"\[E, T \+ 1\]"):
        next_values(rollout, jnp.asarray(values[:, :-1]))


@pytest.mark.parametrize("seed", range(4))
def test_advantages_per_env_match_loop_and_flat_tape(seed):
    rollout, values = random_rollout(seed)
    adv, target = advantages(rollout, jnp.asarray(values), 0.99, 0.95)
    nv = np.asarray(next_values(rollout, jnp.asarray(values)))
    for e in range(E):
        want = generalized_advantage_reference(
            rollout.reward[e], values[e, :-1], nv[e], rollout.terminated[e], rollout.truncated[e], 0.99, 0.95
        )
        np.testing.assert_allclose(np.asarray(adv[e]), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(target), np.asarray(adv) + values[:, :-1], rtol=1e-5, atol=1e-5)
    flat_adv, flat_target = flat_advantages(rollout, jnp.asarray(values), 0.99, 0.95)
    np.testing.assert_allclose(np.asarray(flat_adv), np.asarray(flatten(adv)), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(flat_target), np.asarray(flatten(target)), rtol=1e-4, atol=1e-4)


def test_flatten_and_stream_flags():
    x = jnp.arange(E * T).reshape(E, T)
    np.testing.assert_array_equal(flatten(x), np.arange(E * T))
    start, end = stream_flags(E, T)
    assert np.flatnonzero(start).tolist() == [0, T, 2 * T]
    assert np.flatnonzero(end).tolist() == [T - 1, 2 * T - 1, 3 * T - 1]


def test_jit():
    rollout, values = random_rollout(5)
    adv = jax.jit(lambda r, v: flat_advantages(r, v, 0.9, 0.9)[0])(rollout, jnp.asarray(values))
    assert adv.shape == (E * T,) and np.isfinite(np.asarray(adv)).all()
