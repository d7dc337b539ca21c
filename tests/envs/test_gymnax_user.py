"""A gymnax user's code on memgym's T-Maze, unchanged: the gymnax contract, hashable params, and a PureJaxRL-style
recurrent PPO held the memorax way (``examples/gymnax_ppo.py``: gymnax's API and plain flax/optax/distrax, no
memgym agent code, as a gymnax user's training script would be)."""

from __future__ import annotations

import functools

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import environment

from examples.gymnax_ppo import StaticPPO, success_rates
from memgym.envs import JAX_ENVS, make_jax


def test_the_tmaze_is_a_gymnax_environment():
    env, params = make_jax("memgym/TMaze-v0", corridor_length=7)
    assert isinstance(env, environment.Environment)
    assert isinstance(params, environment.EnvParams) and int(params.corridor_length) == 7
    again, again_params = gymnax.make("memgym/TMaze-v0", corridor_length=7)  # registered with gymnax
    assert type(again) is type(env) and int(again_params.corridor_length) == 7
    for bad, message in (("memgym/TMazeJax-v0", "memgym/TMaze-v0"), ("memgym/Tmaze-v0", "unknown"),
                         ("memgym/MemoryMaze-9x9-v0", "without a JAX version")):
        with pytest.raises(ValueError, match=message):
            make_jax(bad)
    with pytest.raises(ValueError, match="max_steps_in_episode"):  # the params' name is not make_jax's
        make_jax("memgym/TMaze-v0", max_steps_in_episode=5)
    key = jax.random.key(0)
    obs, state = env.reset(key, env.default_params)  # a gymnax user's first call
    obs, state = env.reset(key)  # params are optional
    assert isinstance(state, environment.EnvState) and int(state.time) == 0
    action = env.action_space(params).sample(key)
    assert 0 <= int(action) < env.num_actions == 4
    assert env.observation_space(params).shape == obs.shape == (16,)
    obs, state, reward, terminated, truncated, info = env.step(key, state, action)
    assert not env.is_terminal(state, params) and int(state.time) == 1 and "success" in info
    short = params.replace(max_steps_in_episode=3)
    obs, state = env.reset(key, short)
    for _ in range(3):
        obs, state, reward, terminated, truncated, info = env.step(key, state, 1, short)
    assert bool(truncated) and not bool(terminated) and int(state.time) == 0  # timed out, auto-reset
    np.testing.assert_array_equal(info["final_observation"][:2], [0, 0])  # the cue was only in the first obs


@pytest.mark.parametrize("env_id", sorted(JAX_ENVS))
def test_env_params_are_hashable_python_scalars(env_id):
    """Every JAX environment's params are Python scalars, as gymnax's defaults are: equal params hash equally, so a
    consumer may hold them in a static argument of ``jax.jit`` (memorax's PPO does)."""
    params = make_jax(env_id)[1]
    assert hash(params) == hash(make_jax(env_id)[1]) and params == make_jax(env_id)[1]


# A family's difficulties share one params class and one step function (they differ in the params' values), so
# one difficulty per family is jitted with its params static.
ONE_PER_FAMILY = sorted(env_id for env_id in JAX_ENVS if not env_id.endswith(("Medium-v0", "Hard-v0")))


@pytest.mark.parametrize("env_id", ONE_PER_FAMILY)
def test_env_params_jit_as_a_static_argument(env_id):
    """Params held static by ``jax.jit``, as memorax's PPO holds them, roll the environment out."""
    env, params = make_jax(env_id)

    @functools.partial(jax.jit, static_argnums=(1,))
    def rollout(key, params):
        obs, state = env.reset(key, params)

        def step(state, key):
            action = env.action_space(params).sample(key)
            _, state, reward, *_ = env.step(key, state, action, params)
            return state, reward

        return jax.lax.scan(step, state, jax.random.split(key, 8))[1]

    rewards = rollout(jax.random.key(0), params)
    assert rewards.shape == (8,) and bool(jnp.isfinite(rewards).all())


def test_a_traced_corridor_length_still_varies_inside_jit():
    env, params = make_jax("memgym/TMaze-v0", corridor_length=8)
    positions = jax.jit(lambda length: env.reset(jax.random.key(0), params.replace(corridor_length=length))[1].position)
    assert int(positions(jnp.int32(8))) == int(positions(jnp.int32(120))) == 0
    junction = jax.jit(lambda length: env.step(jax.random.key(1), env.reset(jax.random.key(0), params.replace(
        corridor_length=length))[1], 0, params.replace(corridor_length=length))[1].position)
    assert int(junction(jnp.int32(1))) == 0 and int(junction(jnp.int32(9))) == 1  # a corridor of 1 is all junction


@pytest.mark.slow
def test_purejaxrl_style_recurrent_ppo_learns_the_tmaze():
    """Success well above chance (0.5) at a short corridor; the memoryless guess stays near 0.5. The algorithm is
    held as memorax holds its PPO (:class:`StaticPPO`, a static argument of ``jax.jit``)."""
    env, env_params = make_jax("memgym/TMaze-v0", corridor_length=4)
    metrics = jax.jit(StaticPPO.train, static_argnums=0)(StaticPPO(env_params.replace(max_steps_in_episode=16)),
                                                          jax.random.key(0))
    first, rate = success_rates(metrics)
    assert rate > 0.9, f"success over the last fifth {rate:.3f} (first updates {first:.3f})"
