"""T-Maze with a gray-coded position and distractor bits (thesis §5.1.1, Fig. 5.1).

The agent starts at the bottom of a corridor of ``corridor_length`` cells
(positions ``0 … L-1``); the junction is the last cell, ``L-1``. The first
observation of an episode carries a cue telling on which side of the junction
the reward lies; the agent has to remember it for at least ``L-1`` steps and
turn the right way at the junction.

Observation (float32, 0/1), ``2 + gray_bits + num_distractors`` values::

    [ cue (2) | gray code of position (gray_bits, MSB first) | distractors ]

* cue ``01`` = reward on the left, ``10`` = reward on the right; shown only in
  the first observation of an episode, zeros afterwards;
* the gray code of the current position (zero at the start of an episode);
* fresh Bernoulli(0.5) distractor bits in every observation.

Actions (``Discrete(4)``): ``0`` up (forward), ``1`` down (back), ``2`` left,
``3`` right. Up/down move ±1, clamped to the corridor; up at the junction and
left/right inside the corridor bump a wall (no move). Left/right at the
junction end the episode (``terminated``).

Reward: −0.1 on every step that does not end the episode with a turn; on the
turn +4 if it is the correct side, −1 otherwise. The optimal return is
``4 - 0.1 (L - 1)``. Reaching ``max_episode_steps`` truncates the episode and
counts as a failure. ``info["success"]`` is ``True`` only on the step that ends
an episode with the correct turn, so success rate = successes / finished
episodes (timeouts included), the thesis metric.

This module needs only numpy and gymnasium; :mod:`memgym.envs.tmaze_jax` is the
pure-JAX twin with identical dynamics.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from memgym.validation import check_int

UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
ACTION_NAMES = ("up", "down", "left", "right")
GOAL_LEFT, GOAL_RIGHT = 0, 1
STEP_REWARD = -0.1
SUCCESS_REWARD = 4.0
FAILURE_REWARD = -1.0
DEFAULT_CORRIDOR_LENGTH = 200
DEFAULT_GRAY_BITS = 8
DEFAULT_NUM_DISTRACTORS = 6
DEFAULT_MAX_EPISODE_STEPS = 1000


def validate_config(
    corridor_length: Any,
    num_distractors: Any = DEFAULT_NUM_DISTRACTORS,
    gray_bits: Any = DEFAULT_GRAY_BITS,
    max_episode_steps: Any = DEFAULT_MAX_EPISODE_STEPS,
) -> tuple[int, int, int, int]:
    """Check a T-Maze configuration and return it as Python ints.

    Raises ``ValueError`` naming the argument, its value and the allowed range.
    """
    gray_bits = check_int("gray_bits", gray_bits, 1, 30)
    corridor_length = check_int("corridor_length", corridor_length, 1, 2**gray_bits,
                                why=f"2**gray_bits positions with gray_bits={gray_bits}")
    num_distractors = check_int("num_distractors", num_distractors, low=0)
    max_episode_steps = check_int("max_episode_steps", max_episode_steps, low=1)
    return corridor_length, num_distractors, gray_bits, max_episode_steps


def gray_code(position: np.ndarray | int) -> np.ndarray | int:
    """Binary-reflected gray code ``g = p XOR (p >> 1)``: neighbours differ in one bit."""
    return position ^ (position >> 1)


def gray_code_bits(position: np.ndarray | int, gray_bits: int) -> np.ndarray:
    """Gray code of ``position`` as ``gray_bits`` float32 0/1 values, most significant first.

    ``position`` may be an array; the bit axis is appended last.
    """
    shifts = np.arange(gray_bits - 1, -1, -1)
    code = np.asarray(gray_code(np.asarray(position, dtype=np.int64)))
    return ((code[..., None] >> shifts) & 1).astype(np.float32)


def transition(
    position: int, goal: int, t: int, action: int, corridor_length: int, max_episode_steps: int
) -> tuple[int, float, bool, bool, bool]:
    """One T-Maze step on plain ints: ``(new_position, reward, terminated, truncated, success)``.

    ``t`` is the number of steps already taken in the episode.
    """
    junction = corridor_length - 1
    at_junction = position == junction
    if action == UP:
        position = min(position + 1, junction)
    elif action == DOWN:
        position = max(position - 1, 0)
    terminated = at_junction and action in (LEFT, RIGHT)
    success = terminated and (action - LEFT) == goal
    if terminated:
        reward = SUCCESS_REWARD if success else FAILURE_REWARD
    else:
        reward = STEP_REWARD
    truncated = (not terminated) and t + 1 >= max_episode_steps
    return position, reward, terminated, truncated, success


# ---------------------------------------------------------------------------------------
# Drawing, shared with the JAX twin.

_MAX_DRAWN_CELLS = 64


def _cell_of(position: int, corridor_length: int) -> tuple[int, int]:
    """Drawn cell of a position and the number of drawn cells (long corridors are scaled)."""
    cells = min(corridor_length, _MAX_DRAWN_CELLS)
    if corridor_length == 1:
        return 0, 1
    return round(position * (cells - 1) / (corridor_length - 1)), cells


def render_ansi(position: int, goal: int, t: int, corridor_length: int, show_cue: bool) -> str:
    """Text drawing of the T, lying on its side: forward (up) is to the right.

    The two arms of the junction are drawn above (left turn) and below (right
    turn) the last cell. ``A`` is the agent. The goal side is shown only while
    the cue is visible (first step of an episode), as the agent sees it.
    """
    cell, cells = _cell_of(position, corridor_length)
    corridor = ["="] * cells
    corridor[cell] = "A"
    left_arm = "[L]" + ("*" if show_cue and goal == GOAL_LEFT else "")
    right_arm = "[R]" + ("*" if show_cue and goal == GOAL_RIGHT else "")
    pad = " " * (cells + 1)
    cue = ("left" if goal == GOAL_LEFT else "right") if show_cue else "hidden"
    scale = "" if cells == corridor_length else f"  (1 char ~ {corridor_length / cells:.1f} cells)"
    lines = [
        pad + left_arm,
        "S" + "".join(corridor) + "+",
        pad + right_arm,
        f"step {t}  position {position}/{corridor_length - 1}  cue: {cue}{scale}",
    ]
    return "\n".join(lines) + "\n"


_CELL_PX = 8
_COLORS = {
    "background": (30, 30, 30),
    "floor": (200, 200, 200),
    "agent": (40, 110, 240),
    "goal": (40, 200, 60),
    "arm": (160, 160, 160),
}


def render_rgb(position: int, goal: int, corridor_length: int, show_cue: bool) -> np.ndarray:
    """Small image of the same drawing: ``[3 * 8, (cells + 2) * 8, 3]`` uint8.

    Corridor cells are gray, the agent blue; the arm holding the reward turns
    green while the cue is visible.
    """
    cell, cells = _cell_of(position, corridor_length)
    height, width = 3, cells + 2
    grid = np.empty((height, width, 3), dtype=np.uint8)
    grid[:] = _COLORS["background"]
    grid[1, 1 : cells + 1] = _COLORS["floor"]
    grid[1, cells + 1] = _COLORS["floor"]
    grid[0, cells + 1] = _COLORS["arm"]
    grid[2, cells + 1] = _COLORS["arm"]
    if show_cue:
        grid[0 if goal == GOAL_LEFT else 2, cells + 1] = _COLORS["goal"]
    grid[1, cell + 1] = _COLORS["agent"]
    return np.repeat(np.repeat(grid, _CELL_PX, axis=0), _CELL_PX, axis=1)


# ---------------------------------------------------------------------------------------


class TMazeEnv(gym.Env):
    """Gymnasium T-Maze (thesis §5.1.1). See the module docstring for the full spec.

    Args:
        corridor_length: number of corridor cells ``L`` (1 … 2**gray_bits); the
            junction is cell ``L-1``.
        num_distractors: number of random distractor bits (≥ 0).
        gray_bits: width of the gray-coded position.
        max_episode_steps: time limit; reaching it truncates the episode (a failure).
        render_mode: ``None``, ``"ansi"`` or ``"rgb_array"``.

    ``reset(options={"goal": 0 or 1})`` fixes the goal side (0 left, 1 right);
    otherwise it is drawn uniformly from the env's seeded generator.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 10}

    def __init__(
        self,
        corridor_length: int = DEFAULT_CORRIDOR_LENGTH,
        num_distractors: int = DEFAULT_NUM_DISTRACTORS,
        gray_bits: int = DEFAULT_GRAY_BITS,
        max_episode_steps: int = DEFAULT_MAX_EPISODE_STEPS,
        render_mode: str | None = None,
    ):
        (
            self.corridor_length,
            self.num_distractors,
            self.gray_bits,
            self.max_episode_steps,
        ) = validate_config(corridor_length, num_distractors, gray_bits, max_episode_steps)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.obs_size = 2 + self.gray_bits + self.num_distractors
        self.observation_space = spaces.Box(0.0, 1.0, (self.obs_size,), np.float32)
        self.action_space = spaces.Discrete(4)
        # Gray codes of every position, computed once: observations are table look-ups.
        self._gray_table = gray_code_bits(np.arange(self.corridor_length), self.gray_bits)
        self._noise = np.zeros((0, self.num_distractors), np.float32)
        self._noise_index = 0
        self._position = 0
        self._goal = GOAL_LEFT
        self._t = 0

    # Distractor bits are drawn from the seeded generator in blocks (much faster than one
    # call per step); the stream is still a pure function of the seed.
    _NOISE_BLOCK = 1024

    def _distractors(self) -> np.ndarray:
        if self._noise_index >= len(self._noise):
            self._noise = self.np_random.integers(
                0, 2, size=(self._NOISE_BLOCK, self.num_distractors), dtype=np.int8
            ).astype(np.float32)
            self._noise_index = 0
        row = self._noise[self._noise_index]
        self._noise_index += 1
        return row

    def _observation(self) -> np.ndarray:
        obs = np.empty(self.obs_size, dtype=np.float32)
        if self._t == 0:
            obs[0] = self._goal
            obs[1] = 1 - self._goal
        else:
            obs[:2] = 0.0
        obs[2 : 2 + self.gray_bits] = self._gray_table[self._position]
        obs[2 + self.gray_bits :] = self._distractors()
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._noise = self._noise[:0]  # a new seed starts a new distractor stream
        goal = (options or {}).get("goal")
        if goal is None:
            goal = int(self.np_random.integers(2))
        elif goal not in (GOAL_LEFT, GOAL_RIGHT) or isinstance(goal, bool):
            raise ValueError(f"options['goal'] must be 0 (left) or 1 (right), got {goal!r}")
        self._goal, self._position, self._t = int(goal), 0, 0
        return self._observation(), {"success": False}

    def step(self, action):
        if not self.action_space.contains(action):
            raise ValueError(f"action must be an integer in [0, 3] (0 up, 1 down, 2 left, 3 right), got {action!r}")
        self._position, reward, terminated, truncated, success = transition(
            self._position, self._goal, self._t, int(action), self.corridor_length, self.max_episode_steps
        )
        self._t += 1
        return self._observation(), reward, terminated, truncated, {"success": success}

    def render(self):
        if self.render_mode == "ansi":
            return render_ansi(self._position, self._goal, self._t, self.corridor_length, self._t == 0)
        if self.render_mode == "rgb_array":
            return render_rgb(self._position, self._goal, self.corridor_length, self._t == 0)
        return None

    @property
    def position(self) -> int:
        """Current corridor position (0 … corridor_length - 1)."""
        return self._position

    @property
    def goal(self) -> int:
        """Side of the reward in this episode: 0 left, 1 right."""
        return self._goal


def own_time_limit(env: gym.Env) -> gym.Env:
    """The time limit of ``gymnasium.make("memgym/TMaze-v0", max_episode_steps=N)`` given to the T-Maze itself.

    The T-Maze enforces its time limit (a timeout is a failure, part of the task), so its spec
    asks Gymnasium for no ``TimeLimit``. Given ``max_episode_steps``, ``gymnasium.make`` still
    puts a ``TimeLimit(N)`` around the env; this function, the spec's additional wrapper, runs
    right after: it checks ``N`` as the constructor checks ``max_episode_steps`` (``ValueError``
    naming it), makes it the env's own limit (and its spec's, so ``gymnasium.make(env.spec)``
    rebuilds the same env) and returns the env without the ``TimeLimit``. One limit, one owner.
    Values Gymnasium refuses itself (0, negative, not an int) stop in its ``TimeLimit`` first.
    """
    if not isinstance(env, gym.wrappers.TimeLimit):
        return env
    inner = env.env
    maze = inner.unwrapped
    if not isinstance(maze, TMazeEnv):
        raise TypeError(f"own_time_limit is the T-Maze's additional wrapper, got {maze!r}")
    limit = check_int("max_episode_steps", env.spec.max_episode_steps, low=1)
    maze.max_episode_steps = limit
    if maze.spec is not None:
        maze.spec.kwargs["max_episode_steps"] = limit
        wrapper = inner
        while isinstance(wrapper, gym.Wrapper):  # the wrappers below keep a copy of the spec made before
            wrapper._cached_spec = None
            wrapper = wrapper.env
    return inner

