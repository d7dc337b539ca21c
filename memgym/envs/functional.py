"""Pure-JAX functional environments: the base class, stateful wrappers, episode statistics, the Gymnasium adapter.

A functional environment keeps no state of its own. Its parameters are a
pytree (so fields such as T-Maze's corridor length can be *traced* and vary
across a ``vmap``) and its state is passed in and out:

* ``reset(key, params) -> (obs, state)``
* ``step_env(key, state, action, params) -> (obs, state, reward, terminated, truncated, info)``
  — one transition without auto-reset;
* ``step(key, state, action, params)`` — the same with auto-reset: when the
  episode ends, the returned ``obs``/``state`` are those of a fresh episode and
  ``info["final_obs"]`` holds the last observation of the finished one.

An environment's ``info`` holds only what the environment itself knows about a
transition (T-Maze: ``success``, True on the step that ends an episode with the
correct turn). Episode statistics are not kept by environments:
:class:`EpisodeStatistics` wraps any environment and adds ``done``, ``success``,
``episode_return`` and ``episode_length`` to every ``info``, so a training loop
counts finished episodes without leaving ``jit`` (the trainers of
:mod:`memgym.agents` wrap their environment in it). It is a
:class:`StatefulWrapper`: a wrapper whose own state (here the running return and
length) lives beside the inner state and persists while only the inner
environment auto-resets. :func:`track_episodes` is the bookkeeping of one step,
shared with the host loop that trains on Gymnasium vector envs.

:class:`GymnasiumAdapter` turns any functional environment into a
``gymnasium.Env`` (it steps with ``step_env`` and resets on ``reset()``, as
Gymnasium expects).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

import dataclasses

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


class StatefulWrapper(FunctionalEnv[Params, State]):
    """A functional environment around ``inner`` with state of its own that persists across episodes.

    The wrapper's state is a dataclass registered as a pytree with a field
    ``inner`` (the inner environment's state) beside the wrapper's own fields.
    :meth:`step` steps the inner environment with the inner ``step`` — its
    auto-reset included — so only the inner environment starts a new episode
    while the wrapper's fields carry on; :meth:`step_env` is the same without
    auto-reset. Random keys pass through unchanged: stepping the wrapper draws
    exactly what stepping the inner environment draws. Spaces, default params and
    rendering are the inner environment's.

    A subclass writes two methods:

    * :meth:`init` — the state around a freshly reset inner state;
    * :meth:`update` — its bookkeeping of one transition: the new state (its own
      fields; ``inner`` is filled in afterwards) and the ``info`` it passes on.

    and, when it has parameters of its own, :meth:`inner_params` (the inner
    environment's part of ``params``; by default the wrapper shares the inner
    params). For example, a wrapper counting finished episodes and successes per
    environment, with params ``P(inner, window_start)``, is::

        class Counted(StatefulWrapper):
            def inner_params(self, params):
                return params.inner

            def init(self, inner, params):
                return CountedState(inner, episodes=jnp.zeros((), jnp.int32))

            def update(self, state, action, reward, terminated, truncated, info, params):
                done = terminated | truncated
                return dataclasses.replace(state, episodes=state.episodes + done), info

    Wrappers nest: each one's ``step`` calls the next one's ``step``, so the
    innermost environment alone auto-resets.
    """

    def __init__(self, inner: FunctionalEnv):
        self.inner = inner
        self.render_modes = inner.render_modes

    # --- what a subclass writes -----------------------------------------------------------

    def inner_params(self, params: Params) -> Any:
        """The inner environment's params (default: the wrapper has none of its own)."""
        return params

    def init(self, inner_state: Any, params: Params) -> State:
        """The wrapper's state around ``inner_state``, the state of a freshly reset inner environment."""
        raise NotImplementedError

    def update(self, state: State, action: jax.Array, reward: jax.Array, terminated: jax.Array,
               truncated: jax.Array, info: dict[str, jax.Array], params: Params) -> tuple[State, dict[str, jax.Array]]:
        """Bookkeeping of one transition of the inner environment: ``(new state, info)``.

        ``state`` is the wrapper's state before the transition; the base class then
        sets ``inner`` of the returned state to the inner environment's new state.
        """
        raise NotImplementedError

    # --- the environment ------------------------------------------------------------------

    def default_params(self, **overrides: Any) -> Params:
        return self.inner.default_params(**overrides)

    def observation_space(self, params: Params) -> gym.Space:
        return self.inner.observation_space(self.inner_params(params))

    def action_space(self, params: Params) -> gym.Space:
        return self.inner.action_space(self.inner_params(params))

    def render(self, state: State, params: Params, mode: str) -> Any:
        return self.inner.render(state.inner, self.inner_params(params), mode)

    def reset(self, key: jax.Array, params: Params) -> tuple[jax.Array, State]:
        obs, inner = self.inner.reset(key, self.inner_params(params))
        return obs, self.init(inner, params)

    def step_env(self, key, state, action, params):
        return self._wrap(self.inner.step_env, key, state, action, params)

    def step(self, key, state, action, params):
        """The inner environment's ``step`` (auto-reset of the inner state only) plus :meth:`update`."""
        return self._wrap(self.inner.step, key, state, action, params)

    def _wrap(self, inner_step, key, state, action, params):
        obs, inner, reward, terminated, truncated, info = inner_step(key, state.inner, action, self.inner_params(params))
        state, info = self.update(state, action, reward, terminated, truncated, info, params)
        return obs, dataclasses.replace(state, inner=inner), reward, terminated, truncated, info


@dataclasses.dataclass(frozen=True)
class EpisodeStatisticsState:
    """The inner state plus the running return (float32) and length (int32) of the current episode."""

    inner: Any
    episode_return: jax.Array
    episode_length: jax.Array


jax.tree_util.register_dataclass(
    EpisodeStatisticsState, data_fields=["inner", "episode_return", "episode_length"], meta_fields=[]
)


def track_episodes(episode_return: Any, episode_length: Any, reward: Any, terminated: Any, truncated: Any,
                   success: Any = None) -> tuple[dict[str, Any], Any, Any]:
    """One step of running episode statistics, on JAX arrays (inside ``jit``) or NumPy arrays (a host loop).

    Args:
        episode_return, episode_length: the running return and length before this step.
        reward, terminated, truncated: this step's outcome.
        success: the environment's ``info["success"]`` of this step, or None (then False).

    Returns:
        ``(stats, episode_return, episode_length)``: ``stats`` holds ``done``
        (``terminated | truncated``), ``success`` and the return and length of the
        episode so far including this step (the finished episode's totals where
        ``done``); the running return and length for the next step start again
        at 0 after a ``done`` step.
    """
    xp = np if isinstance(episode_return, np.ndarray) else jnp
    done = xp.logical_or(terminated, truncated)
    episode_return = episode_return + reward
    episode_length = episode_length + 1
    success = xp.zeros_like(done) if success is None else xp.asarray(success, bool)
    stats = {"done": done, "success": success, "episode_return": episode_return, "episode_length": episode_length}
    return stats, xp.where(done, 0.0, episode_return), xp.where(done, 0, episode_length)


class EpisodeStatistics(StatefulWrapper[Any, EpisodeStatisticsState]):
    """Adds the statistics of the running episode to every ``info`` (the one episode counter, cf. PureJaxRL's LogWrapper).

    The state is :class:`EpisodeStatisticsState` ``(inner, episode_return,
    episode_length)``; ``step`` auto-resets only the inner environment and adds
    ``done``, ``success`` (the inner ``info["success"]`` where the environment
    reports one, else False), ``episode_return`` and ``episode_length`` (the
    finished episode's totals where ``done``) to ``info``. Wrapping is idempotent:
    ``EpisodeStatistics(EpisodeStatistics(env))`` is ``EpisodeStatistics(env)`` again.
    """

    def __init__(self, inner: FunctionalEnv):
        super().__init__(inner.inner if isinstance(inner, EpisodeStatistics) else inner)

    def init(self, inner_state: Any, params: Any) -> EpisodeStatisticsState:
        return EpisodeStatisticsState(inner_state, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))

    def update(self, state, action, reward, terminated, truncated, info, params):
        stats, episode_return, episode_length = track_episodes(
            state.episode_return, state.episode_length, reward, terminated, truncated, info.get("success")
        )
        return EpisodeStatisticsState(state.inner, episode_return, episode_length), {**info, **stats}


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
