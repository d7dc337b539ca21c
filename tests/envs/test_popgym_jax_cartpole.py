"""popgym 1.0.7's CartPoles in JAX (memgym.envs.popgym_jax.cartpole) against popgym's own, step for step.

The parity tests drive popgym's environment through memgym's Gymnasium wrapper (``PopGymEnv``:
the observation the agents see, with the previous action, and the episode's return in ``info``)
and replay each of its episodes on the JAX environment from the same hidden state:
:func:`from_popgym` writes popgym's physics state after its reset into a JAX state, and for the
noisy task popgym's noise draws (read from a copy of its generator, so popgym's own stream is
untouched) go into the JAX state's ``next_noise`` before each step. The actions are popgym's
(random, or a balancing controller with random mistakes, whose episodes run to the time limit).

Under JAX's 64-bit mode the physics is Gymnasium's to the bit, and every observation, reward,
flag, hidden state and episode statistic must be equal. Under JAX's default float32 the physics
rounds to float32 and the unstable pole amplifies the difference (see the module docstring):
the readings must agree within ``5e-5`` (the largest difference over these episodes is
``4.5e-6``), everything else exactly.

popgym's randomness (start states, noise) cannot be replayed through ``jax.random``; the
distributions are compared with stated tests instead (Kolmogorov-Smirnov, fixed seeds).

popgym is an optional extra, so the whole module is skipped without it.
"""

from __future__ import annotations

import copy
import functools
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv
from gymnasium.utils.env_checker import check_env

popgym_envs = pytest.importorskip("popgym.envs")
stats = pytest.importorskip("scipy.stats")

from memgym.envs import gymnax_compat  # noqa: E402
from memgym.envs.functional import GymnasiumAdapter  # noqa: E402
from memgym.envs.popgym import PopGymEnv  # noqa: E402
from memgym.envs.popgym_jax import cartpole  # noqa: E402
from memgym.envs.popgym_jax.cartpole import (  # noqa: E402
    CARTPOLE_TASKS,
    NoisyPositionOnlyCartPoleHard,
    NoisyPositionOnlyCartPole,
    PositionOnlyCartPole,
    PositionOnlyCartPoleEasy,
    VelocityOnlyCartPole,
    VelocityOnlyCartPoleEasy,
    exact_ratio,
)
from memgym.envs.popgym_jax.common import PopGymState  # noqa: E402

NAMES = list(CARTPOLE_TASKS)
# each family at Easy in the fast tier, every difficulty in the slow one (a lockstep test takes 2-5 s)
TIERED = [pytest.param(name, marks=() if name.endswith("Easy") else pytest.mark.slow) for name in NAMES]
#: the readings' tolerance under float32 physics (the largest difference in these tests' episodes is 4.5e-6)
FLOAT32_READING_ATOL = 5e-5


# ---------------------------------------------------------------------------------------------
# popgym's side


def from_popgym(upstream, env: cartpole.CartPoleTask, params, reset_noise=None, next_noise=None) -> PopGymState:
    """The JAX state of popgym's CartPole ``upstream`` just after its reset: its physics state (in the JAX
    physics' float type: float64 under 64-bit mode, else rounded to float32), the pole up, no step taken;
    for the noisy task the noise of the reset's reading and of the next one (:func:`upcoming_noise`)."""
    if upstream.num_steps != 0 or upstream.steps_beyond_terminated is not None:
        raise ValueError("from_popgym reads a CartPole just after its reset")
    zeros = np.zeros(2, np.float32)
    physics = jnp.asarray(np.asarray(upstream.state, np.float64), cartpole.physics_dtype())
    task = env.start_task(physics, jnp.asarray(zeros if reset_noise is None else reset_noise),
                          jnp.asarray(zeros if next_noise is None else next_noise))
    return env.initial_state(task, params)


def upcoming_noise(upstream, count: int, after_reset_draw: bool = False) -> list[np.ndarray]:
    """popgym's next ``count`` noise draws (float32, as it adds them), from a copy of its generator; with
    ``after_reset_draw`` those that follow a reset's start state (popgym's reset draws the state first)."""
    generator = copy.deepcopy(upstream.np_random)
    if after_reset_draw:
        generator.uniform(low=-0.05, high=0.05, size=(4,))
    return [generator.normal(0, upstream.noise_sigma).astype(np.float32) for _ in range(count)]


def random_policy(physics, rng) -> int:
    return int(rng.integers(2))


def clumsy_controller(physics, rng, mistakes: float = 0.2) -> int:
    """Balances the pole from the full state, but takes the wrong action with probability ``mistakes``."""
    x, x_dot, theta, theta_dot = physics
    action = int(theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0)
    return 1 - action if rng.random() < mistakes else action


def record_episodes(name: str, env, params, policies, seed: int) -> list[dict]:
    """popgym's ``name`` through memgym's wrapper, one episode per policy in ``policies``: what the wrapper
    returns at every step, the hidden state after each step, and what the JAX replay needs: the JAX state
    of each start (:func:`from_popgym`, in the float type of the JAX mode in force) and the noise draws."""
    wrapper = PopGymEnv(name)
    upstream = wrapper.unwrapped
    noisy = hasattr(upstream, "noise_sigma")
    rng = np.random.default_rng(seed)
    wrapper.reset(seed=seed)  # seeds popgym's generator; every recorded episode starts from a reset without seed
    episodes = []
    for policy in policies:
        reset_noise, next_noise = upcoming_noise(upstream, 2, after_reset_draw=True) if noisy else (None, None)
        first_obs, _ = wrapper.reset()
        episode = dict(start=from_popgym(upstream, env, params, reset_noise, next_noise), first_obs=first_obs,
                       actions=[], obs=[], rewards=[], terminated=[], truncated=[], physics=[], noise=[])
        while True:
            action = policy(upstream.state, rng)
            obs, reward, terminated, truncated, info = wrapper.step(action)
            episode["actions"].append(action)
            episode["obs"].append(obs)
            episode["rewards"].append(reward)
            episode["terminated"].append(terminated)
            episode["truncated"].append(truncated)
            episode["physics"].append(np.asarray(upstream.state, np.float64).copy())
            episode["noise"].append(upcoming_noise(upstream, 1)[0] if noisy else np.zeros(2, np.float32))
            if terminated or truncated:
                episode["returns"] = info["episode_return"]
                episode["normalized"] = info["normalized_return"]
                episode["lengths"] = info["episode_length"]
                break
        episodes.append(episode)
    return episodes


# ---------------------------------------------------------------------------------------------
# the JAX side


@functools.partial(jax.jit, static_argnums=0)
def replay(env, starts: PopGymState, actions, noises, params):
    """``env.step_env`` along each episode's ``actions`` (vmapped over episodes, scanned over steps),
    writing popgym's next noise draw into the state after every step."""

    def episode(state, actions, noises):
        def body(state, inputs):
            action, noise = inputs
            obs, state, reward, terminated, truncated, info = gymnax_compat.step_env(
                env, jax.random.key(0), state, action, params)
            state = state.replace(task=state.task.replace(next_noise=noise))
            return state, (obs, reward, terminated, truncated, info, state.task.physics)

        return jax.lax.scan(body, state, (actions, noises))[1]

    return jax.vmap(episode)(starts, actions, noises)


def check_lockstep(name: str, policies, seed: int, x64: bool) -> list[dict]:
    """Record popgym's episodes, replay them on the JAX task, and require the same steps (see the module
    docstring for what is exact in which precision). Returns the recorded episodes."""
    env = CARTPOLE_TASKS[name]()
    params = env.default_params
    with jax.enable_x64(x64):
        episodes = record_episodes(name, env, params, policies, seed)
        longest = max(len(episode["actions"]) for episode in episodes)
        starts = jax.tree.map(lambda *leaves: jnp.stack(leaves), *[episode["start"] for episode in episodes])
        actions = np.zeros((len(episodes), longest), np.int32)
        noises = np.zeros((len(episodes), longest, 2), np.float32)
        for i, episode in enumerate(episodes):
            actions[i, : len(episode["actions"])] = episode["actions"]
            noises[i, : len(episode["noise"])] = episode["noise"]
        first_obs = np.asarray(jax.vmap(lambda state: env.get_obs(state, params))(starts))
        obs, rewards, terminated, truncated, info, physics = jax.tree.map(
            np.asarray, replay(env, starts, jnp.asarray(actions), jnp.asarray(noises), params))
    for i, episode in enumerate(episodes):
        n = len(episode["actions"])
        expected_obs = np.array(episode["obs"])
        if x64:
            np.testing.assert_array_equal(first_obs[i], episode["first_obs"])
            np.testing.assert_array_equal(obs[i, :n], expected_obs)
            np.testing.assert_array_equal(physics[i, :n], np.array(episode["physics"]))
        else:
            np.testing.assert_allclose(first_obs[i], episode["first_obs"], rtol=0, atol=FLOAT32_READING_ATOL)
            np.testing.assert_allclose(obs[i, :n, :2], expected_obs[:, :2], rtol=0, atol=FLOAT32_READING_ATOL)
            np.testing.assert_array_equal(obs[i, :n, 2:], expected_obs[:, 2:])  # the previous action
        np.testing.assert_array_equal(rewards[i, :n], np.float32(episode["rewards"]))
        np.testing.assert_array_equal(terminated[i, :n], episode["terminated"])
        np.testing.assert_array_equal(truncated[i, :n], episode["truncated"])
        # the score: the finished episode's length and return (popgym's fsum rounded to float32: equal)
        assert int(info["episode_length"][i, n - 1]) == episode["lengths"] == n
        assert info["episode_return"][i, n - 1] == np.float32(episode["returns"])
        assert info["normalized_return"][i, n - 1] == np.float32(episode["normalized"])
    return episodes


# ---------------------------------------------------------------------------------------------
# parity


@pytest.mark.parametrize("name", TIERED)
def test_lockstep_with_popgym_under_float64_is_exact(name):
    """Random-action episodes and long balanced ones (to the time limit): every observation, reward, end flag,
    hidden state and episode statistic equal to popgym's, over every difficulty."""
    policies = [random_policy] * 80 + [functools.partial(clumsy_controller, mistakes=0.1)] * 2 + [
        functools.partial(clumsy_controller, mistakes=0.25)] * 2
    episodes = check_lockstep(name, policies, seed=NAMES.index(name), x64=True)
    steps = sum(len(episode["actions"]) for episode in episodes)
    assert steps >= 2000
    assert any(episode["truncated"][-1] for episode in episodes)  # the time limit was reached
    assert sum(episode["terminated"][-1] for episode in episodes) >= 50


@pytest.mark.parametrize("name", TIERED)
def test_lockstep_with_popgym_under_float32(name):
    """The same under JAX's default float32 physics, with random actions: readings within 5e-5, the previous
    action, rewards, flags, lengths and returns exact."""
    episodes = check_lockstep(name, [random_policy] * 120, seed=100 + NAMES.index(name), x64=False)
    assert sum(len(episode["actions"]) for episode in episodes) >= 2000


def test_stepping_on_after_the_pole_fell_is_gymnasiums():
    """``step_env`` on a finished episode keeps going as popgym's env does when stepped on: reward -1 while the
    pole is down (popgym's transform of Gymnasium's 0), terminated stays raised, the state Gymnasium's."""
    upstream = popgym_envs.PositionOnlyCartPoleEasy()
    env = PositionOnlyCartPoleEasy()
    params = env.default_params
    rng = np.random.default_rng(7)
    upstream.reset(seed=7)
    with jax.enable_x64(True), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Gymnasium warns about stepping after termination
        state = from_popgym(upstream, env, params)
        step = jax.jit(functools.partial(gymnax_compat.step_env, env))
        fallen_for = 0
        for _ in range(60):
            action = int(rng.integers(2))
            obs, reward, terminated, truncated, _ = upstream.step(action)
            jax_obs, state, jax_reward, jax_terminated, jax_truncated, _ = step(
                jax.random.key(0), state, action, params)
            np.testing.assert_array_equal(np.asarray(jax_obs)[:2], obs)
            np.testing.assert_array_equal(np.asarray(state.task.physics), upstream.state)
            assert (float(jax_reward), bool(jax_terminated), bool(jax_truncated)) == (
                np.float32(reward), terminated, truncated)
            fallen_for = fallen_for + 1 if upstream.steps_beyond_terminated else fallen_for
    assert fallen_for > 10  # the -1 branch ran


def test_from_popgym_refuses_a_running_episode():
    upstream = popgym_envs.PositionOnlyCartPoleEasy()
    upstream.reset(seed=0)
    upstream.step(0)
    with pytest.raises(ValueError, match="just after its reset"):
        from_popgym(upstream, PositionOnlyCartPoleEasy(), PositionOnlyCartPoleEasy().default_params)


# ---------------------------------------------------------------------------------------------
# the settings


def test_constants_and_difficulties_are_popgyms():
    gym_cartpole = CartPoleEnv()
    for ours, theirs in (("GRAVITY", "gravity"), ("MASS_CART", "masscart"), ("MASS_POLE", "masspole"),
                         ("TOTAL_MASS", "total_mass"), ("HALF_POLE_LENGTH", "length"),
                         ("POLE_MASS_LENGTH", "polemass_length"), ("FORCE", "force_mag"), ("TAU", "tau"),
                         ("THETA_THRESHOLD", "theta_threshold_radians"), ("X_THRESHOLD", "x_threshold")):
        assert getattr(cartpole, ours) == getattr(gym_cartpole, theirs), ours
    assert gym_cartpole.kinematics_integrator == "euler"
    assert sorted(NAMES) == sorted(name for name in dir(popgym_envs) if "CartPole" in name
                                   and name.endswith(("Easy", "Medium", "Hard")))
    for name in NAMES:
        upstream, env = getattr(popgym_envs, name)(), CARTPOLE_TASKS[name]()
        assert env.name == name and env.default_params.max_steps_in_episode == upstream.max_episode_length
        if hasattr(upstream, "noise_sigma"):
            assert env.default_params.noise_sigma == upstream.noise_sigma[0]
        else:
            assert env.default_params.noise_sigma == 0.0
        wrapper = PopGymEnv(name)
        space = env.observation_space(env.default_params)
        np.testing.assert_array_equal(np.asarray(space.low), wrapper.observation_space.low)
        np.testing.assert_array_equal(np.asarray(space.high), wrapper.observation_space.high)
        assert space.shape == wrapper.observation_space.shape and env.num_actions == wrapper.action_space.n == 2
        without = CARTPOLE_TASKS[name](prev_action=False)
        assert without.observation_space(without.default_params).shape == (2,)
        assert repr(env) == f"{name}(prev_action=True)"


def test_custom_settings_like_popgyms_constructor():
    env = PositionOnlyCartPole(max_episode_length=300)
    assert env.name == "PositionOnlyCartPole" and env.default_params.max_steps_in_episode == 300
    noisy = NoisyPositionOnlyCartPole(noise_sigma=0.05, max_episode_length=50)
    assert (noisy.default_params.noise_sigma, noisy.default_params.max_steps_in_episode) == (0.05, 50)
    assert noisy.params(max_episode_length=80).noise_sigma == 0.05  # the rest from the default params
    assert "noise_sigma=0.05" in repr(noisy)


@pytest.mark.parametrize("call, match", [
    (lambda: PositionOnlyCartPole(max_episode_length=0),
     "max_episode_length must be a positive integer.*got max_episode_length=0"),
    (lambda: PositionOnlyCartPole(max_episode_length=2.5),
     "max_episode_length must be.*integer.*got max_episode_length=2.5"),
    (lambda: PositionOnlyCartPole(max_episode_length=True), "max_episode_length.*True"),
    (lambda: VelocityOnlyCartPole(max_episode_length="200"), "max_episode_length.*'200'"),
    (lambda: NoisyPositionOnlyCartPole(noise_sigma=-0.1), r"noise_sigma must be a number in \[0, inf\].*-0.1"),
    (lambda: NoisyPositionOnlyCartPole(noise_sigma=float("nan")), "noise_sigma.*nan"),
    (lambda: NoisyPositionOnlyCartPole(noise_sigma="0.1"), "noise_sigma.*'0.1'"),
    (lambda: PositionOnlyCartPoleEasy().params(noise_sigma=0.1), "noise_sigma is a parameter of Noisy.*has no noise"),
    (lambda: PositionOnlyCartPoleEasy().params(max_episode_length=[5, 0]),
     "max_episode_length.*got max_episode_length=0"),
    (lambda: NoisyPositionOnlyCartPole().params(max_episode_length=[5, 6], noise_sigma=[0.1, 0.2, 0.3]),
     "max_episode_length and noise_sigma must broadcast"),
    (lambda: PositionOnlyCartPoleEasy(prev_action="yes"), "prev_action must be True or False.*'yes'"),
])
def test_invalid_arguments_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_difficulty_classes_take_only_prev_action():
    with pytest.raises(TypeError):
        PositionOnlyCartPoleEasy(max_episode_length=10)


# ---------------------------------------------------------------------------------------------
# jit, vmap, auto-reset, precision


def rollout(env, params, num_envs: int, steps: int, seed: int = 0, policy: str = "random"):
    """``num_envs`` auto-resetting envs for ``steps`` steps under one jit: (obs, rewards, terminated, truncated,
    info) stacked over time. ``policy``: random actions, or the clumsy controller on each env's own state."""

    @jax.jit
    def run(key):
        obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, num_envs), params)

        def body(carry, key):
            obs, state = carry
            action_key, flip_key, step_key = jax.random.split(key, 3)
            if policy == "random":
                action = jax.random.randint(action_key, (num_envs,), 0, 2)
            else:
                x, x_dot, theta, theta_dot = state.task.physics.T
                action = (theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0).astype(jnp.int32)
                action = jnp.where(jax.random.uniform(flip_key, (num_envs,)) < 0.25, 1 - action, action)
            obs, state, reward, terminated, truncated, info = jax.vmap(
                functools.partial(gymnax_compat.step, env), in_axes=(0, 0, 0, None))(
                jax.random.split(step_key, num_envs), state, action, params)
            return (obs, state), (obs, reward, terminated, truncated, info)

        return jax.lax.scan(body, (obs, state), jax.random.split(key, steps))[1]

    return jax.tree.map(np.asarray, run(jax.random.key(seed)))


@pytest.mark.parametrize("family", ["PositionOnlyCartPoleEasy", "VelocityOnlyCartPoleMedium",
                                    "NoisyPositionOnlyCartPoleHard"])
def test_jit_and_vmap_over_1024_envs(family):
    env = CARTPOLE_TASKS[family]()
    params = env.default_params
    obs, rewards, terminated, truncated, info = rollout(env, params, 1024, 64)
    assert obs.shape == (64, 1024, 4) and obs.dtype == np.float32 and np.isfinite(obs).all()
    done = terminated | truncated
    assert done.sum() > 1024  # random actions drop the pole within ~20 steps
    np.testing.assert_array_equal(rewards, np.float32(1 / params.max_steps_in_episode))
    lengths = info["episode_length"][done]
    assert lengths.min() >= 8  # the fastest fall (from a corner of the start box, pushed one way) takes 8 steps
    np.testing.assert_array_equal(info["episode_return"][done],
                                  (lengths / params.max_steps_in_episode).astype(np.float32))
    # a new episode's observation: no previous action; its readings are the position and the angle
    after_reset = obs[done]  # auto-reset: the step that ends an episode returns the next one's first observation
    np.testing.assert_array_equal(after_reset[:, 2:], 0.0)
    assert np.abs(after_reset[:, :2]).max() <= 0.05 + 6 * params.noise_sigma + 1e-6
    final = info["final_observation"][done]
    np.testing.assert_array_equal(final[:, 2:].sum(axis=1), 1.0)  # the last action, one-hot


def test_float64_physics_stays_gymnasiums_inside_a_jitted_vmapped_rollout():
    """The physics compiled as a training loop compiles it (256 auto-resetting envs, 64 steps, one ``lax.scan``):
    every transition (each state and action, from the rollout) is Gymnasium's step to the bit."""
    env = VelocityOnlyCartPoleEasy()
    params = env.default_params
    with jax.enable_x64(True):
        @jax.jit
        def run(key):
            _, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key, 256), params)

            def body(state, key):
                action = jax.random.randint(key, (256,), 0, 2)
                _, after, _, terminated, truncated, _ = jax.vmap(
                    functools.partial(gymnax_compat.step, env), in_axes=(0, 0, 0, None))(
                    jax.random.split(key, 256), state, action, params)
                # the state the step reached (before any auto-reset), from the physics of the step alone
                reached = jax.vmap(cartpole.cartpole_dynamics)(state.task.physics, action)
                return after, (state.task.physics, action, reached, terminated | truncated)

            return jax.lax.scan(body, state, jax.random.split(key, 64))[1]

        before, actions, reached, done = jax.tree.map(np.asarray, run(jax.random.key(2)))
    assert before.dtype == np.float64 and done.sum() > 256
    gym_cartpole = CartPoleEnv()
    gym_cartpole.reset(seed=0)
    for t in range(0, 64, 4):  # every 4th step of every env: 4,096 transitions
        for i in range(256):
            gym_cartpole.state, gym_cartpole.steps_beyond_terminated = before[t, i].copy(), None
            gym_cartpole.step(int(actions[t, i]))
            np.testing.assert_array_equal(reached[t, i], gym_cartpole.state)
            if not done[t, i]:
                np.testing.assert_array_equal(before[t + 1, i] if t < 63 else reached[t, i], gym_cartpole.state)


@pytest.mark.slow(seconds=12)
def test_truncation_follows_traced_max_episode_length_under_vmap():
    """One compiled step for a batch of lengths: a balanced pole is truncated on each env's own last step."""
    env = PositionOnlyCartPoleEasy()
    params = env.params(max_episode_length=np.array([5, 17, 40, 200]))
    obs, state = jax.vmap(env.reset)(jax.random.split(jax.random.key(0), 4), params)
    step = jax.jit(jax.vmap(functools.partial(gymnax_compat.step, env)))
    ends = [[] for _ in range(4)]
    for t in range(1, 45):
        x, x_dot, theta, theta_dot = np.asarray(state.task.physics).T
        action = jnp.asarray((theta + 0.5 * theta_dot + 0.05 * x + 0.1 * x_dot > 0).astype(np.int32))
        obs, state, reward, terminated, truncated, info = step(jax.random.split(jax.random.key(t), 4), state, action,
                                                               params)
        assert not np.asarray(terminated).any()
        for i in np.flatnonzero(np.asarray(truncated)):
            ends[i].append(t)
        np.testing.assert_array_equal(np.asarray(reward), np.float32(1 / np.array([5, 17, 40, 200])))
    assert ends == [list(range(5, 45, 5)), [17, 34], [40], []]


@pytest.mark.slow(seconds=17)
def test_auto_reset_and_step_env_agree():
    env = VelocityOnlyCartPole(max_episode_length=3)
    params = env.default_params
    key = jax.random.key(1)
    obs, state = env.reset(key, params)
    np.testing.assert_array_equal(np.asarray(obs)[:2], np.asarray(state.task.physics)[[0, 2]].astype(np.float32))
    for t in range(3):
        one = gymnax_compat.step_env(env, key, state, 1, params)
        obs, after, reward, terminated, truncated, info = gymnax_compat.step(env, key, state, 1, params)
        np.testing.assert_array_equal(np.asarray(info["final_observation"]), np.asarray(one[0]))
        np.testing.assert_array_equal(np.asarray(one[0])[:2],
                                      np.asarray(one[1].task.physics)[[1, 3]].astype(np.float32))  # the velocities
        assert bool(truncated) == (t == 2) and not bool(terminated)
        state = after
    assert int(state.time) == 0 and np.asarray(obs)[2:].tolist() == [0.0, 0.0]
    assert float(info["episode_return"]) == 1.0 and int(info["episode_length"]) == 3


def test_exact_ratio_is_numpys_quotient_rounded_to_float32():
    """Every ``n / L`` with ``0 <= n <= L <= 1024`` (525,824 pairs, one vectorised call), large numerators, and
    a batch sharing its denominator (where XLA multiplies by the reciprocal instead of dividing): equal to NumPy's
    float64 quotient rounded to float32, which is ``math.fsum`` of ``n`` rewards ``1 / L`` rounded to float32
    (popgym's return)."""
    lengths, steps = np.meshgrid(np.arange(1, 1025), np.arange(0, 1025), indexing="ij")
    keep = steps <= lengths
    n, d = steps[keep].astype(np.int32), lengths[keep].astype(np.int32)
    np.testing.assert_array_equal(np.asarray(jax.jit(exact_ratio)(n, d)), (n / d).astype(np.float32))
    shared = jax.jit(jax.vmap(exact_ratio, in_axes=(0, None)))
    for length in (200, 400, 600, 1000):
        steps = np.arange(length + 1, dtype=np.int32)
        np.testing.assert_array_equal(np.asarray(shared(steps, length)), (steps / length).astype(np.float32))
    big = np.arange(0, 2**24, 4099, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(jax.jit(exact_ratio)(big, np.full_like(big, 4093))),
                                  (big / 4093).astype(np.float32))
    for length in (200, 400, 600):
        ratios = np.asarray(jax.jit(exact_ratio)(np.arange(length + 1), np.full(length + 1, length)))
        assert all(ratios[k] == np.float32(math.fsum([1 / length] * k)) for k in range(length + 1))


def test_the_gymnasium_adapter_passes_check_env():
    env = NoisyPositionOnlyCartPoleHard()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no spec, so no render-mode check
        check_env(GymnasiumAdapter(env, env.default_params))


@pytest.mark.slow(seconds=14)
def test_physics_follows_jaxs_float_type():
    env = PositionOnlyCartPoleEasy()
    for x64, dtype in ((False, np.float32), (True, np.float64)):
        with jax.enable_x64(x64):
            obs, state = env.reset(jax.random.key(0), env.default_params)
            assert state.task.physics.dtype == dtype and obs.dtype == np.float32
            obs, state, *_ = gymnax_compat.step(env, jax.random.key(1), state, 0, env.default_params)
            assert state.task.physics.dtype == dtype and obs.dtype == np.float32


# ---------------------------------------------------------------------------------------------
# distributions (popgym's randomness cannot be replayed)


@pytest.mark.parametrize("x64", [False, True])
def test_start_states_and_noise_have_popgyms_distributions(x64):
    """4,096 resets: each start-state component is uniform on (-0.05, 0.05) and the noise (of sigma 0.3,
    NoisyPositionOnlyCartPoleHard) normal, as popgym draws them: a one-sample Kolmogorov-Smirnov test of
    each, p > 0.001 (fixed keys); the noise of the first reading and of the next one are independent."""
    env = CARTPOLE_TASKS["NoisyPositionOnlyCartPoleHard"]()
    params = env.default_params
    with jax.enable_x64(x64):
        obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.key(3), 4096), params)
        physics, next_noise = np.asarray(state.task.physics), np.asarray(state.task.next_noise)
        obs = np.asarray(obs)
    assert np.abs(physics).max() < 0.05
    for component in physics.T:
        assert stats.kstest(component, stats.uniform(loc=-0.05, scale=0.1).cdf).pvalue > 1e-3
    for component in next_noise.T:
        assert stats.kstest(component, stats.norm(scale=0.3).cdf).pvalue > 1e-3
    # the first reading: the rounded position plus its own draw, clipped to ±(4.8, 0.419) (the angle's often is)
    first_noise = obs[:, 0] - physics[:, 0].astype(np.float32)
    assert stats.kstest(first_noise, stats.norm(scale=0.3).cdf).pvalue > 1e-3
    assert abs(np.corrcoef(first_noise, next_noise[:, 0])[0, 1]) < 0.06
    np.testing.assert_array_equal(np.abs(obs[:, 1]).max(), cartpole.POSITION_BOUNDS[1])
    assert (np.abs(obs[:, 1]) == cartpole.POSITION_BOUNDS[1]).mean() > 0.05


def test_popgym_episode_lengths_under_a_fixed_policy_match_in_distribution():
    """Closed loop, float32 physics: the clumsy controller (wrong action 25% of the time) on PositionOnlyCartPoleEasy,
    600 popgym episodes against 1,024 JAX episodes (the first of each env). Their lengths (10 to 200 steps, about a
    third truncated) pass a two-sample Kolmogorov-Smirnov test, p > 0.001."""
    wrapper = PopGymEnv("PositionOnlyCartPoleEasy")
    upstream = wrapper.unwrapped
    rng = np.random.default_rng(11)
    wrapper.reset(seed=11)
    popgym_lengths = []
    for _ in range(600):
        wrapper.reset()
        while True:
            _, _, terminated, truncated, info = wrapper.step(clumsy_controller(upstream.state, rng, mistakes=0.25))
            if terminated or truncated:
                popgym_lengths.append(info["episode_length"])
                break
    env = PositionOnlyCartPoleEasy()
    _, _, terminated, truncated, info = rollout(env, env.default_params, 1024, 200, seed=5, policy="clumsy")
    done = terminated | truncated
    first_end = done.argmax(axis=0)
    assert done.any(axis=0).all()
    jax_lengths = info["episode_length"][first_end, np.arange(1024)]
    popgym_lengths = np.array(popgym_lengths)
    assert 0.2 < (popgym_lengths == 200).mean() < 0.5 and 0.2 < (jax_lengths == 200).mean() < 0.5
    assert stats.ks_2samp(popgym_lengths, jax_lengths).pvalue > 1e-3
