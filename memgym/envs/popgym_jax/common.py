"""What every POPGym task in JAX shares: memgym's observation format and the episode's return.

memgym's Gymnasium wrapper of a popgym task (:class:`memgym.envs.popgym.PopGymEnv`) gives
one flat float32 observation (gymnasium's ``FlattenObservation`` + ``DtypeObservation``:
a one-hot block per discrete part, Box parts as they are), the previous action appended
(``AppendPreviousAction``: one-hot for a ``Discrete`` action, zeros after a reset) and, at
an episode's end, ``info["episode_return"]``, ``info["normalized_return"]`` (the return
clipped to [-1, 1]) and ``info["episode_length"]`` (``EpisodeReturn``). :class:`PopGymJaxEnv`
is a gymnax ``Environment`` that does all of that around a task, so a JAX task only writes
its own rules and its agents see exactly the observations of the Gymnasium version.

Writing a task
--------------
Subclass :class:`PopGymJaxEnv` and write five methods; the task's own state is any pytree
(usually a ``flax.struct`` dataclass) kept in ``state.task`` of a :class:`PopGymState`:

``init_task(key, params) -> task``
    the task's state at the start of an episode (e.g. a shuffled deck).
``transition(key, state, action, params) -> (task, reward, terminated, truncated)``
    one step from the full :class:`PopGymState` ``state`` (``state.time`` is the number of
    steps taken so far this episode, ``state.task`` the task's state): the task's next state,
    the reward (float32: popgym's float64 reward rounded once, e.g. ``np.float32(1 / 51)``
    computed in Python; a quotient of traced integers through :func:`rounded_ratio`, as XLA may
    divide by a vmap-shared or constant divisor through its reciprocal, an ulp off), and popgym's
    two end flags (both may be True together).
``observe_task(state, params) -> jax.Array``
    the task's part of the observation, flat float32 in ``FlattenObservation``'s layout
    (:func:`one_hot` / :func:`flat_discrete` build it), from the *new* state: ``state.time``
    has already been incremented. A task whose observation is random beyond its state
    (observation noise) keeps the drawn reading in its state.
``task_observation_bounds(params) -> (low, high)``
    NumPy float32 bounds of that part, as ``gymnasium.spaces.flatten_space`` gives them.
``action_space(params)``
    a gymnax ``spaces.Discrete`` (previous action appended one-hot), a
    :class:`memgym.envs.functional.MultiDiscrete` (one one-hot block per entry) or a ``spaces.Box``
    (appended as it is, flattened), as in memgym's ``AppendPreviousAction``.

and, optionally, ``next_task(key, state, params) -> task``: the task state of the episode that
gymnax's auto-reset starts after the finished ``state`` (default: ``init_task(key, params)``). Under
``vmap`` an auto-reset is computed at every step for every environment, so a task whose reset is
costly (a deck shuffled by sorting) can prepare the next episode during the current one (the card
tasks shuffle the next deck one swap per step) and hand it over here. A leaf ``next_task`` returns
unchanged (the very same array as in ``state.task``) is carried over without a ``select``, so a
big array kept across episodes costs nothing at an auto-reset.

Give ``name`` (popgym's class name, e.g. ``"RepeatFirstEasy"``) and ``default_params``
(a :class:`PopGymParams`, or a subclass of it holding the task's traced parameters;
``max_steps_in_episode`` is popgym's longest episode, for information: the end of an
episode is whatever ``transition`` says). Everything must be jittable with static shapes;
whatever changes a shape (the number of decks) is a constructor argument.

What the base class gives
-------------------------
``reset_env`` / ``step_env`` / gymnax's auto-resetting ``step`` (the new episode from
``next_task``; ``info["final_observation"]`` as gymnax gives it; through
:mod:`memgym.envs.gymnax_compat`: six values under gymnax 1.0, five under 0.0.9), the
observation ``[task part | previous action]`` (:meth:`PopGymJaxEnv.get_obs`; the previous
action is kept in ``state.prev_action`` so the observation is a function of the state),
``observation_space`` (float32 Box, bounds as memgym's wrapper gives them), ``num_actions``,
``is_terminated`` / ``is_truncated`` (the flags of the last transition, kept in the state) and,
in *every* step's ``info``:

* ``episode_return``: the rewards of the episode so far, this step's included (at the step
  that ends an episode: the finished episode's return), from :meth:`PopGymJaxEnv.episode_return`.
  By default that is a compensated float32 sum (TwoSum; the rounding error of each addition is
  carried along), the float32 rounding of the exact sum of the float32 rewards: it differs from
  the ``math.fsum`` of popgym's float64 rewards that ``EpisodeReturn`` computes by at most
  ``2**-24 * (sum(|reward|) + |return|)`` (each reward rounded once to float32, the sum rounded
  once; the compensated sum's own error, ``(n * 2**-24)**2 * sum(|reward|)`` for ``n`` steps, is
  far below that), about one float32 ulp at 1. A task whose rewards are integer multiples of
  ``1 / d`` overrides ``episode_return(state, params)`` with ``rounded_ratio(units, d)``
  (:func:`rounded_ratio`), which is popgym's score rounded to float32, to the bit;
* ``normalized_return``: ``episode_return`` clipped to [-1, 1], as ``EpisodeReturn`` does;
* ``episode_length``: the steps of the episode so far (int32), this one included.

Read them where ``terminated | truncated``. ``prev_action=False`` leaves the previous action
out, as ``PopGymEnv(prev_action=False)`` does. :meth:`PopGymJaxEnv.initial_state` wraps a task
state into a fresh episode's :class:`PopGymState` (what a parity test's ``from_popgym`` needs).

Actions are not checked (they cannot be inside ``jit``): an integer outside a ``Discrete``
space gives an all-zero previous-action block and whatever the task makes of it, where memgym's
Gymnasium wrapper raises ``ValueError``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import environment, spaces

from memgym.envs import gymnax_compat
from memgym.envs.functional import MultiDiscrete
from memgym.validation import check_flag, check_int, check_real

__all__ = [
    "ControlParams",
    "ControlTask",
    "PopGymJaxEnv",
    "PopGymParams",
    "PopGymState",
    "ScoredTask",
    "compensated_add",
    "flat_discrete",
    "one_hot",
    "physics_dtype",
    "rounded_ratio",
    "unfused",
]


@struct.dataclass
class PopGymParams(environment.EnvParams):
    """Params of a POPGym task (a gymnax ``EnvParams``): ``max_steps_in_episode`` is popgym's
    longest episode, for information only (the task's own rules end an episode). Tasks with
    traced parameters subclass it."""

    max_steps_in_episode: Any = 1


@struct.dataclass
class PopGymState(environment.EnvState):
    """A POPGym task's gymnax state.

    ``time``: steps taken this episode (int32); ``task``: the task's own state (a pytree);
    ``prev_action``: the flattened previous action (float32; zeros after a reset);
    ``episode_return`` + ``return_error``: the running return as a float32 sum and the
    rounding error it has dropped so far (the compensated sum of :func:`compensated_add`);
    ``terminated`` / ``truncated``: the end flags of the last transition (False after a reset).
    """

    time: jax.Array
    task: Any
    prev_action: jax.Array
    episode_return: jax.Array
    return_error: jax.Array
    terminated: jax.Array
    truncated: jax.Array


def one_hot(index: Any, n: int) -> jax.Array:
    """``index`` (an integer, or an integer array for several parts) as float32 one-hot vectors of
    length ``n``, concatenated (gymnasium's flattening of ``Discrete(n)``); an index outside
    ``[0, n)`` gives zeros."""
    index = jnp.asarray(index, jnp.int32)
    return (index[..., None] == jnp.arange(n, dtype=jnp.int32)).astype(jnp.float32).reshape(-1)


def flat_discrete(indices: Any, sizes: Any) -> jax.Array:
    """The flattening of ``MultiDiscrete(sizes)`` (or of a ``Tuple`` of ``Discrete`` spaces):
    one one-hot block per entry of ``indices``, of length ``sizes[i]``, concatenated (float32).
    ``sizes`` is static (a sequence of ints)."""
    sizes = [int(size) for size in sizes]
    indices = jnp.asarray(indices, jnp.int32).reshape(-1)
    if indices.shape[0] != len(sizes):
        raise ValueError(f"indices must hold one entry per size, got {indices.shape[0]} indices for sizes={sizes}")
    if len(set(sizes)) == 1:
        return one_hot(indices, sizes[0])
    return jnp.concatenate([one_hot(indices[i], size) for i, size in enumerate(sizes)])


def compensated_add(total: jax.Array, error: jax.Array, value: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One step of a compensated float32 sum: ``(total, error)`` after adding ``value``.

    Knuth's TwoSum gives the exact rounding error of ``total + value`` without a branch; it is
    accumulated in ``error``, and ``total + error`` is the sum to (almost) twice float32's
    precision. Rounded once at the end, a sum of thousands of rewards of ``1/N`` is the float32
    rounding of the exact sum (as ``math.fsum`` is in float64)."""
    new_total = total + value
    value_part = new_total - total
    total_part = new_total - value_part
    rounding_error = (total - total_part) + (value - value_part)
    return new_total, error + rounding_error


def _select(done: jax.Array, fresh: jax.Array, going_on: jax.Array) -> jax.Array:
    """``fresh`` where ``done``, else ``going_on``; nothing to compute where ``next_task`` kept the very array."""
    return going_on if fresh is going_on else jax.lax.select(done, fresh, going_on)


#: mantissa bits of a float32, the leading one included
_FLOAT32_BITS = 24


def rounded_ratio(numerator: Any, denominator: Any) -> jax.Array:
    """``numerator / denominator`` of two integers, rounded once to the nearest float32 (ties to even),
    for ``|numerator| < 2**24`` and ``1 <= denominator < 2**24`` (int32 arrays broadcast together).

    Computed by integer long division, so no compiler rewrite can move it by an ulp (XLA turns a float32
    division by a constant, or by a scalar shared across a ``vmap``, into a multiplication by the
    reciprocal). For such integers it equals NumPy's ``float32(n / d)`` and the float32 rounding of a
    ``math.fsum`` of ``n`` float64 rewards ``1 / d``: the exact quotient is never within a float64 ulp
    of a float32 rounding boundary. A task whose rewards are integer multiples of ``1 / d`` gives its
    exact score as ``rounded_ratio(units, d)`` (see :meth:`PopGymJaxEnv.episode_return`)."""
    numerator = jnp.asarray(numerator, jnp.int32)
    denominator = jnp.asarray(denominator, jnp.int32)
    size = jnp.abs(numerator)
    nonzero = size > 0
    size = jnp.where(nonzero, size, 1)
    # scale so that divisor <= dividend < 2 * divisor: the quotient's leading bit is the first one out
    shift = jax.lax.clz(size) - jax.lax.clz(denominator)
    shift = shift + (_shifted(size, shift) < _shifted(denominator, -shift)).astype(jnp.int32)
    remainder, divisor = _shifted(size, shift), _shifted(denominator, -shift)
    mantissa = jnp.zeros_like(remainder)
    for _ in range(_FLOAT32_BITS):
        bit = remainder >= divisor
        mantissa = 2 * mantissa + bit.astype(jnp.int32)
        remainder = 2 * (remainder - jnp.where(bit, divisor, 0))
    # remainder is now twice what is left: above the divisor rounds up, equal to it is a tie
    up = (remainder > divisor) | ((remainder == divisor) & (mantissa % 2 == 1))
    mantissa = mantissa + up.astype(jnp.int32)  # may reach 2**24: still exact in float32
    value = jnp.ldexp(mantissa.astype(jnp.float32), -(_FLOAT32_BITS - 1) - shift)
    return jnp.where(nonzero, jnp.where(numerator < 0, -value, value), jnp.float32(0.0))


def _shifted(value: jax.Array, shift: jax.Array) -> jax.Array:
    """``value * 2**shift`` for ``shift >= 0``, else ``value`` (int32)."""
    return jnp.where(shift > 0, value << jnp.maximum(shift, 0), value)


class PopGymJaxEnv(environment.Environment[PopGymState, PopGymParams]):
    """Base class of memgym's POPGym tasks in JAX (see the module docstring for what a task writes).

    Args:
        prev_action: append the previous action to the observation (zeros after a reset), as
            memgym's ``PopGymEnv(prev_action=True)`` (the default) does.
    """

    def __init__(self, prev_action: bool = True):
        check_flag(prev_action=prev_action)
        self.prev_action = bool(prev_action)

    # --- what a task writes -------------------------------------------------------------------

    def init_task(self, key: jax.Array, params: PopGymParams) -> Any:
        """The task's state at the start of an episode."""
        raise NotImplementedError

    def transition(self, key: jax.Array, state: PopGymState, action: jax.Array,
                   params: PopGymParams) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
        """One step: ``(task state, reward, terminated, truncated)`` from ``state`` (before the step)."""
        raise NotImplementedError

    def observe_task(self, state: PopGymState, params: PopGymParams) -> jax.Array:
        """The task's flat float32 observation of ``state`` (``state.time`` already counts the step)."""
        raise NotImplementedError

    def task_observation_bounds(self, params: PopGymParams) -> tuple[np.ndarray, np.ndarray]:
        """``(low, high)``: float32 bounds of the task's part of the observation."""
        raise NotImplementedError

    def next_task(self, key: jax.Array, state: PopGymState, params: PopGymParams) -> Any:
        """The task state of the episode the auto-reset starts after ``state`` (default: a fresh ``init_task``)."""
        return self.init_task(key, params)

    # --- the previous action ------------------------------------------------------------------

    def _action_layout(self, params: PopGymParams) -> tuple[int, np.ndarray, np.ndarray]:
        """``(size, low, high)`` of the flattened action (the appended block; size 0 without it)."""
        if not self.prev_action:
            return 0, np.zeros(0, np.float32), np.zeros(0, np.float32)
        space = self.action_space(params)
        if isinstance(space, spaces.Discrete):
            return int(space.n), np.zeros(space.n, np.float32), np.ones(space.n, np.float32)
        if isinstance(space, spaces.Box):
            size = int(np.prod(space.shape))
            low = np.broadcast_to(np.asarray(space.low, np.float32), space.shape).reshape(-1)
            high = np.broadcast_to(np.asarray(space.high, np.float32), space.shape).reshape(-1)
            return size, np.minimum(low, 0).astype(np.float32), np.maximum(high, 0).astype(np.float32)
        if isinstance(space, MultiDiscrete):
            size = int(space.nvec.sum())
            return size, np.zeros(size, np.float32), np.ones(size, np.float32)
        raise TypeError(f"{type(self).__name__}: the previous action can be appended for a Discrete, MultiDiscrete "
                        f"or Box action space, got {space!r}")

    def flatten_action(self, action: Any, params: PopGymParams) -> jax.Array:
        """The action as ``AppendPreviousAction`` appends it: one-hot (``Discrete``), one one-hot block per entry
        (``MultiDiscrete``) or flat float32 (``Box``)."""
        space = self.action_space(params)
        if isinstance(space, spaces.Discrete):
            return one_hot(action, space.n)
        if isinstance(space, MultiDiscrete):
            return flat_discrete(action, space.nvec.tolist())
        return jnp.asarray(action, jnp.float32).reshape(-1)

    # --- the environment ----------------------------------------------------------------------

    @property
    def default_params(self) -> PopGymParams:
        raise NotImplementedError

    @property
    def num_actions(self) -> int:
        """``n`` of a ``Discrete`` action space, the number of action vectors (``prod(nvec)``) of a
        ``MultiDiscrete`` one, the size of a ``Box`` one."""
        space = self.action_space(self.default_params)
        if isinstance(space, spaces.Discrete):
            return int(space.n)
        if isinstance(space, MultiDiscrete):
            return int(np.prod(space.nvec))
        return int(np.prod(space.shape))

    def observation_space(self, params: PopGymParams) -> spaces.Box:
        """Float32 Box of ``[task part | previous action]`` with memgym's wrapper's bounds."""
        low, high = self.task_observation_bounds(params)
        _, action_low, action_high = self._action_layout(params)
        low = np.concatenate([np.asarray(low, np.float32), action_low])
        high = np.concatenate([np.asarray(high, np.float32), action_high])
        # NumPy bounds: under a trace (a trainer asks for the space inside jit), jnp.asarray would make them tracers
        return spaces.Box(low, high, (low.shape[0],), jnp.float32)

    def initial_state(self, task: Any, params: PopGymParams) -> PopGymState:
        """A fresh episode's state around the task state ``task`` (no step taken, no previous action)."""
        size, _, _ = self._action_layout(params)
        zero = jnp.zeros((), jnp.float32)
        no = jnp.zeros((), bool)
        return PopGymState(time=jnp.zeros((), jnp.int32), task=task, prev_action=jnp.zeros(size, jnp.float32),
                           episode_return=zero, return_error=zero, terminated=no, truncated=no)

    def get_obs(self, state: PopGymState, params: PopGymParams | None = None, key: Any = None) -> jax.Array:
        """The observation of ``state``: ``[task part | previous action]``, float32."""
        params = self.default_params if params is None else params
        task_obs = jnp.asarray(self.observe_task(state, params), jnp.float32)
        if not self.prev_action:
            return task_obs
        return jnp.concatenate([task_obs, state.prev_action])

    def reset_env(self, key: jax.Array, params: PopGymParams) -> tuple[jax.Array, PopGymState]:
        state = self.initial_state(self.init_task(key, params), params)
        return self.get_obs(state, params), state

    def episode_return(self, state: PopGymState, params: PopGymParams) -> jax.Array:
        """The return of the episode so far (float32): by default the compensated sum of the rewards."""
        return state.episode_return + state.return_error

    def step_env(self, key, state, action, params):
        """One step (no auto-reset): gymnax 1.0's ``(obs, state, reward, terminated, info)`` with the
        truncation in the state (:meth:`is_truncated`), gymnax 0.0.9's five values under 0.0.9."""
        task, reward, terminated, truncated = self.transition(key, state, action, params)
        reward = jnp.asarray(reward, jnp.float32)
        episode_return, return_error = compensated_add(state.episode_return, state.return_error, reward)
        new_state = PopGymState(
            time=state.time + 1,
            task=task,
            prev_action=self.flatten_action(action, params) if self.prev_action else state.prev_action,
            episode_return=episode_return,
            return_error=return_error,
            terminated=jnp.asarray(terminated, bool),
            truncated=jnp.asarray(truncated, bool),
        )
        total = self.episode_return(new_state, params)
        info = {
            "episode_return": total,
            "normalized_return": jnp.clip(total, -1.0, 1.0),
            "episode_length": new_state.time,
        }
        obs = self.get_obs(new_state, params)
        return gymnax_compat.step_env_returns(obs, new_state, reward, new_state.terminated, new_state.truncated, info)

    @functools.partial(jax.jit, static_argnames=("self",))
    def step(self, key, state, action, params=None):
        """gymnax's auto-resetting step: :meth:`step_env`, then, where the episode has ended, a new one
        from :meth:`next_task` (its observation returned, the finished one's in ``info["final_observation"]``,
        ``info["terminated"]`` / ``["truncated"]`` added); the installed gymnax's return values."""
        params = self.default_params if params is None else params
        key_step, key_reset = jax.random.split(key)
        obs_st, state_st, reward, terminated, truncated, info = gymnax_compat.step_env(
            self, key_step, state, action, params)
        done = jnp.logical_or(terminated, truncated)
        state_re = self.initial_state(self.next_task(key_reset, state_st, params), params)
        obs_re = self.get_obs(state_re, params)
        new_state = jax.tree.map(functools.partial(_select, done), state_re, state_st)
        obs = jax.lax.select(done, obs_re, obs_st)
        info = {**info, "terminated": terminated, "truncated": truncated, "final_observation": obs_st}
        return gymnax_compat.step_returns(obs, new_state, reward, terminated, truncated, info)

    def is_terminated(self, state: PopGymState, params: PopGymParams) -> jax.Array:
        return state.terminated

    def is_truncated(self, state: PopGymState, params: PopGymParams) -> jax.Array:
        """popgym's truncation flag of the last transition (popgym's tasks end their episodes themselves)."""
        return state.truncated


class ScoredTask(PopGymJaxEnv):
    """A task whose rewards are integer multiples of ``1 / reward_denominator(task, params)`` (the card tasks, the
    Battleship, MineSweeper, the bandits and the Labyrinths): a task writes :meth:`play` (one step, its reward in
    those units) and this class turns the units into the float32 reward (:func:`rounded_ratio`) and keeps their sum in
    ``task.score`` (the task's state has an int32 field ``score``), so that ``info["episode_return"]`` is
    ``rounded_ratio(score, reward_denominator)``: popgym's ``math.fsum`` of its float64 rewards rounded to
    float32, to the bit."""

    def reward_denominator(self, task: Any, params: PopGymParams) -> Any:
        """The rewards' unit is ``1 / reward_denominator`` (an int, or int32 when traced) in an episode whose task
        state is ``task`` (the unit may depend on the episode, e.g. on its maze; it is constant within it)."""
        raise NotImplementedError

    def play(self, key: jax.Array, state: PopGymState, action: Any,
             params: PopGymParams) -> tuple[Any, jax.Array, jax.Array, jax.Array]:
        """One step: ``(task state, reward in units, terminated, truncated)``; the score is added here."""
        raise NotImplementedError

    def transition(self, key, state, action, params):
        task, units, terminated, truncated = self.play(key, state, action, params)
        units = jnp.asarray(units, jnp.int32)
        reward = rounded_ratio(units, self.reward_denominator(state.task, params))
        return task.replace(score=state.task.score + units), reward, terminated, truncated

    def episode_return(self, state: PopGymState, params: PopGymParams) -> jax.Array:
        """``rounded_ratio(score, reward_denominator)``: the return of the episode so far, exactly popgym's
        score rounded to float32."""
        return rounded_ratio(state.task.score, self.reward_denominator(state.task, params))


def difficulty(base: type, level: str, **config: Any) -> type:
    """popgym's ``<Task><level>`` class: ``base`` with ``config`` fixed (only ``prev_action`` is left), defined in
    ``base``'s module (``RepeatFirstEasy = difficulty(RepeatFirst, "Easy", num_decks=1)``)."""
    settings = ", ".join(f"{key}={value!r}" for key, value in config.items())

    def __init__(self, prev_action: bool = True):
        base.__init__(self, prev_action=prev_action, **config)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prev_action={self.prev_action})"

    name = base.__name__ + level
    return type(name, (base,), {
        "__init__": __init__,
        "__repr__": __repr__,
        "__module__": base.__module__,
        "__qualname__": name,
        "__doc__": f"popgym's ``{name}``: :class:`{base.__name__}` with {settings}.",
        "config": dict(config),
    })


# ---------------------------------------------------------------------------------------------
# the control tasks (CartPoles, Pendulums): physics seen through two readings, noisy or not


def physics_dtype() -> Any:
    """The float type of the physics: float64 under JAX's 64-bit mode, float32 otherwise (decided when traced)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def unfused(value: jax.Array) -> jax.Array:
    """``value`` itself, as an operand the compiler cannot fuse with the operation that made it.

    XLA's CPU backend contracts a multiply feeding an add into one fused multiply-add (a single
    rounding), which NumPy never does. A select on ``isnan`` is the identity (NaN stays NaN) but no
    rewrite sees through it, so the product is rounded on its own, as in NumPy."""
    return jnp.where(jnp.isnan(value), jnp.nan, value)


@struct.dataclass
class ControlParams(PopGymParams):
    """A control task's traced parameters (a gymnax ``EnvParams``): ``max_steps_in_episode`` is popgym's
    ``max_episode_length`` (the episode is truncated on that step); ``noise_sigma`` the standard deviation of a
    noisy task's reading noise (unused by the noiseless ones). Build checked ones with :meth:`ControlTask.params`."""

    max_steps_in_episode: Any = 200
    noise_sigma: Any = 0.0


class ControlTask(PopGymJaxEnv):
    """Base class of popgym's control tasks (CartPoles, Pendulums): a physics state (float64 under JAX's 64-bit
    mode, else float32: :func:`physics_dtype`) seen through float32 readings kept in ``state.task.reading``; a
    :attr:`noisy` task adds Gaussian noise to each reading and clips it to :attr:`reading_bounds`, the noise of
    the next reading drawn one step ahead (``state.task.next_noise``), so that a parity test can write popgym's
    draws into the state. Both parameters are traced, so one compiled step serves every setting and
    ``jax.vmap`` over params runs several side by side.

    A subclass sets the class attributes and writes the task (``init_task``, ``transition``, ...)."""

    #: whether the readings get Gaussian noise (and are clipped to :attr:`reading_bounds`)
    noisy = False
    #: popgym's bounds of the readings (float32), to which a noisy reading is clipped
    reading_bounds: np.ndarray = np.ones(2, np.float32)
    #: popgym's defaults of its constructor
    default_episode_length = 200
    default_noise_sigma = 0.1

    def __init__(self, max_episode_length: int | None = None, prev_action: bool = True,
                 noise_sigma: float | None = None):
        super().__init__(prev_action=prev_action)
        self._default_params = self.params(max_episode_length=max_episode_length, noise_sigma=noise_sigma)

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def default_params(self) -> ControlParams:
        return self._default_params

    def params(self, max_episode_length: Any = None, noise_sigma: Any = None) -> ControlParams:
        """Checked :class:`ControlParams`: ``max_episode_length`` an integer >= 1, ``noise_sigma`` (a noisy
        task only) a number >= 0; either may be an array (a batch for ``jax.vmap``; then both broadcast to one
        shape). Left out, a value is this environment's default."""
        defaults = getattr(self, "_default_params", None)
        if max_episode_length is None:
            max_episode_length = self.default_episode_length if defaults is None else defaults.max_steps_in_episode
        if noise_sigma is None:
            noise_sigma = ((self.default_noise_sigma if self.noisy else 0.0) if defaults is None
                           else defaults.noise_sigma)
        elif not self.noisy:
            raise ValueError(f"noise_sigma is a parameter of Noisy tasks only (NoisyPositionOnlyCartPole, "
                             f"NoisyPositionOnlyPendulum); {self.name} has no noise, "
                             f"got noise_sigma={noise_sigma!r}")
        lengths, sigmas = np.asarray(max_episode_length), np.asarray(noise_sigma)
        if lengths.dtype == bool or not np.issubdtype(lengths.dtype, np.integer):
            raise ValueError(f"max_episode_length must be an integer >= 1 or an integer array, "
                             f"got max_episode_length={max_episode_length!r}")
        if sigmas.dtype == bool or not np.issubdtype(sigmas.dtype, np.number):
            raise ValueError(f"noise_sigma must be a number >= 0 or an array of them, got noise_sigma={noise_sigma!r}")
        try:
            lengths, sigmas = np.broadcast_arrays(lengths, sigmas)
        except ValueError:
            raise ValueError(f"max_episode_length and noise_sigma must broadcast to one shape, got shapes "
                             f"{lengths.shape} and {sigmas.shape}") from None
        for value in np.unique(lengths):
            check_int("max_episode_length", int(value), low=1, why="popgym's episode length")
        for value in np.unique(sigmas):
            check_real("noise_sigma", float(value), low=0.0)
        if lengths.ndim == 0:  # Python scalars: weakly typed, so float64 under JAX's 64-bit mode
            return ControlParams(max_steps_in_episode=int(lengths), noise_sigma=float(sigmas))
        return ControlParams(max_steps_in_episode=jnp.asarray(lengths, jnp.int32), noise_sigma=jnp.asarray(sigmas))

    def draw_noise(self, key: jax.Array, params: ControlParams) -> jax.Array:
        """One reading's noise, float32 of the readings' shape: popgym's ``normal(0, sigma)`` rounded to float32
        (drawn in the physics' float type; zeros, with no draw, for the noiseless tasks)."""
        shape = self.reading_bounds.shape
        if not self.noisy:
            return jnp.zeros(shape, jnp.float32)
        dtype = physics_dtype()
        return (jnp.asarray(params.noise_sigma, dtype) * jax.random.normal(key, shape, dtype)).astype(jnp.float32)

    def read(self, values: jax.Array, noise: jax.Array) -> jax.Array:
        """The agent's float32 reading of ``values``: rounded to float32, plus ``noise`` and clipped to
        :attr:`reading_bounds` for a noisy task (as popgym adds and clips in float32)."""
        reading = jnp.asarray(values).astype(jnp.float32)
        if self.noisy:
            bounds = jnp.asarray(self.reading_bounds)
            reading = jnp.clip(reading + noise, -bounds, bounds)
        return reading

    def observe_task(self, state: PopGymState, params: ControlParams) -> jax.Array:
        return state.task.reading

    def __repr__(self) -> str:
        length = self._default_params.max_steps_in_episode
        sigma = f", noise_sigma={self._default_params.noise_sigma!r}" if self.noisy else ""
        return f"{type(self).__name__}(max_episode_length={length!r}{sigma}, prev_action={self.prev_action})"
