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
* **cost**: one class, no chain of wrappers. Where the observation and action
  spaces are small and discrete (all card games, the bandits, Battleship,
  MineSweeper) every possible encoded observation is built once and a step copies
  one of them; otherwise the previous action's row (or zeros) is copied and the
  observation written in. Adds about
  0.7-1.4 us a step (up to ~1.8 us on MineSweeper and Pendulum): under 10% only where
  popgym's own step costs ~5 us or more (``benchmarks/popgym_overhead.py``).

:func:`make` is ``gymnasium.make`` for a task name or id, with an error that lists
the valid names when it is unknown.

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
import difflib
import importlib.util
import itertools
import math
import numbers
import operator
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
            # popgym's tasks end their episodes themselves: no TimeLimit wrapper. PopGymEnv
            # itself refuses to step before reset, so no OrderEnforcing wrapper either.
            gym.register(id=env_id, entry_point=ENTRY_POINT, kwargs={"env": name}, order_enforce=False)
        ids.append(env_id)
    return ids


def make(name: str, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` of a wrapped popgym task, with a helpful error for unknown names.

    ``name`` is a popgym class name (``"RepeatFirstEasy"``) or a registered id
    (``"memgym/popgym-RepeatFirstEasy-v0"``); ``kwargs`` go to ``gymnasium.make``
    (e.g. ``prev_action=False``). An unknown name raises ``ValueError`` listing the
    task families, the difficulties and the closest valid names -- where
    ``gymnasium.make("memgym/popgym-Foo-v0")`` only says the id does not exist.
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


_NUMPY_INTEGERS = frozenset(
    (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.intc, np.uintc)
)


def _action_checker(space: spaces.Space) -> Callable[[Any], Any]:
    if isinstance(space, spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n)
        numpy_integers = _NUMPY_INTEGERS

        def check_discrete(action):
            # Returns the action itself for ints and numpy integers: popgym gets what the
            # caller passed (gymnasium's Discrete.contains, which CartPole asserts, is
            # slower on Python ints than on numpy ones). 0-d integer arrays become ints.
            kind = type(action)
            if kind is not int and kind not in numpy_integers:  # bool is not int here: True is rejected
                if isinstance(action, np.integer):
                    pass
                elif isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
                    action = int(action)
                else:
                    raise ValueError(
                        f"action must be an integer in [{low}, {high - 1}], got {action!r} ({kind.__name__})"
                    )
            if low <= action < high:
                return action
            raise ValueError(f"action must be an integer in [{low}, {high - 1}], got {action!r}")

        return check_discrete

    if isinstance(space, spaces.MultiDiscrete):
        shape, lows = space.shape, space.start
        highs = space.start + space.nvec
        low_list, high_list = lows.reshape(-1).tolist(), highs.reshape(-1).tolist()
        small, flat = space.nvec.size <= _SMALL, space.nvec.ndim == 1
        asarray, ndarray = np.asarray, np.ndarray

        if shape == (2,):  # Battleship, MineSweeper: unrolled
            (low_0, low_1), (high_0, high_1) = low_list, high_list

            def check_pair(action):
                array = action if type(action) is ndarray else asarray(action)
                if array.shape != shape or array.dtype.kind not in "iu":
                    raise ValueError(
                        f"action must be an integer array of shape {shape} with values in "
                        f"[{lows.tolist()}, {(highs - 1).tolist()}], got {action!r}"
                    )
                first, second = array.tolist()
                if low_0 <= first < high_0 and low_1 <= second < high_1:
                    return array
                raise ValueError(
                    f"action values must lie in [{lows.tolist()}, {(highs - 1).tolist()}], got {array.tolist()}"
                )

            return check_pair

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


# ---------------------------------------------------------------------------------------
# Encoding observations. Every step must return a new array (check_env rejects
# observations that share memory), so the least a step can cost is one allocation. Where
# the observation and the action space are small and all discrete (the card games,
# bandits, Battleship, MineSweeper: a few dozen to a few hundred combinations) every
# possible output row is encoded once, up front, with the encoders above, and a step costs
# one list lookup and one ``ndarray.copy``. Otherwise the row of the previous action (if
# the action space is small and discrete) or zeros is copied and the observation written in.

_TABLE_ROWS = 4096  # at most this many precomputed rows per table ...
_TABLE_FLOATS = 1 << 18  # ... and at most this many float32 values in them (1 MiB)

Coder = Callable[[Any], int]


def _enumeration(space: spaces.Space, limit: int) -> tuple[list, Coder | None] | None:
    """The values of a small all-discrete space and their codes.

    Returns ``(values, code)``: ``values[code(v)] == v`` for every ``v`` in the space, in
    mixed-radix order (last component fastest); ``code`` is None when a value is its own
    code (``Discrete`` starting at 0). None when the space is not all-discrete (Discrete,
    1-D MultiDiscrete, Tuples of them) or has more than ``limit`` values.
    """
    if isinstance(space, spaces.Discrete):
        n, start = int(space.n), int(space.start)
        if n > limit:
            return None
        values = [start + i for i in range(n)]
        return values, (None if start == 0 else (lambda value: value - start))

    if isinstance(space, spaces.MultiDiscrete) and space.nvec.ndim == 1:
        sizes, starts = space.nvec.astype(np.int64).tolist(), space.start.astype(np.int64).tolist()
        if math.prod(sizes) > limit:
            return None
        values = [
            np.array(combo, dtype=space.dtype)
            for combo in itertools.product(*(range(s, s + n) for s, n in zip(starts, sizes)))
        ]
        return values, _mixed_radix(sizes, starts, arrays=True)

    if isinstance(space, spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part = _enumeration(sub, limit)
            if part is None:
                return None
            parts.append(part)
        if math.prod(len(values) for values, _ in parts) > limit:
            return None
        values = [tuple(combo) for combo in itertools.product(*(values for values, _ in parts))]
        if all(isinstance(sub, spaces.Discrete) for sub in space.spaces):
            starts = [int(sub.start) for sub in space.spaces]
            return values, _mixed_radix([len(values) for values, _ in parts], starts, arrays=False)
        radix_codes = tuple((len(values), code) for values, code in parts)

        def code_tuple(value):
            code = 0
            for (n, sub_code), v in zip(radix_codes, value):
                code = code * n + (v if sub_code is None else sub_code(v))
            return code

        return values, code_tuple

    return None


def _mixed_radix(sizes: list[int], starts: list[int], arrays: bool) -> Coder:
    """``code(value)`` of a sequence of integers, component ``i`` in ``[starts[i], starts[i] + sizes[i])``:
    mixed radix, last component fastest. ``arrays``: values are numpy arrays (else tuples)."""
    multipliers = [math.prod(sizes[i + 1 :]) for i in range(len(sizes))]
    offset = sum(s * m for s, m in zip(starts, multipliers))
    asarray, ndarray = np.asarray, np.ndarray
    if len(sizes) == 2:  # Battleship, MineSweeper actions, Autoencode and CountRecall observations
        second = sizes[1]
        if arrays:

            def code_pair_array(value):
                first, last = value.tolist() if type(value) is ndarray else asarray(value).tolist()
                return first * second + last - offset

            return code_pair_array

        def code_pair(value):
            first, last = value
            return first * second + last - offset

        return code_pair
    mul = operator.mul
    if arrays:

        def code_array(value):
            components = value.tolist() if type(value) is ndarray else asarray(value).tolist()
            return sum(map(mul, components, multipliers)) - offset

        return code_array

    def code_sequence(value):
        return sum(map(mul, value, multipliers)) - offset

    return code_sequence


def _rows(size: int, pairs: list[tuple[Encoder, Any]], count: int) -> list[np.ndarray]:
    """``count`` read-only float32 rows; row ``i`` = zeros with ``encode(value)`` for each ``(encode, values)``."""
    rows = []
    for i in range(count):
        row = np.zeros(size, np.float32)
        for encode, value in pairs[i]:
            encode(value, row)
        row.flags.writeable = False
        rows.append(row)
    return rows


def _observation_encoders(
    obs_space: spaces.Space, action_space: spaces.Space | None
) -> tuple[int, np.ndarray, np.ndarray, Callable[[Any], np.ndarray], Callable[[Any, Any], np.ndarray], str]:
    """Encoders of the flat observation ``[observation | previous action]``.

    ``action_space=None`` leaves the previous action out. Returns ``(size, low, high,
    encode_reset, encode_step, kind)``: ``encode_reset(obs)`` (previous-action slot zero),
    ``encode_step(obs, action)`` (``action`` as the action checker returns it), each a new
    float32 array, and ``kind`` naming the strategy (``"table"``, ``"action table"`` or
    ``"zeros"``).
    """
    size, low, high, encode_obs = _space_encoder(obs_space, 0)
    encode_action = None
    if action_space is not None:
        act_size, act_low, act_high, encode_action = _space_encoder(action_space, size)
        low, high = np.concatenate([low, act_low]), np.concatenate([high, act_high])
        size += act_size
    limit = max(1, min(_TABLE_ROWS, _TABLE_FLOATS // max(size, 1)))
    zeros, float32 = np.zeros, np.float32

    # Without a previous-action slot, ``encode_step(obs, action)`` is ``encode_reset``
    # (which ignores its second argument): one call, no wrapper around it.
    obs_enum = _enumeration(obs_space, limit)
    act_enum = None if action_space is None else _enumeration(action_space, limit)

    if obs_enum is not None:
        obs_values, obs_code = obs_enum
        reset_rows = _rows(size, [[(encode_obs, value)] for value in obs_values], len(obs_values))
        if obs_code is None:

            def encode_reset_table(obs, action=None):
                return reset_rows[obs].copy()

        else:

            def encode_reset_table(obs, action=None):
                return reset_rows[obs_code(obs)].copy()

        if action_space is None:
            return size, low, high, encode_reset_table, encode_reset_table, "table"
        if act_enum is not None and len(obs_values) * len(act_enum[0]) <= limit:
            act_values, act_code = act_enum
            n_act = len(act_values)
            pairs = [[(encode_obs, o), (encode_action, a)] for o in obs_values for a in act_values]
            step_rows = _rows(size, pairs, len(pairs))
            if obs_code is None and act_code is None:

                def encode_step_table(obs, action):
                    return step_rows[obs * n_act + action].copy()

            else:

                def encode_step_table(obs, action):
                    i = obs if obs_code is None else obs_code(obs)
                    return step_rows[i * n_act + (action if act_code is None else act_code(action))].copy()

            return size, low, high, encode_reset_table, encode_step_table, "table"

    if obs_enum is not None:
        encode_reset = encode_reset_table
    else:

        def encode_reset(obs, action=None):
            out = zeros(size, float32)
            encode_obs(obs, out)
            return out

    if action_space is None:
        return size, low, high, encode_reset, encode_reset, "zeros"

    if act_enum is not None:
        act_values, act_code = act_enum
        action_rows = _rows(size, [[(encode_action, a)] for a in act_values], len(act_values))

        def encode_step_action_table(obs, action):
            out = action_rows[action if act_code is None else act_code(action)].copy()
            encode_obs(obs, out)
            return out

        return size, low, high, encode_reset, encode_step_action_table, "action table"

    def encode_step(obs, action):
        out = zeros(size, float32)
        encode_obs(obs, out)
        encode_action(action, out)
        return out

    return size, low, high, encode_reset, encode_step, "zeros"


def _copy_info(info: dict) -> dict:
    """A copy of an info dict sharing no mutable value with the original."""
    copied = info.copy()
    for key, value in info.items():
        if type(value) is np.ndarray or isinstance(value, np.ndarray):
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

        obs_size, low, high, self._encode_reset, self._encode_step, self._encoding = _observation_encoders(
            env.observation_space, env.action_space if prev_action else None
        )
        self.obs_size = obs_size
        self.observation_space = spaces.Box(low, high, (obs_size,), np.float32)
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
        return self._encode_reset(obs), _copy_info(info)

    def step(self, action):
        # The hot path: every attribute lookup and call here costs a few percent of the
        # cheapest popgym steps (~1.5 us), so the work is done by closures built in __init__.
        if self._needs_reset:
            raise RuntimeError(f"{self.name}: call reset() before step() (first step or the episode has ended)")
        action = self._check_action(action)
        obs, reward, terminated, truncated, info = self._env.step(action)
        reward = float(reward)
        rewards = self._rewards
        rewards.append(reward)
        info = _copy_info(info) if info else {}
        if terminated or truncated:
            self._needs_reset = True
            episode_return = math.fsum(rewards)
            info["episode_return"] = episode_return
            info["normalized_return"] = min(1.0, max(-1.0, episode_return))
            info["episode_length"] = len(rewards)
        return self._encode_step(obs, action), reward, bool(terminated), bool(truncated), info

    def render(self) -> None:
        return None

    def close(self) -> None:
        self._env.close()
