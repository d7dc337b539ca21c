"""A gymnax user's code on memgym's T-Maze, unchanged: the gymnax contract, and a PureJaxRL-style recurrent PPO.

Everything below uses only gymnax's API (``gymnax.make``, ``env.reset``/``env.step``,
``default_params``, ``.replace``, gymnax spaces and ``LogWrapper``) and plain
flax/optax/distrax — no memgym agent code — as a gymnax user's training script would.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import distrax
import flax.linen as nn
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from gymnax.environments import environment
from gymnax.wrappers import LogWrapper

from memgym.envs import JAX_ENVS, make_jax


def test_the_tmaze_is_a_gymnax_environment():
    env, params = make_jax("memgym/TMaze-v0", corridor_length=7)
    assert isinstance(env, environment.Environment)
    assert isinstance(params, environment.EnvParams) and int(params.corridor_length) == 7
    again, again_params = gymnax.make("memgym/TMaze-v0", corridor_length=7)  # registered with gymnax
    assert type(again) is type(env) and int(again_params.corridor_length) == 7
    for bad, message in (("memgym/TMazeJax-v0", "memgym/TMaze-v0"), ("memgym/Tmaze-v0", "unknown"),
                         ("memgym/popgym-MultiarmedBanditEasy-v0", "without a JAX version")):
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


class ScannedGRU(nn.Module):
    """A GRU over time that resets its carry where an episode starts (PureJaxRL's ScannedRNN)."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, inputs):
        obs, start = inputs
        carry = jnp.where(start[:, None], jnp.zeros_like(carry), carry)
        carry, y = nn.GRUCell(carry.shape[-1])(carry, obs)
        return carry, y


class ActorCritic(nn.Module):
    num_actions: int

    @nn.compact
    def __call__(self, carry, obs, start):
        x = nn.relu(nn.Dense(64)(obs))
        carry, x = ScannedGRU()(carry, (x, start))
        logits = nn.Dense(self.num_actions)(nn.relu(nn.Dense(64)(x)))
        value = nn.Dense(1)(nn.relu(nn.Dense(64)(x)))[..., 0]
        return carry, distrax.Categorical(logits=logits), value


def make_train(env_params=None, num_envs=16, num_steps=32, total_steps=200_704, epochs=4, minibatches=4, lr=3e-3,
               gamma=0.99, lam=0.95, clip=0.2, ent_coef=0.01, hidden=64, corridor_length=4):
    env, default_params = make_jax("memgym/TMaze-v0", corridor_length=corridor_length)
    if env_params is None:
        env_params = default_params.replace(max_steps_in_episode=4 * corridor_length)
    env = LogWrapper(env)
    network = ActorCritic(env.action_space(env_params).n)
    updates = total_steps // (num_envs * num_steps)
    schedule = optax.linear_schedule(lr, 0.0, updates * epochs * minibatches)  # PureJaxRL's anneal_lr
    tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(schedule, eps=1e-5))

    def train(key):
        key, key_init, key_reset = jax.random.split(key, 3)
        carry = jnp.zeros((num_envs, hidden))
        obs_shape = env.observation_space(env_params).shape
        params = network.init(key_init, carry, jnp.zeros((1, num_envs) + obs_shape), jnp.zeros((1, num_envs), bool))
        opt_state = tx.init(params)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, num_envs), env_params)
        start = jnp.ones(num_envs, bool)

        def env_step(runner, _):
            params, env_state, obs, start, carry, key = runner
            key, key_act, key_env = jax.random.split(key, 3)
            new_carry, pi, value = network.apply(params, carry, obs[None], start[None])
            action = pi.sample(seed=key_act)[0]
            obs_next, env_state, reward, terminated, truncated, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key_env, num_envs), env_state, action, env_params
            )
            done = terminated | truncated
            step = dict(obs=obs, start=start, action=action, value=value[0], log_prob=pi.log_prob(action)[0],
                        reward=reward, terminated=terminated, done=done, success=info["success"])
            return (params, env_state, obs_next, done, new_carry, key), step

        def update(runner, _):
            params, opt_state, env_state, obs, start, carry, key = runner
            carry_in = carry
            (_, env_state, obs, start, carry, key), traj = jax.lax.scan(
                env_step, (params, env_state, obs, start, carry, key), None, num_steps
            )
            _, _, last_value = network.apply(params, carry, obs[None], start[None])

            def gae_step(next_, step):
                advantage, next_value = next_
                delta = step["reward"] + gamma * next_value * (1 - step["terminated"]) - step["value"]
                advantage = delta + gamma * lam * (1 - step["done"]) * advantage
                return (advantage, step["value"]), advantage

            _, advantages = jax.lax.scan(gae_step, (jnp.zeros(num_envs), last_value[0]), traj, reverse=True)
            targets = advantages + traj["value"]

            def loss_fn(params, carry, batch, advantages, targets):
                _, pi, value = network.apply(params, carry, batch["obs"], batch["start"])
                ratio = jnp.exp(pi.log_prob(batch["action"]) - batch["log_prob"])
                adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                actor = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
                critic = 0.5 * ((value - targets) ** 2).mean()
                return actor + 0.5 * critic - ent_coef * pi.entropy().mean()

            def epoch(state, key):
                params, opt_state = state
                order = jax.random.permutation(key, num_envs).reshape(minibatches, -1)

                def minibatch(state, envs):
                    params, opt_state = state
                    pick = lambda x: x[:, envs]  # noqa: E731  (time-major: minibatches of whole env streams)
                    grads = jax.grad(loss_fn)(params, carry_in[envs], jax.tree.map(pick, traj), pick(advantages),
                                              pick(targets))
                    changes, opt_state = tx.update(grads, opt_state, params)
                    return (optax.apply_updates(params, changes), opt_state), None

                return jax.lax.scan(minibatch, (params, opt_state), order)[0], None

            key, key_epochs = jax.random.split(key)
            (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key_epochs, epochs))
            finished = traj["done"].sum()
            metrics = dict(episodes=finished, successes=(traj["success"] & traj["done"]).sum())
            return (params, opt_state, env_state, obs, start, carry, key), metrics

        runner = (params, opt_state, env_state, obs, start, carry, key)
        _, metrics = jax.lax.scan(update, runner, None, updates)
        return metrics

    return train


@dataclasses.dataclass(frozen=True)
class StaticPPO:
    """memorax's way of holding an algorithm: a frozen dataclass with the env params in it, passed to ``jax.jit``
    as a static argument, so the params must hash (as gymnax's own do)."""

    env_params: Any

    def train(self, key):
        return make_train(self.env_params)(key)


@pytest.mark.parametrize("env_id", sorted(JAX_ENVS))
def test_env_params_hash_and_jit_as_a_static_argument(env_id):
    """Every JAX environment's params are Python scalars, as gymnax's defaults are: a consumer may hold them in a
    static argument of ``jax.jit`` (memorax's PPO does). A batch of params (arrays, for vmap) stays traced."""
    env, params = make_jax(env_id)
    assert hash(params) == hash(make_jax(env_id)[1]) and params == make_jax(env_id)[1]

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
    episodes = np.asarray(metrics["episodes"])
    successes = np.asarray(metrics["successes"])
    last = slice(-len(episodes) // 5, None)
    rate = successes[last].sum() / episodes[last].sum()
    first = successes[:5].sum() / max(1, episodes[:5].sum())
    assert rate > 0.9, f"success over the last fifth {rate:.3f} (first updates {first:.3f})"
