"""On-policy rollout storage: replay inputs and the flattened tape's stream flags (advantages: tests/agents/test_returns.py)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from memgym.buffers.rollout import Rollout, replay_inputs

E, T, OBS = 3, 17, 4


def random_rollout(seed: int) -> tuple[Rollout, np.ndarray]:
    rng = np.random.default_rng(seed)
    end = rng.random((E, T)) < 0.15
    terminated = end & (rng.random((E, T)) < 0.5)
    truncated = end & ~terminated
    start = np.zeros((E, T), bool)
    start[:, 1:] = end[:, :-1]
    rollout = Rollout(
        obs=jnp.asarray(rng.normal(size=(E, T, OBS)), jnp.float32),
        start=jnp.asarray(start),
        action=jnp.asarray(rng.integers(0, 4, (E, T))),
        reward=jnp.asarray(rng.normal(size=(E, T)), jnp.float32),
        terminated=jnp.asarray(terminated),
        truncated=jnp.asarray(truncated),
        value=jnp.zeros((E, T)),
        log_prob=jnp.zeros((E, T)),
        final_value=jnp.asarray(np.where(truncated, rng.normal(size=(E, T)), 0.0), jnp.float32),
        carry=jnp.zeros((E, 2)),
        next_obs=jnp.asarray(rng.normal(size=(E, OBS)), jnp.float32),
        next_start=jnp.asarray(end[:, -1]),
    )
    values = rng.normal(size=(E, T + 1)).astype(np.float32)
    return rollout, values


def test_replay_inputs_append_the_next_observation():
    rollout, _ = random_rollout(0)
    obs, start = replay_inputs(rollout)
    assert obs.shape == (E, T + 1, OBS) and start.shape == (E, T + 1)
    np.testing.assert_array_equal(obs[:, -1], rollout.next_obs)
    np.testing.assert_array_equal(start[:, :-1], rollout.start)

