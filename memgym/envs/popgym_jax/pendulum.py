"""popgym 1.0.7's partially observed Pendulums as gymnax environments, step for step with popgym's NumPy ones.

Two tasks, each in popgym's three difficulties (the classes ``<Task>Easy`` / ``Medium`` / ``Hard``, built
with no arguments but ``prev_action``) and in any setting popgym's own constructor accepts:

==========================  ===========================================  ==================================
task                        what the agent sees                          Easy / Medium / Hard
==========================  ===========================================  ==================================
PositionOnlyPendulum        cos and sin of the pole's angle (no          episodes of 200 / 150 / 100 steps
                            angular velocity)
NoisyPositionOnlyPendulum   the same plus Gaussian noise, clipped to     noise sigma 0.1 / 0.2 / 0.3; 200
                            [-1, 1]                                      steps each
==========================  ===========================================  ==================================

The dynamics are Gymnasium's classic Pendulum (``gymnasium.envs.classic_control.PendulumEnv``: ``g = 10``,
``m = l = 1``, ``dt = 0.05`` s, torque clipped to ``[-2, 2]``, angular speed to ``[-8, 8]``): with
``theta`` the angle from upright and ``u`` the torque,

    theta_dot' = clip(theta_dot + (3 g / (2 l) sin(theta) + 3 / (m l^2) u) dt, -8, 8),
    theta' = theta + theta_dot' dt,

and the cost ``normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2`` of the state before the step
(``normalize`` wraps an angle into ``[-pi, pi)``). popgym rescales the reward ``-cost`` from
``[-16.2736044, 0]`` to ``[-1, 1]`` and divides it by the episode's length, so a return lies in
``[-1, 1]``: ``reward = ((-cost + h) / h) / max_episode_length`` with ``h = 8.1368022``. An episode
starts from an angle uniform in ``[-pi, pi)`` and an angular velocity uniform in ``[-1, 1)``; it never
terminates and is truncated on its ``max_episode_length``-th step. The action is a ``Box(-2, 2, (1,),
float32)`` torque.

Every task is a :class:`~memgym.envs.popgym_jax.common.ControlTask`: the observation is memgym's Gymnasium
wrapper's (``memgym/popgym-<Task><Difficulty>-v0``: popgym's two float32 readings, then the previous action
as given, zeros after a reset), and every step's ``info`` holds ``episode_return``, ``normalized_return``
and ``episode_length``. Usage::

    env = PositionOnlyPendulumEasy()
    params = env.default_params
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, jnp.array([0.5]), params)

Precision
---------
As for the CartPoles (:mod:`memgym.envs.popgym_jax.cartpole`): the physics runs in **float64** under JAX's
64-bit mode, with Gymnasium's operations in Gymnasium's order (the torque's terms in float32, as NumPy
computes a float32 action with Python floats), so on the CPU the state, the readings and the rewards are
popgym's bit for bit; a product that feeds a sum goes through :func:`~memgym.envs.popgym_jax.common.unfused`
and every divisor is made each environment's own value, so that no compiler rewrite moves a last bit. Under
JAX's default **float32** every operation rounds to 24 bits, and a pole swinging through the top (where the
pendulum is unstable: ``sqrt(3 g / (2 l))``, a difference grows about ``e^(3.9 t)`` over ``t`` seconds)
drifts from Gymnasium's trajectory: under random torques the readings stay within ``1e-4`` of popgym's for the
first 50 steps (largest seen ``6e-6``) and part ways later in an episode (``0.09`` by step 200). A float32
episode follows its own trajectory; its return under a policy is, in distribution, popgym's (the tests compare
the returns of random-torque episodes with a two-sample test).

The episode's return in ``info`` is the base class's compensated float32 sum of the float32 rewards: within
``2**-24 * (sum(|reward|) + |return|)`` of popgym's float64 score (about one float32 ulp at 1).

Deviations from popgym
----------------------
None changes an observation, a reward, an end flag or a score of a valid float32 action sequence.

==================================  ===========================================  ===========================================
what                                popgym 1.0.7                                 here
==================================  ===========================================  ===========================================
randomness                          NumPy's generator: the start state, the      ``jax.random``: the same distributions
                                    noise ``normal(0, sigma, 2)`` rounded to     (another stream); the next reading's noise
                                    float32                                      is drawn one step ahead (``next_noise``)
precision of the physics            float64                                      float64 under JAX's 64-bit mode (bit for
                                                                                 bit on the CPU); float32 by default
a float64 action                    computed with in float64 (the torque's       rounded to float32, the action space's
                                    terms change in their last bits)             type
actions outside ``[-2, 2]``         clipped for the physics (memgym's wrapper    clipped for the physics, not checked (jit);
                                    raises ``ValueError``)                       appended to the observation as given
``get_state()``, ``state_space``,   present                                      the state is ``state.task.physics``; no
rendering, ``reset(options=...)``                                                rendering, no reset bounds
invalid settings                    accepted (a negative sigma fails in NumPy)   ``ValueError`` naming the argument
==================================  ===========================================  ===========================================
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces

from memgym.envs.popgym_jax.common import ControlParams, ControlTask, PopGymState, difficulty, physics_dtype, unfused

__all__ = [
    "PENDULUM_TASKS",
    "NoisyPositionOnlyPendulum",
    "NoisyPositionOnlyPendulumEasy",
    "NoisyPositionOnlyPendulumHard",
    "NoisyPositionOnlyPendulumMedium",
    "PendulumState",
    "PendulumTask",
    "PositionOnlyPendulum",
    "PositionOnlyPendulumEasy",
    "PositionOnlyPendulumHard",
    "PositionOnlyPendulumMedium",
    "pendulum_dynamics",
    "popgym_reward",
]

# Gymnasium's PendulumEnv constants (Python floats, so float64 as there)
GRAVITY = 10.0
MASS = 1.0
LENGTH = 1.0
DT = 0.05
MAX_SPEED = 8.0
MAX_TORQUE = 2.0
#: a new episode's angle is uniform in [-START_ANGLE, START_ANGLE), its angular velocity in [-START_SPEED, START_SPEED)
START_ANGLE, START_SPEED = math.pi, 1.0
#: popgym's reward scale: Gymnasium's reward -cost lies in [REWARD_LOW, 0]
REWARD_LOW = -16.2736044
#: popgym's max_episode_length of PositionOnlyPendulum's Easy / Medium / Hard
EPISODE_LENGTHS = {"Easy": 200, "Medium": 150, "Hard": 100}
#: popgym's noise_sigma of NoisyPositionOnlyPendulum's difficulties (all with popgym's default length, 200)
NOISE_SIGMAS = {"Easy": 0.1, "Medium": 0.2, "Hard": 0.3}
DEFAULT_EPISODE_LENGTH = 200
DEFAULT_NOISE_SIGMA = 0.1


def _own(divisor: float, like: jax.Array) -> jax.Array:
    """``divisor`` in ``like``'s float type, as a value of each environment's own (NaN where ``like`` is): XLA
    turns a division by a constant, or by a scalar shared across a vmapped batch, into a multiplication by its
    reciprocal (two roundings)."""
    return jnp.where(jnp.isnan(like), jnp.nan, jnp.asarray(divisor, like.dtype))


def pendulum_dynamics(physics: jax.Array, torque: Any) -> tuple[jax.Array, jax.Array]:
    """One step of Gymnasium's Pendulum from ``physics = [theta, theta_dot]`` under ``torque`` (float32, shape
    ``(1,)``, clipped to ``[-2, 2]``): ``(physics after the step, the cost of the state before it)``, in
    ``physics``'s float type.

    The operations and their order are Gymnasium's ``PendulumEnv.step`` (the torque's terms in float32, as
    NumPy computes ``0.001 * u**2`` and ``3.0 / (m * l**2) * u`` for a float32 ``u``), so in float64 the result
    is Gymnasium's to the bit (see the module docstring)."""
    dtype = physics.dtype
    theta, theta_dot = physics[0], physics[1]
    u = jnp.clip(jnp.asarray(torque, jnp.float32).reshape(-1)[0], -MAX_TORQUE, MAX_TORQUE)
    pi = jnp.asarray(math.pi, dtype)
    normalized = jnp.remainder(theta + pi, _own(2 * math.pi, theta)) - pi
    torque_cost = (jnp.float32(0.001) * (u * u)).astype(dtype)
    cost = (unfused(normalized * normalized) + unfused(jnp.asarray(0.1, dtype) * unfused(theta_dot * theta_dot))
            + torque_cost)
    push = (jnp.float32(3.0 / (MASS * LENGTH**2)) * u).astype(dtype)
    acceleration = unfused(jnp.asarray(3 * GRAVITY / (2 * LENGTH), dtype) * jnp.sin(theta)) + push
    dt = jnp.asarray(DT, dtype)
    new_theta_dot = jnp.clip(theta_dot + unfused(acceleration * dt), -MAX_SPEED, MAX_SPEED)
    new_theta = theta + unfused(new_theta_dot * dt)
    return jnp.stack([new_theta, new_theta_dot]), cost


def popgym_reward(cost: jax.Array, max_episode_length: Any) -> jax.Array:
    """popgym's reward of a step of ``cost``: Gymnasium's ``-cost`` shifted and scaled from
    ``[-16.2736044, 0]`` to ``[-1, 1]``, divided by ``max_episode_length`` (in ``cost``'s float type, with
    popgym's operations; float32 is the caller's rounding)."""
    half = (0 - REWARD_LOW) / 2
    scaled = (-cost + jnp.asarray(half, cost.dtype)) / _own(half, cost)
    return scaled / jnp.where(jnp.isnan(cost), jnp.nan, jnp.asarray(max_episode_length).astype(cost.dtype))


@struct.dataclass
class PendulumState:
    """A Pendulum's own state (``state.task`` of a :class:`~memgym.envs.popgym_jax.common.PopGymState`).

    ``physics``: Gymnasium's ``PendulumEnv.state`` ``[theta, theta_dot]`` (float64 or float32, see the module
    docstring); ``reading``: the two float32 readings the agent sees now (cos and sin of the angle, noisy for
    the noisy task); ``next_noise``: the float32 noise the next reading gets (zeros for the noiseless task)."""

    physics: jax.Array
    reading: jax.Array
    next_noise: jax.Array


class PendulumTask(ControlTask):
    """Base class of the two Pendulums (see the module docstring); a subclass sets :attr:`noisy`."""

    reading_bounds = np.ones(2, np.float32)
    default_episode_length = DEFAULT_EPISODE_LENGTH
    default_noise_sigma = DEFAULT_NOISE_SIGMA

    def action_space(self, params: ControlParams | None = None) -> spaces.Box:
        return spaces.Box(-MAX_TORQUE, MAX_TORQUE, (1,), jnp.float32)

    def task_observation_bounds(self, params: ControlParams) -> tuple[np.ndarray, np.ndarray]:
        return -self.reading_bounds, self.reading_bounds.copy()

    def start_task(self, physics: jax.Array, noise: jax.Array, next_noise: jax.Array) -> PendulumState:
        """A new episode's task state from its start ``physics`` (and, for the noisy task, the noise of the
        first reading and of the next one)."""
        return PendulumState(physics=physics, reading=self.read(_angle(physics), noise),
                             next_noise=jnp.asarray(next_noise, jnp.float32))

    def init_task(self, key: jax.Array, params: ControlParams) -> PendulumState:
        start_key, noise_key, next_key = jax.random.split(key, 3)
        dtype = physics_dtype()
        high = jnp.asarray([START_ANGLE, START_SPEED], dtype)
        physics = jax.random.uniform(start_key, (2,), dtype, -high, high)
        return self.start_task(physics, self.draw_noise(noise_key, params), self.draw_noise(next_key, params))

    def transition(self, key, state: PopGymState, action, params: ControlParams):
        task: PendulumState = state.task
        physics, cost = pendulum_dynamics(task.physics, action)
        reward = popgym_reward(cost, params.max_steps_in_episode).astype(jnp.float32)
        new_task = PendulumState(physics=physics, reading=self.read(_angle(physics), task.next_noise),
                                 next_noise=self.draw_noise(key, params))
        return new_task, reward, jnp.zeros((), bool), state.time + 1 >= params.max_steps_in_episode


def _angle(physics: jax.Array) -> jax.Array:
    """Gymnasium's observation of the angle: ``[cos(theta), sin(theta)]`` (the caller rounds to float32)."""
    return jnp.stack([jnp.cos(physics[0]), jnp.sin(physics[0])])


class PositionOnlyPendulum(PendulumTask):
    """Pendulum seen through the cosine and sine of its angle (no angular velocity): the agent must infer the
    velocity from successive readings to swing the pole up and hold it.

    Args:
        max_episode_length: the episode's length, an integer >= 1 (popgym's Easy / Medium / Hard: 200 / 150 /
            100); the default params' value (it is traced: :meth:`params` builds others).
        prev_action: append the previous action (the torque as given) to the observation.
    """


class NoisyPositionOnlyPendulum(PendulumTask):
    """:class:`PositionOnlyPendulum` with Gaussian noise of standard deviation ``noise_sigma`` added to each
    reading (the first included), clipped to ``[-1, 1]``.

    Args:
        noise_sigma: the noise's standard deviation, a number >= 0 (popgym's Easy / Medium / Hard: 0.1 / 0.2 /
            0.3); traced, like ``max_episode_length``.
        max_episode_length: the episode's length (popgym's difficulties all keep its default, 200).
        prev_action: append the previous action to the observation.
    """

    noisy = True

    def __init__(self, noise_sigma: float = DEFAULT_NOISE_SIGMA, max_episode_length: int = DEFAULT_EPISODE_LENGTH,
                 prev_action: bool = True):
        super().__init__(max_episode_length=max_episode_length, noise_sigma=noise_sigma, prev_action=prev_action)


# ---------------------------------------------------------------------------------------------
# popgym's difficulties


PositionOnlyPendulumEasy = difficulty(PositionOnlyPendulum, "Easy", max_episode_length=EPISODE_LENGTHS["Easy"])
PositionOnlyPendulumMedium = difficulty(PositionOnlyPendulum, "Medium", max_episode_length=EPISODE_LENGTHS["Medium"])
PositionOnlyPendulumHard = difficulty(PositionOnlyPendulum, "Hard", max_episode_length=EPISODE_LENGTHS["Hard"])
NoisyPositionOnlyPendulumEasy = difficulty(NoisyPositionOnlyPendulum, "Easy", noise_sigma=NOISE_SIGMAS["Easy"])
NoisyPositionOnlyPendulumMedium = difficulty(NoisyPositionOnlyPendulum, "Medium", noise_sigma=NOISE_SIGMAS["Medium"])
NoisyPositionOnlyPendulumHard = difficulty(NoisyPositionOnlyPendulum, "Hard", noise_sigma=NOISE_SIGMAS["Hard"])

#: popgym's class name -> the JAX class, for every Pendulum and difficulty (e.g. ``"PositionOnlyPendulumEasy"``)
PENDULUM_TASKS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        PositionOnlyPendulumEasy, PositionOnlyPendulumMedium, PositionOnlyPendulumHard,
        NoisyPositionOnlyPendulumEasy, NoisyPositionOnlyPendulumMedium, NoisyPositionOnlyPendulumHard,
    )
}
