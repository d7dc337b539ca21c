"""POPGym tasks (``popgym==1.0.7``) as Gymnasium envs with one flat observation format.

POPGym (Morad et al., "POPGym: Benchmarking Partially Observable Reinforcement
Learning", ICLR 2023) is a suite of partially observable tasks in three
difficulties each. :class:`PopGymEnv` composes small wrappers around an upstream
task: gymnasium's ``FlattenObservation`` and ``DtypeObservation`` (one float32
vector, one-hot for discrete parts), :class:`AppendPreviousAction` (as POPGym's
baselines feed the previous action; zeros after reset) and :class:`EpisodeReturn`
(``info["episode_return"]`` / ``"normalized_return"`` / ``"episode_length"``);
the outer layer checks actions and seeds and refuses to step a finished episode.
Ids: ``memgym/popgym-<ClassName>-v0``. Returns per task, upstream quirks and the
wrapper's cost: ``docs/popgym_overhead.md``.
"""

from __future__ import annotations

import copy
import difflib
import importlib.util
import math
import operator
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.wrappers import DtypeObservation, FlattenObservation

from memgym.validation import check_choice, check_flag, check_int

__all__ = [
    "DIFFICULTIES",
    "LABYRINTH_TASKS",
    "POPGYM_TASKS",
    "UNWRAPPABLE",
    "AppendPreviousAction",
    "EpisodeReturn",
    "PopGymEnv",
    "make",
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
            # popgym's tasks end their episodes themselves: no TimeLimit. PopGymEnv refuses
            # to step before reset or after the end, so no OrderEnforcing either.
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env": name}, order_enforce=False)
        ids.append(env_id)
    return ids


def make(name: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` of a wrapped popgym task, with a helpful error for unknown names.

    ``name`` is a popgym class name (``"RepeatFirstEasy"``) or a registered id
    (``"memgym/popgym-RepeatFirstEasy-v0"``); ``kwargs`` go to ``gymnasium.make``
    (e.g. ``prev_action=False``). An unknown name raises ``ValueError`` listing the
    task families, the difficulties and the closest valid names.
    """
    task = name
    prefix, suffix = popgym_env_id("|").split("|")
    if task.startswith(prefix) and task.endswith(suffix):
        task = task[len(prefix) : -len(suffix)]
    known = popgym_env_names()
    if task not in known:
        if task in {family + level for family in LABYRINTH_TASKS for level in DIFFICULTIES}:
            _popgym_class(task)  # raises the ImportError naming what is missing (mazelib)
        families = [family for family in POPGYM_TASKS + LABYRINTH_TASKS if family + DIFFICULTIES[0] in known]
        if task in families:
            hints = [task + level for level in DIFFICULTIES]
        else:
            hints = difflib.get_close_matches(task, known, n=3, cutoff=0.5)
        raise ValueError(
            f"unknown popgym task {name!r}"
            + (f"; did you mean {' / '.join(repr(hint) for hint in hints)}?" if hints else ".")
            + f" A task name is a family followed by a difficulty ({', '.join(DIFFICULTIES)}), "
            + f"registered as {popgym_env_id('<Name>')}; families: {', '.join(families)}"
        )
    if not register_popgym_envs():
        _popgym_class(task)  # raises the ImportError naming the extra
    return gym.make(popgym_env_id(task), **kwargs)


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
        f"env must be a popgym env class name such as 'RepeatFirstEasy', got env={name!r}; "
        f"known: {', '.join(popgym_env_names())}"
    )


# ---------------------------------------------------------------------------------------
# The wrappers


class AppendPreviousAction(gym.Wrapper):
    """Appends the previous action, flattened (``gymnasium.spaces.flatten``: one-hot for
    discrete actions), to a flat float32 observation; all zeros after ``reset``, so "no
    action yet" differs from action 0. Layout: ``[observation | previous action]``."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        obs, act = env.observation_space, spaces.flatten_space(env.action_space)
        if not (isinstance(obs, spaces.Box) and len(obs.shape) == 1):
            raise TypeError(f"AppendPreviousAction needs a flat Box observation space, got {obs}")
        low = np.concatenate([obs.low, np.minimum(act.low, 0)]).astype(np.float32)  # zeros are allowed
        high = np.concatenate([obs.high, np.maximum(act.high, 0)]).astype(np.float32)
        self.observation_space = spaces.Box(low, high, dtype=np.float32)
        self._no_action = np.zeros(act.shape, np.float32)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return np.concatenate([obs, self._no_action]), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        flat = spaces.flatten(self.env.action_space, action)
        return np.concatenate([obs, flat], dtype=np.float32), reward, terminated, truncated, info


class EpisodeReturn(gym.Wrapper):
    """Adds the episode's statistics to the info of the step that ends it:
    ``episode_return`` (``math.fsum`` of the rewards, so 51 rewards of ``1/51`` sum to
    exactly 1.0), ``normalized_return`` (the same clipped to [-1, 1]: POPGym scales every
    task's rewards so that a return lies there, Morad et al. 2023) and ``episode_length``
    (the steps this wrapper saw). Rewards become ``float``, the end flags
    ``bool``; info dicts are copied, arrays included (popgym's CountRecall and
    MultiarmedBandit hand the same objects to ``reset`` and ``step``, which
    ``check_env`` rejects)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self._rewards: list[float] = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._rewards = []
        return obs, _copy_info(info)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        reward = float(reward)
        self._rewards.append(reward)
        info = _copy_info(info)
        if terminated or truncated:
            episode_return = math.fsum(self._rewards)
            info.update(episode_return=episode_return, normalized_return=min(1.0, max(-1.0, episode_return)),
                        episode_length=len(self._rewards))
        return obs, reward, bool(terminated), bool(truncated), info


def _copy_info(info: dict) -> dict:
    """A copy of an info dict sharing no mutable value with the original."""
    return {key: value.copy() if isinstance(value, np.ndarray) else
            copy.deepcopy(value) if isinstance(value, (list, dict, set)) else value
            for key, value in info.items()}


class PopGymEnv(gym.Wrapper):
    """A popgym task with a flat float32 observation (see the module docstring).

    Args:
        env: a popgym class name (``"RepeatFirstEasy"``; any ``POPGymEnv`` subclass
            in ``popgym.envs``) or an already built popgym env (e.g.
            ``popgym.envs.RepeatPrevious(num_decks=2, k=8)`` for a custom setting).
        prev_action: append the previous action to the observation (zeros after reset).
        render_mode: must be ``None`` (the popgym classes draw by printing).

    Observation: ``Box(low, high, (n,), float32)``, ``n`` = the flattened size of popgym's
    observation space (+ that of its action space with ``prev_action``). Actions: popgym's
    action space, checked before they reach popgym (which checks none). Seeding: the
    upstream env's generator is the only one (``reset(seed=s)`` seeds it as the upstream
    env would be seeded). ``unwrapped`` is the upstream env.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, env: str | gym.Env = "RepeatFirstEasy", prev_action: bool = True,
                 render_mode: str | None = None):
        check_choice("render_mode", render_mode, (None,))
        check_flag(prev_action=prev_action)
        if isinstance(env, str):
            name, env = env, _popgym_class(env)()
        elif isinstance(env, gym.Env):
            name = type(env).__name__
        else:
            raise TypeError(f"env must be a popgym class name or a popgym env, got env={env!r} ({type(env).__name__})")
        # memgym's registered task renders nothing: the upstream env (``unwrapped``, what Gymnasium's check_env
        # is given) declares no render mode either, on this instance only (popgym's class is left as it is)
        env.metadata = {**env.metadata, "render_modes": []}
        flat: gym.Env = DtypeObservation(FlattenObservation(env), np.float32)
        if prev_action:
            flat = AppendPreviousAction(flat)
        super().__init__(EpisodeReturn(flat))
        self.name, self.prev_action = name, bool(prev_action)
        self._check_action = _action_check(env.action_space)
        self._needs_reset = True

    @property
    def popgym_env(self) -> gym.Env:
        """The wrapped upstream popgym env (``unwrapped``)."""
        return self.unwrapped

    @property
    def requires_prev_action(self) -> bool:
        """popgym's ``obs_requires_prev_action``: the task is unsolvable without the previous action."""
        return bool(getattr(self.unwrapped, "obs_requires_prev_action", False))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if seed is not None:
            seed = check_int("seed", seed, low=0, why="or None")
        obs, info = self.env.reset(seed=seed, options=options)
        self._needs_reset = False
        return obs, info

    def step(self, action):
        if self._needs_reset:
            raise RuntimeError(f"{self.name}: call reset() before step() (first step or the episode has ended)")
        obs, reward, terminated, truncated, info = self.env.step(self._check_action(action))
        self._needs_reset = terminated or truncated
        return obs, reward, terminated, truncated, info

    def render(self) -> None:
        return None


def _action_check(space: spaces.Space) -> Callable[[Any], Any]:
    """``check(action)``: the action as popgym gets it, or ``ValueError`` naming it and the
    allowed values (popgym checks none, and would score or index with an invalid discrete
    action silently). ``bool`` is not an integer here; an integer 0-d array is one. The
    bounds are read once: ``Space.contains`` costs more than a cheap popgym step."""
    if isinstance(space, spaces.Discrete):
        first, last = int(space.start), int(space.start + space.n - 1)

        def check_discrete(action):
            if isinstance(action, np.ndarray) and action.shape == ():
                action = action[()]
            return check_int("action", action, first, last)

        return check_discrete

    if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)):
        if isinstance(space, spaces.Box):
            kinds, what, low, high = "fiu", "numbers", space.low, space.high
        elif isinstance(space, spaces.MultiDiscrete):
            kinds, what, low, high = "iu", "integers", space.start, space.start + space.nvec - 1
        else:
            kinds, what, low, high = "biu", "0s and 1s", np.zeros(space.shape, int), np.ones(space.shape, int)
        shape, lows, highs = space.shape, low.ravel().tolist(), high.ravel().tolist()
        allowed = f"an array of shape {shape} of {what} from {low.tolist()} to {high.tolist()}"

        def check_array(action):
            array = np.asarray(action)
            if array.dtype.kind in kinds and array.shape == shape:
                values = array.ravel().tolist()  # NaN fails both comparisons
                if all(map(operator.le, lows, values)) and all(map(operator.le, values, highs)):
                    return array
            raise ValueError(f"action must be {allowed}, got action={action!r}")

        return check_array

    def check_any(action):
        if space.contains(action):
            return action
        raise ValueError(f"action must be in {space}, got action={action!r}")

    return check_any
