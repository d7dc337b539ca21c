"""Pure-JAX twin of the T-Maze (thesis §5.1.1); dynamics identical to :mod:`memgym.envs.tmaze`.

``corridor_length`` and ``max_episode_steps`` are *traced* parameters: one
jitted ``step`` serves any length, and ``jax.vmap`` over a batch of
:class:`TMazeParams` runs environments of different lengths side by side::

    env = TMazeJax()
    params = tmaze_params(corridor_length=jnp.array([120, 160, 200]))
    obs, state = jax.vmap(env.reset)(keys, params)
    obs, state, reward, term, trunc, info = jax.vmap(env.step)(keys, state, actions, params)

``info["success"]`` is True on the step that ends an episode with the correct
turn. The environment keeps no episode statistics: wrap it in
:class:`memgym.envs.functional.EpisodeStatistics` for ``done``,
``episode_return`` and ``episode_length`` (the trainers do).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from gymnasium import spaces

from memgym.envs import tmaze
from memgym.envs.functional import FunctionalEnv, GymnasiumAdapter


@dataclasses.dataclass(frozen=True)
class TMazeParams:
    """T-Maze parameters. ``corridor_length`` and ``max_episode_steps`` are traced
    (int32 scalars, or arrays under ``vmap``); ``gray_bits`` and ``num_distractors``
    fix the observation shape and are static. Build with :func:`tmaze_params`."""

    corridor_length: jax.Array
    max_episode_steps: jax.Array
    gray_bits: int = tmaze.DEFAULT_GRAY_BITS
    num_distractors: int = tmaze.DEFAULT_NUM_DISTRACTORS

    @property
    def obs_size(self) -> int:
        return 2 + self.gray_bits + self.num_distractors


jax.tree_util.register_dataclass(
    TMazeParams,
    data_fields=["corridor_length", "max_episode_steps"],
    meta_fields=["gray_bits", "num_distractors"],
)


def tmaze_params(
    corridor_length: Any = tmaze.DEFAULT_CORRIDOR_LENGTH,
    num_distractors: int = tmaze.DEFAULT_NUM_DISTRACTORS,
    gray_bits: int = tmaze.DEFAULT_GRAY_BITS,
    max_episode_steps: Any = tmaze.DEFAULT_MAX_EPISODE_STEPS,
) -> TMazeParams:
    """Validated :class:`TMazeParams`. ``corridor_length`` and ``max_episode_steps`` may
    be ints or integer arrays of the same shape (a batch for ``vmap``); every entry is
    checked against the same ranges as the Gymnasium version."""
    lengths = np.asarray(corridor_length)
    limits = np.broadcast_to(np.asarray(max_episode_steps), lengths.shape)
    for name, values in (("corridor_length", lengths), ("max_episode_steps", limits)):
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"{name} must be an integer or an integer array, got {values!r}")
    for length, limit in zip(lengths.reshape(-1), limits.reshape(-1)):
        tmaze.validate_config(int(length), num_distractors, gray_bits, int(limit))
    return TMazeParams(
        corridor_length=jnp.asarray(lengths, jnp.int32),
        max_episode_steps=jnp.asarray(limits, jnp.int32),
        gray_bits=int(gray_bits),
        num_distractors=int(num_distractors),
    )


@dataclasses.dataclass(frozen=True)
class TMazeState:
    """``position`` (0 … L-1), ``goal`` (0 left, 1 right) and ``t`` (steps taken this episode)."""

    position: jax.Array
    goal: jax.Array
    t: jax.Array


jax.tree_util.register_dataclass(TMazeState, data_fields=["position", "goal", "t"], meta_fields=[])


def _random_bits(key: jax.Array, n: int) -> jax.Array:
    """``n`` independent fair bits (int32 0/1) from ``ceil(n / 32)`` random words."""
    words = jax.random.bits(key, (max(1, -(-n // 32)),), jnp.uint32)
    shifts = jnp.arange(32, dtype=jnp.uint32)
    return ((words[:, None] >> shifts) & 1).reshape(-1)[:n].astype(jnp.int32)


class TMazeJax(FunctionalEnv[TMazeParams, TMazeState]):
    """The functional T-Maze. Stateless; see the module docstring."""

    render_modes = ("ansi", "rgb_array")

    def default_params(self, **overrides: Any) -> TMazeParams:
        return tmaze_params(**overrides)

    def observation_space(self, params: TMazeParams) -> spaces.Box:
        return spaces.Box(0.0, 1.0, (params.obs_size,), np.float32)

    def action_space(self, params: TMazeParams) -> spaces.Discrete:
        return spaces.Discrete(4)

    def _observation(self, state: TMazeState, distractors: jax.Array, params: TMazeParams) -> jax.Array:
        visible = state.t == 0
        cue = jnp.where(visible, jnp.stack([state.goal, 1 - state.goal]), 0)
        gray = state.position ^ (state.position >> 1)
        shifts = jnp.arange(params.gray_bits - 1, -1, -1)
        gray_bits = (gray >> shifts) & 1
        return jnp.concatenate([cue, gray_bits, distractors]).astype(jnp.float32)

    def reset(self, key: jax.Array, params: TMazeParams) -> tuple[jax.Array, TMazeState]:
        bits = _random_bits(key, 1 + params.num_distractors)
        zero = jnp.zeros((), jnp.int32)
        state = TMazeState(position=zero, goal=bits[0], t=zero)
        return self._observation(state, bits[1:], params), state

    def step_env(self, key, state, action, params):
        """One transition (same rules as :func:`memgym.envs.tmaze.transition`)."""
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
        t = state.t + 1
        truncated = jnp.logical_and(~terminated, t >= params.max_episode_steps)
        new_state = TMazeState(position=position, goal=state.goal, t=t)
        obs = self._observation(new_state, _random_bits(key, params.num_distractors), params)
        return obs, new_state, reward, terminated, truncated, {"success": success}

    def render(self, state: TMazeState, params: TMazeParams, mode: str) -> Any:
        position, goal, t = int(state.position), int(state.goal), int(state.t)
        length = int(params.corridor_length)
        if mode == "ansi":
            return tmaze.render_ansi(position, goal, t, length, t == 0)
        if mode == "rgb_array":
            return tmaze.render_rgb(position, goal, length, t == 0)
        raise ValueError(f"mode must be one of {list(self.render_modes)}, got {mode!r}")


def make_gymnasium_tmaze(render_mode: str | None = None, **config: Any) -> GymnasiumAdapter:
    """Gymnasium env over the JAX twin (registered as ``memgym/TMazeJax-v0``).

    ``config`` takes the :func:`tmaze_params` arguments (scalars only)."""
    return GymnasiumAdapter(TMazeJax(), tmaze_params(**config), render_mode=render_mode)
