"""POPGym tasks (``popgym==1.0.7``) behind one flat observation format.

POPGym (Morad et al., ICLR 2023) is a suite of partially observable tasks --
card games, bandits, board games and observation-stripped control tasks -- in
three difficulties each; the monoid paper runs all its experiments on it (§6,
Fig. 5-7: Repeat First, Repeat Previous, Count Recall, Positional Cartpole,
"a minimum episodic return of -1.0 and a maximum of 1.0", Fig. 6 caption).
memgym does not re-implement the tasks: :class:`PopGymEnv`
wraps the upstream classes (the optional extra ``pip install "memgym[popgym]"``)
and gives every task the same interface:

* **observation**: one flat float32 vector. ``Discrete`` parts become one-hot
  vectors, ``MultiDiscrete`` parts one one-hot per component, ``Box`` and
  ``MultiBinary`` parts are flattened as they are, ``Tuple`` parts are
  concatenated in order. With ``prev_action=True`` (the default, as POPGym's own
  baselines feed every model the previous action) the previous action is
  appended, encoded the same way (one-hot for discrete actions, raw values for
  ``Box`` actions); after ``reset`` that slot is all zeros, so "no action yet"
  is distinguishable from action 0. Layout: ``[observation | previous action]``.
* **returns**: POPGym scales every task's rewards so that an episode's
  undiscounted return lies in [-1, 1] (best 1). On the step that ends an episode
  ``info["episode_return"]`` holds that return (``math.fsum`` of the rewards, so
  51 rewards of ``1/51`` sum to exactly 1.0) and ``info["normalized_return"]``
  the same value clipped to [-1, 1]; ``info["episode_length"]`` the number of
  steps. The exact ranges under popgym 1.0.7 (``n`` decks, ``L`` the episode
  limit; derived from its source):

  ==============================  ===============================================
  RepeatFirst, CountRecall         [-1, 1]: ``52n-1`` steps of ``±1/(52n-1)``
  RepeatPrevious (k back)          [-1, 1]: ``52n-k`` scored steps of ``±1/(52n-k)``
  Autoencode                       [-1, 1]: ``52n`` scored steps of ``±1/(52n)``
  HigherLower                      ``±(52n-1)/(52n)``: a push (equal ranks) scores 0
  MultiarmedBandit                 [-1, 1]: ``L`` steps of ``±1/L``
  Concentration, MineSweeper       [-1, 1]
  Battleship                       [-L/(L-12), 1] with ``L`` = board cells: all
                                   misses give -1.23 / -1.14 / -1.09 (Easy /
                                   Medium / Hard), the one case the clip changes
  *Cartpole variants               (0, 1]: ``+1/L`` a step until the pole falls
                                   (gymnasium >= 1.0 rewards the falling step too,
                                   so popgym's -1 branch never fires)
  *Pendulum variants               [-1, 1]: the cost rescaled per step to ``±1/L``
  Labyrinth{Escape,Explore}        within [-1, 1]
  ==============================  ===============================================

* **info dicts are copied** (array values included): popgym's CountRecall and
  MultiarmedBandit hand the same objects to ``reset`` and ``step`` infos, which
  ``gymnasium.utils.env_checker.check_env`` rejects; wrapped, they pass.
* **seeding**: the wrapper has no random generator of its own. ``np_random`` is
  the upstream env's, and ``reset(seed=s)`` seeds it exactly as the upstream
  env would be seeded, so a wrapped episode is the encoding of the upstream
  episode with the same seed and actions.
* **actions** are checked before they reach popgym (which checks none, and for
  discrete actions would score or index with an invalid one silently):
  ``ValueError`` names the bad action and the allowed values.
* Stepping a finished episode (or before the first ``reset``) raises
  ``RuntimeError``: the upstream envs are undefined there (card decks run out).

Registered ids: ``memgym/popgym-<ClassName>-v0`` for the Easy / Medium / Hard
class of each task, e.g. ``memgym/popgym-RepeatFirstEasy-v0`` -- the 42 classes
that popgym registers itself, plus the 6 Labyrinth classes when ``mazelib`` is
installed (popgym imports them only then). :func:`register_popgym_envs` registers
them by entry-point string when popgym is installed, without importing it:
importing :mod:`memgym.envs` imports neither popgym nor JAX.

Could not be wrapped (popgym 1.0.7, gymnasium 1.4, numpy 2.4): none. Every class
passes ``check_env`` once wrapped. Upstream quirks kept as they are (wrapping
must not change the tasks):

* ``VelocityOnlyCartPole*`` returns cart *position* and pole *angle* at reset
  and the two velocities on every later step (popgym's reset slices the wrong
  components).
* ``PositionOnlyPendulumMedium`` / ``Hard`` have *shorter* episodes (150 / 100
  steps) than Easy (200), and the Pendulum action space is ``Box(-2, 2, (1,))``
  (check_env warns that it is not normalised to [-1, 1]); ``VelocityOnlyCartPole``
  has infinite observation bounds (another check_env warning).
* Labyrinth mazes are drawn from Python's and numpy's *global* generators,
  which popgym seeds only when ``reset`` gets a seed; popgym also emits a
  ``DeprecationWarning`` saying mazes can be solved without memory.

``render_mode`` must be ``None``: the popgym classes draw by printing.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import numbers
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = [
    "DIFFICULTIES",
    "LABYRINTH_TASKS",
    "POPGYM_TASKS",
    "PopGymEnv",
    "UNWRAPPABLE",
    "popgym_env_id",
    "popgym_env_names",
    "register_popgym_envs",
]

TESTED_POPGYM_VERSION = "1.0.7"
DIFFICULTIES = ("Easy", "Medium", "Hard")
# Task families of popgym 1.0.7 (its `popgym.envs.ALL`), by popgym class name.
POPGYM_TASKS = (
    "RepeatFirst",
    "RepeatPrevious",
    "Autoencode",
    "CountRecall",
    "PositionOnlyCartPole",
    "VelocityOnlyCartPole",
    "NoisyPositionOnlyCartPole",
    "PositionOnlyPendulum",
    "NoisyPositionOnlyPendulum",
    "MultiarmedBandit",
    "HigherLower",
    "Battleship",
    "Concentration",
    "MineSweeper",
)
# Importable from popgym.envs only when mazelib is installed.
LABYRINTH_TASKS = ("LabyrinthEscape", "LabyrinthExplore")
# popgym classes that cannot be wrapped, with the error; skipped at registration.
UNWRAPPABLE: dict[str, str] = {}

ENTRY_POINT = "memgym.envs.popgym:PopGymEnv"


def popgym_env_id(name: str) -> str:
    """Gymnasium id of a popgym class name: ``memgym/popgym-<name>-v0``."""
    return f"memgym/popgym-{name}-v0"


def popgym_env_names(include_labyrinth: bool | None = None) -> list[str]:
    """popgym class names memgym registers, e.g. ``"RepeatFirstEasy"``.

    ``include_labyrinth=None`` includes the Labyrinth tasks iff ``mazelib`` is installed.
    """
    if include_labyrinth is None:
        include_labyrinth = importlib.util.find_spec("mazelib") is not None
    tasks = POPGYM_TASKS + (LABYRINTH_TASKS if include_labyrinth else ())
    names = [task + level for task in tasks for level in DIFFICULTIES]
    return [name for name in names if name not in UNWRAPPABLE]


def register_popgym_envs() -> list[str]:
    """Register every wrapped popgym task if popgym is installed (idempotent).

    Only looks popgym up (``importlib.util.find_spec``); nothing is imported until an
    env is made. Returns the registered ids (empty without popgym).
    """
    if importlib.util.find_spec("popgym") is None:
        return []
    ids = []
    for name in popgym_env_names():
        env_id = popgym_env_id(name)
        if env_id not in gym.registry:
            # popgym's tasks end their episodes themselves: no TimeLimit wrapper. PopGymEnv
            # itself refuses to step before reset, so no OrderEnforcing wrapper either.
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env": name}, order_enforce=False)
        ids.append(env_id)
    return ids


def _popgym_class(name: str) -> type:
    """The popgym env class called ``name`` (imports popgym)."""
    if importlib.util.find_spec("popgym") is None:
        raise ImportError(
            f"popgym is not installed (needed for popgym task {name!r}): "
            f'pip install "memgym[popgym]" (tested with popgym=={TESTED_POPGYM_VERSION})'
        )
    try:
        import popgym.envs
        from popgym.core.env import POPGymEnv
    except ImportError as error:  # e.g. mazelib installed without cython: popgym then fails to import
        raise ImportError(f"popgym is installed but cannot be imported: {error}") from error
    cls = getattr(popgym.envs, name, None)
    if isinstance(cls, type) and issubclass(cls, POPGymEnv):
        return cls
    if name.startswith(LABYRINTH_TASKS) and importlib.util.find_spec("mazelib") is None:
        raise ImportError(f"popgym task {name!r} needs mazelib: pip install mazelib")
    raise ValueError(
        f"env must be a popgym env class name such as 'RepeatFirstEasy', got {name!r}; "
        f"known: {', '.join(popgym_env_names())}"
    )


# ---------------------------------------------------------------------------------------
# Flattening spaces. Each builder returns (size, low, high, encode) where
# ``encode(value, out)`` writes ``value`` into ``out`` (a zeroed float32 vector) at the
# part's offset.

Encoder = Callable[[Any, np.ndarray], None]
_SMALL = 8  # up to this many components, a Python loop beats numpy's per-call overhead


def _space_encoder(space: spaces.Space, offset: int) -> tuple[int, np.ndarray, np.ndarray, Encoder]:
    if isinstance(space, spaces.Discrete):
        n, base = int(space.n), offset - int(space.start)

        def encode_discrete(value, out):
            out[base + value] = 1.0

        return n, np.zeros(n, np.float32), np.ones(n, np.float32), encode_discrete

    if isinstance(space, spaces.MultiDiscrete):
        nvec = space.nvec.reshape(-1).astype(np.int64)
        starts = space.start.reshape(-1).astype(np.int64)
        size = int(nvec.sum())
        bases = offset + np.concatenate([[0], np.cumsum(nvec)[:-1]]) - starts
        low, high = np.zeros(size, np.float32), np.ones(size, np.float32)
        flat = space.nvec.ndim == 1
        if nvec.size <= _SMALL and flat:  # a Python loop beats fancy indexing for a few components
            base_list = bases.tolist()

            def encode_few(value, out):
                for base, v in zip(base_list, value.tolist() if type(value) is np.ndarray else value):
                    out[base + v] = 1.0

            return size, low, high, encode_few

        def encode_multi_discrete(value, out):
            out[bases + (value if flat else np.ravel(value))] = 1.0

        return size, low, high, encode_multi_discrete

    if isinstance(space, (spaces.Box, spaces.MultiBinary)):
        size = int(np.prod(space.shape))
        part = slice(offset, offset + size)
        if isinstance(space, spaces.Box):
            low = space.low.reshape(-1).astype(np.float32)
            high = space.high.reshape(-1).astype(np.float32)
        else:
            low, high = np.zeros(size, np.float32), np.ones(size, np.float32)
        if len(space.shape) == 1:

            def encode_vector(value, out):
                out[part] = value

            return size, low, high, encode_vector

        def encode_array(value, out):
            out[part] = np.ravel(value)

        return size, low, high, encode_array

    if isinstance(space, spaces.Tuple):
        sizes, lows, highs, encoders = [], [], [], []
        for sub in space.spaces:
            size, low, high, encode = _space_encoder(sub, offset + sum(sizes))
            sizes.append(size)
            lows.append(low)
            highs.append(high)
            encoders.append(encode)
        pairs = tuple(encoders)

        def encode_tuple(value, out):
            for encode, part in zip(pairs, value):
                encode(part, out)

        return sum(sizes), np.concatenate(lows), np.concatenate(highs), encode_tuple

    raise TypeError(
        f"cannot flatten a {type(space).__name__} space ({space}); "
        "supported: Discrete, MultiDiscrete, Box, MultiBinary and Tuples of them"
    )


# ---------------------------------------------------------------------------------------
# Checking actions cheaply (Space.contains costs several microseconds a call, as much as
# a whole step of the cheaper popgym tasks). Each checker returns the action to pass on
# or raises ValueError.


def _action_checker(space: spaces.Space) -> Callable[[Any], Any]:
    if isinstance(space, spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n)

        def check_discrete(action):
            if type(action) is not int and not isinstance(action, np.integer):
                if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
                    action = int(action)
                else:
                    raise ValueError(
                        f"action must be an integer in [{low}, {high - 1}], got {action!r} ({type(action).__name__})"
                    )
            if not low <= action < high:
                raise ValueError(f"action must be an integer in [{low}, {high - 1}], got {action!r}")
            return action

        return check_discrete

    if isinstance(space, spaces.MultiDiscrete):
        shape, lows = space.shape, space.start
        highs = space.start + space.nvec
        low_list, high_list = lows.reshape(-1).tolist(), highs.reshape(-1).tolist()
        small, flat = space.nvec.size <= _SMALL, space.nvec.ndim == 1

        def check_multi_discrete(action):
            array = action if type(action) is np.ndarray else np.asarray(action)
            if array.shape != shape or array.dtype.kind not in "iu":
                raise ValueError(
                    f"action must be an integer array of shape {shape} with values in "
                    f"[{lows.tolist()}, {(highs - 1).tolist()}], got {action!r}"
                )
            if small:
                for lo, v, hi in zip(low_list, array.tolist() if flat else array.ravel().tolist(), high_list):
                    if not lo <= v < hi:
                        break
                else:
                    return array
            elif ((array >= lows) & (array < highs)).all():
                return array
            raise ValueError(
                f"action values must lie in [{lows.tolist()}, {(highs - 1).tolist()}], got {array.tolist()}"
            )

        return check_multi_discrete

    if isinstance(space, spaces.Box):
        shape, lows, highs = space.shape, space.low, space.high
        low_list, high_list = lows.reshape(-1).tolist(), highs.reshape(-1).tolist()
        small, flat = lows.size <= _SMALL, len(shape) == 1

        def check_box(action):
            array = action if type(action) is np.ndarray else np.asarray(action)
            if array.shape != shape or array.dtype.kind not in "fiu":
                raise ValueError(f"action must be a numeric array of shape {shape} in {space}, got {action!r}")
            if small:  # NaN fails every comparison
                for lo, v, hi in zip(low_list, array.tolist() if flat else array.ravel().tolist(), high_list):
                    if not lo <= v <= hi:
                        break
                else:
                    return array
            elif ((array >= lows) & (array <= highs)).all():
                return array
            raise ValueError(f"action must lie in [{space.low}, {space.high}], got {array.tolist()}")

        return check_box

    def check_any(action):
        if not space.contains(action):
            raise ValueError(f"action must be in {space}, got {action!r}")
        return action

    return check_any


def _observation_encoder(
    size: int, encode_obs: Encoder, encode_action: Encoder | None
) -> Callable[[Any, Any], np.ndarray]:
    """``encode(obs, action) -> float32 [size]``; ``action=None`` (after reset) leaves its slot zero."""
    zeros, float32 = np.zeros, np.float32
    if encode_action is None:

        def encode(obs, action):
            out = zeros(size, float32)
            encode_obs(obs, out)
            return out

    else:

        def encode(obs, action):
            out = zeros(size, float32)
            encode_obs(obs, out)
            if action is not None:
                encode_action(action, out)
            return out

    return encode


def _copy_info(info: dict) -> dict:
    """A copy of an info dict sharing no mutable value with the original."""
    copied = info.copy()
    for key, value in info.items():
        if isinstance(value, np.ndarray):
            copied[key] = value.copy()
        elif isinstance(value, (list, dict, set)):
            copied[key] = copy.deepcopy(value)
    return copied


# ---------------------------------------------------------------------------------------


class PopGymEnv(gym.Env):
    """A popgym task with a flat float32 observation (see the module docstring).

    Args:
        env: a popgym class name (``"RepeatFirstEasy"``; any ``POPGymEnv`` subclass
            in ``popgym.envs``) or an already built popgym env (e.g.
            ``popgym.envs.RepeatPrevious(num_decks=2, k=8)`` for a custom setting).
        prev_action: append the previous action to the observation (zeros after reset).
        render_mode: must be ``None``.

    Observation: ``Box(low, high, (obs_size,), float32)``, ``obs_size`` = the flattened
    size of popgym's observation space (+ that of its action space with ``prev_action``).
    Actions: popgym's action space unchanged.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self, env: str | gym.Env = "RepeatFirstEasy", prev_action: bool = True, render_mode: str | None = None
    ):
        if render_mode is not None:
            raise ValueError(f"render_mode must be None (popgym tasks draw by printing), got {render_mode!r}")
        if not isinstance(prev_action, bool):
            raise ValueError(f"prev_action must be True or False, got {prev_action!r}")
        if isinstance(env, str):
            self.name = env
            env = _popgym_class(env)()
        elif isinstance(env, gym.Env):
            self.name = type(env).__name__
        else:
            raise TypeError(f"env must be a popgym class name or a popgym env, got {env!r} ({type(env).__name__})")
        self._env = env
        self.render_mode = None
        self.prev_action = prev_action
        self.action_space = env.action_space

        obs_size, low, high, encode_obs = _space_encoder(env.observation_space, 0)
        encode_action = None
        if prev_action:
            act_size, act_low, act_high, encode_action = _space_encoder(env.action_space, obs_size)
            low, high = np.concatenate([low, act_low]), np.concatenate([high, act_high])
            obs_size += act_size
        self.obs_size = obs_size
        self.observation_space = spaces.Box(low, high, (obs_size,), np.float32)
        self._encode = _observation_encoder(obs_size, encode_obs, encode_action)
        self._check_action = _action_checker(env.action_space)
        self._rewards: list[float] = []
        self._needs_reset = True

    # One random generator: the upstream env's (check_env inspects ``_np_random``).
    @property
    def _np_random(self) -> np.random.Generator | None:
        return self._env._np_random

    @_np_random.setter
    def _np_random(self, value: np.random.Generator | None) -> None:
        self._env._np_random = value

    @property
    def _np_random_seed(self) -> int | None:
        return self._env._np_random_seed

    @_np_random_seed.setter
    def _np_random_seed(self, value: int | None) -> None:
        self._env._np_random_seed = value

    @property
    def popgym_env(self) -> gym.Env:
        """The wrapped upstream popgym env."""
        return self._env

    @property
    def requires_prev_action(self) -> bool:
        """popgym's ``obs_requires_prev_action``: the task is unsolvable without the previous action."""
        return bool(getattr(self._env, "obs_requires_prev_action", False))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"seed must be None or a non-negative integer, got {seed!r}")
        obs, info = self._env.reset(seed=seed, options=options)
        self._rewards = []
        self._needs_reset = False
        return self._encode(obs, None), _copy_info(info)

    def step(self, action):
        if self._needs_reset:
            raise RuntimeError(f"{self.name}: call reset() before step() (first step or the episode has ended)")
        action = self._check_action(action)
        obs, reward, terminated, truncated, info = self._env.step(action)
        reward = float(reward)
        self._rewards.append(reward)
        info = _copy_info(info) if info else {}
        if terminated or truncated:
            self._needs_reset = True
            episode_return = math.fsum(self._rewards)
            info["episode_return"] = episode_return
            info["normalized_return"] = min(1.0, max(-1.0, episode_return))
            info["episode_length"] = len(self._rewards)
        return self._encode(obs, action), reward, bool(terminated), bool(truncated), info

    def render(self) -> None:
        return None

    def close(self) -> None:
        self._env.close()
