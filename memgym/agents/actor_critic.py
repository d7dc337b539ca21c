"""A2C and recurrent PPO over any memory model, the whole run inside ``jit``.

* A2C (thesis §2.2.1, §5.1.2): one gradient step per rollout of
  ``num_envs × rollout_length`` steps; the loss is policy gradient with GAE(λ)
  advantages (computed with the advantage monoid, monoid paper App. D.1) +
  ``value_coef`` × squared TD(λ) error − ``entropy_coef`` × entropy.
* PPO (thesis §2.2.2; Schulman et al. 2017): ``epochs`` passes of clipped-ratio
  updates over ``num_minibatches`` minibatches per rollout, with value clipping.
  Minibatches are either *tapes* — whole environment streams replayed from the
  carries stored at the rollout start, full BPTT (monoid paper §5, TBB) — or
  *segments* of ``segment_length`` steps replayed from a fresh carry, truncated
  BPTT (§4, SBB).

The memory carry persists across rollouts: each environment's carry at the rollout
start is stored in the :class:`~memgym.buffers.rollout.Rollout` and the learner
replays the rollout from it (plus the next observation, for the bootstrap value).

``ActorCriticTrainer(config, env)`` gives ``init(key, env_params)``,
``run(state, env_params, num_updates)`` and ``train(key, env_params)``; all are
pure, so ``jax.jit(jax.vmap(trainer.train))`` trains many seeds and corridor
lengths (a traced field of the T-Maze params) in one compiled call.
"""

from __future__ import annotations

from typing import Any

import distrax
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from memgym.agents.config import ActorCriticConfig, resolve_memory
from memgym.agents.metrics import episode_stats
from memgym.agents.networks import ActorCritic, frozen_config
from memgym.buffers.rollout import Rollout, advantages, replay_inputs
from memgym.envs.functional import FunctionalEnv

PyTree = Any


@struct.dataclass
class RunnerState:
    """Everything a training run carries from one update to the next (leaves of env fields are ``[E, ...]``)."""

    params: PyTree
    opt_state: PyTree
    env_state: PyTree
    obs: jax.Array
    begin: jax.Array
    carry: PyTree
    key: jax.Array
    update: jax.Array


class ActorCriticTrainer:
    """A2C / PPO on a :class:`~memgym.envs.functional.FunctionalEnv` (see module docstring)."""

    def __init__(self, config: ActorCriticConfig, env: FunctionalEnv, example_params: Any | None = None):
        self.config = config
        self.env = env
        params = env.default_params() if example_params is None else example_params
        space = env.observation_space(params)
        self.obs_size, self.obs_dtype = int(space.shape[0]), np.dtype(space.dtype)
        self.image_shape = getattr(env, "image_shape", None)  # set by host loops for image observations
        self.num_actions = int(env.action_space(params).n)
        name, memory_config = resolve_memory(config.memory, config.memory_config)
        self.network = ActorCritic(
            name, frozen_config(memory_config), self.num_actions, config.head_width, config.head_layers,
            self.image_shape,
        )
        self._run = jax.jit(self._scan_updates, static_argnums=2)
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate, eps=1e-5)
        )

    # --- acting ---------------------------------------------------------------------------

    def initialize_carry(self) -> PyTree:
        """The memory carry of one stream before its first observation."""
        return self.network.initialize_carry()

    def init_params(self, key: jax.Array) -> PyTree:
        obs = jnp.zeros((1, self.obs_size), self.obs_dtype)
        return self.network.init(key, obs, jnp.ones(1, bool), self.initialize_carry())

    def policy(self, params: PyTree, carry: PyTree, obs: jax.Array, begin: jax.Array):
        """One stream, one step: ``(distrax.Categorical, value, carry)``."""
        logits, value, carry = self.network.apply(params, obs[None], jnp.asarray(begin, bool)[None], carry)
        return distrax.Categorical(logits=logits[0]), value[0], carry

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, begin: jax.Array, key: jax.Array):
        """Sample an action for one stream: ``(action, carry)`` (vmap for a batch)."""
        dist, _, carry = self.policy(params, carry, obs, begin)
        return dist.sample(seed=key), carry

    # --- training -------------------------------------------------------------------------

    def init(self, key: jax.Array, env_params: Any) -> RunnerState:
        num_envs = self.config.num_envs
        key, key_params, key_reset = jax.random.split(key, 3)
        params = self.init_params(key_params)
        obs, env_state = jax.vmap(self.env.reset, in_axes=(0, None))(jax.random.split(key_reset, num_envs), env_params)
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (num_envs,) + x.shape), self.initialize_carry())
        return RunnerState(
            params=params,
            opt_state=self.optimizer.init(params),
            env_state=env_state,
            obs=obs,
            begin=jnp.ones(num_envs, bool),
            carry=carry,
            key=key,
            update=jnp.zeros((), jnp.int32),
        )

    def collect(self, state: RunnerState, env_params: Any) -> tuple[RunnerState, Rollout, dict[str, jax.Array]]:
        """``rollout_length`` steps of every environment (a ``lax.scan``)."""
        policy = jax.vmap(self.policy, in_axes=(None, 0, 0, 0))
        step = jax.vmap(self.env.step, in_axes=(0, 0, 0, None))
        num_envs = self.config.num_envs

        def one_step(runner, _):
            env_state, obs, begin, carry, key = runner
            key, key_act, key_env = jax.random.split(key, 3)
            dist, value, next_carry = policy(state.params, carry, obs, begin)
            action = dist.sample(seed=key_act)
            next_obs, env_state, reward, terminated, truncated, info = step(
                jax.random.split(key_env, num_envs), env_state, action, env_params
            )
            if self.config.bootstrap_truncated:
                _, cut_value, _ = policy(state.params, next_carry, info["final_obs"], jnp.zeros(num_envs, bool))
                final_value = jnp.where(truncated & ~terminated, cut_value, 0.0)
            else:  # treat a time limit like a terminal state
                final_value = jnp.zeros(num_envs)
            transition = dict(
                obs=obs, begin=begin, action=action, reward=reward, terminated=terminated, truncated=truncated,
                value=value, log_prob=dist.log_prob(action), final_value=final_value,
            )
            return (env_state, next_obs, terminated | truncated, next_carry, key), (transition, episode_stats(info))

        start = (state.env_state, state.obs, state.begin, state.carry, state.key)
        (env_state, obs, begin, carry, key), (steps, stats) = jax.lax.scan(
            one_step, start, None, self.config.rollout_length
        )
        steps = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), steps)  # [T, E] -> [E, T]
        rollout = Rollout(**steps, carry=state.carry, next_obs=obs, next_begin=begin)
        state = state.replace(env_state=env_state, obs=obs, begin=begin, carry=carry, key=key)
        return state, rollout, jax.tree.map(jnp.sum, stats)

    def replay(self, params: PyTree, obs: jax.Array, begin: jax.Array, carry: PyTree):
        """Logits and values of ``[N, T]`` streams replayed from ``carry[N]``."""
        logits, value, _ = jax.vmap(self.network.apply, in_axes=(None, 0, 0, 0))(params, obs, begin, carry)
        return logits, value

    def a2c_loss(self, params: PyTree, rollout: Rollout):
        config = self.config
        obs, begin = replay_inputs(rollout)
        logits, values = self.replay(params, obs, begin, rollout.carry)
        adv, targets = advantages(rollout, jax.lax.stop_gradient(values), config.gamma, config.gae_lambda)
        dist = distrax.Categorical(logits=logits[:, :-1])
        policy_loss = -jnp.mean(dist.log_prob(rollout.action) * adv)
        value_loss = 0.5 * jnp.mean((values[:, :-1] - targets) ** 2)
        entropy = jnp.mean(dist.entropy())
        loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return loss, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)

    def ppo_loss(self, params: PyTree, batch: dict[str, jax.Array]):
        config = self.config
        logits, values = self.replay(params, batch["obs"], batch["begin"], batch["carry"])
        dist = distrax.Categorical(logits=logits)
        log_prob = dist.log_prob(batch["action"])
        adv = batch["advantage"]
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        ratio = jnp.exp(log_prob - batch["log_prob"])
        clipped = jnp.clip(ratio, 1.0 - config.clip_eps, 1.0 + config.clip_eps)
        policy_loss = -jnp.mean(jnp.minimum(ratio * adv, clipped * adv))
        values_clipped = batch["value"] + jnp.clip(values - batch["value"], -config.value_clip, config.value_clip)
        value_loss = 0.5 * jnp.mean(
            jnp.maximum((values - batch["target"]) ** 2, (values_clipped - batch["target"]) ** 2)
        )
        entropy = jnp.mean(dist.entropy())
        loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return loss, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)

    def _apply_gradients(self, params, opt_state, grads):
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    def learn(self, state: RunnerState, rollout: Rollout) -> tuple[RunnerState, dict[str, jax.Array]]:
        config = self.config
        if config.algorithm == "a2c":
            grads, losses = jax.grad(self.a2c_loss, has_aux=True)(state.params, rollout)
            params, opt_state = self._apply_gradients(state.params, state.opt_state, grads)
            return state.replace(params=params, opt_state=opt_state), losses

        # PPO: advantages once per rollout, from the values of the policy that acted.
        obs, begin = replay_inputs(rollout)
        _, values = self.replay(state.params, obs, begin, rollout.carry)
        adv, targets = advantages(rollout, values, config.gamma, config.gae_lambda)
        rows = dict(
            obs=rollout.obs, begin=rollout.begin, action=rollout.action, log_prob=rollout.log_prob,
            value=values[:, :-1], advantage=adv, target=targets,
        )
        if config.batching == "tape":
            rows["carry"] = rollout.carry
        else:
            segments = config.num_envs * config.rollout_length // config.segment_length
            rows = jax.tree.map(lambda x: x.reshape((segments, config.segment_length) + x.shape[2:]), rows)
            rows["carry"] = jax.tree.map(
                lambda x: jnp.broadcast_to(x, (segments,) + x.shape), self.initialize_carry()
            )
        num_rows = rows["begin"].shape[0]

        def epoch(carry, key):
            params, opt_state = carry
            order = jax.random.permutation(key, num_rows).reshape(config.num_minibatches, -1)

            def minibatch(carry, index):
                params, opt_state = carry
                batch = jax.tree.map(lambda x: x[index], rows)
                grads, losses = jax.grad(self.ppo_loss, has_aux=True)(params, batch)
                return self._apply_gradients(params, opt_state, grads), losses

            return jax.lax.scan(minibatch, (params, opt_state), order)

        key, key_epochs = jax.random.split(state.key)
        (params, opt_state), losses = jax.lax.scan(
            epoch, (state.params, state.opt_state), jax.random.split(key_epochs, config.epochs)
        )
        state = state.replace(params=params, opt_state=opt_state, key=key)
        return state, jax.tree.map(jnp.mean, losses)

    def update(self, state: RunnerState, env_params: Any) -> tuple[RunnerState, dict[str, jax.Array]]:
        """One rollout and its learning step; metrics of this update."""
        state, rollout, stats = self.collect(state, env_params)
        state, losses = self.learn(state, rollout)
        state = state.replace(update=state.update + 1)
        env_steps = state.update * self.config.steps_per_update
        return state, dict(stats, **losses, env_steps=env_steps)

    def run(self, state: RunnerState, env_params: Any, num_updates: int):
        """``num_updates`` updates (a ``lax.scan``); metrics stacked ``[num_updates]``. Jitted."""
        return self._run(state, env_params, num_updates)

    def _scan_updates(self, state: RunnerState, env_params: Any, num_updates: int):
        return jax.lax.scan(lambda s, _: self.update(s, env_params), state, None, num_updates)

    def train(self, key: jax.Array, env_params: Any) -> tuple[RunnerState, dict[str, jax.Array]]:
        """The whole run, ``config.num_updates`` updates: pure, so it jits and vmaps."""
        return self._scan_updates(self.init(key, env_params), env_params, self.config.num_updates)


def make_train(config: ActorCriticConfig, env: FunctionalEnv | None = None):
    """``train(key, env_params) -> (RunnerState, metrics)`` for ``config`` (DESIGN.md, Agents).

    ``env`` defaults to the pure-JAX T-Maze; ``jax.jit(jax.vmap(train))`` over keys and
    env params (e.g. :func:`memgym.envs.tmaze_jax.tmaze_params` with different
    corridor lengths, stacked) trains every cell in one compiled call.
    """
    if env is None:
        from memgym.envs.tmaze_jax import TMazeJax

        env = TMazeJax()
    return ActorCriticTrainer(config, env).train
