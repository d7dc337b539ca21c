"""The harness's own episode counting: a scoring wrapper for JAX-tier training and the evaluations.

:class:`ScoredEnv` wraps a functional environment; its state carries counters
that the wrapped environment's own ``step`` updates, so a JAX-tier agent trains
on it like on any environment while the harness, not the agent, counts finished
episodes and successes. The thesis metric — success rate over the last 100K
training steps (§5.1.2) — needs to know which episodes end inside that window:
each environment counts its own steps, and episodes that end once an
environment has taken ``window_start`` steps are in the window
(``window_start = (total_steps − window) / num_envs`` for agents that step
their environments in lockstep).

:func:`evaluate_jax` plays ``N`` evaluation episodes with a JAX-tier policy on
fixed reset keys (the same for every agent), one episode per stream, all in one
``vmap``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

from memgym.envs.functional import FunctionalEnv


@dataclasses.dataclass(frozen=True)
class ScoredParams:
    """Inner params plus ``window_start``: the per-environment step from which episodes are scored."""

    inner: Any
    window_start: jax.Array


@dataclasses.dataclass(frozen=True)
class ScoredState:
    """Inner state plus the harness's counters (``int32`` scalars per environment)."""

    inner: Any
    steps: jax.Array
    episodes: jax.Array
    successes: jax.Array
    window_episodes: jax.Array
    window_successes: jax.Array


jax.tree_util.register_dataclass(ScoredParams, data_fields=["inner", "window_start"], meta_fields=[])
jax.tree_util.register_dataclass(
    ScoredState,
    data_fields=["inner", "steps", "episodes", "successes", "window_episodes", "window_successes"],
    meta_fields=[],
)


class ScoredEnv(FunctionalEnv[ScoredParams, ScoredState]):
    """A functional environment that counts its finished episodes and successes (see module docstring)."""

    def __init__(self, inner: FunctionalEnv):
        self.inner = inner
        self.render_modes = inner.render_modes

    def default_params(self, **overrides: Any) -> ScoredParams:
        return ScoredParams(self.inner.default_params(**overrides), jnp.zeros((), jnp.int32))

    def observation_space(self, params: ScoredParams) -> gym.Space:
        return self.inner.observation_space(params.inner)

    def action_space(self, params: ScoredParams) -> gym.Space:
        return self.inner.action_space(params.inner)

    def reset(self, key: jax.Array, params: ScoredParams) -> tuple[jax.Array, ScoredState]:
        obs, inner = self.inner.reset(key, params.inner)
        zero = jnp.zeros((), jnp.int32)
        return obs, ScoredState(inner, zero, zero, zero, zero, zero)

    def step_env(self, key, state: ScoredState, action, params: ScoredParams):
        obs, inner, reward, terminated, truncated, info = self.inner.step_env(key, state.inner, action, params.inner)
        done = jnp.logical_or(terminated, truncated)
        success = jnp.logical_and(done, info["success"])
        in_window = state.steps >= params.window_start
        counters = ScoredState(
            inner=inner,
            steps=state.steps + 1,
            episodes=state.episodes + done,
            successes=state.successes + success,
            window_episodes=state.window_episodes + (done & in_window),
            window_successes=state.window_successes + (success & in_window),
        )
        return obs, counters, reward, terminated, truncated, info

    def step(self, key, state: ScoredState, action, params: ScoredParams):
        """Auto-reset of the inner environment only: the counters run across episodes."""
        key_step, key_reset = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = self.step_env(key_step, state, action, params)
        reset_obs, reset_inner = self.inner.reset(key_reset, params.inner)
        done = jnp.logical_or(terminated, truncated)
        inner = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_inner, state.inner)
        info = dict(info, final_obs=obs)
        obs = jnp.where(done, reset_obs, obs)
        return obs, dataclasses.replace(state, inner=inner), reward, terminated, truncated, info


def counters(state: ScoredState) -> dict[str, int]:
    """Counters summed over every environment in a (batched) :class:`ScoredState`."""
    if not isinstance(state, ScoredState):
        raise TypeError(
            f"train must return the final state of the environment it was given (a ScoredState), "
            f"got {type(state).__name__}"
        )
    return {
        name: int(np.asarray(getattr(state, name)).sum())
        for name in ("steps", "episodes", "successes", "window_episodes", "window_successes")
    }


def evaluate_jax(agent: Any, params: Any, env: FunctionalEnv, env_params: Any, keys: jax.Array, max_steps: int):
    """Play one episode per key with ``agent.act``; returns ``(success[N], return[N], length[N])``.

    ``max_steps`` bounds the scan (the environment's time limit ends every episode
    earlier); steps after an episode's end are ignored.
    """

    def episode(key: jax.Array):
        key_reset, key_run = jax.random.split(key)
        obs, state = env.reset(key_reset, env_params)

        def step(carry, key_step):
            obs, state, memory, begin, finished, result = carry
            key_act, key_env = jax.random.split(key_step)
            action, memory = agent.act(params, memory, obs, begin, key_act)
            next_obs, next_state, reward, terminated, truncated, info = env.step_env(key_env, state, action, env_params)
            done = jnp.logical_or(terminated, truncated)
            success, ret, length = result
            live = ~finished
            result = (
                jnp.where(live & done, info["success"], success),
                ret + jnp.where(live, reward, 0.0),
                length + live.astype(jnp.int32),
            )
            return (next_obs, next_state, memory, jnp.zeros((), bool), finished | done, result), None

        start = (obs, state, agent.init_carry(), jnp.ones((), bool), jnp.zeros((), bool),
                 (jnp.zeros((), bool), jnp.zeros(()), jnp.zeros((), jnp.int32)))
        (_, _, _, _, finished, result), _ = jax.lax.scan(step, start, jax.random.split(key_run, max_steps))
        success, ret, length = result
        return success & finished, ret, length

    return jax.vmap(episode)(keys)
