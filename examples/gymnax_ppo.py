"""A gymnax user's recurrent PPO on memgym's T-Maze, written the PureJaxRL way, held the memorax way.

Everything here uses only gymnax's API (``make_jax``/``gymnax.make``, ``env.reset``/``env.step``,
``default_params``, ``.replace``, gymnax spaces and ``LogWrapper``) and plain flax/optax/distrax, no memgym agent
code: a GRU over time that resets where an episode starts, PPO with GAE over whole environment streams, the
whole run one ``jax.lax.scan`` inside ``jit``. The algorithm is a frozen dataclass holding the env params and
passed to ``jax.jit`` as a static argument, as memorax holds its PPO: memgym's params hash, as gymnax's do.

    python examples/gymnax_ppo.py --steps 200704      # about a minute on a CPU: success 0.5 -> 1.0 at L = 4

``tests/envs/test_gymnax_user.py`` trains it to a success rate above 0.9; ``tests/test_examples.py`` runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from typing import Any

import distrax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from gymnax.wrappers import LogWrapper

from memgym.envs import make_jax


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
    total_steps: int = 200_704

    def train(self, key):
        return make_train(self.env_params, total_steps=self.total_steps)(key)


def success_rates(metrics: dict) -> tuple[float, float]:
    """Success over the first five updates and over the last fifth of the run."""
    episodes, successes = np.asarray(metrics["episodes"]), np.asarray(metrics["successes"])
    last = slice(-max(1, len(episodes) // 5), None)
    return (successes[:5].sum() / max(1, episodes[:5].sum()), successes[last].sum() / max(1, episodes[last].sum()))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corridor-length", type=int, default=4)
    parser.add_argument("--steps", type=int, default=200_704, help="environment steps (16 envs × 32 per update)")
    args = parser.parse_args(argv)
    env, env_params = make_jax("memgym/TMaze-v0", corridor_length=args.corridor_length)
    ppo = StaticPPO(env_params.replace(max_steps_in_episode=4 * args.corridor_length), total_steps=args.steps)
    first, last = success_rates(jax.jit(StaticPPO.train, static_argnums=0)(ppo, jax.random.key(0)))
    print(f"T-Maze L={args.corridor_length}: success {first:.2f} in the first updates, {last:.2f} in the last fifth")


if __name__ == "__main__":
    main()
