"""The T-Maze (thesis §5.1.1) as a gymnax environment; dynamics identical to :mod:`memgym.envs.tmaze`.

:class:`TMazeJax` subclasses gymnax's ``Environment`` with gymnax
``EnvState``/``EnvParams`` dataclasses and gymnax spaces, so any gymnax code
(PureJaxRL-style training loops, gymnax wrappers) runs on it unchanged::

    env, params = memgym.envs.make_jax("memgym/TMaze-v0", corridor_length=32)  # like gymnax.make
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)  # gymnax 1.0
    obs, state, reward, done, info = env.step(key, state, action, params)  # gymnax 0.0.9

``corridor_length`` and ``max_steps_in_episode`` are *traced* fields of
:class:`TMazeParams`: one jitted ``step`` serves any length, and ``jax.vmap``
over a batch of params runs environments of different lengths side by side
(``tmaze_params(corridor_length=jnp.array([120, 160, 200]))``).
``info["success"]`` is True on the step that ends an episode with the correct
turn; ``step`` adds gymnax's ``info["final_observation"]``. Episode statistics
come from :class:`memgym.envs.functional.EpisodeStatistics` (the trainers wrap it).
Under gymnax 0.0.9 ``step`` and ``step_env`` return its five values, ``done = terminated |
truncated`` fourth, and ``info`` carries ``terminated``, ``truncated`` and ``final_observation``
(:mod:`memgym.envs.gymnax_compat`). Importing this module registers ``memgym/TMaze-v0`` with
gymnax 1.0 (``gymnax.make("memgym/TMaze-v0")``); gymnax 0.0.9 has no registry, and
``memgym.envs.make_jax`` builds it.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from memgym.envs import gymnax_compat, tmaze
from memgym.envs.functional import GymnasiumAdapter, GymnasiumVectorAdapter, check_not_forked

GYMNAX_ID = "memgym/TMaze-v0"


@struct.dataclass
class TMazeParams(environment.EnvParams):
    """T-Maze parameters (a gymnax ``EnvParams``). ``max_steps_in_episode`` (gymnax's time limit)
    and ``corridor_length`` are traced where they are passed to a jitted function (Python ints for one
    environment, so that the params hash as gymnax's do and can be a static argument; int32 arrays for a batch
    under ``vmap``);
    ``gray_bits`` and ``num_distractors`` fix the observation shape and are static.
    Build with :func:`tmaze_params` (validated) or ``env.default_params.replace(...)``."""

    max_steps_in_episode: Any = tmaze.DEFAULT_MAX_EPISODE_STEPS
    corridor_length: Any = tmaze.DEFAULT_CORRIDOR_LENGTH
    gray_bits: int = struct.field(pytree_node=False, default=tmaze.DEFAULT_GRAY_BITS)
    num_distractors: int = struct.field(pytree_node=False, default=tmaze.DEFAULT_NUM_DISTRACTORS)

    @property
    def obs_size(self) -> int:
        return 2 + self.gray_bits + self.num_distractors


def tmaze_params(
    corridor_length: Any = tmaze.DEFAULT_CORRIDOR_LENGTH,
    num_distractors: int = tmaze.DEFAULT_NUM_DISTRACTORS,
    gray_bits: int = tmaze.DEFAULT_GRAY_BITS,
    max_episode_steps: Any = tmaze.DEFAULT_MAX_EPISODE_STEPS,
) -> TMazeParams:
    """Validated :class:`TMazeParams` from the arguments of ``gymnasium.make("memgym/TMaze-v0", ...)``.

    ``corridor_length`` and ``max_episode_steps`` (stored as gymnax's ``max_steps_in_episode``)
    may be ints or integer arrays of the same shape (a batch for ``vmap``); every entry is
    checked against the same ranges as the Gymnasium version."""
    lengths = np.asarray(corridor_length)
    limits = np.broadcast_to(np.asarray(max_episode_steps), lengths.shape)
    for name, values in (("corridor_length", lengths), ("max_episode_steps", limits)):
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"{name} must be an integer or an integer array, got {values!r}")
    for length, limit in zip(lengths.reshape(-1), limits.reshape(-1)):
        tmaze.validate_config(int(length), num_distractors, gray_bits, int(limit))
    if lengths.ndim == 0:  # one environment: Python ints, hashable as gymnax's own params are
        limit, length = int(limits), int(lengths)
    else:  # a batch for vmap
        limit, length = jnp.asarray(limits, jnp.int32), jnp.asarray(lengths, jnp.int32)
    return TMazeParams(max_steps_in_episode=limit, corridor_length=length, gray_bits=int(gray_bits),
                       num_distractors=int(num_distractors))


#: the options of ``TMazeJax(...)``, ``make_jax("memgym/TMaze-v0", ...)`` and ``gymnasium.make("memgym/TMazeJax-v0", ...)``
OPTIONS = ("corridor_length", "num_distractors", "gray_bits", "max_episode_steps")


@struct.dataclass
class TMazeState(environment.EnvState):
    """A gymnax ``EnvState``: ``time`` (steps taken this episode), ``position`` (0 … L-1),
    ``goal`` (0 left, 1 right) and ``terminated`` (the last step turned at the junction)."""

    position: jax.Array
    goal: jax.Array
    terminated: jax.Array


def _random_bits(key: jax.Array, n: int) -> jax.Array:
    """``n`` independent fair bits (int32 0/1) from ``ceil(n / 32)`` random words."""
    words = jax.random.bits(key, (max(1, -(-n // 32)),), jnp.uint32)
    shifts = jnp.arange(32, dtype=jnp.uint32)
    return ((words[:, None] >> shifts) & 1).reshape(-1)[:n].astype(jnp.int32)


class TMazeJax(environment.Environment[TMazeState, TMazeParams]):
    """The T-Maze as a gymnax environment; ``config`` (the :func:`tmaze_params` arguments) sets
    :attr:`default_params`, so ``gymnax.make("memgym/TMaze-v0", corridor_length=32)`` works."""

    render_modes = ("ansi", "rgb_array")

    def __init__(self, **config: Any):
        unknown = sorted(set(config) - set(OPTIONS))
        if unknown:
            raise ValueError(
                f"unknown T-Maze option(s) {unknown}; allowed: {', '.join(OPTIONS)} (the arguments of "
                "gymnasium.make('memgym/TMaze-v0'); the params store max_episode_steps as gymnax's max_steps_in_episode)"
            )
        for name in ("corridor_length", "max_episode_steps"):
            if name in config and np.ndim(config[name]) != 0:
                raise ValueError(
                    f"{name} must be one integer for one environment, got {name}={config[name]!r}; for a batch of "
                    f"lengths, vmap over tmaze_params({name}=[...]) (see the module docstring)"
                )
        self._default_params = tmaze_params(**config)

    @property
    def default_params(self) -> TMazeParams:
        return self._default_params

    @property
    def name(self) -> str:
        return GYMNAX_ID

    @property
    def num_actions(self) -> int:
        return 4

    def observation_space(self, params: TMazeParams) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (params.obs_size,), jnp.float32)

    def action_space(self, params: TMazeParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(self.num_actions)

    def _observation(self, state: TMazeState, distractors: jax.Array, params: TMazeParams) -> jax.Array:
        visible = state.time == 0
        cue = jnp.where(visible, jnp.stack([state.goal, 1 - state.goal]), 0)
        gray = state.position ^ (state.position >> 1)
        shifts = jnp.arange(params.gray_bits - 1, -1, -1)
        gray_bits = (gray >> shifts) & 1
        return jnp.concatenate([cue, gray_bits, distractors]).astype(jnp.float32)

    def reset_env(self, key: jax.Array, params: TMazeParams) -> tuple[jax.Array, TMazeState]:
        bits = _random_bits(key, 1 + params.num_distractors)
        zero = jnp.zeros((), jnp.int32)
        state = TMazeState(time=zero, position=zero, goal=bits[0], terminated=jnp.zeros((), bool))
        return self._observation(state, bits[1:], params), state

    def step_env(self, key, state, action, params):
        """One transition (same rules as :func:`memgym.envs.tmaze.transition`): gymnax 1.0's
        ``(obs, state, reward, terminated, info)``, :meth:`is_truncated` being the time limit; under
        gymnax 0.0.9 its ``(obs, state, reward, done, info)`` (:func:`~memgym.envs.gymnax_compat.step_env_returns`)."""
        action = jnp.asarray(action, jnp.int32)
        junction = params.corridor_length - 1
        at_junction = state.position == junction
        move = jnp.where(action == tmaze.UP, 1, jnp.where(action == tmaze.DOWN, -1, 0))
        position = jnp.clip(state.position + move, 0, junction)
        turned = jnp.logical_or(action == tmaze.LEFT, action == tmaze.RIGHT)
        terminated = jnp.logical_and(at_junction, turned)
        success = jnp.logical_and(terminated, action - tmaze.LEFT == state.goal)
        reward = jnp.where(
            terminated,
            jnp.where(success, tmaze.SUCCESS_REWARD, tmaze.FAILURE_REWARD),
            tmaze.STEP_REWARD,
        ).astype(jnp.float32)
        new_state = TMazeState(time=state.time + 1, position=position, goal=state.goal, terminated=terminated)
        obs = self._observation(new_state, _random_bits(key, params.num_distractors), params)
        truncated = self.is_truncated(new_state, params)
        return gymnax_compat.step_env_returns(obs, new_state, reward, terminated, truncated, {"success": success})

    def is_terminated(self, state: TMazeState, params: TMazeParams) -> jax.Array:
        return state.terminated

    def is_truncated(self, state: TMazeState, params: TMazeParams) -> jax.Array:
        """The time limit ended an episode that did not terminate (a timeout is a failure)."""
        return jnp.logical_and(state.time >= params.max_steps_in_episode, ~state.terminated)

    def render(self, state: TMazeState, params: TMazeParams, mode: str) -> Any:
        position, goal, time = int(state.position), int(state.goal), int(state.time)
        length = int(params.corridor_length)
        if mode == "ansi":
            return tmaze.render_ansi(position, goal, time, length, time == 0)
        if mode == "rgb_array":
            return tmaze.render_rgb(position, goal, length, time == 0)
        raise ValueError(f"mode must be one of {list(self.render_modes)}, got {mode!r}")


def make_gymnasium_tmaze(render_mode: str | None = None, **config: Any) -> GymnasiumAdapter:
    """Gymnasium env over the JAX twin (registered as ``memgym/TMazeJax-v0``).

    ``config`` takes the :func:`tmaze_params` arguments (scalars only)."""
    check_not_forked("memgym/TMazeJax-v0")
    env = TMazeJax(**config)
    return GymnasiumAdapter(env, env.default_params, render_mode=render_mode)


def make_gymnasium_tmaze_vector(num_envs: int = 1, render_mode: str | None = None,
                                **config: Any) -> GymnasiumVectorAdapter:
    """The vector env of ``gymnasium.make_vec("memgym/TMazeJax-v0", num_envs=N, **config)``: one vmapped T-Maze."""
    check_not_forked("memgym/TMazeJax-v0")
    env = TMazeJax(**config)
    return GymnasiumVectorAdapter(env, env.default_params, num_envs=num_envs, render_mode=render_mode)


gymnax_compat.register(GYMNAX_ID, TMazeJax)
