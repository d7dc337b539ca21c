"""popgym 1.0.7's Pendulums in JAX (memgym.envs.popgym_jax.pendulum) against popgym's own, step for step.

The parity tests drive popgym's environment through memgym's Gymnasium wrapper (``PopGymEnv``: the observation
the agents see, with the previous action, and the episode's return in ``info``) and step the JAX task beside it
from the same hidden state: after each of popgym's resets its physics state goes into a fresh JAX state, and for
the noisy task popgym's noise draws (read from a copy of its generator, so popgym's own stream is untouched) go
into the JAX state's ``next_noise`` before each step.

Under JAX's 64-bit mode every observation, reward, end flag and hidden state must equal popgym's. Under JAX's
default float32 the pole's unstable top amplifies the rounding (see the module docstring): over the first 50
steps of each episode the readings must agree within 1e-4 and the rewards within 1e-6, and the returns of whole
episodes must match in distribution. The episode's
return is the compensated float32 sum of the float32 rewards, within the bound the base class states of popgym's
float64 score. popgym's randomness (start states, noise) cannot be replayed through ``jax.random``; the
distributions are compared with stated tests (Kolmogorov-Smirnov, fixed keys).

popgym is an optional extra, so the whole module is skipped without it.
"""

from __future__ import annotations

import copy
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

popgym_envs = pytest.importorskip("popgym.envs")
stats = pytest.importorskip("scipy.stats")

from memgym.envs.functional import GymnasiumAdapter  # noqa: E402
from memgym.envs.popgym import PopGymEnv  # noqa: E402
from memgym.envs.popgym_jax import pendulum  # noqa: E402
from memgym.envs.popgym_jax.pendulum import (  # noqa: E402
    PENDULUM_TASKS,
    NoisyPositionOnlyPendulum,
    PositionOnlyPendulum,
)

NAMES = list(PENDULUM_TASKS)
# PositionOnlyPendulumEasy in the fast tier (the noisy task adds only the noise), the rest in the slow one
TIERED = [pytest.param(name, marks=() if name == "PositionOnlyPendulumEasy" else pytest.mark.slow(seconds=12))
          for name in NAMES]
#: under float32 physics: the readings' and the rewards' tolerances over the first FLOAT32_STEPS steps of an episode
FLOAT32_READING_ATOL, FLOAT32_REWARD_ATOL, FLOAT32_STEPS = 1e-4, 1e-6, 50


def upcoming_noise(upstream, after_reset_draw: bool = False) -> np.ndarray:
    """popgym's next noise draw (float32, as it adds it), from a copy of its generator; with ``after_reset_draw``
    the one that follows a reset's start state (popgym's reset draws the state first)."""
    generator = copy.deepcopy(upstream.np_random)
    if after_reset_draw:
        generator.uniform(low=-np.array([np.pi, 1.0]), high=np.array([np.pi, 1.0]))
    return generator.normal(0, upstream.noise_sigma).astype(np.float32)


def check_lockstep(name: str, episodes: int, seed: int, x64: bool) -> int:
    """popgym's ``name`` and the JAX task side by side for ``episodes`` episodes of random torques (some at the
    bounds); returns the steps compared (under float32: the first ``FLOAT32_STEPS`` of each episode)."""
    env = PENDULUM_TASKS[name]()
    params = env.default_params
    wrapper = PopGymEnv(name)
    upstream = wrapper.unwrapped
    rng = np.random.default_rng(seed)
    wrapper.reset(seed=seed)
    steps = 0
    with jax.enable_x64(x64):
        step = jax.jit(lambda state, action: env.step_env(jax.random.key(0), state, action, params))
        for _ in range(episodes):
            reset_noise = upcoming_noise(upstream, after_reset_draw=True) if env.noisy else np.zeros(2, np.float32)
            first_obs, _ = wrapper.reset()
            physics = jnp.asarray(np.asarray(upstream.state, np.float64), pendulum.physics_dtype())
            next_noise = upcoming_noise(upstream) if env.noisy else np.zeros(2, np.float32)
            state = env.initial_state(env.start_task(physics, jnp.asarray(reset_noise), jnp.asarray(next_noise)),
                                      params)
            compare(np.asarray(env.get_obs(state, params)), first_obs, x64, FLOAT32_READING_ATOL)
            rewards = []
            while x64 or len(rewards) < FLOAT32_STEPS:
                action = random_torque(rng)
                obs, reward, terminated, truncated, info = wrapper.step(action)
                obs_jax, state, reward_jax, terminated_jax, info_jax = step(state, jnp.asarray(action))
                if env.noisy:
                    state = state.replace(task=state.task.replace(next_noise=jnp.asarray(upcoming_noise(upstream))))
                compare(np.asarray(obs_jax), obs, x64, FLOAT32_READING_ATOL)
                compare(np.asarray(reward_jax), np.float32(reward), x64, FLOAT32_REWARD_ATOL)
                if x64:
                    np.testing.assert_array_equal(np.asarray(state.task.physics), upstream.state)
                assert not terminated and not bool(terminated_jax)
                assert bool(env.is_truncated(state, params)) == truncated
                rewards.append(float(reward_jax))
                steps += 1
                if truncated:
                    assert int(info_jax["episode_length"]) == info["episode_length"] == params.max_steps_in_episode
                    # the compensated float32 sum: within the base class's bound of popgym's fsum
                    bound = 2.0 ** -24 * (np.abs(rewards).sum() + abs(info["episode_return"]))
                    assert abs(float(info_jax["episode_return"]) - info["episode_return"]) <= bound
                    break
    return steps


def random_torque(rng: np.random.Generator) -> np.ndarray:
    """A float32 torque in [-2, 2], one time in ten a bound itself."""
    if rng.random() < 0.1:
        return np.float32([rng.choice([-2.0, 2.0])])
    return rng.uniform(-2.0, 2.0, (1,)).astype(np.float32)


def compare(got: np.ndarray, expected: np.ndarray, exact: bool, atol: float) -> None:
    if exact:
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=0, atol=atol)


# ---------------------------------------------------------------------------------------------
# parity


@pytest.mark.parametrize("name", TIERED)
def test_lockstep_with_popgym_under_float64_is_exact(name):
    """Whole episodes of random torques: every observation (the previous action included), reward, end flag and
    hidden state equal to popgym's, over every difficulty; thousands of steps."""
    assert check_lockstep(name, episodes=20, seed=NAMES.index(name), x64=True) >= 2000


@pytest.mark.parametrize("name", TIERED)
def test_lockstep_with_popgym_under_float32(name):
    """The same under JAX's default float32 physics, over the first 50 steps of each episode: readings within 1e-4,
    rewards within 1e-6, the rest exact."""
    assert check_lockstep(name, episodes=20, seed=100 + NAMES.index(name), x64=False) >= 1000


@pytest.mark.slow(seconds=13)
def test_returns_of_random_torque_episodes_match_popgyms_in_distribution():
    """Float32 physics, whole episodes: 300 popgym episodes of random torques against 1,024 JAX episodes (random
    torques drawn by JAX); their returns pass a two-sample Kolmogorov-Smirnov test, p > 0.001."""
    name = "PositionOnlyPendulumEasy"
    wrapper = PopGymEnv(name)
    rng = np.random.default_rng(7)
    wrapper.reset(seed=7)
    popgym_returns = []
    for _ in range(300):
        wrapper.reset()
        while True:
            *_, truncated, info = wrapper.step(random_torque(rng))
            if truncated:
                popgym_returns.append(info["episode_return"])
                break
    env = PENDULUM_TASKS[name]()
    params = env.default_params

    def episode(key):
        reset_key, key = jax.random.split(key)
        _, state = env.reset(reset_key, params)

        def step(state, key):
            torque_key, bound_key, pick_key, step_key = jax.random.split(key, 4)
            torque = jnp.where(jax.random.uniform(bound_key) < 0.1, jnp.where(jax.random.uniform(pick_key) < 0.5,
                               -2.0, 2.0), jax.random.uniform(torque_key, (), minval=-2.0, maxval=2.0))
            _, state, _, _, info = env.step_env(step_key, state, torque[None], params)
            return state, info["episode_return"]

        return jax.lax.scan(step, state, jax.random.split(key, params.max_steps_in_episode))[1][-1]

    jax_returns = np.asarray(jax.jit(jax.vmap(episode))(jax.random.split(jax.random.key(8), 1024)))
    assert stats.ks_2samp(popgym_returns, jax_returns).pvalue > 1e-3


def test_constants_and_difficulties_are_popgyms():
    for name, cls in PENDULUM_TASKS.items():
        ours, theirs = cls(), getattr(popgym_envs, name)()
        assert ours.default_params.max_steps_in_episode == theirs.max_episode_length
        if ours.noisy:
            assert ours.default_params.noise_sigma == theirs.noise_sigma[0]
        upper = theirs.observation_space
        low, high = ours.task_observation_bounds(ours.default_params)
        np.testing.assert_array_equal(low, upper.low)
        np.testing.assert_array_equal(high, upper.high)
        space = ours.action_space(ours.default_params)
        assert space.shape == theirs.action_space.shape and float(space.low) == theirs.action_space.low[0]
        wrapped = PopGymEnv(name)
        assert ours.observation_space(ours.default_params).shape == wrapped.observation_space.shape
        np.testing.assert_array_equal(ours.observation_space(ours.default_params).low, wrapped.observation_space.low)
    assert pendulum.REWARD_LOW == -16.2736044 and pendulum.DT == theirs.dt and pendulum.MAX_SPEED == theirs.max_speed


def test_custom_settings_like_popgyms_constructor():
    env = NoisyPositionOnlyPendulum(noise_sigma=0.25, max_episode_length=30)
    assert env.default_params.noise_sigma == 0.25 and env.default_params.max_steps_in_episode == 30
    assert repr(env) == "NoisyPositionOnlyPendulum(max_episode_length=30, noise_sigma=0.25, prev_action=True)"
    obs, _ = env.reset(jax.random.key(0), env.default_params)
    assert obs.shape == (3,)  # two readings and the torque
    assert PositionOnlyPendulum(prev_action=False).reset(jax.random.key(0))[0].shape == (2,)


@pytest.mark.parametrize("call, match", [
    (lambda: PositionOnlyPendulum(max_episode_length=0), "max_episode_length"),
    (lambda: PositionOnlyPendulum(max_episode_length=2.5), "max_episode_length"),
    (lambda: NoisyPositionOnlyPendulum(noise_sigma=-0.1), "noise_sigma"),
    (lambda: PositionOnlyPendulum().params(noise_sigma=0.1), "noise_sigma is a parameter of Noisy.*has no noise"),
])
def test_invalid_arguments_raise_value_errors_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_truncation_follows_traced_max_episode_length_under_vmap():
    env = PositionOnlyPendulum()
    params = env.params(max_episode_length=np.array([3, 5, 7]))

    def run(key, params):
        _, state = env.reset(key, params)

        def step(state, key):
            _, state, _, _, truncated, _ = env.step(key, state, jnp.zeros(1), params)
            return state, truncated

        return jax.lax.scan(step, state, jax.random.split(key, 7))[1]

    truncated = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 3), params))
    assert truncated.argmax(axis=1).tolist() == [2, 4, 6]


def test_the_gymnasium_adapter_passes_check_env():
    env = NoisyPositionOnlyPendulum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no spec, so no render-mode check
        check_env(GymnasiumAdapter(env, env.default_params))


# ---------------------------------------------------------------------------------------------
# distributions (popgym's randomness cannot be replayed)


@pytest.mark.parametrize("x64", [False, True])
def test_start_states_and_noise_have_popgyms_distributions(x64):
    """4,096 resets: the angle uniform on [-pi, pi), the angular velocity on [-1, 1), the noise (sigma 0.3,
    NoisyPositionOnlyPendulumHard) normal, as popgym draws them: one-sample Kolmogorov-Smirnov tests, p > 0.001
    (fixed keys); the first reading is the clean one plus its own noise, clipped to [-1, 1]."""
    env = PENDULUM_TASKS["NoisyPositionOnlyPendulumHard"]()
    params = env.default_params
    with jax.enable_x64(x64):
        obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(jax.random.split(jax.random.key(3), 4096), params)
        physics, next_noise, obs = map(np.asarray, (state.task.physics, state.task.next_noise, obs))
    assert stats.kstest(physics[:, 0], stats.uniform(loc=-np.pi, scale=2 * np.pi).cdf).pvalue > 1e-3
    assert stats.kstest(physics[:, 1], stats.uniform(loc=-1, scale=2).cdf).pvalue > 1e-3
    for component in next_noise.T:
        assert stats.kstest(component, stats.norm(scale=0.3).cdf).pvalue > 1e-3
    clean = np.cos(physics[:, 0]).astype(np.float32)
    far = np.abs(clean) < 0.1  # 3 sigma from the clipping bounds: the reading's noise is the plain draw there
    assert far.sum() > 200 and stats.kstest(obs[far, 0] - clean[far], stats.norm(scale=0.3).cdf).pvalue > 1e-3
    assert np.abs(obs[:, :2]).max() == 1.0 and (np.abs(obs[:, :2]) == 1.0).mean() > 0.05  # clipped to [-1, 1]
    assert not obs[:, 2].any()  # no previous action after a reset
