"""A complete JAX-tier leaderboard submission, written from scratch (no memgym trainer).

Advantage actor-critic (A2C) with generalized advantage estimation over a GRU
from :mod:`memgym.memory`. ``num_envs`` T-Mazes step in lockstep for ``rollout``
steps (``lax.scan`` over a ``vmap`` of ``env.step``, which auto-resets); the
rollout is then replayed as one tape per environment from the memory carry it
started with (start flags reset the memory inside the tape), and one gradient step
follows. A second ``lax.scan`` repeats this until the budget is spent, so
``train`` is one pure function that the harness can ``jit`` and ``vmap``. Submit it with

    memgym leaderboard check examples.jax_agent:factory
    memgym leaderboard run --agent examples.jax_agent:factory --preset smoke

(run from the repository root so that ``examples`` is importable).
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from memgym import memory


class ActorCritic(nn.Module):
    """One stream: a tape ``obs[T, O]`` with start flags ``start[T]`` -> logits ``[T, A]``, values ``[T]``."""

    memory: nn.Module
    num_actions: int

    @nn.compact
    def __call__(self, obs, start, carry):
        y, carry = self.memory(obs, start, carry)
        logits = nn.Dense(self.num_actions)(nn.tanh(nn.Dense(64)(y)))
        value = nn.Dense(1)(nn.tanh(nn.Dense(64)(y)))[:, 0]
        return logits, value, carry


def gae(rewards, values, dones, last_value, gamma, lam):
    """Advantages and returns of a ``[T, N]`` rollout; no bootstrapping across an episode end."""

    def backward(carry, step):
        next_advantage, next_value = carry
        reward, value, done = step
        live = 1.0 - done
        delta = reward + gamma * next_value * live - value
        advantage = delta + gamma * lam * live * next_advantage
        return (advantage, value), advantage

    start = (jnp.zeros_like(last_value), last_value)
    _, advantages = jax.lax.scan(backward, start, (rewards, values, dones), reverse=True)
    return advantages, advantages + values


class A2CAgent:
    """The JAX-tier interface: ``num_envs``, ``train``, ``initialize_carry`` and ``act``."""

    def __init__(self, num_actions: int, *, num_envs=8, rollout=32, features=32, learning_rate=3e-3,
                 gamma=0.99, lam=0.95, entropy_coef=1e-2, value_coef=0.5):
        self.num_envs, self.rollout = num_envs, rollout
        self.gamma, self.lam, self.entropy_coef, self.value_coef = gamma, lam, entropy_coef, value_coef
        self.memory = memory.make("gru", features=features)
        self.net = ActorCritic(self.memory, num_actions)
        self.optimizer = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(learning_rate))

    def initialize_carry(self):
        return self.memory.initialize_carry()

    def act(self, params, carry, obs, start, key):
        """One stream, one step: a tape of length 1."""
        logits, _, carry = self.net.apply(params, obs[None], jnp.reshape(start, (1,)), carry)
        return jax.random.categorical(key, logits[0]), carry

    def _apply(self, params, obs, start, carry):
        """Many streams: ``obs[N, T, O]``, ``start[N, T]``, carries with a leading ``N``."""
        return jax.vmap(self.net.apply, in_axes=(None, 0, 0, 0))(params, obs, start, carry)

    def _loss(self, params, start_carry, tape, advantages, returns):
        obs, start, action = (jnp.swapaxes(x, 0, 1) for x in tape[:3])  # [T, N, ...] -> [N, T, ...]
        logits, values, _ = self._apply(params, obs, start, start_carry)
        log_probs = jax.nn.log_softmax(logits)
        chosen = jnp.take_along_axis(log_probs, action[..., None], -1)[..., 0]
        entropy = -(jnp.exp(log_probs) * log_probs).sum(-1).mean()
        policy_loss = -(chosen * jnp.swapaxes(advantages, 0, 1)).mean()
        value_loss = ((jnp.swapaxes(returns, 0, 1) - values) ** 2).mean()
        return policy_loss + self.value_coef * value_loss - self.entropy_coef * entropy

    def train(self, key, env, env_params, total_steps):
        """Train for ``total_steps`` environment steps; returns ``(params, final env state)``."""
        n, t = self.num_envs, self.rollout
        key_reset, key_init, key_run = jax.random.split(key, 3)
        obs, env_state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(key_reset, n), env_params)
        carry = jax.tree.map(lambda c: jnp.broadcast_to(c, (n,) + c.shape), self.initialize_carry())
        params = self.net.init(key_init, obs[0][None], jnp.ones(1, bool), self.initialize_carry())
        start = jnp.ones(n, bool)  # every environment starts an episode

        def step(state, key):
            params, obs, start, carry, env_state = state
            key_act, key_env = jax.random.split(key)
            logits, value, carry = self._apply(params, obs[:, None], start[:, None], carry)
            action = jax.random.categorical(key_act, logits[:, 0])
            next_obs, env_state, reward, terminated, truncated, _ = jax.vmap(env.step, in_axes=(0, 0, 0, None))(
                jax.random.split(key_env, n), env_state, action, env_params)
            done = terminated | truncated  # the next observation begins a new episode
            return (params, next_obs, done, carry, env_state), (obs, start, action, reward, done, value[:, 0])

        def update(state, key):
            params, opt_state, obs, start, carry, env_state = state
            (_, obs, start, end_carry, env_state), tape = jax.lax.scan(
                step, (params, obs, start, carry, env_state), jax.random.split(key, t))
            _, last_value, _ = self._apply(params, obs[:, None], start[:, None], end_carry)
            rewards, values, dones = tape[3], tape[5], tape[4].astype(jnp.float32)
            advantages, returns = gae(rewards, values, dones, last_value[:, 0], self.gamma, self.lam)
            grads = jax.grad(self._loss)(params, carry, tape, advantages, returns)
            changes, opt_state = self.optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, changes)
            return (params, opt_state, obs, start, end_carry, env_state), None

        updates = max(1, int(total_steps) // (n * t))
        initial = (params, self.optimizer.init(params), obs, start, carry, env_state)
        (params, *_, env_state), _ = jax.lax.scan(update, initial, jax.random.split(key_run, updates))
        return params, env_state  # the harness reads its episode counters from env_state


def factory(context) -> A2CAgent:
    """The entry the harness calls with a :class:`memgym.leaderboard.protocol.AgentContext`."""
    return A2CAgent(int(context.action_space.n))
