"""memgym's wrappers of gymnax environments: stateful wrappers, episode statistics, the Gymnasium adapter.

memgym's pure-JAX environments are gymnax environments
(:class:`gymnax.environments.environment.Environment`): they keep no state of
their own, their params are a pytree (so T-Maze's corridor length can be
*traced* and vary across a ``vmap``), and they follow gymnax's contract:

* ``reset(key, params=None) -> (obs, state)``;
* ``step(key, state, action, params=None) -> (obs, state, reward, terminated, truncated, info)``
  with auto-reset: when the episode ends, the returned ``obs``/``state`` are those
  of a fresh episode and ``info["final_observation"]`` holds the last observation
  of the finished one;
* ``step_env`` / ``reset_env`` (one transition without auto-reset, and the reset),
  ``is_truncated`` (the time limit), ``default_params``, ``num_actions``,
  ``observation_space(params)`` / ``action_space(params)`` (gymnax spaces).

That is gymnax 1.0's contract. Under gymnax 0.0.9 ``step`` and ``step_env`` return
0.0.9's five values ``(obs, state, reward, done, info)`` instead, with ``done =
terminated | truncated`` and the flags and final observation in ``info``; memgym's
own code steps every environment through :mod:`memgym.envs.gymnax_compat`, which
gives it the six values above under either version.

An environment's ``info`` holds only what the environment knows about a
transition (T-Maze: ``success``). This module adds what memgym needs around them:

* :class:`StatefulWrapper` — a wrapper whose own state (counters) persists while
  only the wrapped environment auto-resets; itself a gymnax environment;
* :class:`EpisodeStatistics` — the one episode counter (``done``, ``success``,
  ``episode_return``, ``episode_length`` in every ``info``), which every trainer
  uses; :func:`track_episodes` is the bookkeeping of one step, shared with the
  host loop that trains on Gymnasium vector envs;
* :class:`GymnasiumAdapter` — any gymnax environment as a ``gymnasium.Env`` (picklable);
* :class:`GymnasiumVectorAdapter` — ``N`` of them as one vmapped Gymnasium vector env.

Both adapters refuse, with a message, to run where JAX would hang (:func:`check_not_forked`).
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import sys
from typing import Any

import gymnasium as gym
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment, spaces

from memgym.envs import gymnax_compat

Environment = environment.Environment

class MultiDiscrete(spaces.Space):
    """A gymnax space of integer vectors (gymnax has none): entry ``i`` takes the values ``0 .. nvec[i] - 1``,
    as Gymnasium's ``MultiDiscrete(nvec)`` (:func:`gymnasium_space` converts it). Jittable like gymnax's spaces.

    Args:
        nvec: the number of values of each entry, a non-empty sequence of integers >= 1.
    """

    def __init__(self, nvec: Any):
        values = np.asarray(nvec)
        if (values.ndim != 1 or values.size == 0 or values.dtype == bool or not np.issubdtype(values.dtype, np.integer)
                or np.any(values < 1)):
            raise ValueError(f"nvec must be a non-empty sequence of integers >= 1, got nvec={nvec!r}")
        self.nvec = values.astype(np.int32)
        self.shape = self.nvec.shape
        self.dtype = jnp.int32

    def __repr__(self) -> str:
        return f"MultiDiscrete({self.nvec.tolist()})"

    def sample(self, key: jax.Array) -> jax.Array:
        """A uniformly random vector of the space."""
        return jax.random.randint(key, self.shape, 0, jnp.asarray(self.nvec), self.dtype)

    def contains(self, x: Any) -> jax.Array:
        """Whether ``x`` has the space's shape and every entry in its range (a boolean array of shape ``()``)."""
        x = jnp.asarray(x)
        if x.shape != self.shape:
            return jnp.zeros((), bool)
        return jnp.all((x >= 0) & (x < jnp.asarray(self.nvec)))


def valid_action(space: spaces.Space, action: Any) -> jax.Array:
    """Whether ``action`` lies in ``space`` (a boolean array of shape ``()``, jittable): for a ``Discrete`` one an
    integer value in range; for a :class:`MultiDiscrete` one every entry so; for a ``Box`` one every entry within
    its bounds. A fractional or NaN value is never valid (NaN fails every comparison); a wrong shape raises
    ``ValueError`` when traced."""
    action = jnp.asarray(action)
    if isinstance(space, spaces.Discrete):
        low, high, whole = 0, space.n - 1, True
    elif isinstance(space, MultiDiscrete):
        low, high, whole = 0, jnp.asarray(space.nvec) - 1, True
    elif isinstance(space, spaces.Box):
        low, high, whole = jnp.asarray(space.low), jnp.asarray(space.high), False
    else:
        raise TypeError(f"valid_action takes a Discrete, MultiDiscrete or Box space, got {space!r}")
    shape = tuple(getattr(space, "shape", ()) or ())
    if action.shape != shape:
        raise ValueError(f"action must have the shape {shape} of {space!r}, got shape {action.shape}")
    inside = (action >= low) & (action <= high)
    if whole:
        inside = inside & (action == jnp.floor(action))
    return jnp.all(inside)


def gymnasium_space(space: spaces.Space) -> gym.Space:
    """The Gymnasium space of a gymnax space: gymnax's own conversion, and :class:`MultiDiscrete` as
    Gymnasium's ``MultiDiscrete``."""
    if isinstance(space, MultiDiscrete):
        return gym.spaces.MultiDiscrete(space.nvec.astype(np.int64))
    return spaces.gymnax_space_to_gym_space(space)


# Set in a child forked from a process that had imported this module (so JAX was loaded): XLA's threads do
# not survive a fork, and JAX calls in such a child wait forever.
_FORKED_AFTER_JAX = [False]
os.register_at_fork(after_in_child=lambda: _FORKED_AFTER_JAX.__setitem__(0, True))


def check_not_forked(what: str) -> None:
    """Raise ``RuntimeError`` where JAX would hang: in a process forked from one that had JAX loaded,
    or while Gymnasium's ``AsyncVectorEnv`` builds its first environment before forking its workers
    (so ``make_vec(..., vectorization_mode="async")`` fails at once, in the caller's process)."""
    if _FORKED_AFTER_JAX[0] or _async_vector_env_will_fork():
        raise RuntimeError(
            f"{what} runs JAX, and JAX hangs in a process forked from one that has loaded it (Gymnasium's "
            "AsyncVectorEnv forks its workers by default). Use memgym's own vector env "
            "(gymnasium.make_vec(id, num_envs=N), the default for JAX envs), or start worker processes with "
            "spawn: gymnasium.make_vec(id, num_envs=N, vectorization_mode='async', vector_kwargs={'context': 'spawn'})"
        )


def _async_vector_env_will_fork() -> bool:
    """True when called (at any depth) from ``gymnasium.vector.AsyncVectorEnv.__init__`` with a fork context."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "__init__" and isinstance(frame.f_locals.get("self"), gym.vector.AsyncVectorEnv):
            return multiprocessing.get_context(frame.f_locals.get("context")).get_start_method() == "fork"
        frame = frame.f_back
    return False


class StatefulWrapper(Environment):
    """A gymnax environment around ``inner`` with state of its own that persists across episodes.

    The wrapper's state is a dataclass registered as a pytree with a field
    ``inner`` (the inner environment's state) beside the wrapper's own fields.
    :meth:`step` steps the inner environment with the inner ``step`` — its
    auto-reset included — so only the inner environment starts a new episode
    while the wrapper's fields carry on; :meth:`step_env` is the same without
    auto-reset (both return what the installed gymnax expects, through
    :mod:`~memgym.envs.gymnax_compat`; :meth:`is_truncated` reads the inner
    time limit). Random keys pass through unchanged: stepping the wrapper
    draws exactly what stepping the inner environment draws. Spaces, default params
    and rendering are the inner environment's.

    A subclass writes :meth:`init` (the state around a freshly reset inner state)
    and :meth:`update` (its bookkeeping of one transition: the new state and the
    ``info`` it passes on), and, when it has parameters of its own,
    :meth:`inner_params` (the inner environment's part of ``params``) and
    ``default_params``. Wrappers nest: each one's ``step`` calls the next one's
    ``step``, so the innermost environment alone auto-resets.
    """

    def __init__(self, inner: Environment):
        self.inner = inner
        self.render_modes = getattr(inner, "render_modes", ())

    # --- what a subclass writes -----------------------------------------------------------

    def inner_params(self, params: Any) -> Any:
        """The inner environment's params (default: the wrapper has none of its own)."""
        return params

    def init(self, inner_state: Any, params: Any) -> Any:
        """The wrapper's state around ``inner_state``, the state of a freshly reset inner environment."""
        raise NotImplementedError

    def update(self, state: Any, action: jax.Array, reward: jax.Array, terminated: jax.Array,
               truncated: jax.Array, info: dict[str, jax.Array], params: Any) -> tuple[Any, dict[str, jax.Array]]:
        """Bookkeeping of one transition of the inner environment: ``(new state, info)``.

        ``state`` is the wrapper's state before the transition; the base class then
        sets ``inner`` of the returned state to the inner environment's new state.
        """
        raise NotImplementedError

    # --- the environment ------------------------------------------------------------------

    @property
    def default_params(self) -> Any:
        return self.inner.default_params

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def num_actions(self) -> int:
        return self.inner.num_actions

    def observation_space(self, params: Any):
        return self.inner.observation_space(self.inner_params(params))

    def action_space(self, params: Any):
        return self.inner.action_space(self.inner_params(params))

    def render(self, state: Any, params: Any, mode: str) -> Any:
        return self.inner.render(state.inner, self.inner_params(params), mode)

    def is_truncated(self, state: Any, params: Any) -> jax.Array:
        return self.inner.is_truncated(state.inner, self.inner_params(params))

    def is_terminated(self, state: Any, params: Any) -> jax.Array:
        return self.inner.is_terminated(state.inner, self.inner_params(params))

    def reset_env(self, key: jax.Array, params: Any) -> tuple[jax.Array, Any]:
        obs, inner = self.inner.reset_env(key, self.inner_params(params))
        return obs, self.init(inner, params)

    def reset(self, key: jax.Array, params: Any = None) -> tuple[jax.Array, Any]:
        params = self.default_params if params is None else params
        obs, inner = self.inner.reset(key, self.inner_params(params))
        return obs, self.init(inner, params)

    def step_env(self, key, state, action, params):
        """One transition of the inner environment without auto-reset, counted (gymnax's ``step_env`` values)."""
        obs, inner, reward, terminated, truncated, info = gymnax_compat.step_env(
            self.inner, key, state.inner, action, self.inner_params(params)
        )
        state, info = self.update(state, action, reward, terminated, truncated, info, params)
        return gymnax_compat.step_env_returns(
            obs, dataclasses.replace(state, inner=inner), reward, terminated, truncated, info
        )

    def step(self, key, state, action, params=None):
        """The inner environment's ``step`` (auto-reset of the inner state only) plus :meth:`update`."""
        params = self.default_params if params is None else params
        obs, inner, reward, terminated, truncated, info = gymnax_compat.step(
            self.inner, key, state.inner, action, self.inner_params(params)
        )
        state, info = self.update(state, action, reward, terminated, truncated, info, params)
        return gymnax_compat.step_returns(
            obs, dataclasses.replace(state, inner=inner), reward, terminated, truncated, info
        )


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


class EpisodeStatistics(StatefulWrapper):
    """Adds the statistics of the running episode to every ``info`` (the one episode counter, cf. PureJaxRL's LogWrapper).

    The state is :class:`EpisodeStatisticsState` ``(inner, episode_return,
    episode_length)``; ``step`` auto-resets only the inner environment and adds
    ``done``, ``success`` (the inner ``info["success"]`` where the environment
    reports one, else False), ``episode_return`` and ``episode_length`` (the
    finished episode's totals where ``done``) to ``info``. Wrapping is idempotent:
    ``EpisodeStatistics(EpisodeStatistics(env))`` is ``EpisodeStatistics(env)`` again.
    """

    def __init__(self, inner: Environment):
        super().__init__(inner.inner if isinstance(inner, EpisodeStatistics) else inner)

    def init(self, inner_state: Any, params: Any) -> EpisodeStatisticsState:
        return EpisodeStatisticsState(inner_state, jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32))

    def update(self, state, action, reward, terminated, truncated, info, params):
        stats, episode_return, episode_length = track_episodes(
            state.episode_return, state.episode_length, reward, terminated, truncated, info.get("success")
        )
        return EpisodeStatisticsState(state.inner, episode_return, episode_length), {**info, **stats}


class _PicklesJaxState:
    """Pickling and deep copies for an adapter that holds JAX keys (``_key``), an environment state
    (``_state``) and jitted functions (``_reset``, ``_step``, rebuilt by ``_compile``)."""

    def _compile(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_reset", "_step")}
        state["_key"] = None if self._key is None else np.asarray(jax.random.key_data(self._key))
        state["_state"] = jax.tree.map(np.asarray, self._state)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._key = None if self._key is None else jax.random.wrap_key_data(jnp.asarray(self._key))
        self._state = jax.tree.map(jnp.asarray, self._state)
        self._compile()


class GymnasiumAdapter(_PicklesJaxState, gym.Env):
    """A ``gymnasium.Env`` over a gymnax environment and fixed ``params``.

    Randomness comes from a JAX key derived from the Gymnasium seed, so
    ``reset(seed=s)`` is reproducible. Observations come back as NumPy arrays and
    the spaces as Gymnasium's. The adapter pickles and deep-copies (the episode in
    progress included); it refuses to run in a process forked after JAX started
    (:func:`check_not_forked`), where JAX would hang.
    """

    def __init__(self, env: Environment, params: Any = None, render_mode: str | None = None):
        check_not_forked(type(self).__name__)
        render_modes = tuple(getattr(env, "render_modes", ()))
        if render_mode is not None and render_mode not in render_modes:
            raise ValueError(f"render_mode must be None or one of {list(render_modes)}, got {render_mode!r}")
        self.env = env
        self.params = env.default_params if params is None else params
        self.render_mode = render_mode
        self.metadata = {"render_modes": list(render_modes), "render_fps": 10}
        self.observation_space = gymnasium_space(env.observation_space(self.params))
        self.action_space = gymnasium_space(env.action_space(self.params))
        self._key: jax.Array | None = None
        self._state: Any = None
        self._compile()

    def _compile(self) -> None:
        self._reset = jax.jit(self.env.reset_env)
        self._step = jax.jit(functools.partial(gymnax_compat.step_env, self.env))

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


class GymnasiumVectorAdapter(_PicklesJaxState, gym.vector.VectorEnv):
    """``num_envs`` copies of a gymnax environment as one Gymnasium vector env: one jitted ``vmap`` per step.

    This is what ``gymnasium.make_vec(id, num_envs=N)`` returns for memgym's JAX environments
    (Gymnasium's ``vector_entry_point``), instead of ``N`` Python environments or processes.
    Auto-reset is Gymnasium's ``SAME_STEP`` mode (the JAX ``step`` resets in the step that
    ends an episode): ``infos["final_obs"]`` is a ``[N, ...]`` array holding, where
    ``infos["_final_obs"]`` is True, the last observation of the episode that just ended.
    Per-step ``info`` values of the environment (T-Maze: ``success``) come as ``[N]`` arrays
    with their ``_name`` masks. ``reset(seed=s)`` seeds environment ``i`` with ``s + i``
    (a list gives one seed per environment).
    """

    def __init__(self, env: Environment, params: Any = None, num_envs: int = 1, render_mode: str | None = None):
        check_not_forked(type(self).__name__)
        if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an integer >= 1, got num_envs={num_envs!r}")
        if render_mode is not None:
            raise ValueError(
                f"render_mode={render_mode!r}: the JAX vector env does not render; make the envs with "
                "gymnasium.make_vec(..., vectorization_mode='sync') to render them"
            )
        self.env = env
        self.params = env.default_params if params is None else params
        self.num_envs = int(num_envs)
        self.render_mode = None
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP, "render_modes": []}
        self.single_observation_space = gymnasium_space(env.observation_space(self.params))
        self.single_action_space = gymnasium_space(env.action_space(self.params))
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self._key: jax.Array | None = None  # [N] keys, one per environment
        self._state: Any = None
        self._compile()

    def _compile(self) -> None:
        env = self.env
        env_step = jax.vmap(functools.partial(gymnax_compat.step, env), in_axes=(0, 0, 0, None))

        def reset(keys, params):
            keys, reset_keys = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
            obs, state = jax.vmap(env.reset, in_axes=(0, None))(reset_keys, params)
            return keys, obs, state

        def step(keys, state, actions, params):
            keys, step_keys = jnp.moveaxis(jax.vmap(jax.random.split)(keys), 1, 0)
            obs, state, reward, terminated, truncated, info = env_step(step_keys, state, actions, params)
            return keys, obs, state, reward, terminated, truncated, info

        self._reset = jax.jit(reset)
        self._step = jax.jit(step)

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        if seed is None or isinstance(seed, (int, np.integer)):
            if seed is not None:
                self._np_random, self._np_random_seed = gym.utils.seeding.np_random(int(seed))
            seeds = [None if seed is None else int(seed) + i for i in range(self.num_envs)]
        elif isinstance(seed, (list, tuple)) and len(seed) == self.num_envs:
            seeds = list(seed)
        else:
            raise ValueError(f"seed must be None, an int or a list of {self.num_envs} ints or Nones, got seed={seed!r}")
        seeds = [int(self.np_random.integers(2**31)) if s is None else s for s in seeds]
        if not all(isinstance(s, (int, np.integer)) and 0 <= s < 2**32 for s in seeds):
            raise ValueError(f"seeds must be integers in [0, 2**32), got seed={seed!r}")
        keys = jax.vmap(jax.random.key)(jnp.asarray(seeds, jnp.uint32))
        self._key, obs, self._state = self._reset(keys, self.params)
        return np.asarray(obs), {}

    def step(self, actions):
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        actions = np.asarray(actions)
        integral = not isinstance(self.single_action_space, gym.spaces.Box)
        valid = (actions.shape == self.action_space.shape and (actions.dtype.kind in "iu" or not integral)
                 and self.action_space.contains(actions))
        if not valid:
            raise ValueError(f"actions must be {self.num_envs} actions of {self.single_action_space}, got {actions!r}")
        self._key, obs, self._state, reward, terminated, truncated, info = self._step(
            self._key, self._state, jnp.asarray(actions), self.params
        )
        terminated, truncated = np.asarray(terminated), np.asarray(truncated)
        infos: dict[str, Any] = {}
        for name, value in info.items():
            if name in ("terminated", "truncated"):
                continue
            name = "final_obs" if name == "final_observation" else name
            infos[name] = np.asarray(value)
            infos[f"_{name}"] = terminated | truncated if name == "final_obs" else np.ones(self.num_envs, bool)
        return np.asarray(obs), np.asarray(reward, np.float64), terminated, truncated, infos
