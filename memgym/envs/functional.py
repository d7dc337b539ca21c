"""Pure-JAX functional environments: the base class and the Gymnasium adapter.

A functional environment keeps no state of its own. Its parameters are a
pytree (so fields such as T-Maze's corridor length can be *traced* and vary
across a ``vmap``) and its state is passed in and out:

* ``reset(key, params) -> (obs, state)``
* ``step_env(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)``
  — one transition without auto-reset;
* ``step(key, state, action, params)`` — the same with auto-reset: when the
  episode ends, the returned ``obs``/``state`` are those of a fresh episode and
  ``info["final_obs"]`` holds the last observation of the finished one.

Every ``info`` holds the finished-episode statistics a training loop counts
without leaving ``jit``: ``done`` (bool), ``success`` (bool),
``episode_return`` and ``episode_length`` (valid where ``done``).

:class:`GymnasiumAdapter` turns any functional environment into a
``gymnasium.Env`` (it steps with ``step_env`` and resets on ``reset()``, as
Gymnasium expects).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np

Params = TypeVar("Params")
State = TypeVar("State")


class FunctionalEnv(Generic[Params, State]):
    """Base class of pure-JAX environments (see module docstring)."""

    def default_params(self, **overrides: Any) -> Params:
        raise NotImplementedError

    def reset(self, key: jax.Array, params: Params) -> tuple[jax.Array, State]:
        raise NotImplementedError

    def step_env(
        self, key: jax.Array, state: State, action: jax.Array, params: Params
    ) -> tuple[jax.Array, State, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        raise NotImplementedError

    def observation_space(self, params: Params) -> gym.Space:
        raise NotImplementedError

    def action_space(self, params: Params) -> gym.Space:
        raise NotImplementedError

    def render(self, state: State, params: Params, mode: str) -> Any:
        """Draw a (single, unbatched) state; ``mode`` is a Gymnasium render mode."""
        raise NotImplementedError(f"{type(self).__name__} does not render")

    render_modes: tuple[str, ...] = ()

    def step(
        self, key: jax.Array, state: State, action: jax.Array, params: Params
    ) -> tuple[jax.Array, State, jax.Array, jax.Array, jax.Array, dict[str, jax.Array]]:
        """``step_env`` followed by a reset wherever the episode ended (auto-reset)."""
        key_step, key_reset = jax.random.split(key)
        obs, state, reward, terminated, truncated, info = self.step_env(key_step, state, action, params)
        reset_obs, reset_state = self.reset(key_reset, params)
        done = jnp.logical_or(terminated, truncated)
        state = jax.tree.map(lambda r, s: jnp.where(done, r, s), reset_state, state)
        info = dict(info, final_obs=obs)
        obs = jnp.where(done, reset_obs, obs)
        return obs, state, reward, terminated, truncated, info


class GymnasiumAdapter(gym.Env):
    """A ``gymnasium.Env`` over a :class:`FunctionalEnv` and fixed ``params``.

    Randomness comes from a JAX key derived from the Gymnasium seed, so
    ``reset(seed=s)`` is reproducible. Observations come back as numpy arrays.
    """

    def __init__(self, env: FunctionalEnv, params: Any, render_mode: str | None = None):
        if render_mode is not None and render_mode not in env.render_modes:
            raise ValueError(f"render_mode must be None or one of {list(env.render_modes)}, got {render_mode!r}")
        self.env = env
        self.params = params
        self.render_mode = render_mode
        self.metadata = {"render_modes": list(env.render_modes), "render_fps": 10}
        self.observation_space = env.observation_space(params)
        self.action_space = env.action_space(params)
        self._reset = jax.jit(env.reset)
        self._step = jax.jit(env.step_env)
        self._key: jax.Array | None = None
        self._state: Any = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._key = jax.random.key(int(self.np_random.integers(2**31)))
        self._key, key = jax.random.split(self._key)
        obs, self._state = self._reset(key, self.params)
        return np.asarray(obs), {}

    def step(self, action):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if not self.action_space.contains(action):
            raise ValueError(f"action must be in {self.action_space}, got {action!r}")
        self._key, key = jax.random.split(self._key)
        obs, self._state, reward, terminated, truncated, info = self._step(
            key, self._state, jnp.asarray(action), self.params
        )
        info = {k: np.asarray(v).item() for k, v in info.items() if np.ndim(v) == 0}
        return np.asarray(obs), float(reward), bool(terminated), bool(truncated), info

    def render(self):
        if self.render_mode is None or self._state is None:
            return None
        state = jax.tree.map(np.asarray, self._state)
        return self.env.render(state, self.params, self.render_mode)

    @property
    def state(self) -> Any:
        """The functional state of the current episode."""
        return self._state
