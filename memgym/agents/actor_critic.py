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

:class:`ActorCriticTrainer` is a :class:`~memgym.agents.trainer.BaseTrainer`: it
writes the policy step (sample from the actor, record the critic's value and the
action's log-probability), the bootstrap value of truncated episodes and the
learning step; ``init``, ``run`` and ``train`` (all pure, so
``jax.jit(jax.vmap(trainer.train))`` trains many seeds and corridor lengths in one
compiled call) and the collectors are the base's.
"""

from __future__ import annotations

from typing import Any

import distrax
import jax
import jax.numpy as jnp
import optax

from memgym.agents.config import ActorCriticConfig
from memgym.agents.networks import ActorCritic, frozen_config
from memgym.agents.returns import advantages
from memgym.agents.spec import EnvSpec
from memgym.agents.trainer import BaseTrainer, TrainState, Trajectory, broadcast
from memgym.buffers.rollout import Rollout, replay_inputs
from gymnax.environments.environment import Environment

PyTree = Any


class ActorCriticTrainer(BaseTrainer):
    """A2C / PPO (see module docstring). ``state.learner`` is the optimiser state."""

    def __init__(self, config: ActorCriticConfig, env: Environment | EnvSpec, example_params: Any | None = None):
        super().__init__(config, env, example_params)
        self.network = ActorCritic(
            self.memory_name, frozen_config(self.memory_config), self.spec.num_actions, config.head_width,
            config.head_layers, self.spec.image_shape,
        )
        self.optimizer = optax.chain(
            optax.clip_by_global_norm(config.max_grad_norm), optax.adam(config.learning_rate, eps=1e-5)
        )

    # --- acting ---------------------------------------------------------------------------

    def policy(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array):
        """One stream, one step: ``(distrax.Categorical, value, carry)``."""
        logits, value, carry = self.network.apply(params, obs[None], jnp.asarray(start, bool)[None], carry)
        return distrax.Categorical(logits=logits[0]), value[0], carry

    def act(self, params: PyTree, carry: PyTree, obs: jax.Array, start: jax.Array, key: jax.Array):
        """Sample an action for one stream: ``(action, carry)`` (vmap for a batch)."""
        dist, _, carry = self.policy(params, carry, obs, start)
        return dist.sample(seed=key), carry

    def init_learner(self, params: PyTree) -> PyTree:
        return self.optimizer.init(params)

    def policy_step(self, params, carry, obs, start, keys):
        """Sample from the actor; record the critic's ``value`` and the action's ``log_prob``."""
        dist, value, carry = jax.vmap(self.policy, in_axes=(None, 0, 0, 0))(params, carry, obs, start)
        action = dist.sample(seed=keys[0])
        return action, carry, dict(value=value, log_prob=dist.log_prob(action))

    def bootstrap(self, params, carry, obs):
        """``final_value``: the critic's value of the observation a time limit cut the episode at."""
        if not self.config.bootstrap_truncated:  # treat a time limit like a terminal state
            return dict(final_value=jnp.zeros(obs.shape[0]))
        _, value, _ = jax.vmap(self.policy, in_axes=(None, 0, 0, 0))(params, carry, obs, jnp.zeros(obs.shape[0], bool))
        return dict(final_value=value)

    # --- learning -------------------------------------------------------------------------

    def replay(self, params: PyTree, obs: jax.Array, start: jax.Array, carry: PyTree):
        """Logits and values of ``[N, T]`` streams replayed from ``carry[N]``."""
        logits, value, _ = jax.vmap(self.network.apply, in_axes=(None, 0, 0, 0))(params, obs, start, carry)
        return logits, value

    def a2c_loss(self, params: PyTree, rollout: Rollout):
        config = self.config
        obs, start = replay_inputs(rollout)
        logits, values = self.replay(params, obs, start, rollout.carry)
        adv, targets = advantages(rollout, jax.lax.stop_gradient(values), config.gamma, config.gae_lambda)
        dist = distrax.Categorical(logits=logits[:, :-1])
        policy_loss = -jnp.mean(dist.log_prob(rollout.action) * adv)
        value_loss = 0.5 * jnp.mean((values[:, :-1] - targets) ** 2)
        entropy = jnp.mean(dist.entropy())
        loss = policy_loss + config.value_coef * value_loss - config.entropy_coef * entropy
        return loss, dict(policy_loss=policy_loss, value_loss=value_loss, entropy=entropy)

    def ppo_loss(self, params: PyTree, batch: dict[str, jax.Array]):
        config = self.config
        logits, values = self.replay(params, batch["obs"], batch["start"], batch["carry"])
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

    def rollout(self, state: TrainState, trajectory: Trajectory) -> Rollout:
        """The :class:`~memgym.buffers.rollout.Rollout` of a trajectory collected up to ``state``."""
        steps = trajectory.steps
        return Rollout(
            **{name: steps[name] for name in ("obs", "start", "action", "reward", "terminated", "truncated",
                                              "value", "log_prob", "final_value")},
            carry=trajectory.carry, next_obs=state.obs, next_start=state.start,
        )

    def learn(self, state: TrainState, trajectory: Trajectory) -> tuple[TrainState, dict[str, jax.Array]]:
        """One A2C gradient step, or PPO's epochs of minibatch steps, on the rollout."""
        rollout = self.rollout(state, trajectory)
        config = self.config
        if config.algorithm == "a2c":
            grads, losses = jax.grad(self.a2c_loss, has_aux=True)(state.params, rollout)
            params, opt_state = self._apply_gradients(state.params, state.learner, grads)
            return state.replace(params=params, learner=opt_state), losses

        # PPO: advantages once per rollout, from the values of the policy that acted.
        obs, start = replay_inputs(rollout)
        _, values = self.replay(state.params, obs, start, rollout.carry)
        adv, targets = advantages(rollout, values, config.gamma, config.gae_lambda)
        rows = dict(
            obs=rollout.obs, start=rollout.start, action=rollout.action, log_prob=rollout.log_prob,
            value=values[:, :-1], advantage=adv, target=targets,
        )
        if config.batching == "tape":
            rows["carry"] = rollout.carry
        else:
            segments = config.num_envs * config.rollout_length // config.segment_length
            rows = jax.tree.map(lambda x: x.reshape((segments, config.segment_length) + x.shape[2:]), rows)
            rows["carry"] = broadcast(self.initialize_carry(), segments)
        num_rows = rows["start"].shape[0]

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
            epoch, (state.params, state.learner), jax.random.split(key_epochs, config.epochs)
        )
        state = state.replace(params=params, learner=opt_state, key=key)
        return state, jax.tree.map(jnp.mean, losses)


def make_train(config: ActorCriticConfig, env: Environment | None = None):
    """``train(key, env_params) -> (TrainState, metrics)`` for ``config``.

    ``env`` defaults to the pure-JAX T-Maze; ``jax.jit(jax.vmap(train))`` over keys and
    env params (e.g. :func:`memgym.envs.tmaze_jax.tmaze_params` with different
    corridor lengths, stacked) trains every cell in one compiled call.
    """
    if env is None:
        from memgym.envs.tmaze_jax import TMazeJax

        env = TMazeJax()
    return ActorCriticTrainer(config, env).train
