"""A gymnax 0.0.9 user's code on memgym's T-Maze: 0.0.9's five-value contract, and a PureJaxRL-style recurrent PPO.

gymnax 0.0.9's ``step`` returns ``(obs, state, reward, done, info)``, and PureJaxRL's and
memorax 1.0's training loops and wrappers are written for it. This module is such a user's
script: ``make_jax``, ``env.reset``/``env.step`` with five values, a ``LogWrapper`` of the
usual PureJaxRL shape (episode returns and lengths in ``info``) and a GRU actor-critic in
plain flax/optax, no memgym agent code. It runs where gymnax 0.0.9 is installed (CI's
gymnax 0.0.9 step); ``test_gymnax_user.py`` is the same for gymnax 1.0, and this PPO keeps
its layout and hyperparameters.
"""

from __future__ import annotations

import functools
from importlib.metadata import version
from typing import Any

import pytest

if version("gymnax") != "0.0.9":
    pytest.skip(f"needs gymnax 0.0.9 (five-value step); gymnax {version('gymnax')} is installed, and "
                "tests/envs/test_gymnax_user.py covers gymnax 1.0", allow_module_level=True)

import flax.linen as nn  # noqa: E402
import gymnax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import struct  # noqa: E402
from gymnax.environments import environment  # noqa: E402

from memgym.envs import make_jax  # noqa: E402


def test_the_tmaze_follows_gymnax_009s_contract():
    env, params = make_jax("memgym/TMaze-v0", corridor_length=7)
    assert isinstance(env, environment.Environment) and isinstance(params, environment.EnvParams)
    assert int(params.corridor_length) == 7
    with pytest.raises(ValueError, match="memgym/TMaze-v0"):  # 0.0.9's make knows only gymnax's own ids
        gymnax.make("memgym/TMaze-v0")
    key = jax.random.key(0)
    obs, state = env.reset(key)
    assert isinstance(state, environment.EnvState) and int(state.time) == 0 and obs.shape == (16,)
    out = env.step(key, state, env.action_space(params).sample(key), params)
    assert len(out) == 5 and not bool(out[3]) and int(out[1].time) == 1 and "success" in out[4]
    assert len(env.step_env(key, state, 0, params)) == 5

    short = params.replace(max_steps_in_episode=3)  # a timeout: done, truncated, auto-reset
    obs, state = env.reset(key, short)
    for t in range(3):
        obs, state, reward, done, info = env.step(jax.random.fold_in(key, t), state, 1, short)
        assert bool(done) == (t == 2) and bool(info["truncated"]) == (t == 2) and not bool(info["terminated"])
    assert int(state.time) == 0 and float(obs[:2].sum()) == 1.0  # a fresh episode, its cue showing
    assert float(info["final_observation"][:2].sum()) == 0.0 and not bool(info["success"])

    obs, state = env.reset(key, params)  # the right turn at the junction: done, terminated, a success
    for t in range(6):
        obs, state, reward, done, info = env.step(jax.random.fold_in(key, t), state, 0, params)
    obs, state, reward, done, info = env.step(key, state, 2 + int(state.goal), params)
    assert bool(done) and bool(info["terminated"]) and not bool(info["truncated"]) and bool(info["success"])
    assert float(reward) == 4.0 and int(state.time) == 0


@struct.dataclass
class LogEnvState:
    env_state: Any
    episode_returns: jax.Array
    episode_lengths: jax.Array
    returned_episode_returns: jax.Array
    returned_episode_lengths: jax.Array
    timestep: jax.Array


class LogWrapper:
    """Running episode return and length; ``info`` gets the last finished episode's (PureJaxRL's shape)."""

    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self, key, params=None):
        obs, env_state = self._env.reset(key, params)
        zero_f, zero_i = jnp.zeros((), jnp.float32), jnp.zeros((), jnp.int32)
        return obs, LogEnvState(env_state, zero_f, zero_i, zero_f, zero_i, zero_i)

    def step(self, key, state, action, params=None):
        obs, env_state, reward, done, info = self._env.step(key, state.env_state, action, params)
        episode_return = state.episode_returns + reward
        episode_length = state.episode_lengths + 1
        state = LogEnvState(
            env_state=env_state,
            episode_returns=jnp.where(done, 0.0, episode_return),
            episode_lengths=jnp.where(done, 0, episode_length),
            returned_episode_returns=jnp.where(done, episode_return, state.returned_episode_returns),
            returned_episode_lengths=jnp.where(done, episode_length, state.returned_episode_lengths),
            timestep=state.timestep + 1,
        )
        info = dict(info, returned_episode_returns=state.returned_episode_returns,
                    returned_episode_lengths=state.returned_episode_lengths, returned_episode=done,
                    timestep=state.timestep)
        return obs, state, reward, done, info


class ScannedGRU(nn.Module):
    """A GRU over time that starts from zeros where an episode starts."""

    @functools.partial(nn.scan, variable_broadcast="params", in_axes=0, out_axes=0, split_rngs={"params": False})
    @nn.compact
    def __call__(self, carry, inputs):
        obs, start = inputs
        carry = jnp.where(start[:, None], jnp.zeros_like(carry), carry)
        return nn.GRUCell(carry.shape[-1])(carry, obs)


class ActorCritic(nn.Module):
    """``(carry, logits, value)``: a GRU between a dense embedding and the policy and value heads."""

    num_actions: int

    @nn.compact
    def __call__(self, carry, obs, start):
        x = nn.relu(nn.Dense(64)(obs))
        carry, x = ScannedGRU()(carry, (x, start))
        logits = nn.Dense(self.num_actions)(nn.relu(nn.Dense(64)(x)))
        value = nn.Dense(1)(nn.relu(nn.Dense(64)(x)))[..., 0]
        return carry, logits, value


def log_prob(logits, action):
    return jnp.take_along_axis(jax.nn.log_softmax(logits), action[..., None], axis=-1)[..., 0]


def entropy(logits):
    return -(jax.nn.softmax(logits) * jax.nn.log_softmax(logits)).sum(-1)


def make_train(num_envs=16, num_steps=32, total_steps=200_704, epochs=4, minibatches=4, lr=3e-3,
               gamma=0.99, lam=0.95, clip=0.2, ent_coef=0.01, hidden=64, corridor_length=4):
    env, env_params = make_jax("memgym/TMaze-v0", corridor_length=corridor_length)
    env_params = env_params.replace(max_steps_in_episode=4 * corridor_length)
    env = LogWrapper(env)
    network = ActorCritic(env.action_space(env_params).n)
    updates = total_steps // (num_envs * num_steps)
    schedule = optax.linear_schedule(lr, 0.0, updates * epochs * minibatches)
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
            new_carry, logits, value = network.apply(params, carry, obs[None], start[None])
            action = jax.random.categorical(key_act, logits[0])
            obs_next, env_state, reward, done, info = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key_env, num_envs), env_state, action, env_params
            )
            step = dict(obs=obs, start=start, action=action, value=value[0], log_prob=log_prob(logits[0], action),
                        reward=reward, done=done, success=info["success"],
                        returned=info["returned_episode"], episode_return=info["returned_episode_returns"],
                        episode_length=info["returned_episode_lengths"])
            return (params, env_state, obs_next, done, new_carry, key), step

        def update(runner, _):
            params, opt_state, env_state, obs, start, carry, key = runner
            carry_in = carry
            (_, env_state, obs, start, carry, key), traj = jax.lax.scan(
                env_step, (params, env_state, obs, start, carry, key), None, num_steps
            )
            _, _, last_value = network.apply(params, carry, obs[None], start[None])

            def gae_step(next_, step):  # gymnax 0.0.9 reports done alone: every end is treated as terminal
                advantage, next_value = next_
                delta = step["reward"] + gamma * next_value * (1 - step["done"]) - step["value"]
                advantage = delta + gamma * lam * (1 - step["done"]) * advantage
                return (advantage, step["value"]), advantage

            _, advantages = jax.lax.scan(gae_step, (jnp.zeros(num_envs), last_value[0]), traj, reverse=True)
            targets = advantages + traj["value"]

            def loss_fn(params, carry, batch, advantages, targets):
                _, logits, value = network.apply(params, carry, batch["obs"], batch["start"])
                ratio = jnp.exp(log_prob(logits, batch["action"]) - batch["log_prob"])
                adv = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                actor = -jnp.minimum(ratio * adv, jnp.clip(ratio, 1 - clip, 1 + clip) * adv).mean()
                critic = 0.5 * ((value - targets) ** 2).mean()
                return actor + 0.5 * critic - ent_coef * entropy(logits).mean()

            def epoch(state, key):
                order = jax.random.permutation(key, num_envs).reshape(minibatches, -1)

                def minibatch(state, envs):
                    params, opt_state = state
                    pick = lambda x: x[:, envs]  # noqa: E731  (time-major: minibatches of whole env streams)
                    grads = jax.grad(loss_fn)(params, carry_in[envs], jax.tree.map(pick, traj), pick(advantages),
                                              pick(targets))
                    changes, opt_state = tx.update(grads, opt_state, params)
                    return (optax.apply_updates(params, changes), opt_state), None

                return jax.lax.scan(minibatch, state, order)[0], None

            key, key_epochs = jax.random.split(key)
            (params, opt_state), _ = jax.lax.scan(epoch, (params, opt_state), jax.random.split(key_epochs, epochs))
            ended = traj["returned"]
            metrics = dict(episodes=ended.sum(), successes=(traj["success"] & ended).sum(),
                           return_sum=jnp.where(ended, traj["episode_return"], 0.0).sum(),
                           length_sum=jnp.where(ended, traj["episode_length"], 0).sum())
            return (params, opt_state, env_state, obs, start, carry, key), metrics

        runner = (params, opt_state, env_state, obs, start, carry, key)
        _, metrics = jax.lax.scan(update, runner, None, updates)
        return metrics

    return train


@pytest.mark.slow
def test_purejaxrl_style_recurrent_ppo_learns_the_tmaze_on_gymnax_009():
    """Success well above chance (0.5) at a short corridor, and the LogWrapper's returns and lengths agree."""
    metrics = jax.jit(make_train())(jax.random.key(0))
    metrics = {name: np.asarray(value) for name, value in metrics.items()}
    last = slice(-len(metrics["episodes"]) // 5, None)
    episodes = metrics["episodes"][last].sum()
    rate = metrics["successes"][last].sum() / episodes
    first = metrics["successes"][:5].sum() / max(1, metrics["episodes"][:5].sum())
    assert rate > 0.9, f"success over the last fifth {rate:.3f} (first updates {first:.3f})"
    # The LogWrapper's totals against the env's success flags: an episode of length n returns -0.1 (n - 1) plus
    # 4 for the right turn, -1 for the wrong one, -0.1 for a timeout; the shortest takes 3 steps up and the turn.
    episodes, successes = metrics["episodes"].sum(), metrics["successes"].sum()
    failed_ends = metrics["return_sum"].sum() + 0.1 * (metrics["length_sum"].sum() - episodes) - 4.0 * successes
    assert -(episodes - successes) - 1e-3 * episodes <= failed_ends <= -0.1 * (episodes - successes) + 1e-3 * episodes
    mean_length = metrics["length_sum"][last].sum() / metrics["episodes"][last].sum()
    assert 4.0 <= mean_length < 5.0, mean_length
