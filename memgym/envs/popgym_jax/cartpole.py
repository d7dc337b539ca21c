"""popgym 1.0.7's partially observed CartPoles as gymnax environments, step for step with popgym's NumPy ones.

Three tasks, each in popgym's three difficulties (the classes ``<Task>Easy`` / ``Medium`` / ``Hard``,
built with no arguments but ``prev_action``) and in any setting popgym's own constructor accepts
(``PositionOnlyCartPole(max_episode_length=300)``):

==========================  =========================================  ====================================
task                        what the agent sees                        Easy / Medium / Hard
==========================  =========================================  ====================================
PositionOnlyCartPole        cart position, pole angle                  episodes of at most 200 / 400 / 600 steps
VelocityOnlyCartPole        cart velocity, pole angular velocity       200 / 400 / 600 steps
                            (position and angle at the reset, as
                            popgym's reset gives them)
NoisyPositionOnlyCartPole   position and angle plus Gaussian noise,    noise sigma 0.1 / 0.2 / 0.3; 200 steps
                            clipped to the observation bounds          each
==========================  =========================================  ====================================

The dynamics are Gymnasium's classic CartPole (``gymnasium.envs.classic_control.CartPoleEnv``,
Barto, Sutton and Anderson's cart-pole with Euler integration, ``tau = 0.02`` s, a push of
``±10`` N): action 1 pushes right, any other action left. An episode starts from a state drawn
uniformly from ``(-0.05, 0.05)^4``; it *terminates* when the cart leaves ``[-2.4, 2.4]`` or the
pole tilts beyond 12 degrees, and is *truncated* on its ``max_episode_length``-th step (popgym
raises both flags when both happen). Every step rewards ``1 / max_episode_length``, the one
on which the pole falls included (Gymnasium >= 1.0 rewards it), so an episode's return is its
length over ``max_episode_length``: 1 for a pole balanced to the end. popgym's ``-1`` (a step
after the pole fell) happens only where ``step_env`` is called on a finished episode; it is
kept for that case.

Every task is a :class:`~memgym.envs.popgym_jax.common.PopGymJaxEnv`: the observation is memgym's
Gymnasium wrapper's (``memgym/popgym-<Task><Difficulty>-v0``: popgym's two float32 readings, then
the previous action one-hot, zeros after a reset), and every step's ``info`` holds
``episode_return``, ``normalized_return`` and ``episode_length``. Usage::

    env = PositionOnlyCartPoleEasy()
    params = env.default_params
    obs, state = env.reset(key, params)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action, params)  # gymnax 1.0

Precision
---------
Gymnasium integrates in float64 and hands out the state rounded to float32. Here the physics
runs in JAX's default float type, chosen when a function is traced: **float64** where JAX's
64-bit mode is on (``jax.config.update("jax_enable_x64", True)``, or inside
``with jax.enable_x64(True):``), **float32** otherwise (JAX's default). The observation is float32
either way.

* float64: the same operations in the same order as Gymnasium, so on the CPU the state is
  Gymnasium's bit for bit (the parity tests check every step of thousands). Two compiler
  rewrites that would change the last bit are prevented: XLA's CPU backend fuses a multiply
  and the add that reads it into one fused multiply-add (rounded once instead of twice), and
  turns a division by a constant, or by a scalar shared across a ``vmap``, into a
  multiplication by its reciprocal: every product that feeds a sum goes through
  :func:`_rounded`, and the divisor is made each environment's own value (a select on NaN).
  Other backends' ``sin``/``cos`` (a GPU's) may differ from the C library's in the last bit,
  and then so may the state after many steps.
* float32 (the default): every operation rounds to float32's 24 bits instead of 53, and the
  pole's fall amplifies a difference by about ``e^(4 t)`` over ``t`` seconds (``e^0.08`` a step),
  so the state drifts from Gymnasium's: over the ~20 steps of an episode under random actions
  the readings differ by at most ``5e-6`` (24,000 steps of the tests: they allow ``5e-5``
  absolute per reading; none of their episodes changes its length or an end flag). A balanced
  pole's episode of hundreds of steps follows its own float32 trajectory: its score under a
  policy is, in distribution, popgym's (the tests compare the episode lengths of a fixed policy
  with a two-sample test).

Parameters
----------
``max_steps_in_episode`` of :class:`CartPoleParams` is popgym's ``max_episode_length`` (the
truncation step and the reward's denominator) and ``noise_sigma`` NoisyPositionOnlyCartPole's
noise; both are traced, so one compiled step serves every setting and ``jax.vmap`` over params
runs several side by side (:meth:`CartPoleTask.params` checks and builds them). Whether the
readings are noisy, and which two the agent sees, are fixed by the class.

Deviations from popgym
----------------------
None changes an observation, a reward, an end flag or a score of a valid action sequence.

=====================================  ============================================  ======================================
what                                   popgym 1.0.7                                  here
=====================================  ============================================  ======================================
randomness                             NumPy's generator: the start state            ``jax.random``: the same distributions
                                       ``uniform(-0.05, 0.05, 4)``, the noise         (another stream); the noise of the next
                                       ``normal(0, sigma, 2)`` rounded to float32     reading is drawn one step ahead and kept
                                                                                      in the state (``next_noise``)
precision of the physics               float64                                       float64 under JAX's 64-bit mode (bit for
                                                                                      bit on the CPU); float32 by default
                                                                                      (see Precision: readings within ``5e-6``
                                                                                      over a random-action episode)
noise under JAX's default float32      float64 draws times sigma, rounded to          float32 draws times float32 sigma
                                       float32
episode return (``info``)              ``math.fsum`` of the float64 rewards           ``n / max_episode_length`` rounded once
                                       (memgym's ``EpisodeReturn``), ``n / L``        to float32: popgym's return rounded to
                                       after ``n`` steps                              float32, exactly (not the base class's
                                                                                      sum of float32 rewards, one ulp off for
                                                                                      ~30% of the lengths)
rewards                                Python floats (float64)                       float32 (``1 / max_episode_length``
                                                                                      rounded once)
invalid actions (outside ``{0, 1}``)   Gymnasium asserts (memgym's wrapper raises     not checked (jit): any action but 1
                                       ``ValueError``)                                pushes left, as Gymnasium's arithmetic
                                                                                      would; the previous-action block is all
                                                                                      zeros
stepping after the episode's end       Gymnasium warns; reward -1 while the pole      gymnax's ``step`` starts a new episode;
                                       is down (memgym's wrapper raises               ``step_env`` alone keeps going as
                                       ``RuntimeError``)                              Gymnasium does (reward -1 while down)
``get_state()``, ``state_space``,      present                                       the state is ``state.task.physics``;
rendering, ``reset(options=...)``                                                    no rendering, no reset bounds
invalid settings                       accepted (a negative sigma fails in NumPy)     ``ValueError`` naming the argument
=====================================  ============================================  ======================================

Nothing of popgym's CartPoles is left out.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from gymnax.environments import spaces
from jax import lax

from memgym.envs.popgym_jax.common import (
    ControlParams,
    ControlTask,
    PopGymState,
    difficulty,
    physics_dtype,
    unfused,
)

__all__ = [
    "CARTPOLE_TASKS",
    "CartPoleParams",
    "CartPoleState",
    "CartPoleTask",
    "NoisyPositionOnlyCartPole",
    "NoisyPositionOnlyCartPoleEasy",
    "NoisyPositionOnlyCartPoleHard",
    "NoisyPositionOnlyCartPoleMedium",
    "PositionOnlyCartPole",
    "PositionOnlyCartPoleEasy",
    "PositionOnlyCartPoleHard",
    "PositionOnlyCartPoleMedium",
    "VelocityOnlyCartPole",
    "VelocityOnlyCartPoleEasy",
    "VelocityOnlyCartPoleHard",
    "VelocityOnlyCartPoleMedium",
    "cartpole_dynamics",
    "cartpole_fell",
    "exact_ratio",
    "physics_dtype",
]

# Gymnasium's CartPoleEnv constants (Python floats, so float64 as there; derived ones computed the same way)
GRAVITY = 9.8
MASS_CART = 1.0
MASS_POLE = 0.1
TOTAL_MASS = MASS_POLE + MASS_CART
HALF_POLE_LENGTH = 0.5
POLE_MASS_LENGTH = MASS_POLE * HALF_POLE_LENGTH
FORCE = 10.0
TAU = 0.02
#: the pole falls beyond this angle (radians; 12 degrees)
THETA_THRESHOLD = 12 * 2 * math.pi / 360
#: the cart leaves the track beyond this position
X_THRESHOLD = 2.4
#: each component of a new episode's state is uniform in (-START_BOUND, START_BOUND)
START_BOUND = 0.05
#: popgym's observation bounds of the position readings (float32: what its observation space holds)
POSITION_BOUNDS = np.array([X_THRESHOLD * 2, THETA_THRESHOLD * 2], dtype=np.float32)

#: popgym's max_episode_length of Easy / Medium / Hard (Position- and VelocityOnlyCartPole)
EPISODE_LENGTHS = {"Easy": 200, "Medium": 400, "Hard": 600}
#: popgym's noise_sigma of NoisyPositionOnlyCartPole's difficulties (all with popgym's default length, 200)
NOISE_SIGMAS = {"Easy": 0.1, "Medium": 0.2, "Hard": 0.3}
DEFAULT_EPISODE_LENGTH = 200
DEFAULT_NOISE_SIGMA = 0.1


def exact_ratio(numerator: Any, denominator: Any) -> jax.Array:
    """``numerator / denominator`` of two integers, rounded to the nearest float32 (as NumPy's float64
    quotient rounded to float32 is), for ``0 <= numerator < 2**24`` and ``1 <= denominator <= 2**12``.

    A plain float32 division is not enough: XLA rewrites a division by a scalar shared across a batch (a
    params field under ``vmap``) as a multiplication by its reciprocal, one ulp off for about 30% of the
    quotients. So the computed quotient is corrected: of the five floats around it, the one whose product
    with the denominator is nearest the numerator. Each candidate is split into its upper and lower 12
    mantissa bits, so that both products with a 12-bit denominator are exact (and a fused multiply-add
    would change nothing); the difference ``upper * d - n`` is exact too (its terms are within a factor 2)."""
    n = jnp.asarray(numerator, jnp.int32).astype(jnp.float32)
    d = jnp.asarray(denominator, jnp.int32).astype(jnp.float32)
    estimate = n / d
    below = jnp.nextafter(estimate, jnp.float32(-jnp.inf))
    above = jnp.nextafter(estimate, jnp.float32(jnp.inf))
    candidates = jnp.stack([estimate, below, above, jnp.nextafter(below, jnp.float32(-jnp.inf)),
                            jnp.nextafter(above, jnp.float32(jnp.inf))])
    bits = lax.bitcast_convert_type(candidates, jnp.uint32)
    upper = lax.bitcast_convert_type(bits & jnp.uint32(0xFFFFF000), jnp.float32)
    lower = candidates - upper
    miss = jnp.abs((upper * d - n) + lower * d)
    return jnp.take_along_axis(candidates, jnp.argmin(miss, axis=0)[None], axis=0)[0]


def cartpole_dynamics(physics: jax.Array, action: Any) -> jax.Array:
    """One Euler step of Gymnasium's cart-pole: ``physics = [x, x_dot, theta, theta_dot]`` after ``action``
    (1 pushes right, anything else left), in ``physics``'s float type.

    The operations and their order are Gymnasium's ``CartPoleEnv.step``, so in float64 the result is
    Gymnasium's to the bit (see the module docstring)."""
    dtype = physics.dtype
    force, pole_mass_length, gravity, half_length, four_thirds, mass_pole, tau = (
        jnp.asarray(value, dtype) for value in (FORCE, POLE_MASS_LENGTH, GRAVITY, HALF_POLE_LENGTH, 4.0 / 3.0,
                                                MASS_POLE, TAU))
    x, x_dot, theta, theta_dot = physics[0], physics[1], physics[2], physics[3]
    # The divisor as a value of each environment's own: XLA turns a division by a constant, or by one scalar
    # shared across a vmapped batch, into a multiplication by its reciprocal (two roundings). Where theta is NaN,
    # so is every result anyway.
    total_mass = jnp.where(jnp.isnan(theta), jnp.nan, jnp.asarray(TOTAL_MASS, dtype))
    push = jnp.where(jnp.asarray(action) == 1, force, -force)
    cos, sin = jnp.cos(theta), jnp.sin(theta)
    temp = (push + unfused(pole_mass_length * (theta_dot * theta_dot) * sin)) / total_mass
    theta_acc = (unfused(gravity * sin) - unfused(cos * temp)) / (
        half_length * (four_thirds - mass_pole * (cos * cos) / total_mass)
    )
    x_acc = temp - pole_mass_length * theta_acc * cos / total_mass
    return jnp.stack([
        x + unfused(tau * x_dot),
        x_dot + unfused(tau * x_acc),
        theta + unfused(tau * theta_dot),
        theta_dot + unfused(tau * theta_acc),
    ])


def cartpole_fell(physics: jax.Array) -> jax.Array:
    """Gymnasium's termination: the cart is off ``[-2.4, 2.4]`` or the pole beyond 12 degrees (compared in
    ``physics``'s float type, as Gymnasium compares its float64 state)."""
    x_limit, theta_limit = (jnp.asarray(value, physics.dtype) for value in (X_THRESHOLD, THETA_THRESHOLD))
    x, theta = physics[0], physics[2]
    return (x < -x_limit) | (x > x_limit) | (theta < -theta_limit) | (theta > theta_limit)


#: a CartPole's traced parameters: ``max_steps_in_episode`` (popgym's ``max_episode_length``: the episode is
#: truncated on that step, and each step rewards its inverse) and ``noise_sigma`` (NoisyPositionOnlyCartPole's)
CartPoleParams = ControlParams


@struct.dataclass
class CartPoleState:
    """A CartPole's own state (``state.task`` of a :class:`~memgym.envs.popgym_jax.common.PopGymState`).

    ``physics``: Gymnasium's ``CartPoleEnv.state`` ``[x, x_dot, theta, theta_dot]`` (float64 or float32,
    see the module docstring); ``fallen``: the pole has fallen this episode (Gymnasium's
    ``steps_beyond_terminated`` is set); ``reading``: the two float32 readings the agent sees now;
    ``next_noise``: the float32 noise the next reading gets (zeros for the noiseless tasks);
    ``penalized_steps``: the steps rewarded -1 this episode (stepped on while the pole was down)."""

    physics: jax.Array
    fallen: jax.Array
    reading: jax.Array
    next_noise: jax.Array
    penalized_steps: jax.Array


class CartPoleTask(ControlTask):
    """Base class of the three CartPoles (see the module docstring); a subclass sets :attr:`observed`
    (``"position"`` or ``"velocity"``) and :attr:`noisy`."""

    #: which pair of state components the agent sees after a step: positions (x, theta) or velocities
    observed = "position"
    reading_bounds = POSITION_BOUNDS
    default_episode_length = DEFAULT_EPISODE_LENGTH
    default_noise_sigma = DEFAULT_NOISE_SIGMA

    def action_space(self, params: CartPoleParams | None = None) -> spaces.Discrete:
        return spaces.Discrete(2)

    def task_observation_bounds(self, params: CartPoleParams) -> tuple[np.ndarray, np.ndarray]:
        if self.observed == "velocity":
            return np.full(2, -np.inf, np.float32), np.full(2, np.inf, np.float32)
        return -POSITION_BOUNDS, POSITION_BOUNDS.copy()

    # --- the task -------------------------------------------------------------------------------------------

    def start_task(self, physics: jax.Array, noise: jax.Array, next_noise: jax.Array) -> CartPoleState:
        """A new episode's task state from its start ``physics`` (and, for the noisy task, the noise of the
        first reading and of the next one). popgym's reset reads the position and the angle in every
        variant (VelocityOnlyCartPole's too)."""
        reading = self.read(physics[jnp.array([0, 2])], noise)
        return CartPoleState(physics=physics, fallen=jnp.zeros((), bool), reading=reading,
                             next_noise=jnp.asarray(next_noise, jnp.float32), penalized_steps=jnp.zeros((), jnp.int32))

    def init_task(self, key: jax.Array, params: CartPoleParams) -> CartPoleState:
        start_key, noise_key, next_key = jax.random.split(key, 3)
        dtype = physics_dtype()
        physics = jax.random.uniform(start_key, (4,), dtype, -START_BOUND, START_BOUND)
        return self.start_task(physics, self.draw_noise(noise_key, params), self.draw_noise(next_key, params))

    def transition(self, key, state: PopGymState, action, params: CartPoleParams):
        task: CartPoleState = state.task
        physics = cartpole_dynamics(task.physics, action)
        fell = cartpole_fell(physics)
        length = params.max_steps_in_episode
        # Gymnasium rewards 1 (popgym: 1 / length) unless the pole was already down and still is (0; popgym: -1)
        step_reward = exact_ratio(1, length)
        penalized = fell & task.fallen
        reward = jnp.where(penalized, jnp.float32(-1.0), step_reward)
        truncated = state.time + 1 >= length
        shown = physics[jnp.array([0, 2])] if self.observed == "position" else physics[jnp.array([1, 3])]
        new_task = CartPoleState(physics=physics, fallen=task.fallen | fell, reading=self.read(shown, task.next_noise),
                                 next_noise=self.draw_noise(key, params),
                                 penalized_steps=task.penalized_steps + penalized.astype(jnp.int32))
        return new_task, reward, fell, truncated

    # CartPole's own episode return (replacing the base class's in info; see step_env)
    def episode_return(self, state: PopGymState, params: CartPoleParams) -> jax.Array:
        """The return of the episode so far, float32: ``n / L`` (:func:`exact_ratio`) for ``n`` steps rewarded
        ``1 / L`` (``L = max_episode_length``), minus 1 for each step taken while the pole was down.

        ``float32(n / L)`` is the float32 rounding of ``math.fsum`` of popgym's float64 rewards (memgym's
        ``EpisodeReturn``) for every ``n <= L <= 5000`` (checked exhaustively), where a float32 sum of the
        float32 rewards is one ulp off for about 30% of the lengths (``n * float32(1/L)`` is not ``n/L``)."""
        penalized = state.task.penalized_steps
        return exact_ratio(state.time - penalized, params.max_steps_in_episode) - penalized.astype(jnp.float32)

    def step_env(self, key, state, action, params):
        """The base class's step, with ``info["episode_return"]`` and ``"normalized_return"`` from
        :meth:`episode_return` (exactly popgym's score, rounded to float32) instead of the compensated sum of
        the float32 rewards (which can be one float32 ulp off it)."""
        *outputs, info = super().step_env(key, state, action, params)
        episode_return = self.episode_return(outputs[1], params)
        info = {**info, "episode_return": episode_return, "normalized_return": jnp.clip(episode_return, -1.0, 1.0)}
        return (*outputs, info)


class PositionOnlyCartPole(CartPoleTask):
    """CartPole seen through the cart's position and the pole's angle (no velocities): the agent must
    infer the velocities from successive readings.

    Args:
        max_episode_length: the episode's longest length, an integer >= 1 (popgym's Easy / Medium / Hard:
            200 / 400 / 600); the default params' value (it is traced: :meth:`params` builds others).
        prev_action: append the previous action to the observation.
    """


class VelocityOnlyCartPole(CartPoleTask):
    """CartPole seen through the cart's velocity and the pole's angular velocity (no positions; the
    first reading of an episode is popgym's: position and angle). Arguments as :class:`PositionOnlyCartPole`."""

    observed = "velocity"


class NoisyPositionOnlyCartPole(CartPoleTask):
    """:class:`PositionOnlyCartPole` with Gaussian noise of standard deviation ``noise_sigma`` added to each
    reading (the first included), clipped to the observation bounds ``±(4.8, 0.419)``.

    Args:
        noise_sigma: the noise's standard deviation, a number >= 0 (popgym's Easy / Medium / Hard: 0.1 / 0.2 /
            0.3); traced, like ``max_episode_length``.
        max_episode_length: the episode's longest length (popgym's difficulties all keep its default, 200).
        prev_action: append the previous action to the observation.
    """

    noisy = True

    def __init__(self, noise_sigma: float = DEFAULT_NOISE_SIGMA, max_episode_length: int = DEFAULT_EPISODE_LENGTH,
                 prev_action: bool = True):
        super().__init__(max_episode_length=max_episode_length, noise_sigma=noise_sigma, prev_action=prev_action)


# ---------------------------------------------------------------------------------------------
# popgym's difficulties


PositionOnlyCartPoleEasy = difficulty(PositionOnlyCartPole, "Easy", max_episode_length=EPISODE_LENGTHS["Easy"])
PositionOnlyCartPoleMedium = difficulty(PositionOnlyCartPole, "Medium", max_episode_length=EPISODE_LENGTHS["Medium"])
PositionOnlyCartPoleHard = difficulty(PositionOnlyCartPole, "Hard", max_episode_length=EPISODE_LENGTHS["Hard"])
VelocityOnlyCartPoleEasy = difficulty(VelocityOnlyCartPole, "Easy", max_episode_length=EPISODE_LENGTHS["Easy"])
VelocityOnlyCartPoleMedium = difficulty(VelocityOnlyCartPole, "Medium", max_episode_length=EPISODE_LENGTHS["Medium"])
VelocityOnlyCartPoleHard = difficulty(VelocityOnlyCartPole, "Hard", max_episode_length=EPISODE_LENGTHS["Hard"])
NoisyPositionOnlyCartPoleEasy = difficulty(NoisyPositionOnlyCartPole, "Easy", noise_sigma=NOISE_SIGMAS["Easy"])
NoisyPositionOnlyCartPoleMedium = difficulty(NoisyPositionOnlyCartPole, "Medium", noise_sigma=NOISE_SIGMAS["Medium"])
NoisyPositionOnlyCartPoleHard = difficulty(NoisyPositionOnlyCartPole, "Hard", noise_sigma=NOISE_SIGMAS["Hard"])

#: popgym's class name -> the JAX class, for every CartPole and difficulty (e.g. ``"PositionOnlyCartPoleEasy"``)
CARTPOLE_TASKS: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        PositionOnlyCartPoleEasy, PositionOnlyCartPoleMedium, PositionOnlyCartPoleHard,
        VelocityOnlyCartPoleEasy, VelocityOnlyCartPoleMedium, VelocityOnlyCartPoleHard,
        NoisyPositionOnlyCartPoleEasy, NoisyPositionOnlyCartPoleMedium, NoisyPositionOnlyCartPoleHard,
    )
}
