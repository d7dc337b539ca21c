"""The lockstep loop the scored POPGym tasks' parity tests share (games, Labyrinths): popgym's task through memgym's
Gymnasium wrapper and the JAX task stepped side by side from the same hidden state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from memgym.envs.popgym import PopGymEnv


def check_lockstep(name: str, env: Any, start_from_popgym: Callable, policy: Callable, episodes: int, seed: int,
                   aim: float, after_step: Callable | None = None) -> dict[str, int]:
    """popgym's ``name`` and the JAX task ``env`` side by side for ``episodes`` episodes: after each of popgym's
    resets ``start_from_popgym(env, upstream)`` is the JAX task state; every third episode is of random actions,
    the others of ``policy(upstream, rng, aim)``; ``after_step(state, upstream)`` may write popgym's next draws into
    the JAX state. Every observation, reward, end flag, return and length must be equal; returns counts of the steps
    and of the episodes' ends (terminated, truncated)."""
    params = env.default_params
    wrapper = PopGymEnv(name)
    upstream = wrapper.unwrapped
    rng = np.random.default_rng(seed)
    wrapper.reset(seed=seed)
    step = jax.jit(lambda state, action: env.step_env(jax.random.key(0), state, action, params))
    counts = {"steps": 0, "terminated": 0, "truncated": 0}
    for episode in range(episodes):
        first_obs, _ = wrapper.reset()
        state = env.initial_state(start_from_popgym(env, upstream), params)
        np.testing.assert_array_equal(np.asarray(env.get_obs(state, params)), first_obs)
        while True:
            action = policy(upstream, rng, 0.0 if episode % 3 == 0 else aim)
            obs, reward, terminated, truncated, info = wrapper.step(action)
            obs_jax, state, reward_jax, terminated_jax, info_jax = step(state, jnp.asarray(action))
            if after_step is not None:
                state = after_step(state, upstream)
            np.testing.assert_array_equal(np.asarray(obs_jax), obs)
            assert np.asarray(reward_jax) == np.float32(reward)
            assert bool(terminated_jax) == terminated and bool(env.is_truncated(state, params)) == truncated
            counts["steps"] += 1
            if terminated or truncated:
                assert int(info_jax["episode_length"]) == info["episode_length"]
                assert np.asarray(info_jax["episode_return"]) == np.float32(info["episode_return"])
                assert np.asarray(info_jax["normalized_return"]) == np.float32(info["normalized_return"])
                counts["terminated" if terminated else "truncated"] += 1
                break
    return counts
